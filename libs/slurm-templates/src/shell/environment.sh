# shellcheck shell=bash
# The environment: `module` from the profile's Lmod init, the profile's modules, and the
# activation of the conda or venv environment. Three texts carry this file after their values and
# then call one of its functions:
#   the job library (JOB_LIBRARY)                 hpc_environment: the CUDA module, then the activation
#   the stack output environment.activate         hpc_activate: a snippet a user can source
#     (activationSnippet)
#   commands on a login node (renderModuleShell)  hpc_load_login_modules, then `exec "$@"`
#
# Inputs (each text assigns those its function reads):
#   hpc_profile             the cluster profile's name (for messages)
#   hpc_unavailable_status  exit status when the node lacks what is needed (69, EX_UNAVAILABLE)
#   hpc_lmod_init           the profile's Lmod init, sourced when the shell has no `module`
#   hpc_cuda_module         (job) the profile's CUDA module; '' = none
#   hpc_env_name            (optional) the environment's name (for messages)
#   hpc_env_modules         (optional) the environment's own site modules, loaded in order before
#                           its activation (e.g. the module of the venv's Python); unset = none
#   hpc_conda_module        (conda) the module that provides conda when it is not on PATH; '' = none
#   hpc_env_backend         conda or venv
#   hpc_env_target          conda: the environment's prefix or name; venv: its bin/activate
#   hpc_login_modules       (login node) the modules to load: the conda frontend's, then CUDA's,
#                           then the environment's own
#   hpc_code                (job, optional) the pipeline's code where the job runs (the run's snapshot)
#   hpc_code_paths          (with hpc_code) its directories that come first on PYTHONPATH (src)
declare -g hpc_profile hpc_unavailable_status hpc_lmod_init hpc_cuda_module hpc_conda_module
declare -g hpc_env_backend hpc_env_target hpc_code hpc_env_name
declare -ga hpc_login_modules hpc_code_paths hpc_env_modules

# hpc_module_command: Lmod defines `module` as a shell function that a batch shell (or a login
# that did not read the site's init) may not have inherited.
hpc_module_command() {
  if ! type module >/dev/null 2>&1 && [[ -r $hpc_lmod_init ]]; then
    # shellcheck source=/dev/null
    source "$hpc_lmod_init"
  fi
  if ! type module >/dev/null 2>&1; then
    echo "kdgat-hpc: cluster profile $hpc_profile loads modules, but there is no module command on $(hostname)" >&2
    exit "$hpc_unavailable_status"
  fi
}

# hpc_load_env_modules: the environment's own site modules (hpc_env_modules), one `module load`
# each in their order, so that a failure names the module; none: nothing (not even `module`).
hpc_load_env_modules() {
  local m
  # Declared but never assigned (a text without modules) is unset to `set -u`: test without expanding it.
  [[ ${hpc_env_modules[*]+set} == set ]] || return 0
  hpc_module_command
  for m in "${hpc_env_modules[@]}"; do
    set +u # Lmod reads unset variables
    if ! module load "$m"; then
      set -u
      printf 'kdgat-hpc: environment %s: module load %s failed on %s (the module system says why above)\n' \
        "${hpc_env_name:-$hpc_env_target}" "$m" "$(hostname)" >&2
      exit "$hpc_unavailable_status"
    fi
    set -u
  done
}

# hpc_activate: activates the environment so that it works in a non-interactive shell: conda's
# hook is evaluated because `conda activate` is a shell function that .bashrc would normally define.
# The environment's own modules come first (after the conda module, as in its build): its
# interpreter needs them.
hpc_activate() {
  case $hpc_env_backend in
    venv)
      hpc_load_env_modules
      set +u # activate scripts read unset variables
      # shellcheck source=/dev/null
      source "$hpc_env_target"
      set -u
      ;;
    conda)
      set +u # conda activation scripts read unset variables
      if [[ -n $hpc_conda_module ]] && ! command -v conda >/dev/null 2>&1; then
        hpc_module_command
        module load "$hpc_conda_module"
      fi
      hpc_load_env_modules
      set +u
      if ! command -v conda >/dev/null 2>&1; then
        printf 'kdgat-hpc: conda is not on PATH, so environment %s cannot be activated\n' "$hpc_env_target" >&2
        exit "$hpc_unavailable_status"
      fi
      eval "$(conda shell.bash hook)"
      conda activate "$hpc_env_target"
      set -u
      ;;
    *)
      echo "kdgat-hpc: environment backend '$hpc_env_backend' is neither conda nor venv" >&2
      exit 64
      ;;
  esac
}

# hpc_environment: what a job script runs before staging: the profile's CUDA module, then the
# activation.
# shellcheck disable=SC2317 # called by job scripts only (the other texts call their own function)
hpc_environment() {
  if [[ -n $hpc_cuda_module ]]; then
    hpc_module_command
    set +u # Lmod reads unset variables
    module load "$hpc_cuda_module"
    set -u
  fi
  hpc_activate
  if [[ -n ${hpc_code:-} ]]; then
    local i dir
    for ((i = ${#hpc_code_paths[@]} - 1; i >= 0; i--)); do
      dir=$hpc_code/${hpc_code_paths[i]}
      if [[ ! -d $dir ]]; then
        echo "kdgat-hpc: the pipeline's code $dir is missing on $(hostname)" >&2
        exit "$hpc_unavailable_status"
      fi
      export PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}"
    done
    echo "kdgat-hpc: code from $hpc_code"
  fi
}

# hpc_load_login_modules: the profile's modules for a command on a login node, in one
# `module load`; a missing one ends the shell after the module system's own message.
# shellcheck disable=SC2317 # called by the login-node script only
hpc_load_login_modules() {
  hpc_module_command
  if ! module load "${hpc_login_modules[@]}"; then
    printf 'kdgat-hpc: cluster profile %s: module load %s failed on %s (the module system says why above)\n' \
      "$hpc_profile" "${hpc_login_modules[*]}" "$(hostname)" >&2
    exit "$hpc_unavailable_status"
  fi
}
