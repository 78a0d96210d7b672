"""What iolab asks of Slurm: the allocation a process runs in, submitting a batch script,
the partitions there are, and the state of jobs.

Inside a Slurm job, Slurm names the job, node, partition and CPUs in the environment; whether
the node is the job's alone is in the job's record (``scontrol show job``: OverSubscribe=NO
for a job given its nodes exclusively, OK for one that shares them). A job's state is read
from ``squeue`` while it is queued or running, then from ``scontrol show job`` for as long
as the controller keeps ended jobs (MinJobAge, 300 s by default); no accounting database is
needed. Every command is an argv list and has a timeout, and runs as a process group that is
ended whole when iolab stops waiting for it (``iolab.children``); a Slurm that cannot be
reached is an error naming the command and Slurm's own message.

Responsible for: those commands and reading their output. Not responsible for: what a batch
script says (``iolab.batch.script``), job records (``iolab.batch.jobs``) or acting on what the
allocation allows (``iolab.execution.runner``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, Mapping

from iolab import children
from iolab.errors import IolabError, excerpt, printable
from iolab.parsers import is_digits

SCONTROL_TIMEOUT_S = 20.0
JOB_ID_DIGITS_MOST = 10  # Slurm's job ids are 32-bit: 4,294,967,295 at most
# job states after which a job no longer runs (squeue/scontrol spellings)
ENDED = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                   "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT", "REVOKED", "SPECIAL_EXIT"})
# a line of 'sbatch --parsable' ("ID" or "ID;CLUSTER"), or sbatch's own sentence; ASCII
# digits only: str.isdigit takes '١٢٣', which the job record's reader then refuses, hiding
# every job of the campaign
_JOB_LINE = re.compile(rf"(?:Submitted batch job )?([0-9]{{1,{JOB_ID_DIGITS_MOST}}})"
                       r"(?:;\S+| on cluster \S+)?")
INSTALL = ("is not on PATH: this machine is not a Slurm submit host (Debian/Ubuntu: "
           "apt-get install slurm-client, with the cluster's slurm.conf and munge key)")


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
            "cpus_on_node": int(cpus) if cpus and is_digits(cpus) and len(cpus) <= 9 else None,
            "exclusive": exclusive(job, env)}


def exclusive(job: str, env: Mapping[str, str] | None = None) -> bool | None:
    """Whether job ``job`` has its nodes to itself, from its record (None: unknown)."""
    try:
        done = _slurm(["scontrol", "show", "job", "-o", job], env, check=False)
    except IolabError:  # no scontrol, or no answer: a run records "unknown"
        return None
    return parse_oversubscribe(done.stdout) if done.returncode == 0 else None


def parse_oversubscribe(record: str) -> bool | None:
    """``scontrol show job -o`` output -> True for OverSubscribe=NO (the nodes are the
    job's alone), False for any other value, None without the field."""
    value = parse_record(record).get("OverSubscribe")
    return None if value is None else value == "NO"


def _slurm(argv: list[str], env: Mapping[str, str] | None = None,
           check: bool = True) -> subprocess.CompletedProcess:
    if shutil.which(argv[0]) is None:
        raise IolabError(f"{argv[0]} {INSTALL}")
    try:
        # in a process group of its own, ended whole when iolab stops waiting (a timeout, a
        # stop signal of 'iolab submit' or 'iolab status')
        done = children.run(argv, timeout=SCONTROL_TIMEOUT_S, env=dict(env or os.environ))
    except subprocess.TimeoutExpired:
        raise IolabError(f"{' '.join(argv)} did not answer within {SCONTROL_TIMEOUT_S:.0f} s: "
                         "is the Slurm controller reachable?") from None
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        raise IolabError(f"Slurm refused: {' '.join(argv)}: {said}")
    return done


class NoJobId(IolabError):
    """sbatch exited 0, so Slurm may have queued the job, yet printed no line that is its
    job id: its script must be kept, as the job may run it."""


def submit(script: str, env: Mapping[str, str] | None = None,
           dependency: str | None = None) -> str:
    """``sbatch --parsable SCRIPT`` -> the job id (Slurm's message as an error;
    :class:`NoJobId` when sbatch exited 0 but printed no job id)."""
    argv = ["sbatch", "--parsable"]
    if dependency:
        argv.append(f"--dependency={dependency}")
    out = _slurm(argv + [script], env).stdout.strip()
    job = parse_job_id(out)
    if job is None:
        raise NoJobId(f"sbatch printed {printable(excerpt(out))}, not a job id (allowed: up to "
                      f"{JOB_ID_DIGITS_MOST} digits 0-9) on any line; sbatch exited 0, so "
                      "Slurm may have queued the job")
    return job


def parse_job_id(out: str) -> str | None:
    """sbatch's standard output -> the job id on its last line that is one (``ID``,
    ``ID;CLUSTER`` or ``Submitted batch job ID``); None when no line is. Other lines are
    skipped: a site's cli_filter or job_submit plugin may print a note before the id, and
    sbatch has then queued the job all the same."""
    for line in reversed(out.splitlines()):
        found = _JOB_LINE.fullmatch(line.strip())
        if found:
            return found.group(1)
    return None


def partitions(env: Mapping[str, str] | None = None) -> list[str]:
    """The partitions of the cluster (``sinfo``), the default one first."""
    names = _slurm(["sinfo", "--all", "-h", "-o", "%P"], env).stdout.split()
    default = [n[:-1] for n in names if n.endswith("*")]
    return default + sorted({n for n in names if not n.endswith("*")} - set(default))


def parse_record(record: str) -> dict[str, str]:
    """One ``scontrol show job -o`` line -> its KEY=VALUE fields (values without spaces;
    fields such as Command keep only their first word, which is all iolab reads)."""
    fields: dict[str, str] = {}
    for word in record.split():
        key, sep, value = word.partition("=")
        if sep and key and key not in fields:
            fields[key] = value
    return fields


SQUEUE_FORMAT = "%i|%T|%M|%l|%N|%r"


def job_states(jobs: list[str], env: Mapping[str, str] | None = None) -> dict[str, dict[str, str]]:
    """Each job's ``state``, with ``elapsed``, ``limit``, ``node``, ``reason`` and
    ``exit_code`` where Slurm still says; a job Slurm no longer knows is left out."""
    if not jobs:
        return {}
    out: dict[str, dict[str, str]] = {}
    done = _slurm(["squeue", "-h", "-j", ",".join(jobs), "-o", SQUEUE_FORMAT], env, check=False)
    if done.returncode != 0 and "invalid job id" not in done.stderr.lower():
        # the controller cannot be reached: a job is not "ended" because nobody answered
        raise IolabError(f"squeue: {done.stderr.strip() or f'exit status {done.returncode}'}")
    for line in done.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 6 and parts[0] in jobs:
            out[parts[0]] = dict(zip(("job", "state", "elapsed", "limit", "node", "reason"),
                                     parts))
    for job in jobs:
        if job in out:
            continue
        record = _slurm(["scontrol", "show", "job", "-o", job], env, check=False)
        fields = parse_record(record.stdout) if record.returncode == 0 else {}
        if "JobState" in fields:
            out[job] = {"job": job, "state": fields["JobState"],
                        "elapsed": fields.get("RunTime", ""), "limit": fields.get("TimeLimit", ""),
                        "node": fields.get("NodeList", ""), "reason": fields.get("Reason", ""),
                        "exit_code": fields.get("ExitCode", "")}
    return out
