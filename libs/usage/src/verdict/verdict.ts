// The bottleneck a run's records show, with the change to try. Thresholds are documented in the
// README; each finding names the figures it rests on. Pure.
import type { TaskUsage } from '../records/record.ts';

export const VERDICT_THRESHOLDS = {
  /** Data-wait (share of step time spent waiting for the DataLoader) above this: input-bound. */
  dataWaitHigh: 0.2,
  /** ... and below this, with the GPU mostly idle: the step itself is CPU-bound. */
  dataWaitLow: 0.1,
  /** GPU mostly idle: mean utilisation below this (%) ... */
  gpuMeanUtilLow: 30,
  /** ... or at least this share of samples under 10% utilisation. */
  gpuIdleShareHigh: 0.5,
  /** Peak memory below this share of the request: over-asked. */
  memoryUsedShareLow: 0.5,
} as const;

export type FindingCode = 'DATA_WAIT' | 'CPU_BOUND' | 'MEMORY_OVER_REQUESTED' | 'TIME_LIMIT';

export interface Finding {
  code: FindingCode;
  /** One line: what the records show. */
  evidence: string;
  /** What to change. */
  fix: string;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const pct = (x: number) => `${(x * 100).toFixed(0)}%`;

export function verdictsFor(input: {
  stageId: string;
  tasks: readonly TaskUsage[];
  /** What the stage asks for now. */
  request: { cpus: number; memGB: number };
  numWorkers?: number;
  requeue: { enabled: boolean; maxRestarts: number; leadSeconds: number };
  /** The right-sized memory (from `rightSize`), when history gives one. */
  suggestedMemGB?: number;
}): Finding[] {
  const t = VERDICT_THRESHOLDS;
  const findings: Finding[] = [];
  const tasks = input.tasks;
  if (tasks.length === 0) return findings;

  const waits = tasks.flatMap((x) => (x.dataWaitFraction !== null ? [x.dataWaitFraction] : []));
  const wait = waits.length ? mean(waits) : null;
  const gpus = tasks.flatMap((x) => (x.gpu ? [x.gpu] : []));
  const util = gpus.length ? mean(gpus.map((g) => g.meanUtil)) : null;
  const idle = gpus.length ? mean(gpus.map((g) => g.idleShare)) : null;

  if (wait !== null && wait > t.dataWaitHigh) {
    const workers = input.numWorkers;
    const room = input.request.cpus - 1 - (workers ?? 0);
    findings.push({
      code: 'DATA_WAIT',
      evidence: `${input.stageId}: steps wait for data ${pct(wait)} of the time (threshold ${pct(t.dataWaitHigh)})`,
      fix:
        room > 0
          ? `more loader workers: data.num_workers=${(workers ?? 0) + room} fits the ${input.request.cpus} cpus requested; or stage the dataset to node-local disk (staging.enabled: true)`
          : `the ${input.request.cpus} cpus are all loader workers already: ask for more cpus with more data.num_workers, or stage the dataset to node-local disk (staging.enabled: true)`,
    });
  }
  if (util !== null && idle !== null && (util < t.gpuMeanUtilLow || idle >= t.gpuIdleShareHigh) && (wait ?? 0) < t.dataWaitLow) {
    findings.push({
      code: 'CPU_BOUND',
      evidence: `${input.stageId}: GPU busy ${util.toFixed(0)}% on average, ${pct(idle)} of samples under 10%, while data-wait is only ${pct(wait ?? 0)}`,
      fix: 'the training step is CPU-bound, not input-bound: profile a few steps (profiling.enabled: true) and move the work it shows to the GPU (a larger batch, fused layers, no per-step host copies)',
    });
  }
  const peaks = tasks.flatMap((x) => (x.peakRssMB !== null ? [x.peakRssMB / 1024] : []));
  if (peaks.length > 0) {
    const peak = Math.max(...peaks);
    if (peak < input.request.memGB * t.memoryUsedShareLow) {
      findings.push({
        code: 'MEMORY_OVER_REQUESTED',
        evidence: `${input.stageId}: peak memory ${peak.toFixed(2)} GB of ${input.request.memGB} GB requested (${pct(peak / input.request.memGB)}, threshold ${pct(t.memoryUsedShareLow)})`,
        fix:
          input.suggestedMemGB !== undefined
            ? `ask for memGB: ${input.suggestedMemGB} (the right-sized figure; \`train --right-size\` applies it)`
            : `ask for less memory (\`plan\` suggests a figure once the stage has finished runs)`,
      });
    }
  }
  const hit = tasks.filter((x) => x.timeLimitHit);
  if (hit.length > 0) {
    const restarts = Math.max(...tasks.map((x) => x.attempts.length - 1));
    findings.push({
      code: 'TIME_LIMIT',
      evidence: `${input.stageId}: ${hit.length} of ${tasks.length} task(s) reached their time limit (most attempts: ${restarts + 1})`,
      fix: input.requeue.enabled
        ? `requeue is on (signal ${input.requeue.leadSeconds} s before the limit, at most ${input.requeue.maxRestarts} restarts): raise resources.time, or requeue.maxRestarts if tasks ran out of restarts; a lead long enough to write the checkpoint matters (requeue.leadSeconds)`
        : 'turn on requeue (requeue.enabled: true) so the pipeline checkpoints before the limit and resumes, or raise resources.time',
    });
  }
  return findings;
}
