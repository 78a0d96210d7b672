"""Render the book: replay the notebooks with papermill from stored data, then build.

A notebook is replayed, and the HTML built, only when what it is made from changed since
the last time (``iolab.report.freshness``); ``force`` does all of it again.

The notebooks rendered are every registered experiment's (into its ``chapter`` path in
``book/``) and the pages in :data:`PAGES` that are not experiments (the inventory of measured
hosts). Replay never touches hardware (``mode="replay"``). Executed notebooks are written
with papermill's timestamps and absolute paths stripped, so re-rendering the same data gives
the same files; the parameters cells are removed from the pages (the chapters state what ran
from the stored manifests instead).

Responsible for: the notebook -> book mapping, papermill replay, metadata stripping, cleaning
rendered notebooks and calling ``jupyter-book``. Not responsible for: analysis (the
notebooks) or the book's text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat

from iolab import experiments
from iolab.errors import IolabError
from iolab.paths import BOOK_DIR, NOTEBOOKS_DIR, REPO_ROOT, default_data_dir
from iolab.report import freshness

# Defaults of the analysis keys cell_timeout_s and kernel_start_timeout_s (every params
# file may set them; a batch job that runs a campaign inside one cell needs a longer one).
CELL_TIMEOUT_S = 900          # replaying a cell from stored data takes a few seconds at most
KERNEL_START_TIMEOUT_S = 120

# Notebooks that are pages but not experiments: notebook name -> page in book/ (no suffix).
PAGES = {"inventory": "environments/inventory", "benchmarks": "benchmarks"}


def rendered() -> dict[Path, Path]:
    """Every notebook to replay -> the executed copy in book/."""
    out = {NOTEBOOKS_DIR / f"{name}.ipynb": BOOK_DIR / f"{page}.ipynb"
           for name, page in PAGES.items()}
    for exp in experiments.all_experiments():
        out[exp.notebook] = BOOK_DIR / f"{exp.chapter}.ipynb"
    return out


def strip_volatile_metadata(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if ("injected-parameters" in tags or "parameters" in tags) and "remove-cell" not in tags:
            cell.metadata["tags"] = tags + ["remove-cell"]
    nbformat.write(nb, path)


def _default_environment(notebook: Path) -> str | None:
    import papermill

    default = papermill.inspect_notebook(str(notebook)).get("environment", {}).get("default")
    return default.strip("'\"") if default else None


def timeouts(notebook: Path, environment: str | None = None,
             overrides: dict | None = None) -> tuple[int, int]:
    """(cell, kernel start) timeouts in seconds for executing ``notebook``: from the analysis
    section of its experiment's params for ``environment`` (default: the notebook's own)
    with ``overrides``, else the defaults."""
    exp = next((e for e in experiments.all_experiments() if e.notebook == notebook), None)
    environment = environment or (exp and _default_environment(notebook))
    if exp is None or environment is None:
        return CELL_TIMEOUT_S, KERNEL_START_TIMEOUT_S
    from iolab.core import spec as specmod

    analysis = specmod.load(exp, environment, params_dir=exp.params_dir,
                            overrides=overrides).analysis
    return analysis["cell_timeout_s"], analysis["kernel_start_timeout_s"]


def _cell_of(notebook: Path, preview: str) -> str:
    """Which cell of ``notebook`` (1-based, its first line) has the source ``preview``."""
    nb = nbformat.read(notebook, as_version=4)
    for i, cell in enumerate(nb.cells, 1):
        if cell.cell_type == "code" and cell.source.strip() and cell.source.strip() in preview:
            return f"cell {i} ('{cell.source.strip().splitlines()[0][:60]}')"
    return "a cell"


def execute(src: Path, dst: Path, parameters: dict) -> None:
    """Execute one notebook with papermill, bounded: a kernel that does not start, or a cell
    that does not finish, within its timeout (see :func:`timeouts`; the notebook's
    ``environment`` and ``overrides`` parameters choose the params) ends with an IolabError
    naming the notebook and the cell instead of hanging forever."""
    import papermill

    cell_s, start_s = timeouts(src, parameters.get("environment"), parameters.get("overrides"))
    try:
        papermill.execute_notebook(str(src), str(dst), parameters=parameters, cwd=str(src.parent),
                                   kernel_name="python3", progress_bar=False, log_output=False,
                                   execution_timeout=cell_s, start_timeout=start_s)
    except papermill.PapermillExecutionError as exc:
        # the error as one line; the traceback stays in the executed notebook
        raise IolabError(f"{src}: cell [{exc.exec_count}] raised {exc.ename}: {exc.evalue} "
                         f"(the executed notebook, with the traceback, is {dst})") from None
    except TimeoutError as exc:  # nbclient's, for a cell and for the kernel's start
        text = str(exc)
        if "cell timed out" in text:
            preview = text.split("-------------------")[1] if "-----" in text else ""
            what = (f"{_cell_of(src, preview)} did not finish within {cell_s} s "
                    f"(analysis key cell_timeout_s)")
        else:
            what = (f"the kernel did not start within {start_s} s (analysis key "
                    f"kernel_start_timeout_s)")
        raise IolabError(f"{src}: {what}; the executed part is in {dst}") from None


def render(data_dir: Path | None = None, only: list[str] | None = None, log=print,
           force: bool = False) -> list[Path]:
    """Replay the notebooks whose inputs changed since they were last rendered (all of
    them with ``force``); returns the notebooks written."""
    written = []
    data = data_dir if data_dir is not None else default_data_dir()
    for src, dst in rendered().items():
        if only and src.stem not in only:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        params = {"mode": "replay"}
        if data_dir is not None:
            params["data_dir"] = str(data_dir)
        name = str(dst.relative_to(REPO_ROOT))
        key = freshness.render_key(src, params, data)
        if not force and freshness.is_fresh(name, key, dst):
            log(f"up to date: {name}")
            continue
        freshness.remember(name, None)  # a replay that fails leaves no key behind
        log(f"replaying {src.relative_to(REPO_ROOT)} -> {name}")
        execute(src, dst, params)
        strip_volatile_metadata(dst)
        freshness.remember(name, key)
        written.append(dst)
    return written


def clean(log=print) -> None:
    """Remove the executed notebooks from book/ and the built HTML."""
    for dst in rendered().values():
        if dst.exists():
            dst.unlink()
            log(f"removed {dst.relative_to(REPO_ROOT)}")


def glued_values(pages: list[Path] | None = None) -> dict[str, dict[str, str]]:
    """Every text value glued into the rendered notebooks, by page and key (figures left out).

    The book's numbers live here; a snapshot of them (``iolab book --glue-snapshot FILE``)
    lets a test say when a change to code or data changed a number the prose quotes.
    """
    out: dict[str, dict[str, str]] = {}
    for path in sorted(pages or rendered().values()):
        nb = nbformat.read(path, as_version=4)
        values = {}
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                name = output.get("metadata", {}).get("scrapbook", {}).get("name")
                data = output.get("data", {})
                text = data.get("application/papermill.record/text/plain")
                figure = any(k.startswith("application/papermill.record/image/") for k in data)
                if name and text is not None and not figure:
                    values[name] = text
        out[str(path.relative_to(BOOK_DIR))] = dict(sorted(values.items()))
    return out


def write_glue_snapshot(path: Path) -> None:
    Path(path).write_text(json.dumps(glued_values(), indent=1, ensure_ascii=False) + "\n")


def build(strict: bool = True, force: bool = False, log=print) -> int:
    """Build the HTML, unless the last build with the same options had the same inputs and
    passed (``force``: build anyway)."""
    exe = Path(sys.executable).with_name("jupyter-book")
    # --all: an incremental build can skip the page that holds a broken reference and pass.
    argv = [str(exe), "build", "--all"]
    if strict:
        argv += ["-W", "-n", "--keep-going"]
    argv.append(str(BOOK_DIR))
    key = freshness.build_key(argv)
    html = REPO_ROOT / "_build" / "html" / "index.html"
    if not force and freshness.is_fresh("html", key, html):
        log(f"up to date: {html.parent.relative_to(REPO_ROOT)} (nothing under book/ changed "
            "since it was built; --force builds anyway)")
        return 0
    freshness.remember("html", None)
    code = subprocess.call(argv, cwd=REPO_ROOT)
    if code == 0:
        freshness.remember("html", key)
    return code
