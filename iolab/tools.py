"""System tools an experiment drives: how to find each one, its driver and its version.

Responsible for: the ``Tool`` description, install hints, and refusing to start when a tool
is missing. Not responsible for: running tools (the runner) or parsing their output.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import ToolError
from .paths import DRIVERS_DIR

INSTALL_HINTS = {
    "fio": "install it with 'apt-get install fio' (Debian/Ubuntu) or 'conda install -c conda-forge fio'",
    "bpftrace": "install it with 'apt-get install bpftrace'",
    "stress-ng": "install it with 'apt-get install stress-ng'",
    "bdevperf": "build SPDK (https://spdk.io) and set spdk_dir in the params file",
}


@dataclass(frozen=True)
class Tool:
    name: str                 # what the user installs, e.g. "fio"
    driver: str               # script under scripts/drivers/
    version_argv: tuple[str, ...]  # prints the tool's version
    executable: str | None = None  # path or name to look for; defaults to ``name``

    @property
    def driver_path(self) -> Path:
        return DRIVERS_DIR / self.driver

    def find(self) -> str | None:
        exe = self.executable or self.name
        if "/" in exe:
            return exe if Path(exe).is_file() else None
        return shutil.which(exe)

    def require(self) -> str:
        where = self.find()
        if where is None:
            where = f"at {self.executable}" if self.executable and "/" in self.executable else "on PATH"
            raise ToolError(f"{self.name} not found {where}; "
                            f"{INSTALL_HINTS.get(self.name, 'install it first')}. "
                            "Nothing was run and no system setting was touched.")
        return where


def driver_version(driver: Path) -> str:
    if not driver.exists():
        raise ToolError(f"{driver}: driver script not found")
    match = re.search(r"^# iolab-driver-version:\s*(\S+)", driver.read_text(), re.M)
    if not match:
        raise ToolError(f"{driver}: no '# iolab-driver-version: N' line")
    return match.group(1)
