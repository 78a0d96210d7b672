#!/usr/bin/env python3
"""The set-up `make test` runs first: system packages from one list, then the tool builds.

Usage: setup.py [--packages FILE] [--tools-src DIR] [--no-tools]

1. Reads the Debian/Ubuntu package list (default scripts/system-packages.txt: one package per
   line, then what needs it) and asks dpkg which are missing. As root, with apt-get, it
   installs them (one `apt-get update`, one `apt-get install`). Otherwise it names them with
   the command that installs them, and goes on: the tests that need them skip, saying so.
2. Builds xNVMe and SPDK (scripts/build_tools.py) when their sources are at hand (--tools-src,
   default $IOLAB_TOOLS_SRC, else ../shared/tools-src beside the checkout). A build already
   made from the same sources is not repeated. A failed build is reported and the tests
   that need the tool skip; set-up itself fails only on a broken package install.

Exit status: 0 done (possibly with packages or tools missing, as said); 1 apt-get failed.
Only the Python standard library is used: this runs before the virtual environment exists.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = REPO / "scripts" / "system-packages.txt"
DEFAULT_TOOLS_SRC = REPO.parent / "shared" / "tools-src"


def say(message: str) -> None:
    print(f"setup: {message}", flush=True)


def read_packages(path: Path) -> list[str]:
    """The package names of the list: the first word of each line that is not a comment."""
    names = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if not all(c.isalnum() or c in "+-." for c in words[0]):
            raise SystemExit(f"setup: {path} line {number}: {words[0]!r} is not a package name "
                             "(letters, digits, '+', '-' and '.')")
        names.append(words[0])
    return names


def missing_packages(names: list[str]) -> list[str] | None:
    """The packages dpkg does not list as installed; None where there is no dpkg."""
    if not shutil.which("dpkg-query"):
        return None
    done = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n", *names],
                          capture_output=True, text=True, check=False)
    installed = {line.split()[0] for line in done.stdout.splitlines()
                 if line.endswith(" installed")}
    return [name for name in names if name not in installed]


def install(names: list[str]) -> int:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    say(f"installing {' '.join(names)}")
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *names]):
        done = subprocess.run(argv, env=env, check=False, stdin=subprocess.DEVNULL)
        if done.returncode:
            print(f"setup: {' '.join(argv[:2])} failed with status {done.returncode}",
                  file=sys.stderr)
            return 1
    return 0


def packages(path: Path) -> int:
    names = read_packages(path)
    gone = missing_packages(names)
    if gone is None:
        say(f"no dpkg here: install the equivalents of {path.name} with your package manager "
            f"({', '.join(names)}); tests needing a missing one skip")
        return 0
    if not gone:
        say(f"all {len(names)} system packages of {path.name} are installed")
        return 0
    if os.geteuid() == 0 and shutil.which("apt-get"):
        return install(gone)
    say(f"missing {', '.join(gone)}; install them with: sudo apt-get install {' '.join(gone)} "
        "(the tests that need them skip until then)")
    return 0


def tools(source: Path | None) -> None:
    if source is None or not source.is_dir():
        say(f"no tool sources at {source or DEFAULT_TOOLS_SRC} (set IOLAB_TOOLS_SRC or run "
            "'make tools TOOLS_SRC=DIR'): bdevperf and xnvmeperf are not built, and their "
            "tests skip unless the tools are on PATH")
        return
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "build_tools.py"), "--from",
                           str(source)], check=False, stdin=subprocess.DEVNULL)
    if done.returncode:
        say(f"the tool build ended with status {done.returncode} (see above); the tests of "
            "the tools it could not build skip")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=Path, default=PACKAGES)
    parser.add_argument("--tools-src", type=Path,
                        default=Path(os.environ["IOLAB_TOOLS_SRC"])
                        if os.environ.get("IOLAB_TOOLS_SRC") else DEFAULT_TOOLS_SRC)
    parser.add_argument("--no-tools", action="store_true", help="skip the tool builds")
    args = parser.parse_args(argv)
    status = packages(args.packages)
    if status == 0 and not args.no_tools:
        tools(args.tools_src)
    return status


if __name__ == "__main__":
    sys.exit(main())
