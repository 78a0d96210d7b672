"""Planner and run identity: grid expansion, exclusions, one-at-a-time expansions, run ids
from what is executed, statuses, --where, --limit and every blocker."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.core import planner
from iolab.core import spec as specmod
from iolab.core.identity import run_id
from iolab.core.registry import get

from conftest import DEMO_PARAMS

FIXTURES = Path(__file__).parent / "fixtures" / "specs"


@pytest.fixture
def cpu_search():
    return specmod.load(get("cpu_search"), "hpc-server", params_dir=FIXTURES)


def identity_of(experiment, spec):
    return lambda params: experiment.identity(spec.environment, spec.settings, params)


def plan_of(experiment, spec, **kwargs):
    return planner.make_plan(spec, identity=identity_of(experiment, spec), seconds_per_run=2.0,
                             **kwargs)


def test_cpu_search_base_grid_size(cpu_search):
    """Seed 000's value sets: 2^5 binary settings x 3 qdepths x 2 iosizes x 4 core counts x
    5 device counts = 3,840 combinations; SMT off with siblings used removes a quarter
    (960), leaving 2,880 points, i.e. 1,440 per governor."""
    search = [p for p in planner.expand(cpu_search) if "search" in p.grids]
    assert len(search) == 3840
    runnable = [p for p in search if not p.excluded_by]
    assert len(runnable) == 2880
    assert {p.excluded_by for p in search if p.excluded_by} == {"SMT off with thread siblings used"}
    for governor in ("powersave", "performance"):
        assert sum(p.params["cpu_governor"] == governor for p in runnable) == 1440
    assert all(not (p.params["smt"] == "off" and p.params["thr_sib"]) for p in runnable)


def test_expansions_share_the_base_point(cpu_search):
    points = planner.expand(cpu_search)
    base = [p for p in points if p.params == cpu_search.base]
    assert len(base) == 1
    assert set(base[0].grids) == {"search", "expand-qdepth", "expand-iosize", "expand-ncores",
                                  "expand-ndevs"}
    new = [p for p in points if "search" not in p.grids]
    # qdepth 8,16,32,512,1024; iosize 1024,2048,8192; ncores 3,5..7,9..16 with turbo on and
    # off (24); ndevs 3,5,6,7,9..15; SMT off at 3.0 GHz with and without stress
    assert len(new) == 5 + 3 + 24 + 11 + 2
    plan = plan_of(get("cpu_search"), cpu_search)
    assert plan.counts() == {"stored": 0, "to run": (2880 + 45) * 5, "excluded": 960 * 5,
                             "blocked": 0}


def test_run_ids_come_from_what_is_executed(demo, params_dir):
    root = params_dir({"a": DEMO_PARAMS})
    spec = specmod.load(demo, "a", params_dir=root)
    point = spec.base
    ident = demo.identity("a", spec.settings, point)
    assert set(ident) == {"experiment", "environment", "point", "invocation"}
    assert ident["invocation"]["options"]["runtime"] == "30s"
    assert ident["invocation"]["driver"] == "fio.sh" and ident["invocation"]["driver_version"]
    rid = run_id(ident, 0)
    assert rid.endswith("-r0") and run_id(ident, 4)[:12] == rid[:12]
    # the same inputs give the same id, in any key order
    assert run_id(dict(reversed(list(ident.items()))), 0) == rid
    # a changed setting that is executed gives a new id, never a reuse
    longer = {**spec.settings, "runtime_s": 5}
    assert run_id(demo.identity("a", longer, point), 0) != rid
    # as does another environment
    assert run_id(demo.identity("b", spec.settings, point), 0) != rid


def spec_from(demo, folder: Path, text: str):
    (folder / "x").mkdir(parents=True)
    (folder / "x" / "demo.yaml").write_text(text)
    return specmod.load(demo, "x", params_dir=folder)


def test_analysis_keys_never_change_a_run_id(demo, tmp_path):
    plain = spec_from(demo, tmp_path / "a", DEMO_PARAMS)
    styled = spec_from(demo, tmp_path / "b", DEMO_PARAMS + "analysis: {confidence: 0.8, "
                       "palette: deep, figure_width: 6}\n")
    assert [r.run_id for r in plan_of(demo, plain).runs] == \
        [r.run_id for r in plan_of(demo, styled).runs]


def test_ids_do_not_depend_on_grid_order(demo, tmp_path):
    a = spec_from(demo, tmp_path / "a", DEMO_PARAMS)
    b = spec_from(demo, tmp_path / "b", DEMO_PARAMS.replace("[1, 4, 16]", "[16, 1, 4]"))
    assert {r.run_id for r in plan_of(demo, a).runs} == {r.run_id for r in plan_of(demo, b).runs}


def test_statuses_every_blocker_and_the_full_cost(demo, params_dir):
    root = params_dir({"x": DEMO_PARAMS})
    spec = specmod.load(demo, "x", params_dir=root)
    first = plan_of(demo, spec)
    stored = {first.runs[0].run_id}

    def blockers(params):
        out = []
        if params["thp"] != "asis":
            out.append("needs knob thp, which this host cannot control")
        if params["concurrency"] > 8:
            out.append("too many jobs")
        return out

    plan = plan_of(demo, spec, stored=planner.Stored(stored | {"ffffffffffff-r0"}),
                   blockers=blockers)
    c = plan.counts()
    assert c["stored"] == 1 and c["excluded"] == 5 and c["blocked"] > 0
    assert plan.stored_outside == ["ffffffffffff-r0"]
    both = [r for r in plan.by_status("blocked") if len(r.reasons) == 2]
    assert both, "a run blocked for two reasons lists both"
    assert plan.eta_s == pytest.approx(c["to run"] * 2.0)
    assert plan.eta_all_s == pytest.approx((c["to run"] + c["blocked"]) * 2.0)
    text = plan.summary()
    assert "too many jobs" in text and "needs knob thp" in text and "runs left would take" in text
    doc = plan.to_dict()
    assert {"stored", "to_run", "excluded", "blocked", "eta_s"} <= set(doc)


def test_where_and_limit(demo, params_dir):
    root = params_dir({"x": DEMO_PARAMS})
    spec = specmod.load(demo, "x", params_dir=root)
    plan = plan_of(demo, spec, where={"engine": ["io_uring"]}, limit=3)
    assert {r.point.params["engine"] for r in plan.runs} == {"io_uring"}
    assert plan.filtered_out > 0 and len(plan.selected()) == 3
    assert plan.eta_s == pytest.approx(3 * 2.0)
    assert plan.stored_outside == []
    # the points the filter left out are kept (not their runs), so the programs they need
    # still enter the host's fingerprint: it must not depend on --where
    assert plan.left_out_points and all(p.params["engine"] != "io_uring"
                                        for p in plan.left_out_points)
    assert len(plan.left_out_points) == plan.filtered_out


def test_left_out_points_leave_out_what_this_host_cannot_run(demo, params_dir):
    root = params_dir({"x": DEMO_PARAMS})
    spec = specmod.load(demo, "x", params_dir=root)
    plan = plan_of(demo, spec, where={"engine": ["io_uring"]},
                   blockers=lambda params: ["no psync here"] if params["engine"] == "psync"
                   else [])
    assert plan.filtered_out > 0 and plan.left_out_points == []


def test_a_replayed_plan_judges_programs_by_the_recorded_host(monkeypatch, tmp_path):
    """The book is built where the campaign's tools may be absent: a replayed plan describes
    them as the campaign's host recorded them, and shows no path of either machine."""
    import json

    from iolab.execution.campaign import Campaign
    from iolab.paths import default_data_dir

    host = json.loads((default_data_dir() / "raw" / "smt_thp" / "kvm-2vcpu" / "host.json")
                      .read_text())
    monkeypatch.setenv("PATH", str(tmp_path))  # no fio to be found here
    replayed = Campaign("smt_thp", "kvm-2vcpu").plan(as_recorded=True)
    (fio,) = [p for p in replayed.programs if p["name"] == "fio"]
    assert fio["found"] and fio["version"] == host["tools"]["fio"]["version"]
    assert fio["path"] is None
    text = replayed.summary()
    assert "MISSING" not in text and "/usr/bin" not in text
    assert f"{host['tools']['fio']['version']} (as recorded by the campaign's host)" in text
    # planned for this machine instead, the same campaign finds no fio here
    (here,) = [p for p in Campaign("smt_thp", "kvm-2vcpu").plan().programs if p["name"] == "fio"]
    assert not here["found"]


def test_a_plan_takes_memory_by_its_points_not_by_their_repetitions(demo, params_dir):
    """A thousand points of a thousand repetitions each (a million runs) plan in about the
    memory of the same points with one repetition: a point's runs are counted, and made only
    when they are listed (measured as the peak of what Python allocates, not as a time)."""
    import tracemalloc

    grid = "conc: {vary: {engine: [psync, io_uring], concurrency: %s}}" % list(range(1, 501))

    def planned(repetitions: int) -> tuple[int, planner.Plan]:
        text = (DEMO_PARAMS.replace("repetitions: 5", f"repetitions: {repetitions}")
                .replace("conc: {vary: {engine: [psync, io_uring], concurrency: [1, 4, 16]}}",
                         grid))
        spec = specmod.load(demo, "big", params_dir=params_dir({"big": text}))
        tracemalloc.start()
        try:
            plan = plan_of(demo, spec, max_runs=2_000_000, limit=10)
            plan.to_dict(), plan.summary(), list(plan.may_run()[:10])
            return tracemalloc.get_traced_memory()[1], plan
        finally:
            tracemalloc.stop()

    small, one = planned(1)
    peak, plan = planned(1000)
    assert plan.counts()["to run"] == 1000 * one.counts()["to run"] > 900_000
    assert len(plan.runs) == 1000 * len(one.runs) and len(plan.selected()) == 10
    assert peak < 2 * small, f"{peak:,} bytes for a million runs, {small:,} for a thousand"


def test_a_design_of_too_many_points_is_refused_before_it_is_expanded(demo, params_dir):
    grid = "conc: {vary: {engine: [psync, io_uring], concurrency: %s}}" % list(range(1, 1001))
    text = DEMO_PARAMS.replace("repetitions: 5", "repetitions: 1").replace(
        "conc: {vary: {engine: [psync, io_uring], concurrency: [1, 4, 16]}}", grid)
    spec = specmod.load(demo, "big", params_dir=params_dir({"big": text}))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(planner, "MAX_POINTS", 1000)
        m.setattr(planner, "expand", lambda *a, **k: pytest.fail("expanded"))
        with pytest.raises(planner.InputError) as info:
            plan_of(demo, spec)
    assert str(info.value) == (
        f"{spec.params_file}: key 'grids': the design has up to 2,002 points (conc: 2,000 "
        "points, thp: 2 points), more than a plan holds (each point is kept in memory); split "
        "it into several params files or shrink the grids (allowed: at most 1,000 points)")


def test_a_params_string_cannot_make_a_line_of_the_plans_text(demo, params_dir):
    """An exclusion's why (any string the params hold) with a line break and an escape
    sequence is quoted on its own line, escaped: it cannot print a plan line of its own."""
    why = "slow\ndemo / x: 0 points FORGED\x1b]0;title\x07"
    text = DEMO_PARAMS.replace("why: not interesting", f"why: {why!r}".replace("'", '"'))
    spec = specmod.load(demo, "x", params_dir=params_dir({"x": text}))
    assert spec.exclusions[0]["why"] == why  # the params keep it as written
    summary = plan_of(demo, spec).summary()
    assert r"excluded (5 runs): slow\ndemo / x: 0 points FORGED\x1b]0;title\x07" in summary
    assert not any(line.startswith("demo / x: 0 points") for line in summary.splitlines())
    assert "\x1b" not in summary


EXCLUSIONS_IN_ORDER = """exclusions:
  - {when: {concurrency: [4, 16], thp: never}, why: first}
  - {when: {engine: io_uring, concurrency: 1}, why: second}
  - {when: {engine: io_uring}, why: third}
  - {when: {thp: always, engine: psync, concurrency: 16}, why: fourth}
  - {when: {concurrency: 1}, why: fifth}
"""


def test_indexed_exclusions_say_what_the_first_matching_rule_says(demo, params_dir,
                                                                  monkeypatch):
    """Each point's exclusion is the first rule (in the file's order) it matches, as matching
    it against every rule gave; and rules naming hashable values are found by look-up, never
    matched one by one (a 90,000-point grid with thousands of exclusions made points x
    rules comparisons)."""
    text = DEMO_PARAMS.replace(
        "grids:\n  conc: {vary: {engine: [psync, io_uring], concurrency: [1, 4, 16]}}",
        "grids:\n  conc: {vary: {engine: [psync, io_uring], concurrency: [1, 4, 16], "
        "thp: [always, never]}}").split("exclusions:")[0] + EXCLUSIONS_IN_ORDER
    spec = specmod.load(demo, "x", params_dir=params_dir({"x": text}))

    def first_match(params):
        return next((rule["why"] for rule in spec.exclusions
                     if planner.matches(rule["when"], params)), None)

    expected = {planner.canonical_json(p.params): first_match(p.params)
                for p in planner.expand(spec)}
    assert set(expected.values()) == {"first", "second", "third", "fourth", "fifth", None}
    calls = []
    real = planner.matches
    monkeypatch.setattr(planner, "matches",
                        lambda rule, params: calls.append(rule) or real(rule, params))
    got = {planner.canonical_json(p.params): p.excluded_by for p in planner.expand(spec)}
    assert got == expected and calls == []


def test_an_exclusion_of_a_value_no_table_holds_is_matched_one_by_one():
    """A rule naming a list (no table can hold it) is matched as before, in its turn."""
    rules = [{"when": {"cpus": [1]}, "why": "a"}, {"when": {"cpus": [[0, 1]]}, "why": "b"},
             {"when": {"cpus": [[0, 1]], "n": [2]}, "why": "c"},
             {"when": {"n": [True]}, "why": "d"}]
    index = planner.Exclusions(rules)
    for params in ({"cpus": 1, "n": 1}, {"cpus": [0, 1], "n": 2}, {"cpus": [0, 1], "n": 3},
                   {"cpus": [1], "n": 1}, {"cpus": 2, "n": 2}, {"n": 1}):
        assert index.why(params) == next((r["why"] for r in rules
                                          if planner.matches(r["when"], params)), None), params
