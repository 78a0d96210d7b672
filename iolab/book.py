"""Render the book: replay every notebook with papermill from stored data, then build.

Replay never touches hardware (``mode="replay"``). Executed notebooks are written into
``book/`` with papermill's timestamps and absolute paths stripped, so re-rendering the same
data gives the same files.

Responsible for: the notebook -> book mapping, papermill replay, metadata stripping and
calling ``jupyter-book``. Not responsible for: analysis (the notebooks) or the book's text.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat

from .paths import BOOK_DIR, NOTEBOOKS_DIR, REPO_ROOT

# notebook in notebooks/ -> executed copy in book/
RENDERED = {
    "inventory": "environments/inventory.ipynb",
    "cpu_search": "experiments/cpu_initiated.ipynb",
    "smt_thp": "experiments/smt_thp.ipynb",
}


def strip_volatile_metadata(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            # the values are shown in the parameters cell; the injected copy is noise
            cell.metadata["tags"] = tags + ["remove-cell"]
    nbformat.write(nb, path)


def render(data_dir: Path | None = None, only: list[str] | None = None, log=print) -> list[Path]:
    import papermill

    written = []
    for name, rel in RENDERED.items():
        if only and name not in only:
            continue
        src = NOTEBOOKS_DIR / f"{name}.ipynb"
        dst = BOOK_DIR / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        params = {"mode": "replay"}
        if data_dir is not None:
            params["data_dir"] = str(data_dir)
        log(f"replaying {src.relative_to(REPO_ROOT)} -> {dst.relative_to(REPO_ROOT)}")
        papermill.execute_notebook(str(src), str(dst), parameters=params, cwd=str(NOTEBOOKS_DIR),
                                   kernel_name="python3", progress_bar=False, log_output=False)
        strip_volatile_metadata(dst)
        written.append(dst)
    return written


def build(strict: bool = True) -> int:
    exe = Path(sys.executable).with_name("jupyter-book")
    # --all: an incremental build can skip the page that holds a broken reference and pass.
    argv = [str(exe), "build", "--all"]
    if strict:
        argv += ["-W", "-n", "--keep-going"]
    argv.append(str(BOOK_DIR))
    return subprocess.call(argv, cwd=REPO_ROOT)
