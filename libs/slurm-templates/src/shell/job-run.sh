# shellcheck shell=bash
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
