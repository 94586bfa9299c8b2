// The record the job epilog appends to `<pipeline run dir>/job_record.jsonl` at the end of every
// attempt of a job or array task (one JSON object a line; a requeued task has one line per attempt).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

export const JOB_RECORD_FILE = 'job_record.jsonl';
export const JOB_RECORD_SCHEMA = 'kdgat-hpc.job-record/1';
/** Records written before 2026-11-27 name the tool by its short name. */
const EARLIER_JOB_RECORD_SCHEMA = JOB_RECORD_SCHEMA.replace('-hpc.', '.');

const num = z.number().nullable();

export const JobRecordSchema = z.looseObject({
  schema: z.enum([JOB_RECORD_SCHEMA, EARLIER_JOB_RECORD_SCHEMA]),
  jobId: z.string(),
  arrayJobId: z.string().nullable(),
  arrayTaskId: z.string().nullable(),
  restart: z.number(),
  host: z.string(),
  stageId: z.string(),
  stage: z.string(),
  model: z.string(),
  scale: z.string(),
  dataset: z.string(),
  /** COMPLETED, FAILED, REQUEUED, TERMINATED (scancel or the time limit). */
  state: z.string(),
  exitStatus: num,
  start: num,
  end: z.number(),
  elapsedSeconds: num,
  requested: z.object({
    /** Per task (--cpus-per-task). */
    cpus: num,
    /** Per node (--mem). */
    memGB: num,
    /** In the whole job (GPUs per node x nodes). */
    gpus: num,
    timeSeconds: num,
    partition: z.string().nullable(),
    /** Tasks in the whole job (nodes x tasks per node); null or absent (records before it) means 1. */
    tasks: z.number().int().positive().nullable().default(null),
  }),
  used: z.object({
    /** user + system CPU seconds of the pipeline and its workers: the whole job's, all its tasks. */
    cpuSeconds: num,
    /** cpuSeconds / elapsed: cores kept busy on average. */
    meanCpus: num,
    peakRssMB: num,
    /**
     * `cgroup` (the job's memory.peak), `pipeline` (process tree RSS sampled by the pipeline) or `none`;
     * `sacct` where the runner put SLURM accounting's MaxRSS in its place (history/runs.ts).
     */
    peakRssSource: z.string(),
    peakGpuMemMB: num,
    /** Absent in the file (the epilog's own count); `sacct` where the runner put TotalCPU in its place. */
    cpuSource: z.enum(['job-record', 'sacct']).optional(),
  }),
  gpu: z
    .object({
      samples: z.number(),
      meanUtil: z.number(),
      /** Share of samples under 10% utilisation. */
      idleShare: z.number(),
      peakMemUsedMiB: z.number(),
    })
    .nullable(),
  dataWaitFraction: num,
  graphsPerSec: num,
  /** The pre-timeout signal arrived. */
  signalled: z.boolean(),
  /** The attempt ended at (or was signalled before) its time limit. */
  timeLimitHit: z.boolean(),
});
export type JobRecord = z.infer<typeof JobRecordSchema>;

/** Records in a JSON-lines text; lines that are not records (a truncated last line) are skipped. */
export function parseJobRecords(text: string): JobRecord[] {
  return text.split('\n').flatMap((line) => {
    if (line.trim() === '') return [];
    try {
      const r = JobRecordSchema.safeParse(JSON.parse(line));
      return r.success ? [r.data] : [];
    } catch {
      return [];
    }
  });
}

export function readJobRecords(pipelineRunDir: string): JobRecord[] {
  const p = join(pipelineRunDir, JOB_RECORD_FILE);
  return existsSync(p) ? parseJobRecords(readFileSync(p, 'utf8')) : [];
}

/** One job or array task over all its attempts. */
export interface TaskUsage {
  /** `<jobId>` or `<arrayJobId>_<task>` of the first attempt. */
  key: string;
  dir: string;
  attempts: JobRecord[];
  final: JobRecord;
  completed: boolean;
  /** Elapsed seconds summed over attempts (a requeued task's real duration). */
  elapsedSeconds: number | null;
  cpuSeconds: number | null;
  meanCpus: number | null;
  peakRssMB: number | null;
  /** Where cpuSeconds came from: SLURM accounting, the job records, or both (a requeued task). */
  cpuSource: 'sacct' | 'job-record' | 'mixed';
  /** The source of the attempt with the largest peak (`sacct`, `cgroup`, `pipeline`), null without one. */
  peakRssSource: string | null;
  peakGpuMemMB: number | null;
  requested: JobRecord['requested'];
  gpu: JobRecord['gpu'];
  dataWaitFraction: number | null;
  graphsPerSec: number | null;
  timeLimitHit: boolean;
}

const sum = (xs: (number | null)[]): number | null =>
  xs.some((x) => x === null) || xs.length === 0 ? null : xs.reduce<number>((a, b) => a + (b as number), 0);
const max = (xs: (number | null)[]): number | null => {
  const v = xs.filter((x): x is number => x !== null);
  return v.length ? Math.max(...v) : null;
};

export function taskUsage(dir: string, attempts: JobRecord[]): TaskUsage | undefined {
  const final = attempts.at(-1);
  if (!final) return undefined;
  const first = attempts[0]!;
  const elapsed = sum(attempts.map((a) => a.elapsedSeconds));
  const cpu = sum(attempts.map((a) => a.used.cpuSeconds));
  const cpuSources = new Set(attempts.map((a) => a.used.cpuSource ?? 'job-record'));
  const peakRss = max(attempts.map((a) => a.used.peakRssMB));
  const withGpu = attempts.filter((a) => a.gpu && a.gpu.samples > 0).map((a) => a.gpu!);
  const samples = withGpu.reduce((n, g) => n + g.samples, 0);
  const gpu =
    samples > 0
      ? {
          samples,
          meanUtil: withGpu.reduce((s, g) => s + g.meanUtil * g.samples, 0) / samples,
          idleShare: withGpu.reduce((s, g) => s + g.idleShare * g.samples, 0) / samples,
          peakMemUsedMiB: Math.max(...withGpu.map((g) => g.peakMemUsedMiB)),
        }
      : null;
  return {
    key: first.arrayJobId && first.arrayTaskId ? `${first.arrayJobId}_${first.arrayTaskId}` : first.jobId,
    dir,
    attempts,
    final,
    completed: final.state === 'COMPLETED',
    elapsedSeconds: elapsed,
    cpuSeconds: cpu,
    meanCpus: elapsed && cpu !== null ? cpu / elapsed : null,
    peakRssMB: peakRss,
    cpuSource: cpuSources.size > 1 ? 'mixed' : [...cpuSources][0]!,
    peakRssSource:
      attempts.find((a) => a.used.peakRssMB === peakRss && peakRss !== null)?.used.peakRssSource ?? null,
    peakGpuMemMB: max(attempts.map((a) => a.used.peakGpuMemMB)),
    requested: final.requested,
    gpu,
    dataWaitFraction: final.dataWaitFraction,
    graphsPerSec: final.graphsPerSec,
    timeLimitHit: attempts.some((a) => a.timeLimitHit),
  };
}
