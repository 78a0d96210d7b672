#!/usr/bin/env bash
# fio.sh - run fio once and leave its JSON report in a file of the caller's choosing.
#
# Usage: fio.sh --output FILE [fio options...]
#        fio.sh --output=FILE [fio options...]
#
# What it does: checks that fio is installed, prints `fio --version` as the first
# line of stdout (provenance for the runner's log), then replaces itself with
#   fio --output-format=json+ --output=FILE [fio options...]
# so the JSON report goes only to FILE and fio's own messages stay on stdout/stderr.
# Every fio option is passed through unchanged as a separate argument; nothing is
# re-parsed by a shell. This script never reads or interprets fio's output: that is
# the job of iolab/parsers/fio.py.
#
# Exit status: 2 for a usage error, 127 if fio is not on PATH, otherwise fio's own.
#
# iolab-driver-version: 1
set -euo pipefail

usage() {
    echo "usage: fio.sh --output FILE [fio options...]" >&2
    echo "fio.sh: $1" >&2
    exit 2
}

out=""
case "${1-}" in
    --output)
        [[ $# -ge 2 ]] || usage "--output needs a file name"
        out="$2"
        shift 2
        ;;
    --output=*)
        out="${1#--output=}"
        shift
        ;;
    *)
        usage "the first argument must be --output FILE"
        ;;
esac
[[ -n "$out" ]] || usage "--output needs a non-empty file name"
# A value like "--name=x" means the file name was left out; use ./-x for such a file.
[[ "$out" != -* ]] || usage "--output needs a file name, got option '$out'"

if ! command -v fio >/dev/null 2>&1; then
    echo "fio.sh: fio not found on PATH; install it with 'apt-get install fio' or 'conda install -c conda-forge fio'" >&2
    exit 127
fi

fio --version
exec fio --output-format=json+ --output="$out" "$@"
