// One run of `train`, `plan` and `tune`, written once: its phases in order, each a named function
// in this folder. A command fills the few hooks of `RunCommand` (types.ts: dry run or not, a study),
// like submitit's executors fill the hooks of its one submission loop.
//
//   prepare   load spec, check stack, scheduler, plan the jobs               prepare.ts
//   size      requests from history (--right-size), new stages              cost.ts
//   cost      worst and expected cost, balance                              cost.ts
//   guard     budget (before anything is written); under the runs lock:     cost.ts, guardRuns here
//             the study's name, runs of the same spec queued or running
//   record    run dir, code, scripts, study file, manifest.json             record.ts
//   preflight sbatch --test-only of every script                            queue.ts
//   submit    sbatch in dependency order (not in a dry run)                 queue.ts
//   follow    --wait, by the command after it printed the run               follow.ts
import { join } from 'node:path';
import type { PreflightReport } from '@kdgat/planning';
import { acquireLock, refuseActiveRuns, RUNS_LOCK_FILE, type RunRecord } from '@kdgat/run-record';
import type { Scheduler } from '@kdgat/schedulers';
import { cost, guardBudget, size } from './cost.ts';
import { prepare } from './prepare.ts';
import { preflight, submit } from './queue.ts';
import { newRun, reproduce } from './record.ts';
import type { Planned, RunCommand, RunOptions, RunResult, Site, Spec, StudyHooks } from './types.ts';

/** `plan` and `train` run no study: the spec's tune: section is said to be ignored. */
export function ignoreTuneSection(spec: Spec, log: (line: string) => void): undefined {
  if (spec.resolved.tune)
    log(`note: the spec's tune: section is ignored by train (\`nx run runner:tune\` runs the study)`);
  return undefined;
}

/** The run, phase by phase: prepare → size → cost → guard → record → preflight → submit. */
export async function runPipeline(opts: RunOptions, command: RunCommand): Promise<RunResult> {
  const log = opts.log ?? (() => {});
  const { spec: loaded, site, scheduler, plan, study, placement } = await prepare(opts, command, log);
  const sized = size(loaded, site, opts);
  const { spec } = sized;
  const planned = { ...(await cost(sized, site, plan)), ...(placement ? { placement } : {}) };
  guardBudget(sized, planned, log);
  // --from-manifest: the scripts re-rendered for the recorded run dir, compared byte for byte.
  const reproduction = reproduce(spec, site, planned, scheduler);
  const lock = command.dryRun ? undefined : await acquireLock(join(site.runsRoot, RUNS_LOCK_FILE));
  try {
    await guardRuns(spec, site, opts, command, study);
    const { record, rendered, study: made } = await newRun(spec, site, planned, scheduler, opts, log, study);
    const reports = await preflight(record, rendered, scheduler, site);
    if (!command.dryRun) {
      await submit(record, rendered, scheduler);
      study?.submitted(site, record);
    }
    return resultOf(record, planned, reports, scheduler, {
      ...(reproduction ? { reproduction } : {}),
      ...(made ? { study: made } : {}),
    });
  } finally {
    lock?.release();
  }
}

/**
 * Guard, under the runs lock: the study's name not taken (tune), and no run of the same spec
 * queued or running (unless --force; not checked by a dry run, which queues nothing).
 */
export async function guardRuns(
  spec: Spec,
  site: Site,
  opts: RunOptions,
  command: RunCommand,
  study?: StudyHooks,
): Promise<void> {
  study?.guard(site);
  if (!command.dryRun && !opts.force)
    await refuseActiveRuns(site.runsRoot, spec.resolved.spec.name, spec.resolved.specHash);
}

export function resultOf(
  record: RunRecord,
  planned: Planned,
  preflight: PreflightReport[],
  scheduler: Scheduler,
  extra: Pick<RunResult, 'reproduction' | 'study'>,
): RunResult {
  return {
    runDir: record.dir,
    manifest: record.manifest,
    record,
    plan: planned.plan,
    preflight,
    scheduler,
    costing: planned.costing,
    ...(extra.reproduction ? { reproduction: extra.reproduction } : {}),
    ...(extra.study ? { study: extra.study } : {}),
  };
}
