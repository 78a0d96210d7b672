"""The Slurm allocation a run records: read from the job's environment and record, and a
campaign run as a job of a real single-node Slurm (the session fixture ``slurm_cluster``)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time

import pytest

from iolab.host import slurm
from iolab.paths import REPO_ROOT

RECORD = ("JobId=7 JobName=x UserId=root(0) JobState=RUNNING Reason=None NumNodes=1 NumCPUs=2 "
          "OverSubscribe={} Contiguous=0 Partition=debug")


@pytest.mark.parametrize("value, exclusive", [("NO", True), ("OK", False), ("YES", False),
                                              ("USER", False)])
def test_oversubscribe_no_is_a_node_of_its_own(value, exclusive):
    assert slurm.parse_oversubscribe(RECORD.format(value)) is exclusive


def test_a_record_without_the_field_says_nothing():
    assert slurm.parse_oversubscribe("JobId=7 JobState=RUNNING") is None


def test_outside_slurm_there_is_no_allocation():
    assert slurm.allocation({"PATH": "/usr/bin"}) is None


def test_the_allocation_comes_from_the_jobs_environment(monkeypatch):
    monkeypatch.setattr(slurm, "exclusive", lambda job, env=None: job == "42")
    env = {"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "n1", "SLURM_JOB_PARTITION": "io",
           "SLURM_CLUSTER_NAME": "lab", "SLURM_CPUS_ON_NODE": "96"}
    assert slurm.allocation(env) == {"job_id": "42", "node": "n1", "partition": "io",
                                     "cluster": "lab", "cpus_on_node": 96, "exclusive": True}


def test_without_scontrol_exclusivity_is_unknown(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert slurm.exclusive("42") is None


def _wait(job: str, env: dict, timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True,
                                text=True, env=env).stdout
        state = next((w.split("=", 1)[1] for w in record.split() if w.startswith("JobState=")),
                     "")
        if state and state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            return state
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not end within {timeout} s")


@pytest.mark.slow
@pytest.mark.skipif(subprocess.run(["which", "fio"], capture_output=True).returncode != 0,
                    reason="fio is not installed (make setup)")
def test_a_campaign_run_as_a_slurm_job_records_its_allocation(slurm_cluster, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    command = [sys.executable, "-m", "iolab", "run", "smt_thp", "--env", "kvm-2vcpu",
               "--data", str(data), "--limit", "1", "--no-progress",
               "--set", "runtime_s=1", "--set", "ramp_s=0",
               "--set", f"target_path={tmp_path / 'target.dat'}", "--set", "target_size=16M"]
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nset -e\n" + shlex.join(command) + "\n")
    job = subprocess.run(["sbatch", "--parsable", "--exclusive", "--nodes=1",
                          f"--chdir={REPO_ROOT}", f"--output={tmp_path / 'job.out'}",
                          str(script)], capture_output=True, text=True, check=True,
                         env=slurm_cluster).stdout.strip().split(";")[0]
    state = _wait(job, slurm_cluster)
    output = (tmp_path / "job.out").read_text(errors="replace")
    assert state == "COMPLETED", output[-3000:]
    (run,) = (data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs").iterdir()
    recorded = json.loads((run / "run.json").read_text())["extra"]["slurm"]
    assert recorded["job_id"] == job and recorded["exclusive"] is True
    assert recorded["partition"] == "debug" and recorded["cpus_on_node"] >= 1
