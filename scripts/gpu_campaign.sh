#!/usr/bin/env bash
# gpu_campaign.sh - a GPU experiment's campaign as one bounded call on a borrowed GPU machine.
#
# Usage: gpu_campaign.sh --experiment EXP --env ENV --out DIR --stop-at SECONDS [--data DIR]
#                        [--grace SECONDS] [-- IOLAB-RUN-OPTIONS...]
#
# Made for the `device` tool's machines (a copy of this repository, CUDA's nvcc, NVML's Python
# binding, no network, a time limit per call), usable on any machine with an NVIDIA GPU. In order:
#   1. records the GPU: `nvidia-smi -q` into DIR/nvidia-smi-q.txt (model, link generation and
#      width, driver), its first lines on stdout;
#   2. a smoke point: `iolab run EXP --limit 1`, a real run that is stored like any other; its
#      drivers build what they need (with nvcc, into $IOLAB_BUILD_DIR, default .build/);
#   3. the build record, DIR/build-record.txt: nvcc's version, and for each program in the build
#      folder its sha256 and the machine code it embeds (cuobjdump --list-elf);
#   4. the campaign: `iolab run EXP --env ENV` in the background. SECONDS after this script
#      started (and at least 10 s after the campaign started, once its signal handlers are in
#      place) it is asked to stop after its current run (SIGUSR1, the runner's own early stop),
#      so that every finished run is stored and the knobs restored; if it is still running GRACE
#      seconds later (default 60) it gets SIGTERM, which ends the run in progress unstored;
#   5. packs DATA/raw/EXP/ENV (runs, host.json, campaign log), the build record, the GPU's
#      record and this script's own log (DIR/gpu-campaign.log) into DIR/EXP-ENV.tar.gz,
#      then prints `iolab status` of the data directory.
# A step that fails ends the script with its status after packing what exists, so a failed build
# or smoke point still returns its logs. Running it again resumes the campaign: stored runs are
# kept (the data directory, default /root/iolab-gpu-data, lies outside the repository copy so
# that it survives the next call's copy of the working tree on a machine kept warm).
#
# The Python that runs iolab is $IOLAB_PYTHON, else python3; it needs PyYAML and tqdm, and
# nvidia-ml-py for the NVML counter (all three are in the device machines' image).
#
# Exit status: 0 the campaign finished or stopped as asked and was packed; 2 a usage error;
# 1 the packing failed after a campaign that did not; otherwise the
# status of the step that failed (iolab's own statuses; a driver that cannot build its program
# makes the smoke point fail).
set -uo pipefail

prog=gpu_campaign.sh
here=$(CDPATH= cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
start=$SECONDS

usage() {
    echo "usage: $prog --experiment EXP --env ENV --out DIR --stop-at SECONDS [--data DIR]" \
         "[--grace SECONDS] [-- IOLAB-RUN-OPTIONS...]" >&2
    echo "$prog: $1" >&2
    exit 2
}

is_count() { [[ "$1" =~ ^[0-9]+$ ]]; }

experiment="" env_name="" out="" stop_at="" data=/root/iolab-gpu-data grace=60
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --experiment|--env|--out|--stop-at|--data|--grace)
            [[ $# -ge 2 && -n "$2" ]] || usage "$1 needs a value"
            case "$1" in
                --experiment) experiment=$2 ;; --env) env_name=$2 ;; --out) out=$2 ;; --stop-at) stop_at=$2 ;;
                --data) data=$2 ;; --grace) grace=$2 ;;
            esac
            shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) usage "unknown argument '$1' (allowed: --experiment, --env, --out, --stop-at, --data," \
                 "--grace, --)" ;;
    esac
done
[[ -n "$experiment" ]] || usage "--experiment is required (one of 'iolab experiments')"
[[ "$experiment" =~ ^[A-Za-z0-9_]+$ ]] || usage "--experiment '$experiment': letters, digits, '_' only"
[[ -n "$env_name" ]] || usage "--env is required (an environment in notebooks/params/)"
[[ "$env_name" =~ ^[A-Za-z0-9._-]+$ ]] || usage "--env '$env_name': letters, digits, '.', '_', '-' only"
[[ -f "$repo/notebooks/params/$env_name/$experiment.yaml" ]] ||
    usage "--env '$env_name': no notebooks/params/$env_name/$experiment.yaml"
[[ -n "$out" ]] || usage "--out is required (the folder the results are packed into)"
[[ -n "$stop_at" ]] || usage "--stop-at is required (seconds after the start to stop the campaign)"
is_count "$stop_at" || usage "--stop-at '$stop_at': a whole number of seconds"
is_count "$grace" || usage "--grace '$grace': a whole number of seconds"

mkdir -p "$out" "$data" || exit 1
out=$(cd "$out" && pwd)
data=$(cd "$data" && pwd)
log="$out/gpu-campaign.log"
exec > >(tee -a "$log") 2>&1

py=${IOLAB_PYTHON:-python3}
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
iolab=("$py" -m iolab)  # an array, not a function: the background campaign's pid is Python's
say() { printf '[%s +%ss] %s\n' "$(date -u +%H:%M:%S)" "$((SECONDS - start))" "$*"; }

pack() {
    local status=$1 tarball="$out/$experiment-$env_name.tar.gz" parts=()
    say "packing (status $status)"
    [[ -d "$data/raw/$experiment/$env_name" ]] && parts+=(-C "$data" "raw/$experiment/$env_name")
    parts+=(-C "$out")
    for f in nvidia-smi-q.txt build-record.txt gpu-campaign.log; do
        [[ -f "$out/$f" ]] && parts+=("$f")
    done
    if tar -czf "$tarball.tmp" "${parts[@]}" && mv -f "$tarball.tmp" "$tarball"; then
        say "packed $(tar -tzf "$tarball" | grep -c '/run.json$') stored runs into $tarball"
    else
        say "packing into $tarball failed: what was stored is still in $data"
        [[ $status -ne 0 ]] || status=1
    fi
    "${iolab[@]}" status --data "$data" || true
    exit "$status"
}

# the build record: the compiler and what it built
record_build() {
    local build="${IOLAB_BUILD_DIR:-$repo/.build}" nvcc bin
    nvcc=$(type -P nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
    {
        echo "# the programs built for the campaign, recorded by $prog on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "nvcc: $nvcc"
        "$nvcc" --version 2>&1 || echo "(nvcc did not run)"
        for bin in "$build"/*; do
            [[ -f "$bin" && -x "$bin" ]] || continue
            echo "program: ${bin##*/}"
            echo "sha256: $(sha256sum <"$bin" | cut -d' ' -f1)"
            [[ -f "$bin.stamp" ]] && echo "source_sha256: $(<"$bin.stamp")"
            echo "# cuobjdump --list-elf"
            cuobjdump --list-elf "$bin" 2>&1 || true
        done
    } >"$out/build-record.txt"
    cat "$out/build-record.txt"
}

say "campaign $experiment for environment $env_name; data in $data; stop asked at +${stop_at}s"

# 1. the GPU
if nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1; then
    grep -E 'Product Name|Driver Version|CUDA Version|Bus Id|PCIe Generation|Link Width|Max$|Current$' \
        "$out/nvidia-smi-q.txt" | head -20
else
    say "nvidia-smi -q failed:"; cat "$out/nvidia-smi-q.txt"
fi

# 2. one smoke point through the whole pipeline (its drivers build what they need), and
# 3. the build record
say "smoke point"
smoke=0
"${iolab[@]}" run "$experiment" --env "$env_name" --data "$data" --limit 1 \
    ${extra[@]+"${extra[@]}"} || smoke=$?
record_build
[[ $smoke -eq 0 ]] || { say "the smoke point failed (status $smoke)"; pack "$smoke"; }

# 4. the campaign, stopped after its current run at +stop_at
say "campaign"
# (an empty array under set -u: bash before 4.4 calls "${extra[@]}" unbound)
"${iolab[@]}" run "$experiment" --env "$env_name" --data "$data" ${extra[@]+"${extra[@]}"} &
pid=$!
launched=$SECONDS
# never before 10 s: until the campaign has installed its handlers, SIGUSR1 would kill it
while kill -0 "$pid" 2>/dev/null && ((SECONDS - start < stop_at || SECONDS - launched < 10)); do
    sleep 1
done
if kill -0 "$pid" 2>/dev/null; then
    say "time is nearly up: asking the campaign to stop after its current run"
    kill -USR1 "$pid"
    waited=0
    while kill -0 "$pid" 2>/dev/null && ((waited < grace)); do sleep 1; waited=$((waited + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        say "still running after ${grace}s: SIGTERM"
        kill -TERM "$pid"
    fi
fi
status=0
wait "$pid" || status=$?
say "campaign ended with status $status"
# 3: stopped on request with runs left; that is what was asked for
[[ $status -eq 3 ]] && status=0
pack "$status"
