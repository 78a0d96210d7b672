"""A campaign's Slurm job records (iolab.batch.jobs) as ``iolab status`` reads and shows them:
a record's strings stay on their line, and a record of the wrong kind is named in one line
while every other campaign is still shown."""

from __future__ import annotations

import json
import os
import re

import pytest

from iolab.batch import jobs
from iolab.errors import InputError
from iolab.host import slurm
from iolab.status import status_lines

RECORD = {"job_id": "7", "script": "20260101T000000.000000Z-replay.sh",
          "submitted_at": "2026-01-01", "mode": "replay",
          "options": {}, "resumes": None}


@pytest.fixture
def data(tmp_path, monkeypatch):
    """Factory: a data folder with two campaigns of an experiment nobody registered (read
    as they are); ``records`` are written to the first one's jobs/. Slurm knows no job."""
    monkeypatch.setattr(slurm, "job_states", lambda ids, env=None: {})

    def make(**records: dict) -> object:
        for env in ("a-first", "b-second"):
            (tmp_path / "raw" / "zzdemo" / env / "runs").mkdir(parents=True)
        folder = tmp_path / "raw" / "zzdemo" / "a-first" / "jobs"
        folder.mkdir()
        for name, doc in records.items():
            (folder / f"{name}.json").write_text(json.dumps(doc))
        return tmp_path
    return make


def test_a_job_records_strings_cannot_make_a_status_line(data):
    record = {**RECORD, "mode": "replay\nFORGED LINE",
              "submitted_at": "2026-01-01\nzzdemo/a-first: 999 complete\x1b[31mRED"}
    lines = list(status_lines(data(**{"7": record})))
    (job,) = [line for line in lines if "job 7" in line]
    assert (r"job 7 (replay\nFORGED LINE, submitted 2026-01-01\nzzdemo/a-first: 999 complete"
            r"\x1b[31mRED): no longer known to Slurm (ended)") in job
    assert not any("\n" in line or "\x1b" in line for line in lines)


@pytest.mark.parametrize("job_id", ["abc", ["1"], 7, "٣", "9" * 5000, "12345678901", "9"],
                         ids=["letters", "list", "number", "other-digits", "5000-digits",
                              "11-digits", "not-its-name"])
def test_a_job_record_of_the_wrong_kind_is_named_and_the_rest_shown(data, job_id):
    """A job id that is not Slurm's digits was an internal error (sorting by int()) that
    hid every campaign after it; so was one of 5,000 digits (more than int() reads), and a
    record naming another job than its file's name was shown as that job (probe 11, B5)."""
    folder = data(**{"7": RECORD, "8": {**RECORD, "job_id": job_id}})
    with pytest.raises(InputError) as info:
        jobs.read_all(folder / "raw" / "zzdemo" / "a-first" / "jobs")
    assert info.value.key == "job_id" and info.value.path.endswith("jobs/8.json")
    lines = list(status_lines(folder))
    bad = [line for line in lines if "8.json" in line]
    assert len(bad) == 1 and "its Slurm jobs cannot be read" in bad[0] and "job_id" in bad[0]
    assert any(line.startswith("zzdemo/b-second: 0 complete") for line in lines)


def test_a_job_record_resuming_a_job_of_5000_digits_is_named_and_the_rest_shown(data):
    folder = data(**{"7": RECORD, "8": {**RECORD, "job_id": "8", "resumes": "7" * 5000}})
    with pytest.raises(InputError) as info:
        jobs.read_all(folder / "raw" / "zzdemo" / "a-first" / "jobs")
    assert info.value.key == "resumes" and "up to 10 digits 0-9" in str(info.value)
    assert any(line.startswith("zzdemo/b-second: 0 complete") for line in status_lines(folder))


@pytest.mark.parametrize("kind", ["nested", "too large"])
def test_a_job_record_nested_too_deeply_or_too_large_is_named_and_the_rest_shown(data, kind):
    """The same pattern as probe 6's C1-C4 and B7: a RecursionError, or a record read whole
    whatever its size."""
    folder = data(**{"7": RECORD, "8": RECORD})
    path = folder / "raw" / "zzdemo" / "a-first" / "jobs" / "8.json"
    if kind == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000)
        said = "arrays or objects nested more than 100 levels deep"
    else:
        os.truncate(path, jobs.RECORD_MOST + 1)  # sparse: no disk, and no memory unless read
        said = f"holds {jobs.RECORD_MOST + 1:,} bytes (or more), more than iolab ever writes"
    with pytest.raises(InputError, match=re.escape(said)):
        jobs.read_all(path.parent)
    lines = list(status_lines(folder))
    bad = [line for line in lines if "8.json" in line]
    assert len(bad) == 1 and said in bad[0]
    assert any(line.startswith("zzdemo/b-second: 0 complete") for line in lines)


def test_a_record_named_in_other_digits_is_no_record_and_hides_no_job(data):
    """An earlier submit saved sbatch's job id '١٢٣' as jobs/١٢٣.json (str.isdigit); reading
    it refused the record, and status showed none of the campaign's jobs."""
    folder = data(**{"7": RECORD, "١٢٣": {**RECORD, "job_id": "١٢٣"}})
    records = jobs.read_all(folder / "raw" / "zzdemo" / "a-first" / "jobs")
    assert [r.job_id for r in records] == ["7"]
    assert any("job 7 " in line for line in status_lines(folder))


@pytest.mark.parametrize("script", ["../../../../../../probe9/evil.sh", "/tmp/evil.sh",
                                    "sub/20260101T000000.000000Z-run.sh", "..", "evil.sh"])
def test_a_record_whose_script_is_not_one_iolab_wrote_in_jobs_is_refused(data, script):
    """Probe 9, F6: 'submit --resume' submitted the script a record named with '../', outside
    the campaign."""
    folder = data(**{"7": {**RECORD, "script": script}})
    with pytest.raises(InputError) as info:
        jobs.read_all(folder / "raw" / "zzdemo" / "a-first" / "jobs")
    assert info.value.key == "script" and info.value.path.endswith("jobs/7.json")
    assert "is not the name of a script iolab wrote" in str(info.value)
    assert "allowed: the file name 'iolab submit' gives a job's script in jobs/" in str(info.value)


def test_resume_never_submits_a_script_through_a_link(tmp_path, monkeypatch):
    """A record's script swapped for a link (to a script outside the campaign) is refused,
    and the link left as it is."""
    from iolab.batch import submit
    from iolab.safefiles import NotOurs

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.log"
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" >> {log}\necho 77\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(slurm, "job_states", lambda ids, env=None: {})
    data = tmp_path / "data"
    (record,) = submit.submit(["smt_thp"], ["kvm-2vcpu"],
                              submit.Request(mode="replay", data_dir=data), log=lambda line: None)
    script = data / "raw" / "smt_thp" / "kvm-2vcpu" / "jobs" / record.script
    evil = tmp_path / "evil.sh"
    evil.write_text("#!/bin/sh\necho evil\n")
    script.unlink()
    script.symlink_to(evil)
    with pytest.raises(NotOurs, match=f"{re.escape(str(script))}: is a symbolic link to "
                       f"{re.escape(str(evil))}, where iolab keeps the script of job 77"):
        submit.resume("smt_thp", "kvm-2vcpu", data, log=lambda line: None)
    assert len(log.read_text().splitlines()) == 1, "submitted again"
    assert script.is_symlink()
