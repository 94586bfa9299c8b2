// Following a run (`--wait`): one batched scheduler query per poll, backing off while nothing
// changes. On a terminal one live line is redrawn every poll; off a terminal (a log file, CI) a
// line is printed when a job or task changes state, and a heartbeat at most once a minute.
import { isActive, type Scheduler } from '@kdgat/schedulers';
import { jobIdsOf, type Manifest } from '../manifest.ts';
import { logPathsOf, tailFile } from './files.ts';
import { printable } from './printable.ts';
import { progressOf, statusLine, type JobProgress } from './track.ts';

export type Output = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

/** How often, at most, a run with no state change says it is still going (off a terminal). */
export const HEARTBEAT_MS = 60_000;

/** A job's state without its elapsed time: what "a state changed" means. */
function stateOf(p: JobProgress): string {
  const c = p.counts;
  return `${p.job.key} ${p.state}${p.job.array ? ` ${c.pending}/${c.running}/${c.done}/${c.failed}` : ''}`;
}

/** What `--wait` prints after each poll. */
export class WaitOutput {
  readonly #out: Output;
  readonly #now: () => number;
  readonly #heartbeatMs: number;
  #states = '';
  #lastPrinted = -Infinity;

  constructor(out: Output, options: { now?: () => number; heartbeatMs?: number } = {}) {
    this.#out = out;
    this.#now = options.now ?? Date.now;
    this.#heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
  }

  update(progress: readonly JobProgress[], logLine: string): void {
    const lines = progress.map(statusLine);
    if (this.#out.isTTY === true) {
      const width = Math.max(40, (this.#out.columns ?? 100) - 1);
      const text = `${lines.join(' | ')}${logLine ? ` | ${logLine}` : ''}`;
      this.#out.write(`\r\x1b[2K${text.slice(0, width)}`);
      return;
    }
    const now = this.#now();
    const time = new Date(now).toISOString().slice(11, 19);
    const states = progress.map(stateOf).join('; ');
    if (states !== this.#states) {
      this.#out.write(`${time} ${lines.join('; ')}\n`);
    } else if (now - this.#lastPrinted >= this.#heartbeatMs) {
      this.#out.write(`${time} still: ${lines.join('; ')}\n${logLine ? `  | ${logLine}\n` : ''}`);
    } else return;
    this.#states = states;
    this.#lastPrinted = now;
  }

  end(): void {
    if (this.#out.isTTY === true) this.#out.write('\n');
  }
}

export interface WatchOptions {
  scheduler: Scheduler;
  manifest: Manifest;
  out: Output;
  /** Called after each poll (the CLI records the states seen). */
  onPoll?: (progress: JobProgress[]) => void;
  minIntervalMs?: number;
  maxIntervalMs?: number;
  /**
   * Back off while the states stay the same, however the elapsed times move (a site over SSH: a
   * long job is polled ever less often, up to maxIntervalMs, instead of at minIntervalMs).
   */
  backOffOnStates?: boolean;
  /** The clock and the pause between polls (tests pass their own). */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

function finished(progress: readonly JobProgress[]): boolean {
  return (
    progress.every((p) => !isActive(p.state) && p.state !== 'UNKNOWN') ||
    progress.every((p) => p.tasks.length > 0 && p.tasks.every((t) => !isActive(t.state)))
  );
}

/** The last log line of the first running task, '' when there is none. */
function runningLogLine(progress: readonly JobProgress[]): string {
  const running = progress.flatMap((p) =>
    p.tasks.filter((t) => t.state === 'RUNNING').map((t) => ({ p, t })),
  )[0];
  if (!running) return '';
  try {
    // The job's own text on the user's terminal: its control characters shown, not obeyed.
    return printable(tailFile(logPathsOf(running.p.job, running.t).output, 1));
  } catch {
    return '';
  }
}

/** Polls until every job is finished; one batched scheduler query per poll, with backoff. */
export async function watchRun(opts: WatchOptions): Promise<JobProgress[]> {
  const { scheduler, manifest } = opts;
  const ids = jobIdsOf(manifest);
  const min = opts.minIntervalMs ?? 1000;
  const max = opts.maxIntervalMs ?? 30_000;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const output = new WaitOutput(opts.out, opts.now ? { now: opts.now } : {});
  let interval = min;
  let previous = '';
  let lastLogLine = '';
  for (;;) {
    const progress = progressOf(manifest, await scheduler.query(ids));
    opts.onPoll?.(progress);
    const logLine = runningLogLine(progress);
    output.update(progress, logLine);
    // Back off while nothing moves, elapsed times included (as before: a running job polls at `min`),
    // or, with backOffOnStates, while no state changes.
    const snapshot = progress.map(opts.backOffOnStates ? stateOf : statusLine).join('\n');
    const moved = snapshot !== previous || (!opts.backOffOnStates && logLine !== lastLogLine);
    interval = moved ? min : Math.min(max, Math.round(interval * 1.5));
    previous = snapshot;
    lastLogLine = logLine;
    if (finished(progress)) {
      output.end();
      return progress;
    }
    await sleep(interval);
  }
}
