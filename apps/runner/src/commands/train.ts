// `runner train`: load spec → check stack → plan → render → guard → record → preflight → submit,
// then follow the run with --wait. `plan` (plan.ts) and `tune` (tune.ts) reuse these steps.
import { join } from 'node:path';
import { acquireLock, refuseActiveRuns, RUNS_LOCK_FILE } from '@kdgat/run-record';
import { runOptions, type Command } from '../cli/args.ts';
import { follow } from './follow.ts';
import { printRun } from './output.ts';
import { plan } from './plan.ts';
import {
  checkSpec,
  checkStack,
  loadSpec,
  newRun,
  planRun,
  preflight,
  reproduce,
  resultOf,
  schedulerOf,
  submit,
  type RunOptions,
  type RunResult,
} from './steps.ts';

export async function train(opts: RunOptions): Promise<RunResult> {
  const log = opts.log ?? (() => {});
  const spec = await loadSpec(opts, log);
  if (spec.resolved.tune && !opts.fromStudy)
    log(`note: the spec's tune: section is ignored by train (\`nx run runner:tune\` runs the study)`);
  checkSpec(spec, log);
  const site = await checkStack(spec, opts, log);
  const scheduler = schedulerOf(spec, site, opts);
  const planned = await planRun(spec, site, scheduler, { rightSize: opts.rightSize === true }, log);
  const reproduction = reproduce(spec, site, planned, scheduler);
  const lock = await acquireLock(join(site.runsRoot, RUNS_LOCK_FILE));
  try {
    const { name: experiment } = spec.resolved.spec;
    if (!opts.force) await refuseActiveRuns(site.runsRoot, experiment, spec.resolved.specHash);
    const { record, rendered } = await newRun(spec, site, planned, scheduler, opts, log);
    const reports = await preflight(record, rendered, scheduler, site);
    await submit(record, rendered, scheduler);
    return resultOf(record, planned, reports, scheduler, { reproduction });
  } finally {
    lock.release();
  }
}

export const trainCommand: Command = async (ctx) => {
  const { values } = ctx;
  const opts = {
    ...runOptions(ctx),
    ...(values['from-study'] ? { fromStudy: values['from-study'] } : {}),
    force: values.force === true,
    rightSize: values['right-size'] === true,
    allowDirty: values['allow-dirty'] === true,
  };
  // `train --dry-run` is `plan` (with train's options, e.g. --from-study).
  if (values['dry-run']) {
    printRun(await plan(opts), { dryRun: true }, ctx.say);
    return 0;
  }
  const result = await train(opts);
  printRun(result, { dryRun: false }, ctx.say);
  return values.wait ? follow(result.record, ctx.io) : 0;
};
