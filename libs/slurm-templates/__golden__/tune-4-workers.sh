#!/bin/bash
#SBATCH --job-name=kdgat-vgae-lr-study-autoencoder
#SBATCH --account=PAS1266
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=10
#SBATCH --mem=85G
#SBATCH --gres=gpu:v100:1
#SBATCH --time=4:00:00
#SBATCH --output=/fs/scratch/PAS1266/kd-gat/logs/%x-%A_%a.out
#SBATCH --error=/fs/scratch/PAS1266/kd-gat/logs/%x-%A_%a.err
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@300
#SBATCH --requeue
#SBATCH --array=0-3
# KD-GAT autoencoder study (kdgat-vgae-lr-study-autoencoder), array of 4 tune workers
# Rendered by @kdgat/slurm-templates from the experiment spec and the cluster profile: re-render, do not edit.
set -euo pipefail
if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 404)); then
  echo "kdgat: this job script needs bash >= 4.4 (found $BASH_VERSION)" >&2
  exit 69
fi

kdgat_job_start=$(date +%s)
kdgat_job_id=${SLURM_JOB_ID:-local-$$}
kdgat_profile=osc-pitzer
kdgat_stage_data_script=/fs/scratch/PAS1266/kd-gat/scripts/stage_data.sh
kdgat_epilog_script=/fs/scratch/PAS1266/kd-gat/scripts/job_epilog.sh
kdgat_state=FAILED
kdgat_sampler_pid=''
kdgat_pipeline_pid=''
kdgat_experiment='vgae lr study'
kdgat_run_root=/fs/scratch/PAS1266/kd-gat/runs/vgae-lr-study/outputs

# Tune worker: every task pulls trials from the same study; each keeps its own run root.
kdgat_task=${SLURM_ARRAY_TASK_ID:-0}
if [[ ! $kdgat_task =~ ^[0-9]+$ ]] || ((kdgat_task >= 4)); then
  echo "kdgat: SLURM_ARRAY_TASK_ID='$kdgat_task' is not a worker of this study (0-3)" >&2
  exit 64
fi
kdgat_run_root=$kdgat_run_root/worker_$kdgat_task
kdgat_run_dir=$kdgat_run_root/hcrl_sa/vgae_large_autoencoder
# What this job asked for, for the record the epilog leaves in the run dir (job_record.jsonl).
export KDGAT_RECORD_REQUEST='cpus=10 memGB=85 gpus=1 timeSeconds=14400 partition=gpu'
export KDGAT_RECORD_STAGE='stageId=autoencoder stage=autoencoder model=vgae scale=large dataset=hcrl_sa'
printf 'kdgat: experiment %s, stage %s, job %s on %s (cluster profile %s)\n' "$kdgat_experiment" autoencoder "$kdgat_job_id" "$(hostname)" "$kdgat_profile"

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

export KD_GAT_REQUEUE_SIGNAL=USR1
kdgat_signal_count=0
kdgat_signal_time=''
# shellcheck disable=SC2317 # run by the signal trap (shellcheck 0.9 does not follow traps)
kdgat_forward_signal() {
  kdgat_signal_count=$((kdgat_signal_count + 1))
  kdgat_signal_time=$(date +%s)
  if [[ -n $kdgat_pipeline_pid ]]; then
    echo "kdgat: SIGUSR1: time limit near, asking the pipeline (pid $kdgat_pipeline_pid) to checkpoint"
    kill -s USR1 "$kdgat_pipeline_pid" 2>/dev/null || echo "kdgat: the pipeline had already exited"
  else
    echo "kdgat: SIGUSR1 before the pipeline started: nothing to checkpoint"
  fi
}
trap kdgat_forward_signal USR1

# Lmod defines `module` as a shell function that a batch shell may not have inherited.
if ! type module >/dev/null 2>&1 && [[ -r /etc/profile.d/lmod.sh ]]; then
  # shellcheck source=/dev/null
  source /etc/profile.d/lmod.sh
fi
if ! type module >/dev/null 2>&1; then
  echo "kdgat: cluster profile $kdgat_profile loads modules, but there is no module command on $(hostname)" >&2
  exit 69
fi
set +u # Lmod reads unset variables
module load cuda/12.4.1
set -u

set +u # conda activation scripts read unset variables
if ! command -v conda >/dev/null 2>&1; then
  if ! type module >/dev/null 2>&1 && [[ -r /etc/profile.d/lmod.sh ]]; then
    # shellcheck source=/dev/null
    source /etc/profile.d/lmod.sh
  fi
  if ! type module >/dev/null 2>&1; then
    echo "kdgat: cluster profile $kdgat_profile loads modules, but there is no module command on $(hostname)" >&2
    exit 69
  fi
  module load miniconda3/24.1.2-py310
fi
if ! command -v conda >/dev/null 2>&1; then
  printf 'kdgat: conda is not on PATH, so environment %s cannot be activated\n' /fs/ess/PAS1266/envs/gnn-rapids >&2
  exit 69
fi
eval "$(conda shell.bash hook)"
conda activate /fs/ess/PAS1266/envs/gnn-rapids
set -u

# P0: copy the dataset caches to node-local disk (verified, atomic); exports KD_GAT_CACHE_ROOT.
# shellcheck source=/dev/null
source "$kdgat_stage_data_script"
kdgat_stage_data hcrl_sa /fs/scratch/PAS1266/kd-gat/cache/hcrl_sa

mkdir -p "$kdgat_run_dir"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,memory.total \
    --format=csv -l 10 >>"$kdgat_run_dir/gpu_samples.csv" 2>>"$kdgat_run_dir/gpu_samples.err" &
  kdgat_sampler_pid=$!
else
  echo "kdgat: nvidia-smi not found: GPU utilisation sampling skipped"
fi

kdgat_cmd=(
  python -m kdgat tune --study-dir /fs/scratch/PAS1266/kd-gat/runs/vgae-lr-study/study
  --run-root "$kdgat_run_root"
)

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
kdgat_status=0
# A signal during staging means the time is already short: do not start what cannot checkpoint in time.
if ((kdgat_signal_count > 0)); then
  echo "kdgat: the time limit is near and the pipeline has not started: not starting it"
  kdgat_status=75
else
  printf 'kdgat: running'; printf ' %q' "${kdgat_cmd[@]}"; printf '\n'
  "${kdgat_cmd[@]}" &
  kdgat_pipeline_pid=$!
  kdgat_wait_pipeline || kdgat_status=$?
fi

kdgat_max_restarts=3
kdgat_requeue() {
  local ack="$kdgat_run_dir/requeue_ack.json" restarts=${SLURM_RESTART_COUNT:-0} ack_time
  if [[ -z $kdgat_signal_time ]]; then
    echo "kdgat: not requeueing: the pipeline exited 75 without a requeue signal"
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
    kdgat_state=REQUEUED
  else
    echo "kdgat: scontrol requeue $SLURM_JOB_ID failed; resume by resubmitting" >&2
  fi
}
if ((kdgat_status == 75)); then kdgat_requeue; fi
exit "$kdgat_status"
