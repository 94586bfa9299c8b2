#!/bin/bash
# Usage: sbatch preprocess_gpu.sh --model M --scale S --dataset D [--run-root DIR] [-O key value]...
# sbatch options on the command line override the defaults above.
# KD-GAT preprocess stage run by hand: writes the dataset cache to scratch for later staging.
# Rendered by @kdgat/slurm-templates from the experiment spec and the cluster profile: re-render, do not edit.
# The values of this job come first; the shell after them is the same in every job script
# (libs/slurm-templates/src/shell/), with the activation of the environment in the middle.
kdgat_profile=local
kdgat_epilog_script=/work/main/.hpc/scratch/scripts/job_epilog.sh
kdgat_unavailable_status=69
kdgat_gpu_sample_seconds=10
kdgat_requeue_signal=''
kdgat_requeue_status=75
kdgat_requeue_ack=requeue_ack.json
# The arguments name the stage (train_gpu.sh) and the run; these are the defaults and the usage.
kdgat_usage='usage: sbatch preprocess_gpu.sh --model M --scale S --dataset D [--run-root DIR] [-O key value]...'
kdgat_hand_stage=preprocess
kdgat_runs_dir=/work/main/.hpc/scratch/runs
kdgat_run_name_parts=(
  model scale stage
)
kdgat_run_name_separator=_
kdgat_cache_root=/work/main/.hpc/scratch/cache
kdgat_stage_datasets=()

# ---- @kdgat/slurm-templates src/shell/job-start.sh ----
# The start of every job script: strict mode, the job's state, which task this is, and the traps.
# The rendered script (renderTrainJob: one run, an array task of a sweep, a tune worker; or the
# hand-use train_gpu.sh / preprocess_gpu.sh of renderSiteScripts) assigns the inputs below before
# this text; the activation of the environment and then job-run.sh follow it.
#
# Inputs of every job script:
#   kdgat_profile             the cluster profile's name (for messages)
#   kdgat_epilog_script       job_epilog.sh, run by the EXIT trap
#   kdgat_unavailable_status  exit status when the node lacks what the job needs (69, EX_UNAVAILABLE)
#   kdgat_requeue_signal      the pre-timeout signal (USR1 ...) forwarded to the pipeline; '' = no requeue
#   kdgat_requeue_contract    who requeues at that signal: handshake (job-run.sh's kdgat_requeue) or
#                             lightning (the pipeline itself, with `scontrol requeue`)
# Inputs of a per-run script (renderTrainJob), read by kdgat_run_task:
#   kdgat_experiment, kdgat_stage_id   for the first line of the log
#   kdgat_run_root            the pipeline's --run-root (an array task or a tune worker adds its own dir)
#   kdgat_run_subdir          the run dir below the run root: <dataset>/<model>_<scale>_<stage>
#   kdgat_cmd                 the pipeline's command (its declaration's template, filled but for
#                             {run_root} and {run_dir}, filled here), completed with the overrides
#   kdgat_overrides           the stage's overrides, already in the pipeline's style (-O key value ...)
#   kdgat_override_style      how a sweep point's override reaches the pipeline: dash-O, hydra or flags
#   kdgat_array_table, kdgat_array_size, kdgat_first_point   (sweep arrays) the table of overrides,
#                             the number of tasks, the global index of task 0
#   kdgat_tune_workers        (tune studies) the number of workers
# Inputs of a hand-use script, read by kdgat_hand_args:
#   kdgat_usage               the usage line
#   kdgat_hand_stage          the stage it runs ('' = the first argument names it)
#   kdgat_runs_dir            --run-root when the arguments give none
#   kdgat_run_name_parts, kdgat_run_name_separator   the run dir's name <dataset>/<part><sep><part>...
#                             (the run contract's layout: model, scale, stage joined by _)
#   kdgat_cache_root          the scratch directory of the dataset caches
#   kdgat_stage_datasets      (job-run.sh) set here for the training script
# Inputs that only some scripts have are read as ${name:-}.

set -euo pipefail
if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 404)); then
  echo "kdgat: this job script needs bash >= 4.4 (found $BASH_VERSION)" >&2
  exit "$kdgat_unavailable_status"
fi
declare -g kdgat_profile kdgat_epilog_script kdgat_unavailable_status kdgat_requeue_signal
declare -g kdgat_requeue_contract kdgat_max_restarts
declare -g kdgat_experiment kdgat_stage_id kdgat_run_root kdgat_run_subdir kdgat_array_table
declare -g kdgat_array_size kdgat_first_point kdgat_tune_workers kdgat_usage kdgat_hand_stage
declare -g kdgat_runs_dir kdgat_cache_root kdgat_run_name_separator kdgat_override_style
declare -ga kdgat_cmd kdgat_overrides kdgat_run_name_parts kdgat_words

kdgat_job_start=$(date +%s)
kdgat_job_id=${SLURM_JOB_ID:-local-$$}
kdgat_state=FAILED
kdgat_sampler_pid=''
kdgat_pipeline_pid=''
kdgat_signal_count=0
kdgat_signal_time=''
kdgat_run_dir=''
kdgat_point_overrides=()

# kdgat_override_words KEY VALUE: the words of one override in the pipeline's style (kdgat_words).
kdgat_override_words() {
  case ${kdgat_override_style:-dash-O} in
    dash-O) kdgat_words=(-O "$1" "$2") ;;
    hydra) kdgat_words=("$1=$2") ;;
    flags) kdgat_words=("--$1" "$2") ;;
    *)
      echo "kdgat: override style '$kdgat_override_style' is not dash-O, hydra or flags" >&2
      exit 64
      ;;
  esac
}

# kdgat_array_task: an array task's sweep point. Its overrides come from the rendered table next to
# the script (read as data, never evaluated); it runs under <run root>/point_<global index>.
kdgat_array_task() {
  local index key encoded value
  kdgat_task=${SLURM_ARRAY_TASK_ID:-}
  if [[ ! $kdgat_task =~ ^[0-9]+$ ]] || ((kdgat_task >= kdgat_array_size)); then
    echo "kdgat: SLURM_ARRAY_TASK_ID='$kdgat_task' is not a task of this array (0-$((kdgat_array_size - 1)))" >&2
    exit 64
  fi
  while IFS=$'\t' read -r index key encoded; do
    [[ $index == "$kdgat_task" ]] || continue
    printf -v value '%b' "$encoded"
    kdgat_override_words "$key" "$value"
    kdgat_point_overrides+=("${kdgat_words[@]}")
  done <"$kdgat_array_table"
  if ((kdgat_first_point == 0)); then
    kdgat_run_root=$kdgat_run_root/point_$kdgat_task
  else
    kdgat_run_root=$kdgat_run_root/point_$((kdgat_task + kdgat_first_point))
  fi
}

# kdgat_tune_task: a study worker. Every task pulls trials from the same study; each keeps its own
# run root.
kdgat_tune_task() {
  kdgat_task=${SLURM_ARRAY_TASK_ID:-0}
  if [[ ! $kdgat_task =~ ^[0-9]+$ ]] || ((kdgat_task >= kdgat_tune_workers)); then
    echo "kdgat: SLURM_ARRAY_TASK_ID='$kdgat_task' is not a worker of this study (0-$((kdgat_tune_workers - 1)))" >&2
    exit 64
  fi
  kdgat_run_root=$kdgat_run_root/worker_$kdgat_task
}

# kdgat_run_task: what a per-run script runs (one run, an array task, a tune worker): completes
# kdgat_cmd and sets kdgat_run_dir.
kdgat_run_task() {
  if [[ -n ${kdgat_array_table:-} ]]; then kdgat_array_task; fi
  if ((${kdgat_tune_workers:-0} > 0)); then kdgat_tune_task; fi
  kdgat_run_dir=$kdgat_run_root/$kdgat_run_subdir
  # The declaration's {run_root} and {run_dir}, known only now (a task or worker has its own root).
  # The replacement is quoted: bash 5.2 reads an unquoted & there as the matched text.
  local i word
  for i in "${!kdgat_cmd[@]}"; do
    word=${kdgat_cmd[i]//'{run_root}'/"$kdgat_run_root"}
    kdgat_cmd[i]=${word//'{run_dir}'/"$kdgat_run_dir"}
  done
  kdgat_cmd+=("${kdgat_overrides[@]}" "${kdgat_point_overrides[@]}")
  printf 'kdgat: experiment %s, stage %s, job %s on %s (cluster profile %s)\n' "$kdgat_experiment" \
    "$kdgat_stage_id" "$kdgat_job_id" "$(hostname)" "$kdgat_profile"
}

# kdgat_hand_args ARG...: what a hand-use script runs, from its arguments
# (STAGE --model M --scale S --dataset D [--run-root DIR] [-O key value]...): sets kdgat_cmd,
# kdgat_run_dir and, for a training stage, the dataset to stage.
kdgat_hand_args() {
  local args i name part run_name=''
  if [[ -n $kdgat_hand_stage ]]; then
    set -- "$kdgat_hand_stage" "$@"
  elif (($# < 1)); then
    echo "$kdgat_usage" >&2
    exit 64
  fi
  kdgat_stage=$1 kdgat_model='' kdgat_scale='' kdgat_dataset='' kdgat_run_root=''
  args=("$@")
  for ((i = 1; i + 1 < ${#args[@]}; i++)); do
    case ${args[i]} in
      --model) kdgat_model=${args[i + 1]} ;;
      --scale) kdgat_scale=${args[i + 1]} ;;
      --dataset) kdgat_dataset=${args[i + 1]} ;;
      --run-root) kdgat_run_root=${args[i + 1]} ;;
    esac
  done
  for name in "$kdgat_stage" "$kdgat_model" "$kdgat_scale" "$kdgat_dataset"; do
    if [[ ! $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
      printf 'kdgat: %q is not a stage, model, scale or dataset name\n%s\n' "$name" "$kdgat_usage" >&2
      exit 64
    fi
  done
  kdgat_cmd=(python -m kdgat "$@")
  if [[ -z $kdgat_run_root ]]; then
    kdgat_run_root=$kdgat_runs_dir
    kdgat_cmd+=(--run-root "$kdgat_run_root")
  fi
  local -A parts=([model]=$kdgat_model [scale]=$kdgat_scale [stage]=$kdgat_stage)
  for part in "${kdgat_run_name_parts[@]}"; do
    run_name+=${run_name:+$kdgat_run_name_separator}${parts[$part]}
  done
  kdgat_run_dir=$kdgat_run_root/$kdgat_dataset/$run_name
  # The training script stages the dataset's cache; preprocess writes it (to scratch).
  if [[ -z $kdgat_hand_stage ]]; then
    # shellcheck disable=SC2034 # staged by job-run.sh
    kdgat_stage_datasets=("$kdgat_dataset" "$kdgat_cache_root/$kdgat_dataset")
  fi
  printf 'kdgat: %s, job %s on %s (cluster profile %s)\n' "$kdgat_stage" "$kdgat_job_id" "$(hostname)" "$kdgat_profile"
}

# The epilog always runs (P5), and the job ends with the status it was going to end with.
# shellcheck disable=SC2317 # run by the EXIT trap (shellcheck 0.9 does not follow traps)
kdgat_finish() {
  local status=$?
  trap - EXIT
  if [[ -n $kdgat_sampler_pid ]]; then
    # The sampler only ends by this kill, so its exit status says nothing.
    kill "$kdgat_sampler_pid" 2>/dev/null || :
    wait "$kdgat_sampler_pid" 2>/dev/null || :
  fi
  if [[ $status -eq 0 ]]; then kdgat_state=COMPLETED; fi
  # A requeued job keeps its staged data for the next attempt; otherwise a per-job /tmp dir goes.
  if [[ $kdgat_state != REQUEUED ]] && declare -F kdgat_stage_cleanup >/dev/null; then kdgat_stage_cleanup; fi
  # For the job record: CPU time of the finished children (the pipeline and its loader workers:
  # fields 16-17 of /proc/$$/stat, in clock ticks) and whether the pre-timeout signal came.
  local kdgat_stat kdgat_fields
  if read -r kdgat_stat </proc/$$/stat 2>/dev/null; then
    read -ra kdgat_fields <<<"${kdgat_stat##*) }"
    export KDGAT_CHILD_CPU_TICKS=$((kdgat_fields[13] + kdgat_fields[14]))
  fi
  export KDGAT_SIGNALLED=${kdgat_signal_time:+1}
  bash "$kdgat_epilog_script" "$kdgat_run_dir" "$status" "$kdgat_job_start" "$kdgat_state" ||
    echo "kdgat: the epilog failed with status $? (job status unchanged)" >&2
  exit "$status"
}

# scancel and the time limit send SIGTERM: stop the pipeline and end through the EXIT trap, reported.
# So does SLURM when a pipeline that requeues itself (Lightning) has run `scontrol requeue`: then the
# job's restart count has risen past this run's, and the job is recorded as requeued.
# shellcheck disable=SC2317 # run by the TERM trap (shellcheck 0.9 does not follow traps)
kdgat_terminate() {
  kdgat_state=TERMINATED
  if [[ ${kdgat_requeue_contract:-} == lightning && -n $kdgat_signal_time ]] && kdgat_requeued_by_pipeline; then
    # shellcheck disable=SC2034 # read by the EXIT trap
    kdgat_state=REQUEUED
    echo "kdgat: SIGTERM after the pipeline requeued job ${SLURM_JOB_ID:-} itself (restart $((${SLURM_RESTART_COUNT:-0} + 1)))"
    trap '' TERM
    exit 143
  fi
  echo "kdgat: SIGTERM (scancel, or the time limit reached): stopping the pipeline" >&2
  if [[ -n $kdgat_pipeline_pid ]]; then kill -TERM "$kdgat_pipeline_pid" 2>/dev/null || :; fi
  exit 143
}

# kdgat_requeued_by_pipeline: SLURM counts this job's restarts past this run's own (the pipeline ran
# `scontrol requeue`).
# shellcheck disable=SC2317 # called by the TERM trap (shellcheck 0.9 does not follow traps)
kdgat_requeued_by_pipeline() {
  local job restarts
  [[ -n ${SLURM_JOB_ID:-} ]] && command -v scontrol >/dev/null 2>&1 || return 1
  job=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null) || return 1
  [[ $job =~ Restarts=([0-9]+) ]] || return 1
  restarts=${BASH_REMATCH[1]}
  ((restarts > ${SLURM_RESTART_COUNT:-0}))
}

# The pre-timeout signal: forward it to the pipeline, which checkpoints and acknowledges (handshake)
# or requeues the job itself (lightning).
# shellcheck disable=SC2317 # run by the signal trap (shellcheck 0.9 does not follow traps)
kdgat_forward_signal() {
  kdgat_signal_count=$((kdgat_signal_count + 1))
  kdgat_signal_time=$(date +%s)
  # A pipeline that requeues itself on the signal (Lightning) knows no restart budget: past it, the
  # signal is not passed on, and the job runs to its time limit (the runner's recovery decides then).
  if [[ ${kdgat_requeue_contract:-} == lightning ]] && ((${SLURM_RESTART_COUNT:-0} >= kdgat_max_restarts)); then
    echo "kdgat: SIG$kdgat_requeue_signal: restart ${SLURM_RESTART_COUNT:-0} reached the maximum of $kdgat_max_restarts: not passing it to the pipeline, which would requeue itself"
    return 0
  fi
  if [[ -n $kdgat_pipeline_pid ]]; then
    echo "kdgat: SIG$kdgat_requeue_signal: time limit near, asking the pipeline (pid $kdgat_pipeline_pid) to checkpoint"
    kill -s "$kdgat_requeue_signal" "$kdgat_pipeline_pid" 2>/dev/null || echo "kdgat: the pipeline had already exited"
  else
    echo "kdgat: SIG$kdgat_requeue_signal before the pipeline started: nothing to checkpoint"
  fi
}

# Installed before anything slow (modules, staging) so an early signal is handled, not fatal.
kdgat_install_traps() {
  trap kdgat_finish EXIT
  trap kdgat_terminate TERM
  if [[ -n $kdgat_requeue_signal ]]; then trap kdgat_forward_signal "$kdgat_requeue_signal"; fi
}

if [[ -n ${kdgat_usage:-} ]]; then kdgat_hand_args "$@"; else kdgat_run_task; fi
kdgat_install_traps

# ---- the environment: the profile's CUDA module, then the environment's activation ----
kdgat_lmod_init=''
kdgat_cuda_module=''
kdgat_conda_module=''
kdgat_env_backend=venv
kdgat_env_target=/work/main/.hpc/envs/cpu-local/bin/activate
# ---- @kdgat/slurm-templates src/shell/environment.sh ----
# The environment: `module` from the profile's Lmod init, the profile's modules, and the
# activation of the conda or venv environment. Three texts carry this file after their values and
# then call one of its functions:
#   every job script (jobBodyLines)               kdgat_environment: the CUDA module, then the activation
#   the stack output environment.activate         kdgat_activate: a snippet a user can source
#     (activationSnippet)
#   commands on a login node (renderModuleShell)  kdgat_load_login_modules, then `exec "$@"`
#
# Inputs (each text assigns those its function reads):
#   kdgat_profile             the cluster profile's name (for messages)
#   kdgat_unavailable_status  exit status when the node lacks what is needed (69, EX_UNAVAILABLE)
#   kdgat_lmod_init           the profile's Lmod init, sourced when the shell has no `module`
#   kdgat_cuda_module         (job) the profile's CUDA module; '' = none
#   kdgat_conda_module        (conda) the module that provides conda when it is not on PATH; '' = none
#   kdgat_env_backend         conda or venv
#   kdgat_env_target          conda: the environment's prefix or name; venv: its bin/activate
#   kdgat_login_modules       (login node) the modules to load: the conda frontend's, then CUDA's
#   kdgat_code                (job, optional) the pipeline's code where the job runs (the run's snapshot)
#   kdgat_code_paths          (with kdgat_code) its directories that come first on PYTHONPATH (src)
declare -g kdgat_profile kdgat_unavailable_status kdgat_lmod_init kdgat_cuda_module kdgat_conda_module
declare -g kdgat_env_backend kdgat_env_target kdgat_code
declare -ga kdgat_login_modules kdgat_code_paths

# kdgat_module_command: Lmod defines `module` as a shell function that a batch shell (or a login
# that did not read the site's init) may not have inherited.
kdgat_module_command() {
  if ! type module >/dev/null 2>&1 && [[ -r $kdgat_lmod_init ]]; then
    # shellcheck source=/dev/null
    source "$kdgat_lmod_init"
  fi
  if ! type module >/dev/null 2>&1; then
    echo "kdgat: cluster profile $kdgat_profile loads modules, but there is no module command on $(hostname)" >&2
    exit "$kdgat_unavailable_status"
  fi
}

# kdgat_activate: activates the environment so that it works in a non-interactive shell: conda's
# hook is evaluated because `conda activate` is a shell function that .bashrc would normally define.
kdgat_activate() {
  case $kdgat_env_backend in
    venv)
      set +u # activate scripts read unset variables
      # shellcheck source=/dev/null
      source "$kdgat_env_target"
      set -u
      ;;
    conda)
      set +u # conda activation scripts read unset variables
      if [[ -n $kdgat_conda_module ]] && ! command -v conda >/dev/null 2>&1; then
        kdgat_module_command
        module load "$kdgat_conda_module"
      fi
      if ! command -v conda >/dev/null 2>&1; then
        printf 'kdgat: conda is not on PATH, so environment %s cannot be activated\n' "$kdgat_env_target" >&2
        exit "$kdgat_unavailable_status"
      fi
      eval "$(conda shell.bash hook)"
      conda activate "$kdgat_env_target"
      set -u
      ;;
    *)
      echo "kdgat: environment backend '$kdgat_env_backend' is neither conda nor venv" >&2
      exit 64
      ;;
  esac
}

# kdgat_environment: what a job script runs before staging: the profile's CUDA module, then the
# activation.
# shellcheck disable=SC2317 # called by job scripts only (the other texts call their own function)
kdgat_environment() {
  if [[ -n $kdgat_cuda_module ]]; then
    kdgat_module_command
    set +u # Lmod reads unset variables
    module load "$kdgat_cuda_module"
    set -u
  fi
  kdgat_activate
  if [[ -n ${kdgat_code:-} ]]; then
    local i dir
    for ((i = ${#kdgat_code_paths[@]} - 1; i >= 0; i--)); do
      dir=$kdgat_code/${kdgat_code_paths[i]}
      if [[ ! -d $dir ]]; then
        echo "kdgat: the pipeline's code $dir is missing on $(hostname)" >&2
        exit "$kdgat_unavailable_status"
      fi
      export PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}"
    done
    echo "kdgat: code from $kdgat_code"
  fi
}

# kdgat_load_login_modules: the profile's modules for a command on a login node, in one
# `module load`; a missing one ends the shell after the module system's own message.
# shellcheck disable=SC2317 # called by the login-node script only
kdgat_load_login_modules() {
  kdgat_module_command
  if ! module load "${kdgat_login_modules[@]}"; then
    printf 'kdgat: cluster profile %s: module load %s failed on %s (the module system says why above)\n' \
      "$kdgat_profile" "${kdgat_login_modules[*]}" "$(hostname)" >&2
    exit "$kdgat_unavailable_status"
  fi
}
kdgat_environment

# ---- @kdgat/slurm-templates src/shell/job-run.sh ----
# The end of every job script, after the activation of the environment: staging (P0), the GPU
# sampler, the pipeline, and the requeue decision. Reads the state job-start.sh keeps
# (kdgat_run_dir, kdgat_cmd, the pids, the signal's count and time, kdgat_state) and these inputs:
#   kdgat_stage_datasets      NAME SRC_DIR pairs to stage to node-local disk; () = no staging
#   kdgat_stage_data_script   stage_data.sh, sourced when there is something to stage
#   kdgat_cache_root          KD_GAT_CACHE_ROOT of a job that stages nothing: the scratch directory
#                             of the caches (preprocess writes there; staging off reads there)
#   kdgat_gpu_sample_seconds  seconds between nvidia-smi samples
#   kdgat_requeue_status      the pipeline's exit status after it checkpointed on the signal
#   kdgat_requeue_ack         the acknowledgement file it writes in its run dir
#   kdgat_max_restarts        (requeue on) how many times the job may be requeued
declare -g kdgat_stage_data_script kdgat_cache_root kdgat_gpu_sample_seconds kdgat_requeue_status
declare -g kdgat_requeue_ack kdgat_max_restarts kdgat_requeue_signal kdgat_run_dir kdgat_state
declare -g kdgat_sampler_pid kdgat_pipeline_pid kdgat_signal_count kdgat_signal_time
declare -ga kdgat_stage_datasets kdgat_cmd

# kdgat_stage_caches: P0, copy the dataset caches to node-local disk (verified, atomic); exports
# KD_GAT_CACHE_ROOT. A job that stages nothing reads the scratch cache directly (preprocess builds
# it there: never in $TMPDIR, which is deleted at job end).
kdgat_stage_caches() {
  if ((${#kdgat_stage_datasets[@]} == 0)); then
    export KD_GAT_CACHE_ROOT=$kdgat_cache_root
    return 0
  fi
  # shellcheck source=/dev/null
  source "$kdgat_stage_data_script"
  if ((${SLURM_JOB_NUM_NODES:-1} > 1)); then
    # Several nodes: each reads its own node-local copy, so each stages one (one task per node;
    # $TMPDIR names the same path on every node, a different disk on each).
    echo "kdgat: staging on each of the job's $SLURM_JOB_NUM_NODES nodes"
    srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 \
      bash "$kdgat_stage_data_script" "${kdgat_stage_datasets[@]}"
    KD_GAT_CACHE_ROOT=$(kdgat_stage_root)
    export KD_GAT_CACHE_ROOT
    return 0
  fi
  kdgat_stage_data "${kdgat_stage_datasets[@]}"
}

# kdgat_start_sampler: nvidia-smi in the background into the run dir; skipped cleanly without it.
kdgat_start_sampler() {
  mkdir -p "$kdgat_run_dir"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,memory.total \
      --format=csv -l "$kdgat_gpu_sample_seconds" >>"$kdgat_run_dir/gpu_samples.csv" 2>>"$kdgat_run_dir/gpu_samples.err" &
    # shellcheck disable=SC2034 # stopped by the EXIT trap (job-start.sh)
    kdgat_sampler_pid=$!
  else
    echo "kdgat: nvidia-smi not found: GPU utilisation sampling skipped"
  fi
}

# `wait` returns early (status > 128) when a trapped signal arrives: wait again for the real status.
kdgat_wait_pipeline() {
  local seen rc
  while :; do
    seen=$kdgat_signal_count rc=0
    wait "$kdgat_pipeline_pid" || rc=$?
    if ((rc > 128 && kdgat_signal_count != seen)); then continue; fi
    return "$rc"
  done
}

# kdgat_run_pipeline: runs kdgat_cmd in the background so the signal trap can fire, then waits for
# its real status (kdgat_status).
kdgat_run_pipeline() {
  kdgat_status=0
  # A signal during staging means the time is already short: do not start what cannot checkpoint in time.
  if ((kdgat_signal_count > 0)); then
    echo "kdgat: the time limit is near and the pipeline has not started: not starting it"
    kdgat_status=$kdgat_requeue_status
    return 0
  fi
  printf 'kdgat: running'
  printf ' %q' "${kdgat_cmd[@]}"
  printf '\n'
  "${kdgat_cmd[@]}" &
  kdgat_pipeline_pid=$!
  kdgat_wait_pipeline || kdgat_status=$?
}

# kdgat_requeue: after the pipeline exited with the requeue status, requeue only when it acknowledged
# the signal (an acknowledgement at least as new as the signal), the restart budget is not spent and
# this is a SLURM job; otherwise say why not.
kdgat_requeue() {
  local ack="$kdgat_run_dir/$kdgat_requeue_ack" restarts=${SLURM_RESTART_COUNT:-0} ack_time
  if [[ -z $kdgat_requeue_signal ]]; then
    echo "kdgat: not requeueing: requeue is disabled for this job"
    return 0
  fi
  if [[ -z $kdgat_signal_time ]]; then
    echo "kdgat: not requeueing: the pipeline exited $kdgat_requeue_status without a requeue signal"
    return 0
  fi
  # Without a started pipeline there is no progress to lose, so no acknowledgement to wait for.
  if [[ -n $kdgat_pipeline_pid ]]; then
    if [[ ! -f $ack ]]; then
      echo "kdgat: not requeueing: the pipeline wrote no acknowledgement $ack"
      return 0
    fi
    ack_time=$(stat -c %Y -- "$ack")
    if ((ack_time < kdgat_signal_time)); then
      echo "kdgat: not requeueing: $ack is older than the signal (written $ack_time, signal $kdgat_signal_time)"
      return 0
    fi
  fi
  if ((restarts >= kdgat_max_restarts)); then
    echo "kdgat: not requeueing: restart $restarts reached the maximum of $kdgat_max_restarts"
    return 0
  fi
  if [[ -z ${SLURM_JOB_ID:-} ]] || ! command -v scontrol >/dev/null 2>&1; then
    echo "kdgat: not requeueing: not a SLURM job (no SLURM_JOB_ID or scontrol); resume by resubmitting"
    return 0
  fi
  echo "kdgat: checkpoint acknowledged; requeueing job $SLURM_JOB_ID (restart $((restarts + 1)) of $kdgat_max_restarts)"
  # SLURM ends a requeued job with SIGTERM to all its processes (SIGKILL KillWait seconds later).
  # The pipeline has already exited: ignore TERM here and in the epilog (SIG_IGN is inherited), so
  # the epilog reports the requeue instead of dying half-written.
  trap '' TERM
  if scontrol requeue "$SLURM_JOB_ID"; then
    # shellcheck disable=SC2034 # read by the EXIT trap (job-start.sh)
    kdgat_state=REQUEUED
  else
    echo "kdgat: scontrol requeue $SLURM_JOB_ID failed; resume by resubmitting" >&2
  fi
}

kdgat_stage_caches
kdgat_start_sampler
kdgat_run_pipeline
if [[ ${kdgat_requeue_contract:-handshake} == handshake ]] && ((kdgat_status == kdgat_requeue_status)); then
  kdgat_requeue
fi
exit "$kdgat_status"
