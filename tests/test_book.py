"""The book: replay every notebook from data/ and build strictly (-W -n --keep-going).

This is what `make book` does, with the HTML written to a temporary folder. Any broken
reference, missing glue key, citation or image fails it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from iolab.book import RENDERED, render
from iolab.paths import BOOK_DIR, REPO_ROOT

pytestmark = pytest.mark.slow


def test_strict_build(tmp_path):
    written = render(log=lambda *_: None)
    assert {p.relative_to(BOOK_DIR).as_posix() for p in written} == set(RENDERED.values())
    exe = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(exe), "build", "--all", "-W", "-n", "--keep-going",
                           "--path-output", str(tmp_path), str(BOOK_DIR)],
                          cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    html = tmp_path / "_build" / "html"
    chapter = (html / "experiments" / "smt_thp.html").read_text()
    assert chapter.count('class="pasted-text"') >= 20
    assert '<span class="pasted-text">n/a</span>' not in chapter, "a glued number is missing"
    assert "No measurement stored" not in chapter, "a figure is a placeholder"
    cpu = (html / "experiments" / "cpu_initiated.html").read_text()
    assert '<span class="pasted-text">n/a</span>' not in cpu and "No measurement stored" not in cpu
    assert "61,720,159" in cpu, "AiSIO's published A value is shown beside the measurements"
    assert chapter.count("<img") >= 3
    for label_page in ("framework.html", "environments/index.html", "environments/inventory.html",
                       "experiments/cpu_initiated.html", "experiments/pcie_saturation.html",
                       "experiments/cuda_iosize.html", "experiments/cuda_qdepth.html",
                       "experiments/irq_affinity.html"):
        assert (html / label_page).exists(), label_page
