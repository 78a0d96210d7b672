"""The Slurm jobs of a campaign: one record per submitted job in the campaign's ``jobs/``
folder, beside the batch script it ran, its output and error files and its executed notebook.

``jobs/<id>.json`` holds the job id, when and how it was submitted, the script, the options
(what to run again on ``--resume``) and the job it resumes, if any. A job's state is not
stored: it is asked of Slurm when shown (``iolab.host.slurm.job_states``).

A record's ``job_id`` is its file's name, a Slurm job id (digits, at most
:data:`~iolab.host.slurm.JOB_ID_DIGITS_MOST`, as sbatch's answer is checked); a record that
says otherwise is refused, naming it and the key. Records are read only when they are regular
files of at most :data:`RECORD_MOST` bytes, and nothing is read or written through a ``jobs/``
(or campaign) folder that is a link (:mod:`iolab.safefiles`). A record's ``script`` is the
file name iolab gave the script in ``jobs/`` (:data:`SCRIPT_NAME`): a path outside it, ``..``
or a folder is refused, and ``--resume`` submits it only when it is a regular file there,
never through a link.

Responsible for: writing, reading and describing records. Not responsible for: submitting
(``iolab.batch.submit``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iolab.durable import write_json_atomic
from iolab.errors import InputError, ParseError, excerpt, printable
from iolab.host.slurm import JOB_ID_DIGITS_MOST
from iolab.parsers import is_digits, load_json
from iolab.safefiles import read_regular, refuse_linked

FOLDER = "jobs"
ROLE = "the campaign's Slurm jobs (jobs/)"
# jobs/, the campaign's folder, the experiment's and raw/: none is followed if it is a link
DEPTH = 4
RECORD_MOST = 1 << 20  # bytes of a record at most: iolab writes a few hundred
# the name 'iolab submit' gives a job's script in jobs/: <UTC stamp>-<mode>.sh, a file name
# (no folder, no '..'), so that --resume never submits a script outside the campaign
SCRIPT_NAME = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{6}Z-[a-z]+\.sh")
SCRIPT_ALLOWED = "the file name 'iolab submit' gives a job's script in jobs/ (e.g. " \
                 "20250101T120000.000000Z-run.sh), no folder, '..' or other path"


def jobs_dir(campaign_root: Path) -> Path:
    return Path(campaign_root) / FOLDER


@dataclass
class JobRecord:
    job_id: str
    script: str                    # file name in jobs/
    submitted_at: str
    mode: str
    options: dict[str, Any] = field(default_factory=dict)
    resumes: str | None = None     # the job this one goes on from
    submitted_by: str = "iolab submit"

    def output(self, folder: Path) -> Path:
        return folder / f"{self.job_id}.out"

    def notebook(self, folder: Path) -> Path:
        return folder / f"{self.job_id}.ipynb"


def write(folder: Path, record: JobRecord) -> Path:
    refuse_linked(folder, ROLE, DEPTH)
    path = folder / f"{record.job_id}.json"
    write_json_atomic(path, asdict(record))
    return path


def read_all(folder: Path) -> list[JobRecord]:
    """The records of ``folder``, oldest first (by job id, which Slurm counts up). A record
    is read only when it is a regular file: a FIFO there would block ``iolab status`` for
    ever, a link to /dev/zero fill the memory (NotOurs, in one line); a ``folder`` that is a
    link is refused alike."""
    refuse_linked(folder, ROLE, DEPTH)
    if not folder.is_dir():
        return []
    out = []
    for path in folder.glob("*.json"):
        if not is_digits(path.stem):  # '١٢٣.json' too: no record of ours, which hid the rest
            continue
        raw = read_regular(path, "a Slurm job's record", RECORD_MOST)
        if raw is None:
            continue  # removed since it was listed
        try:
            doc = load_json(raw.decode("utf-8"), str(path))  # nested too deeply: ParseError
            out.append(JobRecord(**doc))
        except (ValueError, TypeError, ParseError) as exc:
            raise InputError(path, None, f"is not a job record ({exc})",
                             allowed="the JSON 'iolab submit' writes") from None
        _check_record(out[-1], path)
    return sorted(out, key=lambda r: int(r.job_id))


# each field's kind, as 'iolab submit' writes it
_KINDS = {"job_id": str, "script": str, "submitted_at": str, "mode": str, "options": dict,
          "resumes": (str, type(None)), "submitted_by": str}


def _check_record(record: JobRecord, path: Path) -> None:
    """InputError naming ``path`` and the key when a field is not of the kind ``iolab submit``
    writes: a job id Slurm gave is at most :data:`~iolab.host.slurm.JOB_ID_DIGITS_MOST`
    digits, as sbatch's answer is checked (it sorts the records: 5,000 digits are more than
    Python reads as a number), and the record's own is its file's name; the others text
    (options a mapping), which a status line and ``--resume`` read as such."""
    for key, kind in _KINDS.items():
        value = getattr(record, key)
        if not isinstance(value, kind) or (key in ("job_id", "resumes") and value is not None
                                           and not _is_job_id(value)):
            raise InputError(path, key, f"{excerpt(value)} is not a job record's {key}",
                             allowed=f"a Slurm job id (up to {JOB_ID_DIGITS_MOST} digits 0-9)"
                             if key in ("job_id", "resumes")
                             else "a mapping" if kind is dict else "text")
    if record.job_id != path.stem:  # write() names the record after its job
        raise InputError(path, "job_id", f"{excerpt(record.job_id)} is not the job the record's "
                         "name says", allowed=f"{excerpt(path.stem)}, the job of the file's name")
    if not SCRIPT_NAME.fullmatch(record.script):  # '../x.sh', '/etc/x': never submitted
        raise InputError(path, "script", f"{excerpt(record.script)} is not the name of a script "
                         "iolab wrote in the record's folder; it is never submitted",
                         allowed=SCRIPT_ALLOWED)


def _is_job_id(value: str) -> bool:
    return is_digits(value) and len(value) <= JOB_ID_DIGITS_MOST


def describe(record: JobRecord, state: dict[str, str] | None, folder: Path,
             unknown: str = "") -> str:
    """One line: the job, its state as Slurm tells it (``unknown``: why Slurm could not be
    asked), and where its output is. What it quotes (the record's fields, Slurm's words) is
    escaped, a line break too: a record's text cannot start a line of its own."""
    if unknown:
        now = f"state unknown ({unknown})"
    elif state is None:
        now = "no longer known to Slurm (ended)"
    else:
        now = state["state"]
        if state.get("node"):
            now += f" on {state['node']}"
        if state.get("elapsed"):
            now += f" for {state['elapsed']}" + (f" of {state['limit']}"
                                                 if state.get("limit") else "")
        if state.get("reason") and state["reason"] not in ("None", "(null)"):
            now += f" ({state['reason']})"
        if state.get("exit_code") and state["state"] not in ("RUNNING", "PENDING"):
            now += f", exit code {state['exit_code']}"
    resumed = f", resumes job {record.resumes}" if record.resumes else ""
    return printable(f"job {record.job_id} ({record.mode}, submitted {record.submitted_at}"
                     f"{resumed}): {now}; output {record.output(folder)}")
