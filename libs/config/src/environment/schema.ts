import { z } from 'zod';
import { SafeName } from '../cluster/schema.ts';
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
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*(\[[A-Za-z0-9_,.-]+\])?\s*([<>=!~]=?\s*[A-Za-z0-9_.*+!-]+\s*,?\s*)*$/, 'a pip requirement such as "optuna==4.1.0"')
  .transform((s) => s.replace(/\s+/g, ''));

const common = {
  name: SafeName.default('gnn-rapids'),
  /** An environment of this name that this stack did not create is taken over only when true. */
  adopt: z.boolean().default(false),
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
    pip: z.array(PipRequirement).default([]),
    /** The CUDA the environment is built for (`cuda-version` is pinned to it), e.g. "12.4". */
    cudaVersion: z.string().regex(/^\d+\.\d+$/, 'a CUDA version such as "12.4"').optional(),
  })
  .strict();

export const VenvEnvironmentSchema = z
  .object({
    ...common,
    backend: z.literal('venv'),
    python: z.string().regex(/^3\.\d+$/, 'a Python version such as "3.11"'),
    requirements: z.array(PipRequirement).default([]),
  })
  .strict();

export const EnvironmentSpecSchema = z.discriminatedUnion('backend', [CondaEnvironmentSchema, VenvEnvironmentSchema]);
export type EnvironmentSpec = z.infer<typeof EnvironmentSpecSchema>;
export type CondaEnvironmentSpec = z.infer<typeof CondaEnvironmentSchema>;
export type EnvironmentSpecInput = z.input<typeof EnvironmentSpecSchema>;
