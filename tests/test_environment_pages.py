"""Every environment with stored runs of an experiment gets a page under its chapter
(iolab.report.book.environment_pages), with labels of its own (relabel)."""

from __future__ import annotations

import nbformat

from iolab.core import registry
from iolab.paths import BOOK_DIR
from iolab.report import book


def test_each_further_environment_with_runs_has_a_page(tmp_path):
    for exp, env in (("smt_thp", "hpc-server"), ("smt_thp", "kvm-2vcpu"),
                     ("cpu_search", "kvm-2vcpu"), ("irq_affinity", "hpc-server")):
        (tmp_path / "raw" / exp / env / "runs" / "r0").mkdir(parents=True)
    (tmp_path / "raw" / "smt_thp" / "no-params" / "runs" / "r0").mkdir(parents=True)
    (tmp_path / "raw" / "tool_comparison" / "hpc-server" / "runs").mkdir(parents=True)  # empty
    pages = {(exp.name, env): page for exp, env, page in book.environment_pages(tmp_path)}
    smt, cpu = registry.get("smt_thp"), registry.get("cpu_search")
    # the notebook's own environment is the chapter itself; a folder without params, or
    # without runs, is no page
    assert set(pages) == {("smt_thp", "hpc-server"), ("irq_affinity", "hpc-server")} | (
        {("cpu_search", "kvm-2vcpu")} if book._default_environment(cpu.notebook) != "kvm-2vcpu"
        else set())
    assert pages[("smt_thp", "hpc-server")] == BOOK_DIR / smt.chapter / "hpc-server.ipynb"


def test_an_environment_page_has_labels_of_its_own(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("(sec-x)=\n# Chapter X\n\nSee {ref}`sec-x-part` and "
                                      "{ref}`sec-framework-claims`."),
        nbformat.v4.new_code_cell("# a comment, not a title"),
        nbformat.v4.new_markdown_cell("(sec-x-part)=\n## Part\n\n```{glue:figure} fig_a\n"
                                      ":name: fig-x-a\n```\n\n{numref}`Figure {number} "
                                      "<fig-x-a>` and {ref}`the part <sec-x-part>`"),
    ]
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    book.relabel(path, "mybox")
    first, code, second = nbformat.read(path, as_version=4).cells
    assert first.source.startswith("(sec-x-mybox)=\n# Chapter X (environment mybox)\n")
    assert "{ref}`sec-x-part-mybox`" in first.source
    assert "{ref}`sec-framework-claims`" in first.source  # another page's label: as it was
    assert code.source == "# a comment, not a title"
    assert second.source.startswith("(sec-x-part-mybox)=\n## Part")
    assert ":name: fig-x-a-mybox" in second.source
    assert "<fig-x-a-mybox>`" in second.source and "<sec-x-part-mybox>`" in second.source
