#!/usr/bin/env bash
# xnvmeperf.sh - run xNVMe's xnvmeperf once, recording which program ran and, for runs that
# move data to GPU memory, which GPU.
#
# Usage: xnvmeperf.sh --xnvmeperf PATH [--gpu-info] [--line-times FILE] -- <xnvmeperf arguments, subcommand first>
#
# PATH is the xnvmeperf to run (a name without '/' is looked up on PATH). Everything after --
# goes to xnvmeperf unchanged, one argument each (e.g. cuda-run 0000:4a:00.0 --qdepth 64
# --iosize 4096 --runtime 10 --iopattern randread); nothing is re-parsed by a shell.
#
# What it does: prints provenance lines on stdout, before anything xnvmeperf prints:
#   xnvmeperf: PATH
# and with --gpu-info (for the upcie-cuda back end and cuda-run, whose I/O lands in GPU memory):
#   iolab-gpu: <index>, <pci.bus_id>, <name>, <pcie.link.gen.max>, <pcie.link.width.max>
#       one line per GPU, as `nvidia-smi --query-gpu=index,pci.bus_id,name,pcie.link.gen.max,
#       pcie.link.width.max --format=csv,noheader` prints it;
#   iolab-gpu-used: N
#       the value of xnvmeperf's --gpu_id among the arguments (the last one if given twice;
#       0, xnvmeperf's default, when absent): the index of the iolab-gpu line of the GPU the
#       run used. When CUDA_VISIBLE_DEVICES is set, CUDA counts only the GPUs it lists, so
#       the line says `iolab-gpu-used: unknown (CUDA_VISIBLE_DEVICES is set)` instead.
# With --gpu-info it also exports CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA's default order puts the
# fastest GPU first, so --gpu_id N could name another GPU than nvidia-smi's index N; in PCI
# bus order a CUDA ordinal counts GPUs as NVML's and nvidia-smi's indices do.
# Then it replaces itself with  PATH <xnvmeperf arguments>.
# With --line-times FILE it runs xnvmeperf line-buffered (coreutils' stdbuf, where present)
# with its stdout passed on line by line, and writes to FILE one CLOCK_REALTIME stamp (ns,
# microsecond resolution) per line of xnvmeperf's stdout, taken as the line arrives. The
# stamp of xnvmeperf's result title tells when its measurement ended (iolab's adapter takes
# the window as that stamp minus the elapsed time xnvmeperf reports), so the GPU counters can
# be cut to the measurement instead of the whole process with its set-up and teardown.
# This script never reads xnvmeperf's output: iolab/tools/xnvmeperf.py and
# iolab/parsers/xnvmeperf.py do, and skip these lines.
#
# Exit status: 2 for a usage error; 127 if PATH is not an executable file, or, with
# --gpu-info, if nvidia-smi is missing, fails or lists no GPU (the GPU a run used could not
# be recorded; nothing is run); otherwise xnvmeperf's own.
#
# iolab-driver-version: 1
set -euo pipefail

prog=xnvmeperf.sh

usage() {
    echo "usage: $prog --xnvmeperf PATH [--gpu-info] [--line-times FILE] -- <xnvmeperf arguments, subcommand first>" >&2
    echo "$prog: $1" >&2
    exit 2
}

missing() {
    echo "$prog: $1" >&2
    exit 127
}

exe=""
gpu_info=0
times=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --xnvmeperf)
            # "--xnvmeperf --gpu-info" means the path was left out
            [[ $# -ge 2 && -n "$2" ]] || usage "--xnvmeperf needs a path"
            [[ "$2" != -* ]] || usage "--xnvmeperf needs a path, got option '$2'"
            exe="$2"
            shift 2
            ;;
        --gpu-info)
            gpu_info=1
            shift
            ;;
        --line-times)
            [[ $# -ge 2 && -n "$2" ]] || usage "--line-times needs a file name"
            [[ "$2" != -* ]] || usage "--line-times needs a file name, got option '$2'"
            times="$2"
            shift 2
            ;;
        --)
            shift
            break
            ;;
        *)
            usage "unknown option '$1' (xnvmeperf's own arguments go after --)"
            ;;
    esac
done
[[ -n "$exe" ]] || usage "--xnvmeperf PATH is required"
[[ $# -ge 1 ]] || usage "xnvmeperf's arguments are missing after --"
[[ "$1" != -* ]] || usage "xnvmeperf's arguments must start with the subcommand, got '$1'"

if [[ "$exe" != */* ]]; then
    found=$(type -P "$exe" || true)
    [[ -n "$found" ]] || missing "'$exe' not found on PATH; build and install xNVMe (https://xnvme.io) or give xnvmeperf's path with --xnvmeperf"
    exe="$found"
fi
if [[ ! -f "$exe" || ! -x "$exe" ]]; then
    missing "'$exe' is not an executable file; build and install xNVMe (https://xnvme.io) or give xnvmeperf's path with --xnvmeperf"
fi

# The GPU listing is taken before anything is printed, so a failure leaves stdout empty.
listing=""
if [[ $gpu_info -eq 1 ]]; then
    cannot="the GPU this run uses cannot be recorded, so it is not run"
    type -P nvidia-smi >/dev/null || missing "nvidia-smi not found on PATH: $cannot (install the NVIDIA driver's utilities)"
    status=0
    listing=$(nvidia-smi --query-gpu=index,pci.bus_id,name,pcie.link.gen.max,pcie.link.width.max \
        --format=csv,noheader) || status=$?
    if [[ $status -ne 0 ]]; then
        # nvidia-smi says why on stdout ("NVIDIA-SMI has failed because ...")
        said="${listing%%$'\n'*}"
        missing "nvidia-smi failed with status $status (${said:-no output}): $cannot"
    fi
    [[ -n "$listing" ]] || missing "nvidia-smi listed no GPU: $cannot"

    gpu_used=0
    prev=""
    for arg in "$@"; do
        case "$arg" in
            --gpu_id=*) gpu_used="${arg#--gpu_id=}" ;;
        esac
        [[ "$prev" != "--gpu_id" ]] || gpu_used="$arg"
        prev="$arg"
    done
    # CUDA ordinals then count only the listed GPUs, which need not start at index 0
    [[ -z "${CUDA_VISIBLE_DEVICES+set}" ]] || gpu_used="unknown (CUDA_VISIBLE_DEVICES is set)"
    export CUDA_DEVICE_ORDER=PCI_BUS_ID
fi

echo "xnvmeperf: $exe"
if [[ $gpu_info -eq 1 ]]; then
    while IFS= read -r line; do
        echo "iolab-gpu: $line"
    done <<<"$listing"
    echo "iolab-gpu-used: $gpu_used"
fi
if [[ -z "$times" ]]; then
    exec "$exe" "$@"
fi

# One stamp per line as it arrives; bash's EPOCHREALTIME needs no process per line.
stamp_lines() {
    local line
    while IFS= read -r line || [[ -n "$line" ]]; do
        printf '%s\n' "$line"
        printf '%s000\n' "${EPOCHREALTIME//[.,]/}" >&3
    done
}
: >"$times" || usage "cannot write the line times to '$times'"
# xnvmeperf's stdio would buffer a pipe until it exits, stamping every line at the end
linebuf=()
if type -P stdbuf >/dev/null; then
    linebuf=(stdbuf -oL)
fi
set +e
"${linebuf[@]}" "$exe" "$@" | stamp_lines 3>>"$times"
statuses=("${PIPESTATUS[@]}")
set -e
exit "${statuses[0]}"
