#!/usr/bin/env bash
# The Nx targets of infra: preview (always --diff), up, refresh, destroy on one stack.
#   bin/pulumi-stack.sh <preview|up|refresh|destroy> [--stack NAME] [more pulumi flags…]
# The stack defaults to `local` and is created on first use. Pulumi comes from the repository
# toolchain (scripts/with-toolchain.sh: local file backend, offline plugin settings).
set -euo pipefail
infra=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
repo=$(cd "$infra/.." && pwd)

verb=${1:?usage: pulumi-stack.sh <preview|up|refresh|destroy> [--stack NAME] [pulumi flags]}
shift
stack=local
extra=()
while (($#)); do
  case $1 in
    --stack) stack=${2:?--stack needs a name}; shift 2 ;;
    --stack=*) stack=${1#--stack=}; shift ;;
    *) extra+=("$1"); shift ;;
  esac
done

run() {
  if [[ -x $repo/scripts/with-toolchain.sh || -f $repo/scripts/with-toolchain.sh ]]; then
    bash "$repo/scripts/with-toolchain.sh" "$@"
  else
    "$@"
  fi
}

cd "$infra"
run pulumi stack select --create "$stack" >/dev/null
# Without a terminal there is nobody to answer the confirmation prompt.
yes=()
[[ -t 0 ]] || yes=(--yes)
case $verb in
  preview) run pulumi preview --diff --stack "$stack" "${extra[@]}" ;;
  up) run pulumi up --diff --stack "$stack" "${yes[@]}" "${extra[@]}" ;;
  refresh) run pulumi refresh --diff --stack "$stack" "${yes[@]}" "${extra[@]}" ;;
  destroy) run pulumi destroy --stack "$stack" "${yes[@]}" "${extra[@]}" ;;
  *) echo "pulumi-stack.sh: unknown verb '$verb' (expected preview, up, refresh or destroy)" >&2; exit 2 ;;
esac
