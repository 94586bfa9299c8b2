#!/bin/bash
# job_epilog.sh (P5): what a finished job used, printed at the end of its log.
# Rendered by @kdgat/slurm-templates for cluster profile osc-pitzer: re-render, do not edit.
hpc_cluster=pitzer
hpc_post_job_hint='gpu-seff -M {cluster} {jobid}'

# ---- @kdgat/slurm-templates src/shell/epilog.sh ----
# job_epilog.sh (P5): what a finished job used, printed at the end of its log.
# Installed on the cluster as job_epilog.sh by renderEpilog (src/epilog/render-epilog.ts), which puts
# the profile's values (the inputs below) in front of this text.
#
# Usage: job_epilog.sh RUN_DIR [EXIT_STATUS] [START_EPOCH] [STATE]
# Reads RUN_DIR/metrics.json (peak_gpu_mem_mb, recorded by the training process itself: a fresh
# process would always report 0), RUN_DIR/history.csv (the pipeline's per-epoch history) and
# RUN_DIR/gpu_samples.csv (the job's nvidia-smi sampler), and appends one JSON line per attempt to
# RUN_DIR/job_record.jsonl: requested vs used CPUs and memory, GPU memory and utilisation, elapsed vs
# time limit, data-wait, exit state. The job script passes what it asked for and what it used in
# HPC_RECORD_REQUEST / HPC_RECORD_STAGE ("key=value" words), HPC_CHILD_CPU_TICKS and
# HPC_SIGNALLED. Needs only bash, awk and sort; the row of the catalogue of all runs (a stage that
# ended without its pipeline writing one) is `python -m $HPC_HELPER_MODULE catalogue-append`, with the job's
# python when the environment was activated. Reports what it can and always exits 0.
set -uo pipefail

# Inputs (assigned before this text): hpc_cluster (the cluster's name), hpc_post_job_hint (the
# profile's postJobHint, '{cluster}' and '{jobid}' filled in here; '' for none).
declare -g hpc_cluster hpc_post_job_hint
hpc_idle_below=10

# hpc_epilog RUN_DIR [EXIT_STATUS] [START_EPOCH] [STATE]: the report and the job record.
hpc_epilog() {
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

  echo '==================== kdgat-hpc job epilog ===================='
  printf 'job:              %s on %s\n' "$job_label" "$hpc_cluster"
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
  stats=''
  if [[ -f $samples ]]; then
    # nvidia-smi --format=csv rows: "2026/11/23 10:00:00.000, 63 %, 20 %, 1234 MiB, 16384 MiB" (older files
    # lack the timestamp); header lines (one per restart) are skipped.
    stats=$(awk -F', *' '
      { u = "" }
      $1 ~ /^[0-9]+ *%?$/ { u = $1; m = $3 }
      u == "" && $2 ~ /^[0-9]+ *%?$/ { u = $2; m = $4 }
      u != "" { sub(/ *%/, "", u); sub(/ *MiB/, "", m); print u, m }' "$samples" |
      sort -n -k1,1 |
      awk -v idle_below="$hpc_idle_below" '
      { u[NR] = $1; sum += $1; if ($1 < idle_below) idle++; if ($2 + 0 > mem) mem = $2 + 0 }
      function rank(q,   i) { i = int(q * NR); if (i < q * NR) i++; if (i < 1) i = 1; return u[i] }
      END { if (NR > 0) printf "%d %.1f %d %d %.4f %d", NR, sum / NR, rank(0.5), rank(0.95), idle / NR, mem }')
  fi
  gpu_n='' gpu_mean='' gpu_p50='' gpu_p95='' gpu_idle='' gpu_mem=''
  if [[ -n $stats ]]; then
    read -r gpu_n gpu_mean gpu_p50 gpu_p95 gpu_idle gpu_mem <<<"$stats"
    printf 'GPU utilisation:  %d samples: mean %.1f%%, p50 %d%%, p95 %d%%, idle (< %d%%) %.1f%% of samples; peak memory.used %d MiB\n' \
      "$gpu_n" "$gpu_mean" "$gpu_p50" "$gpu_p95" "$hpc_idle_below" "$(awk -v f="$gpu_idle" 'BEGIN { printf "%.1f", 100 * f }')" "$gpu_mem"
  else
    echo 'GPU utilisation:  no samples (no nvidia-smi on the node, or the job ended before the first sample)'
  fi

  if command -v nvidia-smi >/dev/null 2>&1; then
    echo '--- nvidia-smi at job end ---'
    nvidia-smi || echo "nvidia-smi failed with status $?"
  fi

  # --- the machine-readable record of this attempt: one JSON line in RUN_DIR/job_record.jsonl ---
  json_str() { # a JSON string, or null when empty
    local v=$1
    if [[ -z $v ]]; then
      printf 'null'
      return
    fi
    v=${v//\\/\\\\}
    v=${v//\"/\\\"}
    v=${v//$'\t'/\\t}
    v=${v//$'\n'/\\n}
    printf '"%s"' "$v"
  }
  json_num() { # a JSON number, or null
    if [[ $1 =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; then printf '%s' "$1"; else printf 'null'; fi
  }
  metric() { # a top-level number of metrics.json (grep: no Python or jq needed)
    [[ -f $metrics ]] || return 0
    grep -o "\"$1\"[[:space:]]*:[[:space:]]*[^,}[:space:]]*" "$metrics" | head -n 1 | sed 's/.*:[[:space:]]*//'
  }
  declare -A req=() who=()
  for kv in ${HPC_RECORD_REQUEST:-}; do req[${kv%%=*}]=${kv#*=}; done
  for kv in ${HPC_RECORD_STAGE:-}; do who[${kv%%=*}]=${kv#*=}; done
  end=$(date +%s)
  secs=''
  if [[ $start =~ ^[0-9]+$ ]]; then secs=$((end - start)); fi
  cpu_seconds='' mean_cpus=''
  if [[ ${HPC_CHILD_CPU_TICKS:-} =~ ^[0-9]+$ ]]; then
    ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
    cpu_seconds=$(awk -v t="$HPC_CHILD_CPU_TICKS" -v h="$ticks" 'BEGIN { printf "%.2f", t / h }')
    if [[ -n $secs ]] && ((secs > 0)); then
      mean_cpus=$(awk -v c="$cpu_seconds" -v s="$secs" 'BEGIN { printf "%.3f", c / s }')
    fi
  fi
  # Peak memory: the job's cgroup where SLURM gives it one (everything the job ran), else the
  # pipeline's process tree (history.csv rss_tree_mb), else the pipeline process (metrics.json).
  rss='' rss_source=none cg_file=''
  while IFS=: read -r _ controllers cg_path; do
    if [[ $cg_path =~ ^(.*/job_[0-9]+) ]]; then
      if [[ -z $controllers && -r /sys/fs/cgroup${BASH_REMATCH[1]}/memory.peak ]]; then
        cg_file=/sys/fs/cgroup${BASH_REMATCH[1]}/memory.peak
      elif [[ $controllers == *memory* && -r /sys/fs/cgroup/memory${BASH_REMATCH[1]}/memory.max_usage_in_bytes ]]; then
        cg_file=/sys/fs/cgroup/memory${BASH_REMATCH[1]}/memory.max_usage_in_bytes
      fi
    fi
  done </proc/self/cgroup 2>/dev/null
  if [[ -n $cg_file ]]; then
    rss=$(awk '{ printf "%.1f", $1 / 1048576 }' "$cg_file" 2>/dev/null) && rss_source=cgroup
  fi
  history=$run_dir/history.csv
  if [[ -z $rss && -f $history ]]; then
    rss=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "rss_tree_mb") c = i; next }
    c && $c != "" && $c + 0 > m { m = $c + 0 } END { if (m > 0) printf "%.1f", m }' "$history")
    [[ -n $rss ]] && rss_source=pipeline
  fi
  if [[ -z $rss ]]; then
    rss=$(metric peak_cpu_rss_mb)
    [[ -n $rss && $rss != null ]] && rss_source=pipeline
  fi
  signalled=false
  if [[ ${HPC_SIGNALLED:-} == 1 || $state == REQUEUED ]]; then signalled=true; fi
  limit_hit=$signalled
  if [[ $state == TERMINATED && ${req[timeSeconds]:-} =~ ^[0-9]+$ && -n $secs ]] && ((secs + 90 >= req[timeSeconds])); then
    limit_hit=true
  fi
  gpu_json=null
  if [[ -n $gpu_n ]]; then
    gpu_json="{\"samples\":$gpu_n,\"meanUtil\":$gpu_mean,\"idleShare\":$gpu_idle,\"peakMemUsedMiB\":$gpu_mem}"
  fi
  record="{\"schema\":\"kdgat-hpc.job-record/1\",\"jobId\":$(json_str "$job_id"),\"arrayJobId\":$(json_str "${SLURM_ARRAY_JOB_ID:-}"),\"arrayTaskId\":$(json_str "${SLURM_ARRAY_TASK_ID:-}")"
  record+=",\"restart\":${SLURM_RESTART_COUNT:-0},\"host\":$(json_str "$(hostname)")"
  for k in stageId stage model scale dataset; do record+=",\"$k\":$(json_str "${who[$k]:-}")"; done
  record+=",\"state\":$(json_str "$state"),\"exitStatus\":$(json_num "$status"),\"start\":$(json_num "$start"),\"end\":$end,\"elapsedSeconds\":$(json_num "$secs")"
  record+=",\"requested\":{\"cpus\":$(json_num "${req[cpus]:-}"),\"memGB\":$(json_num "${req[memGB]:-}"),\"gpus\":$(json_num "${req[gpus]:-}"),\"timeSeconds\":$(json_num "${req[timeSeconds]:-}"),\"partition\":$(json_str "${req[partition]:-}"),\"tasks\":$(json_num "${req[tasks]:-}")}"
  record+=",\"used\":{\"cpuSeconds\":$(json_num "$cpu_seconds"),\"meanCpus\":$(json_num "$mean_cpus"),\"peakRssMB\":$(json_num "$rss"),\"peakRssSource\":\"$rss_source\",\"peakGpuMemMB\":$(json_num "$(metric peak_gpu_mem_mb)")}"
  record+=",\"gpu\":$gpu_json,\"dataWaitFraction\":$(json_num "$(metric data_wait_fraction)"),\"graphsPerSec\":$(json_num "$(metric graphs_per_sec)")"
  record+=",\"signalled\":$signalled,\"timeLimitHit\":$limit_hit}"
  if mkdir -p "$run_dir" && printf '%s\n' "$record" >>"$run_dir/job_record.jsonl"; then
    printf 'record:           %s\n' "$run_dir/job_record.jsonl"
  else
    echo "record:           could not write $run_dir/job_record.jsonl"
  fi

  # --- the catalogue of all runs: the stage's row with the job's final state. The pipeline writes its
  # own when the stage returns or raises; this one covers a stage killed, cancelled or out of time
  # (--unless-recorded: nothing when the row is there in this state). A requeued job ends no stage.
  if [[ $state != REQUEUED ]]; then
    if [[ -z ${HPC_HELPER_MODULE-} ]]; then
      echo 'catalogue:        no row written: HPC_HELPER_MODULE is not set (not a job script of the runner)'
    elif command -v python >/dev/null 2>&1; then
      bound=()
      if command -v timeout >/dev/null 2>&1; then bound=(timeout 300); fi
      if answer=$("${bound[@]}" python -m "$HPC_HELPER_MODULE" catalogue-append --stage-dir "$run_dir" --state "$state" \
        ${secs:+--elapsed "$secs"} --unless-recorded 2>&1); then
        answer=${answer##*$'\n'}
        printf 'catalogue:        %s\n' "${answer#catalogue: }"
      else
        printf 'catalogue:        no row written: %s\n' "${answer##*$'\n'}"
      fi
    else
      echo 'catalogue:        no row written: no python on PATH (the environment was not activated)'
    fi
  fi

  if [[ -n $hpc_post_job_hint ]]; then
    hint=${hpc_post_job_hint//\{cluster\}/"$hpc_cluster"}
    hint=${hint//\{jobid\}/"$job_id"}
    printf 'next:             %s\n' "$hint"
  fi
  echo '=========================================================='
  exit 0
}

hpc_epilog "$@"
