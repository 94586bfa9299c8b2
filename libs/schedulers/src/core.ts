// The one interface every scheduler implements (submitit-style: core here, one sibling
// folder per scheduler). The runner's plan/submit/track code only talks to this.

/** SLURM's own state names; the local scheduler reports the same vocabulary. */
export type JobState =
  | 'PENDING'
  | 'RUNNING'
  | 'REQUEUED'
  | 'SUSPENDED'
  /** Every process of it stopped with SIGSTOP (`scancel --signal=STOP`): it keeps its allocation. */
  | 'STOPPED'
  | 'COMPLETING'
  | 'COMPLETED'
  | 'FAILED'
  | 'CANCELLED'
  | 'TIMEOUT'
  | 'OUT_OF_MEMORY'
  | 'NODE_FAIL'
  | 'PREEMPTED'
  | 'BOOT_FAIL'
  | 'DEADLINE'
  | 'UNKNOWN';

export const ACTIVE_STATES: ReadonlySet<JobState> = new Set([
  'PENDING',
  'RUNNING',
  'REQUEUED',
  'SUSPENDED',
  'STOPPED',
  'COMPLETING',
]);

export function isActive(state: JobState): boolean {
  return ACTIVE_STATES.has(state);
}

export function isFailure(state: JobState): boolean {
  return !isActive(state) && state !== 'COMPLETED' && state !== 'UNKNOWN';
}

/** Normalises a scheduler's state word ("CANCELLED by 0", "RUNNING+") to a JobState. */
export function normaliseState(raw: string): JobState {
  const word = raw.trim().split(/[\s+]/)[0]?.toUpperCase() ?? '';
  const known: readonly JobState[] = [
    'PENDING',
    'RUNNING',
    'REQUEUED',
    'SUSPENDED',
    'STOPPED',
    'COMPLETING',
    'COMPLETED',
    'FAILED',
    'CANCELLED',
    'TIMEOUT',
    'OUT_OF_MEMORY',
    'NODE_FAIL',
    'PREEMPTED',
    'BOOT_FAIL',
    'DEADLINE',
  ];
  if ((known as readonly string[]).includes(word)) return word as JobState;
  if (word === 'REQUEUE_HOLD' || word === 'REQUEUE_FED' || word === 'CONFIGURING') return 'PENDING';
  if (word === 'STAGE_OUT' || word === 'SIGNALING' || word === 'RESV_DEL_HOLD') return 'RUNNING';
  if (word === 'OOM') return 'OUT_OF_MEMORY';
  return 'UNKNOWN';
}

export interface SubmitRequest {
  /** Job name (`--job-name`), used in logs and the summary. */
  name: string;
  /** Absolute path of the rendered script. */
  scriptPath: string;
  /** Directory the job is submitted from (`SLURM_SUBMIT_DIR`); relative paths resolve here. */
  cwd: string;
  /** Job ids this job waits for with `afterok` (every task of them). */
  dependsOn: string[];
  /** Array job ids this array waits for task by task (`aftercorr`: task i after their task i). */
  aftercorr?: string[];
  /**
   * Job ids this job waits to end, whatever their outcome (`afterany`): a later chunk of a
   * throttled sweep held until the chunk before it drains.
   */
  afterany?: string[];
  /**
   * A job array of `size` tasks, indices 0..size-1, at most `concurrency` at a time: the local
   * scheduler runs these; SLURM reads the script's own `#SBATCH --array`.
   */
  array?: { size: number; concurrency: number };
  /**
   * What a script rendered without `#SBATCH` lines (the local profile) leaves unsaid; the local
   * scheduler uses these where the script has no directive. SLURM reads the script's own.
   */
  cpusPerTask?: number;
  timeLimit?: string;
  /** Log file patterns (`%x-%j.out`, `%A`, `%a` …), absolute. */
  output?: string;
  error?: string;
  /** `B:USR1@60`: the pre-timeout signal, as `--signal` takes it. */
  signal?: string;
  /**
   * sbatch options for this submission only (a recovery: `--exclude=c02`, `--mem=8G`,
   * `--time=00:20:00`, `--array=3` for one array task, `--export=ALL,NAME=value`): put before the
   * script, they override its `#SBATCH` lines. Only the forms of `SUBMIT_OVERRIDES` are accepted
   * (overrides.ts); the local scheduler honours `--time`, `--array` and `--export` and ignores
   * `--exclude` and `--mem` (one machine, no memory limit).
   */
  overrides?: string[];
}

export interface TaskStatus {
  /** The id the job was submitted under (the array job id for arrays). */
  jobId: string;
  /** Array index, absent for plain jobs. */
  arrayIndex?: number;
  /** The task's own job id (SLURM gives every array task one; `%j` in log names). */
  taskJobId?: string;
  state: JobState;
  /** `exit:signal`, as SLURM prints it. */
  exitCode?: string;
  elapsedSeconds?: number;
  reason?: string;
  restarts?: number;
  /** The nodes the task ran (or runs) on, expanded (`c01`, `c02`): squeue %N, scontrol or sacct NodeList. */
  nodes?: string[];
  /**
   * What the task used, from SLURM accounting (sacct, every step of the job summed): absent where
   * the cluster has no accounting or the task has not ended.
   */
  accounting?: TaskAccounting;
}

/**
 * sacct's figures for one job or array task: what `seff` reads. They describe the job id's latest
 * attempt (sacct without `-D`): a requeued task's earlier attempts are not in them.
 */
export interface TaskAccounting {
  /**
   * TotalCPU of all the job's steps (batch, extern and srun steps), in seconds: user + system time
   * of every task on every node; a step killed by a signal may lose its children's share.
   */
  cpuSeconds: number;
  /**
   * The largest MaxRSS of any step, in MB (a multi-node step's MaxRSS is its largest task's); null
   * when sacct sampled none (a job shorter than JobAcctGatherFrequency shows 0).
   */
  maxRssMB: number | null;
  /**
   * The largest step's memory summed over its tasks (sacct TRESUsageInTot `mem`): every node of a
   * multi-node step counted; absent where sacct did not print the field.
   */
  totalRssMB?: number | null;
  /** ElapsedRaw of the job allocation. */
  elapsedSeconds: number;
  /** AllocCPUS of the allocation (every node). */
  allocCpus: number;
  /** ReqMem in MB for the whole job (an older SLURM's per-node `n` or per-cpu `c` figure multiplied out). */
  reqMemMB: number | null;
  /** The steps that ran (`batch`, `extern`, `0` …). */
  steps: string[];
}

export interface PreflightResult {
  ok: boolean;
  /** The scheduler's own words: where it would start, or why it refuses. */
  message: string;
}

export interface SchedulerLimits {
  /** Highest array index + 1 the scheduler accepts (SLURM MaxArraySize). */
  maxArraySize: number;
}

export interface Scheduler {
  readonly kind: 'slurm' | 'local';
  limits(): Promise<SchedulerLimits>;
  preflight(request: SubmitRequest): Promise<PreflightResult>;
  /** Queues the job and returns its id. Throws SchedulerError with the scheduler's reason. */
  submit(request: SubmitRequest): Promise<string>;
  cancel(jobIds: string[]): Promise<void>;
  /**
   * The user's jobs queued or running now, every array task counted (as SLURM counts them against
   * per-user limits); absent where the scheduler cannot say (a site not provisioned yet).
   */
  activeJobsOfUser?(): Promise<number>;
  /**
   * `sbatch --test-only` of a script's text, not yet written anywhere: when and where the scheduler
   * would start it now (placement across a site's clusters); absent where the scheduler cannot say.
   */
  probe?(script: string): Promise<PreflightResult>;
  /** One batched query for all given jobs; returns every known task, keyed by job id. */
  query(jobIds: string[]): Promise<Map<string, TaskStatus[]>>;
  /** Calls made to the scheduler's submit command (for bench/). */
  readonly submitCalls: number;
}

export class SchedulerError extends Error {
  readonly command: string;
  readonly stderr: string;
  constructor(message: string, command: string, stderr: string) {
    super(message);
    this.name = 'SchedulerError';
    this.command = command;
    this.stderr = stderr;
  }
}
