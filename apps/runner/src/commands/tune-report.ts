// `runner tune-report`: the pipeline's own report of a study (trial counts, pruning, best trial).
// On a site over SSH the study is read in the local copy of its run, brought back first.
import { dirname, join } from 'node:path';
import { resolveStudyDir, runTuneReport } from '@kdgat/planning';
import { MANIFEST_FILE, copyLine, isRemote, readManifest, refreshCopy } from '@kdgat/run-record';
import { existsSync } from 'node:fs';
import { stackSource, workspaceOf, type Command } from './kit.ts';
import { localRunsRoot } from '@kdgat/runs';

export const tuneReportCommand: Command = async (ctx) => {
  const { values, say } = ctx;
  const studyArg = values.study ?? ctx.positionals[1];
  if (!studyArg) throw ctx.usage('tune-report needs --study NAME|DIR');
  const name = values.stack ?? 'local';
  const stack = await stackSource(values).read(name);
  const remote = stack.connection.kind === 'ssh';
  const dir = resolveStudyDir(
    studyArg,
    remote ? localRunsRoot(workspaceOf(ctx.values), name) : stack.scratch.runsDir,
  );
  // A study in the local copy of a run on a site over SSH: its journal as the site has it now.
  const runDir = dirname(dir);
  if (existsSync(join(runDir, MANIFEST_FILE))) {
    const manifest = readManifest(runDir);
    if (isRemote(manifest))
      ctx.io.err.write(`${copyLine(manifest, runDir, await refreshCopy(manifest, runDir))}\n`);
  }
  if (values.json) say(JSON.stringify(await runTuneReport(stack, dir, { json: true, plots: true }), null, 2));
  else ctx.io.out.write(await runTuneReport(stack, dir, { json: false, plots: true }));
  return 0;
};
