"""A chapter's sentence on its runs' quiet and the list of runs measured under foreign load
(iolab.report.quiet_runs), on constructed tidy rows (not measurements) and the committed
replication pack of an Intel host."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from iolab.report import quiet_runs as qr

NAN = math.nan


def rows(foreign, steal, loaded):
    return pd.DataFrame({"run.id": [f"p{i}-r0" for i in range(len(foreign))],
                         "engine": ["psync"] * len(foreign), "concurrency": range(len(foreign)),
                         "stress": [False] * len(foreign),
                         qr.FOREIGN: foreign, qr.STEAL: steal, qr.LOADED: loaded})


def test_quiet_runs_say_so_and_list_nothing():
    quiet = rows([2.0, 3.0, 7.5], [0.0, 0.1, 0.2], [False, False, False])
    said = qr.text(quiet)
    assert said.startswith("All 3 runs record the machine's quiet")
    assert "median of 3.0 % of its CPU (at most 7.5 %)" in said and "at most 0.2 %" in said
    assert "No run was measured under foreign load (above 10 % foreign CPU or 5 % steal)" in said
    assert qr.table(quiet, ["engine"]) is None


def test_runs_under_foreign_load_are_counted_and_listed_with_their_point():
    some = rows([2.0, 11.3, NAN], [11.9, 0.0, NAN], [True, True, None])
    said = qr.text(some)
    assert said.startswith("2 of 3 runs record") and "2 runs were measured under foreign" in said
    assert "below with their points; they stay" in said
    shown = qr.table(some, ["engine", "concurrency", "stress", "absent"])
    assert shown["run"].tolist() == ["p0-r0", "p1-r0"]
    # a flag reads yes/no, never a Python repr
    assert shown["point"].tolist() == ["engine psync, concurrency 0, stress no",
                                       "engine psync, concurrency 1, stress no"]
    assert shown["foreign CPU (%)"].tolist() == ["2.0", "11.3"]
    assert shown["steal (%)"].tolist() == ["11.9", "0.0"]


def test_runs_made_before_the_record_are_not_called_quiet():
    old = pd.DataFrame({"run.id": ["a-r0"], "engine": ["psync"]})
    assert "before iolab recorded the machine's quiet" in qr.text(old)
    assert "before iolab recorded" in qr.text(rows([NAN], [NAN], [None]))
    assert qr.table(old, ["engine"]) is None
    assert qr.text(old.iloc[0:0]).startswith("No run is stored")


def test_the_committed_intel_pack_lists_its_one_run_under_steal():
    from iolab.report.chapter import Chapter

    ch = Chapter("irq_affinity", "xeon-v657", mode="replay")
    if not ch.have:
        pytest.skip("no committed irq_affinity/xeon-v657 campaign")
    assert "1 run was measured under foreign load" in qr.text(ch.df)
    assert "with its point; it stays in the tables" in qr.text(ch.df)
    [steal] = qr.table(ch.df, ch.spec.variables)["steal (%)"]
    assert steal == "11.9"
