// An environment's explicit lock — `conda list --explicit --md5` (`@EXPLICIT`, one package URL with
// its md5 per line) or `pip freeze` for venvs — read as packages, and the difference of two locks
// in the words a user checks: which packages were added, removed or changed version.

/** Package name -> what the lock pins (conda: `version-build`; pip: the version or the URL). */
export type LockPackages = Map<string, string>;

const CONDA_ARCHIVE = /\.(conda|tar\.bz2)$/;

/** A conda package file name `name-version-build.conda` (names may contain `-`; the others do not). */
function condaPackage(url: string): [string, string] | undefined {
  const file = decodeURIComponent(url.split('#')[0]!.split('/').pop() ?? '');
  if (!CONDA_ARCHIVE.test(file)) return undefined;
  const parts = file.replace(CONDA_ARCHIVE, '').split('-');
  if (parts.length < 3) return undefined;
  const build = parts.pop()!;
  const version = parts.pop()!;
  return [parts.join('-'), `${version}-${build}`];
}

/** PEP 503 normalised project name. */
function pipName(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/[-_.]+/g, '-');
}

function pipPackage(line: string): [string, string] | undefined {
  const at = /^([A-Za-z0-9][A-Za-z0-9._-]*)\s*@\s*(\S+)/.exec(line);
  if (at) return [pipName(at[1]!), at[2]!];
  const pinned = /^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*(\S+)/.exec(line);
  if (pinned) return [pipName(pinned[1]!), pinned[2]!];
  return undefined;
}

/** How a conda environment's explicit lock lists what pip installed in it (comments to conda). */
const PIP_IN_EXPLICIT = /^# pip (\S+==\S+)$/;

/**
 * The packages of a lock in either form; comments, `@EXPLICIT` and options are skipped. An explicit
 * lock's `# pip name==version` lines (the pip part of a conda environment, infra's conda frontends)
 * count too, where conda did not install a package of that name.
 */
export function lockPackages(text: string): LockPackages {
  const packages: LockPackages = new Map();
  const pip: [string, string][] = [];
  const explicit = /^@EXPLICIT\s*$/m.test(text);
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    const pipLine = explicit ? PIP_IN_EXPLICIT.exec(line) : null;
    if (pipLine) {
      const entry = pipPackage(pipLine[1]!);
      if (entry) pip.push(entry);
      continue;
    }
    if (line === '' || line.startsWith('#') || line.startsWith('@') || line.startsWith('-')) continue;
    const entry = explicit ? condaPackage(line) : pipPackage(line);
    if (entry) packages.set(entry[0], entry[1]);
  }
  for (const [name, version] of pip) if (!packages.has(name)) packages.set(name, version);
  return packages;
}

export interface LockDiff {
  added: { name: string; version: string }[];
  removed: { name: string; version: string }[];
  changed: { name: string; from: string; to: string }[];
}

/** What changed from the `before` lock to the `after` lock, sorted by package name. */
export function diffLocks(before: string, after: string): LockDiff {
  const a = lockPackages(before);
  const b = lockPackages(after);
  const diff: LockDiff = { added: [], removed: [], changed: [] };
  for (const name of [...new Set([...a.keys(), ...b.keys()])].sort()) {
    const from = a.get(name);
    const to = b.get(name);
    if (from === undefined) diff.added.push({ name, version: to! });
    else if (to === undefined) diff.removed.push({ name, version: from });
    else if (from !== to) diff.changed.push({ name, from, to });
  }
  return diff;
}

/** One line per package: `~ numpy 2.3.1 -> 2.3.2`, `+ optuna 4.1.0`, `- six 1.16.0`. */
export function formatLockDiff(diff: LockDiff): string[] {
  return [
    ...diff.changed.map((c) => `~ ${c.name} ${c.from} -> ${c.to}`),
    ...diff.added.map((p) => `+ ${p.name} ${p.version}`),
    ...diff.removed.map((p) => `- ${p.name} ${p.version}`),
  ];
}
