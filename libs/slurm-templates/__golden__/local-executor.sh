#!/bin/bash
# Local executor: the runner runs this script with bash and SLURM_* variables it emulates; no #SBATCH lines.
# Resources requested: 1 node(s) x 1 task(s), 2 cpus/task, 4 GB, 0 GPU(s)/node, 30:00.
# kdgat autoencoder (kdgat-quickstart-autoencoder)
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
hpc_requeue_signal=''
hpc_requeue_status=75
hpc_requeue_ack=requeue_ack.json
hpc_experiment=quickstart
hpc_stage_id=autoencoder
hpc_run_root=/work/main/.hpc/scratch/runs/quickstart
hpc_run_subdir=hcrl_sa/vgae_small_autoencoder
# What this job asked for, for the record the epilog leaves in the run dir (job_record.jsonl).
export HPC_RECORD_REQUEST='cpus=2 memGB=4 gpus=0 timeSeconds=1800 partition=local tasks=1'
export HPC_RECORD_STAGE='stageId=autoencoder stage=autoencoder model=vgae scale=small dataset=hcrl_sa'
# P0: the dataset caches copied to node-local disk (NAME SRC_DIR pairs).
hpc_stage_datasets=(
  hcrl_sa /work/main/.hpc/scratch/cache/hcrl_sa
)
# The kdgat pipeline's stage command (its declaration).
hpc_cmd=(
  python -m kdgat autoencoder --model vgae --scale small --dataset hcrl_sa --run-root '{run_root}'
)
hpc_overrides=(
  -O training.max_epochs 2
)
hpc_override_style=dash-O

# The environment: the profile's CUDA module, then the environment's own modules and activation.
hpc_lmod_init=''
hpc_cuda_module=''
hpc_conda_module=''
hpc_env_backend=venv
hpc_env_target=/work/main/.hpc/envs/cpu-local/bin/activate

# The shell every job shares: the job library, checked by its sha256, then sourced (it runs the job).
hpc_job_library=/work/main/.hpc/scratch/runs/quickstart/scripts/lib/job-c1c7db529766cdc4.sh
hpc_job_library_sha256=c1c7db529766cdc4a1dba816062cd7d61366f121610a5fb762ebab3ecff6efc6
hpc_job_library_fix='it is written with the scripts of the run: render the run again (kdgat-runner train --from-manifest /work/main/.hpc/scratch/runs/quickstart)'
hpc_job_library_found=$({ sha256sum || shasum -a 256; } 2>/dev/null <"$hpc_job_library") || hpc_job_library_found='no readable file'
if [[ ${hpc_job_library_found%% *} != "$hpc_job_library_sha256" ]]; then
  echo "kdgat-hpc: the job library $hpc_job_library is not the one this script was rendered for (sha256 $hpc_job_library_sha256; found: ${hpc_job_library_found%%  -}); to fix: $hpc_job_library_fix" >&2
  exit "$hpc_unavailable_status"
fi
# shellcheck source=/dev/null
source "$hpc_job_library"
