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

# Everything the suites make in a temp folder goes under one of this run's own (every tool they
# run honours TMPDIR), removed when the run ends, however it ends; the boxes they start (sites,
# SLURM clusters of their own under /var/tmp) are stopped then too if a suite could not.
RUN_TMP=$(mktemp -d /tmp/kdgat-test-run.XXXXXX) || exit 1
export TMPDIR=$RUN_TMP
boxes_before=$(find /var/tmp -mindepth 1 -maxdepth 1 \( -name 'kdgat-ssh-site-*' -o -name 'kdgat-slurm-test-*' \) -print | sort)

# SLURM for the suites that submit real jobs; stopped at the end only if this run started it.
started_slurm=0
cleanup() {
  local box
  trap - EXIT
  trap '' INT TERM
  # A signal: the suites first — each lane is a process group of its own (job control, below), which
  # holds every command it started; then what they made.
  if [[ ${1:-} == signal ]]; then
    local lane
    for lane in "${LANE_PIDS[@]}"; do kill -TERM -- "-$lane" 2>/dev/null; done
    wait
  fi
  while IFS= read -r box; do
    [[ -n $box ]] || continue
    echo "test: stopping $box (left by a suite that did not finish)" >&2
    case $box in
      */kdgat-ssh-site-*) bash scripts/site/site.sh down "$box" >/dev/null 2>&1 ;;
      */kdgat-slurm-test-*) HPC_SLURM_DIR=$box SLURM_CONF=$box/slurm.conf bash scripts/slurm-local.sh down >/dev/null 2>&1 ;;
    esac
    rm -rf -- "$box"
  done < <(comm -13 <(printf '%s\n' "$boxes_before") <(find /var/tmp -mindepth 1 -maxdepth 1 \( -name 'kdgat-ssh-site-*' -o -name 'kdgat-slurm-test-*' \) -print | sort))
  if ((started_slurm)); then bash scripts/slurm-local.sh down; fi
  # The SSH masters the suites' commands shared (infra's providers: ControlPersist, sockets under the
  # run's TMPDIR) would linger up to two minutes after the last command: closed now.
  local sock
  for sock in "$RUN_TMP"/kdgat-hpc-ssh-*/*; do
    [[ -S $sock ]] || continue
    ssh -o ControlPath="$sock" -O exit kdgat-test-master >/dev/null 2>&1 || echo "test: the SSH master at $sock did not exit" >&2
  done
  rm -rf -- "$RUN_TMP"
}
LANE_PIDS=()
# Job control: every lane started below runs in a process group of its own, so that a signal to this
# script stops exactly the suites (never the npm or CI that started it).
set -m
trap cleanup EXIT
trap 'echo "test: stopped by a signal; removing what the suites made" >&2; cleanup signal; exit 130' INT TERM
if ! bash scripts/slurm-local.sh status >/dev/null 2>&1; then
  bash scripts/slurm-local.sh up || { echo "test: could not start the local SLURM" >&2; exit 1; }
  started_slurm=1
fi

# Each suite's output is also kept, so that the summary can name the failing tests of a failed
# suite: on CI only the tail of the output may be visible.
LOGS=$(mktemp -d "$RUN_TMP/logs.XXXXXX")
passed=() failed=() failures=()
# The lines of a suite's log that name a failing test or its error (vitest, node --test, pytest),
# without colour codes; at most 40.
failure_lines() {
  sed -e 's/\x1b\[[0-9;]*m//g' "$1" |
    grep -E '(✖|×|FAIL |FAILED|Error:|AssertionError|timed out|not ok )' |
    grep -vE '^\s*(ℹ|#) ' | head -n 40
}

# The suites run in two lanes side by side: each lane's suites one after another, the lanes at
# once. Alone, most suites leave much of the two cores idle, waiting on SLURM and ssh (2026-11-29,
# the 2-core VM: the two e2e suites on the local SLURM about 30 % busy, the cluster suite 57 %).
# A suite's output is shown whole when it ends (two never interleave); a line says when it starts.
# `lanes 'NAME|CMD…' … -- 'NAME|CMD…' …`: the first lane, then the second; CMD is split on spaces.
lanes() {
  local -a lane1=() lane2=()
  local arg second=0
  for arg in "$@"; do
    if [[ $arg == -- ]]; then
      second=1
    elif ((second)); then
      lane2+=("$arg")
    else
      lane1+=("$arg")
    fi
  done
  local base=$((${#passed[@]} + ${#failed[@]}))
  run_lane "$base" "${lane1[@]}" &
  local p1=$!
  run_lane "$((base + ${#lane1[@]}))" "${lane2[@]}" &
  local p2=$!
  LANE_PIDS=("$p1" "$p2")
  wait "$p1" "$p2"
  LANE_PIDS=()
  local i n=$((${#lane1[@]} + ${#lane2[@]}))
  for ((i = base; i < base + n; i++)); do
    if [[ $(<"$LOGS/lane-$i.status") == 0 ]]; then
      passed+=("$(<"$LOGS/lane-$i.name")")
    else
      failed+=("$(<"$LOGS/lane-$i.name")")
      failures+=("$(failure_lines "$LOGS/lane-$i.log")")
    fi
  done
}
# One lane: its suites in order (IDX: the first one's number), each kept in $LOGS/lane-IDX.*.
run_lane() {
  local idx=$1 entry name t0 rc
  local -a cmd
  shift
  for entry in "$@"; do
    name=${entry%%|*}
    read -r -a cmd <<<"${entry#*|}"
    printf '\n=== %s: started; its output follows when it ends\n' "$name"
    t0=$SECONDS
    scripts/with-toolchain.sh "${cmd[@]}" >"$LOGS/lane-$idx.log" 2>&1
    rc=$?
    printf '%s (%ss)' "$name" "$((SECONDS - t0))" >"$LOGS/lane-$idx.name"
    echo "$rc" >"$LOGS/lane-$idx.status"
    {
      printf '\n=== %s (%s after %ss)\n' "$name" "$( ((rc == 0)) && echo passed || echo FAILED)" "$((SECONDS - t0))"
      cat "$LOGS/lane-$idx.log"
    } | flock "$LOGS" cat
    idx=$((idx + 1))
  done
}

# HPC_TEST_SUITES: 'NAME|CMD' lines to run instead of every suite, in one lane (the toolchain test of
# this script's own teardown runs one that waits to be signalled).
if [[ -n ${HPC_TEST_SUITES:-} ]]; then
  mapfile -t only <<<"$HPC_TEST_SUITES"
  lanes "${only[@]}" --
else
  # The toolchain's checks alone, first: they run the bootstrap itself on this checkout.
  lanes "toolchain (Pulumi engine, workspace graph, lint boundaries)|node --test scripts/toolchain/test/*.test.ts" --
  # Lint, types and unit tests beside the suites that use the local SLURM (one after another: they
  # share its node).
  lanes \
    "lint + typecheck (all projects)|nx run-many -t lint typecheck --skip-nx-cache --outputStyle=stream" \
    "unit tests (all projects, python included)|nx run-many -t test --skip-nx-cache --outputStyle=stream" \
    -- \
    "slurm-templates e2e (requeue handshake on the local SLURM)|nx run slurm-templates:test-e2e --skip-nx-cache --outputStyle=stream" \
    "runner e2e (local SLURM, local scheduler)|nx run runner:test-e2e --skip-nx-cache --outputStyle=stream" \
    "quickstart + tune e2e (pulumi up local, real pipeline: local scheduler and local SLURM)|node --test --test-concurrency=1 scripts/e2e/*.test.ts"
  # The sites over SSH (each its own namespaces, login node and SLURM), and infra's stacks.
  lanes \
    "site over SSH e2e (laptop -> sshd login node -> 3-node SLURM and a 1-node second cluster, own namespaces: infra:up, train, requeue, cancel)|nx run runner:test-site --skip-nx-cache --outputStyle=stream" \
    "examples e2e (every examples/*.yaml, real pipeline on synthetic data, on a site over SSH)|node --test scripts/e2e-examples/examples.test.ts" \
    -- \
    "cluster shape e2e (3-node box and a second cluster over SSH: slurmdbd/sacct, cgroup limits, 2-node DDP, sharded preprocess, throttle, placement by expected start, NODE_FAIL / OUT_OF_MEMORY / TIMEOUT survived)|nx run runner:test-cluster --skip-nx-cache --outputStyle=stream" \
    "infra e2e (Pulumi CLI, local + ssh stacks)|nx run infra:test-e2e --skip-nx-cache --outputStyle=stream"
fi

printf '\n=== summary\n'
for s in "${passed[@]}"; do printf 'PASS  %s\n' "$s"; done
for i in "${!failed[@]}"; do
  printf 'FAIL  %s\n' "${failed[$i]}"
  if [[ -n ${failures[$i]} ]]; then printf '%s\n' "${failures[$i]}" | sed 's/^/      /'; fi
done
rm -rf "$LOGS"
printf 'suites: %d passed, %d failed\n' "${#passed[@]}" "${#failed[@]}"
((${#failed[@]} == 0))
