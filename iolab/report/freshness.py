"""Whether a rendered chapter, or the built HTML, is up to date with what it is made from.

A rendered notebook depends on its source notebook, the params files, the stored data
(``raw/`` and ``reference/`` of the data folder), the committed benchmark results, the
package's code and pinned dependencies, and how it was asked for (papermill parameters, ``--skip-corrupt``). The
built HTML depends on every file under ``book/`` (the rendered notebooks included) and the
book's configuration. Each gets a key: a sha256 over the *contents* of code, notebooks and
configuration, and over the names, sizes and modification times of data files (thousands
of raw files, whose contents the store already verifies against their manifests). The key
of the last successful render or build is kept under ``_build/``; an equal key means the
work would give the same result and is skipped. That record is state: written with mode 0600
through a temporary file and a rename, and read only when it is a regular file (a link or a
FIFO in its place is refused with one line, never followed or opened: :mod:`iolab.safefiles`).
A record larger than :data:`STATE_MOST` bytes or nested deeper than iolab writes it is not
one iolab wrote: it is ignored (everything is made again, and the record replaced).

Responsible for: computing and remembering these keys. Not responsible for: rendering or
building (``iolab.report.book``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from iolab import __version__
from iolab import paths as iolab_paths  # its BOOK_BUILD_RECORD, read at each use
from iolab.durable import write_atomic
from iolab.errors import ParseError
from iolab.parsers import load_json
from iolab.paths import BOOK_DIR, DRIVERS_DIR, NOTEBOOKS_DIR, REPO_ROOT
from iolab.safefiles import STATE_MODE, TooLarge, check_regular, read_regular
from iolab.tools import builds

# bytes of the record at most: a key and the raw/ folders read for each of a few dozen pages
STATE_MOST = 16 << 20
# The build record's keys: an output's name holds its key (KEY, a sha256 in hex); READS plus
# the name holds the raw/ folders it read. The published schema (iolab.schemas) is made
# from these.
KEY = "[0-9a-f]{64}"
READS = "reads:"
_PACKAGE = REPO_ROOT / "iolab"
BENCH_RESULTS = REPO_ROOT / "benchmarks" / "results"  # what the benchmarks page shows
_CONFIG = [REPO_ROOT / "_config.yml", REPO_ROOT / "_toc.yml", REPO_ROOT / "pyproject.toml"]


def _files(root: Path) -> list[Path]:
    """Every file under ``root``, in a fixed order, leaving out caches and checkpoints."""
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", ".ipynb_checkpoints"))
        out += [Path(folder) / n for n in sorted(names) if not n.endswith(".pyc")]
    return out


def _content(h: Any, paths: list[Path]) -> None:
    for path in paths:
        h.update(str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT)
                     else path).encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"(none)")


def _stats(h: Any, root: Path) -> None:
    for path in _files(root) if root.is_dir() else []:
        st = path.stat()
        h.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())


def render_key(src: Path, parameters: dict[str, Any], data_dir: Path,
               reads: list[str] | None = None) -> str:
    """The key of executing notebook ``src`` with ``parameters`` on ``data_dir``.

    ``reads``: the experiment folders under ``raw/`` the notebook read when it was last
    rendered (``iolab.core.store.note_read``); only those count, so new runs of one
    experiment replay only the chapters that read them. None (not known yet) or '*' among
    them: all of ``raw/``.

    A chapter's plan also names the programs this host would run with, and their versions:
    the drivers are in the key, and so are the builds of ``make tools`` (by where they
    resolve to); a tool installed or upgraded otherwise needs ``iolab book --force``."""
    h = hashlib.sha256(f"iolab {__version__}\0".encode())
    h.update(json.dumps(parameters, sort_keys=True, default=str).encode())
    h.update(os.environ.get("IOLAB_SKIP_CORRUPT", "").encode())
    _content(h, [src, *_files(NOTEBOOKS_DIR / "params"), *_files(_PACKAGE), *_CONFIG,
                 *_files(BENCH_RESULTS), *_files(DRIVERS_DIR)])
    tools = builds.tools_dir()
    if tools.is_dir():
        h.update("".join(f"{p.name}->{p.resolve()}\0" for p in sorted(tools.iterdir())).encode())
    raw = Path(data_dir) / "raw"
    if reads is None or "*" in reads:
        h.update(b"raw")
        _stats(h, raw)
    else:
        for name in sorted(set(reads)):
            h.update(f"raw/{name}".encode())
            _stats(h, raw / name)
    h.update(b"reference")
    _stats(h, Path(data_dir) / "reference")
    return h.hexdigest()


# a Markdown page's include or literalinclude: the file it names, relative to the page
_INCLUDE = re.compile(r"^[`:]{3,}\{(?:literal)?include\}\s+(\S+)", re.M)


def _included(pages: list[Path]) -> list[Path]:
    """Files outside book/ that its Markdown pages include (e.g. the example experiment's
    code in the architecture chapter)."""
    out = []
    for page in pages:
        if page.suffix == ".md":
            out += [(page.parent / rel).resolve() for rel in _INCLUDE.findall(page.read_text())]
    return sorted(set(out))


def build_key(argv: list[str]) -> str:
    """The key of building the book with ``argv``."""
    h = hashlib.sha256(json.dumps(argv[1:]).encode())
    pages = _files(BOOK_DIR)
    _content(h, [*pages, *_included(pages), *_CONFIG])
    return h.hexdigest()


def _state() -> dict[str, Any]:
    try:
        # another user's, or one others may write, is refused as a link is (NotOurs)
        record = iolab_paths.BOOK_BUILD_RECORD
        raw = read_regular(record, "the book's build record", STATE_MOST, own=True)
        doc = load_json(raw.decode("utf-8"), str(record)) if raw else {}
    except (OSError, ValueError, ParseError, TooLarge):  # not iolab's: everything made again
        return {}
    return doc if isinstance(doc, dict) else {}


def is_fresh(name: str, key: str, output: Path) -> bool:
    """Whether ``output`` exists and was made from inputs with this key."""
    return output.exists() and _state().get(name) == key


def reads_of(name: str) -> list[str] | None:
    """The raw/ folders output ``name`` read when it was made (None: not known)."""
    reads = _state().get(f"{READS}{name}")
    return reads if isinstance(reads, list) else None


def remember(name: str, key: str | None, reads: list[str] | None = None) -> None:
    """Record the key ``output`` ``name`` was made from, and what of raw/ it read (None:
    forget both)."""
    state = _state()
    if key is None:
        state.pop(name, None)
        state.pop(f"{READS}{name}", None)
    else:
        state[name] = key
        if reads is not None:
            state[f"{READS}{name}"] = sorted(set(reads))
    record = iolab_paths.BOOK_BUILD_RECORD
    check_regular(record, "the book's build record")  # a link there is not replaced
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(record, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode(),
                     mode=STATE_MODE)
    except OSError:
        pass  # then the next build does the work again
