"""Version-1 runs: read through the experiment (stored for today's plan when their recorded
argv is what today's code runs), and migrated to version 2 by `iolab migrate`, dry run by
default, crash-safe, idempotent, with every raw file and tidy value kept."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from iolab.cli import main
from iolab.core import migrate, tidy
from iolab.core.registry import get
from iolab.core.store import open_store
from iolab.core.store import sha256_file
from iolab.execution.campaign import Campaign
from iolab.safefiles import NotOurs

V1 = Path(__file__).parent / "fixtures" / "v1_store"


@pytest.fixture
def data(tmp_path):
    shutil.copytree(V1, tmp_path / "data")
    return tmp_path / "data"


def folders(data, experiment):
    return sorted(p.name for p in (data / "raw" / experiment / "kvm-2vcpu" / "runs").iterdir())


def params_of(experiment: str) -> Path | None:
    """The params the version-1 runs were made with, where the live ones have moved on."""
    return V1 / "params" if (V1 / "params" / "kvm-2vcpu" / f"{experiment}.yaml").exists() \
        else None


@pytest.mark.parametrize("experiment, n", [("smt_thp", 3), ("cpu_search", 1)])
def test_version_1_runs_count_as_stored(data, experiment, n):
    plan = Campaign(experiment, "kvm-2vcpu", data_dir=data,
                    params_dir=params_of(experiment)).plan()
    assert plan.counts()["stored"] == n and plan.stored_outside == []
    run = open_store(get(experiment), "kvm-2vcpu", data).complete_runs()[0]
    assert run.manifest.migrated_from["schema_version"] == 1
    assert run.manifest.run_id != run.path.name and "v1_mismatch" not in run.manifest.extra


@pytest.mark.parametrize("text, problem", [
    ("[" * 100_000, "nested more than 100 levels"),
    ("{}", "has no cpus (allowed: a list of CPU ids 0 to 4194303, each once)"),
    ('{"cpus": "0"}', "cpus is '0' (allowed: a list of CPU ids"),
    ('{"cpus": [0, 0]}', "cpus is [0, 0] (allowed: a list of CPU ids"),
    ('{"cpus": [1e300]}', "cpus is [1e+300] (allowed: a list of CPU ids"),
])
def test_a_damaged_cpus_record_of_a_version_1_run_makes_it_corrupt(data, text, problem):
    """cpus.json was read with a bare json.loads and indexed: a KeyError or a RecursionError
    ended every listing of the campaign's runs (status, tidy, run), and a list of another
    shape was stored as the run's CPUs. Now the run alone is corrupt, its reason naming the
    file."""
    runs = data / "raw" / "cpu_search" / "kvm-2vcpu" / "runs"
    [run_dir] = runs.iterdir()
    (run_dir / "cpus.json").write_text(text)
    store = open_store(get("cpu_search"), "kvm-2vcpu", data)
    good, corrupt = store.scan(verify=False)
    assert good == [] and [c.path for c in corrupt] == [run_dir]
    assert f"{run_dir}/cpus.json: " in corrupt[0].reason and problem in corrupt[0].reason


def test_a_run_whose_argv_today_differs_is_not_reused(data):
    """A changed option (here: the ramp the run recorded) means a different run, not a stored one."""
    path = data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs" / "01c5ea7fda6e-r0" / "run.json"
    doc = json.loads(path.read_text())
    doc["argv"] = [a.replace("--ramp_time=1s", "--ramp_time=9s") for a in doc["argv"]]
    path.write_text(json.dumps(doc))
    plan = Campaign("smt_thp", "kvm-2vcpu", data_dir=data).plan()
    assert plan.counts()["stored"] == 2 and len(plan.stored_outside) == 1
    run = [r for r in open_store(get("smt_thp"), "kvm-2vcpu", data).complete_runs()
           if r.path.name == "01c5ea7fda6e-r0"][0]
    assert "recorded argv differs" in run.manifest.extra["v1_mismatch"]


def test_a_version_1_manifest_of_another_shape_makes_only_its_run_corrupt(data, capsys):
    """Probe 10, C1's class: a version-1 run.json whose config is not a mapping stopped the
    listing of the campaign (and 'iolab migrate') with a TypeError in the upgrade."""
    runs = data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs"
    damaged = sorted(runs.iterdir())[0]
    doc = json.loads((damaged / "run.json").read_text())
    (damaged / "run.json").write_text(json.dumps({**doc, "config": 5}))
    store = open_store(get("smt_thp"), "kvm-2vcpu", data)
    good, corrupt = store.scan(verify=False)
    assert len(good) == 2 and [c.path for c in corrupt] == [damaged]
    assert "(key 'config'): is int, not a dict" in corrupt[0].reason
    assert main(["migrate", "--data", str(data)]) == 0
    assert "2 version-1 runs" in capsys.readouterr().out


def test_migrate_is_a_dry_run_by_default_then_idempotent(data, capsys):
    before = {e: folders(data, e) for e in ("smt_thp", "cpu_search")}
    tidy_before = tidy.load(data, get("smt_thp"), "kvm-2vcpu", use_cache=False)
    assert main(["migrate", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "3 version-1 runs" in out
    assert {e: folders(data, e) for e in before} == before

    assert main(["migrate", "--data", str(data), "--apply"]) == 0
    store = open_store(get("smt_thp"), "kvm-2vcpu", data)
    runs = store.complete_runs()
    assert [r.run_id for r in runs] == [r.path.name for r in runs] and len(runs) == 3
    for run in runs:
        doc = json.loads((run.path / "run.json").read_text())
        assert doc["schema_version"] == 2 and doc["migrated_from"]["migrated_at"]
        assert (run.path / migrate.V1_COPY).exists(), "the old manifest is kept"
        for name, meta in run.manifest.files.items():
            assert sha256_file(run.path / name) == meta["sha256"]
    assert Campaign("smt_thp", "kvm-2vcpu", data_dir=data).plan().counts()["stored"] == 3
    tidy_after = tidy.load(data, get("smt_thp"), "kvm-2vcpu", use_cache=False)
    pd.testing.assert_frame_equal(tidy_before.sort_values("run.id").reset_index(drop=True),
                                  tidy_after.sort_values("run.id").reset_index(drop=True))

    after = {e: folders(data, e) for e in before}
    assert main(["migrate", "--data", str(data), "--apply"]) == 0
    assert "nothing to migrate" in capsys.readouterr().out
    assert {e: folders(data, e) for e in before} == after


def test_a_migration_that_stopped_halfway_is_finished(data):
    store = open_store(get("smt_thp"), "kvm-2vcpu", data)
    todo = migrate.plan(store)
    # the copy was renamed into place, then the process died before removing the old folder
    old = todo[0].source
    shutil.copytree(old, data / "keep")
    migrate.apply(todo[:1], log=lambda *_: None)
    shutil.copytree(data / "keep", old)
    assert len(store.complete_runs()) == 3, "the old folder is not read twice"
    again = migrate.plan(store)
    assert [m.finish_only for m in again].count(True) == 1
    migrate.apply(again, log=lambda *_: None)
    assert len(folders(data, "smt_thp")) == 3 and not old.exists()


def test_a_raw_folder_that_is_a_link_is_never_migrated_into(data, tmp_path):
    """Probe 13, P13-09: raw/ as a link (into another user's folder) is never written through:
    the migrated copies would land where it points. Refused before anything is changed."""
    elsewhere = tmp_path / "elsewhere"
    (data / "raw").rename(elsewhere)
    (data / "raw").symlink_to(elsewhere)
    before = sorted(str(p.relative_to(elsewhere)) for p in elsewhere.rglob("*"))
    store = open_store(get("smt_thp"), "kvm-2vcpu", data)
    todo = migrate.plan(store)  # reading through it is allowed
    assert todo
    with pytest.raises(NotOurs, match=f"{data / 'raw'}: is a symbolic link to {elsewhere}"):
        migrate.apply(todo, log=lambda *_: None)
    assert sorted(str(p.relative_to(elsewhere)) for p in elsewhere.rglob("*")) == before


def test_a_changed_raw_file_stops_its_migration(data):
    store = open_store(get("smt_thp"), "kvm-2vcpu", data)
    todo = migrate.plan(store)
    (todo[0].source / "fio.json").write_text("{}")
    with pytest.raises(Exception, match="changed since the run was stored"):
        migrate.apply(todo[:1], log=lambda *_: None)
    assert todo[0].source.exists()


def test_a_run_made_with_another_driver_version_is_not_reused(data):
    path = data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs" / "01c5ea7fda6e-r0" / "run.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "driver_version": "0"}))
    plan = Campaign("smt_thp", "kvm-2vcpu", data_dir=data).plan()
    assert plan.counts()["stored"] == 2 and len(plan.stored_outside) == 1


def test_two_old_runs_of_one_identity_are_not_merged_or_lost(data, capsys):
    """Two version-1 runs that differed only in what no longer enters an id: the first is
    migrated, the second is left as it is and said so, and no migration deletes it."""
    runs = data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs"
    twin = runs / "ffffffffffff-r0"
    shutil.copytree(runs / "01c5ea7fda6e-r0", twin)
    doc = json.loads((twin / "run.json").read_text())
    doc["run_id"] = twin.name
    doc["config"]["settings"]["figure_dpi"] = 200  # a presentation key of the old days
    (twin / "run.json").write_text(json.dumps(doc))
    store = open_store(get("smt_thp"), "kvm-2vcpu", data)
    assert len(store.complete_runs()) == 3, "one identity is one run in the table"
    for _ in range(2):
        assert main(["migrate", "--data", str(data), "--apply"]) == 0
    out = capsys.readouterr().out
    assert "same id" in out and "1 left as they are" in out
    assert twin.exists() and (twin / "fio.json").exists()


def test_a_run_folders_name_cannot_make_a_line_of_the_migration_plan(data, capsys):
    """A version-1 run folder's name with a line break is shown escaped on its line."""
    runs = data / "raw" / "cpu_search" / "kvm-2vcpu" / "runs"
    (old,) = runs.iterdir()
    old.rename(runs / f"{old.name}\nFORGED\x1b[2J")
    assert main(["migrate", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert rf"kvm-2vcpu/runs/{old.name}\nFORGED\x1b[2J" in out
    assert not any(line.startswith("FORGED") for line in out.splitlines())


@pytest.mark.parametrize("plant", ["secret", "zero", "fifo", "listed"])
def test_a_link_or_special_file_in_a_run_folder_is_never_followed(data, tmp_path, capsys,
                                                                  plant):
    """copytree had copied a root-only file's content through a link into the data directory
    and read /dev/zero until the disk was full; a raw file the manifest lists, put back as a
    link to a file of the same content, had been read through it."""
    import os

    secret = tmp_path / "secret"
    secret.write_text("SECRET-ROOT-ONLY\n")
    secret.chmod(0o600)
    store = open_store(get("smt_thp"), "kvm-2vcpu", data)
    (first, *_) = migrate.plan(store)
    run = first.source
    if plant == "secret":
        (run / "notes.txt").symlink_to(secret)
    elif plant == "zero":
        (run / "zero").symlink_to("/dev/zero")
    elif plant == "fifo":
        os.mkfifo(run / "pipe")
    else:
        shutil.copyfile(run / "fio.json", tmp_path / "fio.json")
        (run / "fio.json").unlink()
        (run / "fio.json").symlink_to(tmp_path / "fio.json")
    before = sorted(p.name for p in run.iterdir())
    assert main(["migrate", "--data", str(data), "--apply"]) == 2
    err = capsys.readouterr().err
    assert str(run) in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in run.iterdir()) == before, "the run is left as it is"
    runs = run.parent
    assert not list(runs.glob(".tmp-*")), "nothing of the copy is kept"
    assert not [p for p in data.rglob("*") if p.is_file() and not p.is_symlink()
                and b"SECRET-ROOT-ONLY" in p.read_bytes()]
