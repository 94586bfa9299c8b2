// Renders the plan's scripts with @kdgat/slurm-templates: one script per planned job (an array
// chunk gets its own script and sweep table), no dependencies inside the scripts (job ids do
// not exist before submission; the submit adds `--dependency`), so everything is rendered
// before the first sbatch.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  JOB_LIBRARY,
  JOB_LIBRARY_DIR,
  jobLibraryInstallFix,
  renderTrainJob,
  type JobLibraryRef,
  type TrainJobInput,
} from '@kdgat/slurm-templates';
import {
  REQUEUE_DEFAULTS,
  defaultPipeline,
  isDefaultPipeline,
  jobEnvironment,
  runDirPath,
  stackEnvironment,
  type Pipeline,
  type ResolvedExperiment,
} from '@kdgat/config';
import type { StackOutputs } from './stack/outputs.ts';
import type { PlannedJob, RunPlan } from './build.ts';

export interface RenderedJob {
  job: PlannedJob;
  script: string;
  /** Sweep table of an array job, written to `tableFile` (relative to the run dir). */
  table?: { file: string; text: string };
  runRoot: string;
  logs: { output: string; error: string };
  /** What the local scheduler needs when the script carries no `#SBATCH` lines. */
  hints: { cpusPerTask: number; timeLimit: string; signal?: string };
  /** The job library the script loads (the same for every job of a run). */
  library: JobLibraryUse;
}

/**
 * The job library a run's scripts load (`JOB_LIBRARY` of @kdgat/slurm-templates), as the manifest
 * records it: the site's installed copy (`site`), or the run's own in `scripts/lib/` (`run`),
 * written with its scripts where the site has not got this version.
 */
export interface JobLibraryUse {
  path: string;
  sha256: string;
  source: 'site' | 'run';
  /** `run`: the file, relative to the run dir. */
  file?: string;
}

/**
 * Where a run's jobs find this version of the job library: the site's copy when the stack installed
 * this version (`scripts.jobLibrary`), or when the run reproduced loaded it from the site (the site
 * keeps every version it installed); otherwise the run's own copy in `<runDir>/scripts/lib/`
 * (a stack provisioned before the library existed or with another version of it, the local
 * scheduler on such a stack), which `writeRendered` writes and a site over SSH receives with the run dir.
 */
export function jobLibraryFor(
  stack: Pick<StackOutputs, 'scripts'>,
  runDir: string,
  opts: { stack?: string; recorded?: Pick<JobLibraryUse, 'path' | 'sha256' | 'source'> } = {},
): JobLibraryUse & JobLibraryRef {
  const sha256 = JOB_LIBRARY.sha256;
  const installed = stack.scripts.jobLibrary;
  const sitePath =
    installed?.sha256 === sha256
      ? installed.path
      : opts.recorded?.source === 'site' && opts.recorded.sha256 === sha256
        ? opts.recorded.path
        : undefined;
  if (sitePath !== undefined)
    return {
      path: sitePath,
      sha256,
      source: 'site',
      fix: jobLibraryInstallFix(opts.stack),
    };
  const file = `scripts/${JOB_LIBRARY_DIR}/${JOB_LIBRARY.file}`;
  return {
    path: join(runDir, file),
    sha256,
    source: 'run',
    file,
    fix: `it is written with the scripts of the run: render the run again (kdgat-runner train --from-manifest ${runDir})`,
  };
}

/** A note for a run that carries its own job library because the site has another version (or none). */
export function jobLibraryNote(
  stack: Pick<StackOutputs, 'scripts'>,
  library: JobLibraryUse,
  stackName: string,
): string | undefined {
  if (library.source !== 'run') return undefined;
  const installed = stack.scripts.jobLibrary;
  return (
    `the site ${installed ? `has another version of the job library (sha256 ${installed.sha256.slice(0, 12)})` : 'has no job library installed (provisioned before it existed)'}: ` +
    `this run carries its own, ${library.file} (sha256 ${library.sha256.slice(0, 12)}); ` +
    `kdgat-runner infra up --stack ${stackName} (in the kdgat-hpc checkout: npx nx run infra:up --stack ${stackName}) installs this version beside the site's scripts`
  );
}

type Requeue = TrainJobInput['requeue'];
type Staging = TrainJobInput['staging'];

/** The spec's requeue/staging policies with the schema's defaults. */
export function policiesOf(resolved: ResolvedExperiment): { requeue: Requeue; staging: Staging } {
  const spec = resolved.spec as { requeue?: Partial<Requeue>; staging?: Partial<Staging> };
  const declared = { ...REQUEUE_DEFAULTS, ...(spec.requeue ?? {}) };
  const contract = pipelineOf(resolved).requeue;
  return {
    // A pipeline that speaks no requeue contract is not signalled nor requeued: the runner
    // resubmits it after a time-out (requeue.maxRecoveries), and it resumes from its checkpoint.
    requeue: contract === 'none' ? { ...declared, enabled: false } : { ...declared, contract },
    staging: { enabled: spec.staging?.enabled ?? false, datasets: spec.staging?.datasets ?? [] },
  };
}

/**
 * The pipeline's `--run-root` of every job of a run: one `outputs/` for all stages and chunks, so
 * a stage finds what the stage before it wrote. Array task i of a chunk runs sweep point
 * `firstPoint + i` under `outputs/point_<firstPoint + i>` (SLURM restarts each chunk at index 0).
 */
export function runRootOf(runDir: string): string {
  return join(runDir, 'outputs');
}

export function renderPlan(
  plan: RunPlan,
  resolved: ResolvedExperiment,
  stack: StackOutputs,
  runDir: string,
  schedulerKind: 'slurm' | 'local',
  /** The run's code snapshot on the site (a site over SSH); absent: the environment's pipeline. */
  code?: string,
  /** The stack's name (the job library's error names its `infra:up`) and a reproduced run's library. */
  libraryOpts: Parameters<typeof jobLibraryFor>[2] = {},
): RenderedJob[] {
  const { requeue, staging } = policiesOf(resolved);
  const { fix, ...library } = jobLibraryFor(stack, runDir, libraryOpts);
  const logsDir = join(runDir, 'logs');
  return plan.jobs.map((job) => {
    const stage = resolved.stages.find((s) => s.id === job.stageId);
    if (!stage)
      throw new Error(`plan job ${job.key} names stage ${job.stageId}, which the resolved experiment lacks`);
    const runRoot = runRootOf(runDir);
    const tableFile = job.points ? `scripts/${job.key}.points.tsv` : undefined;
    const input: TrainJobInput = {
      experiment: resolved.spec.name,
      // A throttled array runs the plan's `%K` (throttle.ts), not the stage's own.
      stage: job.array
        ? { ...stage, resources: { ...stage.resources, arrayConcurrency: job.array.concurrency } }
        : stage,
      pipeline: pipelineView(pipelineOf(resolved)),
      // The scheduler the run goes to decides the header (#SBATCH lines or none).
      profile: { ...resolved.cluster, scheduler: schedulerKind },
      partition: resolved.partition,
      environment: { ...environmentView(stack, stage.environment), ...codeOf(pipelineOf(resolved), code) },
      layout: { cacheDirs: stack.scratch.cacheDirs, logsDir },
      runRoot,
      scripts: { stageData: stack.scripts.stageData, epilog: stack.scripts.epilog },
      jobLibrary: { path: library.path, fix },
      requeue,
      staging,
      ...(job.points ? { sweepPoints: job.points, firstPoint: job.array?.firstPoint ?? 0 } : {}),
      ...(tableFile ? { arrayTablePath: join(runDir, tableFile) } : {}),
      ...(job.points ? sharedRunDirsOf(resolved, stage) : {}),
      ...(job.tune ? { tune: { studyDir: join(runDir, 'study'), workers: job.tune.workers } } : {}),
      ...(job.shards ? { shards: job.shards } : {}),
      jobEnv: stageJobEnv(pipelineOf(resolved), stack, stage),
    };
    const rendered = renderTrainJob(input);
    const pattern = job.array ? '%x-%A_%a' : '%x-%j';
    const result: RenderedJob = {
      job,
      script: rendered.script,
      runRoot,
      logs: { output: join(logsDir, `${pattern}.out`), error: join(logsDir, `${pattern}.err`) },
      hints: {
        cpusPerTask: stage.resources.cpus,
        timeLimit: stage.resources.time,
        ...(requeue.enabled ? { signal: `B:${requeue.signal}@${requeue.leadSeconds}` } : {}),
      },
      library,
    };
    if (tableFile && rendered.arrayTable !== undefined)
      result.table = { file: tableFile, text: rendered.arrayTable };
    return result;
  });
}

/**
 * A swept stage's earlier stages that run once (outside `sweep.stages`), all the way up its
 * dependencies: their run dirs, which each of its tasks links into its own point root.
 */
function sharedRunDirsOf(
  resolved: ResolvedExperiment,
  stage: ResolvedExperiment['stages'][number],
): Pick<TrainJobInput, 'sharedRunDirs'> {
  const byId = new Map(resolved.stages.map((s) => [s.id, s]));
  const seen = new Set<string>();
  const walk = (id: string): void => {
    for (const d of byId.get(id)?.dependsOn ?? [])
      if (!seen.has(d)) {
        seen.add(d);
        walk(d);
      }
  };
  walk(stage.id);
  const dirs = [...seen].flatMap((id) => {
    const s = byId.get(id)!;
    return s.sweep === false ? [runDirPath(s)] : [];
  });
  return dirs.length > 0 ? { sharedRunDirs: dirs } : {};
}

/**
 * The variables a stage's job exports: its pipeline's `env`, the stack's, the stage's, then the
 * pipeline's raw-data variable from the stack's data sets (`jobEnvironment` of @kdgat/config).
 */
export function stageJobEnv(
  pipeline: Pipeline,
  stack: Pick<StackOutputs, 'jobEnvironment'>,
  stage: Pick<ResolvedExperiment['stages'][number], 'dataset' | 'env'>,
): [string, string][] {
  const rawDir = stack.jobEnvironment?.rawData[stage.dataset];
  return jobEnvironment({
    dataset: stage.dataset,
    ...(pipeline.env ? { pipeline: pipeline.env } : {}),
    ...(stack.jobEnvironment ? { stack: stack.jobEnvironment.env } : {}),
    ...(stage.env ? { stage: stage.env } : {}),
    ...(pipeline.rawData ? { rawData: pipeline.rawData } : {}),
    ...(rawDir !== undefined ? { rawDir } : {}),
    ...(pipeline.cacheRootVariable ? { owned: [pipeline.cacheRootVariable] } : {}),
  });
}

/**
 * Where the job finds the pipeline's code: the run's snapshot on a site over SSH, a declared
 * pipeline's own directory on this machine; nothing for the default pipeline here (the environment has it installed).
 */
function codeOf(
  pipeline: Pipeline,
  snapshot: string | undefined,
): Partial<Pick<TrainJobInput['environment'], 'code' | 'codePaths'>> {
  const dir = snapshot ?? pipeline.codeDir;
  return dir === undefined ? {} : { code: dir, codePaths: pipeline.codePaths };
}

/**
 * The run's pipeline: a manifest written before pipelines were declared ran the default one, and
 * one of the default pipeline written before its declaration named a cache-root or raw-data
 * variable gets the default's.
 */
export function pipelineOf(resolved: ResolvedExperiment): Pipeline {
  const stored = (resolved as Partial<Pick<ResolvedExperiment, 'pipeline'>>).pipeline;
  if (stored === undefined) return defaultPipeline();
  if (!isDefaultPipeline(stored)) return stored;
  const { cacheRootVariable, rawData } = defaultPipeline();
  return {
    ...stored,
    ...(stored.cacheRootVariable === undefined && cacheRootVariable !== undefined
      ? { cacheRootVariable }
      : {}),
    ...(stored.rawData === undefined && rawData !== undefined ? { rawData } : {}),
  };
}

/** What a job script needs of the run's pipeline declaration. */
export function pipelineView(pipeline: Pipeline): NonNullable<TrainJobInput['pipeline']> {
  return {
    name: pipeline.name,
    command: pipeline.command,
    overrideStyle: pipeline.overrides,
    ...(pipeline.cacheRootVariable !== undefined ? { cacheRootVariable: pipeline.cacheRootVariable } : {}),
  };
}

/** The stage's environment as the stack provisioned it (checked by `checkEnvironmentMatches` first). */
function environmentView(stack: StackOutputs, name: string): TrainJobInput['environment'] {
  const env = stackEnvironment(stack, name);
  if (!env)
    throw new Error(
      `stack has no environment ${name} (it has ${stack.environments.map((e) => e.name).join(', ')})`,
    );
  return {
    name: env.name,
    backend: env.backend,
    prefix: env.prefix,
    ...(env.modules !== undefined && env.modules.length > 0 ? { modules: env.modules } : {}),
  };
}

/**
 * Writes the rendered scripts (executable) and sweep tables into `outDir`, with its `logs/`, and the
 * job library where the run carries its own (`scripts/lib/job-<sha256 prefix>.sh`).
 */
export function writeRendered(outDir: string, rendered: readonly RenderedJob[]): void {
  mkdirSync(join(outDir, 'scripts'), { recursive: true });
  mkdirSync(join(outDir, 'logs'), { recursive: true });
  for (const file of new Set(rendered.flatMap((r) => (r.library.file ? [r.library.file] : [])))) {
    mkdirSync(dirname(join(outDir, file)), { recursive: true });
    writeFileSync(join(outDir, file), JOB_LIBRARY.text, { mode: 0o644 });
  }
  for (const r of rendered) {
    const p = join(outDir, r.job.scriptFile);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, r.script, { mode: 0o755 });
    if (r.table) writeFileSync(join(outDir, r.table.file), r.table.text);
  }
}
