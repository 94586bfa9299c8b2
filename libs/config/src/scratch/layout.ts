import type { ClusterProfile } from '../cluster/schema.ts';
import { SCRIPT_VALUES, matchesRule } from '../script-values.ts';

/** Where a site keeps caches, runs and logs (what ScratchCacheLayout creates and jobs read). */
export interface ScratchLayout {
  root: string;
  /** Per-dataset graph caches: `{scratchRoot}/cache/{dataset}`. */
  cacheDirs: Record<string, string>;
  runsDir: string;
  logsDir: string;
  /** Group-shared, setgid: everyone in the project group reads and writes, new files keep the group. */
  mode: '2770';
  purgeDays: number;
}

export function scratchLayoutFor(profile: ClusterProfile, datasets: readonly string[]): ScratchLayout {
  const root = profile.paths.scratchRoot.replace(/\/+$/, '');
  const cacheDirs: Record<string, string> = {};
  for (const d of [...new Set(datasets)].sort()) {
    if (!matchesRule(SCRIPT_VALUES.name, d)) throw new Error(`dataset "${d}": expected ${SCRIPT_VALUES.name.expected}`);
    cacheDirs[d] = `${root}/cache/${d}`;
  }
  return {
    root,
    cacheDirs,
    runsDir: `${root}/runs`,
    logsDir: profile.paths.logsDir.replace(/\/+$/, ''),
    mode: '2770',
    purgeDays: profile.scratchPurgeDays,
  };
}

/**
 * Where the runner ships the pipeline's code to a site over SSH: `<scratch root>/code/<tree>`, one
 * directory per git tree of python/ (a job's `hpc_code`; its `src/` goes first on PYTHONPATH).
 */
export function codeRootFor(scratchRoot: string): string {
  return `${scratchRoot.replace(/\/+$/, '')}/code`;
}

/** The link in the code root that each ship re-points to its snapshot: the code of the latest run shipped. */
export const CURRENT_CODE_LINK = 'current';

/** `<scratch root>/code/current`: what a notebook kernel imports the default pipeline from unless it names its code. */
export function currentCodeFor(scratchRoot: string): string {
  return `${codeRootFor(scratchRoot)}/${CURRENT_CODE_LINK}`;
}
