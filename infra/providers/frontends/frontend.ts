// What every environment frontend offers the Environment provider (environment.impl.ts), and the
// pieces they share. One module per frontend (conda.ts: conda and mamba, micromamba.ts, rattler.ts,
// pip.ts), chosen once by name (index.ts). The provider picks the frontend, asks it for the plan
// (which packages it installs; it refuses what it cannot install before the target changes), then
// runs build → lock → list.
import type { EnvironmentFrontend } from '@kdgat/config';
import type { EnvironmentInputs } from '../environment.impl.ts';

/** The environment's machine as a frontend sees it: every command runs after the profile's modules are loaded. */
export interface FrontendTarget {
  /** Runs argv; returns stdout, throws with the tail of its output when it fails or times out. */
  run(
    argv: readonly string[],
    options: { what: string; timeoutSeconds: number; input?: string },
  ): Promise<string>;
  /** Writes a file (mode 0644), creating its directory. */
  write(path: string, text: string): Promise<void>;
}

/** The packages a frontend installs, read from the spec: conda match specs with channels, or pip lines. */
export interface FrontendPlan {
  channels: string[];
  specs: string[];
}

export interface PackageEntry {
  name: string;
  version: string;
}

export interface Frontend {
  readonly name: EnvironmentFrontend;
  /** The kind of environment it builds. */
  readonly backend: 'conda' | 'venv';
  /**
   * Variables the solve runs with, for a spec that targets CUDA `cuda` (major.minor): a conda
   * solver on a login node without a GPU sees no `__cuda` virtual package unless told which CUDA
   * the environment is for (`CONDA_OVERRIDE_CUDA`). Empty for frontends without virtual packages.
   */
  solveEnvironment(cuda: string | undefined): Record<string, string>;
  /** What it installs from the spec; throws for what it cannot install. Touches nothing. */
  plan(env: EnvironmentInputs): FrontendPlan;
  /** Builds the environment at env.prefix (the spec file is already written to env.specPath). */
  build(t: FrontendTarget, env: EnvironmentInputs, plan: FrontendPlan): Promise<void>;
  /** The explicit lock: `@EXPLICIT` URLs with md5 (conda family), `pip freeze` lines (venv). */
  lock(t: FrontendTarget, env: EnvironmentInputs): Promise<string>;
  /** The packages in the environment now. */
  list(t: FrontendTarget, env: EnvironmentInputs): Promise<PackageEntry[]>;
  /** Files it writes beside the spec, removed with the environment. */
  files(specPath: string): string[];
}

/** Lock and list commands are bounded by this, whatever the build's timeout. */
export const QUERY_TIMEOUT_SECONDS = 600;

export const buildWhat = (env: EnvironmentInputs) => `building environment '${env.name}' at ${env.prefix}`;
export const lockWhat = (env: EnvironmentInputs) => `exporting the lock of '${env.name}'`;
export const listWhat = (env: EnvironmentInputs) => `listing the packages of '${env.name}'`;

/** argv that runs `argv` with the solve's variables set (`env K=V … argv`; on SSH too, where the local environment does not travel). */
export function withSolveEnvironment(env: EnvironmentInputs, argv: readonly string[]): string[] {
  const vars = Object.entries(env.solveEnvironment ?? {}).map(([k, v]) => `${k}=${v}`);
  return vars.length > 0 ? ['env', ...vars, ...argv] : [...argv];
}

/** The conda solvers' CUDA override (conda, mamba, micromamba and py-rattler read it alike). */
export function condaCudaOverride(cuda: string | undefined): Record<string, string> {
  return cuda ? { CONDA_OVERRIDE_CUDA: cuda } : {};
}
