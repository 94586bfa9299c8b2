#!/bin/bash
# Usage: sbatch train_gpu.sh STAGE --model M --scale S --dataset D [--run-root DIR] [-O key value]...
# sbatch options on the command line override the defaults above.
# kdgat pipeline command run by hand, with staging (P0), GPU sampling and the epilog (P5).
# Rendered by @kdgat/slurm-templates from the experiment spec and the cluster profile: re-render, do not edit.
# This job's values; the shell every job shares is the job library loaded at the end, by its sha256
# (libs/slurm-templates/src/shell/: job-start.sh, environment.sh, job-run.sh).
# shellcheck disable=SC2034 # the values are read by the job library, sourced at the end
hpc_profile=local
hpc_stage_data_script=/work/main/.hpc/scratch/scripts/stage_data.sh
hpc_epilog_script=/work/main/.hpc/scratch/scripts/job_epilog.sh
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
# The arguments name the stage (train_gpu.sh) and the run; these are the defaults and the usage.
hpc_usage='usage: sbatch train_gpu.sh STAGE --model M --scale S --dataset D [--run-root DIR] [-O key value]...'
hpc_hand_stage=''
hpc_hand_program=(
  python -m kdgat
)
hpc_runs_dir=/work/main/.hpc/scratch/runs
hpc_run_name_parts=(
  model scale stage
)
hpc_run_name_separator=_
hpc_cache_root=/work/main/.hpc/scratch/cache
hpc_stage_datasets=()

# The environment: the profile's CUDA module, then the environment's own modules and activation.
hpc_lmod_init=''
hpc_cuda_module=''
hpc_conda_module=''
hpc_env_backend=venv
hpc_env_target=/work/main/.hpc/envs/cpu-local/bin/activate

# The shell every job shares: the job library, checked by its sha256, then sourced (it runs the job).
hpc_job_library=/work/main/.hpc/scratch/scripts/lib/job-c1c7db529766cdc4.sh
hpc_job_library_sha256=c1c7db529766cdc4a1dba816062cd7d61366f121610a5fb762ebab3ecff6efc6
hpc_job_library_fix='install it with the other site scripts: kdgat-runner infra up --stack local (in the kdgat-hpc checkout: npx nx run infra:up --stack local)'
hpc_job_library_found=$({ sha256sum || shasum -a 256; } 2>/dev/null <"$hpc_job_library") || hpc_job_library_found='no readable file'
if [[ ${hpc_job_library_found%% *} != "$hpc_job_library_sha256" ]]; then
  echo "kdgat-hpc: the job library $hpc_job_library is not the one this script was rendered for (sha256 $hpc_job_library_sha256; found: ${hpc_job_library_found%%  -}); to fix: $hpc_job_library_fix" >&2
  exit "$hpc_unavailable_status"
fi
# shellcheck source=/dev/null
source "$hpc_job_library"
