import { z } from 'zod';
import { SafeName } from '../cluster/schema.ts';
import { SCRIPT_VALUES } from '../script-values.ts';
import { GPU_LAYER_NAMES } from './gpu-layers.ts';
import { MatchSpecError, normaliseMatchSpec } from './matchspec.ts';

const CondaPackage = z.string().transform((s, ctx) => {
  try {
    return normaliseMatchSpec(s);
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: e instanceof MatchSpecError ? e.message : String(e) });
    return z.NEVER;
  }
});

/** A pip requirement line: `name==1.2`, `name>=1`, `name[extra]==1` (no URLs, no options). */
const PipRequirement = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.-]*(\[[A-Za-z0-9_,.-]+\])?\s*([<>=!~]=?\s*[A-Za-z0-9_.*+!-]+\s*,?\s*)*$/,
    'a pip requirement such as "optuna==4.1.0"',
  )
  .transform((s) => s.replace(/\s+/g, ''));

/** A site module's name, as the cluster profile's (`ModuleName`); a refusal names the value. */
const EnvironmentModule = z
  .string({ error: (i) => `${JSON.stringify(i.input)}: expected ${SCRIPT_VALUES.moduleName.expected}` })
  .regex(SCRIPT_VALUES.moduleName.pattern, {
    error: (i) => `${JSON.stringify(i.input)}: expected ${SCRIPT_VALUES.moduleName.expected}`,
  });

const common = {
  name: SafeName.default('gnn-rapids'),
  /** An environment of this name that this stack did not create is taken over only when true. */
  adopt: z.boolean().default(false),
  /**
   * Site modules the environment's interpreter needs, loaded in this order (`module load`) after the
   * cluster profile's: for the build, its checks and refreshes, and before every activation (jobs,
   * `runner shell`, kernels, the `activate` output). E.g. `python/3.12` for a uv venv on OSC.
   */
  modules: z.array(EnvironmentModule).default([]),
};

export const CondaEnvironmentSchema = z
  .object({
    ...common,
    backend: z.literal('conda'),
    /** `rattler` is py-rattler, the offline-capable solver/installer used by the tests. */
    frontend: z.enum(['conda', 'mamba', 'micromamba', 'rattler']).default('conda'),
    /** In priority order (strict channel priority). */
    channels: z.array(z.string().regex(/^[A-Za-z0-9_./:-]+$/, 'a channel name or file:// URL')).min(1),
    dependencies: z.array(CondaPackage).min(1),
    /**
     * The GPU layer (python/gpu/<gpuLayer>.lock): the environment's pip part is then the pipeline's
     * pinned runtime dependencies (python/uv.lock) plus that layer, and conda keeps python,
     * cuda-version and pip. One layer per GPU generation (docs/decisions/0006).
     */
    gpuLayer: z
      .enum(GPU_LAYER_NAMES, {
        error: (i) =>
          `gpuLayer ${JSON.stringify(i.input)}: expected one of ${GPU_LAYER_NAMES.join(', ')} (python/gpu/<name>.lock)`,
      })
      .optional(),
    /**
     * Without a gpuLayer: pip installs the pipeline's pins (python/uv.lock, for the `python=3.x` of
     * `dependencies`), as a venv's `pipelinePins` does: a CPU environment (gnn-cpu).
     */
    pipelinePins: z.boolean().default(false),
    /** Further pip requirements; with a gpuLayer, only packages the pipeline and the layer do not pin. */
    pip: z.array(PipRequirement).default([]),
    /** The CUDA the environment is built for (`cuda-version` is pinned to it), e.g. "12.4". */
    cudaVersion: z
      .string()
      .regex(/^\d+\.\d+$/, 'a CUDA version such as "12.4"')
      .optional(),
  })
  .strict();

export const VenvEnvironmentSchema = z
  .object({
    ...common,
    backend: z.literal('venv'),
    python: z.string().regex(/^3\.\d+$/, 'a Python version such as "3.11"'),
    /**
     * Install the pipeline's pins from python/uv.lock (for this Python, linux x86_64) into the venv,
     * as the GPU environments do: a uv.lock bump then changes this environment too.
     */
    pipelinePins: z.boolean().default(false),
    /**
     * With `pipelinePins`: the pins come from this lock instead of python/uv.lock — a researcher's own
     * pipeline with its own lock (`file`, relative to the workspace root): a uv.lock, with `project`, the
     * package in it whose runtime dependencies are installed; or a fully pinned requirements file
     * (`*.txt`, every requirement `name==version`, as `pip-compile` or `uv export` write it).
     */
    pipelineLock: z
      .object({
        file: z
          .string()
          .regex(
            /^(?!\/)(?!.*(^|\/)\.\.(\/|$))([A-Za-z0-9_./-]+\/)?(uv\.lock|[A-Za-z0-9_.-]+\.txt)$/,
            'a uv.lock or requirements .txt path relative to the workspace root (no ..)',
          ),
        project: z
          .string()
          .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'a project name as in pyproject.toml')
          .optional(),
      })
      .strict()
      .refine((l) => l.file.endsWith('.txt') || l.project !== undefined, {
        message: 'a uv.lock needs project: the package in it whose runtime dependencies are installed',
        path: ['project'],
      })
      .optional(),
    requirements: z.array(PipRequirement).default([]),
  })
  .strict();

export const EnvironmentSpecSchema = z.discriminatedUnion('backend', [
  CondaEnvironmentSchema,
  VenvEnvironmentSchema,
]);
export type EnvironmentSpec = z.infer<typeof EnvironmentSpecSchema>;
export type CondaEnvironmentSpec = z.infer<typeof CondaEnvironmentSchema>;
export type EnvironmentSpecInput = z.input<typeof EnvironmentSpecSchema>;
