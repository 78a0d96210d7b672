"""What runs inside a batch job (``iolab.batch.job``), with papermill replaced by a stand-in
that plays the campaign: Slurm's warning turned into a stop request, the request cleared at
the end, and the next job submitted only when the stopped campaign made progress."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import nbformat
import pytest

from iolab.batch import job
from iolab.errors import InputError
from iolab.execution import stop

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
    status, seen = played([(2, 9), (5, 6)], sent=signal.SIGTERM, resubmit=True)
    assert status == 0 and seen["resumed"] == []
    assert any("ended by SIGTERM" in line for line in seen["log"])


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
    from iolab.errors import IolabError

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
