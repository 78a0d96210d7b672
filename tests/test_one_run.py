"""A sample is a sample: runs whose tool wrote no output, or read a metric no measurement
can have, are failed runs, kept with their reason, and never stored as samples.

Campaigns of the conftest's ``Demo`` experiment with the scripted fake fio of
tests/test_rounds.py (its ``"silent"`` fault, and IOPS of NaN, infinity or below zero).
"""

from __future__ import annotations

import json
import math

import pytest

from iolab.core.experiment import Metric
from iolab.errors import IolabError
from iolab.execution.campaign import Campaign
from test_rounds import campaigns, fake_fio, stored  # noqa: F401  (the fixture)

THREE = """experiment: demo
tool: fio
runtime_s: 1
repetitions: 3
base: {engine: psync, concurrency: 1, thp: asis, pinned: false}
grids:
  one: {vary: {concurrency: [1]}}
"""


@pytest.fixture
def campaign(demo, params_dir, tmp_path):
    return campaigns(demo, params_dir, tmp_path, THREE)


def reasons(camp: Campaign) -> list[str]:
    """Why each failed run failed, as its manifest records it."""
    return [json.loads((d / "run.json").read_text())["failure"]
            for d in camp.store.failed_runs()]


def test_a_tool_that_writes_no_output_is_a_failed_run_and_keep_going_goes_on(campaign,
                                                                             fake_fio):
    camp = campaign("data")
    fake_fio(camp, {1: [1000, "silent", 1000]})
    result = camp.run(progress=False, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    assert reasons(camp) == ["no output: fio.json was not written (fio exited with status 0)"]
    assert len(camp.tidy()) == 2


def test_a_tool_that_writes_no_output_stops_the_campaign_without_keep_going(campaign,
                                                                            fake_fio):
    camp = campaign("data")
    fake_fio(camp, {1: [1000, "silent", 1000]})
    with pytest.raises(IolabError, match=r"failed: no output: fio\.json was not written .*"
                                         "Use --keep-going"):
        camp.run(progress=False)
    assert len(stored(camp)) == 1 and len(reasons(camp)) == 1


@pytest.mark.parametrize("value, read", [("nan", "nan"), ("inf", "inf"), (-5, "-5.0")])
def test_a_metric_no_measurement_can_have_fails_the_run(campaign, fake_fio, value, read):
    camp = campaign("data")
    fake_fio(camp, {1: [1000, value, 1000]})
    result = camp.run(progress=False, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    assert reasons(camp) == [f"metric iops (from fio.iops) reads {read}, which no measurement "
                             "of IOPS can be"]
    df = camp.tidy()
    assert len(df) == 2 and list(df["iops"]) == [1000.0, 1000.0]


def test_a_collectors_nan_is_its_missing_value_and_no_problem(demo):
    """NaN is how a collector says it has no value (no cpufreq samples in the window); from
    the tool, or infinite or negative from anything, it is no measurement."""
    row = {"run.tool": "fio", "fio.iops": 1000.0, "iops": 1000.0}
    assert demo.sample_problem(row) == ""
    assert demo.sample_problem({**row, "fio.iops": None, "iops": math.nan}) == ""
    assert demo.sample_problem({**row, "fio.iops": math.nan, "iops": math.nan}) != ""
    demo.metrics = {**demo.metrics, "busy": Metric("busy", ("procstat.busy",))}
    assert demo.sample_problem({**row, "procstat.busy": math.nan, "busy": math.nan}) == ""
    assert demo.sample_problem({**row, "procstat.busy": -1.0, "busy": -1.0}) == (
        "metric busy (from procstat.busy) reads -1.0, which no measurement of busy can be")
