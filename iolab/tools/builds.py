"""Where the tools built by ``make tools`` (``scripts/build_tools.py``) are, and what was built.

The build folder is ``$IOLAB_TOOLS_DIR`` when set, else ``.tools/`` in the repository. Each
tool's folder holds ``iolab-build.json``: its version, source commit, the patches applied to it
and why, the configure options and the system libraries it was built against. A record is
read only when it is a regular file of at most :data:`RECORD_MOST` bytes, holding JSON nested
no deeper than the build script writes it; anything else is refused in one line.

Responsible for: finding a built SPDK tree and xnvmeperf, and reading their build records.
Not responsible for: building (the script), or choosing between a built tool, one on PATH and
one a params file names (the adapters do, in that order: params, build folder, PATH).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from iolab.errors import InputError, ParseError, ToolError
from iolab.parsers import load_json
from iolab.paths import REPO_ROOT
from iolab.safefiles import read_regular

RECORD = "iolab-build.json"
RECORD_MOST = 1 << 20  # bytes of a build record at most: the script writes a few kB
BDEVPERF = Path("build") / "examples" / "bdevperf"
# The SPDK adaptation that skips DPDK's PCI ABI guard (scripts/patches/spdk/): such a build
# may run only without PCI access.
PCI_GUARD_PATCH = "dpdk-22.11-later-lts.patch"
HOW = "build it with 'make tools' (see the README), or name an existing build in the params file"


def tools_dir() -> Path:
    env = os.environ.get("IOLAB_TOOLS_DIR")
    return Path(env).resolve() if env else REPO_ROOT / ".tools"


def record(folder: Path) -> dict[str, Any] | None:
    """The build record in ``folder``, or None when there is none (a tool built elsewhere)."""
    path = Path(folder) / RECORD
    try:
        raw = read_regular(path, "a tool's build record", RECORD_MOST)
        if raw is None:
            return None
        data = load_json(raw.decode("utf-8"), str(path))
    except (ValueError, ParseError, InputError) as exc:  # InputError: a link, too large
        why = exc.problem if isinstance(exc, (ParseError, InputError)) else exc
        raise ToolError(f"{path}: not a build record ({why}); rebuild with 'make tools'") \
            from None
    if not isinstance(data, dict):
        raise ToolError(f"{path}: not a build record (a JSON object); rebuild with 'make tools'")
    return data


@lru_cache(maxsize=16)
def _pinned(link: str) -> Path:
    # resolved once per process: a campaign keeps the build it started with (the one its
    # fingerprint names); a rebuild meanwhile removes it, and the next run fails instead of
    # running another build under the old name
    return Path(link).resolve()


def built_spdk() -> Path | None:
    """The SPDK tree ``make tools`` built (``<tools>/spdk-<key>``), if bdevperf is in it."""
    tree = tools_dir() / "spdk"
    return _pinned(str(tree)) if (tree / BDEVPERF).is_file() else None


# xNVMe's back ends for files and block devices through the kernel: the ones the package's
# build of xnvmeperf has (it is built without SPDK, libvfn, uPCIe-CUDA and HIP).
KERNEL_BACKENDS = ("io_uring_file", "libaio_file", "emu_file", "thrpool_file", "io_uring_bdev",
                   "libaio_bdev", "emu_bdev", "thrpool_bdev")


def built_xnvmeperf() -> Path | None:
    """The xnvmeperf ``make tools`` built (in ``<tools>/xnvme-<key>``), if there is one."""
    exe = tools_dir() / "xnvme" / "bin" / "xnvmeperf"
    return _pinned(str(exe)) if exe.is_file() else None


def build_key(folder: Path) -> str | None:
    """The key of the build in ``folder`` (None for a tool built elsewhere)."""
    return (record(folder) or {}).get("key")


def pci_guard_relaxed(spdk_tree: Path) -> bool:
    """Whether this SPDK build skips DPDK's PCI ABI check (so it must not touch PCI devices)."""
    rec = record(spdk_tree) or {}
    return any(p.get("patch") == PCI_GUARD_PATCH for p in rec.get("patches") or [])
