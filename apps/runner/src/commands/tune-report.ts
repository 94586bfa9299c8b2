// `runner tune-report`: the pipeline's own report of a study (trial counts, pruning, best trial).
import { resolveStudyDir, runTuneReport } from '@kdgat/planning';
import { stackSource, type Command } from '../cli/args.ts';

export const tuneReportCommand: Command = async (ctx) => {
  const { values, say } = ctx;
  const studyArg = values.study ?? ctx.positionals[1];
  if (!studyArg) throw ctx.usage('tune-report needs --study NAME|DIR');
  const stack = await stackSource(values).read(values.stack ?? 'local');
  const dir = resolveStudyDir(studyArg, stack.scratch.runsDir);
  if (values.json) say(JSON.stringify(await runTuneReport(stack, dir, { json: true, plots: true }), null, 2));
  else ctx.io.out.write(await runTuneReport(stack, dir, { json: false, plots: true }));
  return 0;
};
