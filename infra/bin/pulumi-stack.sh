#!/usr/bin/env bash
# The Nx targets of infra: preview (always --diff), up, refresh, destroy on one stack.
#   bin/pulumi-stack.sh <preview|up|refresh|destroy> [--stack NAME] [--summary] [more pulumi flags…]
# `up --summary` (the quickstart's) prints only the stack outputs and the resource counts (and the
# diagnostics when it fails); Pulumi's whole output, resource by resource, goes to
# .hpc/logs/pulumi-up-<stack>.log, whose path it prints. Without it, `up` shows the full --diff,
# every property of every resource.
# The stack defaults to `local` and is created on first use. Pulumi comes from the repository
# toolchain (scripts/with-toolchain.sh: local file backend, offline plugin settings).
# HPC_INFRA_DIR points at another project directory (the e2e tests use a temporary one).
set -euo pipefail
self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
infra=${HPC_INFRA_DIR:-$(cd "$(dirname "$self")/.." && pwd)}
repo=$(cd "$(dirname "$self")/../.." && pwd)

if [[ -z ${HPC_PULUMI_STACK_TOOLCHAIN:-} && -f $repo/scripts/with-toolchain.sh ]]; then
  export HPC_PULUMI_STACK_TOOLCHAIN=1
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
extra=()
while (($#)); do
  case $1 in
    --stack) stack=${2:?--stack needs a name}; shift 2 ;;
    --stack=*) stack=${1#--stack=}; shift ;;
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

cd "$infra"
# Only the embedded `local` stack has a default passphrase; another stack's secrets need the user's
# own (or another secrets provider), asked for before anything is created or changed.
# shellcheck source=/dev/null # (checked on its own: shellcheck scripts/lib/pulumi-secrets.sh)
source "$repo/scripts/lib/pulumi-secrets.sh"
kdgat_pulumi_secrets pulumi-stack.sh "$stack" "$infra" "file://$repo/.pulumi-state" "infra:$verb (pulumi $verb)" || exit 1
remove_empty_attrs
pulumi stack select --create "$stack" --non-interactive >/dev/null
clear_stale_lock
# Without a terminal there is nobody to answer the confirmation prompt.
yes=()
[[ -t 0 ]] || yes=(--yes --non-interactive)
case $verb in
  preview) pulumi preview --diff --stack "$stack" "${extra[@]}" ;;
  up)
    if ((summary)); then
      log=$repo/.hpc/logs/pulumi-up-$stack.log
      mkdir -p "$(dirname "$log")"
      echo "pulumi up --stack $stack: the summary below; resource by resource: $log"
      status=0
      pulumi up --suppress-progress --stack "$stack" "${yes[@]}" "${extra[@]}" >"$log" 2>&1 || status=$?
      # Pulumi's closing sections of the update (after its preview's): what failed, the stack
      # outputs, the resource counts, the duration. A preview that failed has only its own.
      from='^Updating '
      grep -q "$from" "$log" || from=.
      awk -v from="$from" '$0 ~ from { update = 1 } update && /^(Diagnostics|Outputs|Resources):/ { shown = 1 } shown' "$log"
      ((status == 0)) || echo "pulumi-stack.sh: pulumi up failed (status $status); its full output: $log" >&2
      exit "$status"
    fi
    pulumi up --diff --stack "$stack" "${yes[@]}" "${extra[@]}"
    ;;
  refresh) pulumi refresh --diff --stack "$stack" "${yes[@]}" "${extra[@]}" ;;
  destroy) pulumi destroy --stack "$stack" "${yes[@]}" "${extra[@]}" ;;
  *)
    echo "pulumi-stack.sh: unknown verb '$verb' (expected preview, up, refresh or destroy)" >&2
    exit 2
    ;;
esac
