#!/bin/bash
#SBATCH --job-name=kdgat-gat-lr-x-batch-sweep-curriculum
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
#SBATCH --array=0-11%4
# kdgat curriculum (kdgat-gat-lr-x-batch-sweep-curriculum), array of 12 sweep points
# Rendered by @kdgat/slurm-templates from the experiment spec and the cluster profile: re-render, do not edit.
# This job's values; the shell every job shares is the job library loaded at the end, by its sha256
# (libs/slurm-templates/src/shell/: job-start.sh, environment.sh, job-run.sh).
# shellcheck disable=SC2034 # the values are read by the job library, sourced at the end
hpc_profile=osc-pitzer
hpc_stage_data_script=/fs/scratch/PAS1266/kd-gat/scripts/stage_data.sh
hpc_epilog_script=/fs/scratch/PAS1266/kd-gat/scripts/job_epilog.sh
hpc_unavailable_status=69
hpc_gpu_sample_seconds=10
hpc_cache_root_variable=KD_GAT_CACHE_ROOT
export HPC_HELPER_MODULE=kdgat
hpc_requeue_signal=USR1
export KD_GAT_REQUEUE_SIGNAL=USR1
hpc_max_restarts=3
hpc_requeue_contract=handshake
hpc_requeue_status=75
hpc_requeue_ack=requeue_ack.json
hpc_experiment='gat lr x batch sweep'
hpc_stage_id=curriculum
hpc_run_root=/fs/scratch/PAS1266/kd-gat/runs/gat-sweep
hpc_run_subdir=hcrl_sa/gat_large_curriculum
# Array task i reads its overrides from this table (read as data, never evaluated).
hpc_array_table=/fs/scratch/PAS1266/kd-gat/runs/gat-sweep/curriculum.array.tsv
hpc_array_size=12
hpc_first_point=0
# What this job asked for, for the record the epilog leaves in the run dir (job_record.jsonl).
export HPC_RECORD_REQUEST='cpus=10 memGB=85 gpus=1 timeSeconds=14400 partition=gpu tasks=1'
export HPC_RECORD_STAGE='stageId=curriculum stage=curriculum model=gat scale=large dataset=hcrl_sa'
# P0: the dataset caches copied to node-local disk (NAME SRC_DIR pairs).
hpc_stage_datasets=(
  hcrl_sa /fs/scratch/PAS1266/kd-gat/cache/hcrl_sa
)
# The kdgat pipeline's stage command (its declaration).
hpc_cmd=(
  python -m kdgat curriculum --model gat --scale large --dataset hcrl_sa --run-root '{run_root}'
)
hpc_overrides=(
  -O training.max_epochs 50
)
hpc_override_style=dash-O

# The environment: the profile's CUDA module, then the environment's own modules and activation.
hpc_lmod_init=/etc/profile.d/lmod.sh
hpc_cuda_module=cuda/12.4.1
hpc_conda_module=miniconda3/24.1.2-py310
hpc_env_backend=conda
hpc_env_target=/fs/ess/PAS1266/envs/gnn-rapids

# The shell every job shares: the job library, checked by its sha256, then sourced (it runs the job).
hpc_job_library=/fs/scratch/PAS1266/kd-gat/scripts/lib/job-c1c7db529766cdc4.sh
hpc_job_library_sha256=c1c7db529766cdc4a1dba816062cd7d61366f121610a5fb762ebab3ecff6efc6
hpc_job_library_fix='install it with the other site scripts: kdgat-runner infra up --stack osc-pitzer (in the kdgat-hpc checkout: npx nx run infra:up --stack osc-pitzer)'
hpc_job_library_found=$({ sha256sum || shasum -a 256; } 2>/dev/null <"$hpc_job_library") || hpc_job_library_found='no readable file'
if [[ ${hpc_job_library_found%% *} != "$hpc_job_library_sha256" ]]; then
  echo "kdgat-hpc: the job library $hpc_job_library is not the one this script was rendered for (sha256 $hpc_job_library_sha256; found: ${hpc_job_library_found%%  -}); to fix: $hpc_job_library_fix" >&2
  exit "$hpc_unavailable_status"
fi
# shellcheck source=/dev/null
source "$hpc_job_library"
