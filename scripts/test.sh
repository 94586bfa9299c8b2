#!/usr/bin/env bash
# `npm test`: bootstraps, then runs every test of both languages — unit tests, lint and type checks
# of all Nx projects (Python included), the toolchain's own end-to-end checks, and the end-to-end
# suites against the real Pulumi engine and the repository's one-node SLURM.
# Every suite runs even when an earlier one fails; the exit status says whether all passed.
# The Nx cache is skipped: a test run runs the tests.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1

bash scripts/bootstrap.sh || { echo "test: bootstrap failed" >&2; exit 1; }

# SLURM for the suites that submit real jobs; stopped at the end only if this run started it.
started_slurm=0
if ! bash scripts/slurm-local.sh status >/dev/null 2>&1; then
  bash scripts/slurm-local.sh up || { echo "test: could not start the local SLURM" >&2; exit 1; }
  started_slurm=1
fi
stop_slurm() { if ((started_slurm)); then bash scripts/slurm-local.sh down; fi; }
trap stop_slurm EXIT

# Each suite's output is also kept, so that the summary can name the failing tests of a failed
# suite: on CI only the tail of the output may be visible.
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/kdgat-test.XXXXXX")
passed=() failed=() failures=()
suite() {
  local name=$1 t0=$SECONDS log
  shift
  log="$LOGS/${#passed[@]}-${#failed[@]}.log"
  printf '\n=== %s\n' "$name"
  if scripts/with-toolchain.sh "$@" 2>&1 | tee "$log"; then
    passed+=("$name ($((SECONDS - t0))s)")
  else
    failed+=("$name ($((SECONDS - t0))s)")
    failures+=("$(failure_lines "$log")")
  fi
}
# The lines of a suite's log that name a failing test or its error (vitest, node --test, pytest),
# without colour codes; at most 40.
failure_lines() {
  sed -e 's/\x1b\[[0-9;]*m//g' "$1" |
    grep -E '(✖|×|FAIL |FAILED|Error:|AssertionError|timed out|not ok )' |
    grep -vE '^\s*(ℹ|#) ' | head -n 40
}

suite "toolchain (Pulumi engine, workspace graph, lint boundaries)" node --test 'scripts/toolchain/test/*.test.ts'
suite "lint + typecheck (all projects)" nx run-many -t lint typecheck --skip-nx-cache --outputStyle=stream
suite "unit tests (all projects, python included)" nx run-many -t test --skip-nx-cache --outputStyle=stream
suite "slurm-templates e2e (requeue handshake on the local SLURM)" nx run slurm-templates:test-e2e --skip-nx-cache --outputStyle=stream
suite "runner e2e (local SLURM, local scheduler)" nx run runner:test-e2e --skip-nx-cache --outputStyle=stream
suite "infra e2e (Pulumi CLI, local + ssh stacks)" nx run infra:test-e2e --skip-nx-cache --outputStyle=stream
suite "site over SSH e2e (laptop -> sshd login node -> 3-node SLURM and a 1-node second cluster, own namespaces: infra:up, train, requeue, cancel)" nx run runner:test-site --skip-nx-cache --outputStyle=stream
suite "cluster shape e2e (3-node box and a second cluster over SSH: slurmdbd/sacct, cgroup limits, 2-node DDP, sharded preprocess, throttle, placement by expected start, NODE_FAIL / OUT_OF_MEMORY / TIMEOUT survived)" nx run runner:test-cluster --skip-nx-cache --outputStyle=stream
suite "quickstart + tune e2e (pulumi up local, real pipeline: local scheduler and local SLURM)" node --test --test-concurrency=1 'scripts/e2e/*.test.ts'
suite "examples e2e (every examples/*.yaml, real pipeline on synthetic data, on a site over SSH)" node --test 'scripts/e2e-examples/*.test.ts'

printf '\n=== summary\n'
for s in "${passed[@]}"; do printf 'PASS  %s\n' "$s"; done
for i in "${!failed[@]}"; do
  printf 'FAIL  %s\n' "${failed[$i]}"
  if [[ -n ${failures[$i]} ]]; then printf '%s\n' "${failures[$i]}" | sed 's/^/      /'; fi
done
rm -rf "$LOGS"
printf 'suites: %d passed, %d failed\n' "${#passed[@]}" "${#failed[@]}"
((${#failed[@]} == 0))
