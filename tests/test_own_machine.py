"""A reader's own machine beside the book's (issue 31's promise, end to end): in a copy of the
project, `iolab env new mybox --from kvm-2vcpu`, a short `iolab run smt_thp --env mybox` and
`iolab book` (what `make book` calls) put mybox into the SMT/THP chapter, with its own page
under the chapter and the table that compares each finding across the environments, under
the strict build. Slow: it replays and builds the whole book once more."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import copy_project

pytestmark = pytest.mark.slow


def test_a_new_machine_s_runs_join_the_chapter_with_the_comparison(tmp_path):
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (make setup installs it)")
    repo = tmp_path / "project"
    copy_project(repo)
    env = {k: v for k, v in os.environ.items() if k != "IOLAB_DATA"}
    env["PYTHONPATH"] = str(repo)  # the copy's package, so its paths are the copy's

    def iolab(*args: str, timeout: int = 1800) -> str:
        done = subprocess.run([sys.executable, "-m", "iolab", *args], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"iolab {' '.join(args)}:\n{done.stdout[-3000:]}" \
                                     f"\n{done.stderr[-3000:]}"
        return done.stdout

    iolab("env", "new", "mybox", "--from", "kvm-2vcpu")
    params = repo / "notebooks" / "params" / "mybox" / "smt_thp.yaml"
    design = yaml.safe_load(params.read_text())
    # a short campaign: the concurrency grid at two depths, two repetitions of one second
    design.update(runtime_s=1, ramp_s=0, repetitions=2, target_size="64M",
                  target_path=str(tmp_path / "smt_thp.dat"),
                  grids={"concurrency": {"vary": {"engine": ["psync", "io_uring"],
                                                  "concurrency": [1, 64]}}})
    params.write_text(yaml.safe_dump(design, sort_keys=False))
    iolab("run", "smt_thp", "--env", "mybox")
    iolab("book")

    html = repo / "_build" / "html" / "experiments"
    own = (html / "smt_thp" / "mybox.html").read_text()
    assert "environment mybox" in own and "Across environments" in own
    chapter = (html / "smt_thp.html").read_text()
    assert "Across environments" in chapter
    # mybox among the other environments with stored runs (the book has more than one)
    assert re.search(r"environments? (?:[\w.-]+, )*mybox(?:, [\w.-]+)* ha(?:s|ve) stored runs",
                     chapter)
    # the comparison table's verdict column: one, or one per other environment
    assert "across the environments" in chapter or "mybox against kvm-2vcpu" in chapter
    assert ">mybox</th>" in chapter  # its column beside kvm-2vcpu's
    # the environment's page is in the chapter's table of contents
    assert 'href="smt_thp/mybox.html"' in chapter
