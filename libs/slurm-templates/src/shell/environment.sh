# shellcheck shell=bash
# The environment: `module` from the profile's Lmod init, the profile's modules, and the
# activation of the conda or venv environment. Three texts carry this file after their values and
# then call one of its functions:
#   every job script (jobBodyLines)               kdgat_environment: the CUDA module, then the activation
#   the stack output environment.activate         kdgat_activate: a snippet a user can source
#     (activationSnippet)
#   commands on a login node (renderModuleShell)  kdgat_load_login_modules, then `exec "$@"`
#
# Inputs (each text assigns those its function reads):
#   kdgat_profile             the cluster profile's name (for messages)
#   kdgat_unavailable_status  exit status when the node lacks what is needed (69, EX_UNAVAILABLE)
#   kdgat_lmod_init           the profile's Lmod init, sourced when the shell has no `module`
#   kdgat_cuda_module         (job) the profile's CUDA module; '' = none
#   kdgat_conda_module        (conda) the module that provides conda when it is not on PATH; '' = none
#   kdgat_env_backend         conda or venv
#   kdgat_env_target          conda: the environment's prefix or name; venv: its bin/activate
#   kdgat_login_modules       (login node) the modules to load: the conda frontend's, then CUDA's
#   kdgat_code                (job, optional) the pipeline's code where the job runs (the run's snapshot)
#   kdgat_code_paths          (with kdgat_code) its directories that come first on PYTHONPATH (src)
declare -g kdgat_profile kdgat_unavailable_status kdgat_lmod_init kdgat_cuda_module kdgat_conda_module
declare -g kdgat_env_backend kdgat_env_target kdgat_code
declare -ga kdgat_login_modules kdgat_code_paths

# kdgat_module_command: Lmod defines `module` as a shell function that a batch shell (or a login
# that did not read the site's init) may not have inherited.
kdgat_module_command() {
  if ! type module >/dev/null 2>&1 && [[ -r $kdgat_lmod_init ]]; then
    # shellcheck source=/dev/null
    source "$kdgat_lmod_init"
  fi
  if ! type module >/dev/null 2>&1; then
    echo "kdgat: cluster profile $kdgat_profile loads modules, but there is no module command on $(hostname)" >&2
    exit "$kdgat_unavailable_status"
  fi
}

# kdgat_activate: activates the environment so that it works in a non-interactive shell: conda's
# hook is evaluated because `conda activate` is a shell function that .bashrc would normally define.
kdgat_activate() {
  case $kdgat_env_backend in
    venv)
      set +u # activate scripts read unset variables
      # shellcheck source=/dev/null
      source "$kdgat_env_target"
      set -u
      ;;
    conda)
      set +u # conda activation scripts read unset variables
      if [[ -n $kdgat_conda_module ]] && ! command -v conda >/dev/null 2>&1; then
        kdgat_module_command
        module load "$kdgat_conda_module"
      fi
      if ! command -v conda >/dev/null 2>&1; then
        printf 'kdgat: conda is not on PATH, so environment %s cannot be activated\n' "$kdgat_env_target" >&2
        exit "$kdgat_unavailable_status"
      fi
      eval "$(conda shell.bash hook)"
      conda activate "$kdgat_env_target"
      set -u
      ;;
    *)
      echo "kdgat: environment backend '$kdgat_env_backend' is neither conda nor venv" >&2
      exit 64
      ;;
  esac
}

# kdgat_environment: what a job script runs before staging: the profile's CUDA module, then the
# activation.
# shellcheck disable=SC2317 # called by job scripts only (the other texts call their own function)
kdgat_environment() {
  if [[ -n $kdgat_cuda_module ]]; then
    kdgat_module_command
    set +u # Lmod reads unset variables
    module load "$kdgat_cuda_module"
    set -u
  fi
  kdgat_activate
  if [[ -n ${kdgat_code:-} ]]; then
    local i dir
    for ((i = ${#kdgat_code_paths[@]} - 1; i >= 0; i--)); do
      dir=$kdgat_code/${kdgat_code_paths[i]}
      if [[ ! -d $dir ]]; then
        echo "kdgat: the pipeline's code $dir is missing on $(hostname)" >&2
        exit "$kdgat_unavailable_status"
      fi
      export PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}"
    done
    echo "kdgat: code from $kdgat_code"
  fi
}

# kdgat_load_login_modules: the profile's modules for a command on a login node, in one
# `module load`; a missing one ends the shell after the module system's own message.
# shellcheck disable=SC2317 # called by the login-node script only
kdgat_load_login_modules() {
  kdgat_module_command
  if ! module load "${kdgat_login_modules[@]}"; then
    printf 'kdgat: cluster profile %s: module load %s failed on %s (the module system says why above)\n' \
      "$kdgat_profile" "${kdgat_login_modules[*]}" "$(hostname)" >&2
    exit "$kdgat_unavailable_status"
  fi
}
