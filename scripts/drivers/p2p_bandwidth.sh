#!/usr/bin/env bash
# p2p_bandwidth.sh - run cuda-samples' p2pBandwidthLatencyTest once, recording which program
# ran and which GPUs the host has.
#
# Usage: p2p_bandwidth.sh --executable PATH -- [test options...]
#
# PATH is the built test (a name without '/' is looked up on PATH). Everything after -- goes
# to the test unchanged, one argument each (e.g. --p2p_read --numElems=1000000); nothing is
# re-parsed by a shell.
#
# What it does: prints provenance lines on stdout, before anything the test prints:
#   p2pBandwidthLatencyTest: PATH
#   iolab-gpu: <index>, <pci.bus_id>, <name>, <pcie.link.gen.max>, <pcie.link.width.max>
#       one line per GPU, as `nvidia-smi --query-gpu=index,pci.bus_id,name,pcie.link.gen.max,
#       pcie.link.width.max --format=csv,noheader` prints it; when nvidia-smi is missing or
#       fails, one line `iolab-gpu: unavailable (<why>)` instead, and the test still runs:
#       it prints its own "Device: i, <name>, pciBusID: …" lines, so its matrices stay
#       attributable to GPUs without this listing;
# then replaces itself with  PATH [test options...].
# This script never reads the test's output: iolab/tools/p2p_bandwidth.py and
# iolab/parsers/p2p_bandwidth.py do, and skip these lines.
#
# Exit status: 2 for a usage error, 127 if PATH is not an executable file, otherwise the
# test's own.
#
# iolab-driver-version: 1
set -euo pipefail

prog=p2p_bandwidth.sh

usage() {
    echo "usage: $prog --executable PATH -- [test options...]" >&2
    echo "$prog: $1" >&2
    exit 2
}

missing() {
    echo "$prog: $1" >&2
    exit 127
}

exe=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --executable)
            # "--executable --" means the path was left out
            [[ $# -ge 2 && -n "$2" ]] || usage "--executable needs a path"
            [[ "$2" != -* ]] || usage "--executable needs a path, got option '$2'"
            exe="$2"
            shift 2
            ;;
        --)
            shift
            break
            ;;
        *)
            usage "unknown option '$1' (the test's own options go after --)"
            ;;
    esac
done
[[ -n "$exe" ]] || usage "--executable PATH is required"

build="build cuda-samples (https://github.com/NVIDIA/cuda-samples) and give the test's path with --executable"
if [[ "$exe" != */* ]]; then
    found=$(type -P "$exe" || true)
    [[ -n "$found" ]] || missing "'$exe' not found on PATH; $build"
    exe="$found"
fi
[[ -f "$exe" && -x "$exe" ]] || missing "'$exe' is not an executable file; $build"

# Taken before anything is printed, so the listing's lines stay together.
listing=""
if ! type -P nvidia-smi >/dev/null; then
    listing="unavailable (nvidia-smi not found)"
else
    status=0
    listing=$(nvidia-smi --query-gpu=index,pci.bus_id,name,pcie.link.gen.max,pcie.link.width.max \
        --format=csv,noheader) || status=$?
    if [[ $status -ne 0 ]]; then
        # nvidia-smi says why on stdout ("NVIDIA-SMI has failed because ...")
        said="${listing%%$'\n'*}"
        listing="unavailable (nvidia-smi failed with status $status${said:+: $said})"
    elif [[ -z "$listing" ]]; then
        listing="unavailable (nvidia-smi listed no GPU)"
    fi
fi

echo "p2pBandwidthLatencyTest: $exe"
while IFS= read -r line; do
    echo "iolab-gpu: $line"
done <<<"$listing"
exec "$exe" "$@"
