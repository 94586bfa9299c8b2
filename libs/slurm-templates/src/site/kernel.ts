/**
 * A site environment's Jupyter kernel: the two files of its kernel directory
 * (`<kernelsDir>/<name>/`, where Jupyter, OnDemand's Jupyter app included, finds a user's kernels).
 * kernel.json tells Jupyter to run `bash <dir>/kernel.sh <connection file>`; kernel.sh is the
 * environment's activation snippet (the same text as the stack output `activate`), the kernel's
 * modules and code, then ipykernel (src/shell/kernel.sh). Infra installs them (JupyterKernel).
 */
import type { KernelEnvironmentView, KernelView, ProfileView } from '../inputs.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { RULES, joinPath, requireAbsolutePath, requireMatch, requireName } from '../quote/validate.ts';
import { lmodInitValue } from '../script-sections/script-sections.ts';
import { assign, assignArray, shellFileLines } from '../shell/shell-files.ts';

/** The files of a kernel directory, by name. */
export interface KernelFiles {
  'kernel.json': string;
  'kernel.sh': string;
}

export interface RenderedKernel {
  /** Jupyter's kernel name (the directory's name). */
  name: string;
  /** `<kernelsDir>/<name>`. */
  dir: string;
  files: KernelFiles;
}

export interface KernelFilesInput {
  kernel: KernelView;
  environment: KernelEnvironmentView;
  profile: Pick<ProfileView, 'name' | 'modules'>;
  /** The site user's Jupyter kernels directory (absolute), e.g. `/users/PAS1266/jdoe/.local/share/jupyter/kernels`. */
  kernelsDir: string;
  /**
   * What the kernel imports the default pipeline from unless it declares its own `code`: on a site over SSH the
   * code of the latest run shipped (`<scratch>/code/current`); absent: the environment's own.
   */
  codePath?: string;
}

/** The environment variable that carries the environment's lock hash into the kernel. */
export const KERNEL_LOCK_HASH_VARIABLE = 'HPC_ENV_LOCK_HASH';

const LOCK_HASH = { pattern: /^[A-Za-z0-9:._-]{1,128}$/, expected: 'a lock hash such as a sha256 in hex' };

/** `<kernelsDir>/<name>`: where a kernel's files go. */
export function kernelDirFor(kernelsDir: string, name: string): string {
  return joinPath(requireAbsolutePath('kernelsDir', kernelsDir), requireName('kernel.name', name));
}

/** kernel.json and kernel.sh of an environment's kernel; every value checked, quoted by `shq` in the script. */
export function renderKernelFiles(input: KernelFilesInput): RenderedKernel {
  const { kernel, environment, profile } = input;
  const envName = requireName('environment.name', environment.name);
  const name = kernel.name ?? envName;
  const dir = kernelDirFor(input.kernelsDir, name);
  const lockHash = requireMatch('environment.lockHash', environment.lockHash, LOCK_HASH);
  const prefix = requireAbsolutePath('environment.prefix', environment.prefix);
  const modules = (kernel.modules ?? []).map((m, i) =>
    requireMatch(`kernel.modules[${i}]`, m, RULES.moduleName),
  );
  const codeValue = kernel.code ?? input.codePath;
  const code =
    codeValue === undefined
      ? undefined
      : requireAbsolutePath(kernel.code !== undefined ? 'kernel.code' : 'codePath', codeValue).replace(
          /(.)\/+$/,
          '$1',
        );
  if (typeof kernel.displayName !== 'string' || kernel.displayName.trim() === '')
    throw new TemplateInputError('kernel.displayName', kernel.displayName, 'a display name');
  if (typeof environment.activate !== 'string' || !/^hpc_activate$/m.test(environment.activate))
    throw new TemplateInputError(
      'environment.activate',
      environment.activate,
      "the environment's activation snippet (activationSnippet)",
    );

  const spec = {
    argv: ['bash', `${dir}/kernel.sh`, '{connection_file}'],
    display_name: kernel.displayName,
    language: 'python',
    interrupt_mode: 'signal',
    env: { [KERNEL_LOCK_HASH_VARIABLE]: lockHash },
    metadata: {
      debugger: true,
      'kdgat-hpc': { environment: envName, prefix, lockHash, code: code ?? null },
    },
  };
  const script = [
    '#!/bin/bash',
    `# Jupyter kernel ${name}: Python of environment ${envName}.`,
    '# Rendered by @kdgat/slurm-templates (renderKernelFiles) for the kdgat-hpc stack: re-render, do not edit.',
    '# Jupyter runs `bash kernel.sh <connection file>` (kernel.json beside it): the values of the kernel,',
    "# the environment's activation (the stack output `activate`), then src/shell/kernel.sh.",
    'set -euo pipefail',
    assign('hpc_kernel_name', name),
    ...assignArray('hpc_kernel_modules', [modules]),
    assign('hpc_kernel_code', code ?? ''),
    assign(KERNEL_LOCK_HASH_VARIABLE, lockHash, true),
    '',
    "# ---- the environment's activation (stack output environment.activate) ----",
    ...environment.activate.replace(/\n+$/, '').split('\n'),
    '',
    '# ---- the kernel: its modules, its code, then ipykernel in place of this shell ----',
    ...(modules.length > 0 ? [assign('hpc_lmod_init', lmodInitValue(profile))] : []),
    ...shellFileLines('kernel'),
    'hpc_start_kernel "$1"',
    '',
  ].join('\n');
  return { name, dir, files: { 'kernel.json': `${JSON.stringify(spec, null, 2)}\n`, 'kernel.sh': script } };
}
