#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine, for the e2e tests and for trying the runner.
#
#   scripts/slurm-local.sh up       install slurm-wlm + munge if missing, write the config, start, wait for idle
#   scripts/slurm-local.sh down     stop the daemons this script started (by pid)
#   scripts/slurm-local.sh status   exit 0 when the controller answers and the node is usable
#   scripts/slurm-local.sh env      print `export SLURM_CONF=…` for this cluster
#
# Partition `gpu` (default) with one node that advertises Gres=gpu:v100:1 backed by /dev/null, so
# GPU directives are accepted exactly as on OSC. Runs as root (ProctrackType=proctrack/linuxproc,
# TaskPlugin=task/none): this is a test cluster, not a hardened one.
#
# A second, differently configured instance (a test that needs its own cluster) sets its own state
# dir and ports; it never touches the default instance or /etc/slurm:
#   HPC_SLURM_DIR        state, config and logs (default /var/tmp/kdgat-slurm)
#   HPC_SLURMCTLD_PORT   controller port (default 6817);  HPC_SLURMD_PORT  node daemon port (default 6818)
#   HPC_SLURM_MAX_ARRAY_SIZE  MaxArraySize (default 1001, SLURM's own default)
set -euo pipefail

DEFAULT_STATE=/var/tmp/kdgat-slurm
STATE=${HPC_SLURM_DIR:-$DEFAULT_STATE}
CONF=$STATE/slurm.conf
CTLD_PORT=${HPC_SLURMCTLD_PORT:-6817}
SLURMD_PORT=${HPC_SLURMD_PORT:-6818}
MAX_ARRAY_SIZE=${HPC_SLURM_MAX_ARRAY_SIZE:-1001}
export SLURM_CONF=$CONF

log() { printf 'slurm-local: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

for knob in CTLD_PORT SLURMD_PORT MAX_ARRAY_SIZE; do
  [[ ${!knob} =~ ^[1-9][0-9]{0,5}$ ]] || { printf 'slurm-local: error: %s=%q: expected a whole number\n' "$knob" "${!knob}" >&2; exit 2; }
done

need_root() { [[ $(id -u) -eq 0 ]] || die "run as root (the one-node cluster runs its daemons as root)"; }

install_packages() {
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]} (Debian packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

write_config() {
  local host cpus mem_mb
  host=$(hostname -s)
  cpus=$(nproc)
  # Leave 10% of the memory to the OS so --mem requests are honest.
  mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
  mkdir -p "$STATE"/{state,spool,log,munge}
  chmod 700 "$STATE/munge"
  if [[ ! -s $STATE/munge/munge.key ]]; then
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$STATE/munge/munge.key"
  fi
  cat >"$STATE/gres.conf" <<EOF
Name=gpu Type=v100 File=/dev/null Count=1
EOF
  cat >"$CONF.new" <<EOF
ClusterName=kdgat-local
SlurmctldHost=$host
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/state
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
JobRequeue=1
MinJobAge=300
MaxArraySize=$MAX_ARRAY_SIZE
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host CPUs=$cpus RealMemory=$mem_mb Gres=gpu:v100:1 State=UNKNOWN
PartitionName=gpu Nodes=$host Default=YES MaxTime=7-00:00:00 State=UP
PartitionName=gpudebug Nodes=$host MaxTime=01:00:00 State=UP
EOF
  mv "$CONF.new" "$CONF"
  # slurmd looks for gres.conf beside slurm.conf.
  # Plain `sbatch` (no SLURM_CONF) finds the cluster too, unless a real config is already there.
  # Only the default instance: a second one must not take plain `sbatch` away from it.
  if [[ $STATE == "$DEFAULT_STATE" ]]; then
    mkdir -p /etc/slurm
    if [[ ! -e /etc/slurm/slurm.conf || -L /etc/slurm/slurm.conf ]]; then
      ln -sfn "$CONF" /etc/slurm/slurm.conf
    fi
  fi
}

pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

controller_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

node_ready() {
  local state
  state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1)
  [[ $state == idle* || $state == mixed* || $state == allocated* ]]
}

# The daemons outlive this script: they must not keep a descriptor it inherited (a caller's
# `flock LOCK scripts/slurm-local.sh up` would otherwise stay locked for as long as munged runs).
close_inherited_fds() {
  local fd
  for fd in "/proc/$$/fd"/*; do
    fd=${fd##*/}
    if ((fd > 2 && fd != 255)); then eval "exec ${fd}>&-" 2>/dev/null || true; fi
  done
}

cmd_up() {
  need_root
  local t0=$SECONDS
  install_packages
  if pid_alive "$STATE/slurmctld.pid" && controller_up && node_ready; then
    log "already up ($CONF)"
    return 0
  fi
  write_config
  close_inherited_fds
  if ! pid_alive "$STATE/munge/munged.pid"; then
    munged --socket="$STATE/munge/munge.sock" --key-file="$STATE/munge/munge.key" \
      --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/log/munged.log" \
      --seed-file="$STATE/munge/munged.seed" --force
  fi
  pid_alive "$STATE/slurmctld.pid" || slurmctld -f "$CONF"
  pid_alive "$STATE/slurmd.pid" || slurmd -f "$CONF"
  local deadline=$((SECONDS + 90))
  until controller_up && node_ready; do
    if ((SECONDS > deadline)); then
      log "the node did not become idle within 90 s; last log lines:"
      tail -n 20 "$STATE/log/slurmctld.log" "$STATE/log/slurmd.log" >&2
      exit 1
    fi
    # A node left DOWN or DRAINED by an earlier run comes back with RESUME.
    case $(sinfo -h -N -o '%T' | head -n 1) in
      down* | drain*) scontrol update nodename="$(hostname -s)" state=resume ;;
    esac
    sleep 1
  done
  log "up in $((SECONDS - t0)) s: partition gpu, node $(hostname -s) ($(nproc) cpus, gpu:v100:1); SLURM_CONF=$CONF"
}

stop_pid() {
  local file=$1 name=$2 pid
  pid_alive "$file" || return 0
  pid=$(cat "$file")
  kill "$pid"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  log "$name ($pid) did not stop on TERM; sending KILL"
  kill -9 "$pid"
}

cmd_down() {
  need_root
  # Jobs left running would keep slurmstepd processes around; cancel them first.
  if controller_up; then scancel --full --quiet --state=RUNNING --user=root; fi
  stop_pid "$STATE/slurmd.pid" slurmd
  stop_pid "$STATE/slurmctld.pid" slurmctld
  stop_pid "$STATE/munge/munged.pid" munged
  log "down"
}

cmd_status() {
  if [[ -f $CONF ]] && pid_alive "$STATE/slurmctld.pid" && controller_up && node_ready; then
    sinfo -N -o '%N %P %T %c %m %G'
    return 0
  fi
  log "not running (scripts/slurm-local.sh up starts it)"
  return 1
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) die "usage: scripts/slurm-local.sh up|down|status|env" ;;
esac
