"""The book as one PDF (``iolab book --pdf``, ``make pdf``), for handing in, printing and
citing: Jupyter Book's LaTeX builder over the same replayed notebooks as the HTML, typeset
by XeLaTeX from TeX Live.

The build is as strict as the HTML's: Sphinx's warnings are errors (``-W -n``), and so are
the LaTeX run's own complaints that Sphinx never sees: a character no font of the PDF has
(it would print as nothing) and a reference or citation LaTeX left undefined (it would
print as "??"). The PDF is written whole, to ``_build/pdf/book.pdf``, or not at all.

Responsible for: checking that the TeX programs are there (naming the Debian packages when
not), running the build, judging the LaTeX log, and putting the PDF in place.
Not responsible for: the PDF's layout (``_config.yml``'s ``latex:`` and ``latex_elements``,
``book/_ext/pdf_layout.py``), the tables' LaTeX (:mod:`iolab.report.table_latex`), or
replaying the notebooks (:func:`iolab.report.book.render`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from iolab.paths import BOOK_DIR, REPO_ROOT
from iolab.report import freshness
from iolab.safefiles import replace_output

# the programs the LaTeX build runs, and the Debian package of each (the set-up installs
# them from scripts/system-packages.txt)
TOOLS = {"xelatex": "texlive-xetex", "latexmk": "latexmk"}
# what of the last LaTeX run's log is an error: a glyph no font has, a reference or a
# citation left undefined
_PROBLEM = re.compile(r"^(Missing character: There is no .*?)!?$"
                      r"|^(LaTeX Warning: (?:Reference|Citation|Hyper reference) .*? undefined)",
                      re.MULTILINE)


def missing_tools() -> list[str]:
    """The TeX programs not on the PATH, each as 'program (package)'."""
    return [f"{tool} ({package})" for tool, package in TOOLS.items() if not shutil.which(tool)]


def latex_problems(log_text: str) -> list[str]:
    """Each distinct problem of a LaTeX log (see :data:`_PROBLEM`), in order."""
    found = [(m.group(1) or m.group(2)).strip() for m in _PROBLEM.finditer(log_text)]
    return list(dict.fromkeys(found))


def build(strict: bool = True, force: bool = False,
          log: Callable[[str], None] = print) -> int:
    """Build ``_build/pdf/book.pdf`` from ``book/``; 0 when it was written (or is up to
    date), else the failing step's status, said in one line."""
    root = REPO_ROOT
    missing = missing_tools()
    if missing:
        log("iolab book --pdf: error: the PDF needs TeX Live's XeLaTeX, and these are not "
            f"installed: {', '.join(missing)}; 'make setup' installs them as root (or "
            "apt-get install " + " ".join(TOOLS.values()) + ")")
        return 2
    exe = Path(sys.executable).with_name("jupyter-book")
    argv = [str(exe), "build", "--all", "--builder", "pdflatex"]
    if strict:
        argv += ["-W", "-n", "--keep-going"]
    argv += ["--path-output", str(root), str(BOOK_DIR)]
    out = root / "_build" / "pdf" / "book.pdf"
    key = freshness.build_key(argv)
    if not force and freshness.is_fresh("pdf", key, out):
        log(f"up to date: {out.relative_to(root)} (nothing under book/ changed since it was "
            "built; --force builds anyway)")
        return 0
    freshness.remember("pdf", None)
    code = subprocess.call(argv, cwd=root)
    latex = root / "_build" / "latex"
    problems = latex_problems(_read_log(latex / "book.log"))
    if code == 0 and problems and strict:
        log(f"iolab book --pdf: error: LaTeX reported {len(problems)} problem(s) in "
            f"{latex / 'book.log'}: " + "; ".join(problems[:5]))
        code = 1
    if code != 0:
        return code
    out.parent.mkdir(parents=True, exist_ok=True)
    replace_output(out, lambda tmp: shutil.copyfile(latex / "book.pdf", tmp), "the PDF")
    freshness.remember("pdf", key)
    log(f"wrote {out}")
    return 0


def _read_log(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
