// A fully pinned requirements file (what `pip-compile` or `uv export --format requirements-txt`
// write) as a pipeline's lock: every requirement `name==version`, markers evaluated for the site's
// platform, hashes and comments ignored. Its package sources (`--index-url`, `--extra-index-url`,
// `--find-links`, as `pip-compile` and `uv export` keep them) go into the site build as they are;
// anything else that is not a pin is refused with its line, so an environment built from it is as
// reproducible as one built from a uv.lock.
import { evaluateMarker, type MarkerEnvironment } from './markers.ts';
import { LockfileError, normaliseName, type Pin } from './uv-lock.ts';

/** The options of a requirements file that name where packages come from (pip's own spellings). */
const SOURCE_OPTION = /^(--index-url|-i|--extra-index-url|--find-links|-f)(?:\s*=\s*|\s+)(\S+)$/;
const SOURCE_URL = /^(https?|file):\/\/[^\s'"\\]+$/;
const LONG: Record<string, string> = { '-i': '--index-url', '-f': '--find-links' };

/** One requirements line without its comment, hashes and continuation. */
function requirementLines(text: string): string[] {
  // Backslash continuations (`--hash` lines) join their requirement.
  return text
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/)
    .map((raw) =>
      raw
        .replace(/(^|\s)#.*$/, '')
        .replace(/\s--hash=\S+/g, '')
        .trim(),
    );
}

/**
 * The package sources a requirements file names, as pip options in its order (`--extra-index-url
 * https://data.pyg.org/whl/torch-2.8.0+cu126.html`): the site build passes them to pip. A file
 * cannot say which package each serves, so they apply to the whole install, as they do for pip.
 */
export function requirementsSources(text: string, file: string): string[] {
  const out: string[] = [];
  requirementLines(text).forEach((line, i) => {
    const m = SOURCE_OPTION.exec(line);
    if (!m) return;
    if (!SOURCE_URL.test(m[2]!))
      throw new LockfileError(`${file}:${i + 1}: ${line}: expected an http(s):// or file:// URL for ${m[1]}`);
    out.push(`${LONG[m[1]!] ?? m[1]} ${m[2]}`);
  });
  return out;
}

const PIN = /^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9_,.-]+\])?\s*==\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)$/;

/** The pins of a requirements text that apply on `env`, by normalised name. */
export function requirementsPins(text: string, env: MarkerEnvironment, file: string): Pin[] {
  const pins = new Map<string, Pin>();
  requirementLines(text).forEach((line, i) => {
    if (line === '' || SOURCE_OPTION.test(line)) return;
    const where = `${file}:${i + 1}`;
    if (line.startsWith('-'))
      throw new LockfileError(
        `${where}: ${line}: options other than --index-url, --extra-index-url and --find-links are not read; list every package as name==version`,
      );
    const [requirement, marker] = line.split(';', 2).map((s) => s.trim()) as [string, string | undefined];
    const m = PIN.exec(requirement);
    if (!m)
      throw new LockfileError(
        `${where}: ${requirement} is not pinned: expected name==version (a lock pins every package)`,
      );
    if (marker !== undefined && marker !== '' && !evaluateMarker(marker, env)) return;
    const name = normaliseName(m[1]!);
    const seen = pins.get(name);
    if (seen && seen.version !== m[3])
      throw new LockfileError(`${where}: ${name} is pinned twice (${seen.version} and ${m[3]})`);
    pins.set(name, { name, version: m[3]! });
  });
  return [...pins.values()];
}
