#!/bin/bash
#SBATCH --job-name=kdgat-preprocess
#SBATCH --account=PAS1266
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=20
#SBATCH --mem=181G
#SBATCH --gres=gpu:v100:1
#SBATCH --time=4:00:00
#SBATCH --output=/fs/scratch/PAS1266/kd-gat/logs/%x-%j.out
#SBATCH --error=/fs/scratch/PAS1266/kd-gat/logs/%x-%j.err
#SBATCH --open-mode=append
#SBATCH --no-requeue
# Usage: sbatch preprocess_gpu.sh --model M --scale S --dataset D [--run-root DIR] [-O key value]...
# sbatch options on the command line override the defaults above.
# kdgat preprocess stage run by hand: writes the dataset cache to scratch for later staging.
# Rendered by @kdgat/slurm-templates from the experiment spec and the cluster profile: re-render, do not edit.
# This job's values; the shell every job shares is the job library loaded at the end, by its sha256
# (libs/slurm-templates/src/shell/: job-start.sh, environment.sh, job-run.sh).
# shellcheck disable=SC2034 # the values are read by the job library, sourced at the end
hpc_profile=osc-pitzer
hpc_epilog_script=/fs/scratch/PAS1266/kd-gat/scripts/job_epilog.sh
hpc_unavailable_status=69
hpc_gpu_sample_seconds=10
hpc_cache_root_variable=KD_GAT_CACHE_ROOT
export HPC_HELPER_MODULE=kdgat
hpc_requeue_signal=''
hpc_requeue_status=75
hpc_requeue_ack=requeue_ack.json
# The arguments name the stage (train_gpu.sh) and the run; these are the defaults and the usage.
hpc_usage='usage: sbatch preprocess_gpu.sh --model M --scale S --dataset D [--run-root DIR] [-O key value]...'
hpc_hand_stage=preprocess
hpc_hand_program=(
  python -m kdgat
)
hpc_runs_dir=/fs/scratch/PAS1266/kd-gat/runs
hpc_run_name_parts=(
  model scale stage
)
hpc_run_name_separator=_
hpc_cache_root=/fs/scratch/PAS1266/kd-gat/cache
hpc_stage_datasets=()

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
