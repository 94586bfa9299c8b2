// @kdgat/schedulers: one small interface (core.ts) and one folder per scheduler that implements
// it — `slurm/` through SLURM's own commands, `local/` with bash on this machine.
import { join } from 'node:path';
import { sessionFor, type Connection } from '@kdgat/transport';
import type { Scheduler } from './core.ts';
import { LocalScheduler } from './local/index.ts';
import { SlurmScheduler } from './slurm/index.ts';

export {
  ACTIVE_STATES,
  SchedulerError,
  isActive,
  isFailure,
  normaliseState,
  type JobState,
  type PreflightResult,
  type Scheduler,
  type SchedulerLimits,
  type SubmitRequest,
  type TaskStatus,
  type TaskAccounting,
} from './core.ts';
export { runCommand, type CommandResult } from './exec.ts';
export {
  SUBMIT_OVERRIDES,
  arrayIndicesOf,
  checkOverrides,
  exportedVariables,
  parseOverride,
  type SubmitOverrideName,
} from './overrides.ts';
export { SlurmScheduler, sbatchArgs } from './slurm/index.ts';
export { parseTestOnlyStart } from './slurm/parse.ts';
export { DEFAULT_MAX_ARRAY_SIZE, UnprovisionedSlurm } from './slurm/unprovisioned.ts';
export { LocalScheduler } from './local/index.ts';
export { expandLogPattern, parseSbatchDirectives } from './local/directives.ts';
export { pidAlive } from './local/records.ts';

/** Where the local scheduler keeps its job records: beside the runs it ran. */
export const LOCAL_SCHEDULER_DIR = '.local-scheduler';

/**
 * The scheduler of a kind on a site: SLURM's commands run where the connection leads (this machine,
 * or the login node over this process's one SSH master); the local one keeps its state under the
 * runs root and runs jobs on this machine only.
 */
export function schedulerFor(
  kind: 'slurm' | 'local',
  runsRoot: string,
  connection: Connection = { kind: 'local' },
  /** Another SLURM cluster of the site, named with `-M` (several clusters under one slurmdbd). */
  cluster?: string,
): Scheduler {
  if (kind === 'slurm')
    return new SlurmScheduler({
      ...(connection.kind === 'local' ? {} : { executor: sessionFor(connection) }),
      ...(cluster ? { cluster } : {}),
    });
  if (cluster)
    throw new Error(`the local scheduler has no other clusters: --cluster ${cluster} needs a SLURM site`);
  if (connection.kind !== 'local')
    throw new Error(
      `the local scheduler runs jobs on this machine, but the site is reached over ssh (${connection.user}@${connection.host}): ` +
        'use --scheduler slurm, or a stack with a local connection',
    );
  return new LocalScheduler(join(runsRoot, LOCAL_SCHEDULER_DIR));
}
