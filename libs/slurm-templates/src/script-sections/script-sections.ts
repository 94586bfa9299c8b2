/**
 * Script sections shared by the per-run job script and the hand-use site scripts: the `#SBATCH`
 * lines, the values every job script assigns before the static shell (src/shell/job-start.sh and
 * job-run.sh), and the values of the environment for src/shell/environment.sh (also carried by the
 * stack output `environment.activate` and, for login nodes, `renderModuleShell`). Every
 * interpolated value goes through `shq` (`assign`) or has been checked against its rule. Shell
 * variables are prefixed `hpc_` because the staging script is sourced into the same shell.
 */
import { RUN_CONTRACT, SITE_HELPER_MODULE } from '@kdgat/config';
import type { EnvironmentView, ProfileView, RequeuePolicy } from '../inputs.ts';
import { TemplateInputError } from '../quote/errors.ts';
import {
  RULES,
  requireAbsolutePath,
  requireMatch,
  requireName,
  requirePositiveInt,
} from '../quote/validate.ts';
import { assign, assignArray, shellFileLines } from '../shell/shell-files.ts';
import { loadLines, type JobLibraryRef } from '../job-library/job-library.ts';

/** Exit status of the pipeline after it checkpointed on the requeue signal (EX_TEMPFAIL). */
export const REQUEUE_EXIT_STATUS = RUN_CONTRACT.requeue.exitStatus;
/** The file in the run dir by which the pipeline acknowledges the requeue signal. */
export const REQUEUE_ACK_FILE = RUN_CONTRACT.requeue.ackFile;
/** The environment variable that names the requeue signal to the pipeline. */
export const REQUEUE_SIGNAL_VARIABLE = RUN_CONTRACT.requeue.signalEnv;
/** Exit status when the node lacks something the profile needs (EX_UNAVAILABLE). */
export const UNAVAILABLE_EXIT_STATUS = 69;

export function sbatchLines(directives: readonly (readonly [string, string | number])[]): string[] {
  return directives.map(([flag, value]) => `#SBATCH --${flag}${value === '' ? '' : `=${value}`}`);
}

/** The comment lines under the `#SBATCH` lines: what the script is and where its shell comes from. */
export function headerLines(title: string, renderedFrom: string): string[] {
  return [
    `# ${title}`,
    `# Rendered by @kdgat/slurm-templates from ${renderedFrom}: re-render, do not edit.`,
    "# This job's values; the shell every job shares is the job library loaded at the end, by its sha256",
    '# (libs/slurm-templates/src/shell/: job-start.sh, environment.sh, job-run.sh).',
    '# shellcheck disable=SC2034 # the values are read by the job library, sourced at the end',
  ];
}

/** The values every job script assigns for src/shell/job-start.sh and job-run.sh. */
export function jobValueLines(vars: {
  profile: ProfileView;
  stageDataPath?: string;
  epilogPath: string;
  requeue: RequeuePolicy;
  gpuSampleSeconds: number;
  /** The environment variable the pipeline reads the caches' root from (its declaration's; none: undefined). */
  cacheRootVariable: string | undefined;
}): string[] {
  return [
    assign('hpc_profile', vars.profile.name),
    ...(vars.stageDataPath === undefined
      ? []
      : [assign('hpc_stage_data_script', requireAbsolutePath('scripts.stageData', vars.stageDataPath))]),
    assign('hpc_epilog_script', requireAbsolutePath('scripts.epilog', vars.epilogPath)),
    assign('hpc_unavailable_status', UNAVAILABLE_EXIT_STATUS),
    assign('hpc_gpu_sample_seconds', requirePositiveInt('gpuSampleSeconds', vars.gpuSampleSeconds)),
    assign('hpc_cache_root_variable', cacheRootVariableValue(vars.cacheRootVariable)),
    // The tool's helpers (the epilog's catalogue row) are `python -m <this>`.
    assign('HPC_HELPER_MODULE', requireMatch('helper module', SITE_HELPER_MODULE, RULES.pythonModule), true),
    ...requeueValueLines(vars.requeue),
  ];
}

/** A pipeline's cache-root variable name, checked ('' when it declares none). */
/** `export NAME='value'` per declared variable, each name and value checked by the script-value rules. */
export function jobEnvLines(env: readonly (readonly [string, string])[]): string[] {
  if (env.length === 0) return [];
  return [
    "# The job's environment: its pipeline's, the stack's and the stage's env, then the raw-data variable.",
    ...env.map(([name, value]) =>
      assign(
        requireMatch('env', name, RULES.envName),
        requireMatch(`env.${name}`, value, RULES.envValue),
        true,
      ),
    ),
  ];
}

export function cacheRootVariableValue(name: string | undefined): string {
  return name === undefined ? '' : requireMatch('pipeline.cacheRootVariable', name, RULES.envName);
}

/** The requeue handshake's values: the signal ('' when requeue is off), the budget, status and ack file. */
function requeueValueLines(policy: RequeuePolicy): string[] {
  const contract = [
    assign('hpc_requeue_status', REQUEUE_EXIT_STATUS),
    assign('hpc_requeue_ack', REQUEUE_ACK_FILE),
  ];
  if (!policy.enabled) return [assign('hpc_requeue_signal', ''), ...contract];
  checkRequeuePolicy(policy);
  const who = policy.contract ?? 'handshake';
  if (who !== 'handshake' && who !== 'lightning')
    throw new TemplateInputError('requeue.contract', who, "'handshake' or 'lightning'");
  return [
    assign('hpc_requeue_signal', policy.signal),
    assign(REQUEUE_SIGNAL_VARIABLE, policy.signal, true),
    assign('hpc_max_restarts', policy.maxRestarts),
    assign('hpc_requeue_contract', who),
    ...contract,
  ];
}

/**
 * Everything after a job script's own values: the values of its environment, then the lines that
 * load the job library by its sha256 (src/job-library/job-library.ts), which runs the job: the
 * static start (strict mode, task, traps), the environment (src/shell/environment.sh,
 * `hpc_environment`), the static run (staging, sampler, pipeline, requeue decision).
 */
export function jobBodyLines(env: EnvironmentView, profile: ProfileView, library: JobLibraryRef): string[] {
  return [...environmentValueLines(env, profile), '', ...loadLines(library)];
}

/**
 * A job's environment: its values, src/shell/environment.sh and `hpc_environment` (the profile's
 * CUDA module, the activation, the code snapshot first on PYTHONPATH). The init of `runner shell`
 * has these lines, which give a researcher what the job sees (a job script has the values, and
 * the rest in the job library).
 */
export function environmentLines(env: EnvironmentView, profile: ProfileView): string[] {
  return [...environmentValueLines(env, profile), ...shellFileLines('environment'), 'hpc_environment'];
}

/** The values src/shell/environment.sh reads for `hpc_environment`. */
export function environmentValueLines(env: EnvironmentView, profile: ProfileView): string[] {
  const cuda = cudaModuleValue(profile);
  const lmodInit = cuda !== '' ? lmodInitValue(profile) : '';
  const activation = activationValues(env, profile);
  return [
    "# The environment: the profile's CUDA module, then the environment's own modules and activation.",
    // The init is validated where it is needed: for the CUDA module, else for the conda module.
    assign('hpc_lmod_init', lmodInit || activation.lmodInit),
    assign('hpc_cuda_module', cuda),
    ...activation.lines,
    ...(env.code !== undefined
      ? [
          assign('hpc_code', requireAbsolutePath('environment.code', env.code)),
          ...assignArray(
            'hpc_code_paths',
            (env.codePaths ?? ['src']).map((p, i) => [
              requireMatch(`environment.codePaths[${i}]`, p, RULES.codePath),
            ]),
          ),
        ]
      : []),
  ];
}

/** The profile's CUDA module a job loads ('' for profiles without one, such as local). */
function cudaModuleValue(profile: ProfileView): string {
  const cuda = profile.modules.cuda;
  return cuda === undefined || cuda === ''
    ? ''
    : requireMatch('profile.modules.cuda', cuda, RULES.moduleName);
}

/** Lmod's usual system-wide init, for profiles that do not name their site's. */
export const DEFAULT_LMOD_INIT = '/etc/profile.d/lmod.sh';

/** The profile's Lmod init (default DEFAULT_LMOD_INIT), checked against its rule. */
export function lmodInitValue(profile: Pick<ProfileView, 'modules'>): string {
  return requireMatch('profile.modules.init', profile.modules.init ?? DEFAULT_LMOD_INIT, RULES.lmodInit);
}

/**
 * The modules a login node loads to build an environment: the profile's (the conda frontend's,
 * then CUDA's), then the environment's own (its spec's `modules`), in their order.
 */
export function loginModules(
  profile: Pick<ProfileView, 'modules'>,
  env: Pick<EnvironmentView, 'modules'> = {},
): string[] {
  const site = (['conda', 'cuda'] as const).flatMap((key) => {
    const m = profile.modules[key];
    if (m === undefined || m === '') return [];
    return [requireMatch(`profile.modules.${key}`, m, RULES.moduleName)];
  });
  return [...site, ...environmentModules(env)];
}

/**
 * A `bash -c` script for commands on a login node (infra's environment builds over SSH): the
 * profile's values, src/shell/environment.sh, `hpc_load_login_modules` (makes `module` available
 * from the profile's Lmod init where the login did not define it, loads the profile's conda and
 * CUDA modules, then the environment's own), then runs its arguments (`exec "$@"`). A missing
 * module system or module ends it with status 69 after the module system's own message. Null
 * without modules.
 */
export function renderModuleShell(
  profile: Pick<ProfileView, 'name' | 'modules'>,
  env: Pick<EnvironmentView, 'modules'> = {},
): string | null {
  const modules = loginModules(profile, env);
  if (modules.length === 0) return null;
  return [
    assign('hpc_profile', profile.name),
    assign('hpc_unavailable_status', UNAVAILABLE_EXIT_STATUS),
    assign('hpc_lmod_init', lmodInitValue(profile)),
    ...assignArray('hpc_login_modules', [modules]),
    ...shellFileLines('environment'),
    'hpc_load_login_modules',
    'exec "$@"',
    '',
  ].join('\n');
}

/**
 * The stack output `environment.activate`: a snippet a user can source (bash) that activates the
 * environment as a job does (the conda module first where conda is not on PATH): the values,
 * src/shell/environment.sh, `hpc_activate`.
 */
export function activationSnippet(env: EnvironmentView, profile: ProfileView): string {
  const activation = activationValues(env, profile);
  return [
    assign('hpc_profile', profile.name),
    assign('hpc_unavailable_status', UNAVAILABLE_EXIT_STATUS),
    assign('hpc_lmod_init', activation.lmodInit),
    ...activation.lines,
    ...shellFileLines('environment'),
    'hpc_activate',
    '',
  ].join('\n');
}

/** The environment's own site modules (its spec's `modules`), each checked, in their load order. */
export function environmentModules(env: Pick<EnvironmentView, 'modules'>): string[] {
  return (env.modules ?? []).map((m, i) => requireMatch(`environment.modules[${i}]`, m, RULES.moduleName));
}

/**
 * The values of the activation (hpc_conda_module, hpc_env_backend, hpc_env_target; with the
 * environment's own modules, hpc_env_name and hpc_env_modules first), and the Lmod init it needs
 * ('' unless conda or the environment's own modules come from modules).
 */
function activationValues(env: EnvironmentView, profile: ProfileView): { lines: string[]; lmodInit: string } {
  const own = environmentModules(env);
  const activation = backendActivationValues(env, profile);
  if (own.length === 0) return activation;
  // Only where there are some: an environment without modules keeps its text as it was.
  return {
    lines: [
      assign('hpc_env_name', requireName('environment.name', env.name)),
      ...assignArray('hpc_env_modules', [own]),
      ...activation.lines,
    ],
    lmodInit: activation.lmodInit || lmodInitValue(profile),
  };
}

function backendActivationValues(
  env: EnvironmentView,
  profile: ProfileView,
): { lines: string[]; lmodInit: string } {
  if (env.backend === 'venv') {
    if (env.prefix === undefined) {
      throw new TemplateInputError(
        'environment.prefix',
        env.prefix,
        'the venv directory for a venv environment',
      );
    }
    const activate = `${requireAbsolutePath('environment.prefix', env.prefix).replace(/\/+$/, '')}/bin/activate`;
    return {
      lines: [
        assign('hpc_conda_module', ''),
        assign('hpc_env_backend', 'venv'),
        assign('hpc_env_target', activate),
      ],
      lmodInit: '',
    };
  }
  if (env.backend !== 'conda') {
    throw new TemplateInputError('environment.backend', env.backend, "'conda' or 'venv'");
  }
  const target = env.prefix ?? env.name;
  if (target === '')
    throw new TemplateInputError('environment.name', target, 'a conda environment name or prefix');
  const conda = profile.modules.conda;
  const fromModule = conda !== undefined && conda !== '';
  const lmodInit = fromModule ? lmodInitValue(profile) : '';
  return {
    lines: [
      assign(
        'hpc_conda_module',
        fromModule ? requireMatch('profile.modules.conda', conda, RULES.moduleName) : '',
      ),
      assign('hpc_env_backend', 'conda'),
      assign('hpc_env_target', target),
    ],
    lmodInit,
  };
}

export function checkRequeuePolicy(policy: RequeuePolicy): void {
  requireMatch('requeue.signal', policy.signal, RULES.requeueSignal);
  requirePositiveInt('requeue.leadSeconds', policy.leadSeconds);
  if (!Number.isInteger(policy.maxRestarts) || policy.maxRestarts < 0) {
    throw new TemplateInputError('requeue.maxRestarts', policy.maxRestarts, 'an integer >= 0');
  }
}
