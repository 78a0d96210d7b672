"""The fio adapter: fio started directly with json+ into fio.json, the launch contract that
keeps the ids of runs made through the old driver script, and one real run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from iolab.errors import InputError
from iolab.parsers.fio import parse_fio_file
from iolab.tools.base import Invocation
from iolab.tools.fio import Fio

FIO = Fio()


def test_fio_is_started_directly_with_json_plus_into_fio_json():
    launch = FIO.launch(Invocation("fio", {"name": "x", "rw": "randread", "bs": 4096}), [])
    assert launch.argv == ["fio", "--output-format=json+", "--output=fio.json", "--name=x",
                           "--rw=randread", "--bs=4096"]


@pytest.mark.parametrize("key", ["output-format", "output"])
def test_an_option_choosing_the_report_is_refused(key):
    with pytest.raises(InputError, match="chooses the report format"):
        FIO.launch(Invocation("fio", {key: "json"}), [])


def test_the_identity_names_the_contract_of_the_old_driver_script():
    # runs stored through scripts/drivers/fio.sh v1 keep their ids only while this holds
    ident = FIO.identity(Invocation("fio", {"name": "x"}))
    assert (ident["driver"], ident["driver_version"]) == ("fio.sh", "1")
    assert FIO.driver_record() == ("fio.sh", "1") and FIO.runnable


@pytest.mark.parametrize("prefix", [[], ["/usr/bin/time", "-o", "time.txt"]])
def test_recorded_argv_is_what_the_driver_script_recorded(prefix):
    argv = prefix + FIO.launch(Invocation("fio", {"name": "x"}), []).argv
    assert FIO.recorded_argv(argv) == prefix + ["scripts/drivers/fio.sh", "--output",
                                                "fio.json", "--name=x"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (make setup)")
def test_a_real_run_writes_parseable_json_plus_and_takes_arguments_literally(tmp_path):
    data = tmp_path / "data"
    data.write_bytes(os.urandom(4 * 2**20))
    marker = tmp_path / "injected"
    name = f"a b;$(touch {marker})"  # must reach fio as one literal argument
    launch = FIO.launch(Invocation("fio", {
        "name": name, "filename": str(data), "size": "4M", "rw": "randread", "bs": "4k",
        "runtime": "500ms", "time_based": 1}), [])
    proc = subprocess.run(launch.argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()

    doc = json.loads((tmp_path / "fio.json").read_text())  # the file holds only the report
    assert doc["jobs"][0]["jobname"] == name
    assert "bins" in doc["jobs"][0]["read"]["clat_ns"]  # json+

    version = subprocess.run(["fio", "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    r = parse_fio_file(tmp_path / "fio.json")
    assert r["fio_version"] == version
    assert (r["njobs"], r["error"], r["direction"]) == (1, 0, "read")
    assert r["read_total_ios"] > 0 and r["read_io_bytes"] == 4096 * r["read_total_ios"]
    assert 400 <= r["runtime_ms"] <= 1000


def test_a_key_given_twice_is_no_report_of_fios():
    """json keeps the last of two keys silently: a second 'iops' of 999 beside the bandwidth
    of 75,000 reads a second had been stored as the measurement."""
    from iolab.errors import ParseError
    from iolab.parsers.fio import parse_fio_json

    text = '{"fio version": "fio-3.33", "jobs": [{"read": {"iops": 75218.0, "iops": 999}}]}'
    with pytest.raises(ParseError, match="key 'iops' is given twice in one object"):
        parse_fio_json(text, "fio.json")


FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "fio")


def _randread_run(tmp_path, change=None):
    """A run folder holding the randread fixture's report, ``change`` applied to its job."""
    with open(os.path.join(FIXTURES, "io_uring_randread_4k_qd16.jsonplus.json")) as f:
        report = json.load(f)
    if change:
        change(report["jobs"][0])
    (tmp_path / "fio.json").write_text(json.dumps(report))
    return tmp_path


def test_a_report_with_io_its_rw_never_does_is_foreign(tmp_path):
    """A randread run's fio.json with a write section (a copy of its read one) was stored, its
    iops the sum of both: twice what the run read."""
    argv = ["fio", "--rw=randread", "--bs=4k"]
    assert Fio().foreign_report(_randread_run(tmp_path), argv) == ""
    run_dir = _randread_run(tmp_path, lambda job: job.__setitem__(
        "write", json.loads(json.dumps(job["read"]))))
    assert Fio().foreign_report(run_dir, argv).startswith(
        "fio.json is not this run's report: it has write I/O (io_bytes ")
    assert "which its jobs' rw ('randread') never does (allowed: read I/O only)" in \
        Fio().foreign_report(run_dir, argv)


def test_a_verifying_write_job_may_read(tmp_path):
    def write_job(job, verify):
        job["job options"].update(rw="write", verify=verify)
        job["write"], job["read"] = job["read"], job["write"]
        job["read"]["io_bytes"], job["read"]["total_ios"] = 4096, 1

    argv = ["fio"]
    assert "has read I/O" in Fio().foreign_report(
        _randread_run(tmp_path, lambda job: write_job(job, "0")), argv)
    assert Fio().foreign_report(
        _randread_run(tmp_path, lambda job: write_job(job, "crc32c")), argv) == ""


def test_a_report_of_more_jobs_than_the_argv_makes_is_foreign(tmp_path):
    """Probe 11's Q4: a fio.json whose one job was given twice (same name and options) was
    stored with every rate doubled: the parser sums the jobs, and the check compared each
    job's options with the argv, never how many jobs the argv makes fio report."""
    def twice(options):
        report = json.loads((run_dir / "fio.json").read_text())
        report["jobs"][0]["job options"].update(options)
        report["jobs"] = [report["jobs"][0], json.loads(json.dumps(report["jobs"][0]))]
        (run_dir / "fio.json").write_text(json.dumps(report))

    grouped = {"numjobs": "1", "group_reporting": "1"}
    argv = ["fio", "--name=uring_qd16", "--rw=randread",
            *(f"--{key}={value}" for key, value in grouped.items())]
    run_dir = _randread_run(tmp_path, lambda job: job["job options"].update(grouped))
    assert Fio().foreign_report(run_dir, argv) == ""
    twice(grouped)
    assert Fio().foreign_report(run_dir, argv).startswith(
        "fio.json is not this run's report: it has 2 job object(s), the run's argv makes fio "
        "report 1")
    # numjobs=2 without group_reporting makes two job objects: such a report is the run's
    twice({"numjobs": "2", "group_reporting": "0"})
    assert Fio().foreign_report(run_dir, [*argv[:3], "--numjobs=2", "--group_reporting=0"]) == ""


@pytest.mark.parametrize("args, jobs", [
    (["--name=a", "--numjobs=2", "--group_reporting=1"], 1),
    (["--name=a", "--numjobs=2"], 2),
    (["--name=a", "--numjobs=2", "--name=b", "--numjobs=3"], 5),
    (["--group_reporting", "--name=a", "--numjobs=3", "--name=b", "--numjobs=2"], 1),
    (["--group_reporting=1", "--name=a", "--name=b", "--stonewall"], 2),
    (["--rw=read"], 1),
    (["--name=a", "--numjobs=2k"], None),  # a value fio reads with a suffix: not counted
])
def test_the_jobs_an_argv_makes_fio_report(args, jobs):
    # each count as fio 3.33 reports it (checked by running these command lines)
    from iolab.tools.fio import expected_jobs
    assert expected_jobs(["fio", *args]) == jobs
