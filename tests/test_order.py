"""The order check of a campaign's runs (iolab.analysis.order): interleaved or in blocks, and
the drift within points, on runs made up with a known design and a known drift."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

from iolab.analysis.order import BLOCKED_SHARE, check


def runs(order: list[str], level: dict[str, float], drift_pct: float = 0.0,
         noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """One row per run, in ``order`` one second apart: its point's level, drifting linearly
    by ``drift_pct`` percent from the first run to the last, with Gaussian noise."""
    rng = random.Random(seed)
    start = pd.Timestamp("2026-11-28T10:00:00Z")
    rows = []
    for i, point in enumerate(order):
        factor = 1 + drift_pct / 100 * i / (len(order) - 1) + rng.gauss(0, noise)
        rows.append({"engine": point, "iops": level[point] * factor,
                     "run.started_at": (start + pd.Timedelta(seconds=i)).isoformat()})
    return pd.DataFrame(rows).sample(frac=1, random_state=seed)   # stored in any order


LEVELS = {"a": 1000.0, "b": 2000.0, "c": 500.0}


def interleaved(rounds: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        batch = list(LEVELS)
        rng.shuffle(batch)
        out += batch
    return out


def test_interleaved_rounds_recover_a_planted_drift():
    found = check(runs(interleaved(20), LEVELS, drift_pct=10, noise=0.01), ["engine"], "iops")
    assert found.design == "interleaved" and found.same_point_share < BLOCKED_SHARE
    assert found.runs == 60 and found.points == 3 and found.df == 60 - 3 - 1
    assert found.drift_low < 10 < found.drift_high and found.drift_low > 5


def test_no_drift_gives_an_interval_around_zero():
    found = check(runs(interleaved(20), LEVELS, noise=0.01, seed=3), ["engine"], "iops")
    assert found.drift_low < 0 < found.drift_high


def test_a_difference_between_points_is_not_taken_for_a_drift():
    """Points of very different levels, interleaved, no drift: the fit is within points."""
    levels = {"a": 1.0, "b": 1e6, "c": 10.0}
    found = check(runs(interleaved(10), levels), ["engine"], "iops")
    assert found.drift_pct == pytest.approx(0, abs=1e-9)


def test_points_run_back_to_back_are_in_blocks_and_said_so():
    order = [p for p in LEVELS for _ in range(3)]
    found = check(runs(order, LEVELS, drift_pct=20, noise=0.01), ["engine"], "iops")
    assert found.design == "in blocks"
    assert found.same_point_share == pytest.approx((9 - 3) / (9 - 1))
    assert "confounded" in found.text() and "in blocks" in found.text()


def test_one_point_has_no_order_to_compare_and_too_few_runs_no_drift():
    one = check(runs(["a"] * 5, LEVELS), ["engine"], "iops")
    assert one.design == "one point" and "no order" in one.text()
    few = check(runs(["a", "b", "c"], LEVELS), ["engine"], "iops")
    assert math.isnan(few.drift_pct) and "cannot be estimated" in few.text()


def test_the_order_is_read_from_the_start_times_not_the_rows():
    """The same runs shuffled in the table: the same check."""
    rows = runs(interleaved(8), LEVELS, drift_pct=5, noise=0.01)
    assert check(rows, ["engine"], "iops") == check(rows.sample(frac=1, random_state=9),
                                                    ["engine"], "iops")
