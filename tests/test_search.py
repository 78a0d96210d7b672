"""The adaptive search (iolab.core.search): its params, strategies, oracles, plan and replay.

Strategies run against scripted values (a known landscape with noise drawn per point and
repetition), whole campaigns against the scripted fake fio of tests/test_rounds.py: a search
killed and resumed must store what an uninterrupted one stores.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import json
import random
import re
from pathlib import Path

import pytest

from iolab.core import identity
from iolab.core.identity import canonical_json
from iolab.core.repetitions import Rule
from iolab.core.search import replay as replaymod
from iolab.core.search.oracle import Pending, ReplayOracle, ReplayRefused, ScriptedOracle
from iolab.core.search.params import Objective
from iolab.core.search.strategies import STRATEGIES, Space, search
from iolab.core.spec import load
from iolab.errors import InputError

from test_rounds import ENV, campaigns, fake_fio, stored, log  # noqa: F401 (fixture)

VARIABLES = {"qdepth": [1, 4, 16, 64, 128], "iosize": [512, 4096], "ndevs": [1, 2, 4],
             "ncores": [1, 2]}
RULE = Rule(3, 5, "iops", 5.0, 0.95)
OBJECTIVE = Objective("iops", ("ncores", "ndevs"))


def space(exclude=lambda p: False) -> Space:
    points = {}
    for combo in itertools.product(*VARIABLES.values()):
        params = dict(zip(VARIABLES, combo))
        if not exclude(params):
            points[canonical_json(params)] = params
    return Space(VARIABLES, points)


def truth(params) -> float:
    """IOPS rising with queue depth to saturation at 64, smaller I/Os faster, and a single
    peak: 2 devices on 2 cores at 512 bytes."""
    peak = 1.3 if (params["ndevs"], params["ncores"], params["iosize"]) == (2, 2, 512) else 1.0
    return 1e5 * min(1.0, params["qdepth"] / 64) * (1.0 if params["iosize"] == 512 else 0.6) \
        * peak


def noisy(key: str, rep: int) -> float:
    return truth(json.loads(key)) * (1 + random.Random(f"{key}:{rep}").gauss(0, 0.02))


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("budget", [5, 12, 40, 90])
def test_no_strategy_exceeds_its_budget(strategy, budget):
    out = search(strategy, space(), RULE, budget, ScriptedOracle(noisy), OBJECTIVE, seed=1)
    assert out.used <= budget
    assert out.used == sum(len(v) for v in out.values.values())


@pytest.mark.parametrize("seed", range(5))
def test_the_adaptive_strategy_finds_a_known_optimum(seed):
    out = search("adaptive", space(), RULE, 90, ScriptedOracle(noisy), OBJECTIVE, seed)
    best = out.answer.params
    assert (best["ndevs"], best["ncores"], best["iosize"]) == (2, 2, 512)
    assert best["qdepth"] >= 64
    assert out.used <= 90 < sum(1 for _ in space().points) * RULE.min  # under a third of a grid


def test_the_answer_prefers_fewer_cores_then_devices_among_the_best_set():
    flat = ScriptedOracle(lambda key, rep: 1000.0 + rep % 2)  # every configuration alike
    out = search("grid", space(), RULE, None, flat, OBJECTIVE, seed=0)
    assert len(out.answer.members) == len(space().points)
    assert (out.answer.params["ncores"], out.answer.params["ndevs"]) == (1, 1)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_strategies_never_ask_for_what_the_space_leaves_out(strategy):
    """Excluded and blocked configurations are not in the space: asking for one would fail."""
    left_out = lambda p: p["ncores"] == 2 and p["ndevs"] == 4  # noqa: E731
    allowed = space(left_out)

    def oracle(key, rep):
        assert key in allowed.points, f"asked for {key}"
        return noisy(key, rep)
    out = search(strategy, allowed, RULE, 60, ScriptedOracle(oracle), OBJECTIVE, seed=2)
    assert out.values and not any(left_out(json.loads(k)) for k in out.values)


@pytest.mark.parametrize("strategy", ["random", "tpe", "adaptive"])
def test_a_seed_gives_the_same_runs_and_another_seed_others(strategy):
    runs = [search(strategy, space(), RULE, 60, ScriptedOracle(noisy), OBJECTIVE, seed)
            for seed in (4, 4, 5)]
    assert runs[0].values == runs[1].values and runs[0].log == runs[1].log
    assert runs[0].values != runs[2].values


def test_a_search_stops_at_the_first_run_not_stored_and_asks_for_it():
    stored_runs: dict[str, dict[int, float]] = {}

    class Store:
        def value(self, key, rep):
            if rep not in stored_runs.get(key, {}):
                raise Pending(key, rep)
            return stored_runs[key][rep]
    whole = search("adaptive", space(), RULE, 40, ScriptedOracle(noisy), OBJECTIVE, seed=3)
    steps = 0
    while True:  # measure what it asks for, one run at a time, re-running it each time
        out = search("adaptive", space(), RULE, 40, Store(), OBJECTIVE, seed=3)
        if out.done:
            break
        stored_runs.setdefault(out.pending.key, {})[out.pending.rep] = \
            noisy(out.pending.key, out.pending.rep)
        steps += 1
    assert steps == whole.used
    assert out.values == whole.values and out.answer.key == whole.answer.key


def test_a_replay_answers_only_from_stored_runs():
    samples = {"a": [1.0, 2.0, 3.0]}
    oracle = ReplayOracle(samples, seed=1)
    drawn = [oracle.value("a", rep) for rep in range(3)]
    assert sorted(drawn) == [1.0, 2.0, 3.0]
    assert [ReplayOracle(samples, seed=1).value("a", r) for r in range(3)] == drawn
    with pytest.raises(ReplayRefused, match="no stored run of the point b"):
        oracle.value("b", 0)
    with pytest.raises(ReplayRefused, match="repetition 4 of the point a.*stored 3"):
        oracle.value("a", 3)


def test_replays_compare_strategies_against_the_grid_truth():
    sp = space()
    swept = search("grid", sp, RULE, None, ScriptedOracle(noisy), OBJECTIVE, seed=0)
    samples = swept.values  # every configuration under the rule, as a grid campaign stores
    grid = replaymod.Grid(sp, samples, RULE, OBJECTIVE,
                          replaymod.answer(samples, sp.points, OBJECTIVE))
    rows = replaymod.derive(grid, seeds=range(3), shares=(0.1, 0.5))
    assert len(rows) == 3 * 2 * 3
    assert (rows["runs_used"] <= rows["budget"]).all()
    table = replaymod.summary(rows, grid.runs)
    assert set(table["strategy"]) == {"random", "tpe", "adaptive"}
    assert ((table["found_low"] <= table["found"]) & (table["found"] <= table["found_high"])).all()


def _tiny_replay():
    sp = space()
    swept = search("grid", sp, RULE, None, ScriptedOracle(noisy), OBJECTIVE, seed=0)
    grid = replaymod.Grid(sp, swept.values, RULE, OBJECTIVE,
                          replaymod.answer(swept.values, sp.points, OBJECTIVE))
    rows = replaymod.derive(grid, seeds=range(2), shares=(0.1,))
    return rows, replaymod.meta(grid, [0, 1], (0.1,), replaymod.COMPARED, "demo", "box")


def test_a_replay_is_written_as_pandas_and_yaml_write_it(tmp_path):
    """The committed replays are compared byte for byte (tests/test_rederive.py): written
    through a temporary file, they are the bytes to_csv and safe_dump give."""
    import yaml

    rows, info = _tiny_replay()
    path = tmp_path / "derived" / "box.csv"
    replaymod.write(rows, info, path)
    assert path.read_text() == rows.to_csv(index=False, float_format="%.6g")
    assert path.with_suffix(".yaml").read_text() == yaml.safe_dump(info, sort_keys=False)
    assert sorted(p.name for p in path.parent.iterdir()) == ["box.csv", "box.yaml"]


@pytest.mark.parametrize("which", [".csv", ".yaml"])
@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_replay_output_that_is_not_a_regular_file_is_refused(tmp_path, kind, which):
    from iolab.safefiles import NotOurs
    from test_not_ours import as_it_was, ends, plant

    rows, info = _tiny_replay()
    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    victim.chmod(0o600)
    path = tmp_path / "derived" / "box.csv"
    path.parent.mkdir()
    planted = path.with_suffix(which)
    plant(planted, kind, victim)
    result = ends(lambda: replaymod.write(rows, info, path), planted if kind == "fifo" else None)
    error = result.get("error")
    assert isinstance(error, NotOurs), result
    assert f"iolab search-replay: {planted} is " in str(error) and "\n" not in str(error)
    as_it_was(planted, kind, victim)
    assert sorted(p.name for p in path.parent.iterdir()) == [planted.name], "nothing written"


@pytest.mark.parametrize("linked", ["derived", "derived/search_replay/cpu_search"])
def test_a_derived_folder_that_is_a_link_is_refused(tmp_path, linked):
    """The replays are the data directory's files: a link in place of one of its folders
    would put them elsewhere while the command says it wrote them here."""
    from iolab.safefiles import NotOurs

    rows, info = _tiny_replay()
    data = tmp_path / "data"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (data / linked).parent.mkdir(parents=True)
    (data / linked).symlink_to(elsewhere)
    path = replaymod.derived_path(data, "cpu_search", "box")
    with pytest.raises(NotOurs, match="is a symbolic link, where iolab keeps derived files"):
        replaymod.write(rows, info, path)
    assert list(elsewhere.iterdir()) == []
    # a link above the data directory is the user's own choice, and followed
    (tmp_path / "link").symlink_to(tmp_path, target_is_directory=True)
    replaymod.write(rows, info, replaymod.derived_path(tmp_path / "link" / "other", "x", "box"))
    assert (tmp_path / "other" / "derived" / "search_replay" / "x" / "box.csv").is_file()


def _written_replay(tmp_path) -> Path:
    rows, info = _tiny_replay()
    path = tmp_path / "derived" / "box.csv"
    replaymod.write(rows, info, path)
    return path


def test_a_written_replay_reads_back_as_written(tmp_path):
    rows, info = _tiny_replay()
    read_rows, read_info = replaymod.read(_written_replay(tmp_path))
    assert read_info == info
    assert list(read_rows.columns) == replaymod.COLUMNS and len(read_rows) == len(rows)


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_replays_at_a_link_or_fifo_are_refused_never_read(tmp_path, kind):
    """A link at the replays' name was followed: another file's rows (a secret's) became
    the chapter's table of replays."""
    from iolab.safefiles import NotOurs
    from test_not_ours import ends, plant

    path = _written_replay(tmp_path)
    secret = tmp_path / "secret.csv"
    secret.write_text("secret,token\nroot,hunter2\n")
    secret.chmod(0o600)
    path.unlink()
    plant(path, kind, secret)
    result = ends(lambda: replaymod.read(path), path if kind == "fifo" else None)
    error = result.get("error")
    assert isinstance(error, NotOurs), result
    assert str(path) in str(error) and "\n" not in str(error)
    assert "hunter2" not in str(error)


def test_replays_larger_than_any_written_are_refused_unread(tmp_path, monkeypatch):
    from iolab.safefiles import TooLarge

    path = _written_replay(tmp_path)
    monkeypatch.setattr(replaymod, "REPLAYS_MOST", path.stat().st_size - 1)
    with pytest.raises(TooLarge, match=str(path)):
        replaymod.read(path)


@pytest.mark.parametrize("key, value, allowed", [
    ("command", "[1, 2]", "one line: iolab search-replay"),
    ("command", "'rm -rf ~'", "one line: iolab search-replay"),
    ("command", '"iolab search-replay x\\n\\e[2J"', "one line: iolab search-replay"),
    ("grid_digest", "{a: 1}", "64 lower-case hexadecimal digits"),
    ("grid_digest", "null", "64 lower-case hexadecimal digits"),
])
def test_a_replay_yaml_field_of_another_kind_is_named(tmp_path, key, value, allowed):
    """A command that was a list ended the chapter with a TypeError (the digest's refusal
    joined it to a string): each field read is checked, named with what is allowed."""
    import re

    path = _written_replay(tmp_path)
    info = path.with_suffix(".yaml")
    info.write_text(re.sub(rf"(?m)^{key}:.*$", lambda _: f"{key}: {value}", info.read_text()))

    class Other:
        def digest(self):
            return "0" * 64

    for grid in (None, Other()):
        with pytest.raises(InputError, match=rf"^{re.escape(str(info))}: key '{key}': .*"
                                             rf"\(allowed: {re.escape(allowed)}") as caught:
            replaymod.read(path, grid)
        assert "\n" not in str(caught.value)


def _column(name, value):
    def change(path):
        import pandas as pd

        rows = pd.read_csv(path)
        rows[name] = value
        rows.to_csv(path, index=False)
    return change


@pytest.mark.parametrize("change", [
    lambda p: p.write_text(p.read_text().replace("strategy,", "tactic,", 1)),
    _column("seed", "x"),
    _column("in_best_set", "yes"),
    lambda p: p.write_text(p.read_text() + '"unclosed\n'),
    lambda p: p.write_bytes(b"\xff\xfe" + p.read_bytes()),
], ids=["a column renamed", "a seed that is a word", "a flag that is a word", "cut off",
        "not UTF-8"])
def test_replays_that_are_not_the_table_written_are_named(tmp_path, change):
    """The summary read columns by name and summed them: another table's columns, or a word
    where a number or True/False is, ended the chapter with a KeyError or a TypeError."""
    path = _written_replay(tmp_path)
    change(path)
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}") as caught:
        replaymod.read(path)
    assert "\n" not in str(caught.value)


def test_wilson_interval():
    low, high = replaymod.wilson(95, 100)
    assert low == pytest.approx(0.8882, abs=1e-3) and high == pytest.approx(0.9785, abs=1e-3)
    assert replaymod.wilson(0, 10)[0] == 0.0


# -- params ----------------------------------------------------------------------------------

SEARCHED = """experiment: demo
tool: fio
runtime_s: 1
repetitions: {min: 3, max: 4, metric: iops, target_ci_pct: 5}
base: {engine: psync, concurrency: 1, thp: asis, pinned: false}
grids:
  space: {vary: {engine: [psync, io_uring], concurrency: [1, 2, 4, 8, 16, 32]}}
  around: {vary: {concurrency: [1, 64]}}
search: {grid: space, strategy: adaptive, budget: 20, seed: 3,
         objective: {maximize: iops, ties: [concurrency]}}
"""


@pytest.mark.parametrize("search_key, key, words", [
    ("[1]", "search", "must be a mapping"),
    ("{grid: nope, budget: 3}", "search.grid", "'nope' is not a grid"),
    # probe 10, B9/B10: a list or a mapping where a name goes ended in 'unhashable type'
    ("{grid: [space], budget: 3}", "search.grid", "['space'] is not a grid"),
    ("{grid: {a: 1}, budget: 3}", "search.grid", "is not a grid"),
    ("{grid: space, strategy: random, budget: 5, objective: {maximize: iops, "
     "ties: [[concurrency]]}}", "search.objective.ties", "is not a variable"),
    ("{grid: space, strategy: random, budget: 5, objective: {maximize: iops, "
     "ties: [{a: 1}]}}", "search.objective.ties", "is not a variable"),
    ("{grid: space, strategy: random, budget: 5, objective: {maximize: [iops]}}",
     "search.objective.maximize", "not a metric"),
    ("{grid: space, strategy: magic, budget: 3, objective: {maximize: iops}}",
     "search.strategy", "magic"),
    ("{grid: space, strategy: adaptive, objective: {maximize: iops}}", "search.budget",
     "missing"),
    ("{grid: space, strategy: adaptive, budget: 0, objective: {maximize: iops}}",
     "search.budget", ""),
    ("{grid: space, strategy: random, budget: 5}", "search.objective", "what is maximized"),
    ("{grid: space, strategy: random, budget: 5, objective: {maximize: watts}}",
     "search.objective.maximize", "not a metric"),
    ("{grid: space, strategy: random, budget: 5, objective: {maximize: iops, ties: [engine]}}",
     "search.objective.ties", "does not take numbers"),
    ("{grid: space, strategy: random, budget: 5, objective: {maximize: iops, ties: [thp]}}",
     "search.objective.ties", "not varied"),
    ("{grid: space, strategy: random, budget: 5, seed: -1, objective: {maximize: iops}}",
     "search.seed", ""),
    ("{grid: space, budget: 5, colour: red, objective: {maximize: iops}}", "search.colour",
     "unknown field"),
    ("{grid: space, strategy: adaptive, budget: 5, version: 3, objective: {maximize: iops}}",
     "search.version", "not a version"),
    ("{grid: space, strategy: random, budget: 5, version: 2, objective: {maximize: iops}}",
     "search.version", "not a version"),
])
def test_a_bad_search_key_names_the_file_the_key_and_what_is_allowed(
        demo, params_dir, tmp_path, search_key, key, words):
    text = SEARCHED.split("search:")[0] + f"search: {search_key}\n"
    folder = params_dir({ENV: text})
    data = tmp_path / "data"
    with pytest.raises(InputError) as err:
        load(demo, ENV, params_dir=folder)
    assert err.value.key == key and words in err.value.problem
    assert str(folder) in str(err.value.path) and err.value.allowed
    assert not data.exists()  # nothing written


def scripted(camp) -> dict[str, float]:
    """Every (engine, concurrency) point's values by run id: a peak at io_uring, 8."""
    values = {}
    for engine, conc in itertools.product(["psync", "io_uring"], [1, 2, 4, 8, 16, 32, 64]):
        params = {**camp.spec.base, "engine": engine, "concurrency": conc}
        ident = camp.experiment.identity(ENV, camp.spec.settings, params)
        level = 1000 * min(conc, 8) * (2 if engine == "io_uring" else 1) - 50 * max(conc - 8, 0)
        for rep, rid in enumerate(identity.run_ids(ident, camp.spec.repetitions)):
            values[rid] = level * (1 + random.Random(rid).gauss(0, 0.01))
    return values


@pytest.fixture
def searched(demo, params_dir, tmp_path, fake_fio):
    make = campaigns(demo, params_dir, tmp_path, SEARCHED)
    script = tmp_path / "script.json"

    def new(name: str):
        camp = make(name)
        script.write_text(json.dumps(scripted(camp)))
        return camp
    return new


def test_a_live_search_runs_what_it_asks_then_the_grids_around_its_answer(searched):
    camp = searched("data")
    before = camp.plan().to_dict()
    assert before["search"]["after_the_search"] == {"around": 2}
    assert before["to_run"] == min(20 - 4 + 1, 12) and before["to_run_max"] >= 20  # certain
    camp.run(progress=False, keep_going=True)
    plan = camp.plan()
    info = plan.to_dict()["search"]
    assert info["done"] and info["runs_used"] <= 20
    assert info["answer"]["engine"] == "io_uring" and info["answer"]["concurrency"] >= 8
    around = [p for p in plan.points() if "around" in p.grids]
    assert {p.params["concurrency"] for p in around} == {1, 64}
    assert all(p.params["engine"] == info["answer"]["engine"] for p in around)
    events = [e for e in log(camp) if e["event"] == "search"]
    assert events[0]["seed"] == 3 and events[0]["version"] >= 1
    assert sum(len(e["decisions"]) for e in events) >= 1


@pytest.mark.parametrize("stops", [[1], [3, 7], [2, 2, 5]])
def test_a_search_killed_and_resumed_stores_what_an_uninterrupted_one_does(searched, stops):
    whole = searched("whole")
    whole.run(progress=False, keep_going=True)
    parts = searched("parts")
    for limit in stops:
        parts.run(progress=False, keep_going=True, limit=limit)
    parts.run(progress=False, keep_going=True)
    assert stored(parts) == stored(whole)
    assert parts.plan().to_dict()["search"] == whole.plan().to_dict()["search"]


# -- the same proposals on every host --------------------------------------------------------

def _ties_reversed(argsort):
    """numpy's argsort, except that an unstable sort of a vector orders equal values last
    first: what another SIMD code path may do (AVX-512 and AVX2 hosts differ so)."""
    import numpy as np

    def other(a, axis=-1, kind=None, order=None):
        if kind == "stable" or np.ndim(a) != 1:
            return argsort(a, axis=axis, kind=kind, order=order)
        return np.lexsort((-np.arange(len(a)), a))
    return other


def _proposals(strategy: str, seed: int) -> list[str]:
    out = search(strategy, space(), RULE, 60, ScriptedOracle(noisy), OBJECTIVE, seed)
    return [canonical_json(d["point"]) for d in out.log]


@pytest.mark.parametrize("strategy", ["tpe", "adaptive"])
def test_the_proposals_do_not_depend_on_how_the_host_sorts_ties(strategy, monkeypatch):
    import numpy as np
    from optuna.samplers._tpe import parzen_estimator

    alike = [_proposals(strategy, seed) for seed in range(3)]
    monkeypatch.setattr(np, "argsort", _ties_reversed(np.argsort))
    assert [_proposals(strategy, seed) for seed in range(3)] == alike
    # the test can tell: Optuna's own estimator, given the other sort, proposes otherwise
    from optuna.samplers import TPESampler
    from iolab.core.search import sampler as samplermod
    monkeypatch.setattr(samplermod, "_host_independent_tpe", lambda **kw: TPESampler(**kw))
    assert parzen_estimator.np is np
    assert [_proposals(strategy, seed) for seed in range(3)] != alike


def test_acquisition_values_equal_at_the_stated_precision_take_the_first_candidate(
        monkeypatch):
    import numpy as np
    from optuna.samplers import TPESampler
    from iolab.core.search.sampler import ACQUISITION_DECIMALS, _host_independent_tpe

    tiny = 10.0 ** -(ACQUISITION_DECIMALS + 3)   # a last-bit difference between code paths
    samples = {"x": np.array([0, 1, 2, 3])}
    for values in ([0.5, 1.0 + tiny, 1.0, 0.2], [0.5, 1.0, 1.0 + tiny, 0.2]):
        monkeypatch.setattr(TPESampler, "_compute_acquisition_func",
                            lambda self, *a, v=values: np.array(v))
        assert TPESampler._compare(samples, TPESampler(seed=0)._compute_acquisition_func()) \
            == {"x": values.index(max(values))}   # Optuna alone: the last bit decides
        mine = _host_independent_tpe(seed=0)._compute_acquisition_func()
        assert TPESampler._compare(samples, mine) == {"x": 1}   # here: the first drawn


# -- a search made with version 1 follows its record --------------------------------------

def _logged(out) -> list[dict]:
    """A campaign log's search lines for ``out``, as the runner writes them: one per step,
    each with the decisions since the last, and a resumed run repeating all of them."""
    lines = []
    for upto in range(1, len(out.log) + 1, 7):
        lines.append({"event": "search", "grid": "g", "strategy": out.strategy,
                      "seed": out.seed, "budget": out.budget, "version": 1, "done": False,
                      "decisions": out.log[max(0, upto - 7):upto]})
    lines.append({**lines[-1], "decisions": out.log, "done": True})   # a resumed session
    return lines


def test_a_recorded_search_asks_for_exactly_the_runs_it_made():
    from iolab.core.search import record as recordmod
    from iolab.core.search.params import SearchSpec

    made = search("adaptive", space(), RULE, 60, ScriptedOracle(noisy), OBJECTIVE, seed=4)
    spec = SearchSpec("g", "adaptive", 60, 4, OBJECTIVE, version=1)
    keys = recordmod.proposals(spec, _logged(made), "params.yaml")
    assert len(keys) == sum(d["step"] == "propose" for d in made.log)
    again = search("adaptive", space(), RULE, 60, ScriptedOracle(noisy), OBJECTIVE, 4, keys)
    assert again.values == made.values and again.log == made.log and again.version == 1
    assert again.answer.key == made.answer.key


def test_a_recorded_search_needs_a_record_that_ended_and_a_current_one_refuses_an_old_log():
    from iolab.core.search import record as recordmod
    from iolab.core.search.params import SearchSpec

    made = search("adaptive", space(), RULE, 60, ScriptedOracle(noisy), OBJECTIVE, seed=4)
    unfinished = [dict(line, done=False) for line in _logged(made)]
    old = SearchSpec("g", "adaptive", 60, 4, OBJECTIVE, version=1)
    for lines in ([], unfinished):
        with pytest.raises(InputError) as err:
            recordmod.proposals(old, lines, "params.yaml")
        assert err.value.key == "search.version" and "ended" in err.value.problem
    current = SearchSpec("g", "adaptive", 60, 4, OBJECTIVE)
    with pytest.raises(InputError) as err:
        recordmod.proposals(current, _logged(made), "params.yaml")
    assert "made with version 1" in err.value.problem and "version: 1" in err.value.allowed
    other_seed = SearchSpec("g", "adaptive", 60, 5, OBJECTIVE)
    assert recordmod.proposals(other_seed, _logged(made), "params.yaml") is None


def test_the_committed_live_search_re_plans_from_its_record_as_it_was_logged():
    """The live search (version 1) asks for its 104 stored runs and no other, on any host:
    its decisions re-made from the record are those its campaign log holds."""
    from iolab.execution.campaign import Campaign

    camp = Campaign("cpu_search", "epyc-2vcpu-v782-adaptive")
    plan = camp.plan(as_recorded=True)
    info = plan.to_dict()
    assert info["search"]["version"] == 1 and info["search"]["done"]
    assert info["to_run"] == 0 and info["stored"] == 129
    logged = {}
    for line in log(camp):
        if line["event"] == "search":
            for d in line["decisions"]:
                logged.setdefault((d["step"], canonical_json(d["point"]), d["runs_used"]), None)
    again = [(d["step"], canonical_json(d["point"]), d["runs_used"])
             for d in plan.search.outcome.log]
    assert again == list(logged)


def test_the_lab_plan_searches_and_gives_its_time_as_a_range():
    from iolab.execution.campaign import Campaign

    plan = Campaign("cpu_search", "hpc-server").design()
    info = plan.to_dict()["search"]
    assert info["strategy"] == "adaptive" and not info["done"]
    assert set(info["after_the_search"]) == {"expand-qdepth", "expand-iosize", "expand-ncores",
                                             "expand-ndevs", "smt-off-3ghz"}
    low, high = info["eta_s"]
    assert 0 < low < high
    swept = Campaign("cpu_search", "hpc-server", overrides={"search.strategy": "grid"}).design()
    assert high <= swept.eta_s / 10   # a tenth of the full grid's time at most


def test_search_replay_refuses_its_outputs_before_the_replays(tmp_path, monkeypatch):
    """A link at an output is named before minutes of replays, not after them."""
    import shutil

    from iolab.cli import main

    source = Path(os.environ["IOLAB_DATA"]) / "raw" / "cpu_search" / "epyc-2vcpu-v782-grid"
    if not source.is_dir():
        pytest.skip("no committed cpu_search/epyc-2vcpu-v782-grid campaign")
    data = tmp_path / "data"
    shutil.copytree(source, data / "raw" / "cpu_search" / "epyc-2vcpu-v782-grid")
    path = replaymod.derived_path(data, "cpu_search", "epyc-2vcpu-v782-grid")
    path.parent.mkdir(parents=True)
    path.symlink_to(tmp_path / "victim")
    monkeypatch.setattr(replaymod, "derive", lambda *a, **k: pytest.fail("replayed first"))
    code = main(["search-replay", "cpu_search", "--env", "epyc-2vcpu-v782-grid", "--data",
                 str(data), "--seeds", "1", "--no-progress"])
    assert code == 2 and not (tmp_path / "victim").exists()


@pytest.mark.parametrize("flag, value, allowed", [
    ("--seeds", "99999999999", "1 to 100,000"),
    ("--seeds", "-5", "1 to 100,000"),
    ("--jobs", "99999", "1 to 8 (4 per CPU of this host)"),
    ("--jobs", "0", "1 to 8 (4 per CPU of this host)"),
])
def test_seeds_and_jobs_beyond_their_bounds_are_refused_before_any_replay(
        tmp_path, capsys, monkeypatch, flag, value, allowed):
    """99,999,999,999 seeds ran out of memory (an internal error); --jobs 99999 started
    99,999 worker processes."""
    from iolab.cli import main

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(replaymod, "derive", lambda *a, **k: pytest.fail("replayed"))
    argv = ["search-replay", "cpu_search", "--env", "epyc-2vcpu-v782-grid", "--data",
            str(tmp_path / "data"), "--seeds", "3", "--no-progress", flag, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (f"iolab: error: iolab search-replay: key '{flag}': {value} "
                   f"(allowed: {allowed})\n")
    assert not (tmp_path / "data").exists()


def test_the_bounds_of_seeds_and_jobs_themselves_are_allowed(monkeypatch):
    from iolab.cli import search as cli_search

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    cli_search.check_bounds(cli_search.SEEDS_MOST, 8)
    cli_search.check_bounds(1, 1)


_INTERRUPTED_REPLAY = """
import os, sys, time
from pathlib import Path
from iolab.core.search import replay

def busy(job):  # a replay that takes long: the worker says it started, then works
    Path(sys.argv[1], str(os.getpid())).write_text("")
    time.sleep(120)

replay._replay_job = busy
replay.budgets = lambda grid, shares: {0.5: 10}
try:
    replay.derive(None, range(40), strategies=["grid"], shares=[0.5], jobs=2)
except KeyboardInterrupt:  # as the CLI does
    print("iolab: interrupted", file=sys.stderr)
    sys.exit(130)
"""


@contextlib.contextmanager
def _replay_with_two_workers(tmp_path):
    """The parallel replay of ``_INTERRUPTED_REPLAY`` in a session of its own, once both its
    workers have started: (the process, the workers' pids); killed at the end if still there."""
    import signal
    import subprocess
    import sys
    import time

    started = tmp_path / "started"
    started.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _INTERRUPTED_REPLAY, str(started)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120  # a loaded host starts processes slowly
        while len(list(started.iterdir())) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        workers = [int(p.name) for p in started.iterdir()]
        assert len(workers) == 2
        yield proc, workers
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode is None:
            proc.communicate()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended and waiting for its parent to reap it, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_parallel_replay_ended_by_sigterm_leaves_no_worker(tmp_path):
    """SIGTERM ends the main process without an exception, so the pool never ended its
    workers: each went on with its replay as an orphan. Now they end with their parent."""
    import signal
    import time

    with _replay_with_two_workers(tmp_path) as (proc, workers):
        proc.send_signal(signal.SIGTERM)  # the main process only, as `kill PID` does
        proc.communicate(timeout=120)
        deadline = time.monotonic() + 60
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert [pid for pid in workers if _alive(pid)] == []


def test_ctrl_c_ends_a_parallel_replay_quietly_and_leaves_no_worker(tmp_path):
    """Ctrl-C reaches the whole process group: each worker printed its traceback, and the
    command hung after saying "interrupted" (the pool waited at exit on a worker that never
    ended). Now the workers leave SIGINT to the main process, which ends them."""
    import signal

    with _replay_with_two_workers(tmp_path) as (proc, workers):
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C does
        _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (130, "iolab: interrupted\n")
    assert [pid for pid in workers if Path(f"/proc/{pid}").exists()] == []
