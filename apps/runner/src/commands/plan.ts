// `runner plan`: the run's phases up to the preflight (pipeline/run.ts), with nothing submitted.
// A stack not provisioned yet is planned from its declared configuration (written under
// .hpc/plans/, sbatch --test-only skipped, saying why).
import { runOptions, type Command } from './kit.ts';
import type { RunOptions } from '../pipeline/prepare.ts';
import { ignoreTuneSection, runPipeline, type RunResult } from '../pipeline/run.ts';
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
