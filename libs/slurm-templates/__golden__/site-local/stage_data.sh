#!/bin/bash
# stage_data.sh (P0): copy dataset caches from scratch to node-local disk before training.
# Rendered by @kdgat/slurm-templates: re-render, do not edit.
hpc_stage_default_jobs=4
hpc_stage_default_reserve_mb=256

# ---- @kdgat/slurm-templates src/shell/stage-data.sh ----
# stage_data.sh (P0): copy dataset caches from scratch to node-local disk before training.
# Installed on the cluster as stage_data.sh by renderStageData (src/stage-data/render-stage-data.ts),
# which puts the two defaults below in front of this text.
#
# Sourced by job scripts:  source stage_data.sh; hpc_stage_data NAME SRC_DIR [NAME SRC_DIR]...
# Run by hand:             bash stage_data.sh NAME SRC_DIR [NAME SRC_DIR]...   (prints the cache root)
#
# For each dataset: SRC_DIR must exist and hold files, else staging fails with a message (the original
# plan's `cp ... || true` trained on nothing without a word). The copy goes to <root>/NAME.partial in
# parallel and is renamed to <root>/NAME once every file matches the source manifest, so a job never
# sees half a cache. When the files still to copy do not fit in the free space of the node-local disk,
# <root>/NAME becomes a link to SRC_DIR and the job reads scratch directly, with a warning.
#
# Verification is size + modification time (rsync's quick check), not a checksum: a checksum reads the
# whole dataset on scratch again, which costs as much as the copy that staging exists to make cheap, and
# the cases that matter here (a copy cut short by a requeue or a full disk, a source file regenerated
# since the last staging, a staged file changed afterwards) all change the size or the mtime. cp keeps
# mtimes (--preserve=timestamps); times are compared to the second so any local filesystem qualifies.
# Files already present and verified are not copied again: re-staging after a requeue costs one listing.
# Jobs that share a local disk (TMPDIR=/tmp) share the staged copy; flock serialises the staging.
#
# Root: $TMPDIR/hpc-cache (node-local and per job on SLURM clusters), else /tmp/hpc-job-<id>-<uid>/hpc-cache.
# The root must be this user's alone (a directory they own, no link, writable by nobody else):
# where another user's is there first (a local disk shared by users), this user's own is
# $TMPDIR/hpc-cache-<uid>; a staging root that is not theirs is refused, never read.
# Exports HPC_CACHE_ROOT=<root>; the pipeline reads <root>/<dataset>.
# Tunables: HPC_STAGE_JOBS (parallel copies), HPC_STAGE_RESERVE_MB (free space kept on the local
# disk); their defaults are the inputs below.

# Inputs (assigned before this text): hpc_stage_default_jobs (parallel copies),
# hpc_stage_default_reserve_mb (MB kept free on the local disk).
declare -g hpc_stage_default_jobs hpc_stage_default_reserve_mb

# hpc_stage_base: the directory the staging root is in ($TMPDIR, else a per-job one of this user's).
hpc_stage_base() {
  local base=${TMPDIR:-}
  if [[ -z $base ]]; then base=/tmp/hpc-job-${SLURM_JOB_ID:-$$}-$(id -u); fi
  printf '%s\n' "${base%/}"
}

# hpc_stage_mine DIR: DIR is a directory of this user's, not a link, writable by nobody else.
hpc_stage_mine() {
  [[ -d $1 && ! -L $1 && -O $1 && -z $(find "$1" -maxdepth 0 -perm /022) ]]
}

hpc_stage_root() {
  local base root
  base=$(hpc_stage_base)
  root=$base/hpc-cache
  if [[ -e $root || -L $root ]] && ! hpc_stage_mine "$root"; then root=$base/hpc-cache-$(id -u); fi
  printf '%s\n' "$root"
}

hpc_stage_now() {
  date +%s.%N
}

# hpc_stage_list DIR: one NUL-terminated record per regular file, "size<TAB>mtime-seconds<TAB>path".
hpc_stage_list() {
  find "$1" -type f -printf '%s\t%T@\t%P\0'
}

hpc_stage_fail() {
  printf 'kdgat-hpc stage: ERROR: dataset %s: %s\n' "$1" "$2" >&2
  return 1
}

# hpc_stage_report NAME START TOTAL_BYTES COPIED_BYTES FILES COPIED_FILES REUSED DEST
hpc_stage_report() {
  awk -v name="$1" -v start="$2" -v end="$(hpc_stage_now)" -v total="$3" -v copied="$4" \
    -v files="$5" -v ncopied="$6" -v reused="$7" -v dest="$8" 'BEGIN {
      secs = end - start; if (secs < 0.001) secs = 0.001
      rate = copied > 0 ? sprintf("%.1f MB/s", copied / 1e6 / secs) : "nothing to copy"
      printf "kdgat-hpc stage: %s: %.1f MB in %d file(s); copied %d (%.1f MB) in %.2f s, %s; %d already staged and verified -> %s\n",
        name, total / 1e6, files, ncopied, copied / 1e6, secs, rate, reused, dest
    }'
}

# hpc_stage_link NAME SRC DEST PARTIAL: fall back to reading scratch through DEST -> SRC.
hpc_stage_link() {
  rm -rf -- "$4"
  if ! ln -s -- "$2" "$3"; then
    hpc_stage_fail "$1" "cannot link '$3' to '$2'"
    return 1
  fi
}

# hpc_stage_dataset NAME SRC_DIR ROOT: stage one dataset into ROOT/NAME.
hpc_stage_dataset() {
  local name=$1 src=${2%/} root=$3
  local dest=$root/$name partial=$root/$name.partial
  local start size mtime rel
  local files=0 total_bytes=0 need_bytes=0 reused=0 stale=0 extra=0 avail_kb reserve_kb
  local -A want=() have=()
  local -a need=()
  start=$(hpc_stage_now)

  if [[ ! -d $src ]]; then
    hpc_stage_fail "$name" "source directory '$src' does not exist (was the cache built? run the preprocess stage)"
    return 1
  fi
  if [[ -z $(find "$src" -type f -print -quit) ]]; then
    hpc_stage_fail "$name" "source directory '$src' holds no files (was the cache built? run the preprocess stage)"
    return 1
  fi
  if ! mkdir -p -- "$root"; then
    hpc_stage_fail "$name" "cannot create the staging root '$root'"
    return 1
  fi

  while IFS=$'\t' read -r -d '' size mtime rel; do
    want[$rel]="$size ${mtime%.*}"
    files=$((files + 1))
    total_bytes=$((total_bytes + size))
  done < <(hpc_stage_list "$src")

  # A complete staging that still matches the source is used in place, without a rename, so that
  # other jobs reading it on a shared local disk are not disturbed.
  if [[ -d $dest && ! -L $dest ]]; then
    while IFS=$'\t' read -r -d '' size mtime rel; do
      have[$rel]="$size ${mtime%.*}"
    done < <(hpc_stage_list "$dest")
    if ((${#have[@]} == files)); then
      for rel in "${!want[@]}"; do
        if [[ ${have[$rel]:-} == "${want[$rel]}" ]]; then reused=$((reused + 1)); fi
      done
    fi
    if ((reused == files)); then
      hpc_stage_report "$name" "$start" "$total_bytes" 0 "$files" 0 "$reused" "$dest"
      return 0
    fi
    reused=0
  fi

  # Otherwise work in NAME.partial: an earlier staging (complete or cut short) is moved or left
  # there, its verified files kept, the rest copied.
  if [[ -L $dest ]]; then rm -f -- "$dest"; fi
  if [[ -d $dest ]]; then
    rm -rf -- "$partial"
    if ! mv -T -- "$dest" "$partial"; then
      hpc_stage_fail "$name" "cannot move '$dest' aside"
      return 1
    fi
  fi
  if ! mkdir -p -- "$partial"; then
    hpc_stage_fail "$name" "cannot create '$partial'"
    return 1
  fi

  have=()
  while IFS=$'\t' read -r -d '' size mtime rel; do
    have[$rel]="$size ${mtime%.*}"
  done < <(hpc_stage_list "$partial")
  for rel in "${!want[@]}"; do
    if [[ ${have[$rel]:-} == "${want[$rel]}" ]]; then
      reused=$((reused + 1))
    else
      if [[ -n ${have[$rel]:-} ]]; then stale=$((stale + 1)); fi
      size=${want[$rel]%% *}
      need+=("$size"$'\t'"$rel")
      need_bytes=$((need_bytes + size))
    fi
  done
  for rel in "${!have[@]}"; do
    if [[ -z ${want[$rel]:-} ]]; then
      rm -f -- "$partial/$rel"
      extra=$((extra + 1))
    fi
  done
  if ((stale > 0)); then
    printf 'kdgat-hpc stage: %s: %d staged file(s) differ from the source in size or mtime (corrupt or stale): copying them again\n' "$name" "$stale"
  fi
  if ((extra > 0)); then
    printf 'kdgat-hpc stage: %s: removed %d staged file(s) no longer in the source\n' "$name" "$extra"
  fi

  avail_kb=$(df -Pk -- "$partial" | awk 'NR == 2 { print $4 }')
  reserve_kb=$((${HPC_STAGE_RESERVE_MB:-$hpc_stage_default_reserve_mb} * 1024))
  if ((need_bytes / 1024 + reserve_kb > avail_kb)); then
    printf 'kdgat-hpc stage: WARNING: %s: %d MB still to copy but %s has %d MB free (keeping %d MB): reading it from scratch directly at %s\n' \
      "$name" $((need_bytes / 1048576)) "$root" $((avail_kb / 1024)) $((reserve_kb / 1024)) "$src" >&2
    hpc_stage_link "$name" "$src" "$dest" "$partial"
    return
  fi

  if ((${#need[@]} > 0)); then
    # Largest files first so the parallel copies finish together.
    if ! printf '%s\0' "${need[@]}" | sort -z -t $'\t' -k1,1nr | cut -z -f2- |
      (cd -- "$src" && xargs -0 -r -n 1 -P "${HPC_STAGE_JOBS:-$hpc_stage_default_jobs}" cp --parents --preserve=timestamps -t "$partial" --); then
      printf 'kdgat-hpc stage: WARNING: %s: copying to %s failed: reading it from scratch directly at %s\n' "$name" "$root" "$src" >&2
      hpc_stage_link "$name" "$src" "$dest" "$partial"
      return
    fi
  fi

  # Verify the whole copy against the source manifest before it becomes visible.
  local -a bad=()
  have=()
  while IFS=$'\t' read -r -d '' size mtime rel; do
    have[$rel]="$size ${mtime%.*}"
  done < <(hpc_stage_list "$partial")
  for rel in "${!want[@]}"; do
    if [[ ${have[$rel]:-missing} != "${want[$rel]}" ]]; then
      bad+=("$rel (source: ${want[$rel]}, staged: ${have[$rel]:-missing})")
    fi
  done
  if ((${#bad[@]} > 0)); then
    hpc_stage_fail "$name" "${#bad[@]} staged file(s) do not match the source (size mtime): $(printf '%s; ' "${bad[@]}")"
    return 1
  fi
  if ! mv -T -- "$partial" "$dest"; then
    hpc_stage_fail "$name" "cannot rename '$partial' to '$dest'"
    return 1
  fi

  hpc_stage_report "$name" "$start" "$total_bytes" "$need_bytes" "$files" "${#need[@]}" "$reused" "$dest"
}

# hpc_stage_cleanup: remove the per-job directory made when TMPDIR was unset (SLURM removes a
# per-job TMPDIR itself). Job scripts call it at the end unless the job was requeued.
hpc_stage_cleanup() {
  local root
  if [[ -z ${TMPDIR:-} ]]; then
    root=$(hpc_stage_base)
    if hpc_stage_mine "$root"; then rm -rf -- "$root"; fi
  fi
}

# hpc_stage_data NAME SRC_DIR [NAME SRC_DIR]...: stage each dataset, export HPC_CACHE_ROOT.
hpc_stage_data() {
  local root
  if (($# == 0 || $# % 2 != 0)); then
    echo 'kdgat-hpc stage: usage: hpc_stage_data NAME SRC_DIR [NAME SRC_DIR]...' >&2
    return 2
  fi
  root=$(hpc_stage_root)
  while (($# > 0)); do
    if [[ ! $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
      hpc_stage_fail "$1" 'dataset names are letters, digits, . _ - (they name a directory)'
      return 1
    fi
    # Made by this user (mode 700), or already there (a requeue, another job of theirs on the node):
    # either way checked to be theirs alone before anything in it is read.
    if ! mkdir -p -- "$(dirname -- "$root")" || { ! mkdir -m 700 -- "$root" 2>/dev/null && [[ ! -d $root ]]; }; then
      hpc_stage_fail "$1" "cannot create the staging root '$root'"
      return 1
    fi
    if [[ -z ${TMPDIR:-} ]] && ! hpc_stage_mine "$(hpc_stage_base)"; then
      hpc_stage_fail "$1" "the staging directory '$(hpc_stage_base)' is not yours alone (another user made it): not used"
      return 1
    fi
    if ! hpc_stage_mine "$root"; then
      hpc_stage_fail "$1" "the staging root '$root' is not yours alone (a link, or another user's): not used"
      return 1
    fi
    if command -v flock >/dev/null 2>&1; then
      # Jobs sharing a node-local disk stage one dataset one at a time; later ones find it verified.
      {
        if ! flock -n 9; then
          printf 'kdgat-hpc stage: %s: another job on this node is staging it: waiting\n' "$1"
          flock 9
        fi
        hpc_stage_dataset "$1" "$2" "$root"
      } 9>"$root/.$1.lock" || return 1
    else
      hpc_stage_dataset "$1" "$2" "$root" || return 1
    fi
    shift 2
  done
  export HPC_CACHE_ROOT=$root
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  hpc_stage_data "$@"
  printf 'kdgat-hpc stage: caches ready on %s in %s\n' "$(hostname)" "$HPC_CACHE_ROOT" >&2
  printf '%s\n' "$HPC_CACHE_ROOT"
fi
