#!/usr/bin/env bash
# Resolves every GPU layer of the site environments against PyPI and writes its lock:
#   bash scripts/lock-gpu.sh            python/gpu/<layer>.in -> python/gpu/<layer>.lock
#   bash scripts/lock-gpu.sh --check    resolves into a temporary directory; exits 1 if a lock differs
# Each layer is resolved for the site's machines (linux x86_64, manylinux_2_28, CPython 3.12) together
# with the pipeline's pinned runtime dependencies (`uv export` of python/uv.lock), so a lock is the
# whole pip part of a site environment and a layer that cannot live beside the pipeline's pins fails
# here, with uv's explanation. See docs/decisions/0006-one-lock-and-gpu-layers.md.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The pinned uv (scripts/lib/versions.sh): another uv may resolve or format differently.
UV_VERSION=$(sed -n 's/^UV_VERSION=\([^ ]*\).*/\1/p' "$REPO/scripts/lib/versions.sh")

PYTHON_VERSION=3.12
PYTHON_PLATFORM=x86_64-manylinux_2_28
GPU_DIR=$REPO/python/gpu

check=false
case ${1:-} in
  '') ;;
  --check) check=true ;;
  *)
    echo "usage: bash scripts/lock-gpu.sh [--check]" >&2
    exit 2
    ;;
esac

if ! command -v uv >/dev/null || [[ $(uv --version) != "uv $UV_VERSION"* ]]; then
  echo "lock-gpu: needs uv $UV_VERSION on PATH (found: $(uv --version 2>/dev/null || echo none)): run \`npm run bootstrap\`" >&2
  exit 1
fi
# Never fetch an interpreter: resolving for another Python needs none.
export UV_PYTHON_DOWNLOADS=never

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The pipeline's pins, exactly as uv.lock has them (markers kept: uv evaluates them for the target).
uv export --frozen --no-hashes --no-dev --no-emit-project --no-header --no-annotate \
  --directory "$REPO/python" >"$work/pipeline.txt"

shopt -s nullglob
inputs=("$GPU_DIR"/*.in)
if ((${#inputs[@]} == 0)); then
  echo "lock-gpu: no layers (python/gpu/*.in)" >&2
  exit 1
fi

stale=()
for input in "${inputs[@]}"; do
  layer=$(basename "$input" .in)
  # Relative names only, so the lock's "# via" lines are the same on every machine.
  cp "$input" "$work/$layer.in"
  if ! (cd "$work" && uv pip compile --quiet \
    --python-version "$PYTHON_VERSION" --python-platform "$PYTHON_PLATFORM" \
    --custom-compile-command "bash scripts/lock-gpu.sh" \
    "$layer.in" pipeline.txt -o "$layer.lock"); then
    echo "lock-gpu: layer $layer does not resolve beside the pipeline's pins (uv's reason above)" >&2
    exit 1
  fi
  if $check; then
    if ! cmp -s "$work/$layer.lock" "$GPU_DIR/$layer.lock"; then
      stale+=("$layer")
      # diff exits 1 when the files differ (known here: they do); 2 is a real failure.
      diff -u "$GPU_DIR/$layer.lock" "$work/$layer.lock" >&2 || (($? == 1))
    fi
  else
    cp "$work/$layer.lock" "$GPU_DIR/$layer.lock"
    echo "lock-gpu: python/gpu/$layer.lock ($(grep -c '^[a-z0-9]' "$work/$layer.lock") packages)"
  fi
done

if ((${#stale[@]} > 0)); then
  echo "lock-gpu: out of date: ${stale[*]}: run \`bash scripts/lock-gpu.sh\` and commit python/gpu/" >&2
  exit 1
fi
