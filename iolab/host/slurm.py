"""The Slurm allocation a process runs in, as a run records it.

Inside a Slurm job, Slurm names the job, node, partition and CPUs in the environment; whether
the node is the job's alone is in the job's record (``scontrol show job``: OverSubscribe=NO
for a job given its nodes exclusively, OK for one that shares them).

Responsible for: reading that allocation. Not responsible for: submitting jobs or acting on
what the allocation allows.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any, Mapping

SCONTROL_TIMEOUT_S = 20.0


def allocation(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The job this process runs in, or None outside Slurm: ``job_id``, ``node``,
    ``partition``, ``cluster``, ``cpus_on_node`` (int or None) and ``exclusive`` (True, False,
    or None when the job's record cannot be read)."""
    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID")
    if not job:
        return None
    cpus = env.get("SLURM_CPUS_ON_NODE")
    return {"job_id": job, "node": env.get("SLURMD_NODENAME"),
            "partition": env.get("SLURM_JOB_PARTITION"), "cluster": env.get("SLURM_CLUSTER_NAME"),
            "cpus_on_node": int(cpus) if cpus and cpus.isdigit() else None,
            "exclusive": exclusive(job, env)}


def exclusive(job: str, env: Mapping[str, str] | None = None) -> bool | None:
    """Whether job ``job`` has its nodes to itself, from its record (None: unknown)."""
    try:
        done = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True,
                              text=True, timeout=SCONTROL_TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL, env=dict(env or os.environ))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_oversubscribe(done.stdout) if done.returncode == 0 else None


def parse_oversubscribe(record: str) -> bool | None:
    """``scontrol show job -o`` output -> True for OverSubscribe=NO (the nodes are the
    job's alone), False for any other value, None without the field."""
    match = re.search(r"(?:^|\s)OverSubscribe=(\S+)", record)
    return None if match is None else match.group(1) == "NO"
