"""Process ownership: what a campaign starts carries its owner, and is found when the owner
is gone, even after the process left its process group (setsid)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from iolab import procs


def test_a_setsid_grandchild_of_a_killed_owner_is_found_and_ended(tmp_path):
    data = tmp_path / "data"
    script = textwrap.dedent(f"""
        import os, signal, subprocess, sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from pathlib import Path
        from iolab import procs
        with procs.Owned(Path({str(data)!r})):
            # like fio's workers: a new session, out of reach of the group's kill
            quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.Popen(["setsid", "sleep", "300"], **quiet)
            subprocess.Popen(["sleep", "300"], start_new_session=True, **quiet)
            time.sleep(0.5)
            print(os.getpid(), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL
    owner_pid = int(proc.stdout.split()[0])
    left = procs.leftovers(data)
    assert len(left) == 2 and {p.command for p in left} == {"sleep"}
    assert all(p.owner.split("/")[1] == str(owner_pid) and p.data_dir == str(data) for p in left)
    assert procs.leftovers(tmp_path / "elsewhere") == []  # another data directory's are not ours
    lines = procs.end_leftovers(data)
    assert [line.split(" of ")[0] for line in lines] == [
        f"ended leftover process pid {p.pid} (sleep)" for p in left]
    assert procs.leftovers(data) == [] and procs.end_leftovers(data) == []


def test_a_live_owner_s_processes_are_not_leftovers(tmp_path):
    with procs.Owned(tmp_path) as owner:
        child = subprocess.Popen(["sleep", "30"])
    try:
        assert [p.pid for p in owner.children()] == [child.pid]
        assert procs.leftovers(tmp_path) == []
    finally:
        procs.end(owner.children())
        child.wait()
    assert os.environ.get(procs.OWNER_VAR) is None


def test_an_owner_name_survives_pid_reuse():
    me = procs.owner_name()
    assert procs.owner_alive(me)
    boot, pid, start = me.split("/")
    assert not procs.owner_alive(f"{boot}/{pid}/{int(start) + 1}")  # same pid, other process
    assert not procs.owner_alive(f"another-boot/{pid}/{start}")
    assert not procs.owner_alive("garbage")


def test_end_kills_and_waits_until_the_processes_are_gone():
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    assert procs.end([procs.Proc(child.pid, "sleep", "x", "", "")]) == []
    assert child.wait(timeout=5) == -signal.SIGKILL


def test_a_stop_signal_kills_the_driver_and_is_raised_only_where_the_campaign_checks():
    """A campaign's stop-now handler must not raise at an arbitrary point (inside
    subprocess's wait it would leave its lock held and the next wait would hang for ever);
    it kills the driver's group and the campaign raises at its next check."""
    import pytest

    from iolab.execution.signals import Interrupted, Signals

    signals = Signals()
    driver = subprocess.Popen(["sleep", "30"], start_new_session=True)
    signals.driver_started(driver.pid)
    signals.check()  # nothing asked yet
    signals._stop_now(signal.SIGHUP, None)  # returns: no exception from the handler
    assert driver.wait(timeout=10) == -signal.SIGKILL
    with pytest.raises(Interrupted) as info:
        signals.check()
    assert (info.value.name, info.value.signum) == ("SIGHUP", signal.SIGHUP)


def test_a_stop_asked_just_before_the_driver_started_ends_it_at_once():
    from iolab.execution.signals import Signals

    signals = Signals()
    signals._stop_now(signal.SIGTERM, None)  # no driver yet
    driver = subprocess.Popen(["sleep", "30"], start_new_session=True)
    signals.driver_started(driver.pid)
    assert driver.wait(timeout=10) == -signal.SIGKILL


def _marked_child(data, owner: str) -> subprocess.Popen:
    """A process carrying a campaign's markers for ``data``, as anyone can set them."""
    env = {**os.environ, procs.OWNER_VAR: owner, procs.DATA_VAR: str(data)}
    return subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)


def test_another_users_process_carrying_the_markers_is_never_listed_or_killed(
        tmp_path, monkeypatch):
    """Probe 9, F5: root took another user's process whose environment named its data folder
    for a leftover of its own campaign, listed it in 'status' and SIGKILLed it."""
    child = _marked_child(tmp_path, f"{procs.boot_id()}/1/2")  # an owner that is gone
    try:
        assert [p.pid for p in procs.leftovers(tmp_path)] == [child.pid]  # this user's: ours
        other = os.geteuid() + 1  # the child's uids are this user's: seen as another's
        monkeypatch.setattr(procs.os, "geteuid", lambda: other)
        assert not procs.is_mine(child.pid)
        assert procs.leftovers(tmp_path) == [] and procs.end_leftovers(tmp_path) == []
        assert procs.end([procs.Proc(child.pid, "sleep", "x", "", "")]) == []
        assert child.poll() is None, "another user's process was signalled"
        monkeypatch.undo()
    finally:
        procs.end([procs.Proc(child.pid, "sleep", "x", "", "")])
        child.wait()


def test_a_process_whose_owner_iolab_never_wrote_is_not_a_leftover(tmp_path):
    child = _marked_child(tmp_path, "not-an-owner")
    try:
        assert [p.pid for p in procs.find(data_dir=tmp_path)] == [child.pid]
        assert procs.leftovers(tmp_path) == [] and procs.end_leftovers(tmp_path) == []
        assert child.poll() is None
    finally:
        procs.end([procs.Proc(child.pid, "sleep", "x", "", "")])
        child.wait()
