// Failures survived by cause: from a run's manifest, the final states of its jobs and what each
// failed task left (job record, log tail, history, requeue acknowledgement), what to resubmit and
// with which sbatch options, and where to stop and why. Pure; the runner submits, records, prints.
//
//   NODE_FAIL      → the same script, `--exclude=<node>` (task.nodes, else the job record's host)
//   OUT_OF_MEMORY  → `--mem` raised to max(2 × request, 1.5 × peak), whole GB, at most the node's
//   GPU_OOM        → `--export=ALL,<contract oom.batchSizeEnv>=<half the batch the back-off gave up at>`
//   TIMEOUT        → (no requeue acknowledged) `--time` sized from the epochs left, at most the partition's
//   DEPENDENCY     → a job cancelled because its upstream failed: resubmitted after the upstream's resubmission
//   anything else  → stop, with the triage line
// Every resubmission resumes from the run dir's checkpoints/last.ckpt (same script, same run dir), is
// bounded per job (`requeue.maxRecoveries`) and is counted against the spec's budget.
import {
  REQUEUE_DEFAULTS,
  RUN_CONTRACT,
  loadPipelineSchema,
  overrideDefault,
  parseSlurmTime,
  type Partition,
  type ResolvedExperiment,
  type ResolvedStage,
} from '@kdgat/config';
import { resubmissionCost } from '@kdgat/planning';
import { isActive, parseOverride, type JobState, type TaskStatus } from '@kdgat/schedulers';
import { resumeTime, type JobRecord } from '@kdgat/usage';
import type { EarlierTask, Manifest, ManifestJob } from '../manifest.ts';
import type { JobProgress } from '../track/track.ts';
import { triageTask } from '../track/triage.ts';

export type RecoveryCause = 'NODE_FAIL' | 'OUT_OF_MEMORY' | 'GPU_OOM' | 'TIMEOUT' | 'DEPENDENCY';

/** What a failed task left, read by facts.ts (tests give their own). */
export interface TaskFacts {
  /** The last lines of its log (stdout and stderr). */
  logTail: string;
  /** Its job record (the epilog's line for this very submission), when the epilog wrote one. */
  record?: JobRecord;
  /** requeue_ack.json's `time` (epoch seconds), when the pipeline acknowledged a requeue signal. */
  ackTime?: number;
  /** When each epoch so far ended (history.csv `time`, epoch seconds), in order. */
  epochEnds: number[];
  /**
   * The pipeline's declared checkpoint (the default pipeline's checkpoints/last.ckpt) exists; undefined where it
   * cannot be seen (a site's copy leaves checkpoints there).
   */
  checkpoint?: boolean;
  /** The newest file the declaration's checkpoint patterns name, relative to the task's dir. */
  checkpointFile?: string;
}

export interface RecoveryInput {
  manifest: Manifest;
  /** Every job's state now (after the watch: all ended; `resume`: some may still run). */
  progress: readonly JobProgress[];
  facts: (job: ManifestJob, task: TaskStatus) => TaskFacts;
}

/** A job to submit again. */
export interface Resubmission {
  key: string;
  /** The submission that failed. */
  failedJobId: string;
  state: JobState;
  cause: string;
  /** Array tasks resubmitted; absent: the whole job. */
  tasks?: number[];
  /** sbatch options of the resubmission (each accepted by SUBMIT_OVERRIDES). */
  options: string[];
  /** afterok: plan keys resubmitted before it in this round, and ids of jobs that still run. */
  afterokKeys: string[];
  afterokIds: string[];
  /** aftercorr (task by task): the same. */
  aftercorrKeys: string[];
  aftercorrIds: string[];
  /** Tasks of this job that stay as they ended (not resubmitted). */
  earlierTasks: EarlierTask[];
  worstUnits: number | null;
  /** `job train (1234, NODE_FAIL on c02)`: what failed. */
  head: string;
  /** `excluding c02, resuming from checkpoints/last.ckpt`: what the resubmission does. */
  what: string;
}

/** A job the runner does not resubmit, and why. */
export interface RecoveryStop {
  key: string;
  jobId: string;
  tasks?: number[];
  state: JobState;
  /** The triage kind, or BOUND / BUDGET / UNKNOWN / REFUSED. */
  cause: string;
  /** One line (the triage line, or why the recovery is refused), then the fix on the next. */
  line: string;
}

export interface RecoveryPlan {
  resubmit: Resubmission[];
  stops: RecoveryStop[];
  /** Jobs still pending or running (`resume` of a run not finished): left alone. */
  active: string[];
}

/** The bound of recoveries per job: the spec's requeue.maxRecoveries, else the schema's default. */
export function maxRecoveriesOf(resolved: ResolvedExperiment): number {
  const r = resolved.requeue as { maxRecoveries?: number } | undefined;
  return r?.maxRecoveries ?? REQUEUE_DEFAULTS.maxRecoveries;
}

const GAVE_UP = new RegExp(
  `${RUN_CONTRACT.oom.gaveUpLine.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} (\\d+)`,
  'g',
);
const CUDA_OOM =
  /CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation/i;
const DEPENDENCY = /Dependency/i;

type Classified =
  | { recover: Exclude<RecoveryCause, 'DEPENDENCY'> }
  | { recover: 'DEPENDENCY' }
  | { stop: string; kind: string };

function taskLabel(job: ManifestJob, tasks?: readonly number[]): string {
  return tasks && tasks.length > 0 ? `${job.key}[${tasks.join(',')}]` : job.key;
}

/** The batch size the back-off gave up at (the contract's line in the log), the smallest seen. */
function gaveUpAt(logTail: string): number | undefined {
  const sizes = [...logTail.matchAll(GAVE_UP)].map((m) => Number(m[1]));
  return sizes.length > 0 ? Math.min(...sizes) : undefined;
}

/** The value of `--name=` among options (the last one). */
function optionValue(options: readonly string[], name: string): string | undefined {
  const prefix = `--${name}=`;
  return options
    .filter((o) => o.startsWith(prefix))
    .pop()
    ?.slice(prefix.length);
}

function memGBOf(value: string): number {
  const n = Number(value.slice(0, -1));
  return value.endsWith('M') ? n / 1024 : n;
}

/** The run's stage and its partition, for a job. */
function stageOf(
  resolved: ResolvedExperiment,
  job: ManifestJob,
): { stage: ResolvedStage; partition: Partition } {
  const stage = resolved.stages.find((s) => s.id === job.stageId);
  if (!stage)
    throw new Error(
      `manifest job ${job.key} names stage ${job.stageId}, which the manifest's resolved spec lacks`,
    );
  const partition =
    resolved.cluster.partitions.find((p) => p.name === stage.resources.partition) ?? resolved.partition;
  return { stage, partition };
}

/** training.max_epochs of a task: its sweep point's, the stage's, else the pipeline's default. */
function maxEpochsOf(
  manifest: Manifest,
  job: ManifestJob,
  stage: ResolvedStage,
  index: number | undefined,
): number {
  const key = 'training.max_epochs';
  const point = index === undefined ? undefined : manifest.arrayIndex[job.key]?.[String(index)]?.[key];
  const v = point ?? stage.overrides[key] ?? overrideDefault(key, loadPipelineSchema());
  return typeof v === 'number' ? v : Number(v ?? 0);
}

function triageLine(
  job: ManifestJob,
  task: TaskStatus,
  facts: TaskFacts,
  stage: ResolvedStage,
  resolved: ResolvedExperiment,
): { kind: string; line: string } {
  const t = triageTask(task, facts.logTail, {
    timeLimit: stage.resources.time,
    memGB: stage.resources.memGB,
    dataset: stage.dataset,
    maxRestarts: resolved.requeue?.maxRestarts ?? REQUEUE_DEFAULTS.maxRestarts,
  });
  if (!t) return { kind: task.state, line: `${task.state}\n    fix: read the log (kdgat-runner logs <run>)` };
  return { kind: t.kind, line: `${t.kind}: ${t.what}\n    fix: ${t.fix}` };
}

/** Why a failed task failed, and whether a resubmission can get past it. */
function classify(
  job: ManifestJob,
  task: TaskStatus,
  facts: TaskFacts,
  stage: ResolvedStage,
  resolved: ResolvedExperiment,
  upstreamFailed: boolean,
): Classified {
  const state = task.state;
  if (
    state === 'CANCELLED' &&
    upstreamFailed &&
    (DEPENDENCY.test(task.reason ?? '') || (task.elapsedSeconds ?? 0) === 0)
  )
    return { recover: 'DEPENDENCY' };
  if (state === 'NODE_FAIL') return { recover: 'NODE_FAIL' };
  if ((state === 'OUT_OF_MEMORY' || state === 'FAILED') && CUDA_OOM.test(facts.logTail))
    return { recover: 'GPU_OOM' };
  if (state === 'OUT_OF_MEMORY') return { recover: 'OUT_OF_MEMORY' };
  const triaged = triageLine(job, task, facts, stage, resolved);
  // A cgroup kill that SLURM reported as FAILED (older versions): the log says so.
  if (state === 'FAILED' && triaged.kind === 'OUT_OF_MEMORY') return { recover: 'OUT_OF_MEMORY' };
  if (state === 'TIMEOUT') {
    const start = facts.record?.start ?? null;
    const acknowledged = facts.ackTime !== undefined && start !== null && facts.ackTime >= start;
    if (!acknowledged) return { recover: 'TIMEOUT' };
    return {
      kind: 'TIMEOUT',
      stop: `${triaged.line}\n    (the requeue was acknowledged at ${new Date(facts.ackTime! * 1000).toISOString()}: requeue.maxRestarts bounds those requeues, the runner adds none)`,
    };
  }
  return { kind: triaged.kind, stop: triaged.line };
}

/** Options merged: what the last resubmission carried, then this one's (`--exclude` accumulates). */
function mergeOptions(previous: readonly string[], next: Map<string, string>): string[] {
  const names = ['exclude', 'mem', 'time', 'export', 'array'];
  const out: string[] = [];
  for (const name of names) {
    const value = next.has(name)
      ? next.get(name)
      : name === 'array'
        ? undefined
        : optionValue(previous, name);
    if (value !== undefined && value !== '') out.push(`--${name}=${value}`);
  }
  return out;
}

/** The resubmissions and stops for a run whose jobs ended (those still active are left alone). */
export function decideRecovery(input: RecoveryInput): RecoveryPlan {
  const { manifest, progress } = input;
  const resolved = manifest.resolved as ResolvedExperiment;
  const bound = maxRecoveriesOf(resolved);
  const requeue = { ...REQUEUE_DEFAULTS, ...(resolved.requeue ?? {}) };
  const byKey = new Map(progress.map((p) => [p.job.key, p]));
  const plan: RecoveryPlan = { resubmit: [], stops: [], active: [] };
  const resubmitted = new Map<string, Resubmission>();
  const stopped = new Set<string>();
  // The run's worst case so far: the plan's, and every resubmission's.
  let committed: number | null = manifest.cost?.worst.units ?? null;
  for (const j of manifest.jobs)
    for (const a of j.attempts ?? [])
      committed = committed === null || a.worstUnits === null ? null : committed + a.worstUnits;

  for (const job of manifest.jobs) {
    const p = byKey.get(job.key);
    if (!p || !job.jobId) continue;
    if (p.tasks.some((t) => isActive(t.state))) {
      plan.active.push(job.key);
      continue;
    }
    const expected = job.array?.size ?? 1;
    const failed = p.tasks.filter((t) => t.state !== 'COMPLETED');
    if (failed.length === 0 && p.tasks.length >= expected) continue;
    const stop = (
      cause: string,
      line: string,
      tasks?: number[],
      state: JobState = failed[0]?.state ?? p.state,
    ) => {
      plan.stops.push({ key: job.key, jobId: job.jobId!, ...(tasks ? { tasks } : {}), state, cause, line });
      stopped.add(job.key);
    };
    if (p.tasks.length === 0 || failed.some((t) => t.state === 'UNKNOWN')) {
      stop(
        'UNKNOWN',
        `UNKNOWN: the scheduler no longer knows job ${job.jobId} and the runner never saw it end\n    fix: read its log (kdgat-runner logs <run>) and train again`,
      );
      continue;
    }
    const { stage, partition } = stageOf(resolved, job);
    const corr = new Set(job.aftercorr ?? []);
    // A throttled chunk's afterany edge (the chunk before it) gates nothing: it never blocks a recovery.
    const any = new Set(job.afterany ?? []);
    const upstream = job.dependsOn
      .filter((k) => !any.has(k))
      .map((k) => ({ key: k, corr: corr.has(k), p: byKey.get(k) }));
    const upstreamFailed = upstream.some((u) => u.p && u.p.tasks.some((t) => t.state !== 'COMPLETED'));

    const recover: { task: TaskStatus; facts: TaskFacts; cause: RecoveryCause }[] = [];
    for (const task of failed) {
      const facts = input.facts(job, task);
      const c = classify(job, task, facts, stage, resolved, upstreamFailed);
      const label = taskLabel(job, task.arrayIndex === undefined ? undefined : [task.arrayIndex]);
      if ('stop' in c) {
        stop(
          c.kind,
          `job ${label} (${task.taskJobId ?? job.jobId}, ${task.state}): stopped: ${c.stop}`,
          task.arrayIndex === undefined ? undefined : [task.arrayIndex],
          task.state,
        );
        continue;
      }
      if (c.recover === 'DEPENDENCY') {
        // Recoverable only after every upstream it waited for is resubmitted (or completed).
        const blocked = upstream.find((u) => {
          // afterok waits for every task: one that stopped never completes.
          if (stopped.has(u.key) && !u.corr) return true;
          const r = resubmitted.get(u.key);
          const up = u.p?.tasks ?? [];
          if (u.corr && task.arrayIndex !== undefined) {
            const same = up.find((t) => t.arrayIndex === task.arrayIndex);
            if (!same || same.state === 'COMPLETED') return false;
            return !r || (r.tasks !== undefined && !r.tasks.includes(task.arrayIndex));
          }
          return up.some((t) => t.state !== 'COMPLETED') && !r;
        });
        if (blocked) {
          stop(
            'DEPENDENCY',
            `job ${label} (${task.taskJobId ?? job.jobId}, ${task.state}${task.reason ? `: ${task.reason}` : ''}): stopped: not run because ${blocked.key} failed and is not resubmitted`,
            task.arrayIndex === undefined ? undefined : [task.arrayIndex],
            task.state,
          );
          continue;
        }
      }
      recover.push({ task, facts, cause: c.recover });
    }
    if (recover.length === 0) continue;

    const own = recover.filter((r) => r.cause !== 'DEPENDENCY');
    const made = (job.attempts ?? []).filter((a) => a.cause !== 'DEPENDENCY').length;
    const indices = recover.flatMap((r) => (r.task.arrayIndex === undefined ? [] : [r.task.arrayIndex]));
    const tasks = job.array ? indices.sort((a, b) => a - b) : undefined;
    const causes = [...new Set(recover.map((r) => r.cause))];
    const state = (own[0] ?? recover[0]!).task.state;
    const nodes = [
      ...new Set(recover.flatMap((r) => r.task.nodes ?? (r.facts.record ? [r.facts.record.host] : []))),
    ];
    const causeText = (c: RecoveryCause): string => {
      if (c === 'NODE_FAIL' && nodes.length > 0) return `NODE_FAIL on ${nodes.join(',')}`;
      if (c !== 'DEPENDENCY') return c;
      const t = recover.find((r) => r.cause === c)!.task;
      return `${t.state}${t.reason ? `: ${t.reason}` : ''}`;
    };
    const head = `job ${taskLabel(job, tasks)} (${job.jobId}, ${causes.map(causeText).join(', ')})`;
    if (own.length > 0 && made >= bound) {
      const first = own[0]!;
      const t = triageLine(job, first.task, first.facts, stage, resolved);
      stop(
        'BOUND',
        `${head}: stopped: ${made} recover${made === 1 ? 'y' : 'ies'} already (requeue.maxRecoveries = ${bound}); ${t.line}`,
        tasks,
        state,
      );
      continue;
    }

    const previous = job.attempts?.at(-1)?.options ?? [];
    const next = new Map<string, string>();
    const what: string[] = [];
    const refuse = (line: string, cause = 'REFUSED') =>
      stop(cause, `${head}: stopped: ${line}`, tasks, state);
    let refused = false;

    if (causes.includes('NODE_FAIL')) {
      const excluded = new Set([...(optionValue(previous, 'exclude')?.split(',') ?? []), ...nodes]);
      if (excluded.size > 0) next.set('exclude', [...excluded].join(','));
      what.push(
        nodes.length > 0
          ? `excluding ${[...excluded].join(',')}`
          : 'on any node (which node failed is not known: nothing excluded)',
      );
    }
    if (causes.includes('OUT_OF_MEMORY')) {
      const before = optionValue(previous, 'mem');
      const request = before ? memGBOf(before) : stage.resources.memGB;
      const oom = recover.filter((r) => r.cause === 'OUT_OF_MEMORY');
      const peaks = oom.flatMap((r) => {
        const mb = r.task.accounting?.maxRssMB ?? r.facts.record?.used.peakRssMB ?? null;
        return mb === null ? [] : [mb / 1024];
      });
      const peak = peaks.length > 0 ? Math.max(...peaks) : null;
      if (request >= partition.memPerNodeGB) {
        refuse(
          `the job already asks for ${request} GB, the ${partition.name} node's limit (memPerNodeGB); lower the memory it needs (data.num_workers, the in-memory dataset)`,
        );
        refused = true;
      } else {
        let mem = Math.ceil(Math.max(2 * request, 1.5 * (peak ?? 0)) - 1e-9);
        let note = `with --mem=${mem}G (was ${request}G${peak !== null ? `, peak ${peak.toFixed(1)} GB` : ''})`;
        if (mem > partition.memPerNodeGB) {
          mem = partition.memPerNodeGB;
          note = `with --mem=${mem}G (was ${request}G${peak !== null ? `, peak ${peak.toFixed(1)} GB` : ''}; capped at the ${partition.name} node's ${partition.memPerNodeGB} GB)`;
        }
        next.set('mem', `${mem}G`);
        what.push(note);
      }
    }
    if (!refused && causes.includes('GPU_OOM')) {
      const gpu = recover.filter((r) => r.cause === 'GPU_OOM');
      const seen = gpu.flatMap((r) => {
        const n = gaveUpAt(r.facts.logTail);
        return n === undefined ? [] : [n];
      });
      const before = optionValue(previous, 'export')?.match(
        new RegExp(`${RUN_CONTRACT.oom.batchSizeEnv}=(\\d+)`),
      )?.[1];
      const last = seen.length > 0 ? Math.min(...seen) : before !== undefined ? Number(before) : undefined;
      if (last === undefined) {
        refuse(
          `the GPU ran out of memory, but the log does not say at which batch size the back-off gave up ("${RUN_CONTRACT.oom.gaveUpLine} N"); lower training.batch_size`,
          'GPU_OOM',
        );
        refused = true;
      } else if (last <= 1) {
        refuse(
          'the GPU ran out of memory at batch size 1: a smaller batch cannot help; a GPU with more memory (partition) or a smaller model can',
          'GPU_OOM',
        );
        refused = true;
      } else {
        const size = Math.floor(last / 2);
        next.set('export', `ALL,${RUN_CONTRACT.oom.batchSizeEnv}=${size}`);
        what.push(
          `with batch size ${size} (${RUN_CONTRACT.oom.batchSizeEnv}; the back-off gave up at ${last})`,
        );
      }
    }
    if (!refused && causes.includes('TIMEOUT')) {
      const timed = recover.filter((r) => r.cause === 'TIMEOUT');
      const current = optionValue(previous, 'time') ?? stage.resources.time;
      const sized = timed.map((r) =>
        resumeTime({
          epochEnds: r.facts.epochEnds,
          maxEpochs: maxEpochsOf(manifest, job, stage, r.task.arrayIndex),
          current,
          partition,
          leadSeconds: requeue.enabled ? requeue.leadSeconds : 0,
        }),
      );
      const longest = sized.reduce((a, b) => (parseSlurmTime(b.value) > parseSlurmTime(a.value) ? b : a));
      next.set('time', longest.value);
      what.push(`with --time=${longest.value} (${longest.basis})`);
    }
    if (refused) continue;
    if (tasks && tasks.length < expected) next.set('array', tasks.join(','));
    const options = mergeOptions(previous, next);
    const bad = options.flatMap((o) => {
      const parsed = parseOverride(o);
      return 'problem' in parsed ? [parsed.problem] : [];
    });
    if (bad.length > 0) {
      refuse(`its resubmission's options are refused: ${bad.join('; ')}`);
      continue;
    }

    const memOption = optionValue(options, 'mem');
    const resources = {
      ...stage.resources,
      ...(memOption ? { memGB: memGBOf(memOption) } : {}),
      time: optionValue(options, 'time') ?? stage.resources.time,
    };
    const cost = resubmissionCost(
      resolved,
      { id: stage.id, tasks: tasks?.length ?? 1, resources },
      committed,
    );
    if (cost.refused) {
      refuse(cost.refused, 'BUDGET');
      continue;
    }
    committed = committed === null || cost.worstUnits === null ? null : committed + cost.worstUnits;

    const afterokKeys: string[] = [];
    const afterokIds: string[] = [];
    const aftercorrKeys: string[] = [];
    const aftercorrIds: string[] = [];
    for (const u of upstream) {
      if (resubmitted.has(u.key)) (u.corr ? aftercorrKeys : afterokKeys).push(u.key);
      else if (u.p && u.p.tasks.some((t) => isActive(t.state)) && u.p.job.jobId)
        (u.corr ? aftercorrIds : afterokIds).push(u.p.job.jobId);
      // An upstream that completed needs no waiting (SLURM may have forgotten it: a dependency on it would be refused).
    }
    const resumes = recover.some(
      (r) =>
        r.facts.checkpoint === true || (r.facts.checkpoint === undefined && r.facts.epochEnds.length > 0),
    );
    const found = recover.map((r) => r.facts.checkpointFile).find((f) => f !== undefined);
    if (own.length > 0)
      what.push(
        resumes
          ? `resuming from ${found ?? RUN_CONTRACT.runDir.files.checkpoint}`
          : 'from the start (no checkpoint yet)',
      );
    const after = [...afterokKeys, ...aftercorrKeys].map((k) => `${k}'s resubmission`);
    if (after.length > 0) what.push(`after ${after.join(' and ')}`);
    const keep = new Set(tasks ?? []);
    const earlierTasks: EarlierTask[] = job.array
      ? p.tasks
          .filter((t) => t.arrayIndex !== undefined && !keep.has(t.arrayIndex))
          .map((t) => ({
            jobId: t.jobId,
            ...(t.arrayIndex !== undefined ? { arrayIndex: t.arrayIndex } : {}),
            ...(t.taskJobId ? { taskJobId: t.taskJobId } : {}),
            state: t.state,
            ...(t.exitCode ? { exitCode: t.exitCode } : {}),
          }))
      : [];
    const r: Resubmission = {
      key: job.key,
      failedJobId: job.jobId,
      state,
      cause: causes.join('+'),
      ...(tasks && tasks.length < expected ? { tasks } : {}),
      options,
      afterokKeys,
      afterokIds,
      aftercorrKeys,
      aftercorrIds,
      earlierTasks,
      worstUnits: cost.worstUnits,
      head,
      what: what.join(', '),
    };
    resubmitted.set(job.key, r);
    plan.resubmit.push(r);
  }
  return plan;
}
