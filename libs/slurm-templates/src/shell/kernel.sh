# shellcheck shell=bash
# A notebook kernel in a site environment: the wrapper that Jupyter (OnDemand's Jupyter app
# included) runs as `bash <kernel dir>/kernel.sh <connection file>`. The kernel.sh of
# renderKernelFiles carries, in order: its values, the environment's activation snippet (the stack
# output environment.activate: values, environment.sh, `hpc_activate`), this file, and the call
# `hpc_start_kernel "$1"`.
#
# Inputs:
#   hpc_kernel_name      the kernel's name (for messages)
#   hpc_kernel_modules   Lmod modules loaded after the activation; () = none
#   hpc_lmod_init        the profile's Lmod init (environment.sh's hpc_module_command reads it)
#   hpc_unavailable_status  exit status when a module or the code is missing (69, EX_UNAVAILABLE)
#   hpc_kernel_code      a directory holding src/kdgat-hpc: src/ goes first on PYTHONPATH, as in a job
#                          over SSH; '' = the environment's own package, as a job on a local site
#   HPC_ENV_LOCK_HASH    (exported) the lock hash of the environment the kernel runs in
declare -g hpc_kernel_name hpc_kernel_code hpc_unavailable_status
declare -ga hpc_kernel_modules

# hpc_start_kernel CONNECTION_FILE: the kernel's modules and code, then ipykernel in place of this
# shell (Jupyter's signals reach the kernel itself). A missing module or code directory ends it with
# status 69 and a line in the Jupyter server's log.
# shellcheck disable=SC2317 # called by the kernel's script only
hpc_start_kernel() {
  local python
  # The environment's Python, found before the modules: a module that puts a python of its own
  # first on PATH does not replace it.
  if ! python=$(command -v python); then
    echo "kdgat-hpc kernel $hpc_kernel_name: the activated environment has no python on $(hostname)" >&2
    exit "$hpc_unavailable_status"
  fi
  if ((${#hpc_kernel_modules[@]} > 0)); then
    hpc_module_command
    set +u # Lmod reads unset variables
    if ! module load "${hpc_kernel_modules[@]}"; then
      printf 'kdgat-hpc kernel %s: module load %s failed on %s (the module system says why above)\n' \
        "$hpc_kernel_name" "${hpc_kernel_modules[*]}" "$(hostname)" >&2
      exit "$hpc_unavailable_status"
    fi
    set -u
  fi
  if [[ -n $hpc_kernel_code ]]; then
    if [[ ! -d $hpc_kernel_code/src ]]; then
      printf "kdgat-hpc kernel %s: %s/src is missing on %s: ship the code with a run, or declare the kernel's code\n" \
        "$hpc_kernel_name" "$hpc_kernel_code" "$(hostname)" >&2
      exit "$hpc_unavailable_status"
    fi
    export PYTHONPATH="$hpc_kernel_code/src${PYTHONPATH:+:$PYTHONPATH}"
  fi
  exec "$python" -m ipykernel_launcher -f "$1"
}
