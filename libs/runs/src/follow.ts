// `--wait`: follow a submitted run to the end (states recorded as they are seen), resubmit the
// failures it can survive and follow those, then the summary table, the verdict and where the
// report is; exit 1 when any task did not complete after the recoveries.
// On a site over SSH a poll is one remote call (and the manifest's update there); a connection
// that drops is retried a few times, and if it stays down the jobs are left as they are.
import { isFailure, type Scheduler } from '@kdgat/schedulers';
import {
  connectionOf,
  copyLine,
  formatTable,
  localView,
  recoverRun,
  refreshCopy,
  schedulerForManifest,
  summaryRows,
  verdictLines,
  watchRun,
  type RunRecord,
} from '@kdgat/run-record';
import { ConnectionError, sessionFor } from '@kdgat/transport';
import type { Io } from './types.ts';

/**
 * Polls of a remote site: at most one every 5 s, backing off to one every 30 s while no state
 * changes (login nodes ask users not to hammer squeue), unless the connection says otherwise
 * (`connection.poll` of the cluster profile).
 */
const REMOTE_POLL = { minSeconds: 5, maxSeconds: 30 };
/** Consecutive failed connections before --wait gives up (the jobs are not touched). */
const CONNECTION_RETRIES = 3;

/** The scheduler, with a dropped connection retried CONNECTION_RETRIES times before it counts. */
function retrying(scheduler: Scheduler, io: Io, pauseMs: number): Scheduler {
  const query: Scheduler['query'] = async (ids) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await scheduler.query(ids);
      } catch (e) {
        if (!(e instanceof ConnectionError) || attempt > CONNECTION_RETRIES) throw e;
        io.err.write(
          `connection to the site lost (${e.message.split('\n')[0]}); retry ${attempt}/${CONNECTION_RETRIES}\n`,
        );
        await new Promise((r) => setTimeout(r, pauseMs * attempt));
      }
    }
  };
  return {
    kind: scheduler.kind,
    get submitCalls() {
      return scheduler.submitCalls;
    },
    limits: () => scheduler.limits(),
    preflight: (request) => scheduler.preflight(request),
    submit: (request) => scheduler.submit(request),
    cancel: (ids) => scheduler.cancel(ids),
    query,
  };
}

/**
 * Follows the run until every job ended; then the failures it can survive are resubmitted
 * (`recoverRun`: NODE_FAIL, OUT_OF_MEMORY, a CUDA OOM, a TIMEOUT without the requeue handshake,
 * and the jobs cancelled after them) and followed again, until nothing more is resubmitted.
 * `scheduler`: tests give their own.
 */
export async function follow(record: RunRecord, io: Io, scheduler?: Scheduler): Promise<number> {
  const connection = connectionOf(record.manifest);
  // On a site over SSH: the session the polls ride (what following costs the login node is counted
  // on it) and how often they may come.
  const site =
    connection.kind === 'ssh'
      ? { session: sessionFor(connection), poll: connection.poll ?? REMOTE_POLL }
      : undefined;
  const callsBefore = site?.session.calls ?? 0;
  const started = Date.now();
  const queue = retrying(
    scheduler ?? schedulerForManifest(record.manifest),
    io,
    site ? site.poll.minSeconds * 1000 : 1000,
  );
  let polls = 0;
  let progress;
  for (;;) {
    try {
      progress = await watchRun({
        scheduler: queue,
        manifest: record.manifest,
        out: io.out,
        onPoll: (p) => {
          polls++;
          record.seen(p);
        },
        ...(site
          ? {
              minIntervalMs: site.poll.minSeconds * 1000,
              maxIntervalMs: site.poll.maxSeconds * 1000,
              backOffOnStates: true,
            }
          : {}),
      });
    } catch (e) {
      if (!(e instanceof ConnectionError)) throw e;
      throw new ConnectionError(
        e.target,
        `${e.message}\nthe jobs were not touched: \`nx run runner:resume ${record.dir} --wait\` follows them again once the site answers`,
      );
    }
    await record.published();
    // The job records, logs and history the decision reads are on the site: bring them back first.
    if (site)
      io.err.write(
        `${copyLine(record.manifest, record.dir, await refreshCopy(record.manifest, record.dir))}\n`,
      );
    const view = site ? localView(record.manifest, record.dir) : record.manifest;
    const outcome = await recoverRun({
      record,
      view,
      progress,
      scheduler: queue,
      say: (line) => io.out.write(`${line}\n`),
      checkpointsHere: !site,
    });
    if (outcome.resubmitted.size === 0) break;
  }
  if (site) {
    const { poll } = site;
    const calls = site.session.calls - callsBefore;
    const minutes = Math.max((Date.now() - started) / 60_000, 1 / 60);
    io.err.write(
      `--wait: ${polls} poll(s) (every ${poll.minSeconds} to ${poll.maxSeconds} s), ${calls} remote call(s) in ${minutes.toFixed(1)} min (${(calls / minutes).toFixed(1)}/min)\n`,
    );
  }
  // What the summary and the verdict read (job records, metrics) was brought back before the recovery.
  const manifest = site ? localView(record.manifest, record.dir) : record.manifest;
  const rows = summaryRows(manifest, progress);
  io.out.write(`\n${formatTable(rows)}\n`);
  // A task whose end was never seen (UNKNOWN: gone from the scheduler) did not complete either.
  const failed = rows.filter((r) => isFailure(r.state) || r.state === 'UNKNOWN');
  io.out.write(
    failed.length > 0
      ? `\n${failed.length} task(s) did not complete.\n`
      : `\nall ${rows.length} task(s) completed; manifest: ${record.path}\n`,
  );
  const verdict = verdictLines(manifest);
  if (verdict.length > 0) io.out.write(`\n${verdict.join('\n')}\n`);
  io.out.write(`report: nx run runner:report ${record.dir}\n`);
  return failed.length > 0 ? 1 : 0;
}
