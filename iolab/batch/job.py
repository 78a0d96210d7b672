"""What runs inside a batch job (and behind ``iolab notebook``): the experiment's notebook
executed with papermill, this process's signals passed on to the campaign in the notebook's
kernel, the knobs of a kernel that died restored, and the next job submitted when the
campaign stopped with runs left (``--resubmit``).

The campaign runs in the notebook's kernel, a process in a session of its own: a signal sent
to this process (Slurm's warning, ``--signal=B:USR1@...``; ``kill``; Ctrl-C, which the
terminal sends to its foreground process group; a closed terminal's SIGHUP) never reaches
it. So this process answers every signal of :data:`iolab.execution.signals.TABLE` as a
plain ``iolab run`` does, and stays alive until the kernel has ended:

* a *stop now* signal (SIGINT, SIGTERM, SIGHUP, SIGUSR2, the real-time ones, ...) is sent
  on to the kernel, whose campaign then stops as ``iolab run`` does (the run in progress set
  aside, every knob restored) and whose notebook stops with it; this process then exits
  with 128 + the signal's number. (On ``scancel`` and at the time limit Slurm sends SIGTERM
  to every process of the job, the kernel's included; it gets it twice, to the same end.)
* a *stop after the run* signal (SIGUSR1) becomes a stop request (``iolab.execution.stop``)
  that the campaign reads before each run.

Once the kernel has ended, however it ended, a knob journal it left (it was killed with
SIGKILL, or its parent poller ended it with ``os._exit``, before its knobs were put back) is
restored here as ``iolab restore`` does, and said so: the knobs are never left changed
because the campaign ran in a kernel.

The executed notebook is written into a temporary file beside the output (papermill saves it
there as the cells run) and renamed onto the output when papermill is done, complete or not
(a failed cell's traceback is in it): never over anything but a regular file, and never by an
open for writing of the output's own name (:mod:`iolab.safefiles`).

Responsible for: executing the notebook, passing signals and the stop on, restoring what a
dead kernel left, and resubmitting.
Not responsible for: the campaign (the notebook's ``iolab.api.chapter``) or the job's script
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
from iolab.errors import InputError, IolabError, shell_word
from iolab.execution import options, stop
from iolab.execution.signals import STOP_AFTER_RUN, STOP_NOW, answered, signal_name
from iolab.paths import resolve_data_dir
from iolab.procs import start_ticks
from iolab.safefiles import check_output, temp_beside

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
                 resubmit: bool = False, log: Callable[[str], None] = print,
                 **run_options: Any) -> int:
    """Execute the notebook; the exit status is 0 also when the campaign stopped on request
    with runs left (the job ends cleanly; ``iolab status`` says what is left), and 128 + N
    when signal N stopped it at once. ``run_options``: those of ``iolab notebook``
    (``iolab.execution.options``), passed to the notebook as its ``run_options``: only those
    given (a list empty, a switch off or a count None is not)."""
    options.check(run_options, "notebook", "iolab notebook", None)
    data = resolve_data_dir(data_dir)
    job = _Job(experiment, environment, mode, output, data_dir, data, list(overrides),
               options.given(run_options, "notebook"), resubmit)
    # first of all: SIGUSR1's default action ends the process, and Slurm may send it early
    with _Relay(data) as relay:
        try:
            status = _run(job, relay, log)
        finally:
            if relay.asked:
                stop.clear(data)  # a request the campaign did not get to read is not left behind
    if relay.now is not None:
        _after_signal(job, relay.now, log)
        return 128 + relay.now
    return status


class _Relay:
    """Within the block, this process's answers to the signals of
    :data:`~iolab.execution.signals.TABLE` while a notebook's kernel runs the campaign (see
    the module docstring); the previous handlers are put back after it. A handler raises
    nothing: it records the signal and passes it on."""

    def __init__(self, data: Path):
        self.data = data
        self.now: int | None = None     # the first stop-now signal received
        self.asked: list[str] = []      # the stop-after-the-run signals received, by name
        self._kernel: tuple[int, str | None] | None = None  # (pid, start) of the kernel
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Relay:
        for action, handler in ((STOP_NOW, self._stop_now), (STOP_AFTER_RUN, self._after_run)):
            for sig in answered(action):
                # a handler installed outside Python could not be put back: it stays
                if signal.getsignal(sig) is not None:
                    self._previous[sig] = signal.signal(sig, handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def kernel_started(self, pid: int) -> None:
        """The kernel runs as process ``pid``; a stop asked for before is passed on at once."""
        self._kernel = (pid, start_ticks(pid))
        if self.now is not None:
            self._pass_on(self.now)

    def kernel_ended(self) -> None:
        self._kernel = None

    def _stop_now(self, signum: int, frame: Any) -> None:
        if self.now is None:
            self.now = signum
        self._pass_on(signum)

    def _pass_on(self, signum: int) -> None:
        if self._kernel is None:
            return
        pid, started = self._kernel
        if start_ticks(pid) != started:  # gone, and its number maybe another process's now
            return
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _after_run(self, signum: int, frame: Any) -> None:
        self.asked.append(signal_name(signum))
        stop.request(self.data, WARNING if signum == signal.SIGUSR1
                     else f"{signal_name(signum)} to process {os.getpid()}")


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
    run_options: dict[str, Any]  # the notebook's: only those given
    resubmit: bool

    def stored(self) -> tuple[int, int]:
        return _stored(self.experiment, self.environment, self.data, self.overrides,
                       list(self.run_options.get("where", [])))

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


def _run(job: _Job, relay: _Relay, log: Callable[[str], None]) -> int:
    exp = registry.get(job.experiment)
    specmod.load(exp, job.environment, params_dir=exp.params_dir, overrides=job.overrides)
    run_options = job.run_options
    _check_run_options(run_options, job.mode, exp.notebook)
    params = job.params(run_options)
    before = job.stored()[0] if job.mode == "run" and job.resubmit else 0
    if relay.now is not None:  # stopped before the kernel started: nothing ran
        return 0
    try:
        _execute_into(exp.notebook, job, params, relay, log)
    # after a stop-now signal, how the notebook ended is its consequence, not the news: the
    # campaign's cell stops it, or the signal ends a kernel that is between cells
    except Exception as exc:
        if relay.now is None:
            raise
        log(str(exc) if isinstance(exc, IolabError) else f"{type(exc).__name__}: {exc}")
    finally:
        relay.kernel_ended()
        if job.mode == "run":  # an error restoring is raised, whatever ended the notebook
            _restore_left(job, log)
    if relay.asked and job.mode == "run" and relay.now is None:
        _after_stop(job, relay.asked, before, log)
    return 0


def _restore_left(job: _Job, log: Callable[[str], None]) -> None:
    """The kernel has ended: the knobs of a journal it left (killed, or ended by
    ``os._exit``, before it put them back) are restored, as ``iolab restore`` does."""
    from iolab.execution.runner import default_journal, restore_left

    if not os.path.lexists(default_journal(job.data)):
        return
    log("the notebook's kernel ended without putting back the knobs its campaign changed "
        "(it was killed, or ended by os._exit); restoring them from its journal, as "
        "'iolab restore' does:")
    for line in restore_left(job.data):
        log(f"  {line}")


def _execute_into(notebook: Path, job: _Job, params: dict[str, Any], relay: _Relay,
                  log: Callable[[str], None]) -> None:
    """Execute ``notebook`` into a temporary file, renamed onto the job's output once papermill
    wrote anything into it (also when the notebook failed: the traceback is in it)."""
    from iolab.report.book import execute

    check_output(job.output, "-o", data_dir=job.data)
    with temp_beside(job.output, mode=None, suffix=".ipynb") as (fd, tmp):
        os.close(fd)
        try:
            execute(notebook, tmp, params, shown=job.output, on_kernel=relay.kernel_started)
        finally:
            if tmp.stat().st_size:  # papermill wrote it
                if job.mode == "run":  # also a notebook whose campaign failed
                    _mark_replay(tmp, log, shown=job.output)
                # nothing put there since is replaced
                check_output(job.output, "-o", data_dir=job.data)
                os.replace(tmp, job.output)
                log(f"wrote {job.output}")


def _check_run_options(run_options: dict[str, Any], mode: str, notebook: Path) -> None:
    """Refuse run options that would not be used: outside mode run, or by a notebook whose
    parameters cell takes none."""
    given = "/".join(options.flags(run_options))
    if run_options and mode != "run":
        raise InputError(given, None, f"only choose what a campaign runs, and mode is {mode}",
                         allowed="--mode run")
    if run_options and not _takes(notebook, "run_options"):
        raise InputError(notebook, "run_options", "its parameters cell has no run_options, "
                         f"so {given} would be ignored",
                         allowed="a parameters cell with 'run_options = {}' passed to "
                                 "iolab.api.chapter")


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


def _after_signal(job: _Job, signum: int, log: Callable[[str], None]) -> None:
    """After a stop-now signal: what was done with it, and how to go on."""
    what = ("passed on to the campaign in the notebook's kernel, which stops as 'iolab run' "
            "does: the run in progress set aside, every knob restored"
            if job.mode == "run" else "passed on to the notebook's kernel")
    then = ("no next job is submitted; " if job.resubmit else "")
    log(f"interrupted by {signal_name(signum)}: {what}; {then}run the same command again to "
        "go on")


def _after_stop(job: _Job, asked: list[str], before: int, log: Callable[[str], None]) -> None:
    """After a stop on request (``asked``: the signals): say what is left and, with
    ``--resubmit``, submit the next job if this one stored runs (``before``: those stored
    when it started)."""
    stored, left = job.stored()
    if not left:
        log(f"asked to stop ({', '.join(asked)}), but no run is left: the campaign is complete")
        return
    log(f"stopped on request ({', '.join(asked)}) with {left} runs left")
    if job.resubmit and stored > before:
        from iolab.batch.submit import resume

        resume(job.experiment, job.environment, job.data,
               after=os.environ.get("SLURM_JOB_ID"), log=log)
    elif job.resubmit:
        log("no run was completed in this job before the stop, so no next job is submitted "
            "(it would stop the same way): give the job a longer --time")
    else:
        log(f"go on with: iolab submit {job.experiment} --env {job.environment} "
            f"--data {shell_word(job.data)} --resume")
