// manifest.json: everything needed to see what ran and to run it again (`--from-manifest`).
// Read here; written only through RunRecord (record.ts).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Scalar } from '@kdgat/config';
import type {
  CostRecord,
  FromStudy,
  JobLibraryUse,
  Placement,
  RightSized,
  StackOutputs,
  Throttle,
} from '@kdgat/planning';
import { runCommand, type JobState, type TaskAccounting } from '@kdgat/schedulers';
import type { ResolvedInput } from './inputs/inputs.ts';

export const MANIFEST_FILE = 'manifest.json';
export const MANIFEST_VERSION = 1;

export interface ManifestJob {
  /** Plan job key, e.g. `curriculum` or `train.chunk1`. */
  key: string;
  name: string;
  stageId: string;
  script: string; // relative to the run dir
  dependsOn: string[]; // plan keys
  /** The part of `dependsOn` waited for task by task (`aftercorr`): arrays over the same points. */
  aftercorr?: string[];
  /** The part of `dependsOn` waited for to end whatever its outcome (`afterany`): a throttled sweep's chunk before this one. */
  afterany?: string[];
  jobId?: string;
  array?: { size: number; concurrency: number; firstPoint: number };
  /** A sharded stage's array of shard tasks (`task`: task i runs under `<runRoot>/shard_<i>`) or its join. */
  shards?: { count: number; task: boolean };
  /** The pipeline's `--run-root`; array task i runs under `<runRoot>/point_<array.firstPoint + i>`. */
  runRoot: string;
  /** Log file patterns (SLURM `%x %j %A %a`), absolute. */
  logs: { output: string; error: string };
  /**
   * The states the runner saw last, and since when (`at`: first seen in them): jobs vanish from
   * squeue after MinJobAge. `tasks`, `accounting` and `nodes` are keyed by array index, `-` for a
   * plain job; `accounting` (sacct's, where the cluster keeps it) and `nodes` are kept for tasks
   * that ended, so status, report and history read them after SLURM forgot the job.
   */
  lastSeen?: {
    state: JobState;
    at: string;
    tasks?: Record<string, JobState>;
    accounting?: Record<string, TaskAccounting>;
    nodes?: Record<string, string[]>;
  };
  /**
   * The runner's recoveries of this job (`--wait`, `runner resume`), oldest first: each failed
   * submission and what replaced it; `jobId` above is the latest submission's.
   */
  attempts?: JobAttempt[];
  /**
   * Array tasks of earlier submissions that were not resubmitted (they ended: their states are
   * final), shown with the tasks of the latest submission.
   */
  earlierTasks?: EarlierTask[];
  /** Why the runner stopped recovering this job, the last time it looked. */
  stopped?: { jobId: string; tasks?: number[]; state: JobState; cause: string; reason: string; at: string };
}

/** One recovery: the submission that failed, why, and the options it was resubmitted with. */
export interface JobAttempt {
  /** The job id that failed (kept; the job's `jobId` is now the resubmission's). */
  jobId: string;
  /** The array tasks resubmitted (absent: the whole job). */
  tasks?: number[];
  /** The final state of the failed submission (a dependent's: CANCELLED). */
  state: JobState;
  /** NODE_FAIL, OUT_OF_MEMORY, GPU_OOM, TIMEOUT, or DEPENDENCY (resubmitted after its upstream); `+` between several. */
  cause: string;
  action: 'resubmitted';
  /** The resubmission's own sbatch options (`--exclude=c02`, `--mem=16G`, `--time=…`, `--array=3`, `--export=…`). */
  options: string[];
  /** The resubmission's job id. */
  resubmittedAs: string;
  at: string;
  /** The resubmission's worst case in the cluster's billing unit (counted against the budget); null without rates. */
  worstUnits: number | null;
  /** The line printed for it. */
  note: string;
}

/** A task of an earlier submission of a recovered array job. */
export interface EarlierTask {
  jobId: string;
  arrayIndex?: number;
  taskJobId?: string;
  state: JobState;
  exitCode?: string;
}

/** An environment a run's stages ran in, as the stack had it then. */
export interface ManifestEnvironment {
  name: string;
  specHash: string;
  lockHash: string;
  lockPath: string;
  /** The explicit lock copied into the run dir (relative to it), when the stack exported it. */
  lockFile?: string;
  /** `--from-manifest --allow-env-change`: the recorded lock this run's environment differs from. */
  changedFrom?: { lockHash: string; differences: string[] };
}

export interface Manifest {
  version: number;
  experiment: string;
  createdAt: string;
  runDir: string;
  spec: { file: string; text: string; hash: string };
  resolved: unknown;
  warnings: string[];
  git: { commit: string | null; dirty: boolean | null };
  /**
   * The code the jobs import, on a site reached over SSH: the snapshot of python/ (its git tree),
   * its directory on the site, and for a dirty tree (--allow-dirty) the diff kept in the run dir.
   */
  code?: { tree: string; commit: string; dir: string; dirty: boolean; diffFile?: string };
  /** The experiment's environment: every stage runs in it unless it names its own. */
  environment: ManifestEnvironment;
  /**
   * The other environments stages run in (`stages[].environment`), one entry each; which stage runs
   * where is `resolved.stages[].environment` (absent in older manifests: the experiment's).
   */
  otherEnvironments?: ManifestEnvironment[];
  stack: { name: string; source: string; outputs: StackOutputs };
  scheduler: 'slurm' | 'local';
  /**
   * A site of several clusters: the cluster the run's jobs went to (every scheduler command names it
   * with `-M`), how it was chosen (auto, named, default) and why, with every cluster asked.
   */
  placement?: Placement;
  scripts: Record<string, string>; // relative path → sha256
  /**
   * The job library every script loads (the shell all jobs share, by its sha256): the site's copy
   * or the run's own in `scripts/lib/`. Absent in runs recorded before it existed, whose scripts
   * carried that shell inline (the older layout).
   */
  jobLibrary?: JobLibraryUse;
  jobs: ManifestJob[];
  /** `<job key>` → array index → the sweep point (overrides) that task runs. */
  arrayIndex: Record<string, Record<string, Record<string, Scalar>>>;
  /** Outputs of earlier runs that stages of this run read (linked into its run roots). */
  inputs?: ResolvedInput[];
  /** A tune run: the study its workers fill. */
  tune?: { study: string; studyDir: string };
  /** A run trained from a study's best trial (`train --from-study S --best`). */
  fromStudy?: FromStudy;
  /** What the plan was estimated to charge before it was queued (worst and expected case). */
  /** The run's throttle: its concurrency, where it came from, the chunks held (planning's throttle.ts). */
  throttle?: Throttle;
  cost?: CostRecord;
  /** Requests sized from history (`train --right-size`), by stage id, with their basis. */
  rightSized?: RightSized;
  submission: {
    status: 'planned' | 'submitted' | 'failed';
    error?: string;
    cancelledAfterFailure?: string[];
    forced?: boolean;
    reproducedFrom?: string;
  };
}

export function sha256(text: string | Buffer): string {
  return createHash('sha256').update(text).digest('hex');
}

export function readManifest(pathOrDir: string): Manifest {
  const p = pathOrDir.endsWith('.json') ? pathOrDir : join(pathOrDir, MANIFEST_FILE);
  if (!existsSync(p)) throw new Error(`no manifest at ${p}`);
  const m = JSON.parse(readFileSync(p, 'utf8')) as Manifest;
  if (m.version !== MANIFEST_VERSION)
    throw new Error(`${p}: manifest version ${String(m.version)}, expected ${MANIFEST_VERSION}`);
  // Runs recorded when a stack had one environment kept its outputs' `environment`.
  const outputs = m.stack?.outputs as unknown as Record<string, unknown> | undefined;
  if (outputs && 'environment' in outputs && !('environments' in outputs)) {
    const { environment, ...rest } = outputs;
    m.stack.outputs = { ...rest, environments: [environment] } as StackOutputs;
  }
  return m;
}

export async function gitInfo(cwd: string): Promise<{ commit: string | null; dirty: boolean | null }> {
  try {
    const head = await runCommand('git', ['rev-parse', 'HEAD'], { cwd });
    if (head.code !== 0) return { commit: null, dirty: null };
    const status = await runCommand('git', ['status', '--porcelain', '--untracked-files=no'], { cwd });
    return { commit: head.stdout.trim(), dirty: status.code === 0 ? status.stdout.trim() !== '' : null };
  } catch {
    return { commit: null, dirty: null };
  }
}

/** Every environment a run used, the experiment's first. */
export function environmentsOf(
  manifest: Pick<Manifest, 'environment' | 'otherEnvironments'>,
): ManifestEnvironment[] {
  return [manifest.environment, ...(manifest.otherEnvironments ?? [])];
}

/** The environment a stage of a run ran in. */
export function environmentOfStage(
  manifest: Pick<Manifest, 'environment' | 'otherEnvironments' | 'resolved'>,
  stageId: string,
): ManifestEnvironment {
  const stages = (manifest.resolved as { stages?: { id: string; environment?: string }[] } | undefined)
    ?.stages;
  const name = stages?.find((s) => s.id === stageId)?.environment;
  return environmentsOf(manifest).find((e) => e.name === name) ?? manifest.environment;
}

/** Job ids of a manifest, in submission order (jobs never submitted have none). */
export function jobIdsOf(manifest: Pick<Manifest, 'jobs'>): string[] {
  return manifest.jobs.flatMap((j) => (j.jobId ? [j.jobId] : []));
}
