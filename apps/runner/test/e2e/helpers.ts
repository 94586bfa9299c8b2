import { isActive, type Scheduler, type TaskStatus } from '@kdgat/schedulers';

/** Polls (every 250 ms) until every task of every job has finished. */
export async function waitForJobs(
  s: Scheduler,
  ids: string[],
  timeoutMs: number,
  expectedTasks: Record<string, number> = {},
): Promise<Map<string, TaskStatus[]>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const states = await s.query(ids);
    const done = ids.every((id) => {
      const tasks = states.get(id) ?? [];
      return tasks.length >= (expectedTasks[id] ?? 1) && tasks.every((t) => !isActive(t.state));
    });
    if (done) return states;
    if (Date.now() > deadline)
      throw new Error(
        `jobs ${ids.join(',')} not finished after ${timeoutMs} ms: ${JSON.stringify([...states])}`,
      );
    await new Promise((r) => setTimeout(r, 250));
  }
}
