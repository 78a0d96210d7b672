#!/usr/bin/env bash
# uring_reader.sh - run the project's io_uring reader, building it first when needed.
#
# Usage: uring_reader.sh --version
#        uring_reader.sh --output FILE --file PATH --cpus LIST [reader options...]
#
# What it does: compiles scripts/src/uring_reader.c with liburing into $IOLAB_BUILD_DIR
# (default: .build/ in the repository, git-ignored) when the binary is missing or was built
# from another version of the source (a sha256 stamp beside it), then replaces itself with
# the reader. Every option is passed through unchanged as a separate argument. The reader
# writes its JSON report to --output; see the source for its options and format.
#
# Exit status: 127 when the C compiler or liburing is missing (the message says what to
# install), otherwise the reader's own (0 measured, 1 I/O error, 2 usage error).
#
# iolab-driver-version: 1
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src="$here/../src/uring_reader.c"
build="${IOLAB_BUILD_DIR:-$here/../../.build}"
bin="$build/uring_reader"
want=$(sha256sum "$src" | cut -d' ' -f1)

build_it() {
    if ! command -v cc >/dev/null 2>&1; then
        echo "uring_reader.sh: no C compiler (cc); install it with 'apt-get install gcc'" >&2
        exit 127
    fi
    if ! { pkg-config --exists liburing 2>/dev/null || [[ -f /usr/include/liburing.h ]]; }; then
        echo "uring_reader.sh: liburing is missing; install it with 'apt-get install liburing-dev'" \
             "(Debian/Ubuntu) or 'dnf install liburing-devel' (Fedora)" >&2
        exit 127
    fi
    local version tmp
    version=$(pkg-config --modversion liburing 2>/dev/null || echo unknown)
    mkdir -p "$build"
    # built beside its final place and renamed: two campaigns never run a half-written binary
    tmp=$(mktemp "$build/.uring_reader.XXXXXX")
    cc -O2 -Wall -pthread -DLIBURING_VERSION="\"$version\"" "$src" -luring -o "$tmp"
    mv -f "$tmp" "$bin"
    echo "$want" > "$bin.stamp"
}

if [[ ! -x "$bin" || "$(cat "$bin.stamp" 2>/dev/null)" != "$want" ]]; then
    build_it
fi
exec "$bin" "$@"
