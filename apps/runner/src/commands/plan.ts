// `runner plan`: train's steps up to the preflight — load spec → check stack → plan → render →
// record → preflight — and nothing submitted. A stack not provisioned yet is planned from its
// declared configuration (written under .hpc/plans/, sbatch --test-only skipped, saying why).
import { runOptions, type Command } from '../cli/args.ts';
import { printRun } from './output.ts';
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
  type RunOptions,
  type RunResult,
} from './steps.ts';

export async function plan(opts: RunOptions): Promise<RunResult> {
  const log = opts.log ?? (() => {});
  const spec = await loadSpec(opts, log);
  if (spec.resolved.tune)
    log(`note: the spec's tune: section is ignored by train (\`nx run runner:tune\` runs the study)`);
  checkSpec(spec, log);
  const site = await checkStack(spec, { ...opts, dryRun: true }, log);
  const scheduler = schedulerOf(spec, site, opts);
  const planned = await planRun(spec, site, scheduler, { rightSize: opts.rightSize === true }, log);
  const reproduction = reproduce(spec, site, planned, scheduler);
  const { record, rendered } = await newRun(spec, site, planned, scheduler, opts, log);
  const reports = await preflight(record, rendered, scheduler, site);
  return resultOf(record, planned, reports, scheduler, { reproduction });
}

export const planCommand: Command = async (ctx) => {
  const { values } = ctx;
  const result = await plan({
    ...runOptions(ctx),
    force: values.force === true,
    rightSize: values['right-size'] === true,
    allowDirty: values['allow-dirty'] === true,
  });
  printRun(result, { dryRun: true }, ctx.say);
  return 0;
};
