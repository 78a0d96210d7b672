"""``iolab submit`` and the jobs it makes: the batch script's text, the checks before
submitting, and (against the real single-node Slurm of the ``cluster`` fixture) a replay
job, a tiny fio campaign, a stop before the time limit that the next job resumes, ``scancel``
in the middle of a run, and ``iolab status``.

The jobs run the repository's smt_thp design for this machine class, shrunk with ``--set``, in
a temporary data folder, through the CLI exactly as a user would submit them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolab.batch import jobs, script, submit
from iolab.errors import InputError, IolabError
from iolab.execution.campaign import Campaign
from iolab.host import slurm
from iolab.paths import REPO_ROOT

ENV = "kvm-2vcpu"
EXAMPLE = REPO_ROOT / "book" / "slurm-example.sh"
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
CAN_SET_THP = os.geteuid() == 0 and os.access(THP, os.W_OK)
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed "
                               "(make setup)")


def example_spec() -> script.JobSpec:
    """The job the book's appendix shows, with the lab server's paths."""
    return script.JobSpec(
        experiment="smt_thp", environment="hpc-server", mode="run",
        data_dir=Path("/srv/iolab/data"),
        jobs_dir=Path("/srv/iolab/data/raw/smt_thp/hpc-server/jobs"),
        python="/srv/iolab/.venv/bin/python", repo=Path("/srv/iolab"),
        overrides=["runtime_s=30"], run_options={"where": ["engine=io_uring"]}, requeue=True,
        slurm={"partition": "nvme", "time": "12:00:00"}, sbatch_args=["--mem=0"],
        written_at="2026-11-24 09:00:00 UTC", iolab_version="0.2.0")


# -- the script ------------------------------------------------------------------------------

def test_the_books_example_is_what_iolab_writes():
    text = script.render(example_spec())
    assert EXAMPLE.read_text() == text, (
        f"{EXAMPLE} differs from what iolab writes now; renew it with: .venv/bin/python -c "
        "'import sys; sys.path.insert(0, \"tests\"); from test_submit import example_spec; "
        "from iolab.batch.script import render; "
        "open(\"book/slurm-example.sh\", \"w\").write(render(example_spec()))'")


def test_a_run_script_ignores_the_warning_until_iolab_handles_it():
    """Slurm may send its warning in the job's first moment; by default SIGUSR1 would end the
    job then, before iolab's handler exists, with nothing in its output."""
    text = script.render(example_spec())
    assert text.index("trap '' USR1\n") < text.index("exec ")
    replay = script.render(dataclasses.replace(example_spec(), mode="replay"))
    assert "trap" not in replay
    # what it relies on: bash's ignore outlives exec, and a handler set later replaces it
    probe = ("import os, signal; ignored = signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN; "
             "os.kill(os.getpid(), signal.SIGUSR1); got = []; "
             "signal.signal(signal.SIGUSR1, lambda *a: got.append(1)); "
             "os.kill(os.getpid(), signal.SIGUSR1); print(ignored, got)")
    out = subprocess.run(["bash", "-c", f"trap '' USR1; exec {shlex.quote(sys.executable)} -c "
                          f"{shlex.quote(probe)}"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "True [1]", out


def test_a_run_job_asks_for_a_node_of_its_own_and_a_warning_before_its_limit():
    text = script.render(example_spec())
    for line in ("#SBATCH --exclusive", "#SBATCH --nodes=1", "#SBATCH --signal=B:USR1@300",
                 "#SBATCH --dependency=singleton", "#SBATCH --partition=nvme",
                 "#SBATCH --time=12:00:00", "#SBATCH --mem=0",
                 "#SBATCH --output=/srv/iolab/data/raw/smt_thp/hpc-server/jobs/%j.out",
                 "#SBATCH --error=/srv/iolab/data/raw/smt_thp/hpc-server/jobs/%j.err"):
        assert line + "\n" in text
    # bash reads it as one command, and exec makes iolab the process Slurm signals
    assert "\nexec /srv/iolab/.venv/bin/python -m iolab notebook smt_thp" in text
    done = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr


def test_the_script_runs_the_notebook_with_the_options_given(tmp_path):
    spec = example_spec()
    spec.jobs_dir = tmp_path
    text = script.render(spec)
    # the exec line, as bash would run it, with echo in place of exec
    line = text[text.index("\nexec ") + 1:].replace("exec ", "printf '%s\\n' ", 1)
    words = subprocess.run(["bash", "-c", line], env={"SLURM_JOB_ID": "41", "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert words == ["/srv/iolab/.venv/bin/python", "-m", "iolab", "notebook", "smt_thp",
                     "--env", "hpc-server", "--mode", "run", "--data", "/srv/iolab/data",
                     "--set", "runtime_s=30", "--where", "engine=io_uring", "--resubmit",
                     "--output", f"{tmp_path}/41.ipynb"]


def test_replay_and_plan_jobs_take_no_node_to_themselves():
    spec = example_spec()
    spec.mode, spec.requeue, spec.overrides, spec.where = "replay", False, [], []
    text = script.render(spec)
    assert "--exclusive" not in text and "--signal" not in text
    assert "--mode replay" in text


def test_measuring_jobs_of_one_data_directory_run_one_at_a_time():
    # the data directory's lock is seen by one node only, so Slurm keeps them apart
    a, b, c = example_spec(), example_spec(), example_spec()
    b.experiment = "irq_affinity"
    c.data_dir = Path("/srv/other/data")
    assert a.name == b.name != c.name
    assert "#SBATCH --dependency=singleton\n" in script.render(b)


@pytest.mark.parametrize("limit, expected", [("1", 60), ("1:30", 90), ("2:00:00", 7200),
                                             ("1-0", 86400), ("1-2:30", 95400),
                                             ("UNLIMITED", None), ("soon", None)])
def test_slurm_time_limits_are_read_as_sbatch_reads_them(limit, expected):
    assert submit.seconds(limit) == expected


@pytest.mark.parametrize("arg", ["mem=0", "--constraint=a b", "--comment=x\ny"])
def test_an_sbatch_option_must_be_one_word(arg):
    with pytest.raises(InputError, match="cannot be a #SBATCH line"):
        script.check_sbatch_arg(arg)


# -- checks before anything is submitted -------------------------------------------------------

@pytest.mark.parametrize("request_, match", [
    (submit.Request(mode="measure"), "unknown mode"),
    (submit.Request(run_options={"limit": 0}), "--limit"),
    (submit.Request(signal_before_s=0), "--signal-before"),
    (submit.Request(signal_before_s=65536), r"--signal-before: 65536 s \(allowed: 1 to 65535 "
                                            "seconds"),
    (submit.Request(signal_before_s=10**20), "--signal-before: 100000000000000000000 s"),
    (submit.Request(run_options={"limit": 10**20}), r"--limit: .* \(allowed: 1 to 1,000,000 "),
    (submit.Request(slurm={"time": "1 day"}), "--time"),
    (submit.Request(sbatch_args=["--mem 0"]), "#SBATCH"),
    (submit.Request(slurm={"time": "5"}), "not longer than --signal-before"),
])
def test_bad_options_are_refused_before_anything_is_written(tmp_path, request_, match):
    request_.data_dir = tmp_path / "data"
    with pytest.raises(IolabError, match=match):
        submit.submit(["smt_thp"], [ENV], request_, log=lambda line: None)
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("limit, match", [
    ("\u00b2", r"--time: '\u00b2' is no Slurm time limit \(allowed: M, M:S"),
    ("\u0660:\u0660\u0660:\u0660\u0665", "is no Slurm time limit"),
    ("9" * 5000, r"--time: '9{32}'\.\.\. is no Slurm time limit"),
    ("99999999999999999999-00:00:00", "is 100,000,000,000,000,000,000 days"),
    ("366-0", r"--time: 366-0 is 366 days \(allowed: .* at most 365 days, or UNLIMITED\)"),
], ids=["superscript", "arabic-indic", "5000 digits", "1e20 days", "366 days"])
def test_a_time_limit_no_slurm_job_has_is_refused_before_sbatch(tmp_path, monkeypatch, limit,
                                                                match):
    """'²' and 5,000 digits ended submit as an internal error (rc 70); 10^20 days reached
    sbatch, and '٠:٠٠:٠٥' was read as 5 s and written to the #SBATCH line as those digits."""
    def no_sbatch(*args, **kwargs):
        raise AssertionError("sbatch was run")
    monkeypatch.setattr(slurm, "submit", no_sbatch)
    request = submit.Request(mode="plan", slurm={"time": limit}, data_dir=tmp_path / "data")
    with pytest.raises(InputError, match=match):
        submit.submit(["smt_thp"], [ENV], request, log=lambda line: None)
    assert not (tmp_path / "data").exists()


def test_a_years_time_limit_and_unlimited_are_taken():
    assert submit._check_time("365-0") == 365 * 86400
    assert submit._check_time("UNLIMITED") is None and submit._check_time(None) is None


def test_without_sbatch_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(IolabError, match="sbatch is not on PATH: this machine is not a Slurm "
                                         "submit host"):
        submit.submit(["smt_thp"], [ENV], submit.Request(data_dir=tmp_path / "data"),
                      log=lambda line: None)
    assert not (tmp_path / "data").exists()


def _fake_sbatch(tmp_path: Path, monkeypatch) -> Path:
    """An sbatch that records its arguments and prints a job id, first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.log"
    fake = bin_dir / "sbatch"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\necho 77\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


def test_a_data_directory_that_cannot_be_written_is_refused(tmp_path, monkeypatch):
    log = _fake_sbatch(tmp_path, monkeypatch)
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(IolabError, match="cannot create the data directory"):
        submit.submit(["smt_thp"], [ENV], submit.Request(data_dir=tmp_path / "file" / "data"),
                      log=lambda line: None)
    assert not log.exists(), "nothing may be submitted"


def test_a_job_slurm_refuses_leaves_no_script_and_no_campaign_folder(tmp_path, monkeypatch):
    log = _fake_sbatch(tmp_path, monkeypatch)
    (tmp_path / "bin" / "sbatch").write_text("#!/bin/sh\necho 'error: invalid account' >&2\n"
                                             "exit 1\n")
    data = tmp_path / "data"
    data.mkdir()
    with pytest.raises(IolabError, match="Slurm refused: sbatch.*invalid account.*nothing was "
                                         "submitted"):
        submit.submit(["smt_thp"], [ENV], submit.Request(mode="replay", data_dir=data),
                      log=lambda line: None)
    assert list(data.iterdir()) == [] and not log.exists()


def test_a_sites_note_before_the_job_id_is_skipped(tmp_path, monkeypatch):
    """A note of the site's cli_filter before the id had made iolab remove the script and say
    nothing was submitted, while Slurm ran the job untracked."""
    _fake_sbatch(tmp_path, monkeypatch)
    (tmp_path / "bin" / "sbatch").write_text("#!/bin/sh\necho 'sbatch: note: default account'"
                                             "\necho 4242\n")
    data = tmp_path / "data"
    (record,) = submit.submit(["smt_thp"], [ENV], submit.Request(mode="replay", data_dir=data),
                              log=lambda line: None)
    assert record.job_id == "4242"
    assert jobs.read_all(data / "raw" / "smt_thp" / ENV / "jobs") == [record]


def test_a_script_sbatch_took_without_a_job_id_is_kept_and_named(tmp_path, monkeypatch):
    log = _fake_sbatch(tmp_path, monkeypatch)
    (tmp_path / "bin" / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                                             "echo 'sbatch: note: queued'\n")
    data = tmp_path / "data"
    with pytest.raises(IolabError) as err:
        submit.submit(["smt_thp", "irq_affinity"], [ENV],
                      submit.Request(mode="replay", data_dir=data), log=lambda line: None)
    (kept,) = (data / "raw").rglob("*.sh")
    assert kept.parent == data / "raw" / "smt_thp" / ENV / "jobs"
    assert jobs.read_all(kept.parent) == [] and len(log.read_text().splitlines()) == 1
    said = str(err.value)
    assert "'sbatch: note: queued', not a job id" in said and "may have queued" in said
    assert f"its script is kept, unrecorded: {kept}" in said and "nothing was" not in said


def test_bad_params_are_refused_before_submitting(tmp_path, monkeypatch):
    log = _fake_sbatch(tmp_path, monkeypatch)
    for request_, match in ((submit.Request(overrides=["runtime_s=abc"]), "runtime_s"),
                            (submit.Request(run_options={"where": ["engine=spdk"]}), "engine")):
        request_.data_dir = tmp_path / "data"
        with pytest.raises(InputError, match=match):
            submit.submit(["smt_thp"], [ENV], request_, log=lambda line: None)
    with pytest.raises(InputError, match="experiment"):
        submit.submit(["nosuch"], [ENV], submit.Request(data_dir=tmp_path / "data"),
                      log=lambda line: None)
    assert not log.exists()
    assert not list((tmp_path / "data").rglob("*.sh"))


def test_one_job_per_experiment_and_environment_each_in_its_campaign(tmp_path, monkeypatch):
    log = _fake_sbatch(tmp_path, monkeypatch)
    data = tmp_path / "data"
    records = submit.submit(["smt_thp", "irq_affinity"], [ENV],
                            submit.Request(mode="replay", data_dir=data), log=lambda line: None)
    assert [r.job_id for r in records] == ["77", "77"]
    for exp in ("smt_thp", "irq_affinity"):
        folder = data / "raw" / exp / ENV / "jobs"
        (record,) = jobs.read_all(folder)
        assert record.mode == "replay"
        assert (folder / record.script).read_text().count(f"notebook {exp} ") == 1
    assert len(log.read_text().splitlines()) == 2


def test_an_experiment_or_environment_given_twice_is_submitted_once(tmp_path, monkeypatch):
    """'submit smt_thp smt_thp --env E --env E' had submitted 4 jobs of one campaign."""
    log = _fake_sbatch(tmp_path, monkeypatch)
    data = tmp_path / "data"
    records = submit.submit(["smt_thp", "irq_affinity", "smt_thp"], [ENV, ENV],
                            submit.Request(mode="replay", data_dir=data), log=lambda line: None)
    assert len(records) == 2 and len(log.read_text().splitlines()) == 2
    for exp in ("smt_thp", "irq_affinity"):
        assert len(jobs.read_all(data / "raw" / exp / ENV / "jobs")) == 1


def test_resume_takes_the_last_jobs_options_only(tmp_path, capsys):
    from iolab.cli import main

    assert main(["submit", "smt_thp", "--env", ENV, "--data", str(tmp_path), "--resume",
                 "--set", "runtime_s=1"]) == 2
    assert "--resume: takes the options of the last job's script, not --set" in \
        capsys.readouterr().err


def test_resume_without_a_job_says_so(tmp_path, monkeypatch):
    _fake_sbatch(tmp_path, monkeypatch)
    with pytest.raises(IolabError, match="no job was submitted for smt_thp/kvm-2vcpu"):
        submit.resume("smt_thp", ENV, tmp_path / "data", log=lambda line: None)


def test_a_jobs_folder_that_is_a_link_is_never_written_through(tmp_path, monkeypatch):
    """iolab submit had written its executable script and the job's record into the link's
    target."""
    log = _fake_sbatch(tmp_path, monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    campaign = tmp_path / "data" / "raw" / "smt_thp" / ENV
    campaign.mkdir(parents=True)
    (campaign / "jobs").symlink_to(elsewhere)
    with pytest.raises(InputError, match="jobs: is a symbolic link to .*never followed"):
        submit.submit(["smt_thp"], [ENV], submit.Request(mode="replay", data_dir=tmp_path / "data"),
                      log=lambda line: None)
    assert list(elsewhere.iterdir()) == [] and not log.exists()


def test_a_raw_folder_that_is_a_link_gets_no_job(tmp_path, monkeypatch):
    """Probe 13, P13-09: raw/ as a link is a folder of the campaign's jobs/ like the others:
    the script and the job's record are never written where it points."""
    log = _fake_sbatch(tmp_path, monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "raw").symlink_to(elsewhere)
    with pytest.raises(InputError, match="raw: is a symbolic link to .*never followed"):
        submit.submit(["smt_thp"], [ENV], submit.Request(mode="replay", data_dir=tmp_path / "data"),
                      log=lambda line: None)
    assert list(elsewhere.iterdir()) == [] and not log.exists()


def test_a_campaign_folder_that_is_a_link_gets_no_job(tmp_path, monkeypatch):
    log = _fake_sbatch(tmp_path, monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "data" / "raw" / "smt_thp").mkdir(parents=True)
    (tmp_path / "data" / "raw" / "smt_thp" / ENV).symlink_to(elsewhere)
    with pytest.raises(InputError, match=f"{ENV}: is a symbolic link"):
        submit.submit(["smt_thp"], [ENV], submit.Request(mode="replay", data_dir=tmp_path / "data"),
                      log=lambda line: None)
    assert list(elsewhere.rglob("*")) == [] and not log.exists()


@pytest.mark.parametrize("plant", ["fifo", "zero", "secret", "folder"])
def test_a_job_record_that_is_no_regular_file_is_refused_unread(tmp_path, plant):
    """A FIFO at jobs/1.json had made iolab status hang; a link to /dev/zero was read until
    the memory ran out, one to a root-only file was read."""
    folder = tmp_path / "jobs"
    folder.mkdir()
    record = folder / "1.json"
    if plant == "fifo":
        os.mkfifo(record)
    elif plant == "zero":
        record.symlink_to("/dev/zero")
    elif plant == "secret":
        (tmp_path / "secret").write_text('{"job_id": "1"}')
        record.symlink_to(tmp_path / "secret")
    else:
        (tmp_path / "other").mkdir()
        folder.rmdir()
        folder.symlink_to(tmp_path / "other")
        (tmp_path / "other" / "1.json").write_text("{}")
    with pytest.raises(InputError, match="never followed") as info:
        jobs.read_all(folder)
    assert "\n" not in str(info.value)


def test_status_names_a_fifo_job_record_and_goes_on(tmp_path, capsys):
    from iolab.cli import main

    folder = tmp_path / "raw" / "smt_thp" / ENV / "jobs"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "1.json")
    assert main(["status", "--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"smt_thp/{ENV}: 0 complete" in out, "the campaign is still listed"
    assert "its Slurm jobs cannot be read: " in out and "1.json: is a FIFO" in out


# -- stop signals while a Slurm client hangs ---------------------------------------------------

def _hanging(bin_dir: Path, name: str, pid_file: Path) -> None:
    """A Slurm client that writes its pid and then hangs (as one whose controller does not
    answer), first on PATH."""
    fake = bin_dir / name
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 1000\n")
    fake.chmod(0o755)


def _running(pid: int) -> bool:
    """Whether the hanging client ``pid`` (a 'sleep 1000') still runs."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x001000\x00"
    except OSError:
        return False


def _ended(pid: int) -> bool:
    """Whether ``pid`` is ended, waiting a while for a SIGKILL sent to it to be delivered
    (a grandchild is reaped by init, not by iolab)."""
    deadline = time.monotonic() + 30
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _running(pid)


def _signal_while_hanging(args: list[str], pid_file: Path, signum: int) -> tuple[int, int]:
    """Run iolab, send it ``signum`` once the hanging client runs; (its exit status, the
    client's pid). A client left running is ended here, after the test has seen it."""
    proc = subprocess.Popen([sys.executable, "-m", "iolab", *args], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, "the client never ran"
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        proc.send_signal(signum)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, pid


def _end(pid: int) -> None:
    if _running(pid):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_while_sbatch_hangs_leaves_no_script_without_a_record(tmp_path,
                                                                           monkeypatch, signum):
    """SIGTERM into 'iolab submit' while sbatch hung had ended iolab with sbatch still
    running and a new script in jobs/ that no record names."""
    _fake_sbatch(tmp_path, monkeypatch)
    data = tmp_path / "data"
    submit.submit(["smt_thp"], [ENV], submit.Request(mode="plan", data_dir=data),
                  log=lambda line: None)  # job 77, recorded
    folder = data / "raw" / "smt_thp" / ENV / "jobs"
    before = sorted(p.name for p in folder.iterdir())
    _hanging(tmp_path / "bin", "sbatch", tmp_path / "sbatch.pid")
    code, pid = _signal_while_hanging(["submit", "smt_thp", "--env", ENV, "--mode", "plan",
                                       "--data", str(data)], tmp_path / "sbatch.pid", signum)
    gone = _ended(pid)
    _end(pid)
    assert code == 128 + signum
    assert gone, "sbatch was left running"
    assert sorted(p.name for p in folder.iterdir()) == before
    recorded = {r.script for r in jobs.read_all(folder)}
    assert {p.name for p in folder.glob("*.sh")} == recorded


def test_a_stop_signal_while_squeue_hangs_ends_it_with_status(tmp_path, monkeypatch):
    """SIGTERM into 'iolab status' while squeue hung had left squeue running."""
    _fake_sbatch(tmp_path, monkeypatch)
    data = tmp_path / "data"
    submit.submit(["smt_thp"], [ENV], submit.Request(mode="plan", data_dir=data),
                  log=lambda line: None)
    _hanging(tmp_path / "bin", "squeue", tmp_path / "squeue.pid")
    code, pid = _signal_while_hanging(["status", "--data", str(data)],
                                      tmp_path / "squeue.pid", signal.SIGTERM)
    gone = _ended(pid)
    _end(pid)
    assert code == 128 + signal.SIGTERM and gone, "squeue was left running"


def test_a_version_probe_that_hangs_is_ended_with_what_it_started(tmp_path):
    """A tool whose '--version' hangs, with a process of its own started in the background,
    is ended whole at its timeout: the background one had been left running."""
    from iolab.host import inventory

    tool = tmp_path / "hangs"
    tool.write_text(f"#!/bin/sh\nsleep 1000 &\necho $! > {tmp_path / 'child.pid'}\n"
                    f"echo $$ > {tmp_path / 'tool.pid'}\nexec sleep 1000\n")
    tool.chmod(0o755)
    with pytest.raises(subprocess.TimeoutExpired):
        inventory.version_output([str(tool), "--version"], timeout=5)
    pids = [int((tmp_path / name).read_text()) for name in ("child.pid", "tool.pid")]
    left = [pid for pid in pids if not _ended(pid)]
    for pid in left:
        _end(pid)
    assert left == []


# -- against a real Slurm ----------------------------------------------------------------------

def iolab(args: list[str], env: dict, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "iolab", *args], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=120)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture
def cluster(slurm_cluster):
    """The session's Slurm, with every job a test left queued or running cancelled after it,
    so that a failed test does not hold the node from the next."""
    yield slurm_cluster
    subprocess.run(["scancel", f"--user={os.getuid()}"], env=slurm_cluster, capture_output=True)


def job_state(job: str, env: dict) -> str:
    record = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True,
                            text=True, env=env).stdout
    return next((w.split("=", 1)[1] for w in record.split() if w.startswith("JobState=")), "")


# the states a job ends in; any other (RUNNING, COMPLETING, and transient flags such as
# SIGNALING, shown while Slurm delivers a job's --signal warning) means it has not ended yet
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                   "PREEMPTED", "BOOT_FAIL", "DEADLINE"})


def wait_job(job: str, env: dict, timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = job_state(job, env)
        if state in ENDED:
            return state
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not end within {timeout} s")


def shrunk(tmp_path: Path, runtime_s: int = 1) -> list[str]:
    """Short runs on a small file, and a fixed count, so that a selection's runs are known."""
    return ["--set", f"runtime_s={runtime_s}", "--set", "ramp_s=0", "--set", "target_size=16M",
            "--set", f"target_path={tmp_path / 'target.dat'}", "--set", "repetitions=3"]


def job_ids(folder: Path) -> list[str]:
    return [r.job_id for r in jobs.read_all(folder)]


def output_of(folder: Path, job: str) -> str:
    return "".join((folder / f"{job}.{ext}").read_text(errors="replace")[-3000:]
                   for ext in ("out", "err") if (folder / f"{job}.{ext}").exists())


def manifests(campaign: Path) -> list[dict]:
    return [json.loads((run / "run.json").read_text())
            for run in sorted((campaign / "runs").iterdir()) if not run.name.startswith(".")]


@pytest.mark.slow
def test_a_replay_job_keeps_its_executed_notebook(cluster, tmp_path):
    data = tmp_path / "data"
    done = iolab(["submit", "smt_thp", "--env", ENV, "--data", str(data), "--mode", "replay"],
                 cluster)
    folder = data / "raw" / "smt_thp" / ENV / "jobs"
    (job,) = job_ids(folder)
    assert f"submitted job {job}" in done.stdout and f"squeue -j {job}" in done.stdout
    assert wait_job(job, cluster) == "COMPLETED", output_of(folder, job)
    assert (folder / f"{job}.ipynb").stat().st_size > 0
    status = iolab(["status", "--data", str(data)], cluster).stdout
    assert f"job {job} (replay" in status


@pytest.mark.slow
@needs_fio
def test_a_run_job_stores_runs_that_name_it_and_status_shows_it(cluster, tmp_path):
    data = tmp_path / "data"
    iolab(["submit", "smt_thp", "--env", ENV, "--data", str(data), "--mode", "run",
           "--limit", "2", *shrunk(tmp_path)], cluster)
    campaign = data / "raw" / "smt_thp" / ENV
    (job,) = job_ids(campaign / "jobs")
    assert wait_job(job, cluster) == "COMPLETED", output_of(campaign / "jobs", job)
    stored = manifests(campaign)
    assert len(stored) == 2
    assert {m["extra"]["slurm"]["job_id"] for m in stored} == {job}
    assert all(m["extra"]["slurm"]["exclusive"] is True for m in stored)
    status = iolab(["status", "--data", str(data)], cluster).stdout
    assert "smt_thp/kvm-2vcpu: 2 complete" in status
    assert f"job {job} (run" in status and "COMPLETED" in status
    assert "the last job's selection: 2 stored" in status


def wait_runs(campaign: Path, n: int, timeout: float = 120, in_progress: bool = False) -> None:
    """Until ``n`` runs are stored (and, with ``in_progress``, another is under way)."""
    runs = campaign / "runs"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        entries = list(runs.iterdir()) if runs.exists() else []
        done = [p for p in entries if not p.name.startswith(".")]
        if len(done) >= n and (not in_progress or any(p.name.startswith(".tmp-")
                                                       for p in entries)):
            return
        time.sleep(0.1)
    raise AssertionError(f"{n} runs were not stored in {runs} within {timeout} s")


@pytest.mark.slow
@needs_fio
def test_a_job_warned_of_its_time_limit_stops_and_the_next_job_goes_on(cluster, tmp_path):
    # Slurm sends the batch shell SIGUSR1 --signal-before seconds before the limit; scancel
    # sends the same signal now, which keeps the test short and its timing certain
    data = tmp_path / "data"
    selection = ["--where", "engine=io_uring", "--where", "concurrency=[1, 2]"]  # 6 runs
    iolab(["submit", "smt_thp", "--env", ENV, "--data", str(data), "--requeue", "--time", "10",
           *selection, *shrunk(tmp_path, runtime_s=2)], cluster)
    campaign = data / "raw" / "smt_thp" / ENV
    (first,) = job_ids(campaign / "jobs")
    wait_runs(campaign, 1, in_progress=True)
    subprocess.run(["scancel", "--batch", "--signal=USR1", first], env=cluster,
                   check=True)
    assert wait_job(first, cluster) == "COMPLETED", output_of(campaign / "jobs", first)
    records = jobs.read_all(campaign / "jobs")
    assert len(records) == 2, output_of(campaign / "jobs", first)
    second = records[1]
    assert second.resumes == first and second.submitted_by == f"job {first} (--resubmit)"
    assert second.script == records[0].script
    assert wait_job(second.job_id, cluster) == "COMPLETED", \
        output_of(campaign / "jobs", second.job_id)
    stored = manifests(campaign)
    assert len(stored) == 6, "no run lost"  # run folders are named by run id: none twice
    per_job = {job: sum(m["extra"]["slurm"]["job_id"] == job for m in stored)
               for job in (first, second.job_id)}
    assert per_job[first] >= 2 and per_job[first] + per_job[second.job_id] == 6, per_job
    assert not (campaign / "failed").exists() or not list((campaign / "failed").iterdir())
    assert not list((campaign / "runs").glob(".tmp-*"))
    assert "stopped on request" in output_of(campaign / "jobs", first) + \
        (campaign / "jobs" / f"{first}.ipynb").read_text()
    again = iolab(["submit", "smt_thp", "--env", ENV, "--data", str(data), "--resume"],
                  cluster)
    assert "nothing left to run" in again.stdout
    assert len(jobs.read_all(campaign / "jobs")) == 2


@pytest.mark.slow
@needs_fio
@pytest.mark.skipif(not CAN_SET_THP, reason="changing THP needs root and a writable "
                    f"{THP}; without a knob changed the test shows less")
def test_scancel_in_the_middle_of_a_run_restores_knobs_and_keeps_no_half_run(cluster,
                                                                           tmp_path):
    before = THP.read_text()
    other = "never" if "[never]" not in before else "always"
    data = tmp_path / "data"
    iolab(["submit", "smt_thp", "--env", ENV, "--data", str(data),
           "--set", f"grids={{thp: {{vary: {{thp: [{other}]}}}}}}", "--where", f"thp={other}",
           *shrunk(tmp_path, runtime_s=30)], cluster)
    campaign = data / "raw" / "smt_thp" / ENV
    (job,) = job_ids(campaign / "jobs")
    wait_runs(campaign, 0, in_progress=True)
    time.sleep(1)  # fio is measuring, THP set to the point's value
    assert f"[{other}]" in THP.read_text()
    subprocess.run(["scancel", job], env=cluster, check=True)
    assert wait_job(job, cluster) == "CANCELLED"
    assert THP.read_text() == before
    assert not [p for p in (campaign / "runs").iterdir()], "no run, whole or half, is kept"
    assert not (data / ".knob-journal.json").exists()
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "target.dat")], capture_output=True)
    assert left.returncode == 1, f"fio still runs: {left.stdout}"


@pytest.mark.slow
def test_an_unknown_partition_is_named_with_those_there_are(cluster, tmp_path):
    done = iolab(["submit", "smt_thp", "--env", ENV, "--data", str(tmp_path / "data"),
                  "--partition", "gpu"], cluster, check=False)
    assert done.returncode == 2
    assert "--partition: no partition 'gpu' on this cluster (allowed: debug)" in done.stderr
    assert not (tmp_path / "data" / "raw").exists()


@pytest.mark.slow
def test_what_only_slurm_can_refuse_comes_back_in_its_words(cluster, tmp_path):
    data = tmp_path / "data"
    done = iolab(["submit", "smt_thp", "--env", ENV, "--data", str(data), "--mode", "replay",
                  "--time", "soon"], cluster, check=False)
    assert done.returncode == 2
    assert "Slurm refused: sbatch" in done.stderr and "time" in done.stderr.lower()
    assert not list(data.rglob("*.sh")), "the refused job's script is removed"


@pytest.mark.slow
@needs_fio
def test_slurms_own_warning_before_a_short_time_limit_ends_the_job_cleanly(cluster,
                                                                           tmp_path):
    # the real thing, once: a limit of three minutes, the warning due 100 s before it (Slurm
    # may send it up to 60 s earlier, its event resolution: so at 20 to 80 s, after iolab's
    # start), and more runs than fit; the job must end on its own, before the limit
    data = tmp_path / "data"
    iolab(["submit", "smt_thp", "--env", ENV, "--data", str(data), "--time", "3",
           "--signal-before", "100", "--where", "engine=psync", *shrunk(tmp_path, runtime_s=2)],
          cluster)
    campaign = data / "raw" / "smt_thp" / ENV
    (job,) = job_ids(campaign / "jobs")
    assert wait_job(job, cluster, timeout=210) == "COMPLETED", \
        output_of(campaign / "jobs", job)
    notebook = (campaign / "jobs" / f"{job}.ipynb").read_text()
    assert "stopped on request (Slurm's warning before the job's time limit" in notebook
    (campaign / "runs").mkdir(exist_ok=True)  # absent when the warning came before a run
    left = Campaign("smt_thp", ENV, data_dir=data,
                    overrides=shrunk(tmp_path, runtime_s=2)[1::2]).plan(
        where=["engine=psync"]).counts()["to run"]
    assert left > 0, "the campaign stopped before its end"
    assert not list((campaign / "runs").glob(".tmp-*"))
    status = iolab(["status", "--data", str(data)], cluster).stdout
    assert f"job {job} (run" in status and "to run" in status


def test_the_commands_that_follow_a_job_quote_its_paths(tmp_path):
    """'follow it:' names the output and the data folder as one shell word each: a data folder
    named with $(...), backquotes or a ';' is pasted as its name, never run."""
    data = tmp_path / "dq'$(touch${IFS}INJ6)`touch${IFS}INJ7`;x"
    folder = data / "raw" / "smt_thp" / ENV / "jobs"
    record = jobs.JobRecord("4242", "smt_thp.sbatch", "now", "plan")
    [follow] = [line for line in submit.follow(record, folder, data).splitlines()
                if "follow it:" in line]
    lexer = shlex.shlex(follow.split("follow it: ", 1)[1], posix=True, punctuation_chars=";")
    lexer.whitespace_split = True
    assert list(lexer) == ["squeue", "-j", "4242", ";", "tail", "-f", str(folder / "4242.out"),
                           ";", "iolab", "status", "--data", str(data)]
