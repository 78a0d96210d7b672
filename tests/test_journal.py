"""KnobSession and restore_from_journal on a fake sysfs tree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from iolab.errors import InputError, IolabError
from iolab.host import journal as journal_mod
from iolab.host.journal import KnobSession, restore_from_journal, states
from iolab.host.knobs import ThpKnob
from iolab.host.knobset import make_knobs
from iolab.procs import start_ticks


@pytest.fixture
def host(fake_sysroot, tmp_path):
    """(knobs, journal path) on a fresh fake tree."""
    return make_knobs(fake_sysroot()), tmp_path / "state" / "knob-journal.json"


@pytest.fixture(autouse=True)
def keep_sigterm_handler():
    """A session abandoned on purpose (simulated crash) leaves its SIGTERM handler installed."""
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)


def test_session_restores_on_normal_exit(host):
    knobs, journal = host
    with KnobSession(knobs, journal) as session:
        result = session.set("thp", "never")
        assert result == {"requested": "never", "before": "madvise", "after": "never",
                          "matches": True}
        session.set("smt", "off")
        record = json.loads(journal.read_text())
        assert record["schema_version"] == 1 and record["pid"] == os.getpid()
        assert record["started_at"]
        assert record["changes"] == [
            {"knob": "thp", "before": "madvise"},
            {"knob": "smt", "before": {"control": "on", "active": True}},
        ]
    assert knobs["thp"].read() == "madvise"
    assert knobs["smt"].read()["control"] == "on"
    assert not journal.exists()
    assert session.restore_report == ["smt: restored to {\"active\": true, \"control\": \"on\"}",
                                      "thp: restored to \"madvise\""]


@pytest.mark.parametrize("error", [RuntimeError("driver crashed"), KeyboardInterrupt()])
def test_session_restores_when_interrupted(host, error):
    knobs, journal = host
    with pytest.raises(type(error)):
        with KnobSession(knobs, journal) as session:
            session.set("governor", {"governor": "userspace", "khz": 3_000_000, "cpus": "0-1"})
            session.set("irq_affinity", {"irqs": "nvme", "cpus": "3"})
            raise error
    assert all(e == {"governor": "powersave"} for e in knobs["governor"].read().values())
    assert set(knobs["irq_affinity"].read().values()) == {"0-1"}
    assert not journal.exists()


def test_session_restores_on_sigterm(host):
    knobs, journal = host
    with pytest.raises(SystemExit) as info:
        with KnobSession(knobs, journal) as session:
            session.set("turbo", "off")
            os.kill(os.getpid(), signal.SIGTERM)
            # The handler runs between bytecodes; this loop gives it the chance.
            for _ in range(1000):
                pass
    assert info.value.code == 128 + signal.SIGTERM
    assert knobs["turbo"].read() == "on"
    assert not journal.exists()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_session_leaves_a_callers_sigterm_handler_alone(host):
    knobs, journal = host

    def callers_handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, callers_handler)
    with KnobSession(knobs, journal):
        assert signal.getsignal(signal.SIGTERM) is callers_handler
    assert signal.getsignal(signal.SIGTERM) is callers_handler


def test_set_twice_journals_the_original_once(host):
    knobs, journal = host
    with KnobSession(knobs, journal) as session:
        session.set("thp", "never")
        second = session.set("thp", "always")
        assert second["before"] == "never"
        assert json.loads(journal.read_text())["changes"] == [{"knob": "thp", "before": "madvise"}]
    assert knobs["thp"].read() == "madvise"


def test_bad_requests_are_refused_before_journaling(fake_sysroot, tmp_path):
    knobs = make_knobs(fake_sysroot(smt="notsupported"))
    journal = tmp_path / "journal.json"
    with KnobSession(knobs, journal) as session:
        with pytest.raises(InputError) as info:
            session.set("thp", "sometimes")
        assert info.value.key == "thp"
        with pytest.raises(InputError, match="unknown knob") as info:
            session.set("hugepage_size", "1G")
        assert "thp" in info.value.allowed
        with pytest.raises(IolabError, match="notsupported"):
            session.set("smt", "off")
        assert json.loads(journal.read_text())["changes"] == []
    assert not journal.exists()


def test_set_outside_the_with_block(host):
    knobs, journal = host
    with pytest.raises(IolabError, match="outside"):
        KnobSession(knobs, journal).set("thp", "never")


class StickyThp(ThpKnob):
    """A THP file that takes the write but keeps its old value, as a kernel may."""

    def apply(self, value):
        old = self.path.read_text()
        super().apply(value)
        self.path.write_text(old)


def test_ignored_write_is_detected(fake_sysroot, tmp_path):
    knobs = {"thp": StickyThp(fake_sysroot())}
    with KnobSession(knobs, tmp_path / "journal.json") as session:
        result = session.set("thp", "never")
    assert result["matches"] is False
    assert result["after"] == "madvise"


class BrokenRestoreThp(ThpKnob):
    def restore(self, state):
        raise IolabError("cannot write 'madvise' to .../enabled: Device or resource busy")


def test_failed_restore_keeps_the_journal(fake_sysroot, tmp_path):
    root = fake_sysroot()
    journal = tmp_path / "journal.json"
    with pytest.raises(IolabError, match="could not restore knob") as info:
        with KnobSession({"thp": BrokenRestoreThp(root)}, journal) as session:
            session.set("thp", "never")
    assert "thp: cannot write" in str(info.value) and "iolab restore" in str(info.value)
    assert journal.exists()

    lines = restore_from_journal(journal, make_knobs(root))
    assert "thp: restored to \"madvise\"" in lines
    assert ThpKnob(root).read() == "madvise"
    assert not journal.exists()


def test_failed_restore_while_an_exception_is_leaving_adds_a_note(fake_sysroot, tmp_path):
    journal = tmp_path / "journal.json"
    with pytest.raises(RuntimeError) as info:
        with KnobSession({"thp": BrokenRestoreThp(fake_sysroot())}, journal) as session:
            session.set("thp", "never")
            raise RuntimeError("fio crashed")
    assert any("could not restore knob" in note for note in info.value.__notes__)
    assert journal.exists()


@pytest.mark.parametrize("how, why, now", [
    ("read-only", "{path} is not writable", 'it reads "never" now'),
    ("a folder", "cannot read {path}: Is a directory",
     "it cannot be read now (cannot read {path}: Is a directory)"),
])
def test_a_knob_made_unwritable_is_named_with_its_state_and_how_to_put_it_back(
        fake_sysroot, refuse_writes, tmp_path, how, why, now):
    knobs = make_knobs(fake_sysroot())
    path = knobs["thp"].path
    journal = tmp_path / "state" / "knob-journal.json"
    with pytest.raises(IolabError) as info:
        with KnobSession(knobs, journal, restore="iolab restore --data /d") as session:
            session.set("thp", "never")
            undo = refuse_writes(path, how)
    message = str(info.value)
    assert message.startswith("could not restore knob(s): thp: ")
    assert why.format(path=path) in message
    assert f'; {now.format(path=path)} and should be "madvise"; ' in message
    assert f"by hand: `echo madvise > {path}`" in message
    assert message.endswith(f"The journal {journal} is kept; once the cause is fixed, "
                            "`iolab restore --data /d` puts every knob back.")
    assert len(session.unrestored) == 1 and session.unrestored[0] in message
    assert journal.exists()
    undo()
    assert restore_from_journal(journal, knobs)[1] == 'thp: restored to "madvise"'
    assert not journal.exists()


def test_a_knob_that_does_not_take_its_state_back_is_named_too(fake_sysroot, tmp_path):
    knobs = {"thp": StickyThp(fake_sysroot())}
    journal = tmp_path / "journal.json"
    crashed = KnobSession(knobs, journal)
    crashed.__enter__()
    crashed._journal["changes"] = [{"knob": "thp", "before": "never"}]
    with pytest.raises(IolabError) as info:
        crashed.__exit__(None, None, None)
    path = knobs["thp"].path
    assert (f'thp: still reads "madvise" after writing back "never"; it reads "madvise" now '
            f'and should be "never"; by hand: `echo never > {path}`') in str(info.value)
    assert f"`iolab restore --journal {journal}` puts every knob back" in str(info.value)


def test_crash_leaves_a_journal_that_restore_undoes(host):
    knobs, journal = host
    crashed = KnobSession(knobs, journal)
    crashed.__enter__()
    crashed.set("thp", "never")
    crashed.set("smt", "off")
    # No __exit__: the process "died" here.
    assert knobs["thp"].read() == "never"

    with pytest.raises(IolabError, match="iolab restore"):
        with KnobSession(knobs, journal):
            pass

    lines = restore_from_journal(journal, knobs)
    assert lines[0].startswith(f"journal {journal}: written by pid {os.getpid()}")
    assert lines[1:] == ["smt: restored to {\"active\": true, \"control\": \"on\"}",
                         "thp: restored to \"madvise\"",
                         f"removed {journal}"]
    assert knobs["thp"].read() == "madvise" and knobs["smt"].read()["control"] == "on"
    assert not journal.exists()
    assert restore_from_journal(journal, knobs) == [f"nothing to restore: no journal at {journal}"]


def test_restore_is_idempotent_for_knobs_already_back(host):
    knobs, journal = host
    crashed = KnobSession(knobs, journal)
    crashed.__enter__()
    crashed.set("thp", "never")
    knobs["thp"].restore("madvise")
    assert restore_from_journal(journal, knobs)[1] == "thp: already at \"madvise\""


def test_restore_refuses_under_a_running_session(host):
    knobs, journal = host
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        journal.parent.mkdir(parents=True)
        journal.write_text(json.dumps({
            "schema_version": 1, "pid": sleeper.pid, "started_at": "2025-01-01T00:00:00+00:00",
            "boot_id": open("/proc/sys/kernel/random/boot_id").read().strip(),
            "pid_start": start_ticks(sleeper.pid),
            "changes": [{"knob": "thp", "before": "always"}]}))
        with pytest.raises(IolabError, match="still running"):
            restore_from_journal(journal, knobs)
        assert journal.exists() and knobs["thp"].read() == "madvise"
    finally:
        sleeper.kill()
        sleeper.wait()
    restore_from_journal(journal, knobs)
    assert knobs["thp"].read() == "always"


@pytest.mark.parametrize("text, key", [
    ("{not json", None),
    ('{"schema_version": 99, "changes": []}', "schema_version"),
    ('{"schema_version": 1, "changes": [{"before": 1}]}', "changes"),
])
def test_malformed_journal(host, text, key):
    knobs, journal = host
    journal.parent.mkdir(parents=True)
    journal.write_text(text)
    with pytest.raises(InputError) as info:
        restore_from_journal(journal, knobs)
    assert info.value.key == key and info.value.path == str(journal)


def _planted(journal, before="always"):
    """A journal that names a real knob, as another user (or a file left in a shared folder)
    could write it."""
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_text(json.dumps({"schema_version": 1, "pid": 1, "started_at": "x",
                                   "changes": [{"knob": "thp", "before": before}]}))


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user's needs root to make")
def test_another_users_journal_is_refused_before_any_knob_is_written(host):
    """Probe 6, A2: root's restore took the journal of uid 65534 for its own, and would have
    written each knob it names."""
    knobs, journal = host
    _planted(journal)
    os.chown(journal, 65534, 65534)
    with pytest.raises(InputError, match=f"{journal}: belongs to uid 65534, not to this user"):
        restore_from_journal(journal, knobs)
    assert knobs["thp"].read() == "madvise" and journal.exists()


def test_a_journal_in_a_folder_others_may_write_is_refused(host):
    knobs, journal = host
    _planted(journal)
    journal.parent.chmod(0o777)
    with pytest.raises(InputError, match=f"{journal}: its folder {journal.parent} is writable "
                                         "by every user \\(mode 0777\\) without the sticky bit"):
        restore_from_journal(journal, knobs)
    assert knobs["thp"].read() == "madvise" and journal.exists()
    journal.parent.chmod(0o1777)  # /tmp's mode: nobody else can replace this user's file
    restore_from_journal(journal, knobs)
    assert knobs["thp"].read() == "always"


def test_a_session_does_not_begin_in_a_folder_others_may_write(host):
    """Its journal could be replaced there, and restore would then refuse it."""
    knobs, journal = host
    journal.parent.mkdir(mode=0o777)
    journal.parent.chmod(0o777)
    with pytest.raises(InputError, match="writable by every user"):
        with KnobSession(knobs, journal) as session:
            session.set("thp", "never")
    assert knobs["thp"].read() == "madvise" and not journal.exists()


def test_a_journal_nested_too_deeply_is_one_line(host):
    """Probe 6, C1: a RecursionError ended restore as an internal error."""
    knobs, journal = host
    journal.parent.mkdir(parents=True)
    journal.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="not a readable knob journal: line 1: arrays or "
                                         "objects nested more than 100 levels") as info:
        restore_from_journal(journal, knobs)
    assert "\n" not in str(info.value)
    assert "not a readable knob journal" in journal_mod._leftover_message(journal)


def test_a_journal_larger_than_any_iolab_writes_is_refused_unread(host):
    """Probe 6, B5: a 3 GB sparse file was read whole (MemoryError, an internal error)."""
    knobs, journal = host
    journal.parent.mkdir(parents=True)
    with open(journal, "wb") as fh:
        fh.truncate(journal_mod.JOURNAL_MOST + 1)  # sparse: no disk, no memory
    with pytest.raises(InputError, match=f"{journal}: holds {journal_mod.JOURNAL_MOST + 1:,} "
                                         "bytes \\(or more\\), more than iolab ever writes in a "
                                         "knob journal; it is not read"):
        restore_from_journal(journal, knobs)


def test_unknown_knob_in_journal_keeps_it(host):
    knobs, journal = host
    journal.parent.mkdir(parents=True)
    journal.write_text(json.dumps({"schema_version": 1, "pid": 1, "changes": [
        {"knob": "no_such_knob", "before": 0}]}))
    with pytest.raises(IolabError, match="no_such_knob: no such knob"):
        restore_from_journal(journal, knobs)
    assert journal.exists()


def test_a_journals_fields_print_no_line_of_their_own(host):
    """The journal is a file: a line break in its pid, time or a knob's name would print a
    line ('restored all') among restore's own."""
    knobs, journal = host
    journal.parent.mkdir(parents=True)
    journal.write_text(json.dumps({"schema_version": 1, "pid": "1\nFAKE: restored all",
                                   "started_at": "t\nFAKE", "changes": [
                                       {"knob": "x\nFAKE: restored thp", "before": 0}]}))
    with pytest.raises(IolabError) as info:
        restore_from_journal(journal, knobs)
    assert not any(line.startswith("FAKE") for line in str(info.value).splitlines())
    assert r"x\nFAKE: restored thp: no such knob" in str(info.value)


def test_states_reads_every_knob(fake_sysroot):
    recorded = states(make_knobs(fake_sysroot(cpufreq=False, turbo=None, smt="notsupported")))
    assert recorded["thp"] == "madvise"
    assert recorded["smt"] == {"control": "notsupported", "active": False}
    assert recorded["governor"] is None and recorded["turbo"] is None
    json.dumps(recorded)
