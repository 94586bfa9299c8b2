# shellcheck shell=bash
# A notebook kernel in a site environment: the wrapper that Jupyter (OnDemand's Jupyter app
# included) runs as `bash <kernel dir>/kernel.sh <connection file>`. The kernel.sh of
# renderKernelFiles carries, in order: its values, the environment's activation snippet (the stack
# output environment.activate: values, environment.sh, `kdgat_activate`), this file, and the call
# `kdgat_start_kernel "$1"`.
#
# Inputs:
#   kdgat_kernel_name      the kernel's name (for messages)
#   kdgat_kernel_modules   Lmod modules loaded after the activation; () = none
#   kdgat_lmod_init        the profile's Lmod init (environment.sh's kdgat_module_command reads it)
#   kdgat_unavailable_status  exit status when a module or the code is missing (69, EX_UNAVAILABLE)
#   kdgat_kernel_code      a directory holding src/kdgat: src/ goes first on PYTHONPATH, as in a job
#                          over SSH; '' = the environment's own kdgat, as a job on a local site
#   KDGAT_ENV_LOCK_HASH    (exported) the lock hash of the environment the kernel runs in
declare -g kdgat_kernel_name kdgat_kernel_code kdgat_unavailable_status
declare -ga kdgat_kernel_modules

# kdgat_start_kernel CONNECTION_FILE: the kernel's modules and code, then ipykernel in place of this
# shell (Jupyter's signals reach the kernel itself). A missing module or code directory ends it with
# status 69 and a line in the Jupyter server's log.
# shellcheck disable=SC2317 # called by the kernel's script only
kdgat_start_kernel() {
  local python
  # The environment's Python, found before the modules: a module that puts a python of its own
  # first on PATH does not replace it.
  if ! python=$(command -v python); then
    echo "kdgat kernel $kdgat_kernel_name: the activated environment has no python on $(hostname)" >&2
    exit "$kdgat_unavailable_status"
  fi
  if ((${#kdgat_kernel_modules[@]} > 0)); then
    kdgat_module_command
    set +u # Lmod reads unset variables
    if ! module load "${kdgat_kernel_modules[@]}"; then
      printf 'kdgat kernel %s: module load %s failed on %s (the module system says why above)\n' \
        "$kdgat_kernel_name" "${kdgat_kernel_modules[*]}" "$(hostname)" >&2
      exit "$kdgat_unavailable_status"
    fi
    set -u
  fi
  if [[ -n $kdgat_kernel_code ]]; then
    if [[ ! -d $kdgat_kernel_code/src ]]; then
      printf "kdgat kernel %s: %s/src is missing on %s: ship the code with a run, or declare the kernel's code\n" \
        "$kdgat_kernel_name" "$kdgat_kernel_code" "$(hostname)" >&2
      exit "$kdgat_unavailable_status"
    fi
    export PYTHONPATH="$kdgat_kernel_code/src${PYTHONPATH:+:$PYTHONPATH}"
  fi
  exec "$python" -m ipykernel_launcher -f "$1"
}
