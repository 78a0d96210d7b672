"""Scratch files: written only when ours, refused when not, removed only when ours."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from iolab.cli import main
from iolab.errors import IolabError
from iolab.host import scratch
from iolab.host.scratch import Registry, ScratchFile, lay_out


@pytest.fixture
def registry(tmp_path) -> Registry:
    return Registry(tmp_path / "state" / "scratch.json")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_is_written_once_with_data_marked_and_rewritten_only_at_another_size(
        tmp_path, registry):
    f = ScratchFile("target_path", tmp_path / "sub" / "t.dat", 3 * 2**20 + 512)
    assert scratch.state(f, registry)[0] == "create"
    assert lay_out(f, registry, by="test")
    data = f.path.read_bytes()
    assert len(data) == f.size and data.count(0) < len(data) // 100  # data, not holes
    assert os.stat(f.path).st_blocks * 512 >= f.size
    assert scratch.state(f, registry)[0] == "reuse"
    stamp = f.path.stat().st_mtime_ns
    assert not lay_out(f, registry, by="test") and f.path.stat().st_mtime_ns == stamp
    smaller = ScratchFile(f.key, f.path, 2**20)
    assert scratch.state(smaller, registry)[0] == "rewrite"
    assert lay_out(smaller, registry, by="test") and f.path.stat().st_size == 2**20
    assert scratch.state(smaller, registry)[0] == "reuse", "the rewritten file is ours too"
    assert sorted(p.name for p in f.path.parent.iterdir()) == ["t.dat"]  # no temporary left
    assert list(json.loads(registry.path.read_text())["files"]) == [str(f.path)]


def test_folders_made_for_a_scratch_file_are_0755_whatever_the_umask(tmp_path, registry):
    f = ScratchFile("target_path", tmp_path / "a" / "b" / "t.dat", 2**20)
    (tmp_path / "a").mkdir(mode=0o700)  # one that exists is left as it is
    old = os.umask(0)
    try:
        lay_out(f, registry, by="test")
    finally:
        os.umask(old)
    assert [oct(p.stat().st_mode & 0o7777) for p in (tmp_path / "a", f.path.parent)] == [
        oct(0o700), oct(0o755)]
    assert oct(f.path.stat().st_mode & 0o777) == oct(0o644)


@pytest.mark.parametrize("kind", ["file", "folder", "link", "replaced"])
def test_what_is_not_ours_is_refused_and_left_as_it_was(tmp_path, registry, kind):
    f = ScratchFile("target_path", tmp_path / "results.csv", 2**20)
    if kind == "file":
        f.path.write_text("a,b\n1,2\n")
    elif kind == "folder":
        f.path.mkdir()
    elif kind == "link":
        (tmp_path / "precious").write_text("mine")
        f.path.symlink_to(tmp_path / "precious")
    else:  # ours once, then replaced by the user's own file of that name
        lay_out(f, registry, by="test")
        f.path.unlink()
        f.path.write_text("a,b\n")
    before = {p.name: (p.lstat().st_mode, p.read_bytes() if p.is_file() else b"")
              for p in tmp_path.iterdir() if p.name != "state"}
    what, why = scratch.state(f, registry)
    assert what == "refuse" and "that is not in the registry of files iolab wrote" in why
    with pytest.raises(IolabError, match="it is never written"):
        lay_out(f, registry, by="test")
    assert {p.name: (p.lstat().st_mode, p.read_bytes() if p.is_file() else b"")
            for p in tmp_path.iterdir() if p.name != "state"} == before


def _removed(f: ScratchFile) -> None:
    f.path.unlink()


def _made_again(f: ScratchFile) -> None:  # what fio does to a file that is gone
    f.path.unlink()
    f.path.write_bytes(os.urandom(f.size))


def _written_in_place(f: ScratchFile) -> None:
    with open(f.path, "r+b") as fh:
        fh.write(b"x")


def _grown(f: ScratchFile) -> None:
    with open(f.path, "ab") as fh:
        fh.write(b"x")


def _a_folder(f: ScratchFile) -> None:
    f.path.unlink()
    f.path.mkdir()


@pytest.mark.parametrize("change, said", [
    (_removed, "was removed"), (_made_again, "was re"), (_written_in_place, "was rewritten or "
     "replaced (its modification time changed)"), (_grown, "has 1,048,577 bytes where iolab "
     "laid it out with 1,048,576"), (_a_folder, "was replaced by a folder")])
def test_a_change_to_a_laid_out_file_is_said(tmp_path, registry, change, said):
    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, registry, by="test")
    entry = registry.entry(f.path)
    assert scratch.change(f, entry) is None, "read, it is still the file laid out"
    f.path.read_bytes()
    assert scratch.change(f, entry) is None
    change(f)
    if f.path.is_file() and f.path.stat().st_mtime_ns == entry["mtime_ns"]:
        # written within the file system's clock tick of the lay-out: as a later write is
        os.utime(f.path, ns=(entry["mtime_ns"], entry["mtime_ns"] + 1))
    assert scratch.change(f, entry).startswith(said)


@pytest.mark.parametrize("path,fragment", [
    ("target.dat", "is a relative path"),
    ("/var/tmp/a:b.dat", "fio's separator between file names"),
    ("/var/tmp/$HOME.dat", "fio expands $VARIABLES"),
    ("/var/tmp/a\\b.dat", "fio's escape character"),
    ("/var/tmp/a\nb.dat", "control characters"),
    ("/var/tmp/ab.dat ", "blanks at an end"),
])
def test_paths_fio_would_misread_or_that_land_in_run_folders_are_refused(path, fragment):
    assert fragment in scratch.path_problem(Path(path))


def test_a_path_inside_the_data_directory_is_refused_even_through_a_link(tmp_path):
    data = tmp_path / "data"
    (data / "raw").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(data)
    for path in (data / "raw" / "x" / "t.dat", tmp_path / "alias" / "t.dat"):
        assert "lies inside the data directory" in scratch.path_problem(path, data)
    assert scratch.path_problem(tmp_path / "t.dat", data) is None


def test_clean_removes_only_what_is_still_ours(tmp_path, registry):
    ours = ScratchFile("file_dir", tmp_path / "a" / "dev00.dat", 2**20)
    theirs = ScratchFile("file_dir", tmp_path / "a" / "dev01.dat", 2**20)
    kept = ScratchFile("file_dir", tmp_path / "b" / "dev00.dat", 2**20)
    for f in (ours, theirs, kept):
        lay_out(f, registry, by="test")
    theirs.path.unlink()
    theirs.path.write_text("the user's file now")
    assert scratch.clean(registry, dry_run=True, under=tmp_path / "a") == [
        f"would remove {ours.path} (1,048,576 bytes, made by test)"]
    assert ours.path.exists()
    assert scratch.clean(registry, under=tmp_path / "a") == [
        f"removed {ours.path} (1,048,576 bytes, made by test)"]
    assert not ours.path.exists() and theirs.path.read_text() == "the user's file now"
    assert kept.path.exists()
    assert list(json.loads(registry.path.read_text())["files"]) == [str(kept.path)]


def test_a_half_written_file_of_a_killed_campaign_is_ours_to_replace_and_clean(
        tmp_path, registry):
    """A campaign killed outright (SIGKILL) while it writes: the partial file stays, marked
    as ours, and the next campaign or 'clean' removes it."""
    import multiprocessing
    import signal
    import time

    f = ScratchFile("target_path", tmp_path / "t.dat", 64 * 2**20)

    def slow_writer():
        lay_out(f, registry, by="test", check=lambda: time.sleep(0.05))
    child = multiprocessing.get_context("fork").Process(target=slow_writer)
    child.start()
    deadline = time.monotonic() + 30
    while not [p for p, _ in registry.ours()] and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    [partial] = [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    assert not f.path.exists() and scratch.state(f, registry)[0] == "create"
    assert [p for p, _ in registry.ours()] == [partial]
    small = ScratchFile(f.key, f.path, 2**20)
    assert lay_out(small, registry, by="test")
    assert not partial.exists(), "the next campaign removes its own leftover"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["t.dat"]


def test_a_stop_while_writing_removes_the_half_written_file(tmp_path, registry):
    """A campaign asked to stop (its check raises) while it writes a large file: the writing
    ends at the next MiB and nothing half-written is left."""
    f = ScratchFile("target_path", tmp_path / "t.dat", 8 * 2**20)
    calls = []

    def stop_after_two():
        calls.append(1)
        if len(calls) > 2:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        lay_out(f, registry, by="test", check=stop_after_two)
    assert len(calls) == 3 and sorted(p.name for p in tmp_path.iterdir()) == ["state"]
    assert registry.ours() == []


def test_machines_sharing_a_home_folder_keep_their_own_registries(tmp_path):
    """Two nodes of a cluster, one NFS home: each machine's registry is its own file, so one
    never overwrites the other's entries."""
    a = Registry(tmp_path / "state" / "scratch-node-a.json")
    b = Registry(tmp_path / "state" / "scratch-node-b.json")
    fa = ScratchFile("target_path", tmp_path / "a.dat", 2**20)
    fb = ScratchFile("target_path", tmp_path / "b.dat", 2**20)
    lay_out(fa, a, by="test")
    lay_out(fb, b, by="test")
    assert [p for p, _ in a.ours()] == [fa.path] and [p for p, _ in b.ours()] == [fb.path]
    assert Registry().path.name.startswith("scratch-") and Registry().path.suffix == ".json"


def test_an_unreadable_registry_is_an_error_not_an_empty_one(tmp_path, registry):
    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, registry, by="test")
    registry.path.write_text("{oops")
    with pytest.raises(IolabError, match="registry of the scratch files iolab wrote cannot "
                                          "be read"):
        scratch.state(f, registry)
    assert f.path.exists()



def test_a_registry_nested_too_deeply_is_named_in_one_line_and_loses_nothing(
        tmp_path, capsys, monkeypatch):
    """100,000 nested brackets were a RecursionError: an internal error of 'iolab clean'."""
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, Registry(), by="smt_thp/kvm-2vcpu")
    Registry().path.write_text("[" * 100_000 + "]" * 100_000)
    before = Registry().path.read_text()
    for argv in (["clean", "--dry-run"], ["clean"]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"iolab: error: {Registry().path}: the registry of the scratch "
                              "files iolab wrote cannot be read ("), err
        assert "nested more than 100 levels deep" in err and "repair it, or remove it" in err
        assert len(err.splitlines()) == 1 and "internal error" not in err
    assert Registry().path.read_text() == before and f.path.exists()

@pytest.mark.parametrize("entry, said", [
    ("x", "entry '/tmp/x': 'x' is not a mapping of the file's inode, size and users"),
    ([1], "entry '/tmp/x': [1] is not a mapping"),
    ({"ino": 1, "users": "abc"}, "entry '/tmp/x': key 'users': 'abc' is not a list"),
    ({"ino": 1, "users": ["abc"]}, "entry '/tmp/x': key 'users': 'abc' is not a user"),
    ({"ino": 1, "users": [{"checkout": 1}]},
     "entry '/tmp/x': key 'users': {'checkout': 1} is not a user"),
    ({"ino": "1"}, "entry '/tmp/x': key 'ino': '1' is not a whole number"),
    ({"ino": 1, "size": "big"}, "entry '/tmp/x': key 'size': 'big' is not a whole number"),
    ({"ino": 1, "final": ["/a"]}, "entry '/tmp/x': key 'final': ['/a'] is not text"),
])
def test_an_entry_of_the_wrong_shape_is_named_in_one_line_and_loses_nothing(
        tmp_path, capsys, monkeypatch, entry, said):
    """Refused, not skipped: the next write would drop a skipped entry."""
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, Registry(), by="smt_thp/kvm-2vcpu")
    doc = json.loads(Registry().path.read_text())
    doc["files"]["/tmp/x"] = entry
    Registry().path.write_text(json.dumps(doc))
    before = Registry().path.read_text()
    plan = ["plan", "smt_thp", "--env", "kvm-2vcpu", "--data", str(tmp_path / "data"),
            "--set", f"target_path={f.path}"]
    for argv in (plan, ["clean", "--dry-run"], ["clean"]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"iolab: error: {Registry().path}: {said}"), err
        assert len(err.splitlines()) == 1 and "internal error" not in err
    assert Registry().path.read_text() == before and f.path.exists()


@pytest.mark.parametrize("name, final", [
    ("rel.dat", None), ("./rel.dat", None), ("{cwd}//rel.dat", None), ("{cwd}/./rel.dat", None),
    ("{cwd}/rel.dat/", None), ("{cwd}/rel\x1b]0;x\x07.dat", None),
    ("{cwd}/.rel.dat.1.partial", "rel.dat"),
])
def test_an_entry_at_a_path_iolab_never_enters_is_refused_and_nothing_removed(
        tmp_path, capsys, monkeypatch, name, final):
    """A relative key was taken relative to the folder clean ran in: the file of that name
    there, with the entry's inode, size and time, was removed. iolab enters only absolute
    paths as pathlib writes them: any other is an entry of a shape iolab never writes."""
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    victim = cwd / "rel.dat"
    victim.write_bytes(b"\0" * 4096)
    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, Registry(), by="smt_thp/kvm-2vcpu")
    st = victim.stat()
    name = name.format(cwd=cwd)
    doc = json.loads(Registry().path.read_text())
    doc["files"][name] = {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                          "by": "x", "layout": "written",
                          "users": [{"checkout": str(scratch.REPO_ROOT),
                                     "campaign": "smt_thp/kvm-2vcpu"}],
                          **({"final": final} if final else {})}
    Registry().path.write_text(json.dumps(doc))
    before = Registry().path.read_text()
    for argv in (["clean", "--dry-run"], ["clean"]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        key = "key 'final': 'rel.dat' is " if final else "the path is "
        assert err.startswith(f"iolab: error: {Registry().path}: entry "), err
        assert f": {key}not an absolute path as iolab enters one" in err, err
        assert len(err.splitlines()) == 1 and "\x1b" not in err
    assert Registry().path.read_text() == before
    assert victim.exists() and f.path.exists()


def test_run_never_overwrites_a_users_file_and_plan_names_it(tmp_path):
    """The fault that started this: --set target_path naming a user's CSV of results."""
    precious = tmp_path / "results.csv"
    precious.write_text("point,iops\n1,62000\n")
    data = tmp_path / "data"
    argv = ["smt_thp", "--env", "kvm-2vcpu", "--data", str(data), "--set",
            f"target_path={precious}", "--set", "runtime_s=1", "--limit", "1"]
    before = digest(precious)
    assert main(["run", *argv, "--no-progress"]) == 2
    assert digest(precious) == before and not data.exists()


@pytest.mark.parametrize("value", ["relative.dat", "/var/tmp/a:b.dat"])
def test_run_refuses_a_target_fio_would_misplace(tmp_path, value, capsys):
    data = tmp_path / "data"
    code = main(["run", "smt_thp", "--env", "kvm-2vcpu", "--data", str(data), "--set",
                 f"target_path={value}", "--limit", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and f"--set target_path: '{value}'" in err and "Nothing was run" in err
    assert not data.exists() and not Path(value).exists()


def test_a_target_inside_the_data_directory_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    target = data / "raw" / "t.dat"
    code = main(["plan", "smt_thp", "--env", "kvm-2vcpu", "--data", str(data), "--set",
                 f"target_path={target}"])
    out = capsys.readouterr().out
    assert code == 0 and "lies inside the data directory" in out and "to run 0" in out


def test_the_plan_lists_each_file_and_what_the_campaign_does_to_it(tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    argv = ["plan", "cpu_search", "--env", "kvm-2vcpu", "--data", str(tmp_path / "data"),
            "--set", f"file_dir={tmp_path / 'files'}", "--set", "file_size=1M",
            "--set", "repetitions=1"]
    lay_out(ScratchFile("file_dir", tmp_path / "files" / "dev00.dat", 2**20), Registry(),
            by="cpu_search/kvm-2vcpu")
    assert main(argv) == 0
    lines = [l.strip() for l in capsys.readouterr().out.splitlines() if "scratch:" in l]
    assert lines[0].startswith(f"scratch: {tmp_path / 'files' / 'dev00.dat'} (1,048,576 bytes, "
                               "file_dir): exists, made by iolab (cpu_search/kvm-2vcpu) at ")
    assert lines[0].endswith("; reused")
    assert lines[1] == (f"scratch: {tmp_path / 'files' / 'dev01.dat'} (1,048,576 bytes, "
                        "file_dir): will be created")


def test_clean_verb_lists_and_removes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, Registry(), by="smt_thp/kvm-2vcpu")
    assert main(["clean", "--dry-run"]) == 0 and f.path.exists()
    assert main(["clean"]) == 0 and not f.path.exists()
    out = capsys.readouterr().out
    assert f"would remove {f.path}" in out and f"removed {f.path}" in out
    assert main(["clean"]) == 0
    assert "no scratch files of iolab's on this host" in capsys.readouterr().out


def _another_checkout(registry, f, campaign):
    """``f`` as another checkout's campaign uses it too (its entry names that checkout)."""
    files = json.loads(registry.path.read_text())["files"]
    files[str(f.path)]["users"].append({"checkout": "/elsewhere/iolab", "campaign": campaign})
    registry.path.write_text(json.dumps({"version": scratch.VERSION, "files": files}))


def test_clean_leaves_what_another_checkout_or_experiment_uses_and_says_so(tmp_path,
                                                                             registry):
    mine = ScratchFile("target_path", tmp_path / "mine.dat", 2**20)
    shared = ScratchFile("target_path", tmp_path / "shared.dat", 2**20)
    other = ScratchFile("target_path", tmp_path / "other.dat", 2**20)
    lay_out(mine, registry, by="smt_thp/kvm-2vcpu")
    lay_out(shared, registry, by="smt_thp/kvm-2vcpu")
    lay_out(other, registry, by="cpu_search/kvm-2vcpu")
    _another_checkout(registry, shared, "smt_thp/mybox")
    # reusing a file adds its campaign to the users; the plan names the other checkout
    lay_out(other, registry, by="irq_affinity/kvm-2vcpu")
    assert "also used by the checkout(s) /elsewhere/iolab" in scratch.state(shared, registry)[1]
    lines = scratch.clean(registry, experiment="cpu_search")
    assert f"left {other.path} (1,048,576 bytes, made by cpu_search/kvm-2vcpu): also used by " \
        "irq_affinity/kvm-2vcpu" in lines and other.path.exists() and mine.path.exists()
    lines = scratch.clean(registry)
    assert f"removed {mine.path} (1,048,576 bytes, made by smt_thp/kvm-2vcpu)" in lines
    assert any(line.startswith(f"left {shared.path}") and "/elsewhere/iolab" in line
               and "--all-checkouts" in line for line in lines)
    assert shared.path.exists() and not other.path.exists()
    assert scratch.clean(registry, any_checkout=True) == [
        f"removed {shared.path} (1,048,576 bytes, made by smt_thp/kvm-2vcpu)"]


def test_a_file_an_older_iolab_made_without_its_users_is_left_unless_asked(tmp_path,
                                                                           registry):
    f = ScratchFile("target_path", tmp_path / "old.dat", 2**20)
    lay_out(f, registry, by="smt_thp/kvm-2vcpu")
    files = json.loads(registry.path.read_text())["files"]
    del files[str(f.path)]["users"]
    registry.path.write_text(json.dumps({"version": scratch.VERSION, "files": files}))
    (line,) = scratch.clean(registry)
    assert line.startswith(f"left {f.path}") and "--all-checkouts" in line and f.path.exists()
    assert scratch.clean(registry, any_checkout=True)[0].startswith(f"removed {f.path}")


def test_clean_verb_takes_an_experiment_and_refuses_an_unknown_one(tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, Registry(), by="smt_thp/kvm-2vcpu")
    assert main(["clean", "--experiment", "nope"]) == 2
    assert "--experiment" in capsys.readouterr().err and f.path.exists()
    assert main(["clean", "--experiment", "cpu_search"]) == 0 and f.path.exists()
    assert main(["clean", "--experiment", "smt_thp"]) == 0 and not f.path.exists()


# -- a registry lock held by another process ----------------------------------------------

# a process that holds a lock the way iolab's lock files do: flocked, naming its holder
HOLD = """import fcntl, json, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, json.dumps({"pid": os.getpid(), "argv": ["holder-of-the-test"],
                         "since": "2026-01-01T00:00:00+00:00"}).encode())
print("held", flush=True)
time.sleep(600)
"""

# a campaign's lay-out of a scratch file, with the campaign's own signal handlers (which
# return: the campaign acts on a signal at its next check)
CAMPAIGN = """import sys
from pathlib import Path
from iolab.execution.signals import Signals
from iolab.host.scratch import Registry, ScratchFile, lay_out
with Signals() as signals:
    lay_out(ScratchFile("target_path", Path(sys.argv[2]), 2**20), Registry(Path(sys.argv[1])),
            by="test", check=signals.check)
"""


def _holding(lock_path: Path):
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_path)],
                              stdout=subprocess.PIPE)
    assert holder.stdout.readline() == b"held\n"
    return holder


def _lines_of(stream) -> list[str]:
    """The lines ``stream`` gives, gathered by a thread as they come."""
    import threading

    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True).start()
    return lines


def _interrupted(proc, lines: list[str], wanted: str) -> int:
    """Wait (60 s at most) until ``wanted`` appears in ``lines``, SIGINT ``proc`` and return
    its exit status; ``proc`` must end within 30 s of the signal (a generous bound: the
    point is that it ends, not how fast)."""
    import signal
    import subprocess
    import time

    deadline = time.monotonic() + 60
    while not any(wanted in line for line in lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert any(wanted in line for line in lines), f"never said {wanted!r}: {lines}"
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("Ctrl-C did not end the wait for the lock")
    finally:
        proc.kill()
        proc.wait()


def test_a_registry_lock_held_elsewhere_names_its_holder_once_and_ctrl_c_ends_the_wait(
        tmp_path):
    import subprocess
    import sys

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    reg = Registry(state / f"scratch-{scratch._machine()}.json")
    holder = _holding(reg.path.with_name(f".{reg.path.name}.lock"))
    env = {**os.environ, "IOLAB_STATE_DIR": str(state), "IOLAB_LOCK_DIR": str(tmp_path)}
    try:
        waiter = subprocess.Popen([sys.executable, "-m", "iolab", "clean"], env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = _lines_of(waiter.stderr)
        code = _interrupted(waiter, lines, f"is held by pid {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    said = [line for line in lines if "is held by" in line]
    assert said == [f"iolab: {reg.path.with_name(f'.{reg.path.name}.lock')}: the registry of "
                    f"scratch files is held by pid {holder.pid} ('holder-of-the-test', since "
                    "2026-01-01T00:00:00+00:00); waiting for it (Ctrl-C to give up)\n"]
    assert code == 130 and "iolab: interrupted\n" in lines


def test_a_campaign_waiting_for_the_registry_lock_stops_on_its_signal(tmp_path):
    """The campaign's handlers return; its stop check, called while it waits, ends it."""
    import subprocess
    import sys

    reg = Registry(tmp_path / "state" / "scratch.json")
    reg.path.parent.mkdir(mode=0o700)
    holder = _holding(reg.path.with_name(".scratch.json.lock"))
    try:
        campaign = subprocess.Popen([sys.executable, "-c", CAMPAIGN, str(reg.path),
                                     str(tmp_path / "t.dat")], text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = _lines_of(campaign.stderr)
        code = _interrupted(campaign, lines, f"is held by pid {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    assert code != 0 and any("Interrupted" in line for line in lines), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"], "a partial file was left"


def test_a_registry_in_a_folder_others_can_write_into_is_refused_before_any_removal(tmp_path):
    """Another user could write a registry into a 0777 state folder naming a file of yours:
    'iolab clean' had removed it before refusing the folder."""
    from iolab.safefiles import NotOurs

    victim = tmp_path / "victim.dat"
    victim.write_text("precious\n")
    st = victim.stat()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    registry = Registry(shared / "scratch.json")
    registry.path.write_text(json.dumps({"version": 2, "files": {str(victim): {
        "ino": st.st_ino, "mtime_ns": st.st_mtime_ns, "size": st.st_size, "by": "smt_thp/x",
        "created_at": "2026-11-28T19:59:04+00:00",
        "users": [{"campaign": "smt_thp/x", "checkout": str(scratch.REPO_ROOT)}]}}}))
    for dry_run in (True, False):
        with pytest.raises(NotOurs, match="writable by every user .* without the sticky bit"):
            scratch.clean(registry, dry_run=dry_run)
    with pytest.raises(NotOurs):
        registry.entry(victim)  # what plan says is iolab's
    assert victim.read_text() == "precious\n"
    shared.chmod(0o1777)  # with the sticky bit, as /tmp: trusted
    assert scratch.clean(registry, dry_run=True) == [
        f"would remove {victim} ({st.st_size:,} bytes, made by smt_thp/x)"]


def test_a_file_larger_than_the_free_space_is_refused_before_a_byte(tmp_path, registry):
    """No free-space check: a size the plan accepted would be written until the file system
    was full."""
    f = ScratchFile("target_path", tmp_path / "sub" / "t.dat", 2**62)
    with pytest.raises(IolabError, match=rf"^key 'target_path': {f.path} would take "
                                         r"4,611,686,018,427,387,904 bytes, but its file system "
                                         r"has [0-9,]+ free; nothing was written"):
        lay_out(f, registry, by="test")
    assert list((tmp_path / "sub").iterdir()) == [] and registry.ours() == []


ROOT = os.geteuid() == 0


@pytest.mark.skipif(not ROOT, reason="another user's link and folder need root to make")
@pytest.mark.parametrize("planted", ["link", "folder"])
def test_a_path_through_another_users_folder_or_link_is_refused_and_nothing_written(
        tmp_path, registry, planted):
    """Probe 6, A1: a folder of the path that is a link uid 65534 made: plan said 'will be
    created' and the run wrote the scratch file into the folder it points to. A folder that
    user owns is refused alike: they could put such a link into it at any time."""
    victim = tmp_path / "victim"
    victim.mkdir()
    planted_at = tmp_path / "ld"
    if planted == "link":
        planted_at.symlink_to(victim)
    else:
        planted_at.mkdir()
    os.chown(planted_at, 65534, 65534, follow_symlinks=False)
    f = ScratchFile("target_path", planted_at / "sub" / "t.dat", 2**20)
    what, detail = scratch.state(f, registry)
    made = "is a symbolic link made by uid 65534" if planted == "link" else "belongs to uid 65534"
    assert what == "refuse" and detail.startswith(f"{planted_at}, a folder of its path, {made}")
    with pytest.raises(IolabError, match="a folder of its path"):
        lay_out(f, registry, by="test")
    assert list(victim.iterdir()) == [] and not (planted_at / "sub").exists()


@pytest.mark.parametrize("mode, refused", [(0o777, True), (0o1777, False), (0o755, False)])
def test_a_path_through_a_folder_every_user_may_write_is_refused_unless_sticky(
        tmp_path, registry, mode, refused):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    f = ScratchFile("target_path", shared / "iolab" / "t.dat", 2**20)
    what, detail = scratch.state(f, registry)
    if refused:
        assert what == "refuse" and detail == (
            f"{shared}, a folder of its path, is writable by every user (mode 0777) without the "
            "sticky bit: others could put a link in place of what lies in it")
    else:
        assert (what, detail) == ("create", "will be created")


@pytest.mark.skipif(not ROOT, reason="a file of another user's needs root to make")
def test_another_users_registry_is_refused_before_any_removal(tmp_path, registry):
    """Probe 6, A5: a registry uid 65534 owns was trusted: 'clean' would remove what it lists."""
    from iolab.safefiles import NotOurs

    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, registry, by="smt_thp/x")
    os.chown(registry.path, 65534, 65534)
    for dry_run in (True, False):
        with pytest.raises(NotOurs, match=f"{registry.path}: belongs to uid 65534, not to this "
                                          "user"):
            scratch.clean(registry, dry_run=dry_run)
    assert f.path.exists()


def test_a_registry_larger_than_any_iolab_writes_is_named_in_one_line_unread(
        tmp_path, capsys, monkeypatch):
    """Probe 6, B4: a 3 GB sparse registry was read whole: MemoryError, an internal error."""
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, Registry(), by="smt_thp/kvm-2vcpu")
    os.truncate(Registry().path, 3 << 30)  # sparse: no disk, and no memory unless read
    for argv in (["clean", "--dry-run"], ["clean"]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err == (f"iolab: error: {Registry().path}: holds {3 << 30:,} bytes (or more), "
                       "more than iolab ever writes in its registry of scratch files; it is not "
                       f"read (allowed: at most {scratch.REGISTRY_MOST:,} bytes; move the file "
                       "away if it is not iolab's)\n")
    assert f.path.exists() and Registry().path.stat().st_size == 3 << 30


# -- a fallocated layout: space allocated, nothing written -------------------------------------

FS_IOC_FIEMAP, FIEMAP_FLAG_SYNC, FIEMAP_EXTENT_UNWRITTEN = 0xC020660B, 0x1, 0x800


def extent_flags(path: Path, most: int = 64) -> list[int]:
    """The flags of each extent of ``path`` (FIEMAP); OSError where the file system has none."""
    import fcntl
    import struct

    head = struct.pack("=QQIIII", 0, 2**64 - 1, FIEMAP_FLAG_SYNC, 0, most, 0)
    buf = bytearray(head + bytes(56 * most))
    with open(path, "rb") as fh:
        fcntl.ioctl(fh.fileno(), FS_IOC_FIEMAP, buf)
    mapped = struct.unpack_from("=I", buf, 20)[0]
    return [struct.unpack_from("=I", buf, 32 + 56 * i + 40)[0] for i in range(mapped)]


def fallocated(tmp_path, registry, size: int = 4 * 2**20) -> ScratchFile:
    f = ScratchFile("target_path", tmp_path / "t.fallocated.dat", size, "fallocated")
    try:
        assert lay_out(f, registry, by="smt_thp/test")
    except IolabError as exc:
        if "cannot be laid out with fallocate(2)" not in str(exc):
            raise
        pytest.skip(f"the file system of {tmp_path} has no fallocate(2): {exc}")
    return f


def test_a_fallocated_file_is_allocated_never_written_and_marked_with_its_layout(
        tmp_path, registry):
    f = fallocated(tmp_path, registry)
    st = os.stat(f.path)
    assert st.st_size == f.size and st.st_blocks * 512 >= f.size  # allocated, not holes
    assert f.path.read_bytes() == bytes(f.size)  # reads are answered with zeros
    entry = registry.entry(f.path)
    assert entry["layout"] == "fallocated" and entry["size"] == f.size
    assert scratch.state(f, registry)[0] == "reuse"
    assert not lay_out(f, registry, by="smt_thp/test")
    written = ScratchFile(f.key, tmp_path / "t.dat", f.size)
    assert lay_out(written, registry, by="smt_thp/test")
    assert registry.entry(written.path)["layout"] == "written"
    try:
        flags = {p.name: extent_flags(p) for p in (f.path, written.path)}
    except OSError as exc:
        pytest.skip(f"the file system of {tmp_path} has no FIEMAP ({exc.strerror}): the "
                    "extents' state cannot be read")
    assert flags[f.path.name] and all(x & FIEMAP_EXTENT_UNWRITTEN for x in flags[f.path.name])
    assert not any(x & FIEMAP_EXTENT_UNWRITTEN for x in flags[written.path.name])


def test_a_file_of_ours_laid_out_otherwise_is_laid_out_anew(tmp_path, registry):
    f = fallocated(tmp_path, registry)
    as_written = ScratchFile(f.key, f.path, f.size)
    what, detail = scratch.state(as_written, registry)
    assert what == "rewrite" and "laid out fallocated; laid out anew, written" in detail
    assert lay_out(as_written, registry, by="smt_thp/test")
    assert f.path.read_bytes().count(0) < f.size // 100
    assert scratch.state(f, registry)[0] == "rewrite"
    line = scratch.describe([f], registry)[0]
    assert "fallocated: allocated, never written" in line and "laid out anew" in line


def test_a_file_system_without_fallocate_is_refused_and_leaves_nothing(
        tmp_path, registry, monkeypatch):
    def refuse(fd, size):
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(scratch, "_fallocate", refuse)
    f = ScratchFile("target_path", tmp_path / "t.fallocated.dat", 2**20, "fallocated")
    with pytest.raises(IolabError, match=r"key 'target_path': .* cannot be laid out with "
                                         r"fallocate\(2\) \(Operation not supported\)"):
        lay_out(f, registry, by="smt_thp/test")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
    assert registry.ours() == []


def test_an_entry_with_an_unknown_layout_is_named_and_loses_nothing(tmp_path, registry):
    f = fallocated(tmp_path, registry)
    doc = json.loads(registry.path.read_text())
    doc["files"][str(f.path)]["layout"] = "sparse"
    registry.path.write_text(json.dumps(doc))
    with pytest.raises(IolabError, match="key 'layout': 'sparse' is not one of written, "
                                         "fallocated"):
        registry.ours()
    assert json.loads(registry.path.read_text()) == doc


def test_a_campaign_says_how_it_laid_each_file_out(tmp_path):
    from types import SimpleNamespace

    from iolab.execution.runner import _lay_out

    files = [ScratchFile("target_path", tmp_path / "t.dat", 2**20),
             ScratchFile("target_path", tmp_path / "t.fallocated.dat", 2**20, "fallocated")]
    spec = SimpleNamespace(experiment="smt_thp", environment="test", params_file=tmp_path)
    signals = SimpleNamespace(check=lambda: None)
    try:
        lines = _lay_out(files, spec, signals)
    except IolabError as exc:
        pytest.skip(f"the file system of {tmp_path} has no fallocate(2): {exc}")
    assert lines == [f"scratch: {files[0].path} (1,048,576 bytes): written with data",
                     f"scratch: {files[1].path} (1,048,576 bytes): laid out with fallocate(2), "
                     "never written"]
    assert _lay_out(files, spec, signals)[1].endswith("): reused")


def test_clean_under_an_empty_folder_is_refused_not_read_as_every_file(tmp_path, capsys,
                                                                       monkeypatch):
    """Probe 12's CL1: ``--under "$DIR"`` with DIR unset gave ``--under ''``, which clean
    took for no --under at all: every registered file of this checkout's was listed (and,
    without --dry-run, removed)."""
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    f = ScratchFile("target_path", tmp_path / "t.dat", 2**20)
    lay_out(f, Registry(), by="smt_thp/kvm-2vcpu")
    for argv in (["clean", "--dry-run", "--under", ""], ["clean", "--under", " "]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "argument --under: empty: give a folder" in err and str(f.path) not in err
        assert f.path.exists()
