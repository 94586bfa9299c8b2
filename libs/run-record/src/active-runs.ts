// The guard before a submit: a run of the same spec that still has queued or running jobs is not
// submitted again (unless --force). Each earlier run is asked of its own scheduler, the one it
// was submitted to; when that scheduler cannot answer, the error names the run and what to do.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { LOCAL_SCHEDULER_DIR, isActive, schedulerFor, type Scheduler } from '@kdgat/schedulers';
import { MANIFEST_FILE, jobIdsOf, readManifest, type Manifest } from './manifest.ts';

export class AlreadyQueuedError extends Error {
  readonly runs: { runDir: string; jobIds: string[] }[];
  constructor(hash: string, runs: { runDir: string; jobIds: string[] }[]) {
    super(
      `a run of this spec (hash ${hash.slice(0, 8)}) is already queued or running; not submitting again (use --force to submit anyway):\n` +
        runs.map((r) => `  ${r.runDir}: job ids ${r.jobIds.join(', ')}`).join('\n'),
    );
    this.name = 'AlreadyQueuedError';
    this.runs = runs;
  }
}

/** An earlier run's scheduler did not answer, so whether that run is still active is unknown. */
export class ActiveRunCheckError extends Error {
  readonly runDir: string;
  readonly scheduler: 'slurm' | 'local';
  constructor(run: Manifest, cause: Error) {
    const connection = run.stack.outputs.connection;
    const start =
      connection?.kind === 'ssh'
        ? `make the site reachable again (ssh ${connection.user}@${connection.host}:${connection.port})`
        : run.scheduler === 'slurm'
          ? "start that SLURM cluster (the repository's own: `scripts/slurm-local.sh up`)"
          : `check that ${join(run.stack.outputs.scratch.runsDir, LOCAL_SCHEDULER_DIR)} is readable`;
    super(
      `cannot tell whether the earlier run ${run.runDir} of this spec is still queued or running: ` +
        `it was submitted to ${run.scheduler === 'slurm' ? 'SLURM' : 'the local scheduler'} (stack ${run.stack.name}), ` +
        `which did not answer (${cause.message}). Nothing was submitted. ` +
        `Either ${start} and run this again, or pass --force to submit without checking.`,
    );
    this.name = 'ActiveRunCheckError';
    this.runDir = run.runDir;
    this.scheduler = run.scheduler;
  }
}

/** The scheduler a recorded run was submitted to. */
export function schedulerForManifest(manifest: Manifest): Scheduler {
  return schedulerFor(
    manifest.scheduler,
    manifest.stack.outputs.scratch.runsDir,
    manifest.stack.outputs.connection ?? { kind: 'local' },
    manifest.placement?.via,
  );
}

/** Submitted runs of the same experiment and spec hash under the runs root. */
export function earlierRuns(runsRoot: string, experiment: string, specHash: string): Manifest[] {
  const dir = join(runsRoot, experiment);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((d) => d.includes(`-${specHash.slice(0, 8)}`) && existsSync(join(dir, d, MANIFEST_FILE)))
    .flatMap((d) => {
      try {
        return [readManifest(join(dir, d))];
      } catch {
        return [];
      }
    })
    .filter((m) => m.spec.hash === specHash && m.submission.status === 'submitted');
}

/**
 * Refuses (AlreadyQueuedError) when an earlier run of this spec still has active jobs; refuses
 * (ActiveRunCheckError) when an earlier run's scheduler cannot say.
 */
export async function refuseActiveRuns(
  runsRoot: string,
  experiment: string,
  specHash: string,
  schedulerOf: (run: Manifest) => Scheduler = schedulerForManifest,
): Promise<void> {
  const active: { runDir: string; jobIds: string[] }[] = [];
  for (const m of earlierRuns(runsRoot, experiment, specHash)) {
    const ids = jobIdsOf(m);
    let states;
    try {
      states = await schedulerOf(m).query(ids);
    } catch (e) {
      throw new ActiveRunCheckError(m, e as Error);
    }
    const live = ids.filter((id) => (states.get(id) ?? []).some((t) => isActive(t.state)));
    if (live.length > 0) active.push({ runDir: m.runDir, jobIds: live });
  }
  if (active.length > 0) throw new AlreadyQueuedError(specHash, active);
}
