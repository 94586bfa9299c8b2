# shellcheck shell=bash
# The job library of @kdgat/slurm-templates: the shell every job script shares, kept by its
# content (the sha256 prefix in the file name). A job script assigns its values, checks this
# file's sha256 and sources it; what follows runs the job. Rendered from src/shell/: do not edit.

# ---- @kdgat/slurm-templates src/shell/job-start.sh ----
# The start of every job: strict mode, the job's state, which task this is, and the traps. The
# first part of the job library (src/job-library/job-library.ts); the rendered script
# (renderTrainJob: one run, an array task of a sweep, a tune worker; or the hand-use train_gpu.sh /
# preprocess_gpu.sh of renderSiteScripts) assigns the inputs below, then sources the library; the
# activation of the environment and then job-run.sh follow this text in it.
#
# Inputs of every job script:
#   hpc_profile             the cluster profile's name (for messages)
#   hpc_epilog_script       job_epilog.sh, run by the EXIT trap
#   hpc_unavailable_status  exit status when the node lacks what the job needs (69, EX_UNAVAILABLE)
#   hpc_requeue_signal      the pre-timeout signal (USR1 ...) forwarded to the pipeline; '' = no requeue
#   hpc_requeue_contract    who requeues at that signal: handshake (job-run.sh's hpc_requeue) or
#                             lightning (the pipeline itself, with `scontrol requeue`)
# Inputs of a per-run script (renderTrainJob), read by hpc_run_task:
#   hpc_experiment, hpc_stage_id   for the first line of the log
#   hpc_run_root            the pipeline's --run-root (an array task or a tune worker adds its own dir)
#   hpc_run_subdir          the run dir below the run root: <dataset>/<model>_<scale>_<stage>
#   hpc_cmd                 the pipeline's command (its declaration's template, filled but for
#                             {run_root} and {run_dir}, filled here), completed with the overrides
#   hpc_overrides           the stage's overrides, already in the pipeline's style (-O key value ...)
#   hpc_override_style      how a sweep point's override reaches the pipeline: dash-O, hydra or flags
#   hpc_array_table, hpc_array_size, hpc_first_point   (sweep arrays) the table of overrides,
#                             the number of tasks, the global index of task 0
#   hpc_shared_run_dirs     (sweep arrays) run dirs of stages outside the sweep, below the run root:
#                             linked into the task's own root, where its pipeline looks for them
#   hpc_tune_workers        (tune studies) the number of workers
#   hpc_shard_count, hpc_shard_task, hpc_shard_index_env   (sharded stages) the number of shards,
#                             1 in a shard task (0 in the join), the variable a task's index goes to
# Inputs of a hand-use script, read by hpc_hand_args:
#   hpc_usage               the usage line
#   hpc_hand_stage          the stage it runs ('' = the first argument names it)
#   hpc_hand_program        the program the arguments are handed to (the default pipeline's, e.g. python -m <module>)
#   hpc_runs_dir            --run-root when the arguments give none
#   hpc_run_name_parts, hpc_run_name_separator   the run dir's name <dataset>/<part><sep><part>...
#                             (the run contract's layout: model, scale, stage joined by _)
#   hpc_cache_root          the scratch directory of the dataset caches
#   hpc_stage_datasets      (job-run.sh) set here for the training script
# Inputs that only some scripts have are read as ${name:-}.

set -euo pipefail
if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 404)); then
  echo "kdgat-hpc: this job script needs bash >= 4.4 (found $BASH_VERSION)" >&2
  exit "$hpc_unavailable_status"
fi
declare -g hpc_profile hpc_epilog_script hpc_unavailable_status hpc_requeue_signal
declare -g hpc_requeue_contract hpc_max_restarts
declare -g hpc_experiment hpc_stage_id hpc_run_root hpc_run_subdir hpc_array_table
declare -g hpc_array_size hpc_first_point hpc_tune_workers hpc_usage hpc_hand_stage
declare -g hpc_shard_count hpc_shard_task hpc_shard_index_env
declare -g hpc_runs_dir hpc_cache_root hpc_run_name_separator hpc_override_style
declare -ga hpc_cmd hpc_overrides hpc_run_name_parts hpc_words hpc_hand_program hpc_shared_run_dirs

hpc_job_start=$(date +%s)
hpc_job_id=${SLURM_JOB_ID:-local-$$}
hpc_state=FAILED
hpc_sampler_pid=''
hpc_pipeline_pid=''
hpc_signal_count=0
hpc_signal_time=''
hpc_signal_passed=''
hpc_run_dir=''
hpc_point_overrides=()

# hpc_override_words KEY VALUE: the words of one override in the pipeline's style (hpc_words).
hpc_override_words() {
  case ${hpc_override_style:-dash-O} in
    dash-O) hpc_words=(-O "$1" "$2") ;;
    hydra) hpc_words=("$1=$2") ;;
    flags) hpc_words=("--$1" "$2") ;;
    *)
      echo "kdgat-hpc: override style '$hpc_override_style' is not dash-O, hydra or flags" >&2
      exit 64
      ;;
  esac
}

# hpc_array_task: an array task's sweep point. Its overrides come from the rendered table next to
# the script (read as data, never evaluated); it runs under <run root>/point_<global index>.
hpc_array_task() {
  local index key encoded value
  hpc_task=${SLURM_ARRAY_TASK_ID:-}
  if [[ ! $hpc_task =~ ^[0-9]+$ ]] || ((hpc_task >= hpc_array_size)); then
    echo "kdgat-hpc: SLURM_ARRAY_TASK_ID='$hpc_task' is not a task of this array (0-$((hpc_array_size - 1)))" >&2
    exit 64
  fi
  while IFS=$'\t' read -r index key encoded; do
    [[ $index == "$hpc_task" ]] || continue
    printf -v value '%b' "$encoded"
    hpc_override_words "$key" "$value"
    hpc_point_overrides+=("${hpc_words[@]}")
  done <"$hpc_array_table"
  if ((hpc_first_point == 0)); then
    hpc_run_root=$hpc_run_root/point_$hpc_task
  else
    hpc_run_root=$hpc_run_root/point_$((hpc_task + hpc_first_point))
  fi
}

# hpc_link_shared_run_dirs ROOT: a sweep point's links to the run dirs of the stages that ran once,
# under the run's ROOT (a teacher trained once for every student point). A link already there is
# replaced (a requeued task); anything else in its place stops the job rather than being replaced.
hpc_link_shared_run_dirs() {
  local sub
  for sub in "${hpc_shared_run_dirs[@]}"; do
    if [[ -e $hpc_run_root/$sub && ! -L $hpc_run_root/$sub ]]; then
      echo "kdgat-hpc: $hpc_run_root/$sub exists and is not the link to $1/$sub (the stage that ran once); not replaced" >&2
      exit 64
    fi
    mkdir -p "$(dirname "$hpc_run_root/$sub")"
    ln -sfn "$1/$sub" "$hpc_run_root/$sub"
  done
}

# hpc_tune_task: a study worker. Every task pulls trials from the same study; each keeps its own
# run root.
hpc_tune_task() {
  hpc_task=${SLURM_ARRAY_TASK_ID:-0}
  if [[ ! $hpc_task =~ ^[0-9]+$ ]] || ((hpc_task >= hpc_tune_workers)); then
    echo "kdgat-hpc: SLURM_ARRAY_TASK_ID='$hpc_task' is not a worker of this study (0-$((hpc_tune_workers - 1)))" >&2
    exit 64
  fi
  hpc_run_root=$hpc_run_root/worker_$hpc_task
}

# hpc_shard_task_env: a shard task. Task i of hpc_shard_count exports its index for the pipeline
# and keeps its own run root (the join job exports only the count).
hpc_shard_task_env() {
  hpc_task=${SLURM_ARRAY_TASK_ID:-0}
  if [[ ! $hpc_task =~ ^[0-9]+$ ]] || ((hpc_task >= hpc_shard_count)); then
    echo "kdgat-hpc: SLURM_ARRAY_TASK_ID='$hpc_task' is not a shard of this stage (0-$((hpc_shard_count - 1)))" >&2
    exit 64
  fi
  export "$hpc_shard_index_env=$hpc_task"
  hpc_run_root=$hpc_run_root/shard_$hpc_task
}

# hpc_run_task: what a per-run script runs (one run, an array task, a tune worker): completes
# hpc_cmd and sets hpc_run_dir.
hpc_run_task() {
  local root=$hpc_run_root
  if [[ -n ${hpc_array_table:-} ]]; then
    hpc_array_task
    if [[ -v 'hpc_shared_run_dirs[0]' ]]; then hpc_link_shared_run_dirs "$root"; fi
  fi
  if ((${hpc_tune_workers:-0} > 0)); then hpc_tune_task; fi
  if ((${hpc_shard_task:-0} == 1)); then hpc_shard_task_env; fi
  hpc_run_dir=$hpc_run_root/$hpc_run_subdir
  # The declaration's {run_root} and {run_dir}, known only now (a task or worker has its own root).
  # The replacement is quoted: bash 5.2 reads an unquoted & there as the matched text.
  local i word
  for i in "${!hpc_cmd[@]}"; do
    word=${hpc_cmd[i]//'{run_root}'/"$hpc_run_root"}
    hpc_cmd[i]=${word//'{run_dir}'/"$hpc_run_dir"}
  done
  hpc_cmd+=("${hpc_overrides[@]}" "${hpc_point_overrides[@]}")
  printf 'kdgat-hpc: experiment %s, stage %s, job %s on %s (cluster profile %s)\n' "$hpc_experiment" \
    "$hpc_stage_id" "$hpc_job_id" "$(hostname)" "$hpc_profile"
}

# hpc_hand_args ARG...: what a hand-use script runs, from its arguments
# (STAGE --model M --scale S --dataset D [--run-root DIR] [-O key value]...): sets hpc_cmd,
# hpc_run_dir and, for a training stage, the dataset to stage.
hpc_hand_args() {
  local args i name part run_name=''
  if [[ -n $hpc_hand_stage ]]; then
    set -- "$hpc_hand_stage" "$@"
  elif (($# < 1)); then
    echo "$hpc_usage" >&2
    exit 64
  fi
  hpc_stage=$1 hpc_model='' hpc_scale='' hpc_dataset='' hpc_run_root=''
  args=("$@")
  for ((i = 1; i + 1 < ${#args[@]}; i++)); do
    case ${args[i]} in
      --model) hpc_model=${args[i + 1]} ;;
      --scale) hpc_scale=${args[i + 1]} ;;
      --dataset) hpc_dataset=${args[i + 1]} ;;
      --run-root) hpc_run_root=${args[i + 1]} ;;
    esac
  done
  for name in "$hpc_stage" "$hpc_model" "$hpc_scale" "$hpc_dataset"; do
    if [[ ! $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
      printf 'kdgat-hpc: %q is not a stage, model, scale or dataset name\n%s\n' "$name" "$hpc_usage" >&2
      exit 64
    fi
  done
  hpc_cmd=("${hpc_hand_program[@]}" "$@")
  if [[ -z $hpc_run_root ]]; then
    hpc_run_root=$hpc_runs_dir
    hpc_cmd+=(--run-root "$hpc_run_root")
  fi
  local -A parts=([model]=$hpc_model [scale]=$hpc_scale [stage]=$hpc_stage)
  for part in "${hpc_run_name_parts[@]}"; do
    run_name+=${run_name:+$hpc_run_name_separator}${parts[$part]}
  done
  hpc_run_dir=$hpc_run_root/$hpc_dataset/$run_name
  # The training script stages the dataset's cache; preprocess writes it (to scratch).
  if [[ -z $hpc_hand_stage ]]; then
    # shellcheck disable=SC2034 # staged by job-run.sh
    hpc_stage_datasets=("$hpc_dataset" "$hpc_cache_root/$hpc_dataset")
  fi
  printf 'kdgat-hpc: %s, job %s on %s (cluster profile %s)\n' "$hpc_stage" "$hpc_job_id" "$(hostname)" "$hpc_profile"
}

# hpc_gone PID: true once the process has ended (bash reaps its children as they exit).
# shellcheck disable=SC2317 # called by the EXIT trap (shellcheck 0.9 does not follow traps)
hpc_gone() {
  local tries
  for ((tries = 0; tries < 100; tries++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.05
  done
  return 1
}

# hpc_stop_sampler: the sampler only ends by a signal, so its exit status says nothing. An nvidia-smi
# that does not end on TERM (a GPU in a bad state can hang it) must not hold a finished job until its
# time limit: KILL after 5 s, and 5 s later stop waiting for it.
# shellcheck disable=SC2317 # called by the EXIT trap (shellcheck 0.9 does not follow traps)
hpc_stop_sampler() {
  kill "$hpc_sampler_pid" 2>/dev/null || :
  if ! hpc_gone "$hpc_sampler_pid"; then
    echo "kdgat-hpc: the GPU sampler (nvidia-smi, pid $hpc_sampler_pid) did not end 5 s after TERM: killing it"
    kill -KILL "$hpc_sampler_pid" 2>/dev/null || :
    if ! hpc_gone "$hpc_sampler_pid"; then
      echo "kdgat-hpc: the GPU sampler (pid $hpc_sampler_pid) survived KILL (stuck in the kernel): not waiting for it"
      return 0
    fi
  fi
  wait "$hpc_sampler_pid" 2>/dev/null || :
}

# The epilog always runs (P5), and the job ends with the status it was going to end with.
# shellcheck disable=SC2317 # run by the EXIT trap (shellcheck 0.9 does not follow traps)
hpc_finish() {
  local status=$?
  trap - EXIT
  if [[ -n $hpc_sampler_pid ]]; then hpc_stop_sampler; fi
  if [[ $status -eq 0 ]]; then
    hpc_state=COMPLETED
  elif [[ $hpc_state != REQUEUED && ${hpc_requeue_contract:-} == lightning && -n ${hpc_signal_passed:-} ]] &&
    hpc_requeued_by_pipeline; then
    # The pipeline requeued the job itself and SLURM's TERM reached it (it exited) before this
    # script's own TERM trap ran: decided from SLURM's restart count, whichever came first.
    hpc_state=REQUEUED
    echo "kdgat-hpc: the pipeline requeued job ${SLURM_JOB_ID:-} itself (restart $((${SLURM_RESTART_COUNT:-0} + 1)))"
  fi
  # A requeued job keeps its staged data for the next attempt; otherwise a per-job /tmp dir goes.
  if [[ $hpc_state != REQUEUED ]] && declare -F hpc_stage_cleanup >/dev/null; then hpc_stage_cleanup; fi
  # For the job record: CPU time of the finished children (the pipeline and its loader workers:
  # fields 16-17 of /proc/$$/stat, in clock ticks) and whether the pre-timeout signal came.
  local hpc_stat hpc_fields
  if read -r hpc_stat </proc/$$/stat 2>/dev/null; then
    read -ra hpc_fields <<<"${hpc_stat##*) }"
    export HPC_CHILD_CPU_TICKS=$((hpc_fields[13] + hpc_fields[14]))
  fi
  export HPC_SIGNALLED=${hpc_signal_time:+1}
  bash "$hpc_epilog_script" "$hpc_run_dir" "$status" "$hpc_job_start" "$hpc_state" ||
    echo "kdgat-hpc: the epilog failed with status $? (job status unchanged)" >&2
  exit "$status"
}

# scancel and the time limit send SIGTERM: stop the pipeline and end through the EXIT trap, reported.
# So does SLURM when a pipeline that requeues itself (Lightning) has run `scontrol requeue`: then the
# job's restart count has risen past this run's, and the job is recorded as requeued.
# shellcheck disable=SC2317 # run by the TERM trap (shellcheck 0.9 does not follow traps)
hpc_terminate() {
  hpc_state=TERMINATED
  if [[ ${hpc_requeue_contract:-} == lightning && -n $hpc_signal_time ]] && hpc_requeued_by_pipeline; then
    # shellcheck disable=SC2034 # read by the EXIT trap
    hpc_state=REQUEUED
    echo "kdgat-hpc: SIGTERM after the pipeline requeued job ${SLURM_JOB_ID:-} itself (restart $((${SLURM_RESTART_COUNT:-0} + 1)))"
    trap '' TERM
    exit 143
  fi
  echo "kdgat-hpc: SIGTERM (scancel, or the time limit reached): stopping the pipeline" >&2
  if [[ -n $hpc_pipeline_pid ]]; then kill -TERM "$hpc_pipeline_pid" 2>/dev/null || :; fi
  exit 143
}

# hpc_requeued_by_pipeline: SLURM counts this job's restarts past this run's own (the pipeline ran
# `scontrol requeue`).
# shellcheck disable=SC2317 # called by the TERM trap (shellcheck 0.9 does not follow traps)
hpc_requeued_by_pipeline() {
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
hpc_forward_signal() {
  hpc_signal_count=$((hpc_signal_count + 1))
  hpc_signal_time=$(date +%s)
  # A pipeline that requeues itself on the signal (Lightning) knows no restart budget: past it, the
  # signal is not passed on, and the job runs to its time limit (the runner's recovery decides then).
  if [[ ${hpc_requeue_contract:-} == lightning ]] && ((${SLURM_RESTART_COUNT:-0} >= hpc_max_restarts)); then
    echo "kdgat-hpc: SIG$hpc_requeue_signal: restart ${SLURM_RESTART_COUNT:-0} reached the maximum of $hpc_max_restarts: not passing it to the pipeline, which would requeue itself"
    return 0
  fi
  if [[ -n $hpc_pipeline_pid ]]; then
    echo "kdgat-hpc: SIG$hpc_requeue_signal: time limit near, asking the pipeline (pid $hpc_pipeline_pid) to checkpoint"
    hpc_signal_passed=1
    kill -s "$hpc_requeue_signal" "$hpc_pipeline_pid" 2>/dev/null || echo "kdgat-hpc: the pipeline had already exited"
  else
    echo "kdgat-hpc: SIG$hpc_requeue_signal before the pipeline started: nothing to checkpoint"
  fi
}

# Installed before anything slow (modules, staging) so an early signal is handled, not fatal.
hpc_install_traps() {
  trap hpc_finish EXIT
  trap hpc_terminate TERM
  if [[ -n $hpc_requeue_signal ]]; then trap hpc_forward_signal "$hpc_requeue_signal"; fi
}

if [[ -n ${hpc_usage:-} ]]; then hpc_hand_args "$@"; else hpc_run_task; fi
hpc_install_traps

# ---- @kdgat/slurm-templates src/shell/environment.sh ----
# The environment: `module` from the profile's Lmod init, the profile's modules, and the
# activation of the conda or venv environment. Three texts carry this file after their values and
# then call one of its functions:
#   the job library (JOB_LIBRARY)                 hpc_environment: the CUDA module, then the activation
#   the stack output environment.activate         hpc_activate: a snippet a user can source
#     (activationSnippet)
#   commands on a login node (renderModuleShell)  hpc_load_login_modules, then `exec "$@"`
#
# Inputs (each text assigns those its function reads):
#   hpc_profile             the cluster profile's name (for messages)
#   hpc_unavailable_status  exit status when the node lacks what is needed (69, EX_UNAVAILABLE)
#   hpc_lmod_init           the profile's Lmod init, sourced when the shell has no `module`
#   hpc_cuda_module         (job) the profile's CUDA module; '' = none
#   hpc_env_name            (optional) the environment's name (for messages)
#   hpc_env_modules         (optional) the environment's own site modules, loaded in order before
#                           its activation (e.g. the module of the venv's Python); unset = none
#   hpc_conda_module        (conda) the module that provides conda when it is not on PATH; '' = none
#   hpc_env_backend         conda or venv
#   hpc_env_target          conda: the environment's prefix or name; venv: its bin/activate
#   hpc_login_modules       (login node) the modules to load: the conda frontend's, then CUDA's,
#                           then the environment's own
#   hpc_code                (job, optional) the pipeline's code where the job runs (the run's snapshot)
#   hpc_code_paths          (with hpc_code) its directories that come first on PYTHONPATH (src)
declare -g hpc_profile hpc_unavailable_status hpc_lmod_init hpc_cuda_module hpc_conda_module
declare -g hpc_env_backend hpc_env_target hpc_code hpc_env_name
declare -ga hpc_login_modules hpc_code_paths hpc_env_modules

# hpc_module_command: Lmod defines `module` as a shell function that a batch shell (or a login
# that did not read the site's init) may not have inherited.
hpc_module_command() {
  if ! type module >/dev/null 2>&1 && [[ -r $hpc_lmod_init ]]; then
    # shellcheck source=/dev/null
    source "$hpc_lmod_init"
  fi
  if ! type module >/dev/null 2>&1; then
    echo "kdgat-hpc: cluster profile $hpc_profile loads modules, but there is no module command on $(hostname)" >&2
    exit "$hpc_unavailable_status"
  fi
}

# hpc_load_env_modules: the environment's own site modules (hpc_env_modules), one `module load`
# each in their order, so that a failure names the module; none: nothing (not even `module`).
hpc_load_env_modules() {
  local m
  # Declared but never assigned (a text without modules) is unset to `set -u`: test without expanding it.
  [[ ${hpc_env_modules[*]+set} == set ]] || return 0
  hpc_module_command
  for m in "${hpc_env_modules[@]}"; do
    set +u # Lmod reads unset variables
    if ! module load "$m"; then
      set -u
      printf 'kdgat-hpc: environment %s: module load %s failed on %s (the module system says why above)\n' \
        "${hpc_env_name:-$hpc_env_target}" "$m" "$(hostname)" >&2
      exit "$hpc_unavailable_status"
    fi
    set -u
  done
}

# hpc_activate: activates the environment so that it works in a non-interactive shell: conda's
# hook is evaluated because `conda activate` is a shell function that .bashrc would normally define.
# The environment's own modules come first (after the conda module, as in its build): its
# interpreter needs them.
hpc_activate() {
  case $hpc_env_backend in
    venv)
      hpc_load_env_modules
      set +u # activate scripts read unset variables
      # shellcheck source=/dev/null
      source "$hpc_env_target"
      set -u
      ;;
    conda)
      set +u # conda activation scripts read unset variables
      if [[ -n $hpc_conda_module ]] && ! command -v conda >/dev/null 2>&1; then
        hpc_module_command
        module load "$hpc_conda_module"
      fi
      hpc_load_env_modules
      set +u
      if ! command -v conda >/dev/null 2>&1; then
        printf 'kdgat-hpc: conda is not on PATH, so environment %s cannot be activated\n' "$hpc_env_target" >&2
        exit "$hpc_unavailable_status"
      fi
      eval "$(conda shell.bash hook)"
      conda activate "$hpc_env_target"
      set -u
      ;;
    *)
      echo "kdgat-hpc: environment backend '$hpc_env_backend' is neither conda nor venv" >&2
      exit 64
      ;;
  esac
}

# hpc_environment: what a job script runs before staging: the profile's CUDA module, then the
# activation.
# shellcheck disable=SC2317 # called by job scripts only (the other texts call their own function)
hpc_environment() {
  if [[ -n $hpc_cuda_module ]]; then
    hpc_module_command
    set +u # Lmod reads unset variables
    module load "$hpc_cuda_module"
    set -u
  fi
  hpc_activate
  if [[ -n ${hpc_code:-} ]]; then
    local i dir
    for ((i = ${#hpc_code_paths[@]} - 1; i >= 0; i--)); do
      dir=$hpc_code/${hpc_code_paths[i]}
      if [[ ! -d $dir ]]; then
        echo "kdgat-hpc: the pipeline's code $dir is missing on $(hostname)" >&2
        exit "$hpc_unavailable_status"
      fi
      export PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}"
    done
    echo "kdgat-hpc: code from $hpc_code"
  fi
}

# hpc_load_login_modules: the profile's modules for a command on a login node, in one
# `module load`; a missing one ends the shell after the module system's own message.
# shellcheck disable=SC2317 # called by the login-node script only
hpc_load_login_modules() {
  hpc_module_command
  if ! module load "${hpc_login_modules[@]}"; then
    printf 'kdgat-hpc: cluster profile %s: module load %s failed on %s (the module system says why above)\n' \
      "$hpc_profile" "${hpc_login_modules[*]}" "$(hostname)" >&2
    exit "$hpc_unavailable_status"
  fi
}
hpc_environment

# ---- @kdgat/slurm-templates src/shell/job-run.sh ----
# The end of every job script, after the activation of the environment: staging (P0), the GPU
# sampler, the pipeline, and the requeue decision. Reads the state job-start.sh keeps
# (hpc_run_dir, hpc_cmd, the pids, the signal's count and time, hpc_state) and these inputs:
#   hpc_stage_datasets      NAME SRC_DIR pairs to stage to node-local disk; () = no staging
#   hpc_stage_data_script   stage_data.sh, sourced when there is something to stage
#   hpc_cache_root          HPC_CACHE_ROOT of a job that stages nothing: the scratch directory
#                             of the caches (preprocess writes there; staging off reads there)
#   hpc_cache_root_variable the pipeline's own name for HPC_CACHE_ROOT ('' = none)
#   hpc_gpu_sample_seconds  seconds between nvidia-smi samples
#   hpc_requeue_status      the pipeline's exit status after it checkpointed on the signal
#   hpc_requeue_ack         the acknowledgement file it writes in its run dir
#   hpc_max_restarts        (requeue on) how many times the job may be requeued
declare -g hpc_stage_data_script hpc_cache_root hpc_cache_root_variable hpc_gpu_sample_seconds hpc_requeue_status
declare -g hpc_requeue_ack hpc_max_restarts hpc_requeue_signal hpc_run_dir hpc_state
declare -g hpc_sampler_pid hpc_pipeline_pid hpc_signal_count hpc_signal_time
declare -ga hpc_stage_datasets hpc_cmd

# hpc_stage_caches: P0, copy the dataset caches to node-local disk (verified, atomic); exports their
# root as HPC_CACHE_ROOT and under the name the pipeline reads it by (hpc_cache_root_variable, when
# it declares one). A job that stages nothing reads the scratch cache directly (preprocess builds
# it there: never in $TMPDIR, which is deleted at job end).
hpc_stage_caches() {
  if ((${#hpc_stage_datasets[@]} == 0)); then
    export HPC_CACHE_ROOT=$hpc_cache_root
  elif ((${SLURM_JOB_NUM_NODES:-1} > 1)); then
    # shellcheck source=/dev/null
    source "$hpc_stage_data_script"
    # Several nodes: each reads its own node-local copy, so each stages one (one task per node;
    # $TMPDIR names the same path on every node, a different disk on each).
    echo "kdgat-hpc: staging on each of the job's $SLURM_JOB_NUM_NODES nodes"
    srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 \
      bash "$hpc_stage_data_script" "${hpc_stage_datasets[@]}" || return
    HPC_CACHE_ROOT=$(hpc_stage_root)
    export HPC_CACHE_ROOT
  else
    # shellcheck source=/dev/null
    source "$hpc_stage_data_script"
    hpc_stage_data "${hpc_stage_datasets[@]}" || return
  fi
  if [[ -n $hpc_cache_root_variable ]]; then
    export "$hpc_cache_root_variable=$HPC_CACHE_ROOT"
  fi
}

# hpc_start_sampler: nvidia-smi in the background into the run dir; skipped cleanly without it.
hpc_start_sampler() {
  mkdir -p "$hpc_run_dir"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,memory.total \
      --format=csv -l "$hpc_gpu_sample_seconds" >>"$hpc_run_dir/gpu_samples.csv" 2>>"$hpc_run_dir/gpu_samples.err" &
    # shellcheck disable=SC2034 # stopped by the EXIT trap (job-start.sh)
    hpc_sampler_pid=$!
  else
    echo "kdgat-hpc: nvidia-smi not found: GPU utilisation sampling skipped"
  fi
}

# `wait` returns early (status > 128) when a trapped signal arrives: wait again for the real status.
hpc_wait_pipeline() {
  local seen rc
  while :; do
    seen=$hpc_signal_count rc=0
    wait "$hpc_pipeline_pid" || rc=$?
    if ((rc > 128 && hpc_signal_count != seen)); then continue; fi
    return "$rc"
  done
}

# hpc_run_pipeline: runs hpc_cmd in the background so the signal trap can fire, then waits for
# its real status (hpc_status).
hpc_run_pipeline() {
  hpc_status=0
  # A signal during staging means the time is already short: do not start what cannot checkpoint in time.
  if ((hpc_signal_count > 0)); then
    echo "kdgat-hpc: the time limit is near and the pipeline has not started: not starting it"
    hpc_status=$hpc_requeue_status
    return 0
  fi
  printf 'kdgat-hpc: running'
  printf ' %q' "${hpc_cmd[@]}"
  printf '\n'
  "${hpc_cmd[@]}" &
  hpc_pipeline_pid=$!
  hpc_wait_pipeline || hpc_status=$?
}

# hpc_requeue: after the pipeline exited with the requeue status, requeue only when it acknowledged
# the signal (an acknowledgement at least as new as the signal), the restart budget is not spent and
# this is a SLURM job; otherwise say why not.
hpc_requeue() {
  local ack="$hpc_run_dir/$hpc_requeue_ack" restarts=${SLURM_RESTART_COUNT:-0} ack_time
  if [[ -z $hpc_requeue_signal ]]; then
    echo "kdgat-hpc: not requeueing: requeue is disabled for this job"
    return 0
  fi
  if [[ -z $hpc_signal_time ]]; then
    echo "kdgat-hpc: not requeueing: the pipeline exited $hpc_requeue_status without a requeue signal"
    return 0
  fi
  # Without a started pipeline there is no progress to lose, so no acknowledgement to wait for.
  if [[ -n $hpc_pipeline_pid ]]; then
    if [[ ! -f $ack ]]; then
      echo "kdgat-hpc: not requeueing: the pipeline wrote no acknowledgement $ack"
      return 0
    fi
    ack_time=$(stat -c %Y -- "$ack")
    if ((ack_time < hpc_signal_time)); then
      echo "kdgat-hpc: not requeueing: $ack is older than the signal (written $ack_time, signal $hpc_signal_time)"
      return 0
    fi
  fi
  if ((restarts >= hpc_max_restarts)); then
    echo "kdgat-hpc: not requeueing: restart $restarts reached the maximum of $hpc_max_restarts"
    return 0
  fi
  if [[ -z ${SLURM_JOB_ID:-} ]] || ! command -v scontrol >/dev/null 2>&1; then
    echo "kdgat-hpc: not requeueing: not a SLURM job (no SLURM_JOB_ID or scontrol); resume by resubmitting"
    return 0
  fi
  echo "kdgat-hpc: checkpoint acknowledged; requeueing job $SLURM_JOB_ID (restart $((restarts + 1)) of $hpc_max_restarts)"
  # SLURM ends a requeued job with SIGTERM to all its processes (SIGKILL KillWait seconds later).
  # The pipeline has already exited: ignore TERM here and in the epilog (SIG_IGN is inherited), so
  # the epilog reports the requeue instead of dying half-written.
  trap '' TERM
  if scontrol requeue "$SLURM_JOB_ID"; then
    # shellcheck disable=SC2034 # read by the EXIT trap (job-start.sh)
    hpc_state=REQUEUED
  else
    echo "kdgat-hpc: scontrol requeue $SLURM_JOB_ID failed; resume by resubmitting" >&2
  fi
}

hpc_stage_caches
hpc_start_sampler
hpc_run_pipeline
if [[ ${hpc_requeue_contract:-handshake} == handshake ]] && ((hpc_status == hpc_requeue_status)); then
  hpc_requeue
fi
exit "$hpc_status"
