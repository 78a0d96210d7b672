"""The lock file that names its holder (iolab.lockfile): what a refusal and ``iolab status``
quote from another process's record stays on its line."""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from iolab import lockfile
from iolab.status import status_lines

FORGED = {"pid": 4242, "argv": ["iolab", "run\nsmt_thp/kvm-2vcpu: 999 complete FORGED\x1b[2J"],
          "since": "x\nFORGED3", "data_dir": "/d\nFORGED2"}
SHOWN = (r"pid 4242 ('iolab run\nsmt_thp/kvm-2vcpu: 999 complete FORGED\x1b[2J', "
         r"data /d\nFORGED2, since x\nFORGED3)")


@pytest.fixture
def held(tmp_path, monkeypatch):
    """The data lock of tmp_path/data held (by another open file) under a record of
    another process's with line breaks and an escape sequence in every field."""
    from iolab.core import locks

    monkeypatch.setenv("IOLAB_LOCK_DIR", str(tmp_path / "locks"))
    data = tmp_path / "data"
    data.mkdir()
    path = locks.data_lock_path(data)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, json.dumps(FORGED).encode())
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield data, path
    os.close(fd)


def test_a_holders_record_cannot_make_a_line_of_the_refusal_or_the_status(held):
    data, path = held
    with pytest.raises(lockfile.LockHeld) as info:
        lockfile.Lock(path, "the data directory").acquire()
    assert SHOWN in str(info.value) and "\n" not in str(info.value)
    lines = list(status_lines(data))
    assert f"a campaign is running on this data directory: {SHOWN}" in lines
    assert not any("\n" in line or "\x1b" in line for line in lines)


@pytest.mark.parametrize("record, shown", [
    ({"pid": 5, "argv": 5, "data_dir": "/x", "since": "now"}, "pid 5 ('?', data /x, since now)"),
    ({"pid": 5, "argv": "iolab run", "since": "now"}, "pid 5 ('?', since now)"),
    ({"pid": 5, "argv": {"iolab": 1}, "since": ["now"]}, "pid 5 ('?', since ?)"),
    ({"pid": [5], "argv": [1, None], "data_dir": 7}, "a process that did not say who it is"),
    ({"pid": True, "argv": ["iolab", "run"]}, "pid ? ('iolab run', since ?)"),
])
def test_a_holders_record_of_other_kinds_names_what_it_can_in_one_line(
        tmp_path, monkeypatch, record, shown):
    """Probe 12, K1: a data lock's holder record with an 'argv' of 5 was an internal error
    (TypeError, exit 70) in every command that takes the lock, and a string 'argv' was shown
    one character per word. A field of a kind iolab never writes leaves that part of the
    holder unnamed; the refusal and the status still say it is held, in one line."""
    from iolab.core import locks

    monkeypatch.setenv("IOLAB_LOCK_DIR", str(tmp_path / "locks"))
    data = tmp_path / "data"
    data.mkdir()
    path = locks.data_lock_path(data)
    path.parent.mkdir(mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.write(fd, json.dumps(record).encode())
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(lockfile.LockHeld) as info:
            lockfile.Lock(path, "the data directory").acquire()
        assert f"the data directory is held by {shown};" in str(info.value)
        assert f"a campaign is running on this data directory: {shown}" in list(
            status_lines(data))
    finally:
        os.close(fd)
