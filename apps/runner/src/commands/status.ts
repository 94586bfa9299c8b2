// `runner status`: every job and array task of a run as its scheduler sees it now (recorded); an
// ended task that SLURM accounting measured shows its CPU efficiency and peak memory (the table's
// usage column, seff's figures), also after SLURM forgot the job (the manifest keeps them).
// A site over SSH that cannot be reached: the states the runner saw last, said to be that, exit 1.
import { ConnectionError } from '@kdgat/transport';
import {
  formatTable,
  jobIdsOf,
  progressOf,
  schedulerForManifest,
  statusLine,
  summaryRows,
} from '@kdgat/run-record';
import { openRun, type Command } from './kit.ts';
import { clusterOf } from './output.ts';

export const statusCommand: Command = async (ctx) => {
  const { say } = ctx;
  const { record, view: manifest } = await openRun(ctx);
  let states;
  let unreachable: string | undefined;
  try {
    states = await schedulerForManifest(manifest).query(jobIdsOf(manifest));
  } catch (e) {
    if (!(e instanceof ConnectionError)) throw e;
    // No answer: every job falls back to its last state seen (recorded in the manifest).
    unreachable = e.message.split('\n')[0];
    states = new Map();
  }
  const progress = progressOf(manifest, states);
  if (unreachable === undefined) {
    record.seen(progress);
    await record.published();
  } else
    ctx.io.err.write(
      `the scheduler could not be asked (${unreachable}): the states below are the last ones the runner saw\n`,
    );
  if (ctx.values.json) {
    const jobs = progress.map((p) => ({
      key: p.job.key,
      jobId: p.job.jobId,
      state: p.state,
      counts: p.counts,
      tasks: p.tasks,
    }));
    say(JSON.stringify(jobs, null, 2));
    return unreachable === undefined ? 0 : 1;
  }
  say(
    `${manifest.experiment}: ${manifest.runDir} (submission ${manifest.submission.status}${clusterOf(manifest)})`,
  );
  for (const p of progress) say(`  ${statusLine(p)}`);
  say('');
  say(formatTable(summaryRows(manifest, progress)));
  return unreachable === undefined ? 0 : 1;
};
