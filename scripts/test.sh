#!/usr/bin/env bash
# `npm test`: bootstraps, then runs every test of both languages — unit tests, lint and type checks
# of all Nx projects (Python included), the toolchain's own end-to-end checks, and the end-to-end
# suites against the real Pulumi engine and the repository's one-node SLURM.
# Every suite runs even when an earlier one fails; the exit status says whether all passed.
# The Nx cache is skipped: a test run runs the tests.
#
# The suites run in two lanes at once, each lane one suite at a time:
#   - lane 1: the suites of this machine's own SLURM and Pulumi (lint, unit tests, the local e2e
#     suites), which share the one-node SLURM that this script starts;
#   - lane 2: the suites that build a site over SSH of their own (scripts/site/site.sh: namespaces,
#     cgroups and daemons named after their own directory), which share nothing with lane 1.
# Lane 2's suites keep about one of this machine's two cores busy: the rest is waiting on SLURM
# (jobs, polls, limits). Side by side the lanes take less than one after the other (the README's
# "Tests" section has the figures).
# TEST_LANES=1 runs everything in one lane, in the same order.
# A suite's output is printed whole when it ends (never interleaved); while suites run, a line every
# minute says which and for how long.
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
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/kdgat-test.XXXXXX")
heartbeat=
finish() {
  if [[ -n $heartbeat ]]; then kill "$heartbeat" 2>/dev/null; fi
  if ((started_slurm)); then bash scripts/slurm-local.sh down; fi
  rm -rf "$LOGS"
}
trap finish EXIT

# suite N NAME CMD…: runs one suite (N orders the summary), keeping its output in $LOGS/N.log and
# its result in $LOGS/N.result ("PASS|FAIL name (Ns)"); prints the output whole when it ends.
suite() {
  local n=$1 name=$2 t0=$SECONDS verdict
  shift 2
  printf '%s\n' "$name" >"$LOGS/$n.running"
  printf '=== start: %s\n' "$name"
  if scripts/with-toolchain.sh "$@" >"$LOGS/$n.log" 2>&1; then verdict=PASS; else verdict=FAIL; fi
  printf '%s  %s (%ds)\n' "$verdict" "$name" $((SECONDS - t0)) >"$LOGS/$n.result"
  rm -f "$LOGS/$n.running"
  {
    flock 9
    printf '\n=== %s\n' "$name"
    cat "$LOGS/$n.log"
    printf '=== %s\n' "$(cat "$LOGS/$n.result")"
  } 9>"$LOGS/print.lock"
}
# The lines of a suite's log that name a failing test or its error (vitest, node --test, pytest),
# without colour codes; at most 40.
failure_lines() {
  sed -e 's/\x1b\[[0-9;]*m//g' "$1" |
    grep -E '(✖|×|FAIL |FAILED|Error:|AssertionError|timed out|not ok )' |
    grep -vE '^\s*(ℹ|#) ' | head -n 40
}

# Every suite of the two lanes, counted: a lane that died before all its suites ran fails the run.
SUITES=10
lane1() {
  suite 01 "toolchain (Pulumi engine, workspace graph, lint boundaries)" node --test 'scripts/toolchain/test/*.test.ts'
  suite 02 "lint + typecheck (all projects)" nx run-many -t lint typecheck --skip-nx-cache --outputStyle=stream
  suite 03 "unit tests (all projects, python included)" nx run-many -t test --skip-nx-cache --outputStyle=stream
  suite 04 "slurm-templates e2e (requeue handshake on the local SLURM)" nx run slurm-templates:test-e2e --skip-nx-cache --outputStyle=stream
  suite 05 "runner e2e (local SLURM, local scheduler)" nx run runner:test-e2e --skip-nx-cache --outputStyle=stream
  suite 06 "infra e2e (Pulumi CLI, local + ssh stacks)" nx run infra:test-e2e --skip-nx-cache --outputStyle=stream
  suite 09 "quickstart + tune e2e (pulumi up local, real pipeline: local scheduler and local SLURM)" node --test --test-concurrency=1 'scripts/e2e/*.test.ts'
}
lane2() {
  suite 07 "site over SSH e2e (laptop -> sshd login node -> 3-node SLURM and a 1-node second cluster, own namespaces: infra:up, train, requeue, cancel)" nx run runner:test-site --skip-nx-cache --outputStyle=stream
  suite 08 "cluster shape e2e (3-node box and a second cluster over SSH: slurmdbd/sacct, cgroup limits, 2-node DDP, sharded preprocess, throttle, placement by expected start, NODE_FAIL / OUT_OF_MEMORY / TIMEOUT survived)" nx run runner:test-cluster --skip-nx-cache --outputStyle=stream
  suite 10 "examples e2e (every examples/*.yaml, real pipeline on synthetic data, on a site over SSH)" node --test 'scripts/e2e-examples/*.test.ts'
}

t_all=$SECONDS
(
  while sleep 60; do
    running=$(for f in "$LOGS"/*.running; do [[ -e $f ]] && cat "$f"; done | cut -c1-60 | paste -sd';' -)
    [[ -n $running ]] && printf '... %ds: running %s\n' $((SECONDS - t_all)) "$running"
  done
) &
heartbeat=$!
if [[ ${TEST_LANES:-2} == 1 ]]; then
  lane1
  lane2
else
  lane1 &
  lane1_pid=$!
  lane2
  wait "$lane1_pid"
fi

printf '\n=== summary (%ds)\n' $((SECONDS - t_all))
passed=0 failed=0
for result in "$LOGS"/*.result; do
  cat "$result"
  if grep -q '^PASS' "$result"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failure_lines "${result%.result}.log" | sed 's/^/      /'
  fi
done
printf 'suites: %d passed, %d failed\n' "$passed" "$failed"
((failed == 0 && passed == SUITES))
