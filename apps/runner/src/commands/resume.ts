// `runner resume RUN_DIR [--wait]`: the recovery `--wait` makes, for a run nobody was watching. The
// jobs' states now; each ended failure the runner can survive (NODE_FAIL, OUT_OF_MEMORY, a CUDA
// OOM, a TIMEOUT without the requeue handshake, the jobs cancelled after them) resubmitted within
// requeue.maxRecoveries and the budget; the others stopped with their triage line. With --wait it
// then follows the run like `train --wait` (recovering again as jobs end).
import { schedulerForManifest } from '@kdgat/run-record';
import { follow, resume } from '@kdgat/runs';
import { openRun, type Command } from './kit.ts';

export const resumeCommand: Command = async (ctx) => {
  const opened = await openRun(ctx);
  if (ctx.values.wait) return follow(opened.record, ctx.io);
  return resume(opened, ctx.say, schedulerForManifest(opened.record.manifest));
};
