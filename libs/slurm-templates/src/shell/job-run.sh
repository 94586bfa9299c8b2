# shellcheck shell=bash
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
