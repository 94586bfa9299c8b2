#!/usr/bin/env bash
# Runs a command with the project's pinned toolchain first on PATH:
#   scripts/with-toolchain.sh nx run infra:preview --stack local
# Node 24 (tool cache, unless the system's is >= 22), the repo's node_modules/.bin (nx, vitest, tsc),
# uv, the Pulumi CLI + language host + dynamic-provider plugin, and Pulumi settings for offline use
# with the repository's local file backend (a default passphrase for its `local` stack only).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR
source "$REPO/scripts/lib/versions.sh"

system_node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [[ -x $NODE_HOME/bin/node ]]; then
  PATH=$NODE_HOME/bin:$PATH
elif ((system_node_major < 22)); then
  echo "with-toolchain: this checkout is not bootstrapped (Node $NODE_VERSION is missing): run \`npm run bootstrap\`" >&2
  exit 1
fi
# A pulumi already on PATH wins when it is a compatible 3.x; otherwise the one we built.
if ! command -v pulumi >/dev/null || [[ $(pulumi version 2>/dev/null) != v3.* ]] || ! command -v pulumi-language-nodejs >/dev/null; then
  PATH=$PULUMI_BIN:$PATH
fi
PATH=$REPO/node_modules/.bin:$HPC_TOOLS/uv/$UV_VERSION/bin:$HOME/.local/bin:$PATH
export PATH HPC_REPO=$REPO HPC_TOOLS

export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_HOME=${PULUMI_HOME:-$HPC_TOOLS/pulumi-home}
# Local file backend in the repository (git-ignored) unless the user chose another one.
default_backend="file://$REPO/.pulumi-state"
if [[ -z ${PULUMI_BACKEND_URL:-} ]]; then
  mkdir -p "$REPO/.pulumi-state"
  export PULUMI_BACKEND_URL=$default_backend
fi
# The stack's secrets: a default passphrase for the embedded `local` stack only; a `pulumi` command
# that needs another stack's secrets with no passphrase or secrets provider set is refused in one
# line saying how to set one (scripts/lib/pulumi-secrets.sh; the infra:* targets check in
# infra/bin/pulumi-stack.sh). The stack: --stack/-s, else $PULUMI_STACK, else the selected one.
# shellcheck source-path=SCRIPTDIR
source "$REPO/scripts/lib/pulumi-secrets.sh"
if [[ ${1:-} == pulumi ]] && command -v pulumi >/dev/null; then
  mapfile -t parsed < <(kdgat_pulumi_argv_secrets "${@:2}")
  stack=${parsed[0]:-} cwd=${parsed[1]:-$PWD} what=${parsed[2]:-} verb=${parsed[3]:-}
  [[ -n $stack ]] || stack=${PULUMI_STACK:-}
  case $verb in
    '' | version | about | login | logout | whoami | plugin | help | gen-completion | cancel) ;;
    *) [[ -n $stack ]] || stack=$(pulumi -C "$cwd" stack --show-name 2>/dev/null) || stack='' ;;
  esac
  kdgat_pulumi_secrets with-toolchain "$stack" "$(kdgat_pulumi_project "$cwd")" "$default_backend" "$what" || exit 1
  unset parsed stack cwd what verb
fi
# The repository's one-node SLURM (scripts/slurm-local.sh) when no other cluster is configured.
if [[ -z ${SLURM_CONF:-} && -f /var/tmp/kdgat-slurm/slurm.conf && ! -e /etc/slurm/slurm.conf ]]; then
  export SLURM_CONF=/var/tmp/kdgat-slurm/slurm.conf
fi
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false
# A setup problem is one line saying what to run, not a stack trace from deep inside a tool.
missing=${1:+$1}
if [[ -n $missing ]] && command -v "$missing" >/dev/null; then missing=''; fi
if [[ ${1:-} == pulumi ]] && ! command -v pulumi-language-nodejs >/dev/null; then missing=pulumi-language-nodejs; fi
if [[ -n $missing ]]; then
  echo "with-toolchain: this checkout is not bootstrapped ($missing is missing): run \`npm run bootstrap\`" >&2
  exit 127
fi
exec "$@"
