// The job's environment: variables a pipeline declaration, a stack (site facts) and a stage each
// may set (`env:`), and the raw-data variable a pipeline reads its recordings from, set from the
// stack's datasets. One reading for the job scripts, the interactive shell and the plan.
import { posix } from 'node:path';
import { z } from 'zod';
import { SCRIPT_VALUES, matchesRule, ruleString } from '../script-values.ts';

/**
 * Names a declaration may not set: the scheduler's and the tool's own (`SLURM_*`, `HPC_*`), and
 * what the job script itself decides (where the code, the interpreter, node-local disk and home are).
 */
export const RESERVED_ENV_PREFIXES = ['SLURM_', 'HPC_', 'SBATCH_', 'SALLOC_', 'SRUN_'] as const;
export const RESERVED_ENV_NAMES = [
  'PATH',
  'PYTHONPATH',
  'HOME',
  'USER',
  'TMPDIR',
  'LD_LIBRARY_PATH',
] as const;

/** Why `name` may not be set by an `env:` entry, or undefined when it may. */
export function reservedEnvReason(name: string): string | undefined {
  const prefix = RESERVED_ENV_PREFIXES.find((p) => name.startsWith(p));
  if (prefix) return `${prefix}* variables belong to the scheduler and the job script`;
  if ((RESERVED_ENV_NAMES as readonly string[]).includes(name))
    return `${name} is set by the job script itself (its environment's activation, code and node-local disk)`;
  return undefined;
}

/** `env:` — variable name -> value, each checked by the script-value rules, reserved names refused. */
export const JobEnvSchema = z
  .record(z.string(), ruleString(SCRIPT_VALUES.envValue))
  .superRefine((env, ctx) => {
    for (const name of Object.keys(env)) {
      if (!matchesRule(SCRIPT_VALUES.envName, name)) {
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: `${name}: expected ${SCRIPT_VALUES.envName.expected}`,
        });
        continue;
      }
      const why = reservedEnvReason(name);
      if (why) ctx.addIssue({ code: 'custom', path: [name], message: `${name} cannot be set here: ${why}` });
    }
  });
export type JobEnv = z.infer<typeof JobEnvSchema>;

/**
 * How a pipeline finds its raw recordings: the variable it reads, and whether it holds the
 * directory of every data set (`root`: the pipeline reads `$VAR/<dataset>`, kdgat's
 * KD_GAT_DATA_ROOT) or the stage's data set's own directory (`dataset`).
 */
export const RawDataDeclarationSchema = z
  .object({
    variable: ruleString(SCRIPT_VALUES.envName),
    points: z.enum(['root', 'dataset']).default('root'),
  })
  .strict();
export type RawDataDeclaration = z.infer<typeof RawDataDeclarationSchema>;

/** Error of a job's environment: names where the value came from, the value, and what was expected. */
export class JobEnvError extends Error {
  constructor(field: string, value: unknown, expected: string) {
    super(`${field} = ${JSON.stringify(value)}: expected ${expected}`);
    this.name = 'JobEnvError';
  }
}

export interface JobEnvLayers {
  /** The pipeline declaration's `env:` (lowest). */
  pipeline?: JobEnv;
  /** The stack's `env:` (site facts), over the pipeline's. */
  stack?: JobEnv;
  /** The stage's `env:`, over both. */
  stage?: JobEnv;
  /** The pipeline's raw-data variable, when it declares one. */
  rawData?: RawDataDeclaration;
  /** The stage's data set's raw directory on the site (the stack's datasets), when declared. */
  rawDir?: string;
  dataset: string;
  /** Variables the job script exports itself (the pipeline's cache-root variable). */
  owned?: string[];
}

/**
 * The variables a stage's job exports, in order: the pipeline's, the stack's, the stage's (a later
 * layer wins a name), then the raw-data variable. A name the job sets itself, or one that collides
 * with the raw-data variable, is refused naming the layer; so is a raw directory the pipeline
 * cannot reach through its variable.
 */
export function jobEnvironment(layers: JobEnvLayers): [string, string][] {
  const owned = new Set(layers.owned ?? []);
  const raw = layers.rawData?.variable;
  const merged = new Map<string, string>();
  for (const [layer, env] of [
    ['pipeline', layers.pipeline],
    ['stack', layers.stack],
    ['stage', layers.stage],
  ] as const) {
    for (const [name, value] of Object.entries(env ?? {})) {
      const field = `${layer} env.${name}`;
      if (!matchesRule(SCRIPT_VALUES.envName, name))
        throw new JobEnvError(field, name, SCRIPT_VALUES.envName.expected);
      if (!matchesRule(SCRIPT_VALUES.envValue, value))
        throw new JobEnvError(field, value, SCRIPT_VALUES.envValue.expected);
      const why = reservedEnvReason(name);
      if (why) throw new JobEnvError(field, value, `no value: ${why}`);
      if (owned.has(name))
        throw new JobEnvError(
          field,
          value,
          `no value: the job script exports ${name} itself (the staged caches' root)`,
        );
      if (name === raw)
        throw new JobEnvError(
          field,
          value,
          `no value: ${name} is the pipeline's raw-data variable, set from the stack's datasets (kdgat-hpc:rawDataRoot or datasets[].raw)`,
        );
      merged.set(name, value);
    }
  }
  const out = [...merged.entries()];
  if (raw !== undefined && layers.rawDir !== undefined)
    out.push([raw, rawDataValue(layers.rawData!, layers.dataset, layers.rawDir)]);
  return out;
}

/** The raw-data variable's value for one data set whose recordings are in `rawDir`. */
export function rawDataValue(decl: RawDataDeclaration, dataset: string, rawDir: string): string {
  const dir = rawDir.replace(/\/+$/, '');
  if (decl.points === 'dataset') return dir;
  if (posix.basename(dir) !== dataset)
    throw new JobEnvError(
      `the stack's raw directory of data set ${dataset}`,
      rawDir,
      `a directory named ${dataset}: the pipeline reads $${decl.variable}/${dataset} (rawData.points: root); move it, or declare rawData.points: dataset in the pipeline`,
    );
  return posix.dirname(dir);
}
