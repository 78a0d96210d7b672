"""A committed run with one number of its output changed, judged as ``OneRun._read_output``
judges a new run's output (the adapter's parse, its foreign-report check, the experiment's
row and its sample check): probe 12's cases where such a run was stored as a sample."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

from iolab.core import registry, tool_registry
from iolab.core.store import Store, StoredRun
from iolab.errors import ParseError
from iolab.paths import default_data_dir


def judged(tmp_path: Path, experiment: str, environment: str,
           edit: Callable[[Path], None] | None = None) -> str:
    """Why the first committed run of the campaign, copied and edited, makes no sample ("" when
    it makes one)."""
    exp = registry.get(experiment)
    stored = Store(default_data_dir(), experiment, environment).complete_runs()[0]
    run = tmp_path / environment / "runs" / stored.path.name
    shutil.copytree(stored.path, run)
    shutil.copy(stored.path.parent.parent / "host.json", tmp_path / environment / "host.json")
    if edit is not None:
        edit(run)
    adapter = tool_registry.adapter(stored.manifest.tool)
    try:
        metrics = adapter.parse(run)
        if metrics.get("problem"):
            return metrics["problem"]
        foreign = adapter.foreign_report(run, stored.manifest.argv)
        if foreign:
            return foreign
        row = exp.tidy_row(StoredRun(run, stored.manifest))
        return exp.sample_problem(row, 2) or ""
    except ParseError as exc:
        return str(exc)


def edit_json(name: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        doc = json.loads((run / name).read_text())
        change(doc)
        (run / name).write_text(json.dumps(doc))
    return edit


def test_the_committed_runs_used_here_make_samples(tmp_path):
    for experiment, environment in [("smt_thp", "kvm-2vcpu"), ("cpu_search", "kvm-2vcpu"),
                                    ("cpu_search", "xeon-v657"), ("gpu_pcie", "h200-pcie5")]:
        assert judged(tmp_path / experiment / environment, experiment, environment) == ""


@pytest.mark.parametrize("days", [-365, -1, 365])
def test_a_fio_report_stamped_far_from_the_runs_window_is_not_its_report(tmp_path, days):
    """Probe 12 R3: fio's timestamp was checked only against 2005-2100; a report stamped a
    year (or a day) before the run began was stored as its sample."""
    def move(doc: dict) -> None:
        doc["timestamp"] += days * 86400
        doc["timestamp_ms"] += days * 86400 * 1000
    why = judged(tmp_path, "smt_thp", "kvm-2vcpu", edit_json("fio.json", move))
    assert "the tool's report says it measured" in why and "outside the run's window" in why
