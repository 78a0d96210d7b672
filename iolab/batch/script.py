"""The text of a batch script of ``iolab submit``.

A script is meant to be read: a header saying what it runs, how it was made and how to run
it again, the ``#SBATCH`` options, and one ``iolab notebook`` command line. For ``run`` it
asks for a node of its own (``--exclusive --nodes=1``) and for SIGUSR1 some minutes before the
time limit, sent to the batch shell (``B:``); the script ignores SIGUSR1 until iolab has set
its handler and ``exec``\\ s into iolab, so iolab is the process that receives it.

Responsible for: that text, a pure function of a :class:`JobSpec`. Not responsible for:
checking the options against the cluster or submitting (``iolab.batch.submit``).
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iolab.errors import InputError
from iolab.execution import options

SLURM_OPTIONS = ("partition", "time", "nodelist", "account")
DEFAULT_SIGNAL_BEFORE_S = 300


@dataclass
class JobSpec:
    experiment: str
    environment: str
    mode: str
    data_dir: Path                 # absolute, as the job sees it
    jobs_dir: Path                 # the campaign's jobs/ folder, absolute
    python: str                    # the interpreter that has iolab
    repo: Path                     # the working folder of the job
    overrides: list[str] = field(default_factory=list)
    # the run options given (iolab.execution.options: those of 'submit'), by name
    run_options: dict[str, Any] = field(default_factory=dict)
    requeue: bool = False          # submit the next job when stopped before the time limit
    signal_before_s: int = DEFAULT_SIGNAL_BEFORE_S
    slurm: dict[str, str] = field(default_factory=dict)   # SLURM_OPTIONS given
    sbatch_args: list[str] = field(default_factory=list)  # passed through as #SBATCH lines
    written_at: str = ""
    iolab_version: str = ""

    @property
    def name(self) -> str:
        """The job's name. Jobs that measure share one per data directory, so that
        ``--dependency=singleton`` runs them one at a time."""
        if self.mode != "run":
            return f"iolab-{self.experiment}-{self.environment}"
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:8]
        return f"iolab-run-{self.data_dir.name}-{digest}"


def check_sbatch_arg(arg: str) -> str:
    """An extra sbatch option as a ``#SBATCH`` line takes it: one word, starting with -."""
    if not arg.startswith("-") or any(c.isspace() for c in arg):
        raise InputError("--sbatch", None, f"{arg!r} cannot be a #SBATCH line",
                         allowed="one sbatch option without spaces, e.g. --sbatch=--mem=0 "
                                 "or --sbatch=--constraint=nvme")
    return arg


def command(job: JobSpec) -> list[list[str]]:
    """The job's iolab command line, in the groups the script prints one per line (the
    notebook's output file, named by the job id at run time, comes last)."""
    groups = [[job.python, "-m", "iolab", "notebook", job.experiment],
              ["--env", job.environment, "--mode", job.mode], ["--data", str(job.data_dir)]]
    groups += [["--set", item] for item in job.overrides]
    groups += options.argv(job.run_options, "notebook")
    if job.requeue:
        groups.append(["--resubmit"])
    return groups


def render(job: JobSpec) -> str:
    lines = [
        "#!/bin/bash",
        f"# iolab batch job: experiment {job.experiment}, environment {job.environment}, "
        f"mode {job.mode}.",
        f"# Written by 'iolab submit' (iolab {job.iolab_version}) at {job.written_at}.",
        "# Submit it again, recording the new job for 'iolab status', with",
        f"#   iolab submit {job.experiment} --env {job.environment} --data "
        f"{shlex.quote(str(job.data_dir))} --resume",
        f"#SBATCH --job-name={job.name}",
        f"#SBATCH --output={job.jobs_dir}/%j.out",
        f"#SBATCH --error={job.jobs_dir}/%j.err",
        f"#SBATCH --chdir={job.repo}",
    ]
    if job.mode == "run":
        # nothing else on the node while it measures; iolab refuses to change system
        # settings in a shared allocation anyway
        # one measuring job per data directory at a time: its lock and knob journal are
        # seen by one node only
        lines += ["#SBATCH --exclusive", "#SBATCH --nodes=1",
                  f"#SBATCH --signal=B:USR1@{job.signal_before_s}",
                  "#SBATCH --dependency=singleton"]
    lines += [f"#SBATCH --{key}={job.slurm[key]}" for key in SLURM_OPTIONS if job.slurm.get(key)]
    lines += [f"#SBATCH {arg}" for arg in job.sbatch_args]
    lines.append("")
    if job.mode == "run":
        lines += [
            f"# Slurm sends SIGUSR1 to this process {job.signal_before_s} s before the time "
            "limit: iolab",
            "# finishes the run in progress, restores every system setting it changed",
            "# and stops. The stored runs are kept; 'iolab submit ... --resume' goes on",
            "# with the rest" + (" (this job submits it itself: --resubmit)." if job.requeue
                                 else "."),
            "# SIGUSR1 is ignored until iolab sets its handler: a warning in the",
            "# job's first moment would otherwise end it before it starts (an ignore",
            "# outlives exec). A warning lost so leaves the stop to the time limit.",
            "trap '' USR1",
        ]
    output = shlex.quote(str(job.jobs_dir)) + '/"${SLURM_JOB_ID}".ipynb'
    words = [shlex.join(group) for group in command(job)] + [f"--output {output}"]
    lines.append("exec " + " \\\n    ".join(words))
    return "\n".join(lines) + "\n"
