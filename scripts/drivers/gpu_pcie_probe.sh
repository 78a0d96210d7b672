#!/usr/bin/env bash
# gpu_pcie_probe.sh - run the project's CUDA PCIe probe, building it first when needed.
#
# Usage: gpu_pcie_probe.sh --version
#        gpu_pcie_probe.sh --output FILE [probe options...]
#
# What it does: compiles scripts/src/gpu_pcie_probe.cu with nvcc into $IOLAB_BUILD_DIR
# (default: .build/ in the repository, git-ignored) when the binary is missing or was built
# from another version of the source (a sha256 stamp beside it), as
#   nvcc -O3 -std=c++17 -arch=native -o TMP SRC
# and, when that fails (nvcc finds no GPU to ask, or an old nvcc), again with -arch=sm_90;
# TMP lies beside the binary and is renamed over it, so no run ever starts a half-written one.
# nvcc is looked up on PATH, then at $CUDA_HOME/bin/nvcc (CUDA_HOME defaults to /usr/local/cuda).
#
# For a measuring call (anything but a lone --version) it then prints provenance lines on
# stdout, before anything the probe prints:
#   gpu_pcie_probe: <the binary's path>
#   iolab-gpu-clocks: <index>, <pci.bus_id>, <clocks.sm>, <clocks.mem>, <clocks.max.sm>,
#       <clocks.max.mem>, <pcie.link.gen.current>, <pcie.link.width.current>
#       one line per GPU (MHz; the link's current generation and width), as
#       `nvidia-smi --query-gpu=index,pci.bus_id,clocks.sm,clocks.mem,clocks.max.sm,
#       clocks.max.mem,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader,nounits`
#       prints it, taken just before the probe starts; when nvidia-smi is missing, fails or
#       lists nothing, one line `iolab-gpu-clocks: unavailable (<why>)` instead (the probe's
#       report names its GPU by PCI bus id either way).
# It exports CUDA_DEVICE_ORDER=PCI_BUS_ID unless it is set: CUDA's default order puts the
# fastest GPU first, so the probe's --device N could name another GPU than nvidia-smi's index N.
# Then it replaces itself with the probe, every argument passed through unchanged. The probe
# writes its JSON report to --output; see the source for its options and format.
#
# Exit status: 2 for no arguments; 127 when the binary must be built and nvcc is missing;
# 1 when the build fails (nvcc's output on stderr); otherwise the probe's own (0 measured,
# 1 a CUDA or system error, 2 a usage error).
#
# iolab-driver-version: 1
set -euo pipefail

prog=gpu_pcie_probe.sh
here=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
src="$(cd "$here/../src" && pwd)/gpu_pcie_probe.cu"
build="${IOLAB_BUILD_DIR:-$here/../../.build}"
mkdir -p "$build"
build=$(cd "$build" && pwd)
bin="$build/gpu_pcie_probe"

if [[ $# -eq 0 ]]; then
    echo "usage: $prog --version | $prog --output FILE [probe options...]" >&2
    echo "$prog: no arguments" >&2
    exit 2
fi

want=$(sha256sum <"$src")
want=${want%% *}

find_nvcc() {
    local found
    found=$(type -P nvcc || true)
    if [[ -z "$found" && -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]]; then
        found="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
    fi
    printf '%s' "$found"
}

build_it() {
    local nvcc tmp log
    nvcc=$(find_nvcc)
    if [[ -z "$nvcc" ]]; then
        echo "$prog: nvcc not found (on PATH or at ${CUDA_HOME:-/usr/local/cuda}/bin/nvcc):" \
             "the CUDA toolkit's nvcc is needed to build the probe, and no GPU run is possible" \
             "without it; install the CUDA toolkit" >&2
        exit 127
    fi
    tmp=$(mktemp "$build/.gpu_pcie_probe.XXXXXX")
    log=$(mktemp "$build/.gpu_pcie_probe.log.XXXXXX")
    if ! "$nvcc" -O3 -std=c++17 -arch=native -o "$tmp" "$src" >"$log" 2>&1; then
        if ! "$nvcc" -O3 -std=c++17 -arch=sm_90 -o "$tmp" "$src" >>"$log" 2>&1; then
            echo "$prog: building $src failed, with -arch=native and with -arch=sm_90;" \
                 "nvcc said:" >&2
            printf '%s\n' "$(<"$log")" >&2
            rm -f "$tmp" "$log"
            exit 1
        fi
        echo "$prog: nvcc -arch=native failed (no GPU visible to nvcc?);" \
             "built for -arch=sm_90" >&2
    fi
    rm -f "$log"
    chmod 755 "$tmp"
    mv -f "$tmp" "$bin"
    echo "$want" >"$bin.stamp"
}

stamp=""
[[ ! -f "$bin.stamp" ]] || stamp=$(<"$bin.stamp")
if [[ ! -x "$bin" || "$stamp" != "$want" ]]; then
    build_it
fi

export CUDA_DEVICE_ORDER="${CUDA_DEVICE_ORDER:-PCI_BUS_ID}"
if [[ $# -eq 1 && "$1" == --version ]]; then
    exec "$bin" --version
fi

echo "gpu_pcie_probe: $bin"
if type -P nvidia-smi >/dev/null; then
    status=0
    fields=index,pci.bus_id,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem
    fields+=,pcie.link.gen.current,pcie.link.width.current
    listing=$(nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits) || status=$?
    if [[ $status -ne 0 ]]; then
        # nvidia-smi says why on stdout ("NVIDIA-SMI has failed because ...")
        said="${listing%%$'\n'*}"
        echo "iolab-gpu-clocks: unavailable (nvidia-smi failed with status $status: ${said:-no output})"
    elif [[ -z "$listing" ]]; then
        echo "iolab-gpu-clocks: unavailable (nvidia-smi listed no GPU)"
    else
        while IFS= read -r line; do
            echo "iolab-gpu-clocks: $line"
        done <<<"$listing"
    fi
else
    echo "iolab-gpu-clocks: unavailable (nvidia-smi not found)"
fi
exec "$bin" "$@"
