#!/usr/bin/env bash
# A cluster site that is reachable only over SSH, shaped like an OSC cluster, and a "laptop" that can
# reach it only that way: the e2e suites of the laptop-to-cluster path (apps/runner/test/site) and of
# the cluster's shape build one per run.
#
#   scripts/site/site.sh up DIR        build the site under DIR; prints its facts as KEY=VALUE lines
#   scripts/site/site.sh laptop DIR -- CMD ARGS…
#                                      run CMD as the laptop: its own network namespace (a veth to
#                                      the site, nothing else), no SLURM commands, no SLURM or munge
#                                      configuration, and the site's files (DIR/site) not visible
#   scripts/site/site.sh node DIR NODE -- CMD ARGS…
#                                      run CMD on a compute node (its namespaces): what a test does
#                                      to a node, e.g. kill its daemons
#   scripts/site/site.sh kill-node DIR NODE
#                                      the node dies: every process in its namespaces is killed
#   scripts/site/site.sh down DIR      stop everything `up` started, delete the namespaces and DIR
#
# The login node (network, mount and UTS namespaces of its own, hostname kdgat-login, 10.213.7.2 to
# the laptop and 10.213.8.1 on the cluster's own network):
#   - an OpenSSH server on 10.213.7.2:22 with its own host key; the laptop's key is authorised;
#   - slurmctld, and accounting as on OSC: slurmdbd on a MariaDB of its own (127.0.0.1 inside the
#     login node's namespace), so `sacct` answers;
#   - Lmod (Debian's) with a module tree of its own (cuda/12.4.1), MODULEPATH set for every login;
#   - /fs/scratch and /fs/ess: DIR/site/fs/scratch and DIR/site/fs/ess, mounted in the site only;
#   - the repository checkout is hidden (an empty tmpfs), except python/.venv: the site's Python
#     installation comes from the same lock as the tests' (uv.lock), but no `kdgat` code is there:
#     jobs can import the pipeline only from the code snapshot a run brings.
# Three compute nodes, each with network, mount, UTS and cgroup namespaces of its own: c01 and c02
# (10.213.8.11-12) in partitions `gpu` (default) and `gpudebug`, each advertising Gres=gpu:v100:1
# backed by /dev/null; c03 (10.213.8.13) in partition `cpu`. Each node has its own slurmd, its own
# node-local /tmp ($TMPDIR is /tmp/job.<id>, made by the prolog and removed by the epilog on every
# node of a job) and its own cgroup subtree: proctrack/cgroup and task/cgroup constrain a job to its
# cores and its --mem (over it, the job ends OUT_OF_MEMORY), jobacct_gather/cgroup measures it.
# The nodes see the login node's filesystems (/fs, the venv), as on OSC.
# Every address lives in the namespaces this script creates and goes with them; nothing listens on
# this machine's own interfaces.
set -euo pipefail
# The checkout; the copy of this script the site runs is told where it is.
REPO=${HPC_SITE_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SITE_IP=10.213.7.2
LAPTOP_IP=10.213.7.1
# The cluster's own network: the login node and the compute nodes on one bridge.
LOGIN_CLUSTER_IP=10.213.8.1
NODES=(c01 c02 c03 c04)
declare -A NODE_IP=([c01]=10.213.8.11 [c02]=10.213.8.12 [c03]=10.213.8.13 [c04]=10.213.8.14)
# Two clusters under one slurmdbd, as OSC's Pitzer, Ascend and Cardinal share one accounting
# database, one account and one set of filesystems: kdgat-site (c01-c03, the login node's own) and
# kdgat-annex (c04: one node with an a100), reached from the same login node with `-M kdgat-annex`.
ANNEX=kdgat-annex
ANNEX_NODES=(c04)
ANNEX_CTLD_PORT=6820
# What each node declares to SLURM: this machine's cores (slurmd refuses more), a share of its memory.
NODE_CPUS=$(nproc)
NODE_MEM_MB=6144
# The cgroup v1 controllers a node gets a subtree of (SLURM's cgroup plugins use these).
CGROUP_CONTROLLERS=(cpuset cpu cpuacct memory devices freezer pids)

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
  NODE_TAG=$id
}

node_ns() { printf 'kdgat-%s-%s' "$1" "$NODE_TAG"; }


# The hosts file every machine of the site reads: the login node and the compute nodes by name.
write_hosts() {
  local node
  {
    printf '127.0.0.1 localhost\n%s kdgat-login\n' "$LOGIN_CLUSTER_IP"
    for node in "${NODES[@]}"; do printf '%s %s\n' "${NODE_IP[$node]}" "$node"; done
  } >"$SITE/etc/hosts"
}

# SLURM's configuration: slurm.conf, cgroup.conf, gres.conf, slurmdbd.conf and the node scripts.
write_slurm_config() {
  local conf=$SITE/slurm
  mkdir -p "$conf"/{state,spool,log,munge,scripts}
  chmod 700 "$conf/munge"
  dd if=/dev/urandom of="$conf/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$conf/munge/munge.key"
  local db_pass
  db_pass=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
  printf '%s\n' "$db_pass" >"$SITE/db/slurm.pass"
  chmod 600 "$SITE/db/slurm.pass"
  cat >"$conf/slurm.conf" <<EOF
ClusterName=kdgat-site
SlurmctldHost=kdgat-login($LOGIN_CLUSTER_IP)
AuthType=auth/munge
AuthInfo=socket=$conf/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$conf/state
# Every node mounts its own directory here (node_init): its spool, pid file and log are its own.
SlurmdSpoolDir=$conf/spool
SlurmdPidFile=$conf/spool/slurmd.pid
SlurmdLogFile=$conf/spool/slurmd.log
SlurmctldPidFile=$conf/slurmctld.pid
SlurmctldLogFile=$conf/log/slurmctld.log
# As on OSC: jobs are tracked and constrained by cgroups, and accounted in slurmdbd.
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
# jobacct_gather/linux (the cgroup gatherer of 22.05 reported 0 memory for the tasks of a job's other
# nodes on this box); PSS, so that pages a task shares (its libraries) are not counted once per process.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherParams=UsePss
JobAcctGatherFrequency=task=2
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=kdgat-login
# For slurmdbd connections this names munge's socket (slurm.conf(5), AccountingStoragePass).
AccountingStoragePass=$conf/munge/munge.sock
AccountingStorageTRES=gres/gpu
# The node-local \$TMPDIR of a job: made on every node of it at allocation, removed at its end.
PrologFlags=Alloc,Contain
Prolog=$conf/scripts/prolog.sh
Epilog=$conf/scripts/epilog.sh
TaskProlog=$conf/scripts/task-prolog.sh
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
# A job is requeued only when it asks to (--requeue): a node failure otherwise ends it NODE_FAIL.
JobRequeue=0
MinJobAge=300
MaxArraySize=1001
SlurmctldTimeout=30
SlurmdTimeout=10
MessageTimeout=10
KillWait=5
OverTimeLimit=0
EOF
  local node
  for node in "${NODES[@]}"; do
    is_annex "$node" && continue
    local gres=''
    [[ $node != c03 ]] && gres=' Gres=gpu:v100:1'
    printf 'NodeName=%s NodeAddr=%s CPUs=%s RealMemory=%s%s State=UNKNOWN\n' \
      "$node" "${NODE_IP[$node]}" "$NODE_CPUS" "$NODE_MEM_MB" "$gres" >>"$conf/slurm.conf"
  done
  cat >>"$conf/slurm.conf" <<EOF
PartitionName=gpu Nodes=c01,c02 Default=YES MaxTime=7-00:00:00 State=UP
PartitionName=gpudebug Nodes=c01,c02 MaxTime=01:00:00 State=UP
PartitionName=cpu Nodes=c03 MaxTime=7-00:00:00 State=UP
EOF
  cat >"$conf/gres.conf" <<'EOF'
NodeName=c01,c02 Name=gpu Type=v100 File=/dev/null Count=1
EOF
  cat >"$conf/cgroup.conf" <<'EOF'
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
ConstrainRAMSpace=yes
AllowedRAMSpace=100
ConstrainSwapSpace=yes
AllowedSwapSpace=0
EOF
  cat >"$conf/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$conf/munge/munge.sock
DbdHost=kdgat-login
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=slurm
StoragePass=$db_pass
StorageLoc=slurm_acct_db
PidFile=$conf/slurmdbd.pid
LogFile=$conf/log/slurmdbd.log
EOF
  chmod 600 "$conf/slurmdbd.conf"
  write_annex_config
  cat >"$conf/scripts/prolog.sh" <<'EOF'
#!/bin/sh
# On every node of a job, at allocation: its node-local temporary directory.
mkdir -p "/tmp/job.$SLURM_JOB_ID" && chmod 700 "/tmp/job.$SLURM_JOB_ID"
EOF
  cat >"$conf/scripts/epilog.sh" <<'EOF'
#!/bin/sh
# On every node of a job, at its end: the node-local temporary directory goes.
rm -rf "/tmp/job.$SLURM_JOB_ID"
EOF
  cat >"$conf/scripts/task-prolog.sh" <<'EOF'
#!/bin/sh
# Every task's $TMPDIR: the job's directory on its own node (OSC sets TMPDIR the same way).
echo "export TMPDIR=/tmp/job.$SLURM_JOB_ID"
EOF
  chmod 755 "$conf/scripts"/*.sh
}

is_annex() {
  local n
  for n in "${ANNEX_NODES[@]}"; do [[ $n == "$1" ]] && return 0; done
  return 1
}

# The annex cluster's configuration, in a directory of its own (slurmd and slurmctld read gres.conf
# and cgroup.conf beside the slurm.conf they are given): cluster 1's, but for its name, its
# controller's port and state, its node and its partition.
write_annex_config() {
  local conf=$SITE/slurm annex=$SITE/slurm/annex node
  mkdir -p "$annex/state"
  sed -e "s/^ClusterName=.*/ClusterName=$ANNEX/" \
    -e "s|^StateSaveLocation=.*|StateSaveLocation=$annex/state|" \
    -e "s|^SlurmctldPidFile=.*|SlurmctldPidFile=$annex/slurmctld.pid|" \
    -e "s|^SlurmctldLogFile=.*|SlurmctldLogFile=$conf/log/slurmctld-annex.log|" \
    -e '/^NodeName=/d' -e '/^PartitionName=/d' "$conf/slurm.conf" >"$annex/slurm.conf"
  printf 'SlurmctldPort=%s\n' "$ANNEX_CTLD_PORT" >>"$annex/slurm.conf"
  for node in "${ANNEX_NODES[@]}"; do
    printf 'NodeName=%s NodeAddr=%s CPUs=%s RealMemory=%s Gres=gpu:a100:1 State=UNKNOWN\n' \
      "$node" "${NODE_IP[$node]}" "$NODE_CPUS" "$NODE_MEM_MB" >>"$annex/slurm.conf"
  done
  printf 'PartitionName=gpu Nodes=%s Default=YES MaxTime=7-00:00:00 State=UP\n' \
    "$(IFS=,; echo "${ANNEX_NODES[*]}")" >>"$annex/slurm.conf"
  printf 'NodeName=%s Name=gpu Type=a100 File=/dev/null Count=1\n' \
    "$(IFS=,; echo "${ANNEX_NODES[*]}")" >"$annex/gres.conf"
  cp "$conf/cgroup.conf" "$annex/cgroup.conf"
}

# The slurm.conf a node's slurmd reads.
node_conf() {
  if is_annex "$1"; then printf '%s/slurm/annex/slurm.conf' "$SITE"; else printf '%s/slurm/slurm.conf' "$SITE"; fi
}

pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Waits up to $1 seconds for `$2…` to succeed.
wait_for() {
  local seconds=$1 deadline
  shift
  deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# MariaDB for slurmdbd: its own data directory, on the login node's own loopback.
start_database() {
  local db=$SITE/db
  mariadb-install-db --no-defaults --datadir="$db/data" --user=root --auth-root-authentication-method=socket \
    --skip-test-db >"$db/install.log" 2>&1 || die "mariadb-install-db failed: $(tail -n 5 "$db/install.log")"
  mariadbd --no-defaults --datadir="$db/data" --user=root --socket="$db/mysqld.sock" --bind-address=127.0.0.1 \
    --port=3306 --pid-file="$db/mariadb.pid" --log-error="$db/mariadb.err" --skip-log-bin </dev/null >/dev/null 2>&1 &
  wait_for 60 mariadb --no-defaults --socket="$db/mysqld.sock" -e 'SELECT 1' ||
    die "MariaDB did not answer within 60 s: $(tail -n 5 "$db/mariadb.err")"
  mariadb --no-defaults --socket="$db/mysqld.sock" <<EOF
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$(cat "$db/slurm.pass")';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
}

# A cgroup subtree per node under this shell's own cgroup of each controller: the node's namespace
# sees it as its root, so its slurmd makes /slurm/... there and no other node's.
node_cgroup_dir() {
  local controller=$1 node=$2 base
  base=$(awk -F: -v c="$controller" '$2 == c { print $3 }' /proc/self/cgroup)
  printf '/sys/fs/cgroup/%s%s/kdgat-%s-%s' "$controller" "${base%/}" "$NODE_TAG" "$node"
}

make_node_cgroups() {
  local node=$1 controller dir
  for controller in "${CGROUP_CONTROLLERS[@]}"; do
    dir=$(node_cgroup_dir "$controller" "$node")
    mkdir -p "$dir"
    if [[ $controller == cpuset ]]; then
      cat "$(dirname "$dir")/cpuset.cpus" >"$dir/cpuset.cpus"
      cat "$(dirname "$dir")/cpuset.mems" >"$dir/cpuset.mems"
    fi
  done
}

# What runs inside the login node's namespaces: mounts, then the daemons (which keep the namespaces).
site_init() {
  # A step that fails says which (its own output may be in a log of its own).
  set -E
  trap 'printf "site: login node: \"%s\" failed (status %s)\n" "$BASH_COMMAND" "$?" >&2' ERR
  hostname kdgat-login
  write_hosts
  mount --bind "$SITE/etc/hosts" /etc/hosts
  mkdir -p /fs/scratch /fs/ess /etc/slurm
  mount --bind "$SITE/fs/scratch" /fs/scratch
  mount --bind "$SITE/fs/ess" /fs/ess
  mount -t tmpfs -o size=1m tmpfs /etc/slurm
  local file
  for file in slurm.conf cgroup.conf gres.conf slurmdbd.conf; do ln -s "$SITE/slurm/$file" "/etc/slurm/$file"; done
  # The checkout is the laptop's: hidden, but for the Python installation of its venv.
  mkdir -p "$SITE/venv-view"
  mount --bind "$REPO/python/.venv" "$SITE/venv-view"
  mount -t tmpfs -o size=16m tmpfs "$REPO"
  mkdir -p "$REPO/python/.venv"
  mount --move "$SITE/venv-view" "$REPO/python/.venv"
  # The cluster's network: a bridge the nodes' veths join.
  ip link add kbr0 type bridge
  ip addr add "$LOGIN_CLUSTER_IP/24" dev kbr0
  ip link set kbr0 up
  local node
  for node in "${NODES[@]}"; do
    ip link set "kb-$node" master kbr0
    ip link set "kb-$node" up
  done
  local conf=$SITE/slurm t0=$SECONDS
  munged --socket="$conf/munge/munge.sock" --key-file="$conf/munge/munge.key" \
    --pid-file="$conf/munge/munged.pid" --log-file="$conf/log/munged.log" \
    --seed-file="$conf/munge/munged.seed" --force
  start_database
  slurmdbd
  wait_for 60 sacctmgr -n list cluster || die "slurmdbd did not answer within 60 s: $(tail -n 5 "$conf/log/slurmdbd.log")"
  sacctmgr -i add cluster kdgat-site "$ANNEX" >/dev/null
  slurmctld
  wait_for 60 sh -c 'scontrol ping | grep -q "is UP"' || die "slurmctld did not start: $(tail -n 5 "$conf/log/slurmctld.log")"
  slurmctld -f "$conf/annex/slurm.conf"
  # The annex is reached the way users reach it: -M, through slurmdbd's record of its controller.
  wait_for 60 sh -c "scontrol -M $ANNEX ping | grep -q 'is UP'" ||
    die "the annex's slurmctld did not start: $(tail -n 5 "$conf/log/slurmctld-annex.log")"
  for node in "${NODES[@]}"; do
    mkdir -p "$SITE/nodes/$node"/{tmp,spool}
    start_node "$node"
  done
  wait_for 90 nodes_idle || die "the nodes did not become idle within 90 s: $(sinfo -M all -N -h -o '%N %T %E' | tr '\n' ';')"
  printf 'site: up in %d s (slurmdbd, 2 clusters, %d nodes)\n' $((SECONDS - t0)) "${#NODES[@]}" >&2
  /usr/sbin/sshd -f "$SITE/ssh/sshd_config" -E "$SITE/ssh/sshd.log"
}

nodes_idle() {
  local states
  # -M all prints a "CLUSTER: name" line before each cluster's nodes.
  states=$(sinfo -M all -N -h -o '%T' | grep -v '^CLUSTER: ' | sort -u | tr '\n' ' ')
  [[ -n $states && $states =~ ^(idle[[:space:]]*)+$ ]]
}

# What runs inside a compute node's namespaces: its name, its /tmp and spool, its cgroup view, slurmd.
node_init() {
  local controller node=${NODE:?}
  hostname "$node"
  mount --bind "$SITE/etc/hosts" /etc/hosts
  mount --bind "$SITE/nodes/$node/tmp" /tmp
  mount --bind "$SITE/nodes/$node/spool" "$SITE/slurm/spool"
  # Each controller's hierarchy is the node's subtree of it (its cgroup namespace's root, too).
  local i=0
  for controller in "${CGROUP_CONTROLLERS[@]}"; do
    mount --bind "${NODE_CGROUP_DIRS[i]}" "/sys/fs/cgroup/$controller"
    i=$((i + 1))
  done
  slurmd -f "$(node_conf "$node")"
}

up() {
  local dir=$1
  [[ $(id -u) -eq 0 ]] || die "run as root (it creates network and mount namespaces)"
  # One site comes up at a time: two suites side by side start theirs at once, and one such start
  # failed (npm test, 2026-11-29) without a word in its log; what the two shared was not found. An
  # up takes seconds. (-o: the site's daemons, which outlive up, do not hold the lock.)
  if [[ -z ${KDGAT_SITE_UP_LOCKED:-} ]]; then
    KDGAT_SITE_UP_LOCKED=1 exec flock -o /var/tmp/kdgat-site-up.lock bash "$0" up "$dir"
  fi
  names "$dir"
  mkdir -p "$SITE"/{bin,etc,ssh,modules/cuda,fs/scratch,fs/ess,slurm,db,nodes} "$LAPTOP"
  mkdir -m 700 "$LAPTOP/tmp"
  # What runs inside the site runs this copy: the checkout is hidden there.
  cp "$0" "$SITE/bin/site.sh"
  write_slurm_config
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
SetEnv MODULEPATH=$SITE/modules
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
  # A namespace per compute node, its veth's other end on the login node (joined to the bridge there).
  local node ns
  for node in "${NODES[@]}"; do
    ns=$(node_ns "$node")
    ip netns add "$ns"
    ip link add "kn$node$NODE_TAG" type veth peer name "kb$node$NODE_TAG"
    ip link set "kn$node$NODE_TAG" netns "$ns"
    ip link set "kb$node$NODE_TAG" netns "$SITE_NS"
    ip -n "$ns" link set "kn$node$NODE_TAG" name eth0
    ip -n "$SITE_NS" link set "kb$node$NODE_TAG" name "kb-$node"
    ip -n "$ns" addr add "${NODE_IP[$node]}/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
  done
  # The site's daemons start inside its namespaces; they keep them after this shell ends. (nsenter,
  # not `ip netns exec`: that remounts /sys, and slurmd needs the cgroup mounts under it.)
  if ! nsenter --net="/run/netns/$SITE_NS" unshare --mount --uts --propagation private \
    env HPC_SITE_REPO="$REPO" SITE="$SITE" SITE_IP="$SITE_IP" NODE_TAG="$NODE_TAG" bash "$SITE/bin/site.sh" _site_init </dev/null >"$SITE/init.log" 2>&1; then
    if [[ -s $SITE/init.log ]]; then cat "$SITE/init.log" >&2; fi
    die "the site did not start (log above)"
  fi
  printf 'SITE_HOST=%s\nSITE_PORT=22\nSITE_USER=%s\nSITE_HOST_KEY=%s\nLAPTOP_KEY=%s\nSITE_ROOT=%s\n' \
    "$SITE_IP" "$(id -un)" "$(cut -d' ' -f1-2 "$SITE/ssh/host_ed25519.pub")" "$LAPTOP/id_ed25519" "$SITE"
  printf 'NODES=%s\nNODE_CPUS=%s\nNODE_MEM_MB=%s\n' "${NODES[*]}" "$NODE_CPUS" "$NODE_MEM_MB"
  printf 'ANNEX_CLUSTER=%s\nANNEX_NODES=%s\n' "$ANNEX" "${ANNEX_NODES[*]}"
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
  # The laptop's own temporary files (ssh's control sockets among them): two sites side by side
  # never see, or signal, each other's.
  export TMPDIR=$LAPTOP/tmp
  exec "$@"
}

# `node DIR NODE -- CMD…`: CMD inside a compute node's namespaces (those of its slurmd).
node_cmd() {
  local dir=$1 node=$2 pid
  shift 2
  [[ ${1:-} == -- ]] && shift
  names "$dir"
  [[ -n ${NODE_IP[$node]:-} ]] || die "no node '$node' (the nodes are ${NODES[*]})"
  pid=$(cat "$SITE/nodes/$node/spool/slurmd.pid" 2>/dev/null) || die "node $node has no slurmd running"
  exec nsenter --target "$pid" --net --mount --uts --cgroup "$@"
}

# `kill-node DIR NODE`: the node dies at once: its slurmd, its job steps, its jobs' processes.
kill_node() {
  local dir=$1 node=$2 pid killed=0
  names "$dir"
  [[ -n ${NODE_IP[$node]:-} ]] || die "no node '$node' (the nodes are ${NODES[*]})"
  for pid in $(ip netns pids "$(node_ns "$node")" 2>/dev/null); do
    if kill -9 "$pid" 2>/dev/null; then killed=$((killed + 1)); fi
  done
  printf 'site: node %s killed (%d processes)\n' "$node" "$killed" >&2
}

# `revive-node DIR NODE`: a killed node boots again (its slurmd returns it to service).
revive_node() {
  local dir=$1 node=$2 pid
  names "$dir"
  pid=$(cat "$SITE/ssh/sshd.pid") || die "the login node is not running"
  nsenter --target "$pid" --net --mount --uts env HPC_SITE_REPO="$REPO" SITE="$SITE" NODE_TAG="$NODE_TAG" \
    bash "$SITE/bin/site.sh" _start_node "$node"
}

start_node() {
  local node=$1 controller dir
  make_node_cgroups "$node"
  local dirs=()
  for controller in "${CGROUP_CONTROLLERS[@]}"; do dirs+=("$(node_cgroup_dir "$controller" "$node")"); done
  (
    for dir in "${dirs[@]}"; do echo "$BASHPID" >"$dir/cgroup.procs"; done
    exec nsenter --net="/run/netns/$(node_ns "$node")" unshare --mount --uts --cgroup --propagation private \
      env HPC_SITE_REPO="$REPO" SITE="$SITE" NODE="$node" bash "$SITE/bin/site.sh" _node_init "${dirs[@]}"
  ) </dev/null >"$SITE/nodes/$node/init.log" 2>&1 || die "node $node did not start: $(cat "$SITE/nodes/$node/init.log")"
}

# Removes a node's cgroup subtree, deepest first (SLURM's job cgroups are gone with their processes).
remove_node_cgroups() {
  local node=$1 controller dir
  for controller in "${CGROUP_CONTROLLERS[@]}"; do
    dir=$(node_cgroup_dir "$controller" "$node")
    [[ -d $dir ]] || continue
    find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null ||
      echo "site: could not remove every cgroup under $dir (a process still in it?)" >&2
  done
}

# Stops daemons together: TERM to each (FILE NAME pairs), up to 5 s for all of them, then KILL to
# those still running.
stop_pidfiles() {
  local -A names=()
  local pid
  while (($#)); do
    if pid_alive "$1"; then
      pid=$(cat "$1")
      names[$pid]=$2
      kill "$pid"
    fi
    shift 2
  done
  for _ in $(seq 50); do
    for pid in "${!names[@]}"; do kill -0 "$pid" 2>/dev/null || unset "names[$pid]"; done
    ((${#names[@]})) || return 0
    sleep 0.1
  done
  for pid in "${!names[@]}"; do
    echo "site: ${names[$pid]} ($pid) did not stop on TERM; sending KILL" >&2
    kill -9 "$pid" 2>/dev/null || echo "site: ${names[$pid]} ($pid) ended before KILL" >&2
  done
}

down() {
  local dir=$1 pid node ns
  names "$dir"
  stop_pidfiles "$SITE/ssh/sshd.pid" sshd
  # Every process in a node's or the login node's namespaces ends with them (jobs, daemons, sessions).
  for node in "${NODES[@]}"; do
    ns=$(node_ns "$node")
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || echo "site: pid $pid already gone" >&2; done
  done
  stop_pidfiles "$SITE/slurm/slurmctld.pid" slurmctld "$SITE/slurm/annex/slurmctld.pid" "slurmctld ($ANNEX)"
  stop_pidfiles "$SITE/slurm/slurmdbd.pid" slurmdbd
  stop_pidfiles "$SITE/db/mariadb.pid" mariadbd
  stop_pidfiles "$SITE/slurm/munge/munged.pid" munged
  for pid in $(ip netns pids "$SITE_NS" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || echo "site: pid $pid already gone" >&2; done
  # And the laptop's: an SSH master (ControlPersist) a runner left there would outlive the site.
  for pid in $(ip netns pids "$LAPTOP_NS" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || echo "site: pid $pid already gone" >&2; done
  sleep 0.2
  for node in "${NODES[@]}"; do remove_node_cgroups "$node"; done
  for ns in "$SITE_NS" "$LAPTOP_NS" $(for node in "${NODES[@]}"; do node_ns "$node"; echo; done); do
    if ip netns list | grep -qw "$ns"; then ip netns del "$ns"; fi
  done
  rm -rf "$dir"
}

case ${1:-} in
  up) up "${2:?usage: site.sh up DIR}" ;;
  laptop) laptop "${2:?usage: site.sh laptop DIR -- CMD…}" "${@:3}" ;;
  down) down "${2:?usage: site.sh down DIR}" ;;
  node) node_cmd "${2:?usage: site.sh node DIR NODE -- CMD…}" "${3:?usage: site.sh node DIR NODE -- CMD…}" "${@:4}" ;;
  kill-node) kill_node "${2:?usage: site.sh kill-node DIR NODE}" "${3:?usage: site.sh kill-node DIR NODE}" ;;
  revive-node) revive_node "${2:?usage: site.sh revive-node DIR NODE}" "${3:?usage: site.sh revive-node DIR NODE}" ;;
  _site_init) site_init ;;
  _node_init)
    NODE_CGROUP_DIRS=("${@:2}")
    node_init
    ;;
  _start_node) start_node "$2" ;;
  _laptop_init) laptop_init "${@:2}" ;;
  *)
    echo "usage: scripts/site/site.sh up|laptop|node|kill-node|revive-node|down DIR [NODE] [-- CMD …]" >&2
    exit 2
    ;;
esac
