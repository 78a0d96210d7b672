"""Every process a campaign starts carries its owner's name, so that none is left behind.

fio forks one worker per job and each worker calls ``setsid``: killing the driver's process
group misses them. So the runner puts two variables into the environment that every child,
grandchild and daemonized worker inherits:

* ``IOLAB_OWNER``: ``<boot id>/<pid>/<start time>`` of the iolab process (a name no other
  process can have, even after the pid is reused), and
* ``IOLAB_OWNER_DATA``: its data directory;

and each driver run additionally gets ``IOLAB_RUN`` (its run folder). :func:`find` reads
``/proc/<pid>/environ`` to list the processes of an owner or of a run; :func:`leftovers` lists
those whose owner is gone (an ``iolab run`` killed with SIGKILL) and :func:`end` kills a set
and waits until each is gone. The owner is recorded in ``campaign-log.jsonl`` too.

Only this user's processes are ever taken for a campaign's (every uid of the process, real,
effective, saved and file system, is this user's): the processes a campaign starts run as its
user, and anyone can put the two variables into their own process's environment. Root can
read every user's ``environ`` and kill every process, so another user's process carrying the
markers is never listed, nor signalled (:func:`is_mine`, checked again just before the
kill); nor is one whose owner is not of the form iolab writes.

Responsible for: naming, finding and ending the processes of a campaign. Not responsible
for: starting them (the runner and collectors do) or the process-group handling of a single
background collector (``iolab.tools.base.end_process_group``).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

OWNER_VAR = "IOLAB_OWNER"
DATA_VAR = "IOLAB_OWNER_DATA"
RUN_VAR = "IOLAB_RUN"
PROC = Path("/proc")


def boot_id() -> str:
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "noboot"


def start_ticks(pid: int) -> str | None:
    """When a process started (clock ticks after boot); None when it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces and ')', so fields are counted after the last ')'
    return stat.rpartition(")")[2].split()[19]


def owner_name(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{boot_id()}/{pid}/{start_ticks(pid)}"


def owner_alive(owner: str) -> bool:
    try:
        boot, pid, start = owner.split("/")
        return boot == boot_id() and start_ticks(int(pid)) == start
    except ValueError:
        return False


@dataclass(frozen=True)
class Proc:
    pid: int
    command: str
    owner: str
    data_dir: str
    run: str

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command})"


def _environ(pid: int) -> dict[str, str] | None:
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:  # gone, or another user's process: not ours either way
        return None
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key in (OWNER_VAR.encode(), DATA_VAR.encode(), RUN_VAR.encode()):
            out[key.decode()] = value.decode(errors="replace")
    return out


def _command(pid: int) -> str:
    try:
        return (PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return "?"


def is_mine(pid: int) -> bool:
    """Whether the process ``pid`` is this user's: each of its uids (real, effective, saved,
    file system; ``/proc/<pid>/status``) is this process's effective uid. False when it is
    gone or cannot be read."""
    try:
        status = (PROC / str(pid) / "status").read_text(errors="replace")
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("Uid:"):
            uids = line.split()[1:]
            return len(uids) == 4 and all(u == str(os.geteuid()) for u in uids)
    return False


def well_formed(owner: str) -> bool:
    """Whether ``owner`` has the form :func:`owner_name` writes: ``<boot id>/<pid>/<ticks>``."""
    parts = owner.split("/")
    return (len(parts) == 3 and bool(parts[0]) and parts[1].isdigit()
            and parts[2].isdigit())


def find(*, owner: str | None = None, data_dir: Path | str | None = None,
         run: str | None = None) -> list[Proc]:
    """Live processes of this user's carrying an iolab owner, narrowed by owner, data
    directory or run (another user's are never ours, whatever their environment says)."""
    me = os.getpid()
    out = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me or not is_mine(int(entry.name)):
            continue
        env = _environ(int(entry.name))
        if not env or OWNER_VAR not in env:
            continue
        proc = Proc(int(entry.name), _command(int(entry.name)), env[OWNER_VAR],
                    env.get(DATA_VAR, ""), env.get(RUN_VAR, ""))
        if ((owner is None or proc.owner == owner)
                and (data_dir is None or proc.data_dir == str(data_dir))
                and (run is None or proc.run == run)):
            out.append(proc)
    return sorted(out, key=lambda p: p.pid)


def leftovers(data_dir: Path | str) -> list[Proc]:
    """Processes (this user's) started for a campaign on ``data_dir`` whose iolab process is
    gone; one whose owner is not of the form iolab writes is not a campaign's."""
    return [p for p in find(data_dir=data_dir)
            if well_formed(p.owner) and not owner_alive(p.owner)]


def _zombie_or_gone(pid: int) -> bool:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def end(procs: list[Proc], timeout_s: float = 10.0) -> list[Proc]:
    """SIGKILL each process (this user's: one that is not, e.g. a pid reused since it was
    found, is left alone) and wait until all are gone; returns those still there after
    ``timeout_s`` (a process stuck in the kernel, e.g. in uninterruptible I/O)."""
    procs = [p for p in procs if is_mine(p.pid)]
    for p in procs:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + timeout_s
    left = list(procs)
    while left and time.monotonic() < deadline:
        left = [p for p in left if not _zombie_or_gone(p.pid)]
        if left:
            time.sleep(0.02)
    return left


def end_leftovers(data_dir: Path | str) -> list[str]:
    """End what a killed campaign on ``data_dir`` left running; one line per process."""
    found = leftovers(data_dir)
    if not found:
        return []
    stuck = {p.pid for p in end(found)}
    lines = [f"ended leftover process {p.describe()} of a campaign that was killed "
             f"(owner {p.owner.split('/')[1]}, run {Path(p.run).name or '?'})"
             for p in found if p.pid not in stuck]
    if stuck:
        from iolab.errors import IolabError

        raise IolabError("leftover processes of a killed campaign could not be ended: "
                         + ", ".join(p.describe() for p in found if p.pid in stuck)
                         + "; nothing was run (a measurement beside them would be wrong)")
    return lines


class Owned:
    """Within the block, every process this one starts carries its owner and data directory."""

    def __init__(self, data_dir: Path):
        self.data_dir = str(data_dir)
        self.owner = owner_name()
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> Owned:
        for key, value in ((OWNER_VAR, self.owner), (DATA_VAR, self.data_dir)):
            self._saved[key] = os.environ.get(key)
            os.environ[key] = value
        return self

    def __exit__(self, *exc) -> None:
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def children(self) -> list[Proc]:
        return find(owner=self.owner)
