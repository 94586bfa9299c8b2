import { isActive, type Scheduler, type TaskStatus } from '@kdgat/schedulers';

/**
 * How long a test waits for something the cluster or a job does. A deadline, not a performance
 * assertion (bench/ measures speed): generous, so that a slow or loaded machine still passes.
 */
export const WAIT_MS = 180_000;

export interface WaitOptions<S> {
  timeoutMs?: number;
  intervalMs?: number;
  /** How the last observation reads in the timeout error (default: JSON). */
  describe?: (seen: S) => string;
}

/**
 * Observes until `ready` accepts what was seen, and returns that. At the deadline it throws an error
 * that names what it waited for, how long, and the last thing it saw.
 */
export async function waitFor<S>(
  what: string,
  observe: () => S | Promise<S>,
  ready: (seen: S) => boolean,
  { timeoutMs = WAIT_MS, intervalMs = 200, describe = (s) => JSON.stringify(s) }: WaitOptions<S> = {},
): Promise<S> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const seen = await observe();
    if (ready(seen)) return seen;
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs / 1000} s waiting for ${what}; last seen: ${describe(seen)}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Each job's tasks as `id: [index=]STATE (reason)`, or that the scheduler has none for it yet. */
export function describeStates(ids: string[], states: Map<string, TaskStatus[]>): string {
  return ids
    .map((id) => {
      const tasks = (states.get(id) ?? []).map(
        (t) =>
          `${t.arrayIndex !== undefined ? `${t.arrayIndex}=` : ''}${t.state}${t.reason ? ` (${t.reason})` : ''}`,
      );
      return `${id}: ${tasks.length ? tasks.join(', ') : 'no tasks reported yet'}`;
    })
    .join('; ');
}

/** Polls (every 250 ms) until every task of every job has finished; returns the final states. */
export function waitForJobs(
  s: Scheduler,
  ids: string[],
  {
    timeoutMs = WAIT_MS,
    expectedTasks = {},
  }: { timeoutMs?: number; expectedTasks?: Record<string, number> } = {},
): Promise<Map<string, TaskStatus[]>> {
  return waitFor(
    `jobs ${ids.join(', ')} to finish`,
    () => s.query(ids),
    (states) =>
      ids.every((id) => {
        const tasks = states.get(id) ?? [];
        return tasks.length >= (expectedTasks[id] ?? 1) && tasks.every((t) => !isActive(t.state));
      }),
    { timeoutMs, intervalMs: 250, describe: (states) => describeStates(ids, states) },
  );
}
