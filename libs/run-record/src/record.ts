// The run record: one manifest per run directory and the one path that writes it (#save: a temp
// file renamed over manifest.json, so a reader never sees half a manifest). Every change a run
// goes through — planned, refused at preflight, submitted, failed, states seen — is a method here.
import { createHash } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { stackEnvironment, type ResolvedExperiment } from '@kdgat/config';
import type { FromStudy, Placement, PlanCosting, RenderedJob, RunPlan, StackOutputs } from '@kdgat/planning';
import { costRecord } from '@kdgat/planning';
import type { ResolvedInput } from './inputs/inputs.ts';
import {
  MANIFEST_FILE,
  MANIFEST_VERSION,
  environmentsOf,
  readManifest,
  sha256,
  type EarlierTask,
  type JobAttempt,
  type Manifest,
  type ManifestEnvironment,
  type ManifestJob,
} from './manifest.ts';
import { rememberStates, type JobProgress } from './track/track.ts';

export class RunRecord {
  /**
   * The directory manifest.json is in: the run dir, or its local copy (a site over SSH, a plan of an
   * unprovisioned site), in which case `manifest.runDir` is the site's.
   */
  readonly dir: string;
  readonly manifest: Manifest;
  /** Replaces the site's manifest after each local write, once the run dir is on the site. */
  #publish: ((text: string) => Promise<void>) | undefined;
  #published: Promise<void> = Promise.resolve();
  #lastPublished = '';

  private constructor(dir: string, manifest: Manifest) {
    this.dir = dir;
    this.manifest = manifest;
  }

  /**
   * From now on every change is also written to the site (in order, each replacing the whole
   * file there); `published()` waits for those writes and reports the first that failed.
   */
  publishTo(write: (text: string) => Promise<void>): void {
    this.#publish = write;
  }

  /** Waits for the writes to the site so far; throws the first failure. */
  async published(): Promise<void> {
    await this.#published;
  }

  /** Writes a new run's manifest into `dir`. */
  static create(dir: string, manifest: Manifest): RunRecord {
    const record = new RunRecord(dir, manifest);
    record.#save();
    return record;
  }

  /** A recorded run: its directory or its manifest.json. */
  static open(pathOrDir: string): RunRecord {
    const p = resolve(pathOrDir);
    const manifest = readManifest(p);
    return new RunRecord(p.endsWith('.json') ? dirname(p) : p, manifest);
  }

  get path(): string {
    return join(this.dir, MANIFEST_FILE);
  }

  /** Preflight refused: nothing was queued. */
  refused(error: string): void {
    this.manifest.submission = { ...this.manifest.submission, status: 'failed', error };
    this.#save();
  }

  /** The scheduler's job ids, with the outcome: submitted, or failed with what was cancelled. */
  submitted(jobIds: ReadonlyMap<string, string>, failure?: { error: string; cancelled: string[] }): void {
    for (const j of this.manifest.jobs) {
      const id = jobIds.get(j.key);
      if (id) j.jobId = id;
    }
    this.manifest.submission = failure
      ? {
          ...this.manifest.submission,
          status: 'failed',
          error: failure.error,
          cancelledAfterFailure: failure.cancelled,
        }
      : { ...this.manifest.submission, status: 'submitted' };
    this.#save();
  }

  /** The states just seen, kept for when the scheduler has forgotten the jobs (MinJobAge). */
  seen(progress: readonly JobProgress[]): void {
    rememberStates(this.manifest, progress);
    this.#save();
  }

  /**
   * A job resubmitted by a recovery: the attempt is kept, the job's id becomes the new one (its
   * last-seen states were the failed submission's), and the array tasks not resubmitted are kept.
   */
  recovered(key: string, attempt: JobAttempt, earlierTasks: readonly EarlierTask[]): void {
    const job = this.#job(key);
    job.attempts = [...(job.attempts ?? []), attempt];
    job.jobId = attempt.resubmittedAs;
    delete job.lastSeen;
    delete job.stopped;
    if (earlierTasks.length > 0) job.earlierTasks = [...earlierTasks];
    else delete job.earlierTasks;
    this.#save();
  }

  /** The runner stopped recovering a job, and why. */
  stoppedRecovery(key: string, stop: NonNullable<ManifestJob['stopped']>): void {
    this.#job(key).stopped = stop;
    this.#save();
  }

  #job(key: string): ManifestJob {
    const job = this.manifest.jobs.find((j) => j.key === key);
    if (!job)
      throw new Error(
        `${this.path}: no job ${JSON.stringify(key)} (expected one of ${this.manifest.jobs.map((j) => j.key).join(', ')})`,
      );
    return job;
  }

  #save(): void {
    const text = JSON.stringify(this.manifest, null, 2) + '\n';
    const tmp = `${this.path}.${process.pid}.tmp`;
    writeFileSync(tmp, text);
    renameSync(tmp, this.path);
    const publish = this.#publish;
    // The site's copy changes only when the manifest does (a poll that saw nothing new writes nothing).
    if (publish && text !== this.#lastPublished) {
      this.#lastPublished = text;
      this.#published = this.#published.then(() => publish(text));
    }
  }
}

/** sha256 of every rendered script and sweep table, by path relative to the run dir. */
export function scriptHashes(rendered: readonly RenderedJob[]): Record<string, string> {
  const h: Record<string, string> = {};
  for (const r of rendered) {
    h[r.job.scriptFile] = sha256(r.script);
    if (r.table) h[r.table.file] = sha256(r.table.text);
  }
  return h;
}

/** `--from-manifest`: the re-rendered scripts against the recorded ones, and why they differ when it is known. */
export interface Reproduction {
  identical: boolean;
  differing: string[];
  /** Why the bytes differ, when the layout or the job library changed since the recorded run. */
  note?: string;
}

/** `--from-manifest`: the scripts re-rendered for the recorded run dir against the recorded hashes. */
export function reproductionOf(source: Manifest, rendered: readonly RenderedJob[]): Reproduction {
  const again = scriptHashes(rendered);
  const files = new Set([...Object.keys(again), ...Object.keys(source.scripts)]);
  const differing = [...files].filter((f) => again[f] !== source.scripts[f]);
  const note = differing.length > 0 ? layoutNote(source, rendered[0]?.library) : undefined;
  return { identical: differing.length === 0, differing, ...(note ? { note } : {}) };
}

/** Why a reproduction's scripts differ when the recorded run's shell is not the one its scripts load now. */
function layoutNote(source: Manifest, now: RenderedJob['library'] | undefined): string | undefined {
  if (now === undefined) return undefined;
  const library = `the job library ${now.path} (sha256 ${now.sha256.slice(0, 12)})`;
  if (source.jobLibrary === undefined)
    return (
      `the recorded run's scripts were rendered by the older layout, each carrying the whole job shell inline; ` +
      `the scripts rendered now hold only their #SBATCH lines and values and load ${library}, so their bytes differ ` +
      `(the new run uses the scripts rendered now)`
    );
  if (source.jobLibrary.sha256 !== now.sha256)
    return (
      `the recorded run's scripts load another version of the job library (sha256 ${source.jobLibrary.sha256.slice(0, 12)}, ${source.jobLibrary.path}); ` +
      `the scripts rendered now load ${library}, so their bytes differ`
    );
  return undefined;
}

export interface NewRun {
  runDir: string;
  spec: { file: string; text: string; warnings: readonly unknown[] };
  resolved: ResolvedExperiment;
  plan: RunPlan;
  rendered: readonly RenderedJob[];
  stack: { name: string; source: string; outputs: StackOutputs };
  scheduler: 'slurm' | 'local';
  git: Manifest['git'];
  code?: Manifest['code'];
  /** The environment locks copied into the run dir, by environment name (those the stack carried). */
  lockFiles: Record<string, string>;
  /** `--from-manifest`: the run reproduced, and how its environments changed since (by name). */
  source?: Manifest;
  envChanges?: Record<string, { changed: boolean; differences: string[] }>;
  inputs: readonly ResolvedInput[];
  study?: { name: string; dir: string };
  fromStudy?: FromStudy;
  /** A site of several clusters: where the run went and why. */
  placement?: Placement;
  costing: PlanCosting;
  rightSized?: Manifest['rightSized'];
  forced: boolean;
}

/** The manifest of a run about to be preflighted and submitted (status `planned`). */
/**
 * The resolution as the manifest keeps it: the pipeline by its declaration, its config schema by a
 * hash (the schema is the pipeline's file, not the run's; the default pipeline's is 15 KB).
 */
function recordedResolution(resolved: ResolvedExperiment): unknown {
  const { configSchema, ...pipeline } = resolved.pipeline;
  return {
    ...resolved,
    pipeline: {
      ...pipeline,
      ...(configSchema
        ? { configSchemaHash: createHash('sha256').update(JSON.stringify(configSchema)).digest('hex') }
        : {}),
    },
  };
}

export function newManifest(run: NewRun): Manifest {
  const { resolved, source, envChanges, stack } = run;
  const arrayIndex: Manifest['arrayIndex'] = {};
  for (const job of run.plan.jobs) {
    if (job.points) arrayIndex[job.key] = Object.fromEntries(job.points.map((p, i) => [String(i), p]));
  }
  const environment = (name: string): ManifestEnvironment => {
    const env = stackEnvironment(stack.outputs, name);
    if (!env) throw new Error(`stack ${stack.name} has no environment ${name}`);
    const before = source && environmentsOf(source).find((e) => e.name === name);
    const change = envChanges?.[name];
    return {
      name,
      specHash: env.specHash,
      lockHash: env.lockHash,
      lockPath: env.lockPath,
      ...(run.lockFiles[name] ? { lockFile: run.lockFiles[name] } : {}),
      ...(change?.changed && before
        ? { changedFrom: { lockHash: before.lockHash, differences: change.differences } }
        : {}),
    };
  };
  const others = Object.keys(resolved.environments).filter((n) => n !== resolved.environment.name);
  return {
    version: MANIFEST_VERSION,
    experiment: resolved.spec.name,
    createdAt: new Date().toISOString(),
    runDir: run.runDir,
    spec: { file: run.spec.file, text: run.spec.text, hash: resolved.specHash },
    resolved: recordedResolution(resolved),
    warnings: run.spec.warnings.map((w) => (typeof w === 'string' ? w : JSON.stringify(w))),
    git: run.git,
    ...(run.code ? { code: run.code } : {}),
    environment: environment(resolved.environment.name),
    ...(others.length > 0 ? { otherEnvironments: others.map(environment) } : {}),
    // The lock texts are in the run dir (lockFile), not repeated here.
    stack: {
      name: run.stack.name,
      source: run.stack.source,
      outputs: {
        ...stack.outputs,
        environments: stack.outputs.environments.map(({ lock: _text, ...e }) => e),
      },
    },
    scheduler: run.scheduler,
    scripts: scriptHashes(run.rendered),
    ...(run.rendered[0] ? { jobLibrary: run.rendered[0].library } : {}),
    jobs: run.rendered.map(({ job: j, runRoot, logs }) => ({
      key: j.key,
      name: j.name,
      stageId: j.stageId,
      script: j.scriptFile,
      dependsOn: j.dependsOn,
      ...(j.aftercorr ? { aftercorr: j.aftercorr } : {}),
      ...(j.afterany?.length ? { afterany: j.afterany } : {}),
      ...(j.array ? { array: j.array } : {}),
      ...(j.shards ? { shards: j.shards } : {}),
      runRoot,
      logs,
    })),
    arrayIndex,
    ...(run.inputs.length > 0 ? { inputs: [...run.inputs] } : {}),
    ...(run.study ? { tune: { study: run.study.name, studyDir: run.study.dir } } : {}),
    ...(run.fromStudy ? { fromStudy: run.fromStudy } : {}),
    ...(run.placement ? { placement: run.placement } : {}),
    ...(run.plan.throttle?.concurrency !== undefined ? { throttle: run.plan.throttle } : {}),
    cost: costRecord(run.costing, resolved),
    ...(run.rightSized && Object.keys(run.rightSized).length > 0 ? { rightSized: run.rightSized } : {}),
    submission: {
      status: 'planned',
      ...(run.forced ? { forced: true } : {}),
      ...(source ? { reproducedFrom: source.runDir } : {}),
    },
  };
}
