// `runner plan`: the run's phases up to the preflight (runPipeline of @kdgat/runs), with nothing submitted.
// A stack not provisioned yet is planned from its declared configuration (written under
// .hpc/plans/, sbatch --test-only skipped, saying why).
import { runOptions, type Command } from './kit.ts';
import { ignoreTuneSection, runPipeline, type RunOptions, type RunResult } from '@kdgat/runs';
import { printRun } from './output.ts';

export function plan(opts: RunOptions): Promise<RunResult> {
  return runPipeline(opts, { dryRun: true, studyOf: ignoreTuneSection });
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
