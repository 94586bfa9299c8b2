#!/bin/bash
# job_epilog.sh (P5): what a finished job used, printed at the end of its log.
# Rendered by @kdgat/slurm-templates for cluster profile local: re-render, do not edit.
#
# Usage: job_epilog.sh RUN_DIR [EXIT_STATUS] [START_EPOCH] [STATE]
# Reads RUN_DIR/metrics.json (peak_gpu_mem_mb, recorded by the training process itself: a fresh
# process would always report 0) and RUN_DIR/gpu_samples.csv (the job's nvidia-smi sampler).
# Needs only bash, awk and sort. Reports what it can and always exits 0.
set -uo pipefail

kdgat_cluster=local
kdgat_post_job_hint=''
kdgat_idle_below=5

run_dir=${1:?usage: job_epilog.sh RUN_DIR [EXIT_STATUS] [START_EPOCH] [STATE]}
status=${2:-}
start=${3:-}
state=${4:-}
job_id=${SLURM_JOB_ID:-unknown}
job_label=$job_id
if [[ -n ${SLURM_ARRAY_JOB_ID:-} && -n ${SLURM_ARRAY_TASK_ID:-} ]]; then
  job_label="$job_id (array task ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID})"
fi
if [[ -z $state ]]; then
  if [[ $status == 0 ]]; then state=COMPLETED; elif [[ -n $status ]]; then state=FAILED; else state=UNKNOWN; fi
fi
elapsed=unknown
if [[ $start =~ ^[0-9]+$ ]]; then
  secs=$(($(date +%s) - start))
  elapsed=$(printf '%02d:%02d:%02d' $((secs / 3600)) $((secs % 3600 / 60)) $((secs % 60)))
fi

echo '==================== kdgat job epilog ===================='
printf 'job:              %s on %s\n' "$job_label" "$kdgat_cluster"
printf 'state:            %s%s\n' "$state" "${status:+ (exit status $status)}"
printf 'elapsed:          %s\n' "$elapsed"
printf 'run dir:          %s\n' "$run_dir"

metrics=$run_dir/metrics.json
if [[ -f $metrics ]]; then
  peak=$(grep -o '"peak_gpu_mem_mb"[[:space:]]*:[[:space:]]*[^,}[:space:]]*' "$metrics" | head -n 1 | sed 's/.*:[[:space:]]*//')
  case $peak in
    '') printf 'peak GPU memory:  not in %s\n' "$metrics" ;;
    null) echo 'peak GPU memory:  none (the run did not use a GPU)' ;;
    *) printf 'peak GPU memory:  %s MB (torch.cuda.max_memory_allocated, from metrics.json)\n' "$peak" ;;
  esac
else
  printf 'peak GPU memory:  unknown: %s was not written (the pipeline did not finish)\n' "$metrics"
fi

samples=$run_dir/gpu_samples.csv
summary=''
if [[ -f $samples ]]; then
  # nvidia-smi --format=csv rows: "63 %, 20 %, 1234 MiB, 16384 MiB"; header lines (one per restart) are skipped.
  summary=$(awk -F', *' '$1 ~ /^[0-9]+ *%?$/ { u = $1; m = $3; sub(/ *%/, "", u); sub(/ *MiB/, "", m); print u, m }' "$samples" |
    sort -n -k1,1 |
    awk -v idle_below="$kdgat_idle_below" '
      { u[NR] = $1; sum += $1; if ($1 < idle_below) idle++; if ($2 + 0 > mem) mem = $2 + 0 }
      function rank(q,   i) { i = int(q * NR); if (i < q * NR) i++; if (i < 1) i = 1; return u[i] }
      END {
        if (NR == 0) exit
        printf "%d samples: mean %.1f%%, p50 %d%%, p95 %d%%, idle (< %d%%) %.1f%% of samples; peak memory.used %d MiB",
          NR, sum / NR, rank(0.5), rank(0.95), idle_below, 100 * idle / NR, mem
      }')
fi
if [[ -n $summary ]]; then
  printf 'GPU utilisation:  %s\n' "$summary"
else
  echo 'GPU utilisation:  no samples (no nvidia-smi on the node, or the job ended before the first sample)'
fi

if command -v nvidia-smi >/dev/null 2>&1; then
  echo '--- nvidia-smi at job end ---'
  nvidia-smi || echo "nvidia-smi failed with status $?"
fi

if [[ -n $kdgat_post_job_hint ]]; then
  hint=${kdgat_post_job_hint//\{cluster\}/"$kdgat_cluster"}
  hint=${hint//\{jobid\}/"$job_id"}
  printf 'next:             %s\n' "$hint"
fi
echo '=========================================================='
exit 0
