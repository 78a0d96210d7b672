"""``iolab new-experiment NAME``: a new experiment, copied from the example the book walks through.

A new experiment starts as the example of the architecture appendix under its own name: the
template's files (package data in ``iolab/templates/experiment/``, which the example's tests
generate the same way) with the name, class, label and chapter replaced. Two layouts:

* in the package (the default): ``iolab/experiments/<name>/{__init__,analysis}.py`` and its
  ``claims.yaml``, ``notebooks/<name>.ipynb``, ``notebooks/params/<environment>/<name>.yaml`` and the
  chapter's entry in ``_toc.yml``: what the registry, the CLI and the book find;
* outside it (``where=DIR``): ``DIR/<name>/`` with the module, its analysis, claims and a
  ``notebooks/`` folder for the notebook and params, registered by naming ``<name>`` in
  ``$IOLAB_EXPERIMENTS`` with DIR on ``sys.path``.

Responsible for: checking the name, and writing the new experiment's files, all of them or
none, never over an existing file nor through a linked folder nor in a ``where`` folder
another user could redirect (``safefiles.folders_problem``) or one among the files iolab or
git keep (a data directory, a ``.git`` folder, iolab's state and lock folders), and its
published params schema. Not responsible for: what the experiment measures (its
author edits the copy, its claims included), its page and tests (book/architecture.md lists
them), or
finding it afterwards (the registry does).
"""

from __future__ import annotations

import ast
import importlib.util
import keyword
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from iolab.children import held
from iolab.core import registry
from iolab.core import spec as specmod
from iolab.durable import write_atomic
from iolab.errors import InputError
from iolab.paths import REPO_ROOT
from iolab.safefiles import (NotOurs, check_regular, folders_problem, read_regular,
                             refuse_linked, state_problem, store_problem)
from iolab.schemas import SCHEMA_DIR, generate
from iolab.yamlfile import parse_bytes

TEMPLATE = Path(__file__).resolve().parent / "templates" / "experiment"
# The design a new environment starts from when the template has none for it: the smallest.
SMALLEST_ENV = "kvm-2vcpu"
# The _toc.yml entry a chapter goes under, as the package's experiment chapters do.
INDEX = "experiments/index"
EXPERIMENT_NAME = re.compile(r"[a-z][a-z0-9_]*")
EXPERIMENT_NAME_RULE = ("a lowercase Python identifier that is not a keyword: a letter, then "
                        "letters, digits or _")
# The lines only an experiment outside the package has: in the package its notebook and
# params keep the defaults (the repository's notebooks/).
OUTSIDE_ONLY = re.compile(r"^    # Outside the package.*?^    params_dir = [^\n]*\n", re.M | re.S)


@dataclass(frozen=True)
class Layout:
    """Where a new experiment's files go. ``toc``: the table of contents that gets its chapter
    (None outside the package)."""

    package: Path
    notebook: Path
    params: Path
    toc: Path | None


def package_layout(name: str, repo: Path) -> Layout:
    return Layout(repo / "iolab" / "experiments" / name, repo / "notebooks" / f"{name}.ipynb",
                  repo / "notebooks" / "params", repo / "_toc.yml")


def outside_layout(name: str, where: Path) -> Layout:
    home = where / name
    return Layout(home, home / "notebooks" / f"{name}.ipynb", home / "notebooks" / "params", None)


def class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def template_environments() -> list[str]:
    return sorted(p.name.removesuffix(".yaml.tmpl") for p in (TEMPLATE / "params").iterdir())


def _read(relative: str) -> str:
    return (TEMPLATE / relative).read_text()


def template_name() -> str:
    """The template's own experiment name, which the new one's replaces in every file. Read
    from the template, not written here: this module would name an experiment of that name
    (tests/test_experiments.py refuses a file that does)."""
    return re.search(r'^    name = "(\w+)"$', _read("__init__.py.tmpl"), re.M).group(1)


def _imported_names() -> set[str]:
    """The names the template's module imports: a class of one of these names would hide
    it (an experiment named ``path`` would replace ``Path``)."""
    tree = ast.parse(_read("__init__.py.tmpl"))
    return {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}


def check_experiment_name(name: object, outside: bool) -> str:
    """``name`` if a new experiment may take it; else InputError saying what is allowed."""
    if (not isinstance(name, str) or not EXPERIMENT_NAME.fullmatch(name)
            or keyword.iskeyword(name)):
        raise InputError(None, "experiment", f"{name!r} is not a usable experiment name",
                         allowed=EXPERIMENT_NAME_RULE)
    taken = registry.names()
    if name in taken:
        raise InputError(None, "experiment", f"'{name}' is an experiment already",
                         allowed=f"a name other than {', '.join(taken)}")
    if class_name(name) in _imported_names():
        raise InputError(None, "experiment", f"'{name}' would name its class "
                         f"{class_name(name)}, which its module imports",
                         allowed=f"{EXPERIMENT_NAME_RULE}, other than "
                                 f"{', '.join(sorted(n.lower() for n in _imported_names()))}")
    # $IOLAB_EXPERIMENTS imports by name: an existing module of that name would be imported
    if outside and importlib.util.find_spec(name) is not None:
        raise InputError(None, "experiment", f"'{name}' is the name of a module Python finds "
                         "already, which $IOLAB_EXPERIMENTS would import instead",
                         allowed="a name no importable module has")
    return name


def _environments(environment: str | None) -> list[str]:
    if environment is None:
        return template_environments()
    return [specmod.check_environment_name(environment)]


def _rename(text: str, name: str) -> str:
    token = template_name()
    # MyST labels of the package's chapters use hyphens (sec-experiments-smt-thp)
    text = text.replace(f"sec-experiments-{token}", f"sec-experiments-{name.replace('_', '-')}")
    text = re.sub(rf"\b{class_name(token)}\b", class_name(name), text)
    return re.sub(rf"\b{token}\b", name, text)


def planned_files(name: str, layout: Layout, environments: list[str]) -> dict[Path, str]:
    """Each file of the new experiment with its text."""
    module = _read("__init__.py.tmpl")
    if layout.toc is not None:
        module = OUTSIDE_ONLY.sub("", module)
    texts = {layout.package / "__init__.py": module,
             layout.package / "analysis.py": _read("analysis.py.tmpl"),
             layout.package / "claims.yaml": _read("claims.yaml.tmpl"),
             layout.notebook: _read("notebook.ipynb.tmpl")}
    known = template_environments()
    for env in environments:
        design = env if env in known else SMALLEST_ENV
        texts[layout.params / env / f"{name}.yaml"] = _read(f"params/{design}.yaml.tmpl")
    return {path: _rename(text, name) for path, text in texts.items()}


def chapter_of(module_text: str) -> str:
    """The ``chapter`` attribute a new experiment's module declares."""
    return re.search(r'^    chapter = "([^"]+)"$', module_text, re.M).group(1)


def _toc_chapters(entries) -> list[str]:
    out = []
    for entry in entries or []:
        if "file" in entry:
            out.append(entry["file"])
        out += _toc_chapters(entry.get("sections"))
    return out


TOC_ROLE = "the book's table of contents (_toc.yml)"
# the repository's _toc.yml holds about 2 KB; a book a thousand times larger still fits
TOC_MOST = 2 << 20


def toc_with(toc: Path, chapter: str) -> str:
    """The text of ``toc`` with ``chapter`` (and a glob for its environment pages) appended to
    the sections of the experiments' index, its comments and order kept as they are."""
    # never followed (a link would copy its target into the checkout) and bounded
    data = read_regular(toc, TOC_ROLE, TOC_MOST)
    if data is None:
        raise InputError(toc, None, "not found: the package's chapters are listed there",
                         allowed="the repository's _toc.yml")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(toc, None, f"is not UTF-8 (byte {exc.start})",
                         allowed="the repository's _toc.yml, in UTF-8") from None
    doc = parse_bytes(toc, text.encode("utf-8"))
    if chapter in _toc_chapters(doc.get("chapters") if isinstance(doc, dict) else None):
        raise InputError(toc, None, f"lists the chapter {chapter} already",
                         allowed="a name whose chapter is not in the book yet")
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if line.strip() == f"- file: {INDEX}"), None)
    if at is None or at + 1 >= len(lines) or lines[at + 1].strip() != "sections:":
        raise InputError(toc, None, f"has no entry '{INDEX}' with sections to put the chapter "
                         "under", allowed=f"a _toc.yml whose '- file: {INDEX}' has sections")
    indent = len(lines[at]) - len(lines[at].lstrip())
    end = at + 2
    while end < len(lines) and (not lines[end].strip()
                                or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    item = " " * (indent + 4)
    entry = f"{item}- file: {chapter}\n{item}  sections:\n{item}    - glob: {chapter}/*\n"
    head = "".join(lines[:end])
    return (head if head.endswith("\n") else head + "\n") + entry + "".join(lines[end:])


def params_schema_path(name: str, repo: Path = REPO_ROOT) -> Path:
    """Where the published schema of an in-package experiment's params files goes."""
    return Path(repo) / "iolab" / "schemas" / f"params.{name}.schema.json"


def _check_free(layout: Layout, files: Iterable[Path]) -> None:
    # lexists: a link (to nowhere too) is something there, never written through
    if os.path.lexists(layout.package):
        raise InputError(layout.package, "experiment", "exists already",
                         allowed="a name without a folder of that name")
    for path in files:
        if os.path.lexists(path):
            raise InputError(path, "experiment", "exists already, and a new experiment never "
                             "replaces a file", allowed="a name none of whose files exist")


def _write(files: dict[Path, str], toc: tuple[Path, str] | None, root: Path) -> None:
    """Every file, or (on an error) none: the files and folders made are removed again. A
    folder below ``root`` (the checkout, or the --where folder) that is a link is NotOurs,
    never written through: a linked environment's params folder would take the file
    wherever it points."""
    made: list[Path] = []
    try:
        for path, text in files.items():
            for folder in reversed(path.parents):
                if folder != root and folder.is_relative_to(root):
                    refuse_linked(folder, "a new experiment's files")
                if not folder.exists():
                    with held():  # made and noted as made in one step a stop cannot split
                        folder.mkdir()
                        made.append(folder)
            with os.fdopen(_create(path, made), "w") as fh:
                fh.write(text)
        if toc is not None:
            path, text = toc
            # still the regular file read (a link put there since is NotOurs), and written
            # with its own permissions through a temporary file only this call made
            st = check_regular(path, TOC_ROLE)
            write_atomic(path, text.encode(),
                         mode=None if st is None else stat.S_IMODE(st.st_mode))
    except BaseException as exc:
        _remove(made, exc)
        raise


def _create(path: Path, made: list[Path]) -> int:
    """``path`` made (a file that appeared since the check is refused, never replaced) and
    noted in ``made``, in one step a stop signal cannot split (:func:`iolab.children.held`: a
    file made but not yet noted would be left, and its folder with it); the file open."""
    fd = None
    try:
        with held():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            made.append(path)
    except BaseException:
        if fd is not None:  # a stop raised once the step was done
            os.close(fd)
        raise
    return fd


def _remove(made: list[Path], exc: BaseException) -> None:
    """Remove what ``_write`` made, newest first; what cannot be removed is added to
    ``exc`` as a note, and the rest still removed: the error (or the stop) that ended the
    write is what is reported, never the clean-up's own failure."""
    for path in reversed(made):
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()
            else:
                path.unlink(missing_ok=True)
        except OSError as err:
            exc.add_note(f"{path} was made and could not be removed again ({err.strerror})")


def new_experiment(name: str, *, where: str | Path | None = None,
                   environment: str | None = None, repo: Path = REPO_ROOT) -> list[Path]:
    """Write a new experiment named ``name``; the paths written (and ``_toc.yml``, changed).

    ``where``: a folder outside the package to write it in (default: into the package of
    ``repo``, this repository, with its chapter in ``_toc.yml``). ``environment``: the one
    environment to write params for (default: each environment the template has a design
    for, which the package's experiments all need; another name starts from the smallest).
    """
    if where is not None and not str(where).strip():
        raise InputError(None, "where", "empty", allowed="a folder (or none: the package)")
    check_experiment_name(name, outside=where is not None)
    if where is not None:
        _check_where(Path(where), name)
    layout = package_layout(name, Path(repo)) if where is None else outside_layout(name,
                                                                                   Path(where))
    files = planned_files(name, layout, _environments(environment))
    # the params schema (written by publish_params_schema) is checked with the files
    _check_free(layout, [*files, *([params_schema_path(name, repo)] if where is None else [])])
    toc = None
    if layout.toc is not None:
        toc = (layout.toc, toc_with(layout.toc, chapter_of(files[layout.package / "__init__.py"])))
    _write(files, toc, Path(repo) if where is None else Path(where))
    return [*files, *([layout.toc] if toc else [])]


def _check_where(where: Path, name: str) -> None:
    """NotOurs when another user could decide where the files written in ``where`` land: a
    folder of its path (``where`` included) is a link another user made, another user's, or
    one others may write into without the sticky bit (:func:`folders_problem`); or when
    ``where`` lies among the files iolab or git keep: in a data directory (its module would
    read as a campaign there), a ``.git`` folder or iolab's state and lock folders, as an
    output never does (:func:`store_problem`, :func:`state_problem`)."""
    folder = where.absolute() / name
    problem = folders_problem(folder)
    if problem:
        raise NotOurs("--where", None, f"{where}: {problem}; a new experiment is never "
                      "written where another user decides where it lands",
                      allowed=WHERE_ALLOWED)
    problem = store_problem(folder) or state_problem(folder)
    if problem:
        raise NotOurs("--where", None, f"{where}: {folder} is {problem}; a new experiment is "
                      "never written among the files iolab or git keep", allowed=WHERE_ALLOWED)


WHERE_ALLOWED = ("a folder outside the data directory, git's folders and iolab's state and lock "
                 "folders, whose folders are this user's or root's and that others cannot "
                 "write into (or that have the sticky bit, as /tmp has)")


def publish_params_schema(name: str) -> Path:
    """Write the published schema of a new in-package experiment's params files, made from its
    code like the others (:mod:`iolab.schemas.generate`), so that the package's schemas stay
    complete; its path."""
    registry.reload()  # the experiment was not there when the registry was first filled
    path = SCHEMA_DIR / f"params.{name}.schema.json"
    text = generate.text(generate.experiment_schema(registry.get(name)))
    try:
        # linked into place: whatever is at the name (a link included) is kept, never written
        write_atomic(path, text.encode(), exclusive=True)
    except FileExistsError:
        raise InputError(path, "experiment", "exists already, and a new experiment never "
                         "replaces a file", allowed="a name none of whose files exist") from None
    return path
