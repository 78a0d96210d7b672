"""A stop (SIGTERM, Ctrl-C) while an output or a state file is written leaves no hidden
temporary (``.iolab-<hex>.tmp``) beside it: the temporary is removed on every way out, the
stop between its creation and its rename included (:func:`iolab.safefiles.temp_beside`)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from iolab.children import Stoppable, Stopped
from iolab.durable import write_atomic
from iolab.safefiles import replace_output

WRITERS = {
    "state file": lambda path: write_atomic(path, b"{}\n", mode=0o600),
    "stored file": lambda path: write_atomic(path, b"{}\n"),
    "exclusive": lambda path: write_atomic(path, b"{}\n", exclusive=True),
    "output": lambda path: replace_output(path, lambda tmp: tmp.write_text("x\n"), "-o"),
}


def _ours(path) -> bool:
    return Path(path).name.startswith(".iolab-")


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_stop_signal_just_after_the_temporary_is_made_leaves_none(tmp_path, monkeypatch,
                                                                    writer):
    """A SIGTERM that came just as new_temp had made the temporary (before it was returned
    to the caller's try) raised Stopped there, and the .iolab-*.tmp stayed for good. Now
    the file is made and noted in one step the signal cannot split; the stop is raised
    after it and the file removed."""
    real_open = os.open

    def open_then_stop(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if _ours(path):
            os.kill(os.getpid(), signal.SIGTERM)  # handled by Stoppable: raises Stopped
        return fd

    monkeypatch.setattr(os, "open", open_then_stop)
    with pytest.raises(Stopped), Stoppable():
        WRITERS[writer](tmp_path / "out.json")
    assert [p.name for p in tmp_path.iterdir()] == []


# a step each writer takes between making its temporary and renaming it
STEPS = [("state file", "fchmod"), ("output", "close"), ("stored file", "fsync"),
         ("exclusive", "link")]


@pytest.mark.parametrize("writer,point", STEPS, ids=[f"{w}-{p}" for w, p in STEPS])
def test_a_stop_between_the_temporary_and_its_rename_leaves_none(tmp_path, monkeypatch,
                                                                 writer, point):
    """The exception a stop signal raises (Stopped), raised at a step between the
    temporary's creation and its rename (new_temp's fchmod was outside any try: the
    temporary stayed), leaves no temporary."""
    real = getattr(os, point)

    def stop(*args, **kwargs):
        raise Stopped(signal.SIGTERM)

    monkeypatch.setattr(os, point, stop)
    with pytest.raises(Stopped):
        WRITERS[writer](tmp_path / "out.json")
    monkeypatch.setattr(os, point, real)
    assert [p.name for p in tmp_path.iterdir()] == []
