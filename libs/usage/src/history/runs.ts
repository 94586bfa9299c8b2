// Finds the job records of runs: a run's manifest says where every job's pipeline ran
// (`<runRoot>[/point_<i>|/worker_<i>|/shard_<i>]/<dataset>/<model>_<scale>_<stage>/`), and history is every
// run under the runs root (`<runsRoot>/<experiment>/<run>/manifest.json`).
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { runDirName } from '@kdgat/config';
import { readJobRecords, taskUsage, type JobRecord, type TaskUsage } from '../records/record.ts';

/**
 * What SLURM accounting (sacct) measured of a task's latest attempt, as the runner keeps it in the
 * manifest (`lastSeen.accounting`, by array index or `-`): TotalCPU of all its steps, the largest
 * step MaxRSS, the allocation's elapsed time.
 */
export interface AccountedUsage {
  cpuSeconds: number;
  maxRssMB: number | null;
  elapsedSeconds: number;
}

/** What of a runner manifest this module reads. */
export interface RunLike {
  runDir: string;
  experiment: string;
  createdAt?: string;
  jobs: {
    key: string;
    stageId: string;
    runRoot: string;
    jobId?: string;
    array?: { size: number; firstPoint: number };
    lastSeen?: { accounting?: Record<string, AccountedUsage> };
  }[];
  resolved: unknown;
}

export interface StageKey {
  stage: string;
  model: string;
  scale: string;
  dataset: string;
}

export interface RunTask {
  jobKey: string;
  stageId: string;
  /** Array index within the job (sweep point = firstPoint + index), null for a single job. */
  index: number | null;
  /** The pipeline's run dir of this task. */
  dir: string;
  usage?: TaskUsage;
}

export function stageKeyOf(run: RunLike, stageId: string): StageKey | undefined {
  const stages = (run.resolved as { stages?: (StageKey & { id: string })[] } | null)?.stages ?? [];
  const s = stages.find((x) => x.id === stageId);
  return s ? { stage: s.stage, model: s.model, scale: s.scale, dataset: s.dataset } : undefined;
}

export function suffixOf(k: StageKey): string {
  return join(k.dataset, runDirName(k));
}

/** Every task of a run with its pipeline dir and, once it has run, its usage. */
export function tasksOfRun(run: RunLike): RunTask[] {
  return run.jobs.flatMap((job) => {
    const key = stageKeyOf(run, job.stageId);
    if (!key) return [];
    const suffix = suffixOf(key);
    const dirs: { index: number | null; dir: string }[] = job.array
      ? Array.from({ length: job.array.size }, (_, i) => {
          const point = join(job.runRoot, `point_${i}`, suffix);
          // A study's worker or a sharded stage's task has its own dir instead of a sweep point's.
          const other = [`worker_${i}`, `shard_${i}`]
            .map((d) => join(job.runRoot, d, suffix))
            .find(existsSync);
          return { index: i, dir: other !== undefined && !existsSync(point) ? other : point };
        })
      : [{ index: null, dir: join(job.runRoot, suffix) }];
    return dirs.map(({ index, dir }) => {
      const accounted = job.lastSeen?.accounting?.[index === null ? '-' : String(index)];
      const attempts = readJobRecords(dir);
      const usage = taskUsage(
        dir,
        job.jobId && accounted ? withAccounting(attempts, job.jobId, index, accounted) : attempts,
      );
      return { jobKey: job.key, stageId: job.stageId, index, dir, ...(usage ? { usage } : {}) };
    });
  });
}

/**
 * A task's attempts with SLURM accounting's figures in the one attempt they describe: sacct answers
 * for the latest run of the job id, so the final record, when it is that task's (same job id, or
 * array job id and index) and no later attempt followed it (not REQUEUED). The job record counts the
 * batch shell's children only: the pipeline under srun is slurmstepd's child, so its CPU time is
 * missing there and TotalCPU of all steps replaces it; but sacct misses the children of a step killed
 * by a signal (time limit, scancel), so the larger of the two is kept. MaxRSS replaces the peak where
 * sacct sampled one (the cgroup's memory.peak counts page cache too).
 */
export function withAccounting(
  attempts: readonly JobRecord[],
  jobId: string,
  index: number | null,
  accounted: AccountedUsage,
): JobRecord[] {
  const final = attempts.at(-1);
  if (!final || final.state === 'REQUEUED') return [...attempts];
  const ownJob =
    index === null ? final.arrayJobId === null && final.jobId === jobId : final.arrayJobId === jobId;
  if (!ownJob || (index !== null && final.arrayTaskId !== String(index))) return [...attempts];
  const fromSacct = accounted.cpuSeconds >= (final.used.cpuSeconds ?? 0);
  const cpuSeconds = fromSacct ? accounted.cpuSeconds : final.used.cpuSeconds;
  const elapsedSeconds = fromSacct ? accounted.elapsedSeconds : final.elapsedSeconds;
  const rss = accounted.maxRssMB !== null && accounted.maxRssMB > 0 ? accounted.maxRssMB : null;
  const used: JobRecord['used'] = {
    ...final.used,
    cpuSeconds,
    meanCpus: cpuSeconds !== null && elapsedSeconds ? cpuSeconds / elapsedSeconds : final.used.meanCpus,
    cpuSource: fromSacct ? 'sacct' : 'job-record',
    ...(rss !== null ? { peakRssMB: rss, peakRssSource: 'sacct' } : {}),
  };
  return [...attempts.slice(0, -1), { ...final, elapsedSeconds, used }];
}

/**
 * A manifest read where it lies: a site's run brought back to this machine (`.hpc/sites/<stack>/runs/…`)
 * names the site's paths, so its run dir and job roots are taken from the copy it was found in.
 */
function where(m: RunLike, dir: string): RunLike {
  const from = m.runDir?.replace(/\/+$/, '');
  if (!from || from === dir) return m;
  const moved = (p: string) => (p === from || p.startsWith(`${from}/`) ? dir + p.slice(from.length) : p);
  return { ...m, runDir: dir, jobs: m.jobs.map((j) => ({ ...j, runRoot: moved(j.runRoot) })) };
}

/** Manifests under the runs root, oldest first (a site's local copies read where they lie); unreadable ones are skipped. */
export function runsUnder(runsRoot: string): RunLike[] {
  if (!existsSync(runsRoot)) return [];
  const runs: RunLike[] = [];
  for (const exp of readdirSync(runsRoot, { withFileTypes: true })) {
    if (!exp.isDirectory() || exp.name.startsWith('.') || exp.name === 'studies') continue;
    for (const run of readdirSync(join(runsRoot, exp.name), { withFileTypes: true })) {
      const p = join(runsRoot, exp.name, run.name, 'manifest.json');
      if (!run.isDirectory() || !existsSync(p)) continue;
      try {
        const m = JSON.parse(readFileSync(p, 'utf8')) as RunLike;
        if (Array.isArray(m.jobs)) runs.push(where(m, join(runsRoot, exp.name, run.name)));
      } catch {
        // a manifest being written, or not ours: history goes on without it
      }
    }
  }
  return runs.sort((a, b) => String(a.createdAt ?? '').localeCompare(String(b.createdAt ?? '')));
}

export interface StageHistory {
  /** Runs that contributed at least one finished task. */
  runs: string[];
  tasks: TaskUsage[];
}

/** Finished tasks of the same stage, model, scale and dataset in every run under the runs root. */
export function stageHistory(
  runsRoot: string,
  key: StageKey,
  runs: RunLike[] = runsUnder(runsRoot),
): StageHistory {
  const out: StageHistory = { runs: [], tasks: [] };
  for (const run of runs) {
    let used = false;
    for (const job of run.jobs) {
      const k = stageKeyOf(run, job.stageId);
      if (
        !k ||
        k.stage !== key.stage ||
        k.model !== key.model ||
        k.scale !== key.scale ||
        k.dataset !== key.dataset
      )
        continue;
      for (const t of tasksOfRun({ ...run, jobs: [job] })) {
        if (!t.usage) continue;
        out.tasks.push(t.usage);
        used = true;
      }
    }
    if (used) out.runs.push(run.runDir);
  }
  return out;
}
