"""The run store: atomic commits, resume bookkeeping, quarantine of broken runs, host checks."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from iolab.core.manifest import RunManifest
from iolab.core.store import LOG, Store, sha256_file
from iolab.errors import InputError, IolabError
from iolab.host.inventory import fingerprint
from iolab.paths import default_data_dir


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "data", "demo", "here")


def manifest(run_id="abc123def456-r0", **fields):
    return RunManifest(run_id=run_id, identity={"point": {"x": 1}}, experiment="demo",
                       environment="here", rep=0, point={"x": 1}, **fields)


def commit_one(store, run_id="abc123def456-r0", payload=b"raw output\n"):
    tmp = store.begin(run_id)
    (tmp / "stdout").write_bytes(payload)
    return store.commit(tmp, manifest(run_id))


def test_commit_writes_manifest_with_file_hashes(store):
    final = commit_one(store)
    manifest = json.loads((final / "run.json").read_text())
    assert manifest["status"] == "ok" and manifest["schema_version"] == 2
    assert manifest["files"]["stdout"]["sha256"] == sha256_file(final / "stdout")
    assert {r.run_id for r in store.complete_runs()} == {"abc123def456-r0"}
    assert not list(store.runs_dir.glob(".tmp-*"))


def test_commit_refuses_to_overwrite(store):
    commit_one(store)
    tmp = store.begin("abc123def456-r0")
    with pytest.raises(IolabError, match="already stored"):
        store.commit(tmp, manifest())


def test_a_batch_syncs_once_and_renames_at_its_end(store, monkeypatch):
    from iolab.core import store as storemod

    syncs = []
    monkeypatch.setattr(storemod, "sync_filesystem", syncs.append)
    with store.batch():
        commit_one(store, "aaaaaaaaaaaa-r0")
        commit_one(store, "aaaaaaaaaaaa-r1")
        with pytest.raises(IolabError, match="already stored"):
            commit_one(store, "aaaaaaaaaaaa-r1")  # pending counts as stored
        assert {r.run_id for r in store.complete_runs()} == set() and not syncs  # nothing in place yet
    assert syncs == [store.root]
    assert {r.run_id for r in store.complete_runs()} == {"aaaaaaaaaaaa-r0", "aaaaaaaaaaaa-r1"}


def test_runs_finished_before_an_error_in_a_batch_are_committed(store):
    with pytest.raises(KeyboardInterrupt):
        with store.batch():
            commit_one(store, "bbbbbbbbbbbb-r0")
            store.begin("bbbbbbbbbbbb-r1")  # unfinished: stays a temporary folder
            raise KeyboardInterrupt
    assert {r.run_id for r in store.complete_runs()} == {"bbbbbbbbbbbb-r0"}
    assert len(store.stale_tmp_dirs()) == 1


def test_unfinished_tmp_folder_is_not_complete(store):
    tmp = store.begin("abc123def456-r1")
    (tmp / "stdout").write_text("half")
    assert {r.run_id for r in store.complete_runs()} == set()
    assert store.scan()[1] == []  # tmp folders are not runs


def test_a_run_folder_without_manifest_is_corrupt_and_moved_aside_not_deleted(store):
    """Runs are renamed into place with their manifest, so a folder under runs/ without one
    was damaged later: corrupt, named with its reason, never silently "not run yet"."""
    commit_one(store)
    broken = store.runs_dir / "ffffffffffff-r0"
    broken.mkdir()
    (broken / "stdout").write_text("precious partial output")
    [corrupt] = store.scan()[1]
    assert corrupt.path == broken and corrupt.reason == "run.json cannot be read (missing)"
    assert store.quarantine() == []  # only interrupted runs move by themselves
    messages = store.quarantine_corrupt([corrupt])
    assert len(messages) == 1 and "corrupt run" in messages[0]
    moved = list(store.partial_dir.iterdir())
    assert len(moved) == 1 and (moved[0] / "stdout").read_text() == "precious partial output"
    assert {r.run_id for r in store.complete_runs()} == {"abc123def456-r0"}
    assert store.scan()[1] == []


def test_a_truncated_manifest_makes_the_run_corrupt(store):
    final = commit_one(store)
    text = (final / "run.json").read_text()
    (final / "run.json").write_text(text[: len(text) // 2])
    [corrupt] = store.scan()[1]
    assert corrupt.reason.startswith("run.json cannot be read (not valid JSON, cut off or altered")
    assert {r.run_id for r in store.complete_runs()} == set()


@pytest.mark.parametrize("key, value, reason", [
    ("experiment", "smt_thp\nsmt_thp/kvm-2vcpu: FORGED",
     "run.json names experiment 'smt_thp\\nsmt_thp/kvm-2vcpu: FORGED', not this folder's 'demo'"),
    ("environment", "there", "run.json names environment 'there', not this folder's 'here'"),
    ("failure", "x\nFORGED-FAILURE", "run.json records a failure ('x\\nFORGED-FAILURE'); only "
                                    "a failed run has one, and it belongs under failed/"),
])
def test_a_manifest_that_contradicts_its_folder_makes_the_run_corrupt(store, key, value, reason):
    """A run.json edited to name another experiment, or to hold a failure reason, was a
    complete and intact sample."""
    final = commit_one(store)
    doc = json.loads((final / "run.json").read_text())
    doc[key] = value
    (final / "run.json").write_text(json.dumps(doc))
    [corrupt] = store.scan()[1]
    assert corrupt.reason == reason and corrupt.path == final
    assert {r.run_id for r in store.complete_runs()} == set()


@pytest.mark.parametrize("damage, reason", [
    (lambda f: f.unlink(), "stdout is missing (run.json records it)"),
    (lambda f: f.write_bytes(b"raw OUTPUT\n"), "differs from what run.json records"),
    (lambda f: f.write_bytes(b"raw"), "stdout has 3 bytes, run.json records 11 (truncated or altered)"),
])
def test_a_missing_or_altered_raw_file_makes_the_run_corrupt(store, damage, reason):
    final = commit_one(store)
    assert store.scan()[1] == []  # verified once: remembered by size and mtime
    damage(final / "stdout")
    [corrupt] = store.scan()[1]
    assert reason in corrupt.reason and corrupt.path == final
    assert {r.run_id for r in store.complete_runs()} == set()


def test_verified_files_are_not_hashed_again(store, monkeypatch):
    from iolab.core import integrity

    commit_one(store)
    assert {r.run_id for r in store.complete_runs()} == {"abc123def456-r0"}
    calls = []
    monkeypatch.setattr(integrity, "sha256_file", lambda p: calls.append(p) or "x")
    assert {r.run_id for r in store.complete_runs()} == {"abc123def456-r0"} and calls == []


def test_run_killed_with_sigkill_leaves_nothing_complete(store, tmp_path):
    """A process killed between writing output and committing leaves only a tmp folder,
    which the next campaign moves to partial/."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(os.getcwd())!r})
        from pathlib import Path
        from iolab.core.store import Store
        s = Store(Path({str(store.data_dir)!r}), "demo", "here")
        tmp = s.begin("0123456789ab-r0")
        (tmp / "stdout").write_text("output of a run that never finished")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script])
    assert proc.returncode == -signal.SIGKILL
    assert {r.run_id for r in store.complete_runs()} == set()
    assert len(store.stale_tmp_dirs()) == 1
    assert "interrupted run" in store.quarantine()[0]
    assert store.stale_tmp_dirs() == [] and len(list(store.partial_dir.iterdir())) == 1


def test_failed_runs_are_kept_apart(store):
    tmp = store.begin("abc123def456-r0")
    (tmp / "stderr").write_text("fio: something went wrong\n")
    dest = store.commit_failed(tmp, manifest(failure="exit 1"))
    assert dest.parent == store.failed_dir
    doc = json.loads((dest / "run.json").read_text())
    assert doc["status"] == "failed" and doc["failure"] == "exit 1"
    assert {r.run_id for r in store.complete_runs()} == set()


def test_host_is_recorded_then_checked(store):
    fp1, fp2 = fingerprint({"hostname": "a"}), fingerprint({"kernel_release": "6.8"})
    store.check_or_record_host({"hostname": "a"}, fp1, [])
    store.check_or_record_host({"hostname": "b"}, fp1, [])  # same fingerprint: fine
    with pytest.raises(IolabError) as info:
        store.check_or_record_host({"hostname": "c"}, fp2, ["kernel_release"])
    msg = str(info.value)
    assert "host.json" in msg and fp1 in msg and fp2 in msg and "kernel_release" in msg
    store.check_or_record_host({"hostname": "c"}, fp2, ["kernel_release"], allow_change=True)
    host = store.read_host()
    assert host["fingerprint"] == fp1 and host["other_hosts"][0]["fingerprint"] == fp2


def test_corrupt_host_json_is_named(store):
    store.root.mkdir(parents=True)
    store.host_path.write_text("{not json")
    with pytest.raises(IolabError, match="host.json"):
        store.read_host()


def test_a_manifest_of_an_unknown_version_is_refused_by_name(store):
    final = commit_one(store)
    doc = json.loads((final / "run.json").read_text())
    (final / "run.json").write_text(json.dumps({**doc, "schema_version": 999}))
    with pytest.raises(InputError) as info:
        store.complete_runs()
    assert info.value.path == str(final / "run.json") and info.value.key == "schema_version"
    assert "999" in str(info.value) and info.value.allowed == "1, 2"


def test_a_version_1_manifest_needs_an_experiment_to_read_it(store):
    final = commit_one(store)
    (final / "run.json").write_text(json.dumps({"schema_version": 1, "run_id": final.name,
                                                "status": "ok"}))
    with pytest.raises(InputError, match="iolab migrate"):
        store.complete_runs()


def test_a_failed_filesystem_sync_is_an_error_not_a_silent_fallback(tmp_path, monkeypatch):
    import ctypes
    import errno

    from iolab import durable

    class Libc:
        @staticmethod
        def syncfs(fd):
            ctypes.set_errno(errno.EIO)
            return -1

    monkeypatch.setattr(durable, "_LIBC", Libc())
    with pytest.raises(OSError, match="syncfs"):
        durable.sync_filesystem(tmp_path)


def test_a_run_folders_name_cannot_make_a_line_of_its_own(store):
    """A folder under runs/ is named by whoever made it: a line break and an escape sequence
    in its name are escaped where it is reported (status, verify) and where it is moved aside."""
    commit_one(store)
    name = "zz\ncpu_search:kvm-2vcpu: 999 complete, 0 corrupt FORGED\x1b[2J"
    (store.runs_dir / name).mkdir()
    _, corrupt = store.scan()
    (bad,) = corrupt
    shown = bad.describe()
    assert r"runs/zz\ncpu_search:kvm-2vcpu: 999 complete, 0 corrupt FORGED\x1b[2J: " in shown
    assert "\n" not in shown and "\x1b" not in shown
    (moved,) = store.quarantine_corrupt(corrupt)
    assert "\n" not in moved and "\x1b" not in moved and r"runs/zz\ncpu_search" in moved
    assert any(p.name.startswith(name) for p in store.partial_dir.iterdir())  # as it was named


@pytest.mark.parametrize("linked", ["experiment", "campaign", "raw"])
def test_a_campaign_or_experiment_folder_that_is_a_link_is_never_written_through(tmp_path,
                                                                               linked):
    """raw/<exp>/<env> (or raw/<exp>) as a link had received the host record, the campaign
    log and the runs of 'iolab run' and 'iolab import-cijoe'; so had raw/ itself (probe 13,
    P13-09: linked into another user's folder, who could then replace the stored runs)."""
    from iolab.safefiles import NotOurs

    store = Store(tmp_path / "data", "demo", "here")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "here").mkdir(parents=True)
    link = {"campaign": store.root, "experiment": store.root.parent,
            "raw": store.root.parent.parent}[linked]
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere / "here" if linked == "campaign" else elsewhere)
    writes = [lambda: store.check_or_record_host({"hostname": "h"}, "f" * 16, []),
              lambda: store.log({"event": "quarantined", "run": "r", "reason": "x"}),
              lambda: store.begin("abc123def456-r0"),
              lambda: store.commit_failed(tmp_path, manifest()),
              lambda: store.quarantine()]
    for write in writes:
        with pytest.raises(NotOurs, match=f"{link}: is a symbolic link to {elsewhere}.* never "
                                          "followed") as info:
            write()
        assert "\n" not in str(info.value)
    assert list(elsewhere.rglob("*")) == [elsewhere / "here"]


def test_an_unknown_manifest_field_makes_only_that_run_corrupt(store):
    """A run.json with a field iolab never writes was altered after its commit: that run is
    corrupt (named, and set aside by quarantine), the campaign's other runs are still read."""
    commit_one(store, "aaaaaaaaaaaa-r0")
    final = commit_one(store, "bbbbbbbbbbbb-r0")
    doc = json.loads((final / "run.json").read_text())
    (final / "run.json").write_text(json.dumps({**doc, "note\n\x1b[2Jx": "x"}))
    [corrupt] = store.scan()[1]
    assert corrupt.path == final
    assert corrupt.reason.startswith("run.json is not a valid manifest (key 'note")
    assert "unknown manifest field" in corrupt.reason
    shown = corrupt.describe()
    assert "\n" not in shown and "\x1b" not in shown
    assert {r.run_id for r in store.complete_runs()} == {"aaaaaaaaaaaa-r0"}
    assert len(store.quarantine_corrupt([corrupt])) == 1
    assert store.scan()[1] == [] and {r.run_id for r in store.complete_runs()} == {"aaaaaaaaaaaa-r0"}


def test_every_campaign_log_line_has_its_time_in_one_form(store, tmp_path):
    """Probe 12, Q3: 'verify --quarantine' wrote its line's 'at' as a folder-name stamp
    (20261129T132704.483559Z) where every other line has ISO 8601 (2026-11-24T08:34:26.227+00:00),
    and the two do not even sort together. Every line's 'at' is log_time's form: a line
    without one is stamped, and one in another form is a bug, refused."""
    from iolab.execution.one_run import now_iso

    commit_one(store)
    name = "zz-not-a-run"
    (store.runs_dir / name).mkdir()
    _, corrupt = store.scan()
    store.quarantine_corrupt(corrupt)
    store.log({"event": "round", "at": now_iso(), "round": 1, "seed": 2, "runs": []})
    lines = [json.loads(line) for line in (store.root / LOG).read_text().splitlines()]
    assert [line["event"] for line in lines] == ["quarantined", "round"]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["at"])
               for line in lines), lines
    for at in ("20261129T132704.483559Z", "now", 5, "2026-11-24T08:34:26+00:00"):
        with pytest.raises(ValueError, match="not ISO 8601 in UTC"):
            store.log({"event": "round", "at": at, "round": 1, "seed": 2, "runs": []})
    assert len((store.root / LOG).read_text().splitlines()) == 2


@pytest.mark.parametrize("edit", [{"kernel_release": "6.18\x1b]0;pwn\x07\nFAKE LINE"},
                                  {"cpu": {"model_name": "x", "logical_cpus": 64,
                                           "threads_per_core": 2}}],
                         ids=["kernel release", "cpu"])
def test_a_host_record_changed_after_it_was_made_is_refused(tmp_path, edit):
    """Probe 12's H1: a host.json edited with its fingerprint kept was taken by verify,
    status and tidy: the runs' host_fingerprint then vouched for a host the record no
    longer describes."""
    from iolab.schemas.verify import verify

    shutil.copytree(default_data_dir() / "raw" / "smt_thp" / "kvm-2vcpu",
                    tmp_path / "raw" / "smt_thp" / "kvm-2vcpu")
    store = Store(tmp_path, "smt_thp", "kvm-2vcpu")
    assert store.read_host()["fingerprint"] == fingerprint(store.read_host())
    assert not verify(tmp_path, "smt_thp", "kvm-2vcpu").problems
    host = {**json.loads(store.host_path.read_text()), **edit}
    store.host_path.write_text(json.dumps(host, indent=1))
    with pytest.raises(InputError) as info:
        store.read_host()
    assert info.value.key == "fingerprint" and "is not the fingerprint of the record's own " \
        f"fields ({fingerprint(host)})" in info.value.problem
    assert [p.key for p in verify(tmp_path, "smt_thp", "kvm-2vcpu").problems] == ["fingerprint"]
    from iolab.core import tidy
    from iolab.core.registry import get
    with pytest.raises(InputError, match="host.json: key 'fingerprint'"):
        tidy.load(tmp_path, get("smt_thp"), "kvm-2vcpu", use_cache=False)
