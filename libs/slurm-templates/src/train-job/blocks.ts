/**
 * Script sections shared by the per-run job script and the hand-use site scripts. Each returns lines
 * of bash; every interpolated value goes through `shq` or has been checked against a safe pattern.
 * Shell variables are prefixed `kdgat_` because the staging script is sourced into the same shell.
 */
import { RUN_CONTRACT } from '@kdgat/config';
import type { EnvironmentView, ProfileView, RequeuePolicy } from '../inputs.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { shq } from '../quote/shq.ts';
import { RULES, requireAbsolutePath, requireMatch, requirePositiveInt } from '../quote/validate.ts';

/** Exit status of the pipeline after it checkpointed on the requeue signal (EX_TEMPFAIL). */
export const REQUEUE_EXIT_STATUS = RUN_CONTRACT.requeue.exitStatus;
/** Exit status when the node lacks something the profile needs (EX_UNAVAILABLE). */
export const UNAVAILABLE_EXIT_STATUS = 69;

export function sbatchLines(directives: readonly (readonly [string, string | number])[]): string[] {
  return directives.map(([flag, value]) => `#SBATCH --${flag}${value === '' ? '' : `=${value}`}`);
}

/** Header of every job script: strict mode and the variables the traps and the epilog read. */
export function preambleLines(vars: {
  title: string;
  profile: ProfileView;
  stageDataPath?: string;
  epilogPath: string;
}): string[] {
  return [
    `# ${vars.title}`,
    '# Rendered by @kdgat/slurm-templates from the experiment spec and the cluster profile: re-render, do not edit.',
    'set -euo pipefail',
    'if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 404)); then',
    '  echo "kdgat: this job script needs bash >= 4.4 (found $BASH_VERSION)" >&2',
    `  exit ${UNAVAILABLE_EXIT_STATUS}`,
    'fi',
    '',
    'kdgat_job_start=$(date +%s)',
    'kdgat_job_id=${SLURM_JOB_ID:-local-$$}',
    `kdgat_profile=${shq(vars.profile.name)}`,
    ...(vars.stageDataPath === undefined
      ? []
      : [`kdgat_stage_data_script=${shq(requireAbsolutePath('scripts.stageData', vars.stageDataPath))}`]),
    `kdgat_epilog_script=${shq(requireAbsolutePath('scripts.epilog', vars.epilogPath))}`,
    'kdgat_state=FAILED',
    "kdgat_sampler_pid=''",
    "kdgat_pipeline_pid=''",
  ];
}

/** EXIT trap: stop the sampler, always run the epilog, keep the job's status. Needs `kdgat_run_dir`. */
export function epilogTrapLines(): string[] {
  return [
    '# The epilog always runs (P5), and the job ends with the status it was going to end with.',
    '# shellcheck disable=SC2317 # run by the EXIT trap (shellcheck 0.9 does not follow traps)',
    'kdgat_finish() {',
    '  local status=$?',
    '  trap - EXIT',
    '  if [[ -n $kdgat_sampler_pid ]]; then',
    '    # The sampler only ends by this kill, so its exit status says nothing.',
    '    kill "$kdgat_sampler_pid" 2>/dev/null || :',
    '    wait "$kdgat_sampler_pid" 2>/dev/null || :',
    '  fi',
    '  if [[ $status -eq 0 ]]; then kdgat_state=COMPLETED; fi',
    '  # A requeued job keeps its staged data for the next attempt; otherwise a per-job /tmp dir goes.',
    '  if [[ $kdgat_state != REQUEUED ]] && declare -F kdgat_stage_cleanup >/dev/null; then kdgat_stage_cleanup; fi',
    '  # For the job record: CPU time of the finished children (the pipeline and its loader workers:',
    '  # fields 16-17 of /proc/$$/stat, in clock ticks) and whether the pre-timeout signal came.',
    '  local kdgat_stat kdgat_fields',
    '  if read -r kdgat_stat </proc/$$/stat 2>/dev/null; then',
    '    read -ra kdgat_fields <<<"${kdgat_stat##*) }"',
    '    export KDGAT_CHILD_CPU_TICKS=$((kdgat_fields[13] + kdgat_fields[14]))',
    '  fi',
    '  export KDGAT_SIGNALLED=${kdgat_signal_time:+1}',
    '  bash "$kdgat_epilog_script" "$kdgat_run_dir" "$status" "$kdgat_job_start" "$kdgat_state" ||',
    '    echo "kdgat: the epilog failed with status $? (job status unchanged)" >&2',
    '  exit "$status"',
    '}',
    'trap kdgat_finish EXIT',
    '# scancel and the time limit send SIGTERM: stop the pipeline and end through the EXIT trap, reported.',
    '# shellcheck disable=SC2317 # run by the TERM trap (shellcheck 0.9 does not follow traps)',
    'kdgat_terminate() {',
    '  kdgat_state=TERMINATED',
    '  echo "kdgat: SIGTERM (scancel, or the time limit reached): stopping the pipeline" >&2',
    '  if [[ -n $kdgat_pipeline_pid ]]; then kill -TERM "$kdgat_pipeline_pid" 2>/dev/null || :; fi',
    '  exit 143',
    '}',
    'trap kdgat_terminate TERM',
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

/** Background GPU sampler into the run dir; skipped cleanly where there is no nvidia-smi. */
export function samplerLines(seconds: number): string[] {
  requirePositiveInt('gpuSampleSeconds', seconds);
  return [
    'mkdir -p "$kdgat_run_dir"',
    'if command -v nvidia-smi >/dev/null 2>&1; then',
    '  nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,memory.total \\',
    `    --format=csv -l ${seconds} >>"$kdgat_run_dir/gpu_samples.csv" 2>>"$kdgat_run_dir/gpu_samples.err" &`,
    '  kdgat_sampler_pid=$!',
    'else',
    '  echo "kdgat: nvidia-smi not found: GPU utilisation sampling skipped"',
    'fi',
  ];
}

export function checkRequeuePolicy(policy: RequeuePolicy): void {
  requireMatch('requeue.signal', policy.signal, RULES.requeueSignal);
  requirePositiveInt('requeue.leadSeconds', policy.leadSeconds);
  if (!Number.isInteger(policy.maxRestarts) || policy.maxRestarts < 0) {
    throw new TemplateInputError('requeue.maxRestarts', policy.maxRestarts, 'an integer >= 0');
  }
}

/** Trap for the pre-timeout signal: forward it to the pipeline, which checkpoints and acknowledges. */
export function signalTrapLines(policy: RequeuePolicy): string[] {
  if (!policy.enabled) return [];
  checkRequeuePolicy(policy);
  return [
    `export KD_GAT_REQUEUE_SIGNAL=${policy.signal}`,
    'kdgat_signal_count=0',
    "kdgat_signal_time=''",
    '# shellcheck disable=SC2317 # run by the signal trap (shellcheck 0.9 does not follow traps)',
    'kdgat_forward_signal() {',
    '  kdgat_signal_count=$((kdgat_signal_count + 1))',
    '  kdgat_signal_time=$(date +%s)',
    '  if [[ -n $kdgat_pipeline_pid ]]; then',
    `    echo "kdgat: SIG${policy.signal}: time limit near, asking the pipeline (pid $kdgat_pipeline_pid) to checkpoint"`,
    `    kill -s ${policy.signal} "$kdgat_pipeline_pid" 2>/dev/null || echo "kdgat: the pipeline had already exited"`,
    '  else',
    `    echo "kdgat: SIG${policy.signal} before the pipeline started: nothing to checkpoint"`,
    '  fi',
    '}',
    `trap kdgat_forward_signal ${policy.signal}`,
  ];
}

/** Runs `kdgat_cmd` in the background so the signal trap can fire, then waits for its real status. */
export function runPipelineLines(policy: RequeuePolicy): string[] {
  const waitLoop = policy.enabled
    ? [
        '# `wait` returns early (status > 128) when a trapped signal arrives: wait again for the real status.',
        'kdgat_wait_pipeline() {',
        '  local seen rc',
        '  while :; do',
        '    seen=$kdgat_signal_count rc=0',
        '    wait "$kdgat_pipeline_pid" || rc=$?',
        '    if ((rc > 128 && kdgat_signal_count != seen)); then continue; fi',
        '    return "$rc"',
        '  done',
        '}',
      ]
    : ['kdgat_wait_pipeline() { wait "$kdgat_pipeline_pid"; }'];
  const launch = [
    "printf 'kdgat: running'; printf ' %q' \"${kdgat_cmd[@]}\"; printf '\\n'",
    '"${kdgat_cmd[@]}" &',
    'kdgat_pipeline_pid=$!',
    'kdgat_wait_pipeline || kdgat_status=$?',
  ];
  if (!policy.enabled) return [...waitLoop, 'kdgat_status=0', ...launch];
  return [
    ...waitLoop,
    'kdgat_status=0',
    '# A signal during staging means the time is already short: do not start what cannot checkpoint in time.',
    'if ((kdgat_signal_count > 0)); then',
    `  echo "kdgat: the time limit is near and the pipeline has not started: not starting it"`,
    `  kdgat_status=${REQUEUE_EXIT_STATUS}`,
    'else',
    ...launch.map((l) => `  ${l}`),
    'fi',
  ];
}

/**
 * Requeue decision after the pipeline exited: only when it acknowledged the signal (fresh
 * requeue_ack.json), the restart budget is not spent and scontrol exists; otherwise say why.
 */
export function requeueDecisionLines(policy: RequeuePolicy): string[] {
  if (!policy.enabled) {
    return [
      `if ((kdgat_status == ${REQUEUE_EXIT_STATUS})); then`,
      '  echo "kdgat: not requeueing: requeue is disabled for this job"',
      'fi',
    ];
  }
  return [
    `kdgat_max_restarts=${policy.maxRestarts}`,
    'kdgat_requeue() {',
    '  local ack="$kdgat_run_dir/requeue_ack.json" restarts=${SLURM_RESTART_COUNT:-0} ack_time',
    '  if [[ -z $kdgat_signal_time ]]; then',
    `    echo "kdgat: not requeueing: the pipeline exited ${REQUEUE_EXIT_STATUS} without a requeue signal"`,
    '    return 0',
    '  fi',
    '  # Without a started pipeline there is no progress to lose, so no acknowledgement to wait for.',
    '  if [[ -n $kdgat_pipeline_pid ]]; then',
    '    if [[ ! -f $ack ]]; then',
    '      echo "kdgat: not requeueing: the pipeline wrote no acknowledgement $ack"',
    '      return 0',
    '    fi',
    '    ack_time=$(stat -c %Y -- "$ack")',
    '    if ((ack_time < kdgat_signal_time)); then',
    '      echo "kdgat: not requeueing: $ack is older than the signal (written $ack_time, signal $kdgat_signal_time)"',
    '      return 0',
    '    fi',
    '  fi',
    '  if ((restarts >= kdgat_max_restarts)); then',
    '    echo "kdgat: not requeueing: restart $restarts reached the maximum of $kdgat_max_restarts"',
    '    return 0',
    '  fi',
    '  if [[ -z ${SLURM_JOB_ID:-} ]] || ! command -v scontrol >/dev/null 2>&1; then',
    '    echo "kdgat: not requeueing: not a SLURM job (no SLURM_JOB_ID or scontrol); resume by resubmitting"',
    '    return 0',
    '  fi',
    '  echo "kdgat: checkpoint acknowledged; requeueing job $SLURM_JOB_ID (restart $((restarts + 1)) of $kdgat_max_restarts)"',
    '  # SLURM ends a requeued job with SIGTERM to all its processes (SIGKILL KillWait seconds later).',
    '  # The pipeline has already exited: ignore TERM here and in the epilog (SIG_IGN is inherited), so',
    '  # the epilog reports the requeue instead of dying half-written.',
    "  trap '' TERM",
    '  if scontrol requeue "$SLURM_JOB_ID"; then',
    '    kdgat_state=REQUEUED',
    '  else',
    '    echo "kdgat: scontrol requeue $SLURM_JOB_ID failed; resume by resubmitting" >&2',
    '  fi',
    '}',
    `if ((kdgat_status == ${REQUEUE_EXIT_STATUS})); then kdgat_requeue; fi`,
  ];
}

/** A rendered override as bash words: `-O key value`. */
export function overrideWords(key: string, value: string): string {
  return `-O ${shq(key)} ${shq(value)}`;
}
