"""What runs inside a batch job (``iolab.batch.job``), with papermill replaced by a stand-in
that plays the campaign: Slurm's warning turned into a stop request, the request cleared at
the end, and the next job submitted only when the stopped campaign made progress."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from iolab.batch import job
from iolab.errors import InputError, IolabError
from iolab.execution import stop
from iolab.execution.signals import signal_name

ENV = "kvm-2vcpu"


@pytest.fixture
def played(monkeypatch, tmp_path):
    """Replace the notebook's execution: it sends this process a signal (SIGUSR1, Slurm's
    warning, unless told otherwise) and keeps the request the campaign would read; the
    campaign's (stored, to run) before and after are scripted."""
    seen: dict = {"stored": [5, 5], "resumed": []}
    monkeypatch.setenv("SLURM_JOB_ID", "31")

    def execute(src: Path, dst: Path, params: dict, **_) -> None:
        os.kill(os.getpid(), seen["signal"])
        seen["request"] = stop.read(tmp_path)
        seen["params"] = params
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(
            'environment = "kvm-2vcpu"\nmode = "run"\nrun_options = {"limit": 3}',
            metadata={"tags": ["injected-parameters"]})]
        nbformat.write(nb, dst)

    stored = iter([])

    def counts(experiment, environment, data_dir, overrides, where):
        return next(stored)

    monkeypatch.setattr("iolab.report.book.execute", execute)
    monkeypatch.setattr(job, "_stored", counts)
    monkeypatch.setattr("iolab.batch.submit.resume",
                        lambda *a, **k: seen["resumed"].append(k.get("after")))

    def play(before_after: list[tuple[int, int]], sent: int = signal.SIGUSR1, **options):
        nonlocal stored
        stored = iter(before_after)
        seen["signal"] = sent
        status = job.run_notebook("smt_thp", ENV, mode="run", output=tmp_path / "out.ipynb",
                                  data_dir=tmp_path, log=seen.setdefault("log", []).append,
                                  **options)
        return status, seen

    return play


def test_the_warning_becomes_a_stop_request_of_the_job_and_is_cleared(played, tmp_path):
    status, seen = played([(0, 4)])
    assert status == 0
    assert seen["request"]["job"] == "31" and "time limit" in seen["request"]["reason"]
    assert not stop.request_path(tmp_path).exists()
    assert seen["resumed"] == []
    assert any("--resume" in line for line in seen["log"])
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL, "the handler is put back"


def test_a_job_that_stored_runs_submits_the_next_one_after_itself(played):
    status, seen = played([(2, 9), (5, 6)], resubmit=True)
    assert status == 0 and seen["resumed"] == ["31"]
    assert not any("no next job" in line for line in seen["log"])


def test_a_cancelled_job_submits_no_next_one(played):
    # scancel sends SIGTERM to every process of the job: that is an end, not a warning
    status, seen = played([(2, 9)], sent=signal.SIGTERM, resubmit=True)
    assert status == 128 + signal.SIGTERM and seen["resumed"] == []
    assert seen["request"] is None, "a stop now, not a stop request after the run"
    assert any(line.startswith("interrupted by SIGTERM") and "no next job" in line
               for line in seen["log"])


def test_a_job_that_stored_nothing_does_not_submit_another(played):
    status, seen = played([(2, 9), (2, 9)], resubmit=True)
    assert status == 0 and seen["resumed"] == []
    assert any("longer --time" in line for line in seen["log"])


def test_a_campaign_complete_when_warned_needs_no_next_job(played):
    status, seen = played([(2, 9), (11, 0)], resubmit=True)
    assert status == 0 and seen["resumed"] == []
    assert any("no run is left" in line for line in seen["log"])


def test_the_selection_reaches_the_notebook_as_run_options(played):
    _, seen = played([(0, 4)], where=["engine=psync"], limit=3, allow_shared_node=True)
    assert seen["params"]["run_options"] == {"where": ["engine=psync"], "limit": 3,
                                             "allow_shared_node": True}


def test_a_notebook_that_ran_a_campaign_replays_when_executed_again(played, tmp_path):
    """MyST-NB or Jupyter executing the written notebook again must not measure again."""
    played([(0, 4)])
    cell = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0]
    assert cell.source.splitlines() == ['environment = "kvm-2vcpu"', 'mode = "replay"',
                                        job.REPLAY_NOTE]
    plain = nbformat.v4.new_notebook()
    plain.cells = [nbformat.v4.new_code_cell('mode = "run"')]
    assert not job.as_replay(plain) and plain.cells[0].source == 'mode = "run"'


def test_a_failing_campaign_keeps_its_own_error_over_a_half_written_notebook(monkeypatch,
                                                                            tmp_path):
    def fails(src, dst, params, **_):
        dst.write_text("{ half a notebook")
        raise IolabError("the campaign's own error")

    monkeypatch.setattr("iolab.report.book.execute", fails)
    said = []
    with pytest.raises(IolabError, match="the campaign's own error"):
        job.run_notebook("smt_thp", ENV, mode="run", output=tmp_path / "o.ipynb",
                         data_dir=tmp_path, log=said.append)
    assert any("could not mark it to replay" in line for line in said)


def test_a_selection_without_mode_run_is_refused(tmp_path):
    with pytest.raises(InputError, match="only choose what a campaign runs"):
        job.run_notebook("smt_thp", ENV, mode="replay", output=tmp_path / "o.ipynb",
                         limit=2, log=lambda line: None)


# a stand-in for the notebook's kernel: a process of its own that says which signal reached it
KERNEL = """import signal, sys
wanted = [int(a) for a in sys.argv[1:]]
signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
print("ready", flush=True)
print(signal.sigwait(wanted), flush=True)
"""


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGHUP, signal.SIGUSR2, signal.SIGTERM,
                                  signal.SIGRTMIN + 3], ids=signal_name)
@pytest.mark.parametrize("when", ["running", "starting"])
def test_a_stop_now_signal_reaches_the_kernel_and_is_the_exit_status(monkeypatch, tmp_path,
                                                                     sent, when):
    """The kernel runs in a session of its own: Ctrl-C, a closed terminal or a kill of this
    process would never reach the campaign in it. A signal that comes while the kernel
    starts is passed on once it has started."""
    seen = {}

    def execute(src: Path, dst: Path, params: dict, on_kernel, **_) -> None:
        kernel = subprocess.Popen([sys.executable, "-c", KERNEL, str(sent)],
                                  stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert kernel.stdout.readline() == "ready\n"
        if when == "starting":
            os.kill(os.getpid(), sent)
        on_kernel(kernel.pid)
        if when == "running":
            os.kill(os.getpid(), sent)
        seen["kernel got"] = int(kernel.communicate(timeout=10)[0])

    monkeypatch.setattr("iolab.report.book.execute", execute)
    log: list[str] = []
    before = signal.getsignal(sent)
    status = job.run_notebook("smt_thp", ENV, mode="run", output=tmp_path / "o.ipynb",
                              data_dir=tmp_path, log=log.append)
    assert seen["kernel got"] == sent
    assert status == 128 + sent
    assert any(line.startswith(f"interrupted by {signal_name(sent)}: passed on to the campaign")
               for line in log), log
    assert signal.getsignal(sent) == before, "the handler is put back"


def test_the_knobs_a_dead_kernel_left_are_restored_before_the_error(monkeypatch, tmp_path):
    (tmp_path / ".knob-journal.json").write_text("{}")
    restored = []

    def dies(src, dst, params, **_):
        raise IolabError("the notebook's kernel died while a cell ran")

    monkeypatch.setattr("iolab.report.book.execute", dies)
    monkeypatch.setattr("iolab.execution.runner.restore_left",
                        lambda data: restored.append(data) or ["thp: restored to \"madvise\""])
    log: list[str] = []
    with pytest.raises(IolabError, match="kernel died"):
        job.run_notebook("smt_thp", ENV, mode="run", output=tmp_path / "o.ipynb",
                         data_dir=tmp_path, log=log.append)
    assert restored == [tmp_path]
    assert log[0].startswith("the notebook's kernel ended without putting back the knobs")
    assert log[1] == '  thp: restored to "madvise"'


def test_the_go_on_command_quotes_the_data_folder(monkeypatch, tmp_path):
    """A data folder named with a command substitution is pasted back as that name, never
    run, from the command the stopped job prints."""
    data = tmp_path / "d'$(touch INJ)`touch INJ2`"
    monkeypatch.setattr(job, "_stored", lambda *a: (1, 4))
    said: list[str] = []
    stopped = job._Job("smt_thp", ENV, "run", tmp_path / "o.ipynb", str(data), data, [], {},
                       False)
    job._after_stop(stopped, ["SIGUSR1"], 0, said.append)
    [line] = [s for s in said if s.startswith("go on with")]
    words = shlex.split(line.removeprefix("go on with: "))
    assert words[words.index("--data") + 1] == str(data)
