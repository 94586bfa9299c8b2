#!/usr/bin/env bash
# Runs a command with the project's pinned toolchain first on PATH:
#   scripts/with-toolchain.sh nx run infra:preview --stack local
# Node 24 (tool cache, unless the system's is >= 22), the repo's node_modules/.bin (nx, vitest, tsc),
# uv, the Pulumi CLI + language host + dynamic-provider plugin, and Pulumi settings for offline use
# with the repository's local file backend.
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
if [[ -z ${PULUMI_BACKEND_URL:-} ]]; then
  mkdir -p "$REPO/.pulumi-state"
  export PULUMI_BACKEND_URL="file://$REPO/.pulumi-state"
  # The local stack's secrets are encrypted with a passphrase; this default is for the embedded
  # `local` stack only. Real sites set PULUMI_CONFIG_PASSPHRASE(_FILE) or use another secrets provider.
  if [[ -z ${PULUMI_CONFIG_PASSPHRASE:-} && -z ${PULUMI_CONFIG_PASSPHRASE_FILE:-} ]]; then
    export PULUMI_CONFIG_PASSPHRASE=kdgat-local
  fi
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
