import { userInfo } from 'node:os';
import type { ClusterProfile } from '../cluster/schema.ts';
import { SCRIPT_VALUES, matchesRule } from '../script-values.ts';

/** Where a site keeps caches, runs and logs (what ScratchCacheLayout creates and jobs read). */
export interface ScratchLayout {
  root: string;
  /** Per-dataset graph caches: `{scratchRoot}/cache/{dataset}`. */
  cacheDirs: Record<string, string>;
  runsDir: string;
  logsDir: string;
  /** `<root>/code`: each site user's own code root below it (`codeRootFor`). */
  codeDir: string;
  /** `<root>/shells`: each site user's own directory of `runner shell` inits below it (`shellsDirFor`). */
  shellsDir: string;
  /**
   * Group-shared, setgid and sticky: everyone in the project group reads and makes entries, new
   * files keep the group, and nobody renames or removes an entry of another member's (the sticky
   * bit): a neighbour can no longer swap a run dir, a log or a cache file for one of their own.
   */
  mode: '3770';
  purgeDays: number;
}

export function scratchLayoutFor(profile: ClusterProfile, datasets: readonly string[]): ScratchLayout {
  const root = profile.paths.scratchRoot.replace(/\/+$/, '');
  const cacheDirs: Record<string, string> = {};
  for (const d of [...new Set(datasets)].sort()) {
    if (!matchesRule(SCRIPT_VALUES.name, d))
      throw new Error(`dataset "${d}": expected ${SCRIPT_VALUES.name.expected}`);
    cacheDirs[d] = `${root}/cache/${d}`;
  }
  return {
    root,
    cacheDirs,
    runsDir: `${root}/runs`,
    logsDir: profile.paths.logsDir.replace(/\/+$/, ''),
    codeDir: `${root}/code`,
    shellsDir: `${root}/shells`,
    mode: '3770',
    purgeDays: profile.scratchPurgeDays,
  };
}

/**
 * Where the runner ships the pipeline's code to a site: `<scratch root>/code/<site user>`, the site
 * user's own directory (mode 700, owned by them: checked before each use), one directory per git
 * tree of the code below it (a job's `hpc_code`; its `src/` goes first on PYTHONPATH). Per user, so
 * that nobody else in the project group can plant or swap a tree the user's jobs, `runner sync`
 * and notebook kernels would import.
 */
export function codeRootFor(scratchRoot: string, user: string): string {
  if (!matchesRule(SCRIPT_VALUES.name, user))
    throw new Error(`site user "${user}": expected ${SCRIPT_VALUES.name.expected}`);
  return `${scratchRoot.replace(/\/+$/, '')}/code/${user}`;
}

/** The link in the code root that each ship re-points to its snapshot: the code of the latest run shipped. */
export const CURRENT_CODE_LINK = 'current';

/** `<scratch root>/code/<user>/current`: what a notebook kernel imports the default pipeline from unless it names its code. */
export function currentCodeFor(scratchRoot: string, user: string): string {
  return `${codeRootFor(scratchRoot, user)}/${CURRENT_CODE_LINK}`;
}

/**
 * Where `runner shell` writes the init its allocation's bash reads: `<scratch root>/shells/<user>`,
 * the user's own (mode 700, checked), so nobody can swap it while the allocation is pending.
 */
export function shellsDirFor(scratchRoot: string, user: string): string {
  if (!matchesRule(SCRIPT_VALUES.name, user))
    throw new Error(`site user "${user}": expected ${SCRIPT_VALUES.name.expected}`);
  return `${scratchRoot.replace(/\/+$/, '')}/shells/${user}`;
}

/** The user a site's files belong to: the SSH login's, or this machine's for a local site. */
export function siteUserOf(connection: { kind: string; user?: string }): string {
  return connection.kind === 'ssh' && connection.user ? connection.user : userInfo().username;
}
