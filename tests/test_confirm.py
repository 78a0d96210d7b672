"""The confirmation step (iolab.core.confirm): validation, the choice, the plan and real
campaigns of a scripted fake fio, as in test_rounds.

The script gives every point's values per repetition in advance, confirmation runs included
(their ids come from the point's identity plus the label), so a campaign stopped and resumed
must store exactly the runs of one left alone.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from iolab.analysis import confirmation
from iolab.core import confirm, identity
from iolab.core.schema import Flag, Int
from iolab.errors import InputError
from iolab.execution.campaign import Campaign
from test_rounds import ENV, fake_fio  # noqa: F401  (the fixture)
from test_rounds import WithoutHostKnobs, campaigns, failed, log, stored

PARAMS = """experiment: demo
tool: fio
runtime_s: 1
repetitions: {min: 3, max: 4, metric: iops, target_ci_pct: 5}
base: {engine: psync, concurrency: 1, thp: asis, pinned: false}
grids:
  conc: {vary: {concurrency: [1, 2, 4, 8]}}
confirm: {top: 1, groups: [{}, {concurrency: [1, 2]}], aa: true}
"""
# search values by concurrency; 4 is clearly best, 2 is best of {1, 2}
SEARCH = {1: [1000, 1010, 990, 1000], 2: [2000, 2010, 1990, 2000],
          4: [4000, 4040, 3960, 4000], 8: [3000, 3030, 2970, 3000]}
# confirmation values (both labels): a little lower than the search's, as a curse would have it
CONFIRM = {2: [1900, 1910, 1890, 1900], 4: [3800, 3840, 3760, 3800]}


@pytest.fixture
def campaign(demo, params_dir, tmp_path):
    return campaigns(demo, params_dir, tmp_path, PARAMS)


@pytest.fixture
def scripted(fake_fio, tmp_path):  # noqa: F811
    """Write the script of every run a campaign may make, confirmation runs included."""
    def write(camp: Campaign) -> None:
        values = {}
        for point in camp.plan().points():
            if point.confirm:
                continue
            ident = camp.experiment.identity(ENV, camp.spec.settings, point.params)
            c = point.params["concurrency"]
            values.update(zip(identity.run_ids(ident, 4), SEARCH[c]))
            for label in confirm.LABELS:
                ids = identity.run_ids({**ident, confirm.KEY: label}, 4)
                values.update(zip(ids, CONFIRM.get(c, SEARCH[c])))
        (tmp_path / "script.json").write_text(json.dumps(values))
    return write


def confirm_runs(camp: Campaign) -> dict[tuple[int, str], int]:
    out: dict[tuple[int, str], int] = {}
    for r in camp.store.complete_runs():
        if confirm.KEY in r.manifest.identity:
            key = (r.manifest.point["concurrency"], r.manifest.identity[confirm.KEY])
            out[key] = out.get(key, 0) + 1
            assert r.manifest.grids == [confirm.GRID]
    return out


# -- validation ---------------------------------------------------------------------------

VARIABLES = {"concurrency": Int(1, 64), "pinned": Flag()}


@pytest.mark.parametrize("value, key, words", [
    ([1], "confirm", "must be a mapping"),
    ({"tops": 1}, "confirm.tops", "unknown field"),
    ({"top": 0}, "confirm.top", "out of range"),
    ({"aa": "yes"}, "confirm.aa", ""),
    ({"groups": []}, "confirm.groups", "non-empty list"),
    ({"groups": [3]}, "confirm.groups[0]", "mapping of variables"),
    ({"groups": [{"qd": [1]}]}, "confirm.groups[0].qd", "unknown variable"),
    ({"groups": [{"concurrency": []}]}, "confirm.groups[0].concurrency", "lists no value"),
    ({"groups": [{"concurrency": [0]}]}, "confirm.groups[0].concurrency", ""),
    ({"confidence": 1.5}, "confirm.confidence", ""),
])
def test_a_bad_confirm_key_is_refused_naming_file_and_key(value, key, words):
    with pytest.raises(InputError) as err:
        confirm.parse(value, "p.yaml", VARIABLES)
    assert err.value.key == key and "p.yaml" in str(err.value) and words in str(err.value)


def test_a_bad_confirm_key_in_a_params_file_stops_before_anything_is_written(
        demo, params_dir, tmp_path):
    folder = params_dir({ENV: PARAMS.replace("top: 1", "top: many")})
    with pytest.raises(InputError) as err:
        Campaign(demo, ENV, data_dir=tmp_path / "data", params_dir=folder).run(progress=False)
    assert err.value.key == "confirm.top" and "demo.yaml" in str(err.value)
    assert not (tmp_path / "data").exists()


def test_the_step_in_words_and_as_data():
    step = confirm.parse({"top": 2, "groups": [{}, {"concurrency": 1}], "aa": True}, "p",
                         VARIABLES)
    assert step.to_dict() == {"top": 2, "groups": [{}, {"concurrency": [1]}], "aa": True,
                              "confidence": 0.95}
    assert step.most_points() == 5
    assert "top 2 of the best set of all points and the top 2" in step.text()
    assert "concurrency 1" in step.text() and "A/A" in step.text()


# -- the choice ---------------------------------------------------------------------------

def test_the_choice_takes_each_groups_best_and_pairs_the_first():
    step = confirm.parse({"top": 1, "groups": [{}, {"concurrency": [1, 2]}], "aa": True},
                         "p", VARIABLES)
    cands = [({"concurrency": c}, v) for c, v in SEARCH.items()]
    got = confirm.choose(step, cands, open_points=0)
    assert got.points == [({"concurrency": 4}, "A"), ({"concurrency": 2}, "A"),
                          ({"concurrency": 4}, "B")]
    assert "number 1 of the best set of all points (1 of 4" in got.reasons[0]
    assert "concurrency 1/2" in got.reasons[1] and "A/A" in got.reasons[2]


def test_the_choice_takes_the_top_of_the_best_set_only():
    """Top 3 of a best set of two gives two points: a point beaten by another is never
    confirmed, whatever top asks."""
    step = confirm.parse({"top": 3}, "p", VARIABLES)
    cands = [({"concurrency": 1}, [100, 101, 99]), ({"concurrency": 2}, [102, 92, 112]),
             ({"concurrency": 4}, [10, 11, 9])]
    got = confirm.choose(step, cands, 0)
    assert [p["concurrency"] for p, _ in got.points] == [2, 1]


def test_the_step_waits_for_open_points_and_says_why():
    step = confirm.parse({}, "p", VARIABLES)
    got = confirm.choose(step, [({"concurrency": 1}, [1.0])], open_points=3)
    assert got.points == [] and "3 points are not settled" in got.waiting
    got = confirm.choose(step, [({"concurrency": 1}, [1.0])], open_points=0)
    assert got.points == [] and "no point has two stored runs" in got.waiting


# -- campaigns ----------------------------------------------------------------------------

def test_a_campaign_confirms_its_choice_after_the_search(campaign, scripted):
    camp = campaign("data", {"seed": 3})
    before = camp.plan()
    assert "waits for the search: 4 points are not settled" in before.confirm_waiting
    assert before.to_run_max == 4 * 4 + 3 * 4  # the search's, and the step's most
    assert "confirm:" in before.summary()
    scripted(camp)
    result = camp.run(progress=False, keep_going=True)
    assert not result.failed
    # concurrency 4 (best of all) under A and B, 2 (best of 1 and 2) under A; three runs
    # each, as the rule settles them at its minimum
    assert confirm_runs(camp) == {(4, "A"): 3, (4, "B"): 3, (2, "A"): 3}
    after = camp.plan()
    assert after.counts()["to run"] == 0 and after.to_run_max == 0
    doc = after.to_dict()["confirm"]
    assert doc["waiting"] == "" and [p["label"] for p in doc["points"]] == ["A", "A", "B"]
    events = [e for e in log(camp) if e["event"] == "confirm"]
    assert len(events) == 1 and len(events[0]["points"]) == 3
    df = camp.tidy()
    assert set(df["run.confirm"].dropna()) == {"A", "B"}
    assert df["run.confirm"].isna().sum() == 12


def test_a_confirmation_stopped_and_resumed_stores_what_an_uninterrupted_one_does(
        campaign, scripted):
    whole = campaign("whole", {"seed": 1})
    scripted(whole)
    whole.run(progress=False, keep_going=True)
    for i, limit in enumerate([5, 9, 4]):  # the third stop falls inside the step
        parts = campaign("parts", {"seed": 50 + i})
        result = parts.run(progress=False, keep_going=True, limit=limit)
        assert result.completed + len(result.failed) == limit
    parts.run(progress=False, keep_going=True)
    assert stored(parts) == stored(whole) and failed(parts) == failed(whole)
    assert parts.plan().to_dict()["confirm"] == whole.plan().to_dict()["confirm"]


# -- the analysis of the step -------------------------------------------------------------

def frame(search: dict, confirmed: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    s = pd.DataFrame([{"c": c, "iops": v} for c, vs in search.items() for v in vs])
    k = pd.DataFrame([{"c": c, "iops": v, "run.confirm": lab}
                      for (c, lab), vs in confirmed.items() for v in vs])
    return s, k


def test_confirmed_points_set_the_fresh_runs_beside_the_search():
    s, k = frame(SEARCH, {(4, "A"): CONFIRM[4], (4, "B"): CONFIRM[4], (2, "A"): CONFIRM[2]})
    t = confirmation.confirmed_points(s, k, ["c"], "iops")
    assert list(t["c"]) == [4, 2] and list(t["n"]) == [4, 4] and list(t["n_search"]) == [4, 4]
    assert t.loc[0, "mean"] == pytest.approx(3800) and t.loc[0, "pct"] == pytest.approx(-5.0)
    assert t.loc[0, "pct_low"] < -5 < t.loc[0, "pct_high"] < 0


def test_an_aa_pair_of_equal_runs_contains_zero_and_its_floor():
    s, k = frame({}, {(4, "A"): [100, 102, 98, 100], (4, "B"): [101, 99, 100, 100]})
    pair = confirmation.aa_pair(k, ["c"], "iops")
    assert pair.defined and pair.point == {"c": 4} and (pair.n_a, pair.n_b) == (4, 4)
    assert pair.contains_zero and pair.floor.defined and pair.inside(pair.floor.floor)


@pytest.mark.parametrize("rows, why", [
    ({}, "no confirmation runs"),
    ({(4, "A"): [1, 2, 3]}, "second label"),
    ({(4, "A"): [1, 2, 3], (4, "B"): [2]}, "1 value"),
])
def test_an_aa_pair_without_enough_runs_is_undefined_with_the_reason(rows, why):
    _, k = frame({}, rows)
    pair = confirmation.aa_pair(k, ["c"], "iops")
    assert not pair.defined and why in pair.why_undefined and math.isnan(pair.pct_low)
    assert not pair.contains_zero and not pair.inside(0.5)


def test_equal_pairs_leave_their_interval_about_the_nominal_share_of_the_time():
    """By simulation with a fixed seed: for two labels of one configuration (lognormal runs,
    n = 5 each), the 95 % interval of the difference misses zero in about 5 % of pairs."""
    rng = np.random.default_rng(20261126)
    misses = 0
    trials = 2000
    for _ in range(trials):
        x = np.exp(rng.normal(np.log(1000), 0.05, size=10))
        _, k = frame({}, {(1, "A"): x[:5], (1, "B"): x[5:]})
        misses += not confirmation.aa_pair(k, ["c"], "iops").contains_zero
    assert 0.035 <= misses / trials <= 0.065


def test_a_confirm_step_needs_a_metric_to_rank_by(demo, params_dir, tmp_path):
    fixed = PARAMS.replace("repetitions: {min: 3, max: 4, metric: iops, target_ci_pct: 5}",
                           "repetitions: 3")
    with pytest.raises(InputError) as err:
        Campaign(demo, ENV, data_dir=tmp_path / "d", params_dir=params_dir({ENV: fixed}))
    assert err.value.key == "confirm.metric" and "fixed count" in str(err.value)
    other = PARAMS.replace("aa: true}", "aa: true, metric: clat_p99_us}")
    with pytest.raises(InputError) as err:
        Campaign(demo, ENV, data_dir=tmp_path / "d", params_dir=params_dir({ENV: other}))
    assert err.value.key == "confirm.metric" and "not a metric" in str(err.value)
    assert not (tmp_path / "d").exists()


def test_a_fixed_count_confirms_by_the_steps_metric(demo, params_dir, tmp_path, scripted):
    text = PARAMS.replace("repetitions: {min: 3, max: 4, metric: iops, target_ci_pct: 5}",
                          "repetitions: 3").replace("aa: true}", "aa: true, metric: iops}")
    camp = WithoutHostKnobs(demo, ENV, data_dir=tmp_path / "d",
                            params_dir=params_dir({ENV: text}))
    scripted(camp)
    camp.run(progress=False, keep_going=True)
    assert confirm_runs(camp) == {(4, "A"): 3, (4, "B"): 3, (2, "A"): 3}


def test_the_committed_confirmation_is_pinned():
    """The cpu_search campaign of epyc-2vcpu-v782: its confirmation runs, the estimates the
    chapter quotes from them and its A/A pair, on the committed runs."""
    from iolab.experiments.cpu_search import analysis as ca
    from iolab.report.chapter import Chapter

    ch = Chapter("cpu_search", "epyc-2vcpu-v782", mode="replay")
    if not ch.have:
        pytest.skip("no committed cpu_search/epyc-2vcpu-v782 campaign")
    assert len(ch.df) == 255 and len(ch.confirmed) == 35
    assert not (set(ch.df["run.id"]) & set(ch.confirmed["run.id"]))
    conf = ca.confirmed_estimates(ca.normalize(ch.df), ca.normalize(ch.confirmed))
    assert round(conf["optimum"]["mean"]) == 88599 and int(conf["optimum"]["n"]) == 7
    assert round(conf["capacity"]["mean"]) == 83945 and conf["capacity"]["ndevs"] == 1
    assert conf["quoted"]["capacity_source"] == "confirmation"
    text = ch.aa_text()
    assert "B differs from A by -5.0 % (95 % CI -14.6 % to +5.8 %" in text
    assert "inside it, so the floor holds here" in text


def test_a_confirmed_point_with_one_run_says_why_it_has_no_change_interval():
    s, k = frame(SEARCH, {(4, "A"): [3800.0]})
    t = confirmation.confirmed_points(s, k, ["c"], "iops")
    assert len(t) == 1 and t.loc[0, "n"] == 1 and math.isnan(t.loc[0, "ci_low"])
    assert "1 value" in t.loc[0, "undefined"] and math.isnan(t.loc[0, "pct_low"])
    assert confirmation.confirmed_points(s, pd.DataFrame(), ["c"], "iops").empty
