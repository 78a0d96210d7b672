#!/usr/bin/env bash
# bdevperf.sh - run SPDK's bdevperf once; optionally also capture its JSON results.
#
# Usage: bdevperf.sh --spdk-dir DIR --config FILE [--json-results FILE] -- [bdevperf options...]
#        bdevperf.sh --spdk-dir DIR --version
#
# DIR is an SPDK source tree with a build (DIR/build/examples/bdevperf). A build with shared
# libraries (--with-shared) has no rpath to them, so DIR/build/lib, when present, is put in
# front of LD_LIBRARY_PATH. --version prints bdevperf's version line and exits. FILE after
# --config is the SPDK JSON subsystem configuration (bdevperf -c), e.g. written by
# iolab.tools.bdevperf.bdev_config. Everything after -- goes to bdevperf unchanged, one argument each
# (e.g. -m 0x3 -q 128 -o 512 -t 10 -w randread); nothing is re-parsed by a shell.
#
# What it does: prints the bdevperf path and, if DIR is a git checkout, `git describe` of
# the source tree (bdevperf prints its own "Starting SPDK vX" line), then
#   without --json-results: replaces itself with  bdevperf -c FILE [options...]
#     so the results table goes to stdout;
#   with --json-results OUT (SPDK >= 24.09): starts  bdevperf -c FILE -z -r SOCK [options...]
#     in the background, waits until it serves RPC and has attached its bdevs, runs
#     DIR/examples/bdev/bdevperf/bdevperf.py perform_tests with its stdout (the results as
#     pretty-printed JSON) going to OUT, then stops bdevperf with SIGINT and waits for it.
#     bdevperf's own stdout and stderr, with the text table, stay on this script's. Do not
#     pass -z or -r yourself in this mode. On exit, and on SIGINT or SIGTERM to this
#     script, a trap stops the RPC client and bdevperf if they still run.
# This script never reads or interprets bdevperf's output: iolab/parsers/bdevperf.py does.
#
# Exit status: 2 for a usage error, 127 if bdevperf (or, for JSON results, bdevperf.py,
# rpc.py or python3) is missing; otherwise bdevperf's own, or in JSON mode the status of
# perform_tests if that failed (its error message is then in OUT), else bdevperf's.
#
# iolab-driver-version: 2
set -euo pipefail

prog=bdevperf.sh

usage() {
    echo "usage: $prog --spdk-dir DIR --config FILE [--json-results FILE] -- [bdevperf options...]" >&2
    echo "$prog: $1" >&2
    exit 2
}

missing() {
    echo "$prog: $1" >&2
    exit 127
}

# Option values may not look like options: "--config -q" means the file name was left out.
value_of() {
    [[ $# -ge 2 && -n "$2" ]] || usage "$1 needs a value"
    [[ "$2" != -* ]] || usage "$1 needs a value, got option '$2'"
}

spdk_dir=""
config=""
json_out=""
version=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --spdk-dir)
            value_of "$@"
            spdk_dir="$2"
            shift 2
            ;;
        --config)
            value_of "$@"
            config="$2"
            shift 2
            ;;
        --json-results)
            value_of "$@"
            json_out="$2"
            shift 2
            ;;
        --version)
            version=1
            shift
            ;;
        --)
            shift
            break
            ;;
        *)
            usage "unknown option '$1' (bdevperf's own options go after --)"
            ;;
    esac
done
[[ -n "$spdk_dir" ]] || usage "--spdk-dir DIR is required"
[[ $version -eq 1 || -n "$config" ]] || usage "--config FILE is required"

bdevperf="$spdk_dir/build/examples/bdevperf"
if [[ ! -x "$bdevperf" ]]; then
    missing "bdevperf not found under $spdk_dir/build/examples; build SPDK ('make tools') or set spdk_dir in the params file"
fi
if [[ -d "$spdk_dir/build/lib" ]]; then
    export LD_LIBRARY_PATH="$spdk_dir/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [[ $version -eq 1 ]]; then
    exec "$bdevperf" --version
fi
[[ -r "$config" ]] || usage "the bdev config '$config' does not exist or is not readable"

provenance() {
    echo "bdevperf: $bdevperf"
    # Only DIR's own checkout: git would otherwise describe a repository around it.
    if [[ -e "$spdk_dir/.git" ]] && command -v git >/dev/null 2>&1; then
        # A checkout git refuses to read (another owner) prints nothing here.
        local describe
        describe=$(git -C "$spdk_dir" describe --tags --always --dirty 2>/dev/null || true)
        [[ -z "$describe" ]] || echo "spdk source: $describe"
    fi
}

if [[ -z "$json_out" ]]; then
    provenance
    exec "$bdevperf" -c "$config" "$@"
fi

script="$spdk_dir/examples/bdev/bdevperf/bdevperf.py"
rpc="$spdk_dir/scripts/rpc.py"
[[ -f "$script" ]] || missing "bdevperf.py not found under $spdk_dir/examples/bdev/bdevperf; JSON results need SPDK >= 24.09"
[[ -f "$rpc" ]] || missing "rpc.py not found under $spdk_dir/scripts"
command -v python3 >/dev/null 2>&1 || missing "python3 not found on PATH; SPDK's RPC client needs it"

# perform_tests waits for the whole test, so its RPC timeout must outlast bdevperf's -t
# (the client's default is 60 s); the margin covers creating the jobs.
rpc_timeout=60
prev=""
for arg in "$@"; do
    case "$arg" in
        -z | -r | --rpc-socket | --rpc-socket=*)
            usage "with --json-results this script sets bdevperf's $arg itself"
            ;;
    esac
    if [[ "$prev" == "-t" && "$arg" =~ ^[0-9]+$ ]]; then
        rpc_timeout=$((arg + 60))
    fi
    prev="$arg"
done

workdir=$(mktemp -d "${TMPDIR:-/tmp}/iolab-bdevperf.XXXXXX")
sock="$workdir/spdk.sock"
pid=""     # bdevperf
client=""  # the RPC client now running

# Runs an RPC client in the background and waits for it: bash runs a trap only after the
# foreground command ends, but it interrupts `wait`, so a signal is acted on at once.
run_client() {
    "$@" &
    client=$!
    local status=0
    wait "$client" || status=$?
    client=""
    return "$status"
}

bdevperf_status=0
stop_bdevperf() {
    [[ -n "$pid" ]] || return 0
    kill -INT "$pid" 2>/dev/null || true
    # Detaching many controllers takes a few seconds; after 20 s, force it.
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    kill -KILL "$pid" 2>/dev/null || true
    bdevperf_status=0
    wait "$pid" 2>/dev/null || bdevperf_status=$?
    pid=""
}

# shellcheck disable=SC2317  # only called from the EXIT trap, which shellcheck cannot see
cleanup() {
    if [[ -n "$client" ]]; then
        kill -TERM "$client" 2>/dev/null || true
        wait "$client" 2>/dev/null || true
    fi
    stop_bdevperf
    rm -rf "$workdir"
}
trap cleanup EXIT
# A signal to this script ends it through the EXIT trap, which stops bdevperf.
trap 'exit 130' INT
trap 'exit 143' TERM

rpc_env=(env "PYTHONPATH=$spdk_dir/python${PYTHONPATH:+:$PYTHONPATH}")

provenance
"$bdevperf" -c "$config" -z -r "$sock" "$@" &
pid=$!

# The socket appears early in start-up; give hugepage setup and probing a minute.
for _ in $(seq 600); do
    [[ -S "$sock" ]] && break
    if ! kill -0 "$pid" 2>/dev/null; then
        status=0
        wait "$pid" || status=$?
        pid=""
        echo "$prog: bdevperf exited with status $status before serving RPC" >&2
        exit $((status == 0 ? 1 : status))
    fi
    sleep 0.1
done
if [[ ! -S "$sock" ]]; then
    echo "$prog: bdevperf did not open its RPC socket $sock within 60 s" >&2
    exit 1
fi
# perform_tests is refused until the framework (bdev subsystem included) has started.
wait_status=0
run_client "${rpc_env[@]}" python3 "$rpc" -s "$sock" -t 120 framework_wait_init >/dev/null ||
    wait_status=$?
if [[ $wait_status -ne 0 ]]; then
    echo "$prog: framework_wait_init failed with status $wait_status" >&2
    exit "$wait_status"
fi

rpc_status=0
run_client "${rpc_env[@]}" python3 "$script" -s "$sock" -t "$rpc_timeout" perform_tests \
    >"$json_out" || rpc_status=$?
if [[ $rpc_status -ne 0 ]]; then
    echo "$prog: perform_tests failed with status $rpc_status; its message is in $json_out" >&2
fi

stop_bdevperf

if [[ $rpc_status -ne 0 ]]; then
    exit "$rpc_status"
fi
exit "$bdevperf_status"
