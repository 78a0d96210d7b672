"""``iolab replicate``: the packs in the params, the host-named environment, the quiet check
(the machine's load is faked, never made) and resuming, with a scripted fake fio."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from iolab.cli import main
from iolab.core import spec as specmod
from iolab.errors import InputError, IolabError
from iolab.execution import replicate as rep
from iolab.execution.campaign import Campaign
from iolab.paths import PARAMS_DIR, usable_name
from iolab.schemas.verify import verify
from conftest import scratch_dir
from test_quiet import fake_proc
from test_rounds import (ENV, PARAMS, WithoutHostKnobs, fake_fio, log,  # noqa: F401  (fake_fio:
                         stored)  # the fixture)

SOURCE = "book"
PACKED = PARAMS + """replicate:
  repetitions: {min: 3, max: 4, metric: iops, target_ci_pct: 5}
  grids:
    ends: {vary: {concurrency: [1, 8]}}
"""
LOCAL = ("smt_thp", "cpu_search", "irq_affinity", "tool_comparison")
QUIET = rep.Quiet(0.2, 2, 1.0, 0.0)
BUSY = rep.Quiet(3.1, 2, 42.0, 0.0, busy=rep.busy(3.1, 2, 42.0, 0.0))


@pytest.mark.parametrize("model, release, name", [
    ("Intel(R) Xeon(R) Processor", "6.18.44-fc-v657", "xeon-v657"),
    ("AMD EPYC", "6.18.44-fc-v782", "epyc-v782"),
    ("AMD EPYC 7B13 64-Core Processor", "6.1.0-18-amd64", "epyc-6.1.0-18"),
    ("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", "5.15.0-91-generic", "core-5.15.0-91"),
    ("Neoverse-N1", "6.8.0-1009-aws", "neoverse-6.8.0-1009"),
    ("QEMU Virtual CPU version 2.5+", "6.12.7+deb13-cloud-amd64", "qemu-6.12.7-deb13"),
    (None, "6.8.0", "cpu-6.8.0"),
    ("../../etc Weird\x1b[2J CPU", "..\n6.1", "etc-6.1"),
    # a kernel release takes up to 64 characters, a model's word more: cut to the longest
    # name allowed (probe 13, P13-08)
    ("Zz" * 40, "6.1.0-" + "9" * 80, ("zz" * 40 + "-6.1.0-" + "9" * 80)[:100]),
])
def test_the_environment_is_named_from_the_cpu_family_and_kernel_build(model, release, name):
    assert rep.environment_name(model, release) == name
    assert usable_name(name)


def demo_params(params_dir, text=PACKED):
    return params_dir({SOURCE: text})


def test_the_packs_environment_runs_the_packs_grids_and_rule(demo, params_dir, tmp_path):
    folder = demo_params(params_dir)
    packs = rep.prepare(ENV, (demo,), SOURCE, write=True, params_dir=folder)
    assert [p.created for p in packs] == [True]
    spec = specmod.load(demo, ENV, params_dir=folder)
    assert list(spec.grids) == ["ends"] and (spec.rule.min, spec.rule.max) == (3, 4)
    assert spec.replicate is None and spec.order == "interleaved"
    # made once: a second call keeps the file (perhaps edited for this machine) as it is
    path = specmod.params_path("demo", ENV, folder)
    path.write_text(path.read_text() + "# edited\n")
    assert [p.created for p in rep.prepare(ENV, (demo,), SOURCE, write=True,
                                           params_dir=folder)] == [False]
    assert path.read_text().endswith("# edited\n")


@pytest.mark.parametrize("linked", ["environment", "params"])
def test_a_pack_is_never_written_through_a_linked_folder(demo, params_dir, tmp_path, linked):
    """A linked environment folder had the pack written wherever the link pointed."""
    folder = demo_params(params_dir)
    victim = tmp_path / "victim"
    victim.mkdir()
    if linked == "environment":
        (folder / ENV).symlink_to(victim)
        refused = folder / ENV
    else:
        outer = tmp_path / "outer"
        outer.mkdir()
        (outer / "params").symlink_to(folder)
        folder = refused = outer / "params"
    with pytest.raises(InputError, match="symbolic link.*never followed") as err:
        rep.prepare(ENV, (demo,), SOURCE, write=True, params_dir=folder)
    assert err.value.path == str(refused)
    assert not list(victim.iterdir()) and not (tmp_path / "outer" / ENV).exists()


@pytest.mark.parametrize("pack, key", [
    ("replicate: {grids: {x: {vary: {nope: [1]}}}, repetitions: 3}", "replicate.grids.x.vary.nope"),
    ("replicate: {grids: {x: {vary: {concurrency: [1]}}}, repetitions: {min: 5, max: 2, "
     "metric: iops, target_ci_pct: 5}}", "replicate.repetitions"),
    ("replicate: {grids: {x: {vary: {concurrency: [1]}}}}", "replicate.repetitions"),
    ("replicate: {points: [], grids: {}, repetitions: 3}", "replicate.points"),
    ("replicate: [1, 2]", "replicate"),
])
def test_a_bad_pack_is_refused_naming_the_file_and_key(demo, params_dir, pack, key):
    text = PACKED.split("replicate:")[0] + pack + "\n"
    folder = demo_params(params_dir, text)
    with pytest.raises(InputError) as err:
        specmod.load(demo, SOURCE, params_dir=folder)
    assert err.value.key.startswith(key) and SOURCE in err.value.path


@pytest.mark.parametrize("bound", ["MAX_POINTS", "MAX_RUNS"])
def test_a_pack_too_large_is_refused_naming_the_source_file_and_key(demo, params_dir, tmp_path,
                                                                     monkeypatch, bound):
    """Probe 10, B8: it was refused naming the draft it is planned from (a temporary file,
    deleted by then) and the key 'grids'; nothing is written."""
    from iolab.core import planner

    monkeypatch.setattr(planner, bound, 1)  # the pack has 2 points, of up to 4 runs each
    folder = demo_params(params_dir)
    data = tmp_path / "data"
    data.mkdir()
    with pytest.raises(InputError, match="the pack's design has up to 2 points and 8 runs "
                                         r"\(ends: 2 points\)") as err:
        rep.plan_packs(ENV, (demo,), data, SOURCE, params_dir=folder)
    assert err.value.path == str(specmod.params_path("demo", SOURCE, folder))
    assert err.value.key == "replicate.grids"
    with pytest.raises(InputError, match="replicate.grids"):
        rep.prepare(ENV, (demo,), SOURCE, write=True, params_dir=folder)
    assert not (folder / ENV).exists()


def test_a_file_without_a_pack_says_so(demo, params_dir):
    folder = demo_params(params_dir, PACKED.split("replicate:")[0])
    with pytest.raises(InputError, match="replicate.*missing"):
        rep.prepare(ENV, (demo,), SOURCE, write=True, params_dir=folder)


def scripted(demo, folder, tmp_path, fake_fio, data) -> None:
    """The fake fio's values for the pack's runs (1000 IOPS each: every point settles at
    the rule's minimum), from a draft of the pack's params."""
    draft = tmp_path / "draft"
    pack = rep.prepare(ENV, (demo,), SOURCE, write=False, params_dir=folder, draft_dir=draft)
    fake_fio(Campaign(demo, ENV, data_dir=data, params_dir=pack[0].params_dir),
             {1: [1000] * 4, 8: [1000] * 4})


def run(demo, folder, data, reading=QUIET, busy_ok=False, said=None):
    return rep.run_packs(ENV, (demo,), data, reading, busy_ok=busy_ok, source_env=SOURCE,
                         params_dir=folder, campaign=WithoutHostKnobs, progress=False,
                         said=said or (lambda text: None))


def test_replicate_measures_the_pack_and_a_second_call_measures_nothing_again(
        demo, params_dir, tmp_path, fake_fio):
    folder, data = demo_params(params_dir), tmp_path / "data"
    scripted(demo, folder, tmp_path, fake_fio, data)
    said = []
    [(name, first)] = run(demo, folder, data, said=said.append)
    assert name == "demo" and first.completed == 6 and not first.failed
    assert any("wrote" in line for line in said)
    camp = WithoutHostKnobs(demo, ENV, data_dir=data, params_dir=folder)
    runs = stored(camp)
    lines = log(camp)
    said.clear()
    [(_, again)] = run(demo, folder, data, BUSY, busy_ok=True, said=said.append)
    assert again.completed == 0 and stored(camp) == runs
    # a pack whose runs are all stored is left as it is: no line added to its log
    assert log(camp) == lines and said == [f"== demo: nothing to measure here: 6 runs stored "
                                           f"in {ENV}, 0 blocked on this host ('iolab plan' "
                                           "says why)"]
    quiet_lines = [line for line in lines if line["event"] == "quiet"]
    assert len(quiet_lines) == 1 and not quiet_lines[0]["busy_ok"]
    # the log's quiet lines are valid lines of the published campaign-log schema
    verified = verify(data)
    assert verified.files and not verified.problems, verified.problems
    # each run records the machine's quiet as tidy columns
    rows = camp.tidy()
    assert {"quiet.foreign_cpu_pct", "quiet.steal_pct", "quiet.foreign_load"} <= set(rows)


class NotBuiltHere(type(__import__("conftest").Demo())):
    """The demo under another name, whose tool is a build this host lacks (as a host
    without 'make tools' lacks bdevperf)."""
    name = "notbuilt"

    def programs(self, settings, point, topology=None):
        [program, *rest] = super().programs(settings, point, topology)
        program = dataclasses.replace(program, executable="/nonexistent/iolab-test/fio")
        return [program, *rest]


def test_a_pack_whose_tool_is_missing_is_named_and_skipped_and_the_others_are_measured(
        demo, params_dir, tmp_path, fake_fio):
    missing = NotBuiltHere()
    folder, data = demo_params(params_dir), tmp_path / "data"
    params_dir({SOURCE: PACKED.replace("experiment: demo", "experiment: notbuilt")},
               name="notbuilt")
    scripted(demo, folder, tmp_path, fake_fio, data)
    said = []
    results = rep.run_packs(ENV, (missing, demo), data, QUIET, busy_ok=False,
                            source_env=SOURCE, params_dir=folder, campaign=WithoutHostKnobs,
                            progress=False, said=said.append)
    [(first, skipped), (second, measured)] = results
    assert first == "notbuilt" and "/nonexistent/iolab-test/fio" in skipped.skipped
    assert skipped.completed == 0 and not (data / "raw" / "notbuilt").exists()
    assert any(line.startswith("== notbuilt: skipped") for line in said)
    assert second == "demo" and measured.completed == 6 and not measured.skipped
    # the plan names it too, and leaves its time out of the total
    summary = rep.plan_packs(ENV, (missing,), data, SOURCE, params_dir=folder)
    assert "skipped here: fio not found at" in summary.text() and summary.eta_s == 0


def test_a_busy_machine_is_refused_and_nothing_is_written(demo, params_dir, tmp_path):
    folder, data = demo_params(params_dir), tmp_path / "data"
    with pytest.raises(IolabError, match="busy: load average 3.10 .*42.0 % .*--busy-ok"):
        run(demo, folder, data, BUSY)
    assert not (folder / ENV).exists() and not (data / "raw").exists()


def test_busy_ok_measures_all_the_same_and_the_campaign_log_says_so(
        demo, params_dir, tmp_path, fake_fio):
    folder, data = demo_params(params_dir), tmp_path / "data"
    scripted(demo, folder, tmp_path, fake_fio, data)
    [(_, result)] = run(demo, folder, data, BUSY, busy_ok=True)
    assert result.completed == 6
    camp = Campaign(demo, ENV, data_dir=data, params_dir=folder)
    [line] = [line for line in log(camp) if line["event"] == "quiet"]
    assert line["busy_ok"] is True and "load average 3.10" in line["busy"]
    assert line["load_average"] == 3.1 and line["foreign_cpu_pct"] == 42.0


@pytest.mark.parametrize("load, cpu_after, busy", [
    ("0.20 0.10 0.05 1/90 100", [10, 0, 5, 985, 0, 0, 0, 0], ""),
    ("1.80 0.90 0.40 3/90 100", [10, 0, 5, 985, 0, 0, 0, 0], "load average 1.80"),
    ("0.20 0.10 0.05 1/90 100", [300, 0, 50, 650, 0, 0, 0, 0], "35.0 % of its CPU used by other"),
    ("0.20 0.10 0.05 1/90 100", [10, 0, 5, 885, 0, 0, 0, 100], "10.0 % of its CPU stolen"),
])
def test_the_quiet_check_reads_load_foreign_cpu_and_steal(tmp_path, quiet_clock, load,
                                                          cpu_after, busy):
    quiet_clock += [0, 10 * 10**9]   # 1000 ticks of fake_proc's one CPU: 10 s
    proc = fake_proc(tmp_path / "proc", [0] * 8, {}, load=load)
    reading = rep.measure_quiet(proc, sleep=lambda s: fake_proc(proc, cpu_after, {}, load=load),
                                cpus=2)
    assert (busy in reading.busy) if busy else reading.busy == ""


def test_the_command_refuses_a_busy_machine_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(rep, "measure_quiet", lambda: BUSY)
    monkeypatch.setattr(rep, "host_environment", lambda: "testhost-v0")
    data = tmp_path / "data"
    data.mkdir()
    # its scratch files in the session's folder: a user's under /var/tmp/iolab would block
    # every run, and a plan with nothing to run refuses nothing
    code = main(["replicate", "--experiment", "tool_comparison", "--data", str(data),
                 "--set", f"file_dir={scratch_dir() / 'replicate'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--busy-ok" in err[0]
    assert not (PARAMS_DIR / "testhost-v0").exists()


def test_a_machine_whose_packs_are_all_stored_or_blocked_is_not_checked_or_written(
        monkeypatch, tmp_path, capsys):
    """The README's replicate on a machine already measured: nothing to run, so no quiet
    check (a busy machine was refused, then --busy-ok appended a line to a stored log)."""
    monkeypatch.setattr(rep, "measure_quiet", lambda: pytest.fail("no quiet check is due"))
    data = tmp_path / "data"
    data.mkdir()
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    for name in ("dev00.dat", "dev01.dat"):   # a user's files where the pack's scratch goes
        (occupied / name).write_bytes(b"theirs")
    code = main(["replicate", "--experiment", "tool_comparison", "--data", str(data),
                 "--env", "testhost-v0", "--set", f"file_dir={occupied}"])
    out = capsys.readouterr().out
    assert code == 0 and "nothing to measure here" in out, out
    assert not (data / "raw").exists() and not (PARAMS_DIR / "testhost-v0").exists()


def test_the_plan_shows_every_pack_within_the_budget_and_writes_nothing(
        monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(rep, "host_environment", lambda: "testhost-v0")
    data = tmp_path / "data"
    data.mkdir()
    assert main(["replicate", "--plan", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name}: " in out for name in LOCAL)
    assert not (PARAMS_DIR / "testhost-v0").exists() and not (data / "raw").exists()


def test_every_local_pack_fits_the_budget_even_where_every_knob_can_be_switched(tmp_path):
    """The packs' whole design (blocked points included), by the planner's estimate."""
    cost = 0.0
    for name in LOCAL:
        doc = rep.pack_document(name)
        folder = tmp_path / "params" / "pack"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.yaml").write_text(json.dumps(doc))
        cost += Campaign(name, "pack", data_dir=tmp_path / "data",
                         params_dir=tmp_path / "params").design().eta_all_s
    assert 0 < cost <= rep.BUDGET_S


def test_only_local_experiments_have_packs():
    assert sorted(rep.experiments_with_packs()) == sorted(LOCAL)
    with pytest.raises(InputError, match="gpu_pcie.*has no replication pack"):
        rep.check_experiments(["gpu_pcie"])
    assert rep.check_experiments(["irq_affinity", "irq_affinity"]) == ("irq_affinity",)


@pytest.mark.parametrize("load", [float("nan"), float("inf"), -1.0])
def test_a_load_average_that_is_no_reading_is_never_a_quiet_machine(load):
    """Probe 10, Q16: a NaN load average passed the busy check and read as quiet."""
    said = rep.busy(load, 2, 0.0, 0.0)
    assert said.startswith("load average") and "is not a reading" in said


@pytest.mark.parametrize("source, problem", [
    ("nosuch", "--from: no environment 'nosuch' in notebooks/params (allowed: "),
    ("x\x1b]0;pwn\x07\nFAKE", "is not a usable environment name"),
    ("../../../evil", "is not a usable environment name"),
    ("/tmp/evil", "is not a usable environment name"),
], ids=["misspelt", "escapes", "relative path", "absolute path"])
def test_a_from_that_is_no_environment_is_refused_in_one_line(monkeypatch, tmp_path, capsys,
                                                              source, problem):
    """Probe 12's N2: a misspelt --from gave no pack and read as every pack done (rc 0); a
    path read the params of a folder outside notebooks/params."""
    monkeypatch.setattr(rep, "host_environment", lambda: "testhost-v0")
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "smt_thp.yaml").write_text((PARAMS_DIR / "kvm-2vcpu" / "smt_thp.yaml").read_text())
    monkeypatch.setattr(specmod, "read_params_doc",
                        lambda path: pytest.fail(f"{path} must not be read"))
    source = source.replace("/tmp/evil", str(evil))
    for env in ([], ["--env", "probenew"]):
        assert main(["replicate", "--plan", "--from", source, *env,
                     "--data", str(tmp_path / "data")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and problem in err[0], err
    assert not (PARAMS_DIR / "probenew").exists()


def test_a_from_that_is_a_link_to_a_folder_elsewhere_is_refused_unfollowed(
        demo, params_dir, tmp_path, monkeypatch):
    """--from naming an environment whose folder in notebooks/params is a symbolic link to a
    folder elsewhere (another user's) was followed: its params were read and their packs
    copied into the new environment. Now it is refused in one line naming the folder and
    that it is a link, before any params file is read."""
    folder = demo_params(params_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "demo.yaml").write_text(PACKED)
    (folder / "evlink").symlink_to(elsewhere)
    monkeypatch.setattr(specmod, "read_params_doc",
                        lambda path: pytest.fail(f"{path} must not be read"))
    with pytest.raises(InputError) as info:
        rep.check_experiments(None, "evlink", folder)
    assert str(info.value) == (
        f"{folder / 'evlink'}: is a symbolic link to {elsewhere}, where --from reads the params "
        "of environment 'evlink'; it is never followed (allowed: a folder of notebooks/params, "
        "not a link to one)")
