#!/usr/bin/env bash
# `npm run quickstart`: the main job on the embedded default, on this machine, with no account anywhere.
#   1. bootstrap whatever is missing (Node 24, Pulumi, the Python environment, …)
#   2. `pulumi up` on the `local` stack: the environment, the scratch cache layout and the job
#      scripts, under the git-ignored .hpc/ folder. It prints the resource summary and the stack
#      outputs; `npm run quickstart -- --diff` shows every property of every resource instead.
#   3. train on a small synthetic CAN data set with `nx run runner:train --spec examples/quickstart.yaml`
#      and print where the metrics, logs and manifest are;
#   4. print where its TensorBoard logs are (`runner tensorboard <run dir>`) and its stages in the
#      catalogue of all runs (`runner runs`).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
up_output=(--summary)
while (($#)); do
  case $1 in
    --diff) up_output=(); shift ;;
    *) echo "quickstart: unknown argument '$1' (expected: --diff, to show pulumi up's full diff)" >&2; exit 2 ;;
  esac
done
t0=$SECONDS
bash scripts/bootstrap.sh
# The synthetic CAN data set the quickstart trains on (raw files; the preprocess stage caches graphs).
export KD_GAT_DATA_ROOT=${KD_GAT_DATA_ROOT:-$REPO/.hpc/data/raw}
if [[ ! -d $KD_GAT_DATA_ROOT/synth ]]; then
  echo
  echo "== writing a synthetic CAN data set to $KD_GAT_DATA_ROOT/synth"
  python/.venv/bin/python -m kdgat synth --out "$KD_GAT_DATA_ROOT/synth" --messages 120000
fi
echo
echo "== provisioning the local stack (pulumi up --stack local)"
scripts/with-toolchain.sh nx run infra:up --stack local "${up_output[@]}" --outputStyle=stream
echo
echo "== training (nx run runner:train --spec examples/quickstart.yaml)"
train_log=$(mktemp)
trap 'rm -f "$train_log"' EXIT
scripts/with-toolchain.sh nx run runner:train --spec examples/quickstart.yaml --stack local --wait --outputStyle=stream |
  tee "$train_log"
run_dir=$(grep -o 'run dir: .*' "$train_log" | head -n 1 | sed 's/^run dir: //')
if [[ -z $run_dir ]]; then
  echo "quickstart: the training printed no run dir" >&2
  exit 1
fi
echo
echo "== its TensorBoard logs (nx run runner:tensorboard <run dir>; --serve starts TensorBoard here)"
scripts/with-toolchain.sh nx run runner:tensorboard "$run_dir" --outputStyle=stream
echo
echo "== its stages in the catalogue of all runs (nx run runner:runs --where run_id=<run>)"
scripts/with-toolchain.sh nx run runner:runs --stack local --where "run_id=$(basename "$run_dir")" --outputStyle=stream
echo
echo "quickstart finished in $((SECONDS - t0)) s"
