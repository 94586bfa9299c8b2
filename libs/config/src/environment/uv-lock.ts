// The pipeline's pinned runtime dependencies, read from python/uv.lock (the one place they are
// declared): the packages the default pipeline's project needs at run time (not its dev group), followed
// through uv.lock's dependency graph with each edge's marker evaluated for the target machine —
// the list `uv export --no-dev --no-emit-project` prints, for one platform.
import { evaluateMarker, type MarkerEnvironment } from './markers.ts';
import { parseToml, type TomlTable, type TomlValue } from './toml.ts';
import { DEFAULT_LOCK_PROJECT } from '../pipeline/default-package.ts';

/** A pinned package: PEP 503 normalised name and exact version. */
export interface Pin {
  name: string;
  version: string;
  /**
   * A package the lock takes from an index other than its default one (a second index, e.g. the
   * PyG wheels of torch-scatter): the direct reference of its file for the target machine,
   * `<url>#sha256=<hash>`, so the site's pip fetches exactly it from exactly there.
   */
  url?: string;
}

/** The default index of a uv.lock (where a package without `[[tool.uv.index]]` comes from). */
export const DEFAULT_REGISTRY = 'https://pypi.org/simple';

export class LockfileError extends Error {}

/** PEP 503 normalised project name (`Torch_Geometric` -> `torch-geometric`). */
export function normaliseName(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/[-_.]+/g, '-');
}

interface LockDependency {
  name: string;
  version?: string;
  marker?: string;
  extra: string[];
}

interface LockFile {
  url: string;
  hash?: string;
}

interface LockPackage {
  name: string;
  version: string;
  dependencies: LockDependency[];
  optional: Record<string, LockDependency[]>;
  /** `source = { registry = … }`; absent for a git, path or URL source. */
  registry?: string;
  wheels: LockFile[];
  sdist?: LockFile;
}

const str = (v: TomlValue | undefined): string | undefined => (typeof v === 'string' ? v : undefined);
const table = (v: TomlValue | undefined): TomlTable =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? v : {};
const list = (v: TomlValue | undefined): TomlValue[] => (Array.isArray(v) ? v : []);

function dependencies(v: TomlValue | undefined, file: string, owner: string): LockDependency[] {
  return list(v).map((d) => {
    const t = table(d);
    const name = str(t['name']);
    if (!name) throw new LockfileError(`${file}: a dependency of ${owner} has no name`);
    const version = str(t['version']);
    const marker = str(t['marker']);
    return {
      name: normaliseName(name),
      ...(version ? { version } : {}),
      ...(marker ? { marker } : {}),
      extra: list(t['extra']).filter((e): e is string => typeof e === 'string'),
    };
  });
}

function lockPackages(text: string, file: string): LockPackage[] {
  const doc = parseToml(text, file);
  const packages = list(doc['package']).map(table);
  if (packages.length === 0) throw new LockfileError(`${file}: no [[package]] entries: not a uv.lock`);
  return packages.map((p) => {
    const name = str(p['name']);
    const version = str(p['version']);
    if (!name || !version) throw new LockfileError(`${file}: a [[package]] without name or version`);
    const optional = Object.fromEntries(
      Object.entries(table(p['optional-dependencies'])).map(([extra, deps]) => [
        extra,
        dependencies(deps, file, `${name}[${extra}]`),
      ]),
    );
    const fileOf = (v: TomlValue | undefined): LockFile | undefined => {
      const url = str(table(v)['url']);
      const hash = str(table(v)['hash']);
      return url ? { url, ...(hash ? { hash } : {}) } : undefined;
    };
    const registry = str(table(p['source'])['registry']);
    const sdist = fileOf(p['sdist']);
    return {
      name: normaliseName(name),
      version,
      dependencies: dependencies(p['dependencies'], file, name),
      optional,
      ...(registry ? { registry: registry.replace(/\/+$/, '') } : {}),
      wheels: list(p['wheels']).flatMap((w) => fileOf(w) ?? []),
      ...(sdist ? { sdist } : {}),
    };
  });
}

/**
 * Whether a wheel's file name (`name-version[-build]-python-abi-platform.whl`) installs on the
 * machine `env` describes (CPython on Linux x86_64): its rank, lower is better, or undefined.
 */
export function wheelRank(fileName: string, env: MarkerEnvironment): number | undefined {
  const parts = fileName.replace(/\.whl$/, '').split('-');
  if (parts.length < 5) return undefined;
  const [python, abi, platform] = parts.slice(-3) as [string, string, string];
  const cp = `cp${env.python_version.replace('.', '')}`;
  const major = env.python_version.split('.')[0]!;
  const pythons = python.split('.');
  const abis = abi.split('.');
  const platforms = platform.split('.');
  const linux = platforms.some((t) => /^(manylinux\w*|linux)_x86_64$/.test(t));
  const anyPlatform = platforms.includes('any');
  if (!linux && !anyPlatform) return undefined;
  if (pythons.includes(cp) && abis.includes(cp)) return linux ? 0 : 1;
  if (
    abis.includes('abi3') &&
    pythons.some((t) => /^cp3\d+$/.test(t) && Number(t.slice(3)) <= Number(cp.slice(3)))
  )
    return linux ? 2 : 3;
  if (
    abis.includes('none') &&
    pythons.some((t) => t === cp || t === `py${major}` || t === `py${env.python_version.replace('.', '')}`)
  )
    return linux ? 4 : 5;
  return undefined;
}

/** The direct reference of a package from a second index: its best wheel for `env`, else its sdist. */
function directReference(p: LockPackage, env: MarkerEnvironment, file: string): string {
  const ranked = p.wheels
    .map((w) => ({ w, rank: wheelRank(decodeURIComponent(w.url.split('/').pop() ?? ''), env) }))
    .filter((x): x is { w: LockFile; rank: number } => x.rank !== undefined)
    .sort((a, b) => a.rank - b.rank);
  const chosen = ranked[0]?.w ?? p.sdist;
  if (!chosen)
    throw new LockfileError(
      `${file}: ${p.name} ${p.version} comes from ${p.registry}, which has no file for Python ${env.python_version} on Linux x86_64 in the lock (wheels: ${p.wheels.map((w) => w.url.split('/').pop()).join(', ') || 'none'})`,
    );
  const hash = chosen.hash?.startsWith('sha256:') ? `#sha256=${chosen.hash.slice('sha256:'.length)}` : '';
  return `${chosen.url}${hash}`;
}

/**
 * The runtime packages of `project` in a uv.lock text, for the machine `env` describes, sorted by
 * name. Throws LockfileError naming the file, the package and what is missing.
 */
export function pipelinePins(
  text: string,
  env: MarkerEnvironment,
  project = DEFAULT_LOCK_PROJECT,
  file = 'python/uv.lock',
): Pin[] {
  const packages = lockPackages(text, file);
  const byName = new Map<string, LockPackage[]>();
  for (const p of packages) byName.set(p.name, [...(byName.get(p.name) ?? []), p]);
  const root = byName.get(normaliseName(project));
  if (!root || root.length !== 1)
    throw new LockfileError(
      `${file}: no package "${project}" (the project whose runtime dependencies are read)`,
    );

  const pins = new Map<string, string>();
  const seen = new Set<string>();
  const visit = (deps: LockDependency[], from: string): void => {
    for (const d of deps) {
      if (d.marker && !evaluateMarker(d.marker, env)) continue;
      const candidates = (byName.get(d.name) ?? []).filter((p) => !d.version || p.version === d.version);
      if (candidates.length !== 1)
        throw new LockfileError(
          candidates.length === 0
            ? `${file}: ${from} depends on ${d.name}${d.version ? ` ${d.version}` : ''}, which has no [[package]] entry`
            : `${file}: ${from} depends on ${d.name} without a version, and the lock has ${candidates.length} (${candidates.map((c) => c.version).join(', ')})`,
        );
      const p = candidates[0]!;
      const already = pins.get(p.name);
      if (already !== undefined && already !== p.version)
        throw new LockfileError(
          `${file}: ${p.name} is needed at ${already} and at ${p.version} on the same machine`,
        );
      pins.set(p.name, p.version);
      for (const key of [p.name, ...d.extra.map((e) => `${p.name}[${e}]`)]) {
        if (seen.has(key)) continue;
        seen.add(key);
        const extra = key === p.name ? undefined : key.slice(p.name.length + 1, -1);
        if (extra !== undefined && !(extra in p.optional))
          throw new LockfileError(
            `${file}: ${from} asks for ${p.name}[${extra}], which the lock does not define`,
          );
        visit(extra === undefined ? p.dependencies : p.optional[extra]!, `${p.name} ${p.version}`);
      }
    }
  };
  visit(root[0]!.dependencies, project);
  const entry = (name: string, version: string) =>
    (byName.get(name) ?? []).find((p) => p.version === version)!;
  return [...pins]
    .map(([name, version]) => {
      const p = entry(name, version);
      return p.registry !== undefined && p.registry !== DEFAULT_REGISTRY
        ? { name, version, url: directReference(p, env, file) }
        : { name, version };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * `[project].dependencies` of a pyproject.toml as name and exact pin; a dependency that is not
 * pinned with `==` is refused (the pipeline pins every runtime dependency).
 */
export function projectDependencies(text: string, file = 'python/pyproject.toml'): Pin[] {
  const project = table(parseToml(text, file)['project']);
  return list(project['dependencies']).map((d) => {
    const m =
      typeof d === 'string'
        ? /^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)\s*$/.exec(d)
        : null;
    if (!m)
      throw new LockfileError(
        `${file}: [project].dependencies entry ${JSON.stringify(d)}: expected an exact pin such as "torch==2.9.1"`,
      );
    return { name: normaliseName(m[1]!), version: m[2]! };
  });
}
