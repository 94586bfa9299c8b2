#!/usr/bin/env bash
# The Nx targets of infra: preview (always --diff), up, refresh, destroy on one stack.
#   bin/pulumi-stack.sh <preview|up|refresh|destroy> [--stack NAME] [--summary] [more pulumi flags…]
# `up --summary` (the quickstart's) prints only the stack outputs and the resource counts (and the
# diagnostics when it fails); Pulumi's whole output, resource by resource, goes to
# .hpc/logs/pulumi-up-<stack>.log, whose path it prints. Without it, `up` shows the full --diff,
# every property of every resource.
# The stack defaults to `local` and is created on first use. Pulumi comes from the repository
# toolchain (scripts/with-toolchain.sh: offline plugin settings).
# The stack's configuration is `<workspace>/<stacks>/<stack>.yaml` (Pulumi's --config-file) and its
# state the workspace's own file backend (unless PULUMI_BACKEND_URL names another): the workspace is
# --workspace DIR, else $KDGAT_HPC_WORKSPACE, else the first kdgat-hpc.yaml at or above the current
# directory, else this checkout's own (infra/bin/workspace.ts). Relative paths in the stack file
# resolve against the workspace root.
# HPC_INFRA_DIR instead names a Pulumi project directory holding Pulumi.<stack>.yaml itself (infra's
# own e2e tests, which drive the CLI on a temporary project).
set -euo pipefail
self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
infra=${HPC_INFRA_DIR:-$(cd "$(dirname "$self")/.." && pwd)}
repo=$(cd "$(dirname "$self")/../.." && pwd)

if [[ -z ${HPC_PULUMI_STACK_TOOLCHAIN:-} && -f $repo/scripts/with-toolchain.sh ]]; then
  # Whether the user chose a backend, before the toolchain names its default.
  export HPC_PULUMI_STACK_TOOLCHAIN=1 HPC_USER_BACKEND=${PULUMI_BACKEND_URL:-}
  exec bash "$repo/scripts/with-toolchain.sh" bash "$self" "$@"
fi

# A checkout that is not bootstrapped: one line saying what to run (not a Pulumi stack trace).
if ! command -v pulumi >/dev/null || ! command -v pulumi-language-nodejs >/dev/null; then
  echo "pulumi-stack.sh: this checkout is not bootstrapped (Pulumi is missing): run \`npm run bootstrap\`" >&2
  exit 127
fi
if [[ ! -d $repo/node_modules/@pulumi/pulumi ]]; then
  echo "pulumi-stack.sh: this checkout is not bootstrapped (node_modules is missing): run \`npm run bootstrap\`" >&2
  exit 127
fi

verb=${1:?usage: pulumi-stack.sh <preview|up|refresh|destroy> [--stack NAME] [pulumi flags]}
shift
stack=local
summary=0
workspace=''
extra=()
while (($#)); do
  case $1 in
    --stack) stack=${2:?--stack needs a name}; shift 2 ;;
    --stack=*) stack=${1#--stack=}; shift ;;
    --workspace) workspace=${2:?--workspace needs a folder}; shift 2 ;;
    --workspace=*) workspace=${1#--workspace=}; shift ;;
    --summary | --summary=true) summary=1; shift ;;
    --summary=false) summary=0; shift ;;
    *) extra+=("$1"); shift ;;
  esac
done

# The directory of a file backend (PULUMI_BACKEND_URL=file://DIR), or nothing for other backends.
file_backend_root() {
  local url=${PULUMI_BACKEND_URL:-}
  [[ $url == file://* ]] || return 1
  url=${url#file://}
  printf '%s\n' "${url%%\?*}"
}

# A file backend keeps each blob's attributes in a sidecar `<blob>.attrs`, written by truncating it
# and then writing it (gocloud.dev fileblob `setAttrs`), before the blob itself is renamed into
# place. An update killed between the two leaves the sidecar empty, and every later command fails
# with "failed to load checkpoint: EOF" while the checkpoint itself is whole. A missing sidecar is
# valid (default attributes), so an empty one is removed.
remove_empty_attrs() {
  local root file
  root=$(file_backend_root) || return 0
  [[ -d $root/.pulumi ]] || return 0
  while IFS= read -r -d '' file; do
    echo "pulumi-stack.sh: ${file#"$root"/} is empty (an update was killed while writing it); removing it" >&2
    rm -f -- "$file"
  done < <(find "$root/.pulumi" -type f -name '*.attrs' -size 0 -print0)
}

# An update killed mid-way (SIGKILL, a lost terminal) leaves its lock in a file backend, and
# every later command refuses to run. When the lock was taken on this host by a process that
# no longer exists, nobody holds it: clear it (`pulumi cancel`) so the next `up` can converge.
clear_stale_lock() {
  local root
  root=$(file_backend_root) || return 0
  local project
  project=$(sed -n 's/^name:[[:space:]]*//p' Pulumi.yaml | head -n 1)
  local dir=$root/.pulumi/locks/organization/$project/$stack
  [[ -d $dir ]] || return 0
  local lock pid host found=0
  for lock in "$dir"/*.json; do
    [[ -e $lock ]] || continue
    pid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' "$lock")
    host=$(sed -n 's/.*"hostname":"\([^"]*\)".*/\1/p' "$lock")
    if [[ $host != "$(hostname)" || -z $pid ]] || kill -0 "$pid" 2>/dev/null; then
      return 0 # held elsewhere, or still running: leave it
    fi
    found=1
  done
  if ((found)); then
    echo "pulumi-stack.sh: the last update of stack $stack was interrupted (its process $pid is gone); clearing its lock" >&2
    pulumi cancel --yes --stack "$stack" --non-interactive >/dev/null
  fi
}

config_file=()
stack_file=$infra/Pulumi.$stack.yaml
if [[ -z ${HPC_INFRA_DIR:-} ]]; then
  if [[ ! $stack =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]]; then
    echo "pulumi-stack.sh: --stack ${stack@Q}: expected a stack name (letters, digits, . _ -)" >&2
    exit 2
  fi
  found=$(node "$repo/infra/bin/workspace.ts" "$stack" "$PWD" "$workspace") || exit 2
  mapfile -t ws <<<"$found"
  stack_file=${ws[1]} infra=${ws[3]}
  config_file=(--config-file "$stack_file")
  # Relative paths in the stack file resolve against the workspace (infra/index.ts reads it).
  export KDGAT_HPC_WORKSPACE=${ws[0]}
  [[ -n ${HPC_USER_BACKEND:-} ]] || export PULUMI_BACKEND_URL=file://${ws[2]}
fi

cd "$infra"
# Only the embedded `local` stack has a default passphrase; another stack's secrets need the user's
# own (or another secrets provider), asked for before anything is created or changed.
# shellcheck source=/dev/null # (checked on its own: shellcheck scripts/lib/pulumi-secrets.sh)
source "$repo/scripts/lib/pulumi-secrets.sh"
kdgat_pulumi_secrets pulumi-stack.sh "$stack" "$infra" "file://$repo/.pulumi-state" "infra:$verb (pulumi $verb)" "$stack_file" || exit 1
remove_empty_attrs
pulumi stack select --create "$stack" --non-interactive >/dev/null
clear_stale_lock
# Without a terminal there is nobody to answer the confirmation prompt.
yes=()
[[ -t 0 ]] || yes=(--yes --non-interactive)
case $verb in
  preview) pulumi preview --diff --stack "$stack" "${config_file[@]}" "${extra[@]}" ;;
  up)
    if ((summary)); then
      log=${KDGAT_HPC_WORKSPACE:-$repo}/.hpc/logs/pulumi-up-$stack.log
      mkdir -p "$(dirname "$log")"
      echo "pulumi up --stack $stack: the summary below; resource by resource: $log"
      status=0
      pulumi up --suppress-progress --stack "$stack" "${config_file[@]}" "${yes[@]}" "${extra[@]}" >"$log" 2>&1 || status=$?
      # Pulumi's closing sections of the update (after its preview's): what failed, the stack
      # outputs, the resource counts, the duration. A preview that failed has only its own.
      from='^Updating '
      grep -q "$from" "$log" || from=.
      awk -v from="$from" '$0 ~ from { update = 1 } update && /^(Diagnostics|Outputs|Resources):/ { shown = 1 } shown' "$log"
      ((status == 0)) || echo "pulumi-stack.sh: pulumi up failed (status $status); its full output: $log" >&2
      exit "$status"
    fi
    pulumi up --diff --stack "$stack" "${config_file[@]}" "${yes[@]}" "${extra[@]}"
    ;;
  refresh) pulumi refresh --diff --stack "$stack" "${config_file[@]}" "${yes[@]}" "${extra[@]}" ;;
  destroy) pulumi destroy --stack "$stack" "${config_file[@]}" "${yes[@]}" "${extra[@]}" ;;
  *)
    echo "pulumi-stack.sh: unknown verb '$verb' (expected preview, up, refresh or destroy)" >&2
    exit 2
    ;;
esac
