#!/bin/bash
# Usage: sbatch preprocess_gpu.sh --model M --scale S --dataset D [--run-root DIR] [-O key value]...
# sbatch options on the command line override the defaults above.
# KD-GAT preprocess stage run by hand: writes the dataset cache to scratch for later staging.
# Rendered by @kdgat/slurm-templates from the experiment spec and the cluster profile: re-render, do not edit.
set -euo pipefail
if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 404)); then
  echo "kdgat: this job script needs bash >= 4.4 (found $BASH_VERSION)" >&2
  exit 69
fi

kdgat_job_start=$(date +%s)
kdgat_job_id=${SLURM_JOB_ID:-local-$$}
kdgat_profile=local
kdgat_epilog_script=/work/main/.hpc/scratch/scripts/job_epilog.sh
kdgat_state=FAILED
kdgat_sampler_pid=''
kdgat_pipeline_pid=''
kdgat_usage='usage: sbatch preprocess_gpu.sh --model M --scale S --dataset D [--run-root DIR] [-O key value]...'
kdgat_stage=preprocess
set -- preprocess "$@"
kdgat_model='' kdgat_scale='' kdgat_dataset='' kdgat_run_root=''
kdgat_args=("$@")
for ((kdgat_i = 1; kdgat_i + 1 < ${#kdgat_args[@]}; kdgat_i++)); do
  case ${kdgat_args[kdgat_i]} in
    --model) kdgat_model=${kdgat_args[kdgat_i + 1]} ;;
    --scale) kdgat_scale=${kdgat_args[kdgat_i + 1]} ;;
    --dataset) kdgat_dataset=${kdgat_args[kdgat_i + 1]} ;;
    --run-root) kdgat_run_root=${kdgat_args[kdgat_i + 1]} ;;
  esac
done
for kdgat_name in "$kdgat_stage" "$kdgat_model" "$kdgat_scale" "$kdgat_dataset"; do
  if [[ ! $kdgat_name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
    printf 'kdgat: %q is not a stage, model, scale or dataset name\n%s\n' "$kdgat_name" "$kdgat_usage" >&2
    exit 64
  fi
done
kdgat_cmd=(python -m kdgat "$@")
if [[ -z $kdgat_run_root ]]; then
  kdgat_run_root=/work/main/.hpc/scratch/runs
  kdgat_cmd+=(--run-root "$kdgat_run_root")
fi
kdgat_run_dir=$kdgat_run_root/$kdgat_dataset/${kdgat_model}_${kdgat_scale}_$kdgat_stage
printf 'kdgat: %s, job %s on %s (cluster profile %s)\n' "$kdgat_stage" "$kdgat_job_id" "$(hostname)" "$kdgat_profile"

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
trap kdgat_finish EXIT
# scancel and the time limit send SIGTERM: stop the pipeline and end through the EXIT trap, reported.
# shellcheck disable=SC2317 # run by the TERM trap (shellcheck 0.9 does not follow traps)
kdgat_terminate() {
  kdgat_state=TERMINATED
  echo "kdgat: SIGTERM (scancel, or the time limit reached): stopping the pipeline" >&2
  if [[ -n $kdgat_pipeline_pid ]]; then kill -TERM "$kdgat_pipeline_pid" 2>/dev/null || :; fi
  exit 143
}
trap kdgat_terminate TERM

set +u # activate scripts read unset variables
# shellcheck source=/dev/null
source /work/main/.hpc/envs/cpu-local/bin/activate
set -u

# The preprocess stage writes the cache that training jobs stage from: straight to scratch.
export KD_GAT_CACHE_ROOT=/work/main/.hpc/scratch/cache

mkdir -p "$kdgat_run_dir"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,memory.total \
    --format=csv -l 10 >>"$kdgat_run_dir/gpu_samples.csv" 2>>"$kdgat_run_dir/gpu_samples.err" &
  kdgat_sampler_pid=$!
else
  echo "kdgat: nvidia-smi not found: GPU utilisation sampling skipped"
fi

kdgat_wait_pipeline() { wait "$kdgat_pipeline_pid"; }
kdgat_status=0
printf 'kdgat: running'; printf ' %q' "${kdgat_cmd[@]}"; printf '\n'
"${kdgat_cmd[@]}" &
kdgat_pipeline_pid=$!
kdgat_wait_pipeline || kdgat_status=$?

if ((kdgat_status == 75)); then
  echo "kdgat: not requeueing: requeue is disabled for this job"
fi
exit "$kdgat_status"
