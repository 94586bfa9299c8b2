// A site environment's Jupyter kernel, as a stack declares it (`kernel:` of an environment entry):
// written by infra where Jupyter looks for a user's kernels (OSC OnDemand's Jupyter app included:
// `~/.local/share/jupyter/kernels/<name>/`), rendered by `renderKernelFiles` of @kdgat/slurm-templates.
import { homedir } from 'node:os';
import { z } from 'zod';
import { SCRIPT_VALUES, type ValueRule } from '../script-values.ts';
import type { ClusterProfile } from '../cluster/schema.ts';
import { currentCodeFor, siteUserOf } from '../scratch/layout.ts';

/** Jupyter's per-user kernels directory on Linux, relative to the home directory. */
export const JUPYTER_KERNELS_SUBDIR = '.local/share/jupyter/kernels';

const DISPLAY_NAME_MAX = 100;

const KERNEL_RULES = {
  displayName: {
    // No control (Cc), format (Cf: bidi overrides, zero-width) or surrogate characters, no line or
    // paragraph separators: the name is shown in a launcher menu and must read as what it is.
    pattern: new RegExp(
      `^(?![\\s])[^\\p{Cc}\\p{Cf}\\p{Cs}\\p{Zl}\\p{Zp}]{1,${DISPLAY_NAME_MAX}}(?<![\\s])$`,
      'u',
    ),
    expected: `a display name of 1 to ${DISPLAY_NAME_MAX} printable characters without leading or trailing spaces, e.g. "My project (gnn-rapids)"`,
  },
  code: {
    pattern: /^\/[A-Za-z0-9_./+@,=-]*$/,
    expected:
      'an absolute path on the site of letters, digits and _ . / + @ , = - holding src/ with the default pipeline package (a code snapshot, or the python/ of a checkout)',
  },
} as const satisfies Record<string, ValueRule>;

/** A string checked against a rule; a refusal names the value and what was expected. */
function ruled(rule: ValueRule): z.ZodString {
  const error = (issue: { input?: unknown }) => `${JSON.stringify(issue.input)}: expected ${rule.expected}`;
  return z.string({ error }).regex(rule.pattern, { error });
}

const KEYS = ['name', 'displayName', 'modules', 'code'];

export const KernelDeclarationSchema = z.strictObject(
  {
    /** The kernel's directory name and Jupyter's kernel name. Default: the environment's name. */
    name: ruled(SCRIPT_VALUES.name).optional(),
    /** What the notebook's kernel menu shows, e.g. "My project (gnn-rapids, CUDA 12)". */
    displayName: ruled(KERNEL_RULES.displayName),
    /**
     * Lmod modules the kernel loads after the environment's activation (which loads the conda
     * module where the profile names one), e.g. the profile's CUDA module for GPU work.
     */
    modules: z.array(ruled(SCRIPT_VALUES.moduleName)).default([]),
    /**
     * The directory the kernel imports the default pipeline from (its `src/` goes first on PYTHONPATH, as in a
     * job). Default on a site over SSH: `<scratch>/code/current`, the code of the latest run
     * shipped; on this machine: the environment's own (a local site ships no code).
     */
    code: ruled(KERNEL_RULES.code).optional(),
  },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown key${issue.keys.length === 1 ? '' : 's'} ${issue.keys.join(', ')}: expected only ${KEYS.join(', ')}`
        : undefined,
  },
);

export type KernelDeclaration = z.infer<typeof KernelDeclarationSchema>;
export type KernelDeclarationInput = z.input<typeof KernelDeclarationSchema>;

/** The kernel's name: the declared one, else the environment's. */
export function kernelNameOf(kernel: Pick<KernelDeclaration, 'name'>, environmentName: string): string {
  return kernel.name ?? environmentName;
}

/**
 * Where the site user's Jupyter kernels live: the profile's `paths.kernelsDir`, else, on this
 * machine (connection `local`), `<home>/.local/share/jupyter/kernels`. Null for a remote site that
 * does not name it: its home is not known before connecting, and every site path is absolute.
 */
export function kernelsDirFor(
  profile: { connection: Pick<ClusterProfile['connection'], 'kind'>; paths: { kernelsDir?: string } },
  home: string = homedir(),
): string | null {
  const declared = profile.paths.kernelsDir;
  if (declared !== undefined) return declared.replace(/(.)\/+$/, '$1');
  if (profile.connection.kind === 'local') return `${home.replace(/\/+$/, '')}/${JUPYTER_KERNELS_SUBDIR}`;
  return null;
}

/**
 * What a kernel imports the default pipeline from when it declares no `code`: on a site over SSH the code of the
 * latest run the site user shipped (`<scratch>/code/<user>/current`, re-pointed by each run's
 * upload, in a directory only that user can write); on this machine nothing (undefined): a local
 * site ships no code, its jobs and kernels use the environment's own.
 */
export function kernelDefaultCodeFor(profile: {
  connection: { kind: string; user?: string };
  paths: { scratchRoot: string };
}): string | undefined {
  return profile.connection.kind === 'ssh'
    ? currentCodeFor(profile.paths.scratchRoot, siteUserOf(profile.connection))
    : undefined;
}
