"""Stop requests (``iolab.execution.stop``): which campaign honours one, and which is stale."""

from __future__ import annotations

import time

from iolab.execution import stop


def test_a_request_made_after_the_campaign_started_is_honoured(tmp_path):
    started = time.time()
    stop.request(tmp_path, "asked by hand")
    doc, message = stop.pending(tmp_path, started)
    assert doc["reason"] == "asked by hand" and message == ""
    assert stop.request_path(tmp_path).exists(), "the campaign clears it when it stops"


def test_a_request_of_the_campaigns_own_job_is_honoured_whenever_made(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    stop.request(tmp_path, "Slurm's warning")  # before the campaign in the kernel started
    doc, _ = stop.pending(tmp_path, time.time() + 60)
    assert doc["job"] == "12"


def test_an_older_request_of_another_job_is_stale_and_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    stop.request(tmp_path, "Slurm's warning")
    monkeypatch.setenv("SLURM_JOB_ID", "13")
    doc, message = stop.pending(tmp_path, time.time() + 60)
    assert doc is None and "stale stop request" in message
    assert not stop.request_path(tmp_path).exists()


def test_a_request_of_the_jobs_attempt_before_a_requeue_is_stale(tmp_path, monkeypatch):
    # Slurm keeps a job's id when it requeues it; the restart count tells the attempts apart
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    stop.request(tmp_path, "Slurm's warning")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    doc, message = stop.pending(tmp_path, time.time() + 60)
    assert doc is None and "stale" in message


def test_without_a_request_nothing_stops(tmp_path):
    assert stop.pending(tmp_path, time.time()) == (None, "")


def test_an_unreadable_request_still_asks_for_a_stop(tmp_path):
    path = stop.request_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{half")
    doc, _ = stop.pending(tmp_path, time.time())
    assert doc is not None and "unreadable" in doc["reason"]
