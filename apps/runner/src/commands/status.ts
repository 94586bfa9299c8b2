// `runner status`: every job and array task of a run as its scheduler sees it now (recorded).
import {
  formatTable,
  jobIdsOf,
  progressOf,
  schedulerForManifest,
  statusLine,
  summaryRows,
} from '@kdgat/run-record';
import { openRun, type Command } from '../cli/args.ts';

export const statusCommand: Command = async (ctx) => {
  const { say } = ctx;
  const { record, view: manifest } = await openRun(ctx);
  const states = await schedulerForManifest(manifest).query(jobIdsOf(manifest));
  const progress = progressOf(manifest, states);
  record.seen(progress);
  await record.published();
  if (ctx.values.json) {
    const jobs = progress.map((p) => ({
      key: p.job.key,
      jobId: p.job.jobId,
      state: p.state,
      counts: p.counts,
      tasks: p.tasks,
    }));
    say(JSON.stringify(jobs, null, 2));
    return 0;
  }
  say(`${manifest.experiment}: ${manifest.runDir} (submission ${manifest.submission.status})`);
  for (const p of progress) say(`  ${statusLine(p)}`);
  say('');
  say(formatTable(summaryRows(manifest, progress)));
  return 0;
};
