#!/usr/bin/env bash
# A cluster site that is reachable only over SSH, and a "laptop" that can reach it only that way:
# the e2e suite of the laptop-to-cluster path (apps/runner/test/site) builds one per run.
#
#   scripts/site/site.sh up DIR        build the site under DIR; prints its facts as KEY=VALUE lines
#   scripts/site/site.sh laptop DIR -- CMD ARGS…
#                                      run CMD as the laptop: its own network namespace (a veth to
#                                      the site, nothing else), no SLURM commands, no SLURM or munge
#                                      configuration, and the site's files (DIR/site) not visible
#   scripts/site/site.sh down DIR      stop everything `up` started, delete the namespaces and DIR
#
# The site (network, mount and UTS namespaces of its own, hostname kdgat-login at 10.213.7.2):
#   - an OpenSSH server on 10.213.7.2:22 with its own host key; the laptop's key is authorised;
#   - a one-node SLURM (scripts/slurm-local.sh with its state in DIR/site/slurm), answering on the
#     site's own addresses only, with /etc/slurm/slurm.conf pointing at it inside the site;
#   - Lmod (Debian's) with a module tree of its own (cuda/12.4.1), MODULEPATH set for every login;
#   - /fs/scratch and /fs/ess: DIR/site/fs/scratch and DIR/site/fs/ess, mounted in the site only;
#   - the repository checkout is hidden (an empty tmpfs), except python/.venv: the site's Python
#     installation comes from the same lock as the tests' (uv.lock), but no `kdgat` code is there:
#     jobs can import the pipeline only from the code snapshot a run brings.
# Every address lives in the two namespaces this script creates (10.213.7.1 laptop, 10.213.7.2
# site) and goes with them; nothing listens on this machine's own interfaces.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SITE_IP=10.213.7.2
LAPTOP_IP=10.213.7.1

die() {
  printf 'site: error: %s\n' "$*" >&2
  exit 1
}

# Names derived from DIR: namespaces and veth ends (at most 15 characters).
names() {
  local dir=$1 id
  id=$(printf '%s' "$dir" | sha256sum | cut -c1-8)
  SITE_NS=kdgat-site-$id
  LAPTOP_NS=kdgat-laptop-$id
  VETH_L=kl-$id
  VETH_S=ks-$id
  SITE=$dir/site
  LAPTOP=$dir/laptop
}

# What runs inside the site's namespaces: mounts, then the daemons (which keep the namespaces).
site_init() {
  hostname kdgat-login
  printf '127.0.0.1 localhost\n%s kdgat-login\n' "$SITE_IP" >"$SITE/etc/hosts"
  mount --bind "$SITE/etc/hosts" /etc/hosts
  mkdir -p /fs/scratch /fs/ess /etc/slurm
  mount --bind "$SITE/fs/scratch" /fs/scratch
  mount --bind "$SITE/fs/ess" /fs/ess
  mount -t tmpfs -o size=1m tmpfs /etc/slurm
  ln -s "$SITE/slurm/slurm.conf" /etc/slurm/slurm.conf
  # The checkout is the laptop's: hidden, but for the Python installation of its venv.
  mkdir -p "$SITE/venv-view"
  mount --bind "$REPO/python/.venv" "$SITE/venv-view"
  mount -t tmpfs -o size=16m tmpfs "$REPO"
  mkdir -p "$REPO/python/.venv"
  mount --move "$SITE/venv-view" "$REPO/python/.venv"
  # SLURM on the site's own addresses (its namespace has its own ports: the defaults are free).
  KDGAT_SLURM_DIR=$SITE/slurm bash "$SITE/bin/slurm-local.sh" up >"$SITE/slurm-up.log" 2>&1
  /usr/sbin/sshd -f "$SITE/ssh/sshd_config" -E "$SITE/ssh/sshd.log"
}

up() {
  local dir=$1
  [[ $(id -u) -eq 0 ]] || die "run as root (it creates network and mount namespaces)"
  names "$dir"
  mkdir -p "$SITE"/{etc,bin,ssh,modules/cuda,fs/scratch,fs/ess,slurm} "$LAPTOP"
  cp "$REPO/scripts/slurm-local.sh" "$SITE/bin/"
  # Keys: the site's host key, the laptop's client key.
  ssh-keygen -q -t ed25519 -N '' -C kdgat-site -f "$SITE/ssh/host_ed25519"
  ssh-keygen -q -t ed25519 -N '' -C kdgat-laptop -f "$LAPTOP/id_ed25519"
  cp "$LAPTOP/id_ed25519.pub" "$SITE/ssh/authorized_keys"
  chmod 600 "$SITE/ssh/authorized_keys"
  # A module tree as OSC's login nodes have one (the job scripts `module load` CUDA from it).
  cat >"$SITE/modules/cuda/12.4.1.lua" <<'EOF'
whatis("CUDA 12.4.1 (a stand-in: this site has no GPU)")
setenv("CUDA_HOME", "/usr/local/cuda-12.4.1")
EOF
  mkdir -p /run/sshd
  cat >"$SITE/ssh/sshd_config" <<EOF
Port 22
ListenAddress $SITE_IP
HostKey $SITE/ssh/host_ed25519
AuthorizedKeysFile $SITE/ssh/authorized_keys
PidFile $SITE/ssh/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
MaxStartups 50
MaxSessions 50
SetEnv MODULEPATH=$SITE/modules KD_GAT_DATA_ROOT=/fs/ess/data/raw
EOF
  # The two namespaces and the one link between them.
  ip netns add "$SITE_NS"
  ip netns add "$LAPTOP_NS"
  ip link add "$VETH_L" type veth peer name "$VETH_S"
  ip link set "$VETH_L" netns "$LAPTOP_NS"
  ip link set "$VETH_S" netns "$SITE_NS"
  ip -n "$LAPTOP_NS" addr add "$LAPTOP_IP/30" dev "$VETH_L"
  ip -n "$SITE_NS" addr add "$SITE_IP/30" dev "$VETH_S"
  for ns in "$LAPTOP_NS" "$SITE_NS"; do ip -n "$ns" link set lo up; done
  ip -n "$LAPTOP_NS" link set "$VETH_L" up
  ip -n "$SITE_NS" link set "$VETH_S" up
  # The site's daemons start inside its namespaces; they keep them after this shell ends. (nsenter,
  # not `ip netns exec`: that remounts /sys, and slurmd needs the cgroup mounts under it.)
  if ! nsenter --net="/run/netns/$SITE_NS" unshare --mount --uts --propagation private \
    env REPO="$REPO" SITE="$SITE" SITE_IP="$SITE_IP" bash "$0" _site_init </dev/null >"$SITE/init.log" 2>&1; then
    for log in "$SITE/init.log" "$SITE/slurm-up.log"; do
      if [[ -s $log ]]; then cat "$log" >&2; fi
    done
    die "the site did not start (log above)"
  fi
  printf 'SITE_HOST=%s\nSITE_PORT=22\nSITE_USER=%s\nSITE_HOST_KEY=%s\nLAPTOP_KEY=%s\nSITE_ROOT=%s\n' \
    "$SITE_IP" "$(id -un)" "$(cut -d' ' -f1-2 "$SITE/ssh/host_ed25519.pub")" "$LAPTOP/id_ed25519" "$SITE"
}

# A stand-in for the SLURM commands on the laptop, where there are none.
no_slurm_here() {
  cat <<'STUB'
#!/bin/sh
echo "$(basename "$0"): not on the laptop: SLURM is reached over the stack's ssh connection only" >&2
exit 127
STUB
}

laptop() {
  local dir=$1
  shift
  [[ ${1:-} == -- ]] && shift
  names "$dir"
  [[ -d $SITE ]] || die "no site under $dir (scripts/site/site.sh up $dir first)"
  no_slurm_here >"$LAPTOP/no-slurm"
  chmod 755 "$LAPTOP/no-slurm"
  exec nsenter --net="/run/netns/$LAPTOP_NS" unshare --mount --propagation private \
    env SITE="$SITE" LAPTOP="$LAPTOP" bash "$0" _laptop_init "$@"
}

laptop_init() {
  local cmd path
  # The site's files, SLURM's configuration and munge's sockets are not the laptop's to see.
  mount -t tmpfs -o size=1m tmpfs "$SITE"
  for path in /etc/slurm /var/tmp/kdgat-slurm /run/munge /var/run/munge; do
    if [[ -d $path ]]; then mount -t tmpfs -o size=1m tmpfs "$path"; fi
  done
  for cmd in sbatch squeue scontrol scancel sacct srun sinfo salloc sstat; do
    if path=$(command -v "$cmd"); then mount --bind "$LAPTOP/no-slurm" "$path"; fi
  done
  unset SLURM_CONF
  exec "$@"
}

down() {
  local dir=$1 pid
  names "$dir"
  if [[ -s $SITE/ssh/sshd.pid ]]; then
    pid=$(cat "$SITE/ssh/sshd.pid")
    kill "$pid" 2>/dev/null && echo "site: stopped sshd ($pid)" >&2
  fi
  if [[ -f $SITE/slurm/slurm.conf ]]; then
    KDGAT_SLURM_DIR=$SITE/slurm SLURM_CONF=$SITE/slurm/slurm.conf bash "$SITE/bin/slurm-local.sh" down
  fi
  # Processes still in the site's network namespace (jobs, sessions) end with it.
  for pid in $(ip netns pids "$SITE_NS" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || echo "site: pid $pid already gone" >&2; done
  for ns in "$SITE_NS" "$LAPTOP_NS"; do
    if ip netns list | grep -qw "$ns"; then ip netns del "$ns"; fi
  done
  rm -rf "$dir"
}

case ${1:-} in
  up) up "${2:?usage: site.sh up DIR}" ;;
  laptop) laptop "${2:?usage: site.sh laptop DIR -- CMD…}" "${@:3}" ;;
  down) down "${2:?usage: site.sh down DIR}" ;;
  _site_init) site_init ;;
  _laptop_init) laptop_init "${@:2}" ;;
  *)
    echo "usage: scripts/site/site.sh up|laptop|down DIR [-- CMD …]" >&2
    exit 2
    ;;
esac
