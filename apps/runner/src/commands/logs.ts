// `runner logs`: a job's (or array task's) stdout and stderr, whole or the last N lines.
import { existsSync, readFileSync } from 'node:fs';
import { logPathsOf, printable, schedulerForManifest, tailFile } from '@kdgat/run-record';
import type { TaskStatus } from '@kdgat/schedulers';
import { ConnectionError } from '@kdgat/transport';
import { openRun, type Command } from './kit.ts';

export const logsCommand: Command = async (ctx) => {
  const { values, say } = ctx;
  const { view: manifest } = await openRun(ctx);
  const job = values.job ? manifest.jobs.find((j) => j.key === values.job) : manifest.jobs[0];
  if (!job)
    throw ctx.usage(`--job ${values.job}: expected one of ${manifest.jobs.map((j) => j.key).join(', ')}`);
  if (!job.jobId) throw ctx.usage(`job ${job.key} was never submitted`);
  const index = values.index !== undefined ? Number(values.index) : job.array ? 0 : undefined;
  // Which task's log (its own job id names it); with the site unreachable, the copy's logs as they are.
  const states = await schedulerForManifest(manifest)
    .query([job.jobId])
    .catch((e: unknown) => {
      if (e instanceof ConnectionError) return new Map<string, TaskStatus[]>();
      throw e;
    });
  const task = (states.get(job.jobId) ?? []).find((t) => t.arrayIndex === index) ?? {
    jobId: job.jobId,
    state: 'UNKNOWN' as const,
    ...(index !== undefined ? { arrayIndex: index } : {}),
  };
  const paths = logPathsOf(job, task);
  const present = [paths.output, paths.error].filter((p, i, all) => existsSync(p) && all.indexOf(p) === i);
  if (present.length === 0) {
    ctx.io.err.write(`no log yet at ${paths.output}\n`);
    return 1;
  }
  for (const path of present) {
    say(`==> ${path} <==`);
    // What the job wrote, on the user's terminal: its escape sequences shown, not obeyed.
    say(
      printable(values.lines ? tailFile(path, Number(values.lines)) : readFileSync(path, 'utf8').trimEnd()),
    );
  }
  return 0;
};
