// Conda MatchSpec strings, parsed and normalised so that the same package always renders the same
// line (and a change renders as a one-line diff).

export interface MatchSpec {
  channel?: string;
  name: string;
  /** Version constraint as written by conda: `2.8`, `==2.8.0`, `>=2.5,<2.9`, `2.8.*`. */
  version?: string;
  build?: string;
}

const NAME = /^[a-z0-9_][a-z0-9_.-]*$/;
const VERSION = /^[0-9A-Za-z.*+!_<>=,|~-]+$/;
const BUILD = /^[0-9A-Za-z.*_+-]+$/;

export class MatchSpecError extends Error {}

/** Parses `[channel::]name[ version[ build]]` or `name=version=build` / `name>=1,<2`. */
export function parseMatchSpec(text: string): MatchSpec {
  const raw = text.trim();
  let rest = raw;
  let channel: string | undefined;
  const cc = rest.indexOf('::');
  if (cc >= 0) {
    channel = rest.slice(0, cc);
    rest = rest.slice(cc + 2);
    if (!/^[A-Za-z0-9_.-]+$/.test(channel)) throw new MatchSpecError(`"${raw}": channel "${channel}" is not a channel name`);
  }
  let name: string;
  let version: string | undefined;
  let build: string | undefined;
  if (/\s/.test(rest)) {
    const parts = rest.split(/\s+/);
    if (parts.length > 3) throw new MatchSpecError(`"${raw}": expected "name [version [build]]"`);
    [name, version, build] = parts as [string, string?, string?];
  } else {
    const m = /^([^=<>!~,|]+)(.*)$/.exec(rest);
    if (!m) throw new MatchSpecError(`"${raw}": no package name`);
    name = m[1]!;
    const tail = m[2]!;
    if (tail.startsWith('=') && !tail.startsWith('==')) {
      const [v, b, extra] = tail.slice(1).split('=');
      if (extra !== undefined) throw new MatchSpecError(`"${raw}": expected name=version=build`);
      version = v;
      build = b;
    } else if (tail) {
      version = tail;
    }
  }
  name = name.toLowerCase();
  if (!NAME.test(name)) throw new MatchSpecError(`"${raw}": "${name}" is not a conda package name`);
  if (version !== undefined && !VERSION.test(version)) throw new MatchSpecError(`"${raw}": "${version}" is not a version constraint`);
  if (build !== undefined && !BUILD.test(build)) throw new MatchSpecError(`"${raw}": "${build}" is not a build string`);
  return { ...(channel ? { channel } : {}), name, ...(version ? { version } : {}), ...(build ? { build } : {}) };
}

/** The canonical text: `channel::name=version=build`, `name>=1,<2`, `name`. */
export function formatMatchSpec(s: MatchSpec): string {
  const head = `${s.channel ? `${s.channel}::` : ''}${s.name}`;
  if (!s.version) return head;
  const op = /^[<>=!~]/.test(s.version) ? '' : '=';
  return `${head}${op}${s.version}${s.build ? `=${s.build}` : ''}`;
}

export function normaliseMatchSpec(text: string): string {
  return formatMatchSpec(parseMatchSpec(text));
}

/** The leading `major.minor` of a constraint like `=24.12`, `==26.10.0`, `24.12.*`, `>=25.02`. */
export function versionOf(s: MatchSpec): { major: number; minor: number } | undefined {
  const m = /(\d+)\.(\d+)/.exec(s.version ?? '');
  return m ? { major: Number(m[1]), minor: Number(m[2]) } : undefined;
}
