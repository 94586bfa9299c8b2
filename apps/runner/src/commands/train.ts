// `runner train`: the run's phases (runPipeline of @kdgat/runs) through the submit, under the runs lock,
// then follow the run with --wait. `train --dry-run` is `plan`.
import { runOptions, type Command } from './kit.ts';
import { follow, ignoreTuneSection, runPipeline, type RunOptions, type RunResult } from '@kdgat/runs';
import { printRun } from './output.ts';
import { plan } from './plan.ts';

export function train(opts: RunOptions): Promise<RunResult> {
  return runPipeline(opts, { dryRun: false, studyOf: ignoreTuneSection });
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
