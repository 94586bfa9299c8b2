import { z } from 'zod';
import { GpuType, SafeName, SlurmAccount, SlurmTime } from '../cluster/schema.ts';
import { RUN_CONTRACT } from '../contract/run-contract.ts';
import { REQUEUE_SIGNALS } from '../script-values.ts';
import { JobEnvSchema } from '../pipeline/job-env.ts';
import { StageArgWord } from './stage-args.ts';

export {
  STAGES,
  Stage,
  Model,
  Scale,
  ScalarSchema,
  OverrideKey,
  OverridesSchema,
  type Scalar,
  type StageName,
} from './primitives.ts';
import { OverrideKey, OverridesSchema, ScalarSchema } from './primitives.ts';
import { TuneSchema } from './tune.ts';

/** The requeue policy of a spec that says nothing (the one place these defaults are written). */
export const REQUEUE_DEFAULTS: {
  enabled: boolean;
  signal: (typeof REQUEUE_SIGNALS)[number];
  leadSeconds: number;
  maxRestarts: number;
  maxRecoveries: number;
} = {
  enabled: true,
  signal: RUN_CONTRACT.requeue.defaultSignal,
  leadSeconds: 300,
  maxRestarts: 3,
  maxRecoveries: 2,
};

export const ResourcesInputSchema = z
  .object({
    cpus: z.number().int().positive().optional(),
    memGB: z.number().positive().optional(),
    gpus: z
      .object({ count: z.number().int().min(0), type: GpuType.optional() })
      .strict()
      .optional(),
    nodes: z.number().int().positive().optional(),
    ntasksPerNode: z.number().int().positive().optional(),
    time: SlurmTime.optional(),
    partition: SafeName.optional(),
    /** `%K` of a sweep's job array: at most K tasks run at once. */
    arrayConcurrency: z.number().int().positive().optional(),
  })
  .strict();

/**
 * Outputs of an earlier run that a stage reads instead of running the stage that makes them here
 * (a curriculum from the VGAE of yesterday's run). `run`: that run's directory or its
 * manifest.json (absolute, or relative to the stack's runs dir), or an experiment name: its latest
 * run whose `stage` finished. The runner checks before queueing that the outputs exist and were made
 * from the same dataset and graph parameters, records them in the manifest and links them in.
 */
export const StageInputSchema = z
  .object({
    run: z
      .string()
      .regex(
        /^[A-Za-z0-9_./+-]+$/,
        'an earlier run: its run directory, its manifest.json, or an experiment name (letters, digits, _ . / + -)',
      ),
    stage: SafeName,
  })
  .strict();

export const StageSpecSchema = z
  .object({
    id: SafeName,
    /** A stage, model and scale of the experiment's pipeline (the default's: see STAGES, gat|vgae, large|small). */
    stage: SafeName,
    model: SafeName,
    scale: SafeName,
    dataset: SafeName,
    /** Ids of earlier stages this one waits for (`--dependency=afterok`). */
    dependsOn: z.array(SafeName).default([]),
    overrides: OverridesSchema.default({}),
    resources: ResourcesInputSchema.default({}),
    /** Outputs of stages of earlier runs this stage reads (see StageInputSchema). */
    inputs: z.array(StageInputSchema).optional(),
    /**
     * The environment this stage runs in, when not the experiment's (e.g. preprocessing on a CPU
     * environment, training on a GPU one): a preset name or an EnvironmentSpec YAML file, declared
     * by the stack like the experiment's.
     */
    environment: z.string().min(1).optional(),
    /**
     * Spread this stage over a job array of N tasks, then one join job (the default pipeline's
     * preprocess: each task builds its share of the recordings into the shard ledger, the join
     * makes the cache the later stages read; a rerun redoes only missing or failed shards).
     */
    shards: z.number().int().min(2).max(10000).optional(),
    /**
     * Variables this stage's job exports, over its pipeline's and the stack's `env` (values quoted,
     * never expanded; the job's own variables and the pipeline's raw-data variable are refused).
     */
    env: JobEnvSchema.optional(),
    /**
     * Words appended to the pipeline's command for this stage (before the overrides), one argv
     * entry each. `{output:<earlier stage id>.<dir|checkpoint|metrics|history>}` names that stage's
     * output (its run dir, or a file its pipeline declares in `outputs`): the stage then waits for
     * it, and the word becomes the path the job reads (e.g. a student's `--teacher-path`).
     */
    args: z.array(StageArgWord).optional(),
  })
  .strict();

export type StageInput = z.infer<typeof StageInputSchema>;

export const ExperimentSpecSchema = z
  .object({
    $schema: z.string().optional(),
    name: SafeName,
    /** A cluster preset (`osc-pitzer`, `local`, …) or a path to a ClusterProfile YAML file. */
    cluster: z.string().min(1),
    /** An environment preset (`gnn-rapids`, `cpu-local`, …) or a path to an EnvironmentSpec YAML file. */
    environment: z.string().min(1),
    /**
     * The training code every stage runs: the default pipeline's name (DEFAULT_PIPELINE_NAME) or a path to a pipeline declaration
     * (.yaml/.yml: its command, override style, requeue contract, schema and code; see
     * libs/config/src/pipeline/pipeline.ts).
     */
    pipeline: z.string().min(1).optional(),
    account: SlurmAccount.optional(),
    /** Default partition for stages that name none (else the cluster's default). */
    partition: SafeName.optional(),
    /** Accept `use_cugraph: true` on an environment without pylibcugraphops (the layer falls back with a warning). */
    allowFallback: z.boolean().default(false),
    /** Overrides for every stage; a stage's own overrides win. */
    overrides: OverridesSchema.default({}),
    stages: z.array(StageSpecSchema).min(1),
    staging: z
      .object({ enabled: z.boolean().default(false), datasets: z.array(SafeName).default([]) })
      .strict()
      .default({ enabled: false, datasets: [] }),
    profiling: z
      .object({ enabled: z.boolean().default(false), steps: z.number().int().positive().default(5) })
      .strict()
      .default({ enabled: false, steps: 5 }),
    /**
     * At most this many of the run's jobs and array tasks run at once, across all its arrays,
     * chunks and shards (the runner splits it between them, and holds later chunks of a sweep until
     * earlier ones drain). Default: the site's per-user running limit less the user's jobs already there.
     */
    concurrency: z.number().int().positive().optional(),
    /** N runs as one job array: the cartesian product of `grid`, plus each entry of `list`. */
    sweep: z
      .object({
        grid: z.record(OverrideKey, z.array(ScalarSchema).min(1, 'at least one value')).optional(),
        list: z.array(OverridesSchema).min(1, 'at least one point').optional(),
        /**
         * The stages the sweep runs over (default: every stage). The others run once, and a swept
         * stage after them reads their outputs (a sweep over the student keeps one teacher).
         */
        stages: z.array(SafeName).min(1, 'at least one stage id').optional(),
      })
      .strict()
      .optional(),
    requeue: z
      .object({
        enabled: z.boolean().default(REQUEUE_DEFAULTS.enabled),
        signal: z.enum(REQUEUE_SIGNALS).default(REQUEUE_DEFAULTS.signal),
        /** Seconds before the time limit at which SLURM sends the signal (--signal=B:SIG@lead). */
        leadSeconds: z.number().int().min(10).max(3600).default(REQUEUE_DEFAULTS.leadSeconds),
        maxRestarts: z.number().int().min(0).max(100).default(REQUEUE_DEFAULTS.maxRestarts),
        /**
         * Resubmissions the runner makes of one job after a failure it can survive (`--wait`,
         * `runner resume`): a node failure (excluding that node), a memory kill (more memory, or a
         * smaller batch after a CUDA OOM), a time limit reached without the requeue handshake (more
         * time); each resumes from checkpoints/last.ckpt. 0: none.
         */
        maxRecoveries: z.number().int().min(0).max(10).default(REQUEUE_DEFAULTS.maxRecoveries),
      })
      .strict()
      .default(REQUEUE_DEFAULTS),
    /** A hyperparameter search over one stage (`nx run runner:tune`); see tune.ts. */
    tune: TuneSchema.optional(),
    /** The most this experiment may charge, in the cluster's billing unit (charging.unit): a plan whose worst case is over it is refused. */
    budget: z.object({ maxBillingUnits: z.number().positive() }).strict().optional(),
  })
  .strict();

export type ExperimentSpec = z.infer<typeof ExperimentSpecSchema>;
export type ExperimentSpecInput = z.input<typeof ExperimentSpecSchema>;
