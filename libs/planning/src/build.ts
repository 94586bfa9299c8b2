// Builds the run plan: which scripts to render, which become arrays (chunked to the
// scheduler's MaxArraySize) and which edges chain them: `aftercorr` between arrays over the same
// points (task i waits for task i only, so one failed point does not cancel the others),
// `afterok` on every job of the stage otherwise. A sharded stage is an array of its shard tasks
// and a join job after them (`afterok`), which is what later stages wait for. Pure: no disk, no spawning.
import type { Scalar } from '@kdgat/config';
import type { Throttle } from './throttle.ts';

/** The parts of a resolved stage the plan needs (a subset of @kdgat/config's ResolvedStage). */
export interface PlanStage {
  id: string;
  dependsOn: string[];
  resources: { arrayConcurrency?: number };
  /** Spread over this many array tasks, then joined (a preprocess stage; never in a sweep). */
  shards?: number;
  /** false: outside the spec's `sweep.stages`, one job however many points the sweep has. */
  sweep?: false;
}

export interface ArrayChunk {
  /** Global index of the chunk's task 0 in the sweep. */
  firstPoint: number;
  size: number;
}

export interface PlannedJob {
  /** Unique within the run: the stage id, or `<stage>.chunk<k>` when a sweep is chunked. */
  key: string;
  stageId: string;
  /** `--job-name` (chunks of one stage share it; `%x` in log names). */
  name: string;
  /** Script path relative to the run dir. */
  scriptFile: string;
  /** Plan keys this job waits for (all of them, whatever the kind of edge). */
  dependsOn: string[];
  /**
   * The subset of `dependsOn` this array job waits for task by task (`aftercorr`): arrays over the
   * same sweep points, chunk k after chunk k. The rest are `afterok` on the whole job.
   */
  aftercorr?: string[];
  /**
   * The subset of `dependsOn` this job waits to end whatever their outcome (`afterany`): a later
   * chunk of a throttled sweep after the chunk before it (throttle.ts).
   */
  afterany?: string[];
  array?: { size: number; concurrency: number; firstPoint: number };
  /** The sweep points this job's tasks run, task i ↔ points[i]. */
  points?: Record<string, Scalar>[];
  /** A study's worker array (`runner tune`): task i is worker i. */
  tune?: { workers: number };
  /**
   * A sharded stage: its array of `count` shard tasks (`task`: true, key `<stage>.shards`), or
   * the join job after them (`task`: false, key `<stage>`).
   */
  shards?: { count: number; task: boolean };
}

export interface RunPlan {
  experiment: string;
  specHash: string;
  jobs: PlannedJob[];
  /** The run's throttle, once applied (throttle.ts). */
  throttle?: Throttle;
}

/**
 * Splits N sweep points into arrays whose indices stay below MaxArraySize
 * (SLURM caps the index value, not the task count: every chunk restarts at 0).
 */
export function chunkSweep(points: number, maxArraySize: number): ArrayChunk[] {
  if (!Number.isInteger(points) || points < 0)
    throw new Error(`sweep size ${points}: expected a whole number >= 0`);
  if (!Number.isInteger(maxArraySize) || maxArraySize < 1)
    throw new Error(`MaxArraySize ${maxArraySize}: expected a whole number >= 1`);
  const chunks: ArrayChunk[] = [];
  for (let first = 0; first < points; first += maxArraySize) {
    chunks.push({ firstPoint: first, size: Math.min(maxArraySize, points - first) });
  }
  return chunks;
}

/** Stages ordered so every stage comes after the stages it depends on; names a cycle or unknown id. */
export function orderStages<S extends PlanStage>(stages: readonly S[]): S[] {
  const byId = new Map(stages.map((s) => [s.id, s]));
  const done = new Set<string>();
  const visiting = new Set<string>();
  const out: S[] = [];
  const visit = (s: S, path: string[]) => {
    if (done.has(s.id)) return;
    if (visiting.has(s.id)) throw new Error(`stages form a cycle: ${[...path, s.id].join(' -> ')}`);
    visiting.add(s.id);
    for (const dep of s.dependsOn) {
      const d = byId.get(dep);
      if (!d)
        throw new Error(
          `stage ${s.id}: dependsOn ${JSON.stringify(dep)} names no stage; expected one of ${[...byId.keys()].join(', ')}`,
        );
      visit(d, [...path, s.id]);
    }
    visiting.delete(s.id);
    done.add(s.id);
    out.push(s);
  };
  for (const s of stages) visit(s, []);
  return out;
}

export function buildPlan(input: {
  experiment: string;
  specHash: string;
  stages: readonly PlanStage[];
  sweepPoints: readonly Record<string, Scalar>[];
  maxArraySize: number;
  /** `--job-name` of a stage's jobs (the templates' jobNameFor); default `<experiment>-<stage>`. */
  jobName?: (stageId: string) => string;
}): RunPlan {
  const nameOf = input.jobName ?? ((id: string) => `${input.experiment}-${id}`);
  const jobs: PlannedJob[] = [];
  const keysOfStage = new Map<string, string[]>();
  for (const stage of orderStages(input.stages)) {
    // A stage that is not an array needs every task of an array it depends on: all its chunks.
    const dependsOn = stage.dependsOn.flatMap((d) => keysOfStage.get(d) ?? []);
    const base = nameOf(stage.id);
    if (stage.shards !== undefined) {
      if (input.sweepPoints.length > 0)
        throw new Error(`stage ${stage.id}: a sharded stage cannot be part of a sweep`);
      jobs.push(...shardedJobs(stage, stage.shards, base, dependsOn, input.maxArraySize));
      keysOfStage.set(stage.id, [stage.id]);
      continue;
    }
    if (input.sweepPoints.length === 0 || stage.sweep === false) {
      jobs.push({
        key: stage.id,
        stageId: stage.id,
        name: base,
        scriptFile: `scripts/${stage.id}.sbatch`,
        dependsOn,
      });
      keysOfStage.set(stage.id, [stage.id]);
      continue;
    }
    // Every swept stage is chunked the same way, so chunk k of a stage runs the same points as
    // chunk k of the stage it depends on: task i needs only task i there.
    // A stage outside the sweep runs once: every chunk waits for its one job as a whole.
    const chunks = chunkSweep(input.sweepPoints.length, input.maxArraySize);
    const once = new Set(input.stages.filter((s) => s.sweep === false).map((s) => s.id));
    const keys: string[] = [];
    chunks.forEach((chunk, k) => {
      const key = chunks.length === 1 ? stage.id : `${stage.id}.chunk${k}`;
      const concurrency = stage.resources.arrayConcurrency ?? 0;
      const corresponding = stage.dependsOn.filter((d) => !once.has(d)).map((d) => keysOfStage.get(d)![k]!);
      const whole = stage.dependsOn.filter((d) => once.has(d)).flatMap((d) => keysOfStage.get(d) ?? []);
      jobs.push({
        key,
        stageId: stage.id,
        name: base,
        scriptFile: `scripts/${key}.sbatch`,
        dependsOn: [...whole, ...corresponding],
        ...(corresponding.length > 0 ? { aftercorr: corresponding } : {}),
        array: {
          size: chunk.size,
          concurrency: concurrency > 0 ? Math.min(concurrency, chunk.size) : chunk.size,
          firstPoint: chunk.firstPoint,
        },
        points: input.sweepPoints.slice(chunk.firstPoint, chunk.firstPoint + chunk.size),
      });
      keys.push(key);
    });
    keysOfStage.set(stage.id, keys);
  }
  return { experiment: input.experiment, specHash: input.specHash, jobs };
}

/** A sharded stage's two jobs: the array of its shard tasks, then the join that later stages wait for. */
function shardedJobs(
  stage: PlanStage,
  count: number,
  name: string,
  dependsOn: string[],
  maxArraySize: number,
): PlannedJob[] {
  if (!Number.isInteger(count) || count < 2)
    throw new Error(`stage ${stage.id}: shards ${count}: expected a whole number >= 2`);
  if (count > maxArraySize)
    throw new Error(
      `stage ${stage.id}: ${count} shards is more than the cluster's MaxArraySize (${maxArraySize}): use at most ${maxArraySize}`,
    );
  const concurrency = stage.resources.arrayConcurrency ?? 0;
  const tasksKey = `${stage.id}.shards`;
  return [
    {
      key: tasksKey,
      stageId: stage.id,
      name,
      scriptFile: `scripts/${tasksKey}.sbatch`,
      dependsOn,
      array: {
        size: count,
        concurrency: concurrency > 0 ? Math.min(concurrency, count) : count,
        firstPoint: 0,
      },
      shards: { count, task: true },
    },
    {
      key: stage.id,
      stageId: stage.id,
      name,
      scriptFile: `scripts/${stage.id}.sbatch`,
      dependsOn: [tasksKey],
      shards: { count, task: false },
    },
  ];
}
