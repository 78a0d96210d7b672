"""What runs inside a batch job (and behind ``iolab notebook``): the experiment's notebook
executed with papermill, Slurm's warning before the time limit passed on to the campaign, and
the next job submitted when the campaign stopped with runs left (``--resubmit``).

The campaign runs in the notebook's kernel, a process in a session of its own, while Slurm's
warning (SIGUSR1, ``--signal=B:USR1@...``) reaches only this process, the job's first; so
this process turns SIGUSR1 and SIGTERM into a stop request (``iolab.execution.stop``) that the
campaign reads before each run, and stays alive until the kernel has stored its last run and
restored its knobs. (On ``scancel`` and at the time limit Slurm sends SIGTERM to every process
of the job, the kernel's included, which ends the run in progress at once and discards it.)

The executed notebook is written into a temporary file beside the output (papermill saves it
there as the cells run) and renamed onto the output when papermill is done, complete or not
(a failed cell's traceback is in it): never over anything but a regular file, and never by an
open for writing of the output's own name (:mod:`iolab.safefiles`).

Responsible for: executing the notebook, passing the stop on, and resubmitting.
Not responsible for: the campaign (the notebook's ``Chapter``) or the job's script
(``iolab.batch.script``).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import nbformat

from iolab.core import registry
from iolab.core import spec as specmod
from iolab.errors import InputError
from iolab.execution import stop
from iolab.paths import resolve_data_dir
from iolab.safefiles import check_output, new_temp

WARNING = "Slurm's warning before the job's time limit (SIGUSR1)"


def _takes(notebook: Path, name: str) -> bool:
    nb = nbformat.read(notebook, as_version=4)
    return any(f"{name} =" in c.source for c in nb.cells
               if "parameters" in c.metadata.get("tags", []))


REPLAY_NOTE = ("# written by a campaign (mode \"run\"); executed again, this notebook replays "
               "the stored runs and measures nothing")


def as_replay(nb: nbformat.NotebookNode) -> bool:
    """Make a notebook that ran a campaign replay when it is executed again (by Jupyter,
    MyST-NB or papermill without parameters): its injected parameters say ``mode =
    "replay"``, with a note, and lose the run options. Its outputs, what the campaign did,
    stay. True when there was such a cell to change."""
    for cell in nb.cells:
        if "injected-parameters" not in cell.metadata.get("tags", []):
            continue
        lines = [line for line in cell.source.splitlines()
                 if not line.startswith("run_options = ")]
        lines = [f'mode = "replay"\n{REPLAY_NOTE}' if line.strip() == 'mode = "run"' else line
                 for line in lines]
        cell.source = "\n".join(lines)
        return True
    return False


def _stored(experiment: str, environment: str, data_dir: Path, overrides: list[str],
            where: list[str]) -> tuple[int, int]:
    """(stored, still to run) of the campaign's selected points."""
    from iolab.execution.campaign import Campaign

    plan = Campaign(experiment, environment, data_dir=data_dir, overrides=overrides).plan(
        where=where)
    return len(plan.by_status("stored")), len(plan.selected())


def run_notebook(experiment: str, environment: str, *, mode: str, output: Path,
                 data_dir: str | Path | None = None, overrides: list[str] = (),
                 where: list[str] = (), limit: int | None = None,
                 allow_shared_node: bool = False, allow_host_change: bool = False,
                 resubmit: bool = False,
                 log: Callable[[str], None] = print) -> int:
    """Execute the notebook; the exit status is 0 also when the campaign stopped on request
    with runs left (the job ends cleanly; ``iolab status`` says what is left)."""
    data = resolve_data_dir(data_dir)
    asked: list[str] = []

    def on_signal(signum: int, frame: Any) -> None:
        if signum == signal.SIGTERM and signal.SIGTERM.name in asked:
            raise KeyboardInterrupt  # a second SIGTERM: stop waiting for the kernel
        asked.append(signal.Signals(signum).name)
        stop.request(data, WARNING if signum == signal.SIGUSR1
                     else f"SIGTERM to process {os.getpid()}")

    # first of all: SIGUSR1's default action ends the process, and Slurm may send it early
    handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGUSR1, signal.SIGTERM)}
    try:
        return _run(_Job(experiment, environment, mode, output, data_dir, data, list(overrides),
                         list(where), limit, allow_shared_node, allow_host_change, resubmit),
                    asked, log)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        if asked:
            stop.clear(data)  # a request the campaign did not get to read is not left behind


@dataclass
class _Job:
    """What a job is asked to do: :func:`run_notebook`'s arguments, with ``data`` the data
    folder resolved."""
    experiment: str
    environment: str
    mode: str
    output: Path
    data_dir: str | Path | None
    data: Path
    overrides: list[str]
    where: list[str]
    limit: int | None
    allow_shared_node: bool
    allow_host_change: bool
    resubmit: bool

    def stored(self) -> tuple[int, int]:
        return _stored(self.experiment, self.environment, self.data, self.overrides, self.where)

    def run_options(self) -> dict[str, Any]:
        """The notebook's ``run_options``: only those given."""
        run_options: dict[str, Any] = {}
        if self.where:
            run_options["where"] = self.where
        if self.limit is not None:
            run_options["limit"] = self.limit
        if self.allow_shared_node:
            run_options["allow_shared_node"] = True
        if self.allow_host_change:
            run_options["allow_host_change"] = True
        return run_options

    def params(self, run_options: dict[str, Any]) -> dict[str, Any]:
        """The parameters papermill injects into the notebook."""
        params: dict[str, Any] = {
            "environment": self.environment, "mode": self.mode,
            "overrides": specmod.parse_assignments(self.overrides, "--set")}
        if run_options:
            params["run_options"] = run_options
        if self.data_dir is not None:
            params["data_dir"] = str(self.data_dir)
        return params


def _run(job: _Job, asked: list[str], log: Callable[[str], None]) -> int:
    exp = registry.get(job.experiment)
    specmod.load(exp, job.environment, params_dir=exp.params_dir, overrides=job.overrides)
    run_options = job.run_options()
    _check_run_options(run_options, job.mode, exp.notebook)
    params = job.params(run_options)
    before = job.stored()[0] if job.mode == "run" and job.resubmit else 0
    _execute_into(exp.notebook, job, params, log)
    log(f"wrote {job.output}")
    if asked and job.mode == "run":
        _after_stop(job, asked, before, log)
    return 0


def _execute_into(notebook: Path, job: _Job, params: dict[str, Any],
                  log: Callable[[str], None]) -> None:
    """Execute ``notebook`` into a temporary file, renamed onto the job's output once papermill
    wrote anything into it (also when the notebook failed: the traceback is in it)."""
    from iolab.report.book import execute

    check_output(job.output, "-o")
    fd, tmp = new_temp(job.output, mode=None, suffix=".ipynb")
    os.close(fd)
    try:
        try:
            execute(notebook, tmp, params, shown=job.output)
        finally:
            if tmp.stat().st_size:  # papermill wrote it
                if job.mode == "run":  # also a notebook whose campaign failed
                    _mark_replay(tmp, log, shown=job.output)
                check_output(job.output, "-o")  # nothing put there since is replaced
                os.replace(tmp, job.output)
    finally:
        tmp.unlink(missing_ok=True)


def _check_run_options(run_options: dict[str, Any], mode: str, notebook: Path) -> None:
    """Refuse run options that would not be used: outside mode run, or by a notebook whose
    parameters cell takes none."""
    if run_options and mode != "run":
        raise InputError("--where/--limit/--allow-*", None,
                         f"only choose what a campaign runs, and mode is {mode}",
                         allowed="--mode run")
    if run_options and not _takes(notebook, "run_options"):
        raise InputError(notebook, "run_options", "its parameters cell has no run_options, "
                         "so --where, --limit and --allow-* would be ignored",
                         allowed="a parameters cell with 'run_options = {}' passed to Chapter")


def _mark_replay(output: Path, log: Callable[[str], None], shown: Path | None = None) -> None:
    """Make the written notebook replay when executed again (:func:`as_replay`), or say how
    to. ``shown``: the name the user knows it by (``output`` is its temporary file)."""
    try:
        written = nbformat.read(output, as_version=4)
        if as_replay(written):
            nbformat.write(written, output)
    except (OSError, ValueError) as exc:  # half-written: the first error matters
        log(f"{shown or output}: could not mark it to replay when executed again ({exc}); "
            f"set mode = \"replay\" in its parameters before running it again")


def _after_stop(job: _Job, asked: list[str], before: int, log: Callable[[str], None]) -> None:
    """After a stop on request (``asked``: the signals): say what is left and, with
    ``--resubmit``, submit the next job if this one stored runs (``before``: those stored
    when it started)."""
    stored, left = job.stored()
    if not left:
        log(f"asked to stop ({', '.join(asked)}), but no run is left: the campaign is complete")
        return
    log(f"stopped on request ({', '.join(asked)}) with {left} runs left")
    if signal.SIGTERM.name in asked:
        # scancel, or the time limit itself: the job is being ended, not asked to make room
        log("ended by SIGTERM (scancel or the time limit): no next job is submitted; go on "
            f"with: iolab submit {job.experiment} --env {job.environment} --data {job.data} "
            "--resume")
    elif job.resubmit and stored > before:
        from iolab.batch.submit import resume

        resume(job.experiment, job.environment, job.data,
               after=os.environ.get("SLURM_JOB_ID"), log=log)
    elif job.resubmit:
        log("no run was completed in this job before the stop, so no next job is submitted "
            "(it would stop the same way): give the job a longer --time")
    else:
        log(f"go on with: iolab submit {job.experiment} --env {job.environment} "
            f"--data {job.data} --resume")
