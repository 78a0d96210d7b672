"""Render the book: replay the notebooks with papermill from stored data, then build.

A notebook is replayed, and the HTML built, only when what it is made from changed since
the last time (``iolab.report.freshness``); ``force`` does all of it again.

The notebooks rendered are every registered experiment's (into its ``chapter`` path in
``book/``), the pages in :data:`PAGES` that are not experiments (the inventory of measured
hosts), and one page per further environment with stored runs of an experiment
(:func:`environment_pages`: ``book/<chapter>/<environment>.ipynb``, which the table of
contents takes in by a glob under the chapter), its labels suffixed with the environment so
that they stay unique in the book. Replay never touches hardware (``mode="replay"``). Executed notebooks are written
with papermill's timestamps and absolute paths stripped, so re-rendering the same data gives
the same files; the parameters cells are removed from the pages (the chapters state what ran
from the stored manifests instead).

Responsible for: the notebook -> book mapping, papermill replay, metadata stripping, cleaning
rendered notebooks and calling ``jupyter-book``. Not responsible for: analysis (the
notebooks) or the book's text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import nbformat

from iolab.core import registry
from iolab.errors import IolabError
from iolab.paths import BOOK_DIR, NOTEBOOKS_DIR, REPO_ROOT, default_data_dir
from iolab.report import compare, escape, freshness
from iolab.safefiles import replace_output

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
    for exp in registry.all_experiments():
        out[exp.notebook] = BOOK_DIR / f"{exp.chapter}.ipynb"
    return out


def environment_pages(data_dir: Path | None = None) -> list[tuple[object, str, Path]]:
    """(experiment, environment, page) for each environment with stored runs of an
    experiment other than the one its notebook shows (``iolab env new``, ``iolab run``: the
    next book shows it), in the order of the data folder."""
    data = data_dir if data_dir is not None else default_data_dir()
    out = []
    for exp in registry.all_experiments():
        shown = _default_environment(exp.notebook)
        out += [(exp, env, BOOK_DIR / exp.chapter / f"{env}.ipynb")
                for env in compare.environments(exp.name, data, exp.params_dir) if env != shown]
    return out


_LABEL = re.compile(r"^\(([A-Za-z0-9_.:-]+)\)=", re.M)
_NAME = re.compile(r"^(:name:\s*)(\S+)", re.M)


def relabel(path: Path, environment: str) -> None:
    """Make an environment page's labels its own: each label and figure name the notebook
    defines gets ``-<environment>``, and its references to them follow; its title names the
    environment."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "markdown"]
    own = {m for c in cells for m in _LABEL.findall(c.source)} | \
          {m[1] for c in cells for m in _NAME.findall(c.source)}
    for cell in cells:
        text = _LABEL.sub(lambda m: f"({m[1]}-{environment})=" if m[1] in own else m[0],
                          cell.source)
        text = _NAME.sub(lambda m: f"{m[1]}{m[2]}-{environment}" if m[2] in own else m[0], text)
        # {ref}`label`, {numref}`Fig. {number} <label>`: only the notebook's own labels
        text = re.sub(r"(\{(?:ref|numref)\}`(?:[^`<]*<)?)([A-Za-z0-9_.:-]+)(>?`)",
                      lambda m: m[1] + (f"{m[2]}-{environment}" if m[2] in own else m[2]) + m[3],
                      text)
        cell.source = text
    for cell in cells:  # the first title only
        if re.search(r"^# ", cell.source, re.M):
            cell.source = re.sub(r"^# (.+)$", lambda m: f"# {m[1]} (environment "
                                 f"{escape.markdown_text(environment)})", cell.source,
                                 count=1, flags=re.M)
            break
    nbformat.write(nb, path)


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
    exp = next((e for e in registry.all_experiments() if e.notebook == notebook), None)
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


def _literal(path: Path) -> str:
    """``path`` as a format string that formats to itself (braces doubled)."""
    return str(path).replace("{", "{{").replace("}", "}}")


def execute(src: Path, dst: Path, parameters: dict, shown: Path | None = None,
            on_kernel: Callable[[int], None] | None = None) -> None:
    """Execute one notebook with papermill, bounded: a kernel that does not start, or a cell
    that does not finish, within its timeout (see :func:`timeouts`; the notebook's
    ``environment`` and ``overrides`` parameters choose the params) ends with an IolabError
    naming the notebook and the cell instead of hanging forever; so does a kernel that died.
    ``shown``: what the error calls the executed notebook (``dst`` is a temporary file that
    will be renamed to it). ``on_kernel``: called with the kernel's process id as soon as
    it is started (``iolab notebook`` passes its signals on to it)."""
    import papermill
    from nbclient.exceptions import DeadKernelError

    named = shown or dst
    cell_s, start_s = timeouts(src, parameters.get("environment"), parameters.get("overrides"))
    started = {} if on_kernel is None else {"kernel_manager_class": _reporting(on_kernel)}
    try:
        # papermill formats both paths with the parameters ("{name}" would be one): literal
        papermill.execute_notebook(_literal(src), _literal(dst), parameters=parameters,
                                   cwd=str(src.parent),
                                   kernel_name="python3", progress_bar=False, log_output=False,
                                   execution_timeout=cell_s, start_timeout=start_s, **started)
    except papermill.PapermillExecutionError as exc:
        # the error as one line; the traceback stays in the executed notebook
        raise IolabError(f"{src}: cell [{exc.exec_count}] raised {exc.ename}: {exc.evalue} "
                         f"(the executed notebook, with the traceback, is {named})") from None
    except DeadKernelError:  # killed (SIGKILL, the OOM killer) or ended by os._exit
        raise IolabError(f"{src}: the notebook's kernel died while a cell ran; the executed "
                         f"part is in {named}") from None
    except TimeoutError as exc:  # nbclient's, for a cell and for the kernel's start
        text = str(exc)
        if "cell timed out" in text:
            preview = text.split("-------------------")[1] if "-----" in text else ""
            what = (f"{_cell_of(src, preview)} did not finish within {cell_s} s "
                    f"(analysis key cell_timeout_s)")
        else:
            what = (f"the kernel did not start within {start_s} s (analysis key "
                    f"kernel_start_timeout_s)")
        raise IolabError(f"{src}: {what}; the executed part is in {named}") from None


def _reporting(on_kernel: Callable[[int], None]) -> type:
    """nbclient's kernel manager, which also tells ``on_kernel`` the process id of each
    kernel it starts (the kernel runs in a session of its own: no signal sent to this
    process or its group reaches it)."""
    from jupyter_client import AsyncKernelManager

    class Reporting(AsyncKernelManager):
        async def start_kernel(self, **kw: Any) -> None:
            await super().start_kernel(**kw)
            on_kernel(self.provisioner.pid)

    return Reporting


def render(data_dir: Path | None = None, only: list[str] | None = None, log=print,
           force: bool = False) -> list[Path]:
    """Replay the notebooks whose inputs changed since they were last rendered (all of
    them with ``force``); returns the notebooks written."""
    written = []
    data = data_dir if data_dir is not None else default_data_dir()
    jobs = [(src, dst, None) for src, dst in rendered().items()]
    pages = environment_pages(data_dir)
    jobs += [(exp.notebook, dst, env) for exp, env, dst in pages]
    _remove_stale_environment_pages({dst for *_, dst in pages}, log)
    for src, dst, environment in jobs:
        if only and src.stem not in only:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        params = {"mode": "replay"}
        if environment is not None:
            params["environment"] = environment
        if data_dir is not None:
            params["data_dir"] = str(data_dir)
        name = str(dst.relative_to(REPO_ROOT))
        key = freshness.render_key(src, params, data, freshness.reads_of(name))
        if not force and freshness.is_fresh(name, key, dst):
            log(f"up to date: {name}")
            continue
        freshness.remember(name, None)  # a replay that fails leaves no key behind
        log(f"replaying {src.relative_to(REPO_ROOT)} -> {name}")
        reads = _executed_reading(src, dst, params)
        strip_volatile_metadata(dst)
        if environment is not None:
            relabel(dst, environment)
        freshness.remember(name, freshness.render_key(src, params, data, reads), reads)
        written.append(dst)
    return written


def _executed_reading(src: Path, dst: Path, params: dict) -> list[str] | None:
    """Execute the notebook, noting which experiment folders of raw/ it read (the kernel
    inherits ``$IOLAB_READS_LOG``); None where that could not be noted (then all of raw/
    counts for its freshness)."""
    import tempfile

    from iolab.core.store import READS_LOG

    with tempfile.TemporaryDirectory(prefix="iolab-reads-") as folder:
        log = Path(folder) / "reads"
        log.write_text("")
        before = os.environ.get(READS_LOG)
        os.environ[READS_LOG] = str(log)
        try:
            execute(src, dst, params)
        finally:
            if before is None:
                os.environ.pop(READS_LOG, None)
            else:
                os.environ[READS_LOG] = before
        try:
            return sorted(set(log.read_text().split()))
        except OSError:
            return None


def _chapter_folders() -> list[Path]:
    return [BOOK_DIR / exp.chapter for exp in registry.all_experiments()]


def _remove_stale_environment_pages(keep: set[Path], log) -> None:
    """An environment page whose runs are gone (or whose params file was removed) goes."""
    for folder in _chapter_folders():
        for page in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
            if page not in keep:
                page.unlink()
                log(f"removed {page.relative_to(REPO_ROOT)} (no stored runs of its environment)")


def clean(log=print) -> None:
    """Remove the executed notebooks from book/ and the built HTML."""
    pages = list(rendered().values()) + [p for f in _chapter_folders() if f.is_dir()
                                         for p in sorted(f.glob("*.ipynb"))]
    for dst in pages:
        if dst.exists():
            dst.unlink()
            log(f"removed {dst.relative_to(REPO_ROOT)}")


def glued_values(pages: list[Path] | None = None) -> dict[str, dict[str, str]]:
    """Every text value glued into the rendered notebooks, by page and key (figures left out).

    The book's numbers live here; a snapshot of them (``iolab book --glue-snapshot FILE``)
    lets a test say when a change to code or data changed a number the prose quotes.
    """
    if pages is None:
        pages = list(rendered().values()) + [p for f in _chapter_folders() if f.is_dir()
                                             for p in f.glob("*.ipynb")]
    return {str(path.relative_to(BOOK_DIR)): glued_in(path) for path in sorted(pages)}


def glued_in(path: Path) -> dict[str, str]:
    """The text values glued into one executed notebook, by key (figures left out)."""
    values = {}
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            data = output.get("data", {})
            text = data.get("application/papermill.record/text/plain")
            figure = any(k.startswith("application/papermill.record/image/") for k in data)
            if name and text is not None and not figure:
                values[name] = text
    return dict(sorted(values.items()))


# the snapshot tests/test_book.py compares the book with: the one tracked file
# --glue-snapshot exists to renew
GLUE_SNAPSHOT = REPO_ROOT / "tests" / "fixtures" / "glued_values.json"


def write_glue_snapshot(path: Path | None) -> None:
    """Every glued value as JSON into ``path`` (replaced whole, never over anything but a
    regular file), or onto standard output (None)."""
    text = json.dumps(glued_values(), indent=1, ensure_ascii=False) + "\n"
    if path is None:
        sys.stdout.write(text)
        return
    replace_output(Path(path), lambda tmp: tmp.write_text(text), "--glue-snapshot",
                   renews=[GLUE_SNAPSHOT])


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
