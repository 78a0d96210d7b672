"""Planner: grid expansion, exclusions, one-at-a-time expansions, run ids and plan statuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab import planner
from iolab import spec as specmod

FIXTURES = Path(__file__).parent / "fixtures" / "specs"


@pytest.fixture
def cpu_search(make_experiment):
    notebooks, params = make_experiment("cpu_search", (FIXTURES / "cpu_search_params.py").read_text(),
                                        {"hpc-server": "experiment: cpu_search\n"})
    return specmod.load("cpu_search", "hpc-server", notebooks_dir=notebooks, params_dir=params)


def test_cpu_search_base_grid_size(cpu_search):
    """Seed 000's value sets: 2^5 binary settings x 3 qdepths x 2 iosizes x 4 core counts x
    5 device counts = 3,840 combinations; SMT off with siblings used removes a quarter
    (960), leaving 2,880 points, i.e. 1,440 per governor. (Issue #2 quotes 1,440 for the whole
    grid; the stated sets and the one stated exclusion give 2,880, see the closing note.)"""
    search = [p for p in planner.expand(cpu_search) if "search" in p.grids]
    assert len(search) == 3840
    runnable = [p for p in search if not p.excluded_by]
    assert len(runnable) == 2880
    assert {p.excluded_by for p in search if p.excluded_by} == {"SMT off with thread siblings used"}
    for governor in ("powersave", "performance"):
        assert sum(p.params["governor"] == governor for p in runnable) == 1440
    assert all(not (p.params["smt"] == "off" and p.params["thr_sib"]) for p in runnable)


def test_expansions_share_the_base_point(cpu_search):
    points = planner.expand(cpu_search)
    base = [p for p in points if p.params == cpu_search.base]
    assert len(base) == 1
    # the optimum is inside the search grid and in every expansion
    assert set(base[0].grids) == {"search", "expand-qdepth", "expand-iosize", "expand-ncores", "expand-ndevs"}
    new = [p for p in points if "search" not in p.grids]
    # values outside the search grid: qdepth 8,16,32,512,1024; iosize 1024,2048,8192;
    # ncores 3,5,6,7,9..16; ndevs 3,5,6,7,9..15
    assert len(new) == 5 + 3 + 12 + 11
    plan = planner.make_plan(cpu_search, driver_version="1")
    assert plan.counts() == {"stored": 0, "to run": (2880 + 31) * 5, "excluded": 960 * 5, "blocked": 0}


def test_run_ids_are_stable_and_sensitive(cpu_search):
    p = planner.expand(cpu_search)[0]
    config = planner.run_config(cpu_search, p, "1")
    assert planner.run_id(config, 0) == planner.run_id(dict(reversed(list(config.items()))), 0)
    assert planner.run_id(config, 0).endswith("-r0") and planner.run_id(config, 4).endswith("-r4")
    assert planner.run_id(config, 0)[:12] == planner.run_id(config, 4)[:12]
    cpu_search.values["runtime_s"] = 5  # a changed default must give a new id, never reuse
    assert planner.run_id(planner.run_config(cpu_search, p, "1"), 0) != planner.run_id(config, 0)
    assert planner.run_id(planner.run_config(cpu_search, p, "2"), 0) != planner.run_id(config, 0)


def test_ids_do_not_depend_on_grid_order(make_experiment):
    src = (FIXTURES / "cpu_search_params.py").read_text()
    notebooks, params = make_experiment("cpu_search", src, {
        "a": "experiment: cpu_search\n",
        "b": "experiment: cpu_search\ngrids: {expand-qdepth: {vary: {qdepth: [1024, 8, 16, 32, 64, 128, 256, 512]}}}\n"})
    ids = []
    for env in ("a", "b"):
        s = specmod.load("cpu_search", env, notebooks_dir=notebooks, params_dir=params)
        ids.append({r.run_id for r in planner.make_plan(s, driver_version="1").runs})
    assert ids[0] == ids[1]


def test_stored_and_blocked_statuses(make_experiment):
    notebooks, params = make_experiment("demo", '''experiment = "demo"
environment = "x"
mode = "replay"
data_dir = None
tool = "fio"
runtime_s = 1
repetitions = 2
base = {"engine": "psync", "smt": "asis"}
choices = {"smt": ["asis", "on", "off"]}
grids = {"g": {"vary": {"engine": ["psync", "io_uring"]}}, "smt": {"vary": {"smt": ["on", "off"]}}}
exclusions = []
''', {"x": "experiment: demo\n"})
    spec = specmod.load("demo", "x", notebooks_dir=notebooks, params_dir=params)
    first = planner.make_plan(spec, driver_version="1")
    stored = {first.runs[0].run_id}
    plan = planner.make_plan(spec, driver_version="1", stored_ids=stored,
                             knob_variables={"smt": "smt"},
                             knob_availability={"smt": (False, "SMT control reads 'notsupported'")})
    assert plan.counts() == {"stored": 1, "to run": 3, "excluded": 0, "blocked": 4}
    blocked = plan.by_status("blocked")[0]
    assert "needs knob smt=on" in blocked.reason and "notsupported" in blocked.reason
    assert plan.eta_s == pytest.approx(3 * 2.0)
    assert "blocked 4" in plan.summary()


def test_host_check_blocks_points_this_host_cannot_run(cpu_search):
    def too_many_cores(params):
        return "needs 8 cores, this host has 2" if params["ncores"] > 2 else None

    plan = planner.make_plan(cpu_search, driver_version="1", host_check=too_many_cores)
    blocked = plan.by_status("blocked")
    assert blocked and all(r.point.params["ncores"] > 2 for r in blocked)
    assert all(r.reason == "needs 8 cores, this host has 2" for r in blocked)
    # excluded points stay excluded: the exclusion is the more fundamental reason
    assert plan.counts()["excluded"] == 960 * 5
