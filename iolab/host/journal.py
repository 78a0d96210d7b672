"""Journaled knob changes: each original state reaches the disk before the knob is touched.

Responsible for: ``KnobSession`` (set knobs, read back, restore them all on the way out, even
on an exception or a signal, and name each knob it could not restore with its state and the
command that restores it), the on-disk journal that survives a crash,
``restore_from_journal`` behind the ``iolab restore`` verb, and ``states`` for manifests.
Not responsible for: how a knob is read or written or what its values mean (``iolab.host.knobs``),
which knobs a point needs (``iolab.core.planner``), keeping two processes off one knob (the
caller's ``claim``, ``iolab.core.locks``), or printing anything (the CLI does that).

Journal format (JSON, ``schema_version`` 1)::

    {"schema_version": 1, "pid": 4242, "started_at": "2025-01-31T12:00:00+00:00",
     "boot_id": "...", "pid_start": "123456",
     "changes": [{"knob": "smt", "before": {"control": "on", "active": true}}, ...]}

``changes`` is in the order the knobs were first changed; restoring walks it backwards.
``boot_id`` and ``pid_start`` identify the writing process, so ``iolab restore`` can refuse to
undo knobs under a session that is still running.

The journal is state: written with mode 0600 whatever the umask, through a temporary file
and a rename, and read only when it is a regular file: a link in its place is never followed,
and a FIFO never opened (a read of it would block for ever) (:mod:`iolab.safefiles`). What it
names is written back as root, so a journal is acted on only when it can be one this user
wrote: owned by this user or root, in a folder no other user may write into (world-writable
only with the sticky bit), of at most :data:`JOURNAL_MOST` bytes, and JSON nested no deeper
than iolab writes it; anything else is refused in one line before any knob is touched, and a
session does not begin in such a folder (its journal could be replaced there).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from iolab.durable import fsync_dir, write_json_atomic
from iolab.errors import InputError, IolabError, ParseError, listed_error, printable
from iolab.host.knobs import Knob
from iolab.parsers import load_json
from iolab.procs import boot_id, start_ticks
from iolab.safefiles import (STATE_MODE, NotOurs, TooLarge, check_owner, check_regular,
                             others_write, read_regular)

SCHEMA_VERSION = 1
# bytes of a journal at most: each knob's state before it is a few kB at most (the affinity of
# every IRQ of a large host, each device's driver)
JOURNAL_MOST = 16 << 20
_ROLE = "a knob journal"
# every signal another process can send is held while knobs are restored; not the faults a
# crash raises, which end the process whether blocked or not (SIGKILL cannot be held anyway)
HELD_DURING_RESTORE = (signal.valid_signals()
                       - {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
                          signal.SIGKILL, signal.SIGSTOP})


def states(knobs: dict[str, Knob]) -> dict[str, Any]:
    """The current state of every knob, by name; None for a knob with nothing to read here.

    A knob that is readable but not controllable (SMT reading 'notsupported') is recorded
    with its state, since that state still describes the host.
    """
    out: dict[str, Any] = {}
    for name, knob in knobs.items():
        try:
            out[name] = knob.read()
        except (IolabError, OSError, ValueError):
            out[name] = None
    return out


def _remove_journal(path: Path) -> None:
    path.unlink()
    fsync_dir(path.parent)


def _owner_running(journal: dict[str, Any]) -> bool:
    pid = journal.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    return (journal.get("boot_id") == boot_id()
            and start_ticks(pid) == journal.get("pid_start"))


def _folder_problem(path: Path) -> str | None:
    """Why the folder of the journal ``path`` lets another user put a journal there, or None."""
    try:
        st = os.stat(Path(path).parent)
    except OSError:
        return None  # no folder: no journal either
    problem = others_write(st)
    return (f"its folder {Path(path).parent} {problem}: another user could have put this "
            "journal there") if problem else None


def _read_journal(path: Path) -> Any:
    """The JSON the journal ``path`` holds; NotOurs, TooLarge, InputError for a journal iolab
    cannot have written (another user's, in a folder others may write into, too large, not
    JSON), naming it; None when nothing (or a folder, a link, a FIFO) is there."""
    problem = _folder_problem(path)
    if problem:
        raise NotOurs(path, None, f"{problem}; it is never acted on",
                      allowed="a journal in a folder only this user or root may write into "
                              "(chmod o-w, or the sticky bit); restore the knobs by hand")
    try:
        # a folder, a link (never followed), or a FIFO that would block the read for ever
        st = check_regular(path, _ROLE)
    except NotOurs:
        return None
    if st is None:
        return None
    check_owner(path, st, _ROLE)  # another user's journal names knobs root would write
    raw = read_regular(path, _ROLE, JOURNAL_MOST, own=True)  # what was opened, checked again
    if raw is None:
        return None
    try:
        return load_json(raw.decode("utf-8"), str(path))  # nested too deeply: ParseError
    except (ValueError, ParseError) as exc:
        why = exc.problem if isinstance(exc, ParseError) else exc
        raise InputError(path, None, f"not a readable knob journal: {why}; restore the knobs by "
                         f"hand and delete the file") from None


def _load_journal(path: Path) -> dict[str, Any]:
    journal = _read_journal(path)
    if journal is None:
        raise InputError(path, None, "is not a regular file, so not a knob journal",
                         allowed="the journal a campaign left (DATA/.knob-journal.json)")
    if not isinstance(journal, dict):
        raise InputError(path, None, f"is a JSON {type(journal).__name__}, not a knob journal "
                         "(a JSON object)")
    if journal.get("schema_version") != SCHEMA_VERSION:
        raise InputError(path, "schema_version", f"unsupported journal version "
                         f"{journal.get('schema_version')!r}", str(SCHEMA_VERSION))
    changes = journal.get("changes")
    if not isinstance(changes, list) or not all(
            isinstance(c, dict) and isinstance(c.get("knob"), str) and "before" in c
            for c in changes):
        raise InputError(path, "changes", "must be a list of {knob, before} objects")
    return journal


def _brief(state: Any, limit: int = 100) -> str:
    text = json.dumps(state, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _leftover_message(path: Path) -> str:
    try:
        journal = _read_journal(path)
        who = f" by pid {journal.get('pid')} at {journal.get('started_at')}"
    except (NotOurs, TooLarge, InputError) as exc:
        return f"{exc}"
    except (OSError, AttributeError):
        who = ""
    return (f"knob journal {path} was left{printable(who)}: a previous run did not restore "
            f"its knob changes. Run `iolab restore` first.")


def _restore_one(knob: Knob, before: Any) -> tuple[bool, str]:
    """Restore one knob and verify by reading back: (ok, what happened); what happened to a
    knob left changed says what it reads now and how to put it back by hand."""
    try:
        if knob.same_state(before, knob.read()):
            return True, f"{knob.name}: already at {_brief(before)}"
        knob.restore(before)
        after = knob.read()
    # One knob failing in any way must not stop the others from being restored.
    except Exception as exc:
        return False, _left_changed(knob, before, str(exc))
    if knob.same_state(before, after):
        return True, f"{knob.name}: restored to {_brief(before)}"
    return False, _left_changed(knob, before, f"still reads {_brief(after)} after writing "
                                f"back {_brief(before)}")


def _left_changed(knob: Knob, before: Any, why: str) -> str:
    """A knob that could not be restored: why, the state it is in now (read back, or why it
    cannot be read), the state it should have, and the command that writes that state."""
    try:
        now = f"it reads {_brief(knob.read())} now"
    # whatever made the write fail may make the read fail too; the line is still due
    except Exception as exc:
        now = f"it cannot be read now ({exc})"
    command = knob.restore_command(before)
    by_hand = f"; by hand: `{command}`" if command else ""
    return f"{knob.name}: {why}; {now} and should be {_brief(before)}{by_hand}"


def unrestored_message(failures: list[str], journal_path: Path, restore: str) -> str:
    """The error of knobs left changed: each knob's line, and the command that finishes the
    restore once the cause is fixed."""
    return (f"could not restore knob(s): {'; '.join(failures)}. The journal {journal_path} "
            f"is kept; once the cause is fixed, `{restore}` puts every knob back.")


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


class KnobSession:
    """Set knobs inside a ``with`` block; every changed knob is put back when the block ends.

    The journal file is created on entry (refused if one exists: a crashed run's changes
    would otherwise be lost), updated before each new knob is touched, and deleted on exit
    only when every knob read back as restored. When a restore fails the journal stays and
    ``__exit__`` raises IolabError, or, if an exception is already on its way out, adds the
    failure to it as a note so the original cause is not hidden.

    SIGTERM raises SystemExit inside the block so the restore runs, unless the caller has
    already installed its own SIGTERM handler, which then owns that job.

    ``claim(knob)``, when given, is called before a knob is first journaled or touched; it
    raises when another live process has that knob changed (the runner passes
    ``iolab.core.locks.KnobLocks.claim``, a lock per knob that no lock folder setting moves;
    the locks are a layer above this module, hence the argument). ``guard(name)`` calls it
    for a knob written outside :meth:`set`.
    """

    def __init__(self, knobs: dict[str, Knob], journal_path: Path,
                 restore: str | None = None,
                 claim: Callable[[Knob], None] | None = None) -> None:
        self.knobs = knobs
        self.journal_path = Path(journal_path)
        self.claim = claim
        # the command that finishes a failed restore (the caller knows its data directory)
        self.restore = restore or f"iolab restore --journal {shlex.quote(str(journal_path))}"
        self.restore_report: list[str] = []
        self.unrestored: list[str] = []  # a line per knob left changed, with how to fix it
        self._journal: dict[str, Any] = {}
        self._active = False
        self._old_sigterm: Any = None

    def __enter__(self) -> KnobSession:
        check_regular(self.journal_path, _ROLE)  # a link, a FIFO: refused
        if os.path.lexists(self.journal_path):
            raise IolabError(_leftover_message(self.journal_path))
        self.journal_path.parent.mkdir(parents=True, exist_ok=True)
        problem = _folder_problem(self.journal_path)
        if problem:  # a journal there could be replaced, and then never restored from
            raise NotOurs(self.journal_path, None, f"{problem} or replace it; no knob is "
                          "changed", allowed="a data folder only this user or root may write "
                          "into (chmod o-w, or the sticky bit)")
        self._journal = {
            "schema_version": SCHEMA_VERSION,
            "pid": os.getpid(),
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "boot_id": boot_id(),
            "pid_start": start_ticks(os.getpid()),
            "changes": [],
        }
        try:
            write_json_atomic(self.journal_path, self._journal, exclusive=True, mode=STATE_MODE)
        except FileExistsError:
            raise IolabError(_leftover_message(self.journal_path)) from None
        self.restore_report = []
        self._active = True
        self._install_sigterm()
        return self

    def _install_sigterm(self) -> None:
        self._old_sigterm = None
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL):
            self._old_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)

    def set(self, name: str, value: Any) -> dict[str, Any]:
        """Journal the knob's original state, apply ``value`` and read back.

        Returns {"requested", "before", "after", "matches"}; ``matches`` False means the kernel
        did not take the value as asked (ignored, clamped or rounded), and ``after`` says what
        it did instead. If the write itself fails the knob is already journaled, so it is
        still restored when the block ends.
        """
        if not self._active:
            raise IolabError("KnobSession.set() called outside its 'with' block")
        knob = self.knobs.get(name)
        if knob is None:
            raise InputError(None, name, "unknown knob", ", ".join(self.knobs))
        # A bad value or an uncontrollable knob is refused before anything is journaled.
        knob.validate(value)
        ok, why = knob.available()
        if not ok:
            raise IolabError(f"knob '{name}' cannot be set on this host: {why}")
        self.guard(name)
        before = knob.read()
        if all(change["knob"] != name for change in self._journal["changes"]):
            self._journal["changes"].append({"knob": name, "before": before})
            write_json_atomic(self.journal_path, self._journal, mode=STATE_MODE)
        knob.apply(value)
        after = knob.read()
        return {"requested": value, "before": before, "after": after,
                "matches": knob.matches(value, after)}

    def guard(self, name: str) -> None:
        """Make sure no other live process has knob ``name`` changed before it is written."""
        if self.claim is not None:
            self.claim(self.knobs[name])

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._active = False
        # a signal during the restore would leave knobs half restored; they are held until it
        # is done and then delivered as usual
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_DURING_RESTORE)
        try:
            failures = []
            for change in reversed(self._journal["changes"]):
                ok, line = _restore_one(self.knobs[change["knob"]], change["before"])
                (self.restore_report if ok else failures).append(line)
            if not failures:
                _remove_journal(self.journal_path)
        finally:
            if self._old_sigterm is not None:
                signal.signal(signal.SIGTERM, self._old_sigterm)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self.unrestored = failures
        if failures:
            message = unrestored_message(failures, self.journal_path, self.restore)
            if exc is None:
                raise IolabError(message)
            exc.add_note(message)
        return False


def restore_from_journal(journal_path: Path, knobs: dict[str, Knob],
                         claim: Callable[[Knob], None] | None = None) -> list[str]:
    """Undo what a crashed session left in its journal; returns what was done, line by line.

    Idempotent: knobs already back are reported as such, and the journal is removed once
    every knob reads back as restored. Raises IolabError, keeping the journal, when a knob
    cannot be restored or when the session that wrote the journal is still running.
    ``claim`` (see :class:`KnobSession`) is called for every knob of the journal before any
    is written: none is restored under another live campaign that has it changed.
    """
    path = Path(journal_path)
    if not os.path.lexists(path):
        return [f"nothing to restore: no journal at {path}"]
    journal = _load_journal(path)
    if _owner_running(journal):
        raise IolabError(f"{path} belongs to iolab process {journal['pid']}, which is still "
                         f"running and restores its knobs when it ends; stop it instead")
    if claim is not None:
        for change in journal["changes"]:
            if change["knob"] in knobs:
                claim(knobs[change["knob"]])
    # the journal's fields are read from a file: a line break in one would print a line of
    # its own ("restored all") among these
    lines = [f"journal {path}: written by pid {printable(str(journal.get('pid')))} at "
             f"{printable(str(journal.get('started_at')))}, {len(journal['changes'])} knob(s) "
             "changed"]
    failures = []
    for change in reversed(journal["changes"]):
        knob = knobs.get(change["knob"])
        if knob is None:
            failures.append(f"{printable(str(change['knob']))}: no such knob here (allowed: "
                            f"{', '.join(knobs)})")
            continue
        ok, line = _restore_one(knob, change["before"])
        (lines if ok else failures).append(line)
    if failures:
        # a line each, escaped: a knob's recorded state must not print a line of its own
        raise listed_error("\n".join(printable(line) for line in [
            *lines, "could not restore:", *failures,
            f"the journal {path} is kept; fix the cause and run `iolab restore` again"]))
    _remove_journal(path)
    lines.append(f"removed {path}")
    return lines
