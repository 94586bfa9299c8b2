// `kdgat-runner report RUN_DIR`: gathers what a run left (manifest, job records, per-epoch history,
// GPU samples, metrics.json), judges it (@kdgat/usage verdicts and sizes) and has the pipeline's
// environment draw it (the site helpers' `report` module): <run dir>/report/report.html and PNGs beside it.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import {
  DEFAULT_PIPELINE_NAME,
  RUN_CONTRACT,
  SITE_HELPER_MODULE,
  type Partition,
  type Resources,
  type Scalar,
} from '@kdgat/config';
import {
  rightSize,
  tasksOfRun,
  verdictsFor,
  VERDICT_THRESHOLDS,
  type Finding,
  type RightSizing,
  type RunTask,
} from '@kdgat/usage';
import { runCommand } from '@kdgat/schedulers';
import { catalogueOfRun } from './catalogue.ts';
import { expandOutput, mergeCsv } from './outputs.ts';
import { environmentOfStage, type Manifest } from './manifest.ts';
import { pythonOf, runTuneReport } from '@kdgat/planning';

export const REPORT_DIR = 'report';

interface StageInfo {
  id: string;
  stage: string;
  model: string;
  scale: string;
  dataset: string;
  overrides: Record<string, Scalar>;
  resources: Resources;
}

export interface StageSummary {
  stage: StageInfo;
  tasks: RunTask[];
  sizing: RightSizing;
  verdicts: Finding[];
}

function resolvedOf(m: Manifest): {
  stages: StageInfo[];
  partitions: Partition[];
  requeue: { enabled: boolean; maxRestarts: number; leadSeconds: number };
} {
  const r = m.resolved as {
    stages?: StageInfo[];
    cluster?: { partitions?: Partition[] };
    requeue?: { enabled?: boolean; maxRestarts?: number; leadSeconds?: number };
  };
  return {
    stages: r.stages ?? [],
    partitions: r.cluster?.partitions ?? [],
    requeue: {
      enabled: r.requeue?.enabled ?? false,
      maxRestarts: r.requeue?.maxRestarts ?? 0,
      leadSeconds: r.requeue?.leadSeconds ?? 0,
    },
  };
}

/**
 * The run's pipeline as the report needs it: where each task's per-epoch history is, and what of
 * the report is the default pipeline's own (a manifest written before declarations ran it).
 */
function pipelineOf(m: Manifest): { name: string; history: string; metrics: string; notes: string[] } {
  const p = (m.resolved as { pipeline?: { name?: string; outputs?: { history?: string; metrics?: string } } })
    .pipeline;
  const name = p?.name ?? DEFAULT_PIPELINE_NAME;
  const history =
    p?.outputs?.history ?? (name === DEFAULT_PIPELINE_NAME ? RUN_CONTRACT.runDir.files.history : undefined);
  const metrics = p?.outputs?.metrics ?? RUN_CONTRACT.runDir.files.metrics;
  if (name === DEFAULT_PIPELINE_NAME) return { name, history: history!, metrics, notes: [] };
  return {
    name,
    history: history ?? RUN_CONTRACT.runDir.files.history,
    metrics,
    notes: [
      history
        ? `curves from the pipeline's per-epoch history (${history} in each task's dir)`
        : `no curves: the pipeline declares no per-epoch history (outputs.history in its declaration)`,
      `not measured for this pipeline (${DEFAULT_PIPELINE_NAME}'s own records): data-wait share, graphs/s, peak GPU memory from the training process`,
      'measured as for every job: state, elapsed and time limit, cores busy, peak RSS, GPU utilisation (nvidia-smi), requeues',
    ],
  };
}

/**
 * A task's per-epoch history: the declared file, or every file a pattern names (one per attempt,
 * e.g. a CSVLogger's `version_<n>`) merged in order into `<mergedDir>/<name>.csv`; null: none.
 */
function taskHistory(dir: string, pattern: string, mergedDir: string, name: string): string | null {
  const files = expandOutput(dir, pattern);
  if (files.length <= 1) return files[0] ?? null;
  mkdirSync(mergedDir, { recursive: true });
  const merged = join(mergedDir, `${name}.csv`);
  writeFileSync(merged, mergeCsv(files));
  return merged;
}

/** Per stage of a run: its tasks with their records, sizes from them, and the verdicts. */
export function summariseRun(manifest: Manifest): StageSummary[] {
  const { stages, partitions, requeue } = resolvedOf(manifest);
  const tasks = tasksOfRun(manifest);
  return stages
    .filter((s) => manifest.jobs.some((j) => j.stageId === s.id))
    .map((stage) => {
      const mine = tasks.filter((t) => t.stageId === stage.id);
      const usages = mine.flatMap((t) => (t.usage ? [t.usage] : []));
      const workers = stage.overrides['data.num_workers'];
      const partition = partitions.find((p) => p.name === stage.resources.partition);
      const sizing: RightSizing = partition
        ? rightSize({
            tasks: usages,
            runs: 1,
            current: stage.resources,
            partition,
            leadSeconds: requeue.enabled ? requeue.leadSeconds : 0,
            ...(typeof workers === 'number' ? { numWorkers: workers } : {}),
          })
        : { tasks: 0, runs: 0, notes: ['partition not in the manifest'] };
      const verdicts = verdictsFor({
        stageId: stage.id,
        tasks: usages,
        request: { cpus: stage.resources.cpus, memGB: stage.resources.memGB },
        requeue,
        ...(typeof workers === 'number' ? { numWorkers: workers } : {}),
        ...(sizing.memGB ? { suggestedMemGB: sizing.memGB.value } : {}),
      });
      return { stage, tasks: mine, sizing, verdicts };
    });
}

/** The verdict lines `--wait` prints after its summary table. */
export function verdictLines(manifest: Manifest): string[] {
  const findings = summariseRun(manifest).flatMap((s) => s.verdicts);
  if (findings.length === 0) return [];
  return ['verdict:', ...findings.flatMap((f) => [`  ${f.code}: ${f.evidence}`, `    fix: ${f.fix}`])];
}

function readJson(path: string): unknown {
  try {
    return existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : null;
  } catch {
    return null;
  }
}

export interface ReportResult {
  html: string;
  plots: string[];
  best: Record<string, { index: number; point: Record<string, Scalar>; metric: string; value: number }>;
  /** The catalogue folder and how many of its rows are this run's (the report's "in the catalogue" table). */
  catalogue: { dir: string; rows: number };
  verdicts: Finding[];
  seconds: number;
}

export async function writeReport(
  manifest: Manifest,
  log: (line: string) => void = () => {},
): Promise<ReportResult> {
  const t0 = performance.now();
  const out = join(manifest.runDir, REPORT_DIR);
  mkdirSync(out, { recursive: true });
  const summaries = summariseRun(manifest);
  const pipeline = pipelineOf(manifest);
  const input = {
    manifest: {
      experiment: manifest.experiment,
      runDir: manifest.runDir,
      createdAt: manifest.createdAt,
      specHash: manifest.spec.hash,
      commit: manifest.git.commit,
      dirty: manifest.git.dirty,
      environment: { name: manifest.environment.name, lockHash: manifest.environment.lockHash },
      stack: manifest.stack.name,
      scheduler: manifest.scheduler,
      pipeline: pipeline.name,
      pipelineNotes: pipeline.notes,
      jobs: manifest.jobs.map((j) => ({
        key: j.key,
        jobId: j.jobId ?? null,
        state: j.lastSeen?.state ?? null,
      })),
      cost: manifest.cost ?? null,
      rightSized: manifest.rightSized ?? null,
    },
    stages: summaries.map((s) => ({
      id: s.stage.id,
      stage: s.stage.stage,
      model: s.stage.model,
      scale: s.stage.scale,
      dataset: s.stage.dataset,
      environment: (({ name, lockHash }) => ({ name, lockHash }))(environmentOfStage(manifest, s.stage.id)),
      request: {
        cpus: s.stage.resources.cpus,
        memGB: s.stage.resources.memGB,
        gpus: s.stage.resources.gpus.count,
        time: s.stage.resources.time,
        partition: s.stage.resources.partition,
      },
      thresholds: VERDICT_THRESHOLDS,
      verdicts: s.verdicts,
      sizing: s.sizing,
      tasks: s.tasks.map((t) => {
        const job = manifest.jobs.find((j) => j.key === t.jobKey);
        const point = t.index !== null ? (manifest.arrayIndex[t.jobKey]?.[String(t.index)] ?? null) : null;
        const history = taskHistory(
          t.dir,
          pipeline.history,
          join(out, 'histories'),
          `${t.jobKey}-${t.index ?? 0}`,
        );
        const samples = join(t.dir, 'gpu_samples.csv');
        return {
          job: t.jobKey,
          index: t.index === null ? null : t.index + (job?.array?.firstPoint ?? 0),
          point,
          dir: t.dir,
          history,
          gpuSamples: existsSync(samples) ? samples : null,
          metrics: readJson(join(t.dir, pipeline.metrics)),
          usage: t.usage ?? null,
        };
      }),
    })),
    study: null as null | { name: string; reportDir: string; reportHref: string; plots: string[] },
    // The run's rows in the catalogue of all runs (the pipeline reads the folder; none: no table).
    catalogue: {
      dir: catalogueOfRun(manifest.runDir),
      experiment: manifest.experiment,
      runId: basename(manifest.runDir),
    },
  };
  if (manifest.tune) {
    const reportDir = join(manifest.tune.studyDir, 'report');
    try {
      const r = await runTuneReport(manifest.stack.outputs, manifest.tune.studyDir, {
        json: true,
        plots: true,
      });
      input.study = {
        name: manifest.tune.study,
        reportDir,
        reportHref: relative(out, join(reportDir, 'report.json')),
        plots: (r.plots ?? []).map((p) => relative(out, p)),
      };
    } catch (e) {
      log(`note: the study's tune report could not be made: ${(e as Error).message.split('\n')[0]}`);
      input.study = { name: manifest.tune.study, reportDir, reportHref: relative(out, reportDir), plots: [] };
    }
  }
  const inputFile = join(out, 'report-input.json');
  writeFileSync(inputFile, `${JSON.stringify(input, null, 2)}\n`);
  const python = pythonOf(manifest.stack.outputs, manifest.environment.name);
  if (!existsSync(python))
    throw new Error(
      `no python at ${python} (the environment of stack ${manifest.stack.name}): run \`nx run infra:up\`, or set HPC_PYTHON`,
    );
  const r = await runCommand(
    python,
    ['-m', `${SITE_HELPER_MODULE}.report`, '--input', inputFile, '--out', out],
    {
      env: { ...process.env, MPLBACKEND: 'Agg' },
    },
  );
  if (r.code !== 0)
    throw new Error(
      `python -m ${SITE_HELPER_MODULE}.report failed (exit ${r.code}):\n${r.stderr.trim() || r.stdout.trim()}`,
    );
  const drawn = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Omit<ReportResult, 'verdicts' | 'seconds'>;
  return {
    ...drawn,
    verdicts: summaries.flatMap((s) => s.verdicts),
    seconds: (performance.now() - t0) / 1000,
  };
}
