import { describe, expect, it } from 'vitest';
import { buildPlan } from './build.ts';
import { requestFor } from './submit.ts';
import type { RenderedJob } from './render.ts';
import { ThrottleError, throttleLines, throttlePlan } from './throttle.ts';

const stage = (id: string, dependsOn: string[] = [], arrayConcurrency = 4) => ({
  id,
  dependsOn,
  resources: { arrayConcurrency },
});
const points = (n: number) => Array.from({ length: n }, (_, i) => ({ seed: i }));

/** A sweep of 25 points over two chained stages, chunked at 10: three chunks per stage. */
const sweepPlan = () =>
  buildPlan({
    experiment: 'big',
    specHash: 'h',
    stages: [stage('a', [], 8), stage('b', ['a'], 8)],
    sweepPoints: points(25),
    maxArraySize: 10,
  });

describe('throttlePlan', () => {
  it("splits the spec's concurrency between the array stages and holds each stage's later chunks until the one before drains", () => {
    const { plan, throttle } = throttlePlan(sweepPlan(), { concurrency: 6, limits: {} });
    expect(throttle).toMatchObject({ concurrency: 6, perArrayStage: 3, tasks: 50 });
    expect(throttle.held).toEqual(['a.chunk1', 'a.chunk2', 'b.chunk1', 'b.chunk2']);
    const byKey = new Map(plan.jobs.map((j) => [j.key, j]));
    expect(plan.jobs.every((j) => j.array!.concurrency === 3)).toBe(true);
    // chunk 1 of b: task by task after chunk 1 of a, and after chunk 0 of b has ended (any outcome).
    expect(byKey.get('b.chunk1')).toMatchObject({
      dependsOn: ['a.chunk1', 'b.chunk0'],
      aftercorr: ['a.chunk1'],
      afterany: ['b.chunk0'],
    });
    expect(byKey.get('a.chunk0')!.afterany).toBeUndefined();
    // At most one chunk per stage at a time, each at %3: never more than 6 tasks of the run at once.
    const perStage = new Map<string, number>();
    for (const j of plan.jobs)
      if (!j.afterany) perStage.set(j.stageId, (perStage.get(j.stageId) ?? 0) + j.array!.concurrency);
    expect([...perStage.values()].reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(6);
  });

  it("takes the site's running limit less the user's jobs already there when that is lower", () => {
    const { throttle, plan } = throttlePlan(sweepPlan(), {
      concurrency: 100,
      limits: { maxRunningJobsPerUser: 128 },
      activeJobs: 124,
    });
    expect(throttle.concurrency).toBe(4);
    expect(throttle.why).toBe(
      "the site's 128 running jobs per user less 124 of yours queued or running (within the spec's concurrency 100)",
    );
    expect(plan.jobs[0]!.array!.concurrency).toBe(2);
  });

  it('keeps a stage lower than its share when it asked for less, and changes nothing without a limit', () => {
    const plan = buildPlan({
      experiment: 'x',
      specHash: 'h',
      stages: [stage('a', [], 2)],
      sweepPoints: points(5),
      maxArraySize: 1001,
    });
    expect(throttlePlan(plan, { concurrency: 10, limits: {} }).plan.jobs[0]!.array!.concurrency).toBe(2);
    const free = throttlePlan(plan, { limits: {} });
    expect(free.throttle.concurrency).toBeUndefined();
    expect(free.plan.jobs).toEqual(plan.jobs);
    expect(throttleLines(free.throttle, free.plan)).toEqual([]);
  });

  it('says when the limit is already full and when it is below the number of array stages', () => {
    const { throttle } = throttlePlan(sweepPlan(), { limits: { maxRunningJobsPerUser: 10 }, activeJobs: 12 });
    expect(throttle.concurrency).toBe(1);
    expect(throttle.warnings).toEqual([
      "your 12 queued or running jobs already fill the site's 10 running jobs per user: this run's jobs wait for them",
      "concurrency 1 is below the run's 2 array stages: each runs 1 task at a time (up to 2 at once)",
    ]);
  });

  it("refuses a run that alone would pass the site's submit limit, before anything is queued", () => {
    expect(() =>
      throttlePlan(sweepPlan(), { limits: { maxSubmittedJobsPerUser: 60 }, activeJobs: 11 }),
    ).toThrow(ThrottleError);
    expect(() =>
      throttlePlan(sweepPlan(), { limits: { maxSubmittedJobsPerUser: 60 }, activeJobs: 11 }),
    ).toThrow(
      /this run is 50 jobs .* and 11 of yours are queued or running: more than the site's 60 queued jobs per user/,
    );
    expect(() =>
      throttlePlan(sweepPlan(), { limits: { maxSubmittedJobsPerUser: 60 }, activeJobs: 10 }),
    ).not.toThrow();
  });

  it('prints the figure, where it came from and the held chunks', () => {
    const { plan, throttle } = throttlePlan(sweepPlan(), { concurrency: 6, limits: {} });
    expect(throttleLines(throttle, plan)).toEqual([
      "throttle: at most 6 of this run's 50 jobs at once, from the spec's concurrency 6; each of its 2 array stage(s) at most 3 task(s) at once",
      '  held until the chunk before drains: a.chunk1, a.chunk2, b.chunk1, b.chunk2 (afterany)',
    ]);
  });

  it('submits the held edge as afterany, apart from afterok and aftercorr', () => {
    const { plan } = throttlePlan(sweepPlan(), { concurrency: 6, limits: {} });
    const job = plan.jobs.find((j) => j.key === 'b.chunk1')!;
    const rendered = {
      job,
      script: '',
      runRoot: '/r/outputs',
      logs: { output: '/r/o', error: '/r/e' },
      hints: { cpusPerTask: 1, timeLimit: '1:00:00' },
      library: { path: '/s/scripts/lib/job-x.sh', sha256: 'c'.repeat(64), source: 'site' },
    } satisfies RenderedJob;
    const ids = new Map([
      ['a.chunk1', '11'],
      ['b.chunk0', '20'],
    ]);
    const request = requestFor(rendered, '/r', ids);
    expect(request.dependsOn).toEqual([]);
    expect(request.aftercorr).toEqual(['11']);
    expect(request.afterany).toEqual(['20']);
    expect(request.array).toEqual({ size: 10, concurrency: 3 });
  });
});
