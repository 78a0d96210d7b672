"""``iolab submit``: check, write and submit the batch jobs of campaigns, and submit a
campaign's last script again (``--resume``).

Everything that can be known before submitting is checked before anything is written: that
``sbatch`` is there, the params with their ``--set`` overrides and ``--where`` filters, the
partition (from ``sinfo``), that the data directory and the campaign's ``jobs/`` folder can be
written (and that neither ``jobs/`` nor a folder above it in the data directory is a link,
which is never written through), and (for ``run``) that some run is left to do. What only Slurm can judge (an account,
a time limit over the partition's) comes back as Slurm's own message, and the script written
for a job that was refused is removed again, as is one not submitted because a stop signal
(Ctrl-C, SIGTERM) came first or ended ``sbatch``; a job Slurm took always gets its record.

Responsible for: those checks, the job's script and record, and submitting. Not responsible
for: the script's text (``iolab.batch.script``), what the job does (``iolab.batch.job``).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from iolab import __version__, children
from iolab.batch import jobs, script
from iolab.core import datadir
from iolab.core.planner import MAX_RUNS
from iolab.errors import InputError, IolabError, excerpt, printable, shell_word
from iolab.execution import options
from iolab.host import slurm
from iolab.durable import write_atomic
from iolab.parsers import is_digits
from iolab.paths import REPO_ROOT, resolve_data_dir
from iolab.safefiles import check_regular, refuse_linked

MODES = ("run", "replay", "plan")
# sbatch --signal=B:USR1@SECONDS: Slurm holds the time in 16 bits and refuses more
SIGNAL_BEFORE_MOST_S = 65535


@dataclass
class Request:
    """What the user asked for, the same for every experiment and environment submitted."""

    mode: str = "run"
    data_dir: str | Path | None = None
    overrides: list[str] = field(default_factory=list)
    # the options given that each job's notebook takes as its run_options, by name
    # (iolab.execution.options: those of 'submit')
    run_options: dict[str, Any] = field(default_factory=dict)
    requeue: bool = False
    signal_before_s: int = script.DEFAULT_SIGNAL_BEFORE_S
    slurm: dict[str, str] = field(default_factory=dict)
    sbatch_args: list[str] = field(default_factory=list)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _need_sbatch() -> None:
    """Before any planning or writing: without sbatch nothing can be submitted."""
    if shutil.which("sbatch") is None:
        raise IolabError(f"sbatch {slurm.INSTALL}; nothing was submitted")


def _check_request(request: Request) -> None:
    if request.mode not in MODES:
        raise InputError("--mode", None, f"unknown mode {request.mode!r}", allowed=", ".join(MODES))
    options.check(request.run_options, "submit", "iolab submit", None)
    limit = request.run_options.get("limit")
    if limit is not None and not 1 <= limit <= MAX_RUNS:
        raise InputError("--limit", None, f"{limit} runs per job",
                         allowed=f"1 to {MAX_RUNS:,} (the most runs a plan holds)")
    if not 1 <= request.signal_before_s <= SIGNAL_BEFORE_MOST_S:
        raise InputError("--signal-before", None, f"{request.signal_before_s} s",
                         allowed=f"1 to {SIGNAL_BEFORE_MOST_S} seconds (what Slurm's "
                         "--signal takes)")
    limit_s = _check_time(request.slurm.get("time"))
    if limit_s is not None and request.mode == "run" and limit_s <= request.signal_before_s:
        raise InputError("--time", None, f"{request.slurm['time']} is not longer than "
                         f"--signal-before ({request.signal_before_s} s): the job would be told "
                         "to stop as it starts", allowed="a longer --time or a shorter "
                         "--signal-before")
    for arg in request.sbatch_args:
        script.check_sbatch_arg(arg)
    for key, value in request.slurm.items():
        if key not in script.SLURM_OPTIONS:
            raise InputError("Slurm options", key, "not an option of iolab submit",
                             allowed=", ".join(script.SLURM_OPTIONS))
        if not value or any(c.isspace() for c in value):
            raise InputError(f"--{key}", None, f"{value!r} is empty or has spaces",
                             allowed="one word, as sbatch takes it")
    _need_sbatch()
    partition = request.slurm.get("partition")
    if partition:
        known = slurm.partitions()
        unknown = [name for name in partition.split(",") if name not in known]
        if unknown:
            raise InputError("--partition", None, f"no partition {unknown[0]!r} on this cluster",
                             allowed=", ".join(known) or "none (sinfo lists no partitions)")


# The longest --time taken: a year. Slurm holds a limit in 32-bit minutes (8,000 years) and
# cuts it to the partition's MaxTime; a longer one is a typo ('UNLIMITED' asks for none).
TIME_MOST_S = 365 * 24 * 3600
TIME_CHARS_MOST = 32  # 'DDDD-HH:MM:SS' and 'UNLIMITED' are far shorter


def _check_time(limit: str | None) -> int | None:
    """``--time`` in seconds (None: not given, or for Slurm to read); InputError, before
    anything is written or submitted, for a limit in other than ASCII characters (``str``
    takes '²' and '٥' as digits; Slurm reads neither, and the #SBATCH line would carry them),
    one longer than any limit is written, or one above :data:`TIME_MOST_S`."""
    if limit is None:
        return None
    allowed = ("M, M:S, H:M:S, D-H, D-H:M or D-H:M:S in the digits 0-9, at most "
               f"{TIME_MOST_S // 86400} days, or UNLIMITED")
    if not limit.isascii() or len(limit) > TIME_CHARS_MOST:
        raise InputError("--time", None, f"{excerpt(limit[:TIME_CHARS_MOST])}"
                         f"{'...' if len(limit) > TIME_CHARS_MOST else ''} is no Slurm time "
                         "limit", allowed=allowed)
    limit_s = seconds(limit)
    if limit_s is not None and limit_s > TIME_MOST_S:
        raise InputError("--time", None, f"{limit} is {limit_s / 86400:,.0f} days",
                         allowed=allowed)
    return limit_s


def seconds(limit: str) -> int | None:
    """A Slurm time limit (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in seconds; None for what
    only Slurm can read (UNLIMITED, empty, a typo: sbatch then says what is wrong). Digits
    are ASCII 0-9 (``str.isdigit`` takes '²', which ``int`` refuses)."""
    days, rest = 0, limit
    if "-" in limit:
        day, rest = limit.split("-", 1)
        if not is_digits(day) or len(day) > TIME_CHARS_MOST:
            return None
        days = int(day)
    parts = rest.split(":")
    if len(parts) > 3 or not all(is_digits(p) and len(p) <= TIME_CHARS_MOST for p in parts):
        return None
    v = [int(p) for p in parts]
    if "-" in limit:
        h, m, sec = (v + [0, 0])[:3]
    elif len(v) == 3:
        h, m, sec = v
    else:
        h, m, sec = 0, v[0], (v[1] if len(v) == 2 else 0)
    return ((days * 24 + h) * 60 + m) * 60 + sec


def _check_path(path: Path, what: str) -> None:
    # a #SBATCH line ends at white space, and Slurm expands % in file names
    if any(c.isspace() for c in str(path)) or "%" in str(path):
        raise InputError(path, None, f"{what} has white space or '%', which a #SBATCH line "
                         "cannot hold", allowed="a path without spaces or %")


def _prepare(experiment: str, environment: str, request: Request, data_dir: Path,
             log: Callable[[str], None]) -> script.JobSpec | None:
    from iolab.execution.campaign import Campaign

    camp = Campaign(experiment, environment, data_dir=data_dir, overrides=request.overrides)
    where = request.run_options.get("where", [])
    camp.where(where)  # a bad filter is an error now, not in the job
    if request.mode == "run":
        plan = camp.plan(where=where, limit=request.run_options.get("limit"))
        if not left_to_run(plan):
            log(f"{experiment}/{environment}: nothing to run (stored {len(plan.by_status('stored'))} "
                "of the selected runs); not submitted")
            return None
        log(plan.summary())
        if not plan.selected():
            log(f"{experiment}/{environment}: note: every run left is blocked on this machine "
                "(the plan says why); the job's node decides for itself")
        missing = [p["name"] for p in plan.missing_programs() if p["needed_now"]]
        if missing:
            log(f"{experiment}/{environment}: note: {', '.join(missing)} not found on this "
                "machine; the job's node must have them")
    folder = jobs.jobs_dir(camp.store.root)
    _check_path(folder, "the campaign's jobs folder")
    _check_path(REPO_ROOT, "the repository")
    return script.JobSpec(
        experiment=experiment, environment=environment, mode=request.mode,
        data_dir=data_dir, jobs_dir=folder, python=sys.executable, repo=REPO_ROOT,
        overrides=list(request.overrides), run_options=dict(request.run_options),
        requeue=request.requeue,
        signal_before_s=request.signal_before_s,
        slurm=dict(request.slurm), sbatch_args=list(request.sbatch_args),
        written_at=_now(), iolab_version=__version__)


def left_to_run(plan) -> int:
    """Runs not stored yet that a job might make: those this machine would run and those it
    blocks, since the submitting machine may not be the job's node (a login node cannot
    change THP, has no GPU, ...)."""
    counts = plan.counts()
    return counts["to run"] + counts["blocked"]


def _options(request: Request) -> dict[str, Any]:
    return {"overrides": request.overrides, **options.recorded(request.run_options, "submit"),
            "requeue": request.requeue, "signal_before_s": request.signal_before_s,
            "slurm": request.slurm, "sbatch_args": request.sbatch_args}


def _remove_new(created: list[Path]) -> None:
    """Remove the folders this submission created, deepest first, where empty."""
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:
            pass


def _mkdirs(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; returns those created, outermost first."""
    missing = [p for p in [folder, *folder.parents] if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def follow(record: jobs.JobRecord, folder: Path, data_dir: Path) -> str:
    """What was submitted and the commands that follow it, each path quoted as one word
    (:func:`shell_word`): a data folder named with ``$(...)`` is pasted, never run."""
    return (f"submitted job {record.job_id} ({record.mode}); script "
            f"{printable(str(folder / record.script))}\n"
            f"  follow it: squeue -j {shell_word(record.job_id)}; "
            f"tail -f {shell_word(record.output(folder))}; "
            f"iolab status --data {shell_word(data_dir)}\n"
            f"  its executed notebook will be {printable(str(record.notebook(folder)))}")


def submit(experiments: list[str], environments: list[str], request: Request,
           log: Callable[[str], None] = print) -> list[jobs.JobRecord]:
    """One job per experiment and environment, each named once however often it is given;
    returns their records. Every script is written before the first is submitted, so that a
    folder that cannot be written stops them all."""
    experiments, environments = list(dict.fromkeys(experiments)), list(dict.fromkeys(environments))
    _check_request(request)
    data_dir = resolve_data_dir(request.data_dir).resolve()
    _check_path(data_dir, "the data directory")
    datadir.check(data_dir)
    specs = [s for s in (_prepare(e, v, request, data_dir, log)
                         for e in experiments for v in environments) if s is not None]
    if not specs:
        return []
    for spec in specs:  # before anything is written: a link is never written through
        refuse_linked(spec.jobs_dir, jobs.ROLE, jobs.DEPTH)
    created = [] if data_dir.exists() else [data_dir]
    datadir.check(data_dir, write=True, given=request.data_dir or os.environ.get("IOLAB_DATA"))
    written: list[tuple[script.JobSpec, Path]] = []
    try:
        for spec in specs:
            created += _mkdirs(spec.jobs_dir)
            refuse_linked(spec.jobs_dir, jobs.ROLE, jobs.DEPTH)  # one put there since
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
            path = spec.jobs_dir / f"{stamp}-{spec.mode}.sh"
            # a new name only (linked into place: whatever is there is kept, never written)
            write_atomic(path, script.render(spec).encode(), exclusive=True, mode=0o755)
            written.append((spec, path))
    except BaseException as exc:  # a refusal, or a stop signal (Ctrl-C, SIGTERM): none is kept
        for _, path in written:
            path.unlink(missing_ok=True)
        _remove_new(created)
        if isinstance(exc, OSError):
            raise datadir.from_os_error(exc, "cannot write a job's script; nothing was "
                                        "submitted") from None
        raise
    return _send(written, request, data_dir, created, log)


def _send(written: list[tuple[script.JobSpec, Path]], request: Request, data_dir: Path,
          created: list[Path], log: Callable[[str], None]) -> list[jobs.JobRecord]:
    """Submit each written script and record its job. A script that was not submitted (Slurm
    refused it, or a stop signal came first or ended sbatch) is removed with those after it:
    no script is left without a record, but for one sbatch took without printing a job id
    (:class:`slurm.NoJobId`): Slurm may run its job, so it is kept and named."""
    records: list[jobs.JobRecord] = []
    try:
        for spec, path in written:
            # a signal waits until the job Slurm took has its record (iolab.children)
            with children.held():
                job = slurm.submit(str(path))
                record = jobs.JobRecord(job_id=job, script=path.name, submitted_at=_now(),
                                        mode=spec.mode, options=_options(request))
                records.append(record)
                jobs.write(spec.jobs_dir, record)
            log(follow(record, spec.jobs_dir, data_dir))
    except BaseException as exc:
        taken = isinstance(exc, slurm.NoJobId)
        for _, unsent in written[len(records) + taken:]:
            unsent.unlink(missing_ok=True)
        _remove_new(created)
        if not isinstance(exc, IolabError):
            raise
        raise IolabError(f"{exc}{_sent(records, written[len(records)][1] if taken else None)}"
                         ) from None
    return records


def _sent(records: list[jobs.JobRecord], kept: Path | None) -> str:
    """What a failed submission had sent, for its message: the jobs submitted before it,
    and the script kept of a job sbatch may have queued without saying its id."""
    before = ", ".join(f"job {r.job_id}" for r in records)
    if kept is None:
        return f"; submitted before it: {before}" if records else "; nothing was submitted"
    return (f"; its script is kept, unrecorded: {kept} (find its job with 'squeue --me'; "
            "'iolab status' does not know it)"
            + (f"; submitted before it: {before}" if records else ""))


def resume(experiment: str, environment: str, data_dir: str | Path | None, *,
           after: str | None = None, log: Callable[[str], None] = print) -> jobs.JobRecord | None:
    """Submit the campaign's last script again, after its job if that has not ended (or
    after ``after``, the job that calls this); None when nothing is left to run."""
    from iolab.execution.campaign import Campaign

    _need_sbatch()
    data_dir = datadir.check(resolve_data_dir(data_dir)).resolve()
    camp = Campaign(experiment, environment, data_dir=data_dir)
    folder = jobs.jobs_dir(camp.store.root)
    records = jobs.read_all(folder)
    if not records:
        raise IolabError(f"no job was submitted for {experiment}/{environment} on {data_dir} "
                         f"({folder} has no job records); use iolab submit without --resume")
    last = records[-1]
    path = folder / last.script  # a file name in jobs/ (jobs.read_all checks it)
    # a link is never followed, a FIFO never submitted: NotOurs naming it
    if check_regular(path, f"the script of job {last.job_id}") is None:
        raise IolabError(f"{path}, the script of job {last.job_id}, is gone; submit anew")
    if last.mode == "run":
        options = last.options
        again = Campaign(experiment, environment, data_dir=data_dir,
                         overrides=options.get("overrides") or [])
        plan = again.plan(where=options.get("where") or [])
        if not left_to_run(plan):
            log(f"{experiment}/{environment}: nothing left to run for the options of job "
                f"{last.job_id}; not submitted")
            return None
    if after is None:
        state = slurm.job_states([last.job_id]).get(last.job_id)
        if state is not None and state["state"] not in slurm.ENDED:
            after = last.job_id
    # given on the command line, a dependency replaces the script's: singleton is repeated
    dependency = ",".join(([f"afterany:{after}"] if after else [])
                          + (["singleton"] if last.mode == "run" else []))
    with children.held():  # a job Slurm took gets its record before a signal is acted on
        job = slurm.submit(str(path), dependency=dependency or None)
        record = jobs.JobRecord(job_id=job, script=last.script, submitted_at=_now(),
                                mode=last.mode, options=last.options, resumes=last.job_id,
                                submitted_by=(f"job {after} (--resubmit)"
                                              if after and after == os.environ.get("SLURM_JOB_ID")
                                              else "iolab submit --resume"))
        jobs.write(folder, record)
    log(follow(record, folder, data_dir))
    return record
