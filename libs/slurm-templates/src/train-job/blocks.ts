/**
 * Script sections shared by the per-run job script and the hand-use site scripts: the `#SBATCH`
 * lines, the values every job script assigns before the static shell (src/shell/job-start.sh and
 * job-run.sh), and the activation of the environment (also the stack output `environment.activate`
 * and, for login nodes, `renderModuleShell`). Every interpolated value goes through `shq` or has
 * been checked against its rule. Shell variables are prefixed `kdgat_` because the staging script
 * is sourced into the same shell.
 */
import { RUN_CONTRACT } from '@kdgat/config';
import type { EnvironmentView, ProfileView, RequeuePolicy } from '../inputs.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { shq } from '../quote/shq.ts';
import { RULES, requireAbsolutePath, requireMatch, requirePositiveInt } from '../quote/validate.ts';
import { assign, shellFileLines } from '../shell/shell-files.ts';

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
    '# The values of this job come first; the shell after them is the same in every job script',
    '# (libs/slurm-templates/src/shell/), with the activation of the environment in the middle.',
  ];
}

/** The values every job script assigns for src/shell/job-start.sh and job-run.sh. */
export function jobValueLines(vars: {
  profile: ProfileView;
  stageDataPath?: string;
  epilogPath: string;
  requeue: RequeuePolicy;
  gpuSampleSeconds: number;
}): string[] {
  return [
    assign('kdgat_profile', vars.profile.name),
    ...(vars.stageDataPath === undefined
      ? []
      : [assign('kdgat_stage_data_script', requireAbsolutePath('scripts.stageData', vars.stageDataPath))]),
    assign('kdgat_epilog_script', requireAbsolutePath('scripts.epilog', vars.epilogPath)),
    assign('kdgat_unavailable_status', UNAVAILABLE_EXIT_STATUS),
    assign('kdgat_gpu_sample_seconds', requirePositiveInt('gpuSampleSeconds', vars.gpuSampleSeconds)),
    ...requeueValueLines(vars.requeue),
  ];
}

/** The requeue handshake's values: the signal ('' when requeue is off), the budget, status and ack file. */
function requeueValueLines(policy: RequeuePolicy): string[] {
  const contract = [
    assign('kdgat_requeue_status', REQUEUE_EXIT_STATUS),
    assign('kdgat_requeue_ack', REQUEUE_ACK_FILE),
  ];
  if (!policy.enabled) return [assign('kdgat_requeue_signal', ''), ...contract];
  checkRequeuePolicy(policy);
  return [
    assign('kdgat_requeue_signal', policy.signal),
    assign(REQUEUE_SIGNAL_VARIABLE, policy.signal, true),
    assign('kdgat_max_restarts', policy.maxRestarts),
    ...contract,
  ];
}

/**
 * Everything after a job script's values: the static start (strict mode, task, traps), the
 * activation of the environment, the static run (staging, sampler, pipeline, requeue decision).
 */
export function jobBodyLines(env: EnvironmentView, profile: ProfileView): string[] {
  const modules = moduleLines(profile);
  return [
    ...shellFileLines('jobStart'),
    '',
    "# ---- the environment: the profile's modules and the environment's activation (rendered) ----",
    ...modules,
    ...(modules.length > 0 ? [''] : []),
    ...activationLines(env, profile),
    '',
    ...shellFileLines('jobRun'),
  ];
}

/** `module load` of the profile's CUDA module; none for profiles without modules (local). */
export function moduleLines(profile: ProfileView): string[] {
  const modules = [profile.modules.cuda].filter((m): m is string => m !== undefined && m !== '');
  if (modules.length === 0) return [];
  for (const m of modules) requireMatch('profile.modules.cuda', m, RULES.moduleName);
  return [
    '# Lmod defines `module` as a shell function that a batch shell may not have inherited.',
    ...moduleCommandLines(profile),
    'set +u # Lmod reads unset variables',
    ...modules.map((m) => `module load ${shq(m)}`),
    'set -u',
  ];
}

/** Lmod's usual system-wide init, for profiles that do not name their site's. */
export const DEFAULT_LMOD_INIT = '/etc/profile.d/lmod.sh';

function moduleCommandLines(profile: Pick<ProfileView, 'modules'>): string[] {
  const init = shq(
    requireMatch('profile.modules.init', profile.modules.init ?? DEFAULT_LMOD_INIT, RULES.lmodInit),
  );
  return [
    `if ! type module >/dev/null 2>&1 && [[ -r ${init} ]]; then`,
    '  # shellcheck source=/dev/null',
    `  source ${init}`,
    'fi',
    'if ! type module >/dev/null 2>&1; then',
    `  echo "kdgat: cluster profile $kdgat_profile loads modules, but there is no module command on $(hostname)" >&2`,
    `  exit ${UNAVAILABLE_EXIT_STATUS}`,
    'fi',
  ];
}

/** The profile's modules a login node loads to build environments: the conda frontend's, then CUDA's. */
export function loginModules(profile: Pick<ProfileView, 'modules'>): string[] {
  return (['conda', 'cuda'] as const).flatMap((key) => {
    const m = profile.modules[key];
    if (m === undefined || m === '') return [];
    return [requireMatch(`profile.modules.${key}`, m, RULES.moduleName)];
  });
}

/**
 * A `bash -c` script for commands on a login node (infra's environment builds over SSH): makes
 * `module` available (the profile's Lmod init where the login did not define it), loads the
 * profile's conda and CUDA modules, then runs its arguments (`exec "$@"`). A missing module system or
 * module ends it with status 69 after the module system's own message. Null without modules.
 */
export function renderModuleShell(profile: Pick<ProfileView, 'name' | 'modules'>): string | null {
  const modules = loginModules(profile);
  if (modules.length === 0) return null;
  const words = modules.map((m) => shq(m)).join(' ');
  return [
    `kdgat_profile=${shq(profile.name)}`,
    ...moduleCommandLines(profile),
    `if ! module load ${words}; then`,
    `  printf 'kdgat: cluster profile %s: module load %s failed on %s (the module system says why above)\\n' "$kdgat_profile" ${shq(modules.join(' '))} "$(hostname)" >&2`,
    `  exit ${UNAVAILABLE_EXIT_STATUS}`,
    'fi',
    'exec "$@"',
    '',
  ].join('\n');
}

/**
 * Activation of the environment that works in a non-interactive batch shell: conda's hook has to be
 * evaluated because `conda activate` is a shell function that .bashrc would normally define.
 */
export function activationSnippet(env: EnvironmentView, profile: ProfileView): string {
  return activationLines(env, profile).join('\n') + '\n';
}

export function activationLines(env: EnvironmentView, profile: ProfileView): string[] {
  if (env.backend === 'venv') {
    if (env.prefix === undefined) {
      throw new TemplateInputError(
        'environment.prefix',
        env.prefix,
        'the venv directory for a venv environment',
      );
    }
    const activate = `${requireAbsolutePath('environment.prefix', env.prefix).replace(/\/+$/, '')}/bin/activate`;
    return [
      'set +u # activate scripts read unset variables',
      '# shellcheck source=/dev/null',
      `source ${shq(activate)}`,
      'set -u',
    ];
  }
  if (env.backend !== 'conda') {
    throw new TemplateInputError('environment.backend', env.backend, "'conda' or 'venv'");
  }
  const target = env.prefix ?? env.name;
  if (target === '')
    throw new TemplateInputError('environment.name', target, 'a conda environment name or prefix');
  const conda = profile.modules.conda;
  const loadConda =
    conda === undefined || conda === ''
      ? []
      : [
          'if ! command -v conda >/dev/null 2>&1; then',
          ...moduleCommandLines(profile).map((l) => `  ${l}`),
          `  module load ${shq(requireMatch('profile.modules.conda', conda, RULES.moduleName))}`,
          'fi',
        ];
  return [
    'set +u # conda activation scripts read unset variables',
    ...loadConda,
    'if ! command -v conda >/dev/null 2>&1; then',
    `  printf 'kdgat: conda is not on PATH, so environment %s cannot be activated\\n' ${shq(target)} >&2`,
    `  exit ${UNAVAILABLE_EXIT_STATUS}`,
    'fi',
    'eval "$(conda shell.bash hook)"',
    `conda activate ${shq(target)}`,
    'set -u',
  ];
}

export function checkRequeuePolicy(policy: RequeuePolicy): void {
  requireMatch('requeue.signal', policy.signal, RULES.requeueSignal);
  requirePositiveInt('requeue.leadSeconds', policy.leadSeconds);
  if (!Number.isInteger(policy.maxRestarts) || policy.maxRestarts < 0) {
    throw new TemplateInputError('requeue.maxRestarts', policy.maxRestarts, 'an integer >= 0');
  }
}
