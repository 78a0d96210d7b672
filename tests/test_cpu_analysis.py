"""CPU-search analysis on small hand-made tables whose answers are known in advance.

These frames are test inputs for the arithmetic, not measurements; the chapter only ever
shows tables loaded from data/raw.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from iolab.experiments.cpu_search import analysis as ca

BASE = {"cpu_governor": "performance", "turbo": "on", "smt": "on", "thr_sib": False, "stress": False,
        "qdepth": 128, "iosize": 512, "ncores": 2, "ndevs": 2}


def rows(point, values):
    return [{**BASE, **point, "iops": v, "mibs": v * 512 / 2**20} for v in values]


@pytest.fixture
def table():
    data = (rows({}, [100.0, 102.0, 98.0])                      # C at the optimum
            + rows({"thr_sib": True}, [99.0, 100.0, 98.0])     # A
            + rows({"thr_sib": True, "stress": True}, [99.0, 99.0, 99.0])  # B
            + rows({"stress": True}, [60.0, 62.0, 58.0])       # D
            + rows({"cpu_governor": "powersave"}, [40.0, 41.0, 39.0])
            + rows({"ndevs": 1}, [55.0, 56.0, 54.0])
            + rows({"ndevs": 1, "qdepth": 64}, [57.0, 58.0, 56.0])
            + rows({"qdepth": 64}, [90.0, 91.0, 89.0]))
    return pd.DataFrame(data)


def test_device_capacity_is_the_best_single_device_point(table):
    cap = ca.device_capacity(table)
    assert cap["iops"] == pytest.approx(57.0) and cap["point"]["qdepth"] == 64
    assert cap["max_single_run"] == 58.0 and cap["n"] == 3


def test_optimum_and_ad_table(table):
    opt = ca.optimum(table)
    assert opt["thr_sib"] == False and opt["stress"] == False and opt["qdepth"] == 128  # noqa: E712
    ad = ca.ad_table(table, opt).set_index("id")
    assert ad.loc["A", "mean"] == pytest.approx(99.0) and ad.loc["D", "mean"] == pytest.approx(60.0)
    assert ad.loc["B", "sd"] == 0.0


def test_effect_with_interval(table):
    eff = ca.effect(table, BASE, {"cpu_governor": "powersave"})
    assert eff["pct"] == pytest.approx(-60.0)
    assert eff["ci_low"] < -60.0 < eff["ci_high"]
    missing = ca.effect(table, BASE, {"turbo": "off"})
    assert math.isnan(missing["pct"]) and missing["n_new"] == 0


def test_sweep_holds_the_rest_at_the_reference(table):
    s = ca.sweep(table, BASE, "qdepth").set_index("qdepth")
    assert list(s.index) == [64, 128] and s.loc[64, "mean"] == pytest.approx(90.0)


def test_normalize_maps_aisio_spellings():
    df = pd.DataFrame([{"smt": 1, "turbo": 0, "thr_sib": 0, "stress": 1, "cpu_governor": "performance",
                        "fixed_freq": 3.0, "ncpus": 4, "iops": 1.0, "mibs": 1024.0}])
    out = ca.normalize(df).iloc[0]
    assert out["smt"] == "on" and out["turbo"] == "off" and out["stress"] == True  # noqa: E712
    assert out["cpu_governor"] == "userspace-3.0GHz" and out["ncores"] == 4 and out["gibs"] == 1.0


def test_the_published_comparison_and_the_knob_effects(table):
    opt = {k: v for k, v in BASE.items()}
    published = pd.DataFrame([
        {"setting": "optimum", "id": i, "iops": 100.0, "published_change_pct": None} for i in "ABCD"
    ] + [{"setting": "powersave", "id": "C", "iops": 50.0, "published_change_pct": -50.0}])
    ad = ca.ad_comparison(table, opt, published[published.setting == "optimum"].set_index("id")["iops"])
    assert ad.loc["C", "measured / published"] == pytest.approx(1.0)
    eff = ca.effects(table, opt, published)
    power = eff[eff["change"] == "powersave governor"].set_index("id")
    assert list(power.index) == ["C"], "only the ids AiSIO published"
    assert power.loc["C", "pct"] == pytest.approx(-60.0) and power.loc["C", "published_pct"] == -50.0
    assert eff[eff["change"] == "turbo off"].empty
    narrow = ca.effect(table, opt, {"cpu_governor": "powersave"}, confidence=0.5)
    wide = ca.effect(table, opt, {"cpu_governor": "powersave"}, confidence=0.99)
    assert wide["ci_high"] - wide["ci_low"] > narrow["ci_high"] - narrow["ci_low"]


def test_design_summary_and_grid_table():
    from iolab.core.planner import Point
    points = [Point(dict(a=1), ["search"]), Point(dict(a=2), ["search"], "why"),
              Point(dict(a=3), ["wide"]), Point(dict(a=1, b=1), ["search", "wide"])]
    d = ca.design_summary(points, 3)
    assert d == {"search_points": 3, "search_excluded": 1, "search_runnable": 2,
                 "expansion_points": 1, "runs": 9}
    grids = {"search": {"vary": {"a": [1, 2]}, "set": {}}, "wide": {"vary": {"a": [3]}, "set": {"b": 1}}}
    t = ca.grid_table(grids, points).set_index("grid")
    assert t.loc["wide", "sets"] == "b=1" and t.loc["search", "excluded"] == 1


def confirmed(point, values, label="A"):
    return [{**row, "run.confirm": label} for row in rows(point, values)]


def test_confirmed_estimates_quote_the_fresh_runs_not_the_search(table):
    fresh = pd.DataFrame(confirmed({}, [95.0, 96.0, 94.0])
                         + confirmed({"ndevs": 1, "qdepth": 64}, [50.0, 51.0, 49.0])
                         + confirmed({}, [96.0, 94.0, 95.0], label="B"))
    got = ca.confirmed_estimates(table, fresh)
    assert list(got["table"]["ndevs"]) == [2, 1]         # ranked by the search's means
    assert got["optimum"]["mean"] == pytest.approx(95.0)
    assert got["optimum"]["mean_search"] == pytest.approx(100.0)
    assert got["capacity"]["qdepth"] == 64 and got["capacity"]["mean"] == pytest.approx(50.0)
    assert got["quoted"] == {"optimum": pytest.approx(95.0), "optimum_source": "confirmation",
                             "ndevs": 2, "capacity": pytest.approx(50.0),
                             "capacity_source": "confirmation"}
    assert got["optimum"]["pct"] == pytest.approx(-5.0) and got["optimum"]["pct_high"] < 0


def test_without_confirmation_runs_the_search_is_quoted_and_says_so(table):
    got = ca.confirmed_estimates(table, pd.DataFrame())
    assert got["optimum"] is None and got["capacity"] is None and got["table"].empty
    assert got["quoted"]["optimum"] == pytest.approx(100.0)
    assert got["quoted"]["capacity"] == pytest.approx(57.0)
    assert got["quoted"]["optimum_source"] == got["quoted"]["capacity_source"] == "search"


def test_replication_compares_the_best_sets_of_two_hosts(table):
    other = table.copy()
    other.loc[other["qdepth"] == 64, "iops"] *= 1.2        # another host: qdepth 64 wins
    rep = ca.replication(table, other)
    assert rep["top"]["qdepth"] == 128 and rep["their_top"]["qdepth"] == 64
    assert rep["common_points"] == 8
    assert not rep["their_top_in_ours"] and not rep["agree"]   # 64 is beaten here
    assert rep["ratio"]["ratio"] == pytest.approx(100.0 / 108.0)
    same = ca.replication(table, table)
    assert same["agree"] and same["same_top"] and same["shared"] == same["ours"]
