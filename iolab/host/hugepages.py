"""The hugepages knob: a pool of 2 MiB hugepages and a hugetlbfs mount for SPDK and DPDK.

Value: ``{"pages": N}`` (at least N pages of the default size, ``vm.nr_hugepages``). State:
``{"nr_hugepages": N, "hugetlbfs": [mount points]}``. Applying raises the pool to N when it is
smaller (a larger pool, which others may be using, is left as it is) and, when no hugetlbfs
is mounted, mounts one at ``/dev/hugepages`` (DPDK finds it there). Restoring writes the old
count back and unmounts the hugetlbfs the knob mounted (only that one, and the count is
written back even when the unmount fails); the journal holds the old state, so a crashed
campaign is undone by the next one like every other knob.

Responsible for: reading, writing and restoring the pool and the mount, through a
:class:`~iolab.host.knobs.SysRoot` (tests use a fake tree and a fake mount command).
Not responsible for: journaling (``iolab.host.journal``) or deciding how many pages a run
needs (the experiment's params).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable

from iolab.checks import is_positive_int
from iolab.errors import IolabError
from iolab.host.knobs import Knob, SysRoot, read_sysfs, sysfs_writable, write_sysfs

MOUNT_POINT = "/dev/hugepages"


def run_command(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode:
        raise IolabError(f"{' '.join(argv)} failed with status {done.returncode}: "
                         f"{done.stderr.strip() or done.stdout.strip()}")


class HugepagesKnob(Knob):
    name = "hugepages"
    allowed = "{pages: N} with N >= 1 (pages of the default hugepage size, 2 MiB on x86)"

    def __init__(self, root: SysRoot | None = None,
                 command: Callable[[list[str]], None] = run_command,
                 mount_point: str = MOUNT_POINT) -> None:
        super().__init__(root)
        self.command = command
        self.mount_point = mount_point

    @property
    def path(self) -> Path:
        return self.root.proc / "sys/vm/nr_hugepages"

    def available(self) -> tuple[bool, str]:
        if not self.path.exists():
            return False, f"{self.path} is missing (a kernel without hugetlbfs)"
        return sysfs_writable(self.path)

    def mounts(self) -> list[str]:
        """Mount points of hugetlbfs in this mount namespace."""
        points = []
        for line in read_sysfs(self.root.proc / "self/mountinfo").splitlines():
            fields = line.split()
            if "-" in fields[6:]:
                after = fields.index("-", 6)
                if len(fields) > after + 1 and fields[after + 1] == "hugetlbfs":
                    points.append(fields[4])
        return points

    def read(self) -> dict[str, Any]:
        text = read_sysfs(self.path)
        if not text.isdigit():
            raise IolabError(f"{self.path} reads {text!r}, not a number of pages")
        return {"nr_hugepages": int(text), "hugetlbfs": self.mounts()}

    def validate(self, value: Any) -> dict[str, Any]:
        # a state read earlier ({"nr_hugepages", "hugetlbfs"}) is also a value: restore
        if isinstance(value, dict) and set(value) == {"nr_hugepages", "hugetlbfs"}:
            return value
        if not isinstance(value, dict) or set(value) != {"pages"}:
            raise self._invalid(f"{value!r} is not a mapping with only 'pages'")
        pages = value["pages"]
        if not is_positive_int(pages):
            raise self._invalid(f"pages must be a whole number >= 1, got {pages!r}")
        return {"pages": pages}

    def _write(self, value: dict[str, Any]) -> None:
        if "pages" in value:
            if self.read()["nr_hugepages"] < value["pages"]:
                write_sysfs(self.path, str(value["pages"]))
            if not self.mounts():
                Path(self.root.sys.parent / self.mount_point.lstrip("/")).mkdir(
                    parents=True, exist_ok=True)
                self.command(["mount", "-t", "hugetlbfs", "nodev", self.mount_point])
            return
        self._restore(value)

    def _restore(self, state: dict[str, Any]) -> None:
        # unmount first (pages held by files in a mount we made could not be freed), but
        # write the count back even if that fails, and say both
        problem = None
        if self.mount_point in self.mounts() and self.mount_point not in state["hugetlbfs"]:
            try:
                self.command(["umount", self.mount_point])
            except IolabError as exc:
                problem = exc
        write_sysfs(self.path, str(state["nr_hugepages"]))
        if problem is not None:
            raise IolabError(f"knob 'hugepages': the pool is back to {state['nr_hugepages']} "
                             f"pages, but {problem}")

    def matches(self, value: Any, state: Any) -> bool:
        """The pool holds at least the pages asked for (the kernel gives fewer when memory is
        fragmented) and a hugetlbfs is mounted."""
        value = self.validate(value)
        if "pages" not in value:
            return value == state
        return state["nr_hugepages"] >= value["pages"] and bool(state["hugetlbfs"])
