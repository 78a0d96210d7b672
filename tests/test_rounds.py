"""Rounds, interleaving and the stopping rule in real campaigns of a scripted fake tool.

The fake is an executable named ``fio`` put first on PATH: it writes a real fio JSON report
(a golden file) whose read IOPS it takes from a script, a JSON file mapping run ids to values
(or to ``"fail"``, for a run whose tool exits 1). Each point's values per repetition are then
fixed in advance, so campaigns run in different orders, or killed and resumed, must store the
same runs. A campaign of the conftest's ``Demo`` experiment takes a few seconds.

Other tests script faults with it too (tests/test_one_run.py, tests/test_cli.py):
``"silent"``, a tool that exits 0 without writing its report; ``"replace"``, one that removes
its target file (``--filename``) and makes a new one of the same size, as fio does for a file
that is gone, and then reports 1000 IOPS; ``"garble"``, one that fails with terminal escape
sequences (clear the screen, set the window's title) on its stderr; ``"shout"``, one that
fails after a 10 MB line on its stderr; ``"devzero"``, one that leaves its report as a link
to /dev/zero; ``"late"``, one whose detached child appends to the report after fio exits;
``"foreign"``, one that leaves the golden file's report of another job (its name and options
as fio ran them then) and 1000 IOPS; an
object, fields of the report's read section written as they are (``{"iops": 10**400}``, an
integer literal no float holds).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from iolab.core import identity
from iolab.core.planner import make_plan
from iolab.core.spec import load
from iolab.execution.campaign import Campaign
from iolab.execution.rounds import Schedule, shuffled

FIXTURE = Path(__file__).parent / "fixtures" / "fio" / "io_uring_randread_4k_qd16.jsonplus.json"
ENV = "lab"
PARAMS = """experiment: demo
tool: fio
runtime_s: 1
repetitions: {min: 3, max: 6, metric: iops, target_ci_pct: 5}
base: {engine: psync, concurrency: 1, thp: asis, pinned: false}
grids:
  conc: {vary: {concurrency: [1, 2, 4, 8]}}
"""
# the scripted measurements of each point (by concurrency), repetition by repetition
SCRIPT = {
    1: [1000, 1000, 1000, 1000, 1000, 1000],          # constant: settles at min
    2: [1000, 2000, 1000, 2000, 1000, 2000],          # spread: reaches max
    4: [960, 1040, 1000, 1000, 1000, 1000],           # wide at 3 and 4, narrow enough at 5
    8: ["fail"] * 6,                                  # every run fails: settled as failed
}

FAKE_FIO = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    if "--version" in sys.argv:
        print("fio-3.33")
        sys.exit(0)
    run_id = os.path.basename(os.environ["IOLAB_RUN"])[len(".tmp-"):].rsplit("-", 1)[0]
    value = json.load(open(os.environ["FAKE_FIO_SCRIPT"]))[run_id]
    if value == "fail":
        print("scripted failure", file=sys.stderr)
        sys.exit(1)
    if value == "silent":
        sys.exit(0)
    if value == "shout":
        print("x" * 10**7, file=sys.stderr)
        print("scripted failure", file=sys.stderr)
        sys.exit(1)
    if value == "garble":
        print("\\x1b[2J\\x1b]0;owned\\x07scripted failure", file=sys.stderr)
        sys.exit(1)
    if value == "replace":
        target = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--filename="))
        size = os.path.getsize(target)
        os.unlink(target)
        with open(target, "wb") as made:
            made.write(os.urandom(size))
        value = 1000
    out = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--output="))
    if value == "devzero":
        os.symlink("/dev/zero", out)
        sys.exit(0)
    def as_given(report):  # the report of the job it was given, as fio's is
        given = dict(a[2:].split("=", 1) for a in sys.argv if a.startswith("--") and "=" in a)
        name = given.pop("name", "job")
        for key in ("output", "output-format"):
            given.pop(key, None)
        for job in report["jobs"]:
            job["jobname"], job["job options"] = name, given
        return report
    def shortened(report):  # the fixture's second of I/O made 20 ms of it: a fake run lasts
        read = report["jobs"][0]["read"]  # a few ms, and no report measures longer than its run
        read["runtime"] = report["jobs"][0]["job_runtime"] = 20
        import time  # stamped now, as fio stamps its report: the run's window holds it
        report["timestamp_ms"] = int(time.time() * 1000)
        report["timestamp"] = report["timestamp_ms"] // 1000
        read["total_ios"] = round(read["iops"] * 20 / 1000)
        read["io_bytes"] = read["total_ios"] * 4096
        read["bw_bytes"] = read["io_bytes"] * 1000 // 20
        return read
    def completed(read):  # fio counts each I/O in total_ios and in clat_ns.N: the latencies
        clat, ios = read.get("clat_ns"), read.get("total_ios")  # scaled to the I/Os counted
        if (not isinstance(clat, dict) or type(ios) is not int or ios < 0
                or type(clat.get("N")) is not int or clat["N"] <= 0):
            return
        bins = clat.get("bins")
        if isinstance(bins, dict) and bins:
            scaled = dict((k, c * ios // clat["N"]) for k, c in bins.items())
            top = max(bins, key=bins.get)  # the rounding's remainder to the fullest bin
            scaled[top] += ios - sum(scaled.values())
            clat["bins"] = scaled
        clat["N"] = ios
    if value == "late":  # a detached child that appends to the report after fio has exited
        report = as_given(json.load(open({fixture!r})))
        completed(shortened(report))
        json.dump(report, open(out, "w"))
        if os.fork() == 0:
            os.setsid()
            import time
            time.sleep(1.5)
            open(out, "a").write(" ")
            os._exit(0)
        sys.exit(0)
    report = json.load(open({fixture!r}))
    if value == "foreign":  # the golden file's report as it is: another job's
        value = 1000
    else:
        report = as_given(report)
    read = shortened(report)
    def counted(rate):  # what fio counts over the runtime to print a rate, as fio does
        return rate != rate or not 0 <= rate < 1e300 or round(rate * read["runtime"] / 1000)
    if isinstance(value, dict):  # fields of the report's read section, as they are; a rate
        for rate, count in (("iops", "total_ios"), ("bw_bytes", "io_bytes")):  # without its
            if rate in value and count not in value and counted(value[rate]) is not True:
                read[count] = counted(value[rate])  # count: the count fio computes it from
        read.update(value)
    else:  # IOPS, and the I/Os, bytes and bandwidth that fio reports beside them
        read["iops"] = float(value)
        if counted(float(value)) is not True:
            read["total_ios"] = counted(float(value))
            read["io_bytes"] = read["total_ios"] * 4096
            read["bw_bytes"] = read["io_bytes"] * 1000 // read["runtime"]
    completed(read)
    json.dump(report, open(out, "w"))
""")


@pytest.fixture
def fake_fio(tmp_path, monkeypatch):
    """The fake fio on PATH; returns a function writing the script for a campaign."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "fio"
    exe.write_text(FAKE_FIO.format(python=sys.executable, fixture=str(FIXTURE)))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    script = tmp_path / "script.json"
    monkeypatch.setenv("FAKE_FIO_SCRIPT", str(script))

    def write(camp: Campaign, measurements: dict = SCRIPT) -> None:
        """``measurements``: each point's values by concurrency, repetition by repetition."""
        values = {}
        for point in camp.plan().points():
            ident = camp.experiment.identity(ENV, camp.spec.settings, point.params)
            ids = identity.run_ids(ident, camp.spec.repetitions)
            values.update(zip(ids, measurements[point.params["concurrency"]]))
        script.write_text(json.dumps(values))
    return write


class WithoutHostKnobs(Campaign):
    """A campaign that runs with none of this host's knobs: its points leave THP as it is,
    and a user's campaign (or another suite) changing THP meanwhile must not make its runs
    look disturbed."""

    def run(self, **options):
        options.setdefault("knobs", {})
        return super().run(**options)


def campaigns(demo, params_dir, tmp_path, params: str):
    """Factory of Demo campaigns of ``params``, each in its own data folder, with ``--set``
    overrides (also for tests/test_confirm.py and tests/test_search.py)."""
    folder = params_dir({ENV: params})

    def make(name: str, overrides: dict | None = None) -> Campaign:
        return WithoutHostKnobs(demo, ENV, data_dir=tmp_path / name, params_dir=folder,
                                overrides=overrides)
    return make


@pytest.fixture
def campaign(demo, params_dir, tmp_path):
    """Factory: a Demo campaign in its own data folder, with ``--set`` overrides."""
    return campaigns(demo, params_dir, tmp_path, PARAMS)


def stored(camp: Campaign) -> list[str]:
    return sorted(r.run_id for r in camp.store.complete_runs())


def failed(camp: Campaign) -> list[str]:
    return sorted(d.name.split("@")[0] for d in camp.store.failed_runs())


def log(camp: Campaign) -> list[dict]:
    return [json.loads(line) for line in
            (camp.store.root / "campaign-log.jsonl").read_text().splitlines()]


def by_concurrency(camp: Campaign) -> dict[int, dict]:
    return {p.params["concurrency"]: p.decision for p in camp.plan().decisions()}


def test_the_rule_decides_each_point_on_its_own_measurements(campaign, fake_fio):
    camp = campaign("data", {"seed": 11})
    fake_fio(camp)
    result = camp.run(progress=False, keep_going=True)
    d = by_concurrency(camp)
    assert (d[1].n, d[1].reason) == (3, "target")
    assert (d[2].n, d[2].reason) == (6, "max")
    assert (d[4].n, d[4].reason) == (5, "target")
    assert (d[8].n, d[8].failures, d[8].reason) == (0, 6, "failed")
    assert result.completed == 3 + 6 + 5 and len(result.failed) == 6
    plan = camp.plan().to_dict()
    assert plan["to_run"] == plan["to_run_max"] == 0
    assert plan["settled"] == {"target": 2, "max": 1, "failed": 1}
    # the failed point retried its first repetition until the rule's max failures
    assert set(failed(camp)) == {identity.run_ids(camp.experiment.identity(
        ENV, camp.spec.settings, {**camp.spec.base, "concurrency": 8}), 1)[0]}


def test_rounds_interleave_points_in_the_order_their_seed_gives(campaign, fake_fio):
    camp = campaign("data", {"seed": 11})
    fake_fio(camp)
    camp.run(progress=False, keep_going=True)
    events = log(camp)
    start = next(e for e in events if e["event"] == "start")
    assert start["seed"] == 11 and start["order"] == "interleaved"
    assert start["repetitions"] == {"min": 3, "max": 6, "metric": "iops", "target_ci_pct": 5.0,
                                    "confidence": 0.95}
    rounds = [e for e in events if e["event"] == "round"]
    assert [len(r["runs"]) for r in rounds] == [4, 4, 4, 3, 3, 2]
    # round 0: repetition 0 of every point, in the plan's order, then shuffled by the seed
    first = [identity.run_ids(camp.experiment.identity(ENV, camp.spec.settings, p.params), 1)[0]
             for p in camp.plan().points()]
    assert rounds[0]["runs"] == shuffled(first, 11, 0)
    assert {r["seed"] for r in rounds} == {11}
    # the runs were made in that order
    made = sorted(camp.store.complete_runs(), key=lambda r: r.manifest.started_at)
    order = [r for rnd in rounds for r in rnd["runs"] if r in {m.run_id for m in made}]
    assert [m.run_id for m in made] == order


def test_a_campaign_without_a_seed_draws_one_and_records_it(campaign, fake_fio):
    camp = campaign("data", {"grids": {"conc": {"vary": {"concurrency": [1]}}}})
    fake_fio(camp)
    camp.run(progress=False)
    seeds = [e["seed"] for e in log(camp) if e["event"] == "start"]
    assert len(seeds) == 1 and isinstance(seeds[0], int)


def test_shuffles_are_reproducible_from_the_seed():
    items = list(range(20))
    assert shuffled(items, 5, 0) == shuffled(items, 5, 0) != items
    assert shuffled(items, 5, 0) != shuffled(items, 5, 1)
    assert shuffled(items, 5, 0) != shuffled(items, 6, 0)
    assert sorted(shuffled(items, 5, 3)) == items


@pytest.mark.parametrize("stops", [[1], [4, 9], [2, 3, 5, 7]])  # of the 20 runs
def test_a_campaign_stopped_and_resumed_stores_what_an_uninterrupted_one_does(
        campaign, fake_fio, stops):
    whole = campaign("whole", {"seed": 1})
    fake_fio(whole)
    whole.run(progress=False, keep_going=True)
    # resumed runs take another seed each time: the order may differ, the runs may not
    for i, limit in enumerate(stops):
        parts = campaign("parts", {"seed": 100 + i})
        result = parts.run(progress=False, keep_going=True, limit=limit)
        assert result.completed + len(result.failed) == limit
    parts.run(progress=False, keep_going=True)
    assert stored(parts) == stored(whole)
    assert failed(parts) == failed(whole)
    assert parts.plan().to_dict()["decisions"] == whole.plan().to_dict()["decisions"]


def test_sequential_order_runs_each_point_to_its_decision_in_turn(campaign, fake_fio):
    camp = campaign("data", {"order": "sequential"})
    fake_fio(camp)
    camp.run(progress=False, keep_going=True)
    made = sorted(camp.store.complete_runs(), key=lambda r: r.manifest.started_at)
    concurrency = [r.manifest.point["concurrency"] for r in made]
    assert concurrency == [1] * 3 + [2] * 6 + [4] * 5
    assert not [e for e in log(camp) if e["event"] == "round"]


def test_the_plan_says_what_is_certain_and_what_the_rule_may_add(campaign, fake_fio):
    camp = campaign("data", {"seed": 3})
    fake_fio(camp)
    before = camp.plan().to_dict()
    assert (before["to_run"], before["to_run_max"]) == (12, 24)
    assert before["eta_max_s"] == pytest.approx(2 * before["eta_s"], rel=0.01)
    camp.run(progress=False, keep_going=True, limit=12)  # three rounds
    after = camp.plan()
    d = {p.params["concurrency"]: p.decision for p in after.decisions()}
    assert d[1].reason == "target" and d[4].reason == "open" and d[2].reason == "open"
    # concurrency 8 failed 3 times: 3 more failures settle it, 6 indices are free
    assert d[8].reason == "open" and (d[8].to_run, d[8].to_run_max) == (3, 6)
    assert after.to_dict()["to_run"] == 1 + 1 + 3 and after.to_run_max == 3 + 3 + 6
    assert "to run 5 (up to 12 as the rule decides)" in after.summary()


def test_a_fixed_count_keeps_the_plans_order_and_statuses(demo, params_dir, tmp_path):
    folder = params_dir({ENV: PARAMS.replace(
        "repetitions: {min: 3, max: 6, metric: iops, target_ci_pct: 5}", "repetitions: 3")})
    spec = load(demo, ENV, params_dir=folder)
    assert spec.order == "sequential" and spec.rule.fixed
    ident = lambda p: demo.identity(ENV, spec.settings, p)  # noqa: E731
    plan = make_plan(spec, identity=ident, seconds_per_run=1.0, limit=5)
    assert [r.rep for r in plan.runs] == [0, 1, 2] * 4
    assert list(Schedule(plan, seed=1)) == plan.selected() == plan.runs[:5]
    assert plan.to_run_max == 12 == plan.counts()["to run"]
    # interleaved on request: one run of each point per round, all of them once
    folder = params_dir({ENV: PARAMS.replace(
        "repetitions: {min: 3, max: 6, metric: iops, target_ci_pct: 5}",
        "repetitions: 3\norder: interleaved")})
    spec = load(demo, ENV, params_dir=folder)
    plan = make_plan(spec, identity=lambda p: demo.identity(ENV, spec.settings, p),
                     seconds_per_run=1.0)
    runs = list(Schedule(plan, seed=1))
    assert sorted(r.run_id for r in runs) == sorted(r.run_id for r in plan.runs)
    assert [r.rep for r in runs] == [0] * 4 + [1] * 4 + [2] * 4
