// `runner cancel`: cancel every job of a run, then show (and record) where each one ended.
import { jobIdsOf, progressOf, schedulerForManifest, statusLine } from '@kdgat/run-record';
import { openRun, type Command } from './kit.ts';

export const cancelCommand: Command = async (ctx) => {
  const { record } = await openRun(ctx, { refresh: false });
  const ids = jobIdsOf(record.manifest);
  const scheduler = schedulerForManifest(record.manifest);
  await scheduler.cancel(ids);
  const progress = progressOf(record.manifest, await scheduler.query(ids));
  record.seen(progress);
  await record.published();
  ctx.say(`cancelled ${ids.join(', ')}`);
  for (const p of progress) ctx.say(`  ${statusLine(p)}`);
  return 0;
};
