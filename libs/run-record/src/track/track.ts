// A run's progress from its scheduler's answer: per-job state and counts, a status line per job,
// and the final summary table with triage. Following it live is watch.ts.
import { runDirName } from '@kdgat/config';
import { isActive, isFailure, type JobState, type TaskAccounting, type TaskStatus } from '@kdgat/schedulers';
import type { Manifest, ManifestJob } from '../manifest.ts';
import { findMetrics, keyMetrics, tailLogs } from './files.ts';
import { triageTask, type Triage } from './triage.ts';

export interface JobProgress {
  job: ManifestJob;
  tasks: TaskStatus[];
  counts: { pending: number; running: number; done: number; failed: number };
  state: JobState;
  elapsedSeconds: number;
}

/**
 * Where a task's pipeline outputs live: array task i of a chunk runs point `firstPoint + i`; shard
 * task i of a sharded stage runs under `shard_<i>`.
 */
export function taskRunRoot(job: ManifestJob, arrayIndex: number | undefined): string {
  if (job.shards?.task && arrayIndex !== undefined) return `${job.runRoot}/shard_${arrayIndex}`;
  return job.array && arrayIndex !== undefined
    ? `${job.runRoot}/point_${job.array.firstPoint + arrayIndex}`
    : job.runRoot;
}

/** The job's overall state: failed if any task failed, active while any task is active. */
export function jobStateOf(tasks: readonly TaskStatus[], expected: number): JobState {
  if (tasks.length === 0) return 'UNKNOWN';
  const failed = tasks.find((t) => isFailure(t.state));
  if (failed) return tasks.some((t) => isActive(t.state)) ? 'RUNNING' : failed.state;
  if (tasks.some((t) => t.state === 'RUNNING' || t.state === 'COMPLETING')) return 'RUNNING';
  if (tasks.some((t) => isActive(t.state)))
    return tasks.some((t) => t.state === 'COMPLETED') ? 'RUNNING' : 'PENDING';
  if (tasks.every((t) => t.state === 'COMPLETED') && tasks.length >= expected) return 'COMPLETED';
  return tasks.every((t) => t.state === 'COMPLETED') ? 'UNKNOWN' : tasks[0]!.state;
}

/** The key of a task in `lastSeen`: its array index, `-` for a plain job. */
export function taskKey(arrayIndex: number | undefined): string {
  return arrayIndex === undefined ? '-' : String(arrayIndex);
}

/** A task with what the manifest kept of it (accounting, nodes) where this answer lacks it. */
function withKept(job: ManifestJob, t: TaskStatus): TaskStatus {
  const key = taskKey(t.arrayIndex);
  const accounting = job.lastSeen?.accounting?.[key];
  const nodes = job.lastSeen?.nodes?.[key];
  if (isActive(t.state) || (t.accounting && t.nodes) || (!accounting && !nodes)) return t;
  return {
    ...t,
    ...(!t.accounting && accounting ? { accounting } : {}),
    ...(!t.nodes && nodes ? { nodes } : {}),
  };
}

export function progressOf(manifest: Manifest, states: Map<string, TaskStatus[]>): JobProgress[] {
  return manifest.jobs.map((job) => {
    let tasks = job.jobId ? (states.get(job.jobId) ?? []) : [];
    if (tasks.length === 0 && job.lastSeen) {
      // Forgotten by the scheduler (MinJobAge): fall back to the last state the runner saw.
      const jobId = job.jobId ?? '';
      tasks = job.lastSeen.tasks
        ? Object.entries(job.lastSeen.tasks).map(([i, state]): TaskStatus =>
            i === '-' ? { jobId, state } : { jobId, arrayIndex: Number(i), state },
          )
        : [{ jobId, state: job.lastSeen.state }];
    }
    tasks = tasks.map((t) => withKept(job, t));
    // A recovered array: its tasks that were not resubmitted ended in an earlier submission.
    const earlier = (job.earlierTasks ?? []).filter((e) => !tasks.some((t) => t.arrayIndex === e.arrayIndex));
    if (earlier.length > 0) tasks = [...earlier, ...tasks];
    const counts = { pending: 0, running: 0, done: 0, failed: 0 };
    for (const t of tasks) {
      if (t.state === 'RUNNING' || t.state === 'COMPLETING') counts.running++;
      else if (isActive(t.state)) counts.pending++;
      else if (t.state === 'COMPLETED') counts.done++;
      else counts.failed++;
    }
    const expected = job.array?.size ?? 1;
    if (job.array && tasks.length < expected) counts.pending += expected - tasks.length;
    return {
      job,
      tasks,
      counts,
      state: jobStateOf(tasks, expected),
      elapsedSeconds: Math.max(0, ...tasks.map((t) => t.elapsedSeconds ?? 0)),
    };
  });
}

/**
 * Records the states seen into the manifest's jobs (so `status` works after MinJobAge), with the
 * accounting and nodes of the tasks that ended (so status, report and history have them after SLURM
 * forgot the job); `at` is when a job was first seen in its current states, so a poll that saw
 * nothing new changes nothing (and a run on a site over SSH writes no manifest to the site for it).
 */
export function rememberStates(manifest: Manifest, progress: readonly JobProgress[]): void {
  const at = new Date().toISOString();
  for (const p of progress) {
    if (p.tasks.length === 0) continue;
    const seen = p.job.lastSeen;
    const tasks: Record<string, JobState> = {};
    const accounting: Record<string, TaskAccounting> = { ...seen?.accounting };
    const nodes: Record<string, string[]> = { ...seen?.nodes };
    for (const t of p.tasks) {
      const key = taskKey(t.arrayIndex);
      tasks[key] = t.state;
      // A task that runs again (requeued) has no figures yet: its last ones described another attempt.
      if (isActive(t.state)) {
        delete accounting[key];
        delete nodes[key];
        continue;
      }
      if (t.accounting) accounting[key] = t.accounting;
      if (t.nodes) nodes[key] = t.nodes;
    }
    const same = (a: unknown, b: unknown) => JSON.stringify(a ?? {}) === JSON.stringify(b ?? {});
    const sameStates = seen?.state === p.state && same(seen.tasks, tasks);
    if (seen && sameStates && same(seen.accounting, accounting) && same(seen.nodes, nodes)) continue;
    p.job.lastSeen = {
      state: p.state,
      at: seen && sameStates ? seen.at : at,
      tasks,
      ...(Object.keys(accounting).length > 0 ? { accounting } : {}),
      ...(Object.keys(nodes).length > 0 ? { nodes } : {}),
    };
  }
}

export function formatElapsed(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = Math.floor(seconds % 60);
  return `${h > 0 ? `${h}:` : ''}${String(m).padStart(h > 0 ? 2 : 1, '0')}:${String(s).padStart(2, '0')}`;
}

export function statusLine(p: JobProgress): string {
  const id = p.job.jobId ?? '-';
  const base = `${p.job.key} [${id}] ${p.state} ${formatElapsed(p.elapsedSeconds)}`;
  if (!p.job.array) return base + heldNote(p);
  const c = p.counts;
  return `${base} tasks: ${c.pending} pending, ${c.running} running, ${c.done} done, ${c.failed} failed${heldNote(p)}`;
}

/** SLURM's pending reasons for a per-user limit (QOS or association MaxJobs/MaxSubmit). */
const USER_LIMIT_REASON =
  /^(QOS|Assoc)Max(Jobs|Submit|JobsPerUser|SubmitJobsPerUser)\w*Limit$|^AssocMaxJobsLimit$/;

/**
 * Why a job's pending tasks wait, where a limit holds them: the run's throttle (a later chunk until
 * the chunk before it drains, `%K` of an array) or the site's per-user limit.
 */
function heldNote(p: JobProgress): string {
  const pending = p.tasks.filter((t) => t.state === 'PENDING');
  if (pending.length === 0) return '';
  const notes: string[] = [];
  const drains = p.job.afterany ?? [];
  if (drains.length > 0 && pending.some((t) => t.reason === 'Dependency'))
    notes.push(`held until ${drains.join(', ')} drains (the run's throttle)`);
  const throttled = pending.filter((t) => t.reason === 'JobArrayTaskLimit').length;
  if (throttled > 0 && p.job.array)
    notes.push(`${throttled} held by the run's throttle (at most ${p.job.array.concurrency} at once)`);
  const site = pending.filter((t) => t.reason !== undefined && USER_LIMIT_REASON.test(t.reason));
  if (site.length > 0) notes.push(`${site.length} held by the site's per-user limit (${site[0]!.reason})`);
  return notes.length > 0 ? ` — ${notes.join('; ')}` : '';
}

export interface SummaryRow {
  job: string;
  jobId: string;
  state: JobState;
  exitCode: string;
  elapsed: string;
  /** What an ended task used, as seff puts it (`efficiencyOf`); `-` without accounting. */
  usage: string;
  metrics: string;
  triage: Triage | null;
}

const gb = (mb: number) => `${(mb / 1024).toFixed(mb < 10 * 1024 ? 2 : 1)} GB`;

/**
 * seff's two lines in one: CPU efficiency (TotalCPU over elapsed x allocated cores) and the peak
 * memory against the request (per node for a multi-node job: MaxRSS is the largest task's).
 */
export function efficiencyOf(a: TaskAccounting, nodes = 1): string {
  const coreSeconds = a.elapsedSeconds * a.allocCpus;
  const cpu =
    coreSeconds > 0 ? `cpu ${Math.round((a.cpuSeconds / coreSeconds) * 100)}% of ${a.allocCpus}` : 'cpu -';
  if (a.maxRssMB === null) return `${cpu}, mem -`;
  if (a.reqMemMB === null || a.reqMemMB <= 0) return `${cpu}, mem ${gb(a.maxRssMB)} peak`;
  const perNode = a.reqMemMB / Math.max(1, nodes);
  const of = `${gb(perNode)}${nodes > 1 ? '/node' : ''}`;
  return `${cpu}, mem ${gb(a.maxRssMB)} of ${of} (${Math.round((a.maxRssMB / perNode) * 100)}%)`;
}

export function summaryRows(manifest: Manifest, progress: readonly JobProgress[]): SummaryRow[] {
  const rows: SummaryRow[] = [];
  const resolved = manifest.resolved as
    | {
        stages?: {
          id: string;
          stage?: string;
          model?: string;
          scale?: string;
          dataset?: string;
          resources?: { time?: string; memGB?: number };
        }[];
        spec?: { requeue?: { maxRestarts?: number } };
      }
    | undefined;
  for (const p of progress) {
    const stage = resolved?.stages?.find((s) => s.id === p.job.stageId);
    const tasks = p.tasks.length > 0 ? p.tasks : [{ jobId: p.job.jobId ?? '', state: p.state } as TaskStatus];
    for (const t of [...tasks].sort((a, b) => (a.arrayIndex ?? -1) - (b.arrayIndex ?? -1))) {
      let tail = '';
      try {
        tail = tailLogs(p.job, t, 60);
      } catch {
        /* script or log gone */
      }
      const root = taskRunRoot(p.job, t.arrayIndex);
      // A chain shares one run root: keep this stage's own `<model>_<scale>_<stage>/` outputs.
      const ownDir =
        stage?.model && stage.scale && stage.stage
          ? `/${runDirName({ model: stage.model, scale: stage.scale, stage: stage.stage })}/`
          : '/';
      const metrics = findMetrics(root, 3)
        .filter((m) => p.job.array || !/\/(point|shard)_\d+\//.test(m.path))
        .filter((m) => m.path.includes(ownDir));
      const ctx: Parameters<typeof triageTask>[2] = {};
      if (stage?.resources?.time) ctx.timeLimit = stage.resources.time;
      if (stage?.resources?.memGB !== undefined) ctx.memGB = stage.resources.memGB;
      if (stage?.dataset) ctx.dataset = stage.dataset;
      const maxRestarts = resolved?.spec?.requeue?.maxRestarts;
      if (maxRestarts !== undefined) ctx.maxRestarts = maxRestarts;
      rows.push({
        job: t.arrayIndex === undefined ? p.job.key : `${p.job.key}[${t.arrayIndex}]`,
        jobId: t.taskJobId ?? (t.arrayIndex === undefined ? t.jobId : `${t.jobId}_${t.arrayIndex}`),
        state: t.state,
        exitCode: t.exitCode ?? '-',
        elapsed: t.elapsedSeconds === undefined ? '-' : formatElapsed(t.elapsedSeconds),
        usage: t.accounting ? efficiencyOf(t.accounting, t.nodes?.length) : '-',
        metrics:
          metrics
            .map((m) => keyMetrics(m.metrics))
            .filter(Boolean)
            .join('; ') || '-',
        triage: triageTask(t, tail, ctx),
      });
    }
  }
  return rows;
}

export function formatTable(rows: readonly SummaryRow[]): string {
  // The usage column only where SLURM accounting answered for some task.
  const usage = rows.some((r) => r.usage !== '-');
  const header = ['job', 'job id', 'state', 'exit', 'elapsed', ...(usage ? ['usage'] : []), 'metrics'];
  const body = rows.map((r) => [
    r.job,
    r.jobId,
    r.state,
    r.exitCode,
    r.elapsed,
    ...(usage ? [r.usage] : []),
    r.metrics,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  const out = [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)];
  const triaged = rows.filter((r) => r.triage);
  if (triaged.length > 0) {
    out.push('');
    for (const r of triaged)
      out.push(`${r.job}: ${r.triage!.kind}: ${r.triage!.what}\n    fix: ${r.triage!.fix}`);
  }
  return out.join('\n');
}
