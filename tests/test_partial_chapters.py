"""Chapters executed from campaigns that stopped part way.

A Slurm job stops before its time limit, so a data folder often holds only some of a
campaign's runs. Each chapter with committed data on kvm-2vcpu is executed here from a few of
its stored runs copied into a temporary data folder (the subsets that made chapters crash:
one run, the repetitions of one point, one engine or one tool only, a grid without the base
point's sweep), plus the PCIe chapter from one run of AiSIO's archive where that is at hand.
Each must execute without an error output and glue no "nan": a number that cannot be computed
stays unset ("n/a") or, in the SMT/THP chapter, says in words why, and a figure that cannot be
drawn is a sentence saying what is missing.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from test_import_cijoe import PCIE

from iolab.core import registry
from iolab.importers.cijoe import import_archive
from iolab.paths import REPO_ROOT, default_data_dir
from iolab.report.book import execute

pytestmark = pytest.mark.slow
RAW = default_data_dir() / "raw"
ENV = "kvm-2vcpu"


def copy_runs(data: Path, experiment: str, keep, environment: str = ENV,
              source: Path = RAW) -> int:
    """Copy a stored campaign into ``data`` with only the runs whose manifest ``keep``
    accepts (``keep(point, rep, grids)``); the campaign's other files (host.json, logs)
    come along as a partial campaign has them. Returns the runs copied."""
    src = source / experiment / environment
    dst = data / "raw" / experiment / environment
    (dst / "runs").mkdir(parents=True)
    for path in src.iterdir():
        if path.is_file():
            shutil.copy2(path, dst / path.name)
        elif path.name != "runs":
            shutil.copytree(path, dst / path.name)
    copied = 0
    for run in sorted((src / "runs").iterdir()):
        manifest = json.loads((run / "run.json").read_text())
        if keep(manifest["point"], manifest["rep"], manifest.get("grids") or []):
            shutil.copytree(run, dst / "runs" / run.name)
            copied += 1
    assert copied, f"no stored run of {experiment} matches; the committed data changed"
    return copied


def first_point(experiment: str, want) -> dict:
    """The first stored point (in run-folder order) that ``want(point, grids)`` accepts."""
    for run in sorted((RAW / experiment / ENV / "runs").iterdir()):
        manifest = json.loads((run / "run.json").read_text())
        if want(manifest["point"], manifest.get("grids") or []):
            return manifest["point"]
    raise AssertionError(f"no stored point of {experiment} matches; the committed data changed")


def run_chapter(tmp_path: Path, experiment: str, data: Path, environment: str = ENV) -> None:
    # the published references too: the chapters compare partial data with them
    shutil.copytree(REPO_ROOT / "data" / "reference", data / "reference")
    out = tmp_path / f"{experiment}.ipynb"
    execute(registry.get(experiment).notebook, out,
            {"environment": environment, "mode": "replay", "data_dir": str(data)})
    errors, nans = [], []
    for cell in nbformat.read(out, as_version=4).cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                errors.append(f"{output['ename']}: {output['evalue']}")
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            text = output.get("data", {}).get("application/papermill.record/text/plain")
            if name and text is not None and re.search(r"\bnan\b", text, re.IGNORECASE):
                nans.append(f"{name} = {text}")
    assert not errors, errors
    assert not nans, f"glued 'nan' instead of leaving the value unset: {nans}"


def test_smt_thp_two_repetitions_of_one_psync_point(tmp_path):
    # the job of the report: psync at concurrency 1 only, so no io_uring to compare with, no
    # affinity runs, and one concurrency level for the sweep's lowest, base and highest
    data = tmp_path / "data"
    base = first_point("smt_thp", lambda p, g: p["engine"] == "psync" and p["concurrency"] == 1)
    copy_runs(data, "smt_thp", lambda p, rep, g: p == base and rep < 2)
    run_chapter(tmp_path, "smt_thp", data)


def test_smt_thp_one_run_of_the_thp_grid(tmp_path):
    # runs stored, but none at the base point's concurrency sweep or affinity settings
    data = tmp_path / "data"
    copy_runs(data, "smt_thp", lambda p, rep, g: g == ["thp"] and rep == 0
              and p["engine"] == "io_uring")
    run_chapter(tmp_path, "smt_thp", data)


@pytest.fixture
def no_spdk(tmp_path, monkeypatch):
    """No SPDK built, as for a reader who replays a part of a campaign: the plan of the runs
    left names bdevperf as missing instead of failing the chapter (the kernel inherits it)."""
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tmp_path / "no-tools"))


def test_cpu_search_repetitions_of_one_point_beside_one_tool_comparison_run(tmp_path, no_spdk):
    # no single-device point, so no device capacity (nor roofline); the CPU chapter also
    # shows the tool comparison, here one run away from its base queue depth
    data = tmp_path / "data"
    point = first_point("cpu_search", lambda p, g: p["ndevs"] != 1)
    copy_runs(data, "cpu_search", lambda p, rep, g: p == point)
    copy_runs(data, "tool_comparison", lambda p, rep, g: p["tool"] == "fio" and p["qdepth"] == 1
              and rep == 0)
    run_chapter(tmp_path, "cpu_search", data)


def test_tool_comparison_repetitions_of_one_tool_at_the_base_point(tmp_path, no_spdk):
    # one tool of three: the tables have columns for tools without runs
    data = tmp_path / "data"
    copy_runs(data, "tool_comparison", lambda p, rep, g: p["tool"] == "bdevperf"
              and p["qdepth"] == 32 and p["engine"] == "io_uring" and p["ncores"] == 1)
    run_chapter(tmp_path, "tool_comparison", data)


def test_irq_affinity_one_run(tmp_path):
    # one run: no second placement or task-run mode to compare, no interval
    data = tmp_path / "data"
    point = first_point("irq_affinity", lambda p, g: True)
    copy_runs(data, "irq_affinity", lambda p, rep, g: p == point and rep == 0)
    run_chapter(tmp_path, "irq_affinity", data)


@pytest.mark.skipif(not PCIE.exists(), reason=f"AiSIO's archive {PCIE} not found (public data, "
                    "never committed)")
def test_pcie_saturation_one_imported_run(tmp_path):
    # one run per I/O size point leaves the payload's interval undefined (NaN), which the
    # summary's pivot used to drop as a column
    full = tmp_path / "full"
    import_archive(PCIE, "pcie_saturation", "hpc-server", full, progress=False)
    # the first run folder's point, every point being one I/O size of the base point
    first = sorted((full / "raw" / "pcie_saturation" / "hpc-server" / "runs").iterdir())[0]
    point = json.loads((first / "run.json").read_text())["point"]
    data = tmp_path / "data"
    copy_runs(data, "pcie_saturation", lambda p, rep, g: p == point and rep == 0,
              environment="hpc-server", source=full / "raw")
    run_chapter(tmp_path, "pcie_saturation", data, environment="hpc-server")
