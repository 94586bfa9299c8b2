// A pipeline is declared, not built in: what a job runs (a command template over validated fields),
// how it takes overrides, which requeue contract it speaks, what it publishes (a config schema, a
// metrics file) and where its code is. `kdgat` is one such declaration — the default — made from the
// run contract it already shares with the runner; a researcher's own pipeline is a YAML file of the
// same shape (examples/pipelines/tiny-lightning/pipeline.yaml).
import { z } from 'zod';
import { SafeName } from '../cluster/schema.ts';
import { RUN_CONTRACT, STAGES } from '../contract/run-contract.ts';
import { SCRIPT_VALUES, ruleString } from '../script-values.ts';
import { JobEnvSchema, RawDataDeclarationSchema } from './job-env.ts';
import {
  DEFAULT_CACHE_ROOT_VARIABLE,
  DEFAULT_DATA_ROOT_VARIABLE,
  DEFAULT_PIPELINE_NAME,
  SITE_HELPER_MODULE,
} from './default-package.ts';

export { DEFAULT_PIPELINE_NAME, SITE_HELPER_MODULE };

/**
 * The placeholders a command word may hold. `{stage}` … `{dataset}` are filled when the job script
 * is rendered; `{run_root}` and `{run_dir}` by the job itself (an array task or a tune worker runs
 * under a directory of its own below the run root).
 */
export const COMMAND_PLACEHOLDERS = ['stage', 'model', 'scale', 'dataset', 'run_root', 'run_dir'] as const;
export type CommandPlaceholder = (typeof COMMAND_PLACEHOLDERS)[number];
/** Filled by the job script at run time, not at render time. */
export const RUNTIME_PLACEHOLDERS: readonly CommandPlaceholder[] = ['run_root', 'run_dir'];

/**
 * How an override `key = value` reaches the pipeline:
 * - `dash-O`: `-O key value` (kdgat);
 * - `hydra`: one word `key=value` (Hydra, OmegaConf's dotlist, many argparse CLIs);
 * - `flags`: `--key value`.
 */
export const OVERRIDE_STYLES = ['dash-O', 'hydra', 'flags'] as const;
export type OverrideStyle = (typeof OVERRIDE_STYLES)[number];

/**
 * What happens at the pre-timeout signal (forwarded by the job script to the pipeline):
 * - `handshake`: the run contract's (the pipeline checkpoints, writes the acknowledgement file and
 *   exits with the requeue status; the job script requeues) — kdgat's;
 * - `lightning`: Lightning's `SLURMEnvironment(auto_requeue=True)`: on SIGUSR1 it saves
 *   `hpc_ckpt_<n>.ckpt`, runs `scontrol requeue` itself and resumes from it in the next run (the
 *   spec's `requeue.signal` must be USR1, Lightning's);
 * - `none`: the job is neither signalled nor requeued; the runner resubmits it after a time-out
 *   (`requeue.maxRecoveries`), and the pipeline resumes from its declared checkpoint.
 */
export const REQUEUE_CONTRACTS = ['handshake', 'lightning', 'none'] as const;
export type RequeueContract = (typeof REQUEUE_CONTRACTS)[number];

/** A word of a command template: printable, no newline; `{name}` only for a known placeholder. */
const CommandWord = z
  .string()
  .min(1, 'a non-empty word')
  .regex(/^[^\0\n\r]+$/, 'a word without NUL or line breaks')
  .superRefine((word, ctx) => {
    for (const m of word.matchAll(/\{([^}]*)\}/g)) {
      if (!(COMMAND_PLACEHOLDERS as readonly string[]).includes(m[1]!))
        ctx.addIssue({
          code: 'custom',
          message: `{${m[1]}} is not a placeholder: expected one of ${COMMAND_PLACEHOLDERS.map((p) => `{${p}}`).join(', ')}`,
        });
    }
  });

/** A path inside the run dir (no `..`, not absolute). */
const RunDirPath = z
  .string()
  .regex(
    /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/,
    'a path relative to the run dir (letters, digits, . _ - and /)',
  )
  .refine((p) => !p.split('/').includes('..'), 'a path that stays inside the run dir');

/**
 * A path inside the run dir whose segments may hold `*` (any run of characters but `/`): Lightning's
 * `hpc_ckpt_*.ckpt`, or the CSVLogger's `metrics.csv` under `lightning_logs/version_<n>` (a `*` for
 * the n: one folder per attempt).
 */
const RunDirPattern = z
  .string()
  .regex(
    /^[A-Za-z0-9._*-]+(\/[A-Za-z0-9._*-]+)*$/,
    'a path relative to the run dir (letters, digits, . _ - / and * for any characters within a name)',
  )
  .refine((p) => !p.split('/').includes('..'), 'a path that stays inside the run dir');

export const PipelineDeclarationSchema = z
  .object({
    $schema: z.string().optional(),
    name: SafeName,
    /**
     * The code the jobs run: a directory (relative to this file) whose `pythonPath` entries go first
     * on the job's PYTHONPATH. Absent: the code installed in the environment (kdgat's own).
     */
    code: z
      .object({
        /** A directory (relative to this file) of a git repository. */
        path: z.string().min(1).optional(),
        /**
         * Or a git repository at a commit: cloned once into `.hpc/pipelines/<name>/<commit>` by the
         * runner (a URL git understands, or a path; the full 40-hex commit, so a run names exactly its code).
         */
        git: z
          .object({
            url: z
              .string()
              .regex(
                /^[^\0\s-][^\0\s]*$/,
                'a repository URL or path git understands (no spaces, not an option)',
              ),
            commit: z.string().regex(/^[0-9a-f]{40}$/, 'a full commit hash (40 hex digits)'),
          })
          .strict()
          .optional(),
        pythonPath: z.array(ruleString(SCRIPT_VALUES.codePath)).default(['src']),
      })
      .strict()
      .refine((c) => (c.path === undefined) !== (c.git === undefined), 'either path or git, not both')
      .optional(),
    /** The stage command, one word per argv entry (never a shell string). */
    command: z.array(CommandWord).min(1),
    /** The stage names, models and scales this pipeline accepts (a spec naming another is refused). */
    stages: z.array(SafeName).min(1),
    models: z.array(SafeName).min(1),
    scales: z.array(SafeName).min(1),
    overrides: z.enum(OVERRIDE_STYLES),
    /**
     * The JSON Schema of the pipeline's config: overrides and sweep values are checked against it.
     * `file`: relative to this file. `command`: argv that prints it on stdout, run when the spec is
     * loaded (in the code's directory, its pythonPath first on PYTHONPATH; at most 60 s), so it must
     * not need the cluster or a GPU. Absent: overrides are passed through quoted, and the plan says
     * they were not checked.
     */
    schema: z
      .union([
        z.object({ file: z.string().min(1) }).strict(),
        z.object({ command: z.array(z.string().min(1)).min(1) }).strict(),
      ])
      .optional(),
    requeue: z.enum(REQUEUE_CONTRACTS),
    /**
     * The environment variable the pipeline reads the root of the job's dataset caches from (staged
     * to node-local disk, or the scratch caches when staging is off): `<root>/<dataset>`. The job
     * exports it before the command runs. Absent: the job exports only its own HPC_CACHE_ROOT.
     */
    cacheRootVariable: ruleString(SCRIPT_VALUES.envName).optional(),
    /**
     * The environment variable the pipeline finds its raw recordings through, set by the job from
     * the stack's datasets (`kdgat-hpc:rawDataRoot`, `datasets[].raw`): `points: root` (default) when
     * it reads `$VAR/<dataset>`, `dataset` when it holds the data set's own directory. A stack that
     * declares no raw data for the stage's data set sets nothing (the job inherits the login's).
     */
    rawData: RawDataDeclarationSchema.optional(),
    /**
     * Variables every job of this pipeline exports (a stack's `env` and a stage's win a name);
     * values are quoted, never expanded. SLURM_*, HPC_*, PATH, PYTHONPATH, HOME, USER, TMPDIR and
     * LD_LIBRARY_PATH are the job's own.
     */
    env: JobEnvSchema.optional(),
    /** Where a stage leaves what the runner reads, inside its run dir. */
    outputs: z
      .object({
        /** A JSON object of final scores (`{"val_acc": 0.97, ...}`). */
        metrics: RunDirPath.optional(),
        /**
         * The checkpoint a resubmitted job resumes from (the pipeline's own choice to read it): a
         * path, a pattern, or a list of them (`[checkpoints/last.ckpt, hpc_ckpt_*.ckpt]`); any one
         * there means "resume" to the runner's recovery. `{output:<stage>.checkpoint}` names the first.
         */
        checkpoint: z.union([RunDirPattern, z.array(RunDirPattern).min(1)]).optional(),
        /**
         * Per-epoch history for the report's curves: a CSV with an `epoch` column (Lightning's
         * CSVLogger `metrics.csv`: its rows of one epoch are merged). kdgat's: history.csv. A pattern
         * (a `*` for the n of `lightning_logs/version_<n>`: one folder per attempt) is read as every match in
         * order (numbers in names compare as numbers: version_2 before version_10), rows concatenated.
         */
        history: RunDirPattern.optional(),
      })
      .strict()
      .default({}),
  })
  .strict();

export type PipelineDeclaration = z.infer<typeof PipelineDeclarationSchema>;

/** A declaration with its files resolved to absolute paths (by the loader). */
export interface Pipeline extends Omit<PipelineDeclaration, 'code' | 'schema'> {
  /**
   * The code's directories put first on a job's PYTHONPATH, relative to the code's root (the
   * declared `code.path` here, its snapshot on a site over SSH). kdgat's: `src` of its snapshot.
   */
  codePaths: string[];
  /**
   * The code's root directory on this machine, when the declaration names one (absent: kdgat's
   * python/); for `code.git`, set by the runner once it has the commit (`materializeGitCode`).
   */
  codeDir?: string;
  /** The code as a repository at a commit (`code.git`). */
  codeGit?: { url: string; commit: string };
  /** The config schema, parsed, when the pipeline publishes one. */
  configSchema?: object;
}

/** The default pipeline, as the run contract it shares with the job scripts and the runner describes it. */
export const DEFAULT_PIPELINE_DECLARATION: PipelineDeclaration = PipelineDeclarationSchema.parse({
  name: DEFAULT_PIPELINE_NAME,
  command: [
    'python',
    '-m',
    SITE_HELPER_MODULE,
    '{stage}',
    '--model',
    '{model}',
    '--scale',
    '{scale}',
    '--dataset',
    '{dataset}',
    '--run-root',
    '{run_root}',
  ],
  stages: [...STAGES],
  models: ['gat', 'vgae'],
  scales: ['large', 'small'],
  overrides: 'dash-O',
  requeue: 'handshake',
  cacheRootVariable: DEFAULT_CACHE_ROOT_VARIABLE,
  rawData: { variable: DEFAULT_DATA_ROOT_VARIABLE, points: 'root' },
  outputs: {
    metrics: RUN_CONTRACT.runDir.files.metrics,
    checkpoint: RUN_CONTRACT.runDir.files.checkpoint,
    history: RUN_CONTRACT.runDir.files.history,
  },
});

/** A declared output's patterns, as a list (`checkpoint` may be one or several). */
export function outputPatterns(value: string | readonly string[] | undefined): string[] {
  return value === undefined ? [] : typeof value === 'string' ? [value] : [...value];
}

/** The default pipeline: its package's own files and workers (graph-cache digests, tune workers) are there. */
export const isDefaultPipeline = (p: Pick<Pipeline, 'name'>): boolean => p.name === DEFAULT_PIPELINE_NAME;

/** The argv words before the first placeholder: the program a hand-run script hands its arguments to. */
export const commandProgram = (d: Pick<PipelineDeclaration, 'command'>): string[] => {
  const first = d.command.findIndex((w) => w.includes('{'));
  return first < 0 ? [...d.command] : d.command.slice(0, first);
};

/**
 * A stage's stage, model and scale must be ones its pipeline declares (checked on the spec as
 * written, so they are reported with every other problem of the spec at once).
 */
export function declaredNameProblems(
  pipeline: Pick<Pipeline, 'name' | 'stages' | 'models' | 'scales'>,
  stage: Record<string, unknown>,
  index: number,
): { path: (string | number)[]; message: string; expected: string; found: string }[] {
  const lists = { stage: pipeline.stages, model: pipeline.models, scale: pipeline.scales } as const;
  return (['stage', 'model', 'scale'] as const)
    .filter((f) => typeof stage[f] === 'string' && !lists[f].includes(stage[f]))
    .map((f) => ({
      path: ['stages', index, f],
      message: `${f} ${String(stage[f])} is not one of pipeline ${pipeline.name}'s`,
      expected: `one of ${lists[f].join(', ')}`,
      found: JSON.stringify(stage[f]),
    }));
}

/** The words one override becomes on the pipeline's command line. */
export function overrideWords(style: OverrideStyle, key: string, value: string): string[] {
  switch (style) {
    case 'dash-O':
      return ['-O', key, value];
    case 'hydra':
      return [`${key}=${value}`];
    case 'flags':
      return [`--${key}`, value];
  }
}

/**
 * The command of one stage with the render-time placeholders filled; `{run_root}` and `{run_dir}`
 * are left for the job script.
 */
export function stageCommand(
  pipeline: Pick<Pipeline, 'command'>,
  stage: { stage: string; model: string; scale: string; dataset: string },
): string[] {
  const values: Record<string, string> = {
    stage: stage.stage,
    model: stage.model,
    scale: stage.scale,
    dataset: stage.dataset,
  };
  return pipeline.command.map((word) =>
    word.replace(/\{(stage|model|scale|dataset)\}/g, (_m, name: string) => values[name]!),
  );
}
