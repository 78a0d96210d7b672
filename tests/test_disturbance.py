"""What marks a run as disturbed (the real stops, holds and knob changes are in
test_faults.py); here each rule on its own, with the clocks under the test's control."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from iolab.core import disturbance
from iolab.core.disturbance import Watch


class Clocks:
    """BOOTTIME and the sleep clock (BOOTTIME - MONOTONIC) as the test sets them."""

    def __init__(self, monkeypatch):
        self.boot = 1000.0
        self.slept = 0.0
        monkeypatch.setattr(disturbance, "_boottime", lambda: self.boot)
        monkeypatch.setattr(disturbance, "_sleep_clock", lambda: self.slept)


def test_a_run_within_its_time_with_regular_looks_is_not_disturbed(monkeypatch):
    clocks = Clocks(monkeypatch)
    watch = Watch(expected_s=10)
    for _ in range(12):
        clocks.boot += disturbance.WATCH_S + 0.3  # a loaded machine wakes late, a little
        watch.look(os.getpid())
    assert watch.finish() == []


def test_a_gap_between_looks_means_the_campaign_was_held(monkeypatch):
    clocks = Clocks(monkeypatch)
    watch = Watch(expected_s=60)
    clocks.boot += disturbance.WATCH_S + disturbance.GAP_S + 20
    watch.look(os.getpid())
    assert watch.finish() == ["the campaign did not run for 25 s during the run (it was "
                              "stopped, or the machine was)"]


def test_a_machine_that_slept_is_named(monkeypatch):
    clocks = Clocks(monkeypatch)
    watch = Watch(expected_s=60)
    clocks.boot += 30
    clocks.slept += 29
    reasons = watch.finish()
    assert reasons == ["the machine was suspended for 29 s during the run"]


def test_the_wall_time_bound_is_the_expected_time_plus_its_margins(monkeypatch):
    assert disturbance.allowed_seconds(100) == pytest.approx(100 * 1.1 + 10)
    clocks = Clocks(monkeypatch)
    watch = Watch(expected_s=4)
    clocks.boot += disturbance.allowed_seconds(4) - 0.1
    assert watch.finish() == []
    watch = Watch(expected_s=4)
    clocks.boot += disturbance.allowed_seconds(4) + 0.1
    assert watch.finish() == ["the run took 14.5 s, more than the 14.4 s allowed for a run "
                              "expected to take 4.0 s"]


def test_a_stopped_process_anywhere_in_the_drivers_tree_is_seen():
    driver = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        # until the child has exec'd sleep: a child forked but not yet exec'd is still "sh"
        # (on a loaded machine that moment lasts long enough to be seen)
        while time.monotonic() < deadline:
            found = disturbance.tree(driver.pid)
            if len(found) >= 2 and (disturbance.state_of(found[1]) or ("", ""))[1] == "sleep":
                break
            time.sleep(0.02)
        parent, child = disturbance.tree(driver.pid)[:2]
        assert parent == driver.pid
        watch = Watch(expected_s=30)
        watch.look(driver.pid)
        assert watch.reasons == []
        os.kill(child, signal.SIGSTOP)
        while disturbance.state_of(child)[0] != "T" and time.monotonic() < deadline:
            time.sleep(0.02)
        watch.look(driver.pid)
        assert watch.reasons == [f"process {child} (sleep) was stopped during the run"]
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()


class FakeKnob:
    def __init__(self, state):
        self.state = state

    def read(self):
        if isinstance(self.state, Exception):
            raise self.state
        return self.state

    def same_state(self, expected, actual):
        return expected == actual


def test_a_knob_that_reads_otherwise_at_the_end_is_named():
    knobs = {"thp": FakeKnob("always"), "smt": FakeKnob("on"), "turbo": FakeKnob(OSError("gone"))}
    record = {"thp": {"requested": "never", "after": "never"},
              "smt": {"requested": "asis", "after": "on"},
              "turbo": {"requested": "on", "after": "on"},
              "governor": {"requested": "asis", "after": None}}  # nothing was read: no check
    assert disturbance.changed_knobs(knobs, record) == [
        "knob thp changed during the run: it read 'never' when set and 'always' at the end",
        "knob turbo could not be read at the run's end (gone)"]
    assert disturbance.reason(["x", "y"]) == "disturbed: x; y (kept as failed, never a sample)"
