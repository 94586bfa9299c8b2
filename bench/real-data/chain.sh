#!/usr/bin/env bash
# bench/real-data/chain.sh: wall time of the whole chain (preprocess -> autoencoder -> curriculum ->
# evaluation) at scale large on the real recordings, each once (exact duplicates dropped), as a user
# runs it (the CLI, defaults plus any -O overrides given as arguments). Run it under the shared lock,
# from the repo root:
#   flock /tmp/kdgat-heavy.lock bash bench/real-data/chain.sh [-O key value ...]
# Prints each stage's wall seconds (and CPU seconds: on a shared machine the wall time is inflated
# by whatever else runs), the training total, and the evaluation's scores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# The recordings (public: the HCRL "Survival Analysis" CAN set, as repackaged by can-train-and-test,
# plus can-train-and-test set_01 and set_03) are not in the repository: HPC_REAL_DATA names their folder; the
# development machines keep them in ../shared/data/can-real, tried when it is unset.
data=${HPC_REAL_DATA:-}
if [[ -z "$data" ]]; then
  for d in "$repo/../shared/data/can-real" "$repo/../../shared/data/can-real"; do
    [[ -d "$d" ]] && data=$(cd "$d" && pwd) && break
  done
fi
[[ -n "$data" && -d "$data" ]] || { echo "no recordings found: set HPC_REAL_DATA=DIR (../shared/data/can-real)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/data/canreal"
# Each recording once: the collection ships some twice (the two attack-free-kia and the two
# attack-free-sonata files), and a copy's windows would land on both sides of the random split.
# distinct.py keeps the rule run.py drops them by (same IDs, payloads and timestamps).
(cd "$repo/python" && uv run --frozen python "$here/distinct.py" "$data") > "$work/recordings" \
  || { echo "could not list the distinct recordings of $data" >&2; exit 1; }
while IFS= read -r f; do ln -s "$f" "$work/data/canreal/"; done < "$work/recordings"
echo "recordings: $(wc -l < "$work/recordings") distinct of $(find "$data" -maxdepth 1 -name '*.parquet' | wc -l) in $data"
export KD_GAT_DATA_ROOT="$work/data" KD_GAT_CACHE_ROOT="$work/cache" KD_GAT_RUN_ROOT="$work/runs"
cd "$repo/python"
total=0
stage() {
  local name=$1; shift
  local t0=$SECONDS
  echo "[$(date +%H:%M:%S)] $name ..." >&2
  /usr/bin/time -f "%e s wall, %U s user, %S s sys" -a -o "$work/times" uv run --frozen python -m kdgat "$@" --dataset canreal --scale large "${overrides[@]}" > "$work/$name.log" 2>&1 \
    || { tail -20 "$work/$name.log" >&2; echo "stage $name failed" >&2; exit 1; }
  local dt=$((SECONDS - t0))
  echo "$name: ${dt}s ($(tail -1 "$work/times"))"
  [[ "$name" == evaluation ]] || total=$((total + dt))
}
overrides=("$@")
stage preprocess preprocess --model gat
stage autoencoder autoencoder --model vgae
stage curriculum curriculum --model gat
stage evaluation evaluation --model gat
echo "training chain (preprocess + autoencoder + curriculum): ${total}s"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("evaluation scores:", json.dumps(d["scores"]), "scoring:", json.dumps(d.get("scoring")))' \
  "$work/runs/canreal/gat_large_evaluation/metrics.json"
python3 -c 'import json,sys; [print(s, "epochs", json.load(open(f"{sys.argv[1]}/{s}/metrics.json")).get("epochs")) for s in ("vgae_large_autoencoder","gat_large_curriculum")]' "$work/runs/canreal"
