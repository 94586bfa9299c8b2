// The stack outputs (docs/CONTRACTS.md "Stack outputs"): what infra's program exports for a site and
// what the runner reads back (`pulumi stack output --json`, `--stack-outputs <file>`, or predicted from
// the stack file before `pulumi up`). Declared once, here: ClusterSite's outputs, slurm-templates'
// `declaredSiteOutputs` and the runner's reader take their types from this schema.
import { z } from 'zod';
import { ClusterProfileSchema, ConnectionSchema, ModuleName, SafeName } from '../cluster/schema.ts';
import { CondaEnvironmentSchema, VenvEnvironmentSchema } from '../environment/schema.ts';

export const StackEnvironmentOutputsSchema = z
  .object({
    name: SafeName,
    backend: z.union([CondaEnvironmentSchema.shape.backend, VenvEnvironmentSchema.shape.backend]),
    prefix: z.string(),
    /**
     * The site modules the environment's interpreter needs (its spec's `modules`), loaded before
     * it is activated; absent when it names none (and in older stacks).
     */
    modules: z.array(ModuleName).optional(),
    /** The activation text a user sources (`activationSnippet` of @kdgat/slurm-templates). */
    activate: z.string(),
    /** `environmentSpecHash` of the spec the environment was built from. */
    specHash: z.string(),
    lockPath: z.string(),
    /** sha256 of the lock; empty in outputs predicted before the build. */
    lockHash: z.string(),
    /** The explicit lock itself (kept by a run: copied into its run dir); absent in older stacks. */
    lock: z.string().optional(),
  })
  .strict();

export const StackScratchOutputsSchema = z
  .object({
    root: z.string(),
    cacheDirs: z.record(z.string(), z.string()),
    runsDir: z.string(),
    logsDir: z.string(),
  })
  .strict();

/** The installed site scripts: one key per `SITE_SCRIPT_NAMES` entry of @kdgat/slurm-templates. */
export const StackScriptOutputsSchema = z
  .object({
    dir: z.string(),
    stageData: z.string(),
    epilog: z.string(),
    trainGpu: z.string(),
    preprocessGpu: z.string(),
    /**
     * The job library every job script loads (`JOB_LIBRARY` of @kdgat/slurm-templates): the file
     * of the version the site installed last, `<dir>/lib/job-<sha256 prefix>.sh` (older versions
     * stay beside it), and its sha256. Absent in stacks provisioned before it existed: the runner
     * then writes the library into each run's `scripts/lib/`.
     */
    jobLibrary: z
      .object({ path: z.string(), sha256: z.string().regex(/^[0-9a-f]{64}$/) })
      .strict()
      .optional(),
  })
  .strict();

/**
 * What every job on the site exports (stack config `env`), and where each data set's raw recordings
 * are (stack config `rawDataRoot`, `datasets[].raw`): the job exports the latter under its
 * pipeline's raw-data variable.
 */
export const StackJobEnvironmentSchema = z
  .object({
    env: z.record(z.string(), z.string()).default({}),
    rawData: z.record(z.string(), z.string()).default({}),
  })
  .strict();

/** The outputs as a provisioned stack exports them now (the keys infra's program exports). */
export const StackOutputsObjectSchema = z
  .object({
    /** The cluster profile's name (the profile itself stays in the stack config). */
    profile: ClusterProfileSchema.shape.name,
    /**
     * How the site is reached: the profile's connection without the secret key (`publicConnection`);
     * stacks provisioned before this output existed were all local.
     */
    connection: ConnectionSchema.default({ kind: 'local' }),
    /** Every environment of the site, in the stack's order (the first is its default). */
    environments: z
      .array(StackEnvironmentOutputsSchema)
      .min(1)
      .refine(
        (envs) => new Set(envs.map((e) => e.name)).size === envs.length,
        'one entry per environment name',
      ),
    scratch: StackScratchOutputsSchema,
    scripts: StackScriptOutputsSchema,
    /**
     * The site's other clusters (stack config `clusters`), reached from the same login node with
     * `-M <clusterName>`: their profiles (partitions, modules, charging, limits), the connection
     * without its secret. Absent in stacks of one cluster.
     */
    clusters: z.array(ClusterProfileSchema).optional(),
    /** The site's job environment; absent in stacks provisioned before it existed (nothing set). */
    jobEnvironment: StackJobEnvironmentSchema.optional(),
  })
  .strict();

/** Stacks provisioned with one environment exported `environment`: read as a one-entry list. */
export const StackOutputsSchema = z.preprocess((v) => {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || !('environment' in v) || 'environments' in v)
    return v;
  const { environment, ...rest } = v as Record<string, unknown>;
  return { ...rest, environments: [environment] };
}, StackOutputsObjectSchema);

export type StackOutputs = z.infer<typeof StackOutputsObjectSchema>;
export type StackEnvironmentOutputs = z.infer<typeof StackEnvironmentOutputsSchema>;

/** The environment named `name` of a stack's outputs, or undefined. */
export function stackEnvironment(outputs: Pick<StackOutputs, 'environments'>, name: string) {
  return outputs.environments.find((e) => e.name === name);
}

/** The environment a stack runs what names none: its first. */
export function defaultEnvironment(outputs: Pick<StackOutputs, 'environments'>): StackEnvironmentOutputs {
  return outputs.environments[0]!;
}
