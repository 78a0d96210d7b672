#!/usr/bin/env python3
"""A single-node Slurm on this machine, for trying `iolab submit` and for the tests.

Usage (as root):
    local_slurm.py start DIR     start munged, slurmctld and slurmd with their state in DIR;
                                 prints the SLURM_CONF line to export
    local_slurm.py stop DIR      stop them and remove DIR

It uses Debian's packages (slurmctld, slurmd, slurm-client, munge: scripts/system-packages.txt)
and no systemd: one node as `slurmd -C` describes this machine, one partition `debug`, no
accounting, daemons on free loopback ports, so it does not meet a Slurm that is already there.
munged refuses a socket whose parent folders not everybody may search, so DIR's parents must
be world-searchable (/tmp is).

Responsible for: starting and stopping that cluster. Not responsible for: submitting jobs
(`iolab submit`). Only the standard library is used.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "setpriv")
MUNGE_KEY = Path("/etc/munge/munge.key")
PIDS = "pids.json"


class NotAvailable(Exception):
    """This machine cannot run the cluster (a package or root is missing); says which."""


def missing() -> str | None:
    """Why a local cluster cannot start here, or None."""
    absent = [p for p in PROGRAMS if shutil.which(p) is None]
    if absent or not MUNGE_KEY.exists():
        return (f"Slurm is not installed ({', '.join(absent) or str(MUNGE_KEY)} missing): "
                "'make setup' installs slurmctld, slurmd, slurm-client and munge as root")
    if os.geteuid() != 0:
        return "starting munged and the Slurm daemons needs root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _conf(root: Path, munge: Path) -> str:
    node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True,
                          check=True).stdout.splitlines()[0]
    host = node.split()[0].split("=", 1)[1]
    return "\n".join([
        "ClusterName=iolablocal", f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
        "AuthType=auth/munge", f"AuthInfo=socket={munge}/socket", "CredType=cred/munge",
        "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool", f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd.pid", f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd.log", "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none", "SchedulerParameters=batch_sched_delay=0",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none", "JobCompType=jobcomp/none",
        # a job's processes get SIGTERM, then SIGKILL this many seconds later
        "KillWait=30", "ReturnToService=2", "MpiDefault=none",
        f"{node} NodeAddr=127.0.0.1 State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""])


def logs(root: Path) -> str:
    """The tail of every daemon's log, for an error message."""
    folder = root / "log"
    if not folder.is_dir():
        return ""
    return "\n".join(f"{p.name}: {p.read_text(errors='replace')[-1500:]}"
                     for p in sorted(folder.iterdir()))


def start(root: Path, timeout: float = 60) -> dict[str, str]:
    """Start the cluster with its state under ``root`` (created; must not exist); returns
    the environment that points Slurm's commands at it. Stops what it started on failure."""
    why = missing()
    if why:
        raise NotAvailable(why)
    root = Path(root)
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    munge = root / "munge"
    munge.mkdir(mode=0o755)
    shutil.chown(munge, "munge", "munge")
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir()
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, munge))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    argvs = {
        "munged": ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "munged",
                   "-F", "-S", f"{munge}/socket", f"--pid-file={munge}/pid",
                   f"--log-file={munge}/log", f"--seed-file={munge}/seed"],
        "slurmctld": ["slurmctld", "-D", "-c", "-f", str(conf)],
        "slurmd": ["slurmd", "-D", "-f", str(conf)],
    }
    pids: dict[str, int] = {}
    try:
        for name, argv in argvs.items():
            with open(root / "log" / f"{name}.out", "wb") as out:
                # a session of its own: the daemons outlive this process and its terminal
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env,
                                        start_new_session=True)
            pids[name] = proc.pid
            (root / PIDS).write_text(json.dumps(pids))
            if name == "munged":
                deadline = time.monotonic() + 10
                while not (munge / "socket").exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                                   env=env).stdout.strip()
            if state == "idle":
                return {"SLURM_CONF": str(conf)}
            time.sleep(0.5)
        raise RuntimeError(f"the local Slurm did not come up (node state {state!r}):\n"
                           f"{logs(root)}")
    except BaseException:
        stop(root, remove=False)
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop(root: Path, remove: bool = True) -> None:
    """Shut the cluster of ``root`` down, end its daemons, and remove ``root``."""
    root = Path(root)
    conf = root / "slurm.conf"
    if conf.exists():
        subprocess.run(["scontrol", "shutdown"], env={**os.environ, "SLURM_CONF": str(conf)},
                       capture_output=True, timeout=30)
    pids = json.loads((root / PIDS).read_text()) if (root / PIDS).exists() else {}
    for name in ("slurmd", "slurmctld", "munged"):
        pid = pids.get(name)
        if pid is None or not _alive(pid):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while _alive(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        _reap(pid)
    if remove:
        shutil.rmtree(root, ignore_errors=True)


def _reap(pid: int) -> None:
    """Collect the exit of a daemon this process started (a no-op for one it did not)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    verb, root = argv[0], Path(argv[1]).resolve()
    if verb == "stop":
        stop(root)
        print(f"stopped the local Slurm of {root}")
        return 0
    try:
        env = start(root)
    except NotAvailable as exc:
        print(f"local_slurm: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"local_slurm: {exc}", file=sys.stderr)
        return 1
    print(f"export SLURM_CONF={env['SLURM_CONF']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
