// What a plan will charge, before it is queued: per stage and in total, GPU-hours, core-hours of
// effective cores and the site's billing units, in the worst case (every task runs to its time limit)
// and the expected case (each task runs as long as the same stage ran before). Pure.
import { parseSlurmTime, type ClusterProfile, type Partition, type Resources } from '@kdgat/config';
import { percentile } from '../history/right-size.ts';
import type { TaskUsage } from '../records/record.ts';

export interface CostFigures {
  /** Wall-clock hours summed over tasks. */
  taskHours: number;
  /** Effective cores x hours (what the site records as core-hours). */
  coreHours: number;
  gpuHours: number;
  /** In the profile's billing unit; null when the partition has no rates. */
  units: number | null;
}

export interface StageCostInput {
  id: string;
  /** Array tasks (sweep points, tune workers), 1 for a single job. */
  tasks: number;
  resources: Resources;
  /** Seconds one task is expected to run (from history); absent without history. */
  expectedSecondsPerTask?: number;
}

export interface StageCost {
  id: string;
  tasks: number;
  partition: string;
  /** Billed cores of one job or array task (all its nodes and tasks per node). */
  effectiveCoresPerTask: number;
  gpusPerTask: number;
  timeLimitSeconds: number;
  worst: CostFigures;
  /** From history; absent when the stage has none. */
  expected?: CostFigures & { secondsPerTask: number };
}

export interface CostEstimate {
  unit: string | null;
  source: string | null;
  stages: StageCost[];
  worst: CostFigures;
  /** Stages without history counted at their time limit (`expectedFromHistory` says which had it). */
  expected: CostFigures;
  expectedFromHistory: string[];
}

/**
 * Cores the site charges for one job (one array task): on each node max(cpus per task x tasks per
 * node, memory / the partition's memory per core), times the nodes; whole nodes for a multi-node job
 * when the site says so (OSC). Throws when the cores asked for do not fit a node (validation refuses
 * such a spec first): an estimate never quietly bills less than the request.
 */
export function effectiveCores(r: Resources, p: Partition, wholeNodesWhenMultiNode: boolean): number {
  const cores = r.cpus * r.ntasksPerNode;
  if (cores > p.coresPerNode)
    throw new Error(
      `resources.cpus: ${r.cpus} cpus per task x ${r.ntasksPerNode} tasks per node = ${cores} cores do not fit a node of ` +
        `${p.name}; expected cpus x ntasksPerNode <= ${p.coresPerNode}`,
    );
  if (r.nodes > 1 && wholeNodesWhenMultiNode) return r.nodes * p.coresPerNode;
  const memPerCore = p.memPerCoreGB ?? p.memPerNodeGB / p.coresPerNode;
  // Memory up to the node's usable memory may round to one core more than the node has.
  const memCores = Math.min(Math.ceil(r.memGB / memPerCore - 1e-9), p.coresPerNode);
  return Math.max(cores, memCores) * r.nodes;
}

function figures(
  seconds: number,
  tasks: number,
  cores: number,
  gpus: number,
  rates?: { coreHour: number; gpuHour: number },
): CostFigures {
  const taskHours = (seconds / 3600) * tasks;
  const coreHours = taskHours * cores;
  const gpuHours = taskHours * gpus;
  return {
    taskHours,
    coreHours,
    gpuHours,
    units: rates ? coreHours * rates.coreHour + gpuHours * rates.gpuHour : null,
  };
}

function add(a: CostFigures, b: CostFigures): CostFigures {
  return {
    taskHours: a.taskHours + b.taskHours,
    coreHours: a.coreHours + b.coreHours,
    gpuHours: a.gpuHours + b.gpuHours,
    units: a.units === null || b.units === null ? null : a.units + b.units,
  };
}

/** Seconds one task of a stage is expected to run: the median of its completed tasks; none without. */
export function expectedSecondsPerTask(tasks: readonly TaskUsage[]): number | undefined {
  const done = tasks.filter((t) => t.completed && t.elapsedSeconds !== null).map((t) => t.elapsedSeconds!);
  return done.length > 0 ? percentile(done, 0.5) : undefined;
}

const ZERO: CostFigures = { taskHours: 0, coreHours: 0, gpuHours: 0, units: 0 };

export function estimateCost(cluster: ClusterProfile, stages: readonly StageCostInput[]): CostEstimate {
  const charging = cluster.charging;
  let worst = ZERO;
  let expected = ZERO;
  const fromHistory: string[] = [];
  const out = stages.map((s): StageCost => {
    const p = cluster.partitions.find((q) => q.name === s.resources.partition);
    if (!p)
      throw new Error(`stage ${s.id}: partition ${s.resources.partition} is not one of ${cluster.name}'s`);
    const rates = charging?.partitions[p.name];
    const cores = effectiveCores(s.resources, p, charging?.wholeNodesWhenMultiNode ?? true);
    const gpus = s.resources.gpus.count * s.resources.nodes;
    const limit = parseSlurmTime(s.resources.time);
    const w = figures(limit, s.tasks, cores, gpus, rates);
    worst = add(worst, w);
    const stage: StageCost = {
      id: s.id,
      tasks: s.tasks,
      partition: p.name,
      effectiveCoresPerTask: cores,
      gpusPerTask: gpus,
      timeLimitSeconds: limit,
      worst: w,
    };
    if (s.expectedSecondsPerTask !== undefined) {
      const secs = Math.min(s.expectedSecondsPerTask, limit);
      stage.expected = { ...figures(secs, s.tasks, cores, gpus, rates), secondsPerTask: secs };
      expected = add(expected, stage.expected);
      fromHistory.push(s.id);
    } else {
      expected = add(expected, w);
    }
    return stage;
  });
  return {
    unit: charging?.unit ?? null,
    source: charging?.source ?? null,
    stages: out,
    worst,
    expected,
    expectedFromHistory: fromHistory,
  };
}

/** `12.3 USD`, `0.0042 USD`: enough digits to see small figures. */
export function formatUnits(units: number | null, unit: string | null): string {
  if (units === null || unit === null) return 'unknown (no rates for this partition)';
  const digits = units >= 100 ? 0 : units >= 1 ? 2 : 4;
  return `${units.toFixed(digits)} ${unit}`;
}

export function formatHours(h: number): string {
  return h >= 100 ? h.toFixed(0) : h >= 1 ? h.toFixed(2) : h.toFixed(4);
}
