// `runner train`: load spec → check stack → plan → render → guard → record → preflight → submit,
// then follow the run with --wait. `plan` (plan.ts) and `tune` (tune.ts) reuse these steps.
import { join } from 'node:path';
import type { PlanCosting, PreflightReport, RunPlan } from '@kdgat/planning';
import {
  acquireLock,
  newRunDir,
  refuseActiveRuns,
  reproductionOf,
  RUNS_LOCK_FILE,
  type Manifest,
  type RunRecord,
} from '@kdgat/run-record';
import type { Scheduler } from '@kdgat/schedulers';
import { runOptions, type Command } from '../cli/args.ts';
import { follow } from './follow.ts';
import { printRun } from './output.ts';
import {
  checkSpec,
  checkStack,
  loadSpec,
  planRun,
  preflight,
  recordRun,
  render,
  schedulerOf,
  submit,
  writeRun,
  type RunOptions,
} from './steps.ts';

export interface TrainResult {
  /** Where the run's files are (a plan of a site not provisioned: under .hpc/plans/). */
  runDir: string;
  manifest: Manifest;
  /** The run's record (its manifest's one writer). */
  record: RunRecord;
  plan: RunPlan;
  preflight: PreflightReport[];
  scheduler: Scheduler;
  /** With --from-manifest: the scripts re-rendered for the recorded run dir vs the recorded hashes. */
  reproduction?: { identical: boolean; differing: string[] };
  /** A tune run's study: its name and directory. */
  study?: { name: string; dir: string };
  /** Cost, sizes from history and balance, as printed before anything was queued. */
  costing?: PlanCosting;
}

export async function train(opts: RunOptions): Promise<TrainResult> {
  const log = opts.log ?? (() => {});
  const spec = await loadSpec(opts, log);
  if (spec.resolved.tune && !opts.fromStudy)
    log(`note: the spec's tune: section is ignored by train (\`nx run runner:tune\` runs the study)`);
  checkSpec(spec, log);
  const site = await checkStack(spec, opts, log);
  const scheduler = schedulerOf(spec, site, opts);
  const planned = await planRun(spec, site, scheduler, { rightSize: opts.rightSize === true }, log);
  // Rendered for the recorded run dir, a reproduction's scripts must be the recorded bytes.
  const source = spec.source;
  const reproduction =
    source && reproductionOf(source, render(spec, site, planned, scheduler, source.runDir));
  const lock = await acquireLock(join(site.runsRoot, RUNS_LOCK_FILE));
  try {
    if (!opts.force) await refuseActiveRuns(site.runsRoot, spec.resolved.spec.name, spec.resolved.specHash);
    const runDir = newRunDir(site.runsRoot, spec.resolved.spec.name, spec.resolved.specHash);
    const rendered = render(spec, site, planned, scheduler, runDir);
    const written = writeRun(site, runDir, rendered, opts.repoRoot, log);
    const record = await recordRun(spec, site, planned, written, { runDir, rendered, scheduler }, opts);
    const reports = await preflight(record, rendered, scheduler);
    await submit(record, rendered, scheduler);
    return {
      runDir: written.outDir,
      manifest: record.manifest,
      record,
      plan: planned.plan,
      preflight: reports,
      scheduler,
      costing: planned.costing,
      ...(reproduction ? { reproduction } : {}),
    };
  } finally {
    lock.release();
  }
}

export const trainCommand: Command = async (ctx) => {
  const { values } = ctx;
  if (values['from-study'] !== undefined && values.best !== true)
    throw ctx.usage('--from-study needs --best (the best trial is the one that can be trained)');
  if (values.best === true && values['from-study'] === undefined)
    throw ctx.usage('--best needs --from-study STUDY');
  const result = await train({
    ...runOptions(ctx),
    ...(values['from-study'] ? { fromStudy: values['from-study'] } : {}),
    force: values.force === true,
    rightSize: values['right-size'] === true,
  });
  printRun(result, { dryRun: false }, ctx.say);
  return values.wait ? follow(result.record, ctx.io) : 0;
};
