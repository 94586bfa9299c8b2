// Requests sized from history: for cpus, memory and time, the 95th percentile of what finished tasks
// of the same stage used, times a margin, never below the largest value seen, never above the
// partition. cpus are per task (--cpus-per-task), memory per node. Pure.
import { formatSlurmTime, parseSlurmTime, type Partition, type Resources } from '@kdgat/config';
import type { TaskUsage } from '../records/record.ts';

export const RIGHT_SIZE_POLICY = {
  /** Nearest-rank percentile of the observed values. */
  percentile: 0.95,
  /** Multiplied onto the percentile. */
  margin: 1.25,
  /** Time is rounded up to whole minutes of this many. */
  timeStepMinutes: 5,
} as const;

export interface Suggested<T> {
  value: T;
  current: T;
  /** How it was reached, in words. */
  basis: string;
}

export interface RightSizing {
  /** Finished tasks used, and the runs they came from. */
  tasks: number;
  runs: number;
  cpus?: Suggested<number>;
  memGB?: Suggested<number>;
  time?: Suggested<string>;
  notes: string[];
}

export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) throw new Error('percentile of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1]!;
}

function sized(values: number[], policy = RIGHT_SIZE_POLICY): { raw: number; p: number; max: number } {
  const p = percentile(values, policy.percentile);
  const max = Math.max(...values);
  return { raw: Math.max(p * policy.margin, max), p, max };
}

const pct = (q: number) => `p${Math.round(q * 100)}`;

/**
 * Suggestions for one stage from its finished (COMPLETED) tasks. `leadSeconds`: the requeue signal's
 * lead (the time limit must leave it free); `numWorkers`: the stage's data.num_workers when set.
 */
export function rightSize(input: {
  tasks: readonly TaskUsage[];
  runs: number;
  current: Resources;
  partition: Partition;
  leadSeconds: number;
  numWorkers?: number;
}): RightSizing {
  const { current, partition } = input;
  const policy = RIGHT_SIZE_POLICY;
  const done = input.tasks.filter((t) => t.completed);
  const out: RightSizing = { tasks: done.length, runs: input.runs, notes: [] };
  if (done.length === 0) {
    out.notes.push(
      input.tasks.length > 0
        ? `${input.tasks.length} earlier task(s) of this stage, none completed: nothing to size from`
        : 'no history for this stage: the spec is kept',
    );
    return out;
  }
  const rule = `${pct(policy.percentile)} x ${policy.margin}, at least the largest seen`;

  const peaks = done.flatMap((t) => (t.peakRssMB !== null ? [t.peakRssMB / 1024] : []));
  if (peaks.length > 0) {
    const s = sized(peaks);
    let mem = Math.max(1, Math.ceil(s.raw));
    let basis = `peak RSS ${pct(policy.percentile)} ${s.p.toFixed(2)} GB, max ${s.max.toFixed(2)} GB (${rule})`;
    if (mem > partition.memPerNodeGB) {
      mem = partition.memPerNodeGB;
      basis += `, capped at the ${partition.name} node's ${partition.memPerNodeGB} GB`;
    }
    out.memGB = { value: mem, current: current.memGB, basis };
  } else out.notes.push('no peak memory recorded: memGB kept');

  // A record's CPU time is the whole job's; `cpus` is per task (--cpus-per-task): cores busy per task
  // are the job's divided by its tasks (records written before `requested.tasks` existed had one).
  const cores = done.flatMap((t) => (t.meanCpus !== null ? [t.meanCpus / (t.requested.tasks ?? 1)] : []));
  if (cores.length > 0) {
    const s = sized(cores);
    const tasks = current.ntasksPerNode;
    const perTask = done.some((t) => (t.requested.tasks ?? 1) > 1) ? ' per task' : '';
    let cpus = Math.max(1, Math.ceil(s.raw - 1e-9));
    let basis = `cores busy on average${perTask} ${pct(policy.percentile)} ${s.p.toFixed(2)}, max ${s.max.toFixed(2)} (${rule})`;
    if (input.numWorkers !== undefined && cpus < input.numWorkers + 1) {
      cpus = input.numWorkers + 1;
      basis += `; raised to data.num_workers + 1 = ${cpus}`;
    }
    // Where memory is billed as cores, cores up to the billed count cost nothing more: per task,
    // the billed cores of a node shared by its tasks.
    const memGB = out.memGB?.value ?? current.memGB;
    if (partition.memPerCoreGB) {
      const billed = Math.ceil(memGB / partition.memPerCoreGB - 1e-9);
      const free = Math.floor(billed / tasks);
      if (free > cpus) {
        cpus = free;
        basis +=
          tasks === 1
            ? `; raised to ${billed}, the cores ${memGB} GB is billed as on ${partition.name} (free loader workers)`
            : `; raised to ${free}, the ${billed} cores ${memGB} GB is billed as on ${partition.name} shared by ${tasks} tasks (free loader workers)`;
      }
    }
    const fit = Math.max(1, Math.floor(partition.coresPerNode / tasks));
    if (cpus > fit) {
      cpus = fit;
      basis +=
        tasks === 1
          ? `, capped at ${partition.coresPerNode} cores`
          : `, capped at ${fit} per task (${partition.coresPerNode} cores / ${tasks} tasks per node)`;
    }
    out.cpus = { value: cpus, current: current.cpus, basis };
  } else out.notes.push('no CPU time recorded: cpus kept');

  const elapsed = done.flatMap((t) => (t.elapsedSeconds !== null ? [t.elapsedSeconds] : []));
  if (elapsed.length > 0) {
    const s = sized(elapsed);
    const step = policy.timeStepMinutes * 60;
    let seconds = Math.ceil((s.raw + input.leadSeconds) / step) * step;
    let basis = `elapsed ${pct(policy.percentile)} ${formatSlurmTime(s.p)}, max ${formatSlurmTime(s.max)} (${rule})${
      input.leadSeconds > 0 ? ` + the ${input.leadSeconds} s requeue signal lead` : ''
    }, in ${policy.timeStepMinutes}-minute steps`;
    const limit = parseSlurmTime(partition.maxWalltime);
    if (seconds > limit) {
      seconds = limit;
      basis += `, capped at ${partition.name}'s ${partition.maxWalltime}`;
    }
    out.time = { value: formatSlurmTime(seconds), current: current.time, basis };
  } else out.notes.push('no elapsed time recorded: time kept');

  const hit = done.filter((t) => t.timeLimitHit).length;
  if (hit > 0)
    out.notes.push(
      `${hit} task(s) reached their time limit and were requeued: their total over attempts is used`,
    );
  return out;
}

/** The resources with the suggestions applied. */
export function applyRightSizing(r: Resources, s: RightSizing): Resources {
  return {
    ...r,
    ...(s.cpus ? { cpus: s.cpus.value } : {}),
    ...(s.memGB ? { memGB: s.memGB.value } : {}),
    ...(s.time ? { time: s.time.value } : {}),
  };
}

/**
 * The time limit of a job resubmitted to finish from its checkpoint after it reached its limit:
 * the epochs left at the seconds an epoch took so far (the median between consecutive epochs, so a
 * requeue's gap counts once at most), times the margin, plus `startupSeconds` and the requeue lead,
 * in whole steps, at most the partition's maxWalltime. Without two epochs to measure: twice the
 * current limit (capped the same way).
 */
export function resumeTime(input: {
  /** Wall-clock times (epoch seconds) at which the epochs so far ended, in order (history.csv `time`). */
  epochEnds: readonly number[];
  /** Epochs the stage trains in all (training.max_epochs). */
  maxEpochs: number;
  current: string;
  partition: Partition;
  leadSeconds: number;
  startupSeconds?: number;
}): Suggested<string> {
  const policy = RIGHT_SIZE_POLICY;
  const step = policy.timeStepMinutes * 60;
  const limit = parseSlurmTime(input.partition.maxWalltime);
  const gaps = input.epochEnds
    .slice(1)
    .map((t, i) => t - input.epochEnds[i]!)
    .filter((g) => g > 0);
  let seconds: number;
  let basis: string;
  if (gaps.length > 0) {
    const perEpoch = percentile(gaps, 0.5);
    const left = Math.max(1, input.maxEpochs - input.epochEnds.length);
    const startup = input.startupSeconds ?? 300;
    seconds = Math.ceil((perEpoch * left * policy.margin + startup + input.leadSeconds) / step) * step;
    basis = `${left} epoch(s) left of ${input.maxEpochs} at ${perEpoch < 10 ? perEpoch.toPrecision(2) : Math.round(perEpoch)} s each (median of ${gaps.length}) x ${policy.margin}, + ${startup} s start${
      input.leadSeconds > 0 ? ` + the ${input.leadSeconds} s requeue signal lead` : ''
    }, in ${policy.timeStepMinutes}-minute steps`;
  } else {
    seconds = Math.ceil((2 * parseSlurmTime(input.current)) / step) * step;
    basis = `no two epochs recorded to time: twice the limit ${input.current}`;
  }
  if (seconds > limit) {
    seconds = limit;
    basis += `, capped at ${input.partition.name}'s ${input.partition.maxWalltime}`;
  }
  return { value: formatSlurmTime(seconds), current: input.current, basis };
}
