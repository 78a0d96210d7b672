"""What iolab asks of Slurm (``iolab.host.slurm``): the allocation a run records, read from
the job's environment and record; partitions; job states, read from a real single-node Slurm
(the session fixture ``slurm_cluster``). The jobs of ``iolab submit`` are tested in
test_submit.py."""

from __future__ import annotations

import subprocess
import time

import pytest

from iolab.errors import IolabError
from iolab.host import slurm

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


@pytest.mark.parametrize("cpus", ["\u00b2", "9" * 5000], ids=["superscript", "5000 digits"])
def test_a_cpu_count_in_other_than_ascii_digits_is_not_known(monkeypatch, cpus):
    """'²' passed str.isdigit and then int() raised, ending the run as an internal error."""
    monkeypatch.setattr(slurm, "exclusive", lambda job, env=None: None)
    env = {"SLURM_JOB_ID": "42", "SLURM_CPUS_ON_NODE": cpus}
    assert slurm.allocation(env)["cpus_on_node"] is None


def test_without_scontrol_exclusivity_is_unknown(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert slurm.exclusive("42") is None


def test_a_job_record_is_read_field_by_field():
    fields = slurm.parse_record("JobId=7 JobName=x y JobState=TIMEOUT Reason=TimeLimit "
                                "ExitCode=0:15 RunTime=00:01:27 TimeLimit=00:01:00")
    assert fields["JobState"] == "TIMEOUT" and fields["ExitCode"] == "0:15"
    assert fields["JobName"] == "x", "a value with spaces keeps its first word"


def test_partitions_put_the_default_first(monkeypatch):
    monkeypatch.setattr(slurm, "_slurm", lambda argv, env=None, check=True:
                        subprocess.CompletedProcess(argv, 0, "io\ndebug*\ngpu\n", ""))
    assert slurm.partitions() == ["debug", "gpu", "io"]


@pytest.mark.parametrize("printed", ["\u0661\u0662\u0663", "\u00b2", "1" * 11, "12\x1b]0;x\x07"],
                         ids=["arabic-indic digits", "superscript", "11 digits", "escape"])
def test_a_job_id_sbatch_prints_in_other_than_ascii_digits_is_refused(monkeypatch, printed):
    """A job id '١٢٣' was taken (str.isdigit) and saved; the job record's reader then refused
    it, and status showed none of the campaign's jobs."""
    monkeypatch.setattr(slurm, "_slurm", lambda argv, env=None, check=True:
                        subprocess.CompletedProcess(argv, 0, printed + "\n", ""))
    with pytest.raises(IolabError, match="not a job id \\(allowed: up to 10 digits 0-9\\)") as err:
        slurm.submit("job.sh")
    assert "\x1b" not in str(err.value)


def test_a_job_id_of_ascii_digits_is_taken(monkeypatch):
    monkeypatch.setattr(slurm, "_slurm", lambda argv, env=None, check=True:
                        subprocess.CompletedProcess(argv, 0, "4242;cluster\n", ""))
    assert slurm.submit("job.sh") == "4242"


@pytest.mark.parametrize("printed", [
    "sbatch: note: your job uses the default account\n4242\n",
    "4242;cluster\nsbatch: note: a site message after it\n",
    "Submitted batch job 4242\n"])
def test_the_job_id_is_read_from_its_own_line_among_a_sites_notes(monkeypatch, printed):
    """A site's note before the id had made 'iolab submit' say nothing was submitted, and
    remove the script of the job Slurm had queued."""
    monkeypatch.setattr(slurm, "_slurm", lambda argv, env=None, check=True:
                        subprocess.CompletedProcess(argv, 0, printed, ""))
    assert slurm.submit("job.sh") == "4242"


def test_sbatch_that_exits_0_without_a_job_id_may_have_queued_it(monkeypatch):
    monkeypatch.setattr(slurm, "_slurm", lambda argv, env=None, check=True:
                        subprocess.CompletedProcess(argv, 0, "sbatch: note: queued\n", ""))
    with pytest.raises(slurm.NoJobId, match="'sbatch: note: queued', not a job id .* on any "
                                            "line; sbatch exited 0, so Slurm may have queued"):
        slurm.submit("job.sh")


def test_a_missing_slurm_command_is_named_with_how_to_get_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(IolabError, match="squeue is not on PATH: this machine is not a Slurm "
                                         "submit host"):
        slurm.job_states(["1"])


@pytest.mark.slow
def test_job_states_come_from_squeue_then_scontrol(slurm_cluster, monkeypatch, tmp_path):
    for key, value in slurm_cluster.items():
        monkeypatch.setenv(key, value)
    job_script = tmp_path / "sleep.sh"
    job_script.write_text(f"#!/bin/sh\n#SBATCH --output={tmp_path}/%j.out\nsleep 60\n")
    job = slurm.submit(str(job_script))
    deadline = time.monotonic() + 30
    while slurm.job_states([job])[job]["state"] != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
    running = slurm.job_states([job, "999999"])
    assert running[job]["state"] == "RUNNING" and running[job]["node"]
    assert "999999" not in running, "a job Slurm does not know is left out"
    subprocess.run(["scancel", job], check=True)
    while slurm.job_states([job])[job]["state"] not in slurm.ENDED:
        assert time.monotonic() < deadline + 30
        time.sleep(0.2)
    ended = slurm.job_states([job])[job]
    assert ended["state"] == "CANCELLED" and "exit_code" in ended
