"""Stop requests (``iolab.execution.stop``): which campaign honours one, and which is stale."""

from __future__ import annotations

import json
import os
import time

import pytest

from iolab.execution import stop

from test_rounds import campaign, fake_fio  # noqa: F401 (fixtures)


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


# -- requests iolab did not write ------------------------------------------------------------
# The request's name follows from the data directory's path, in a lock folder every user may
# write into: only a file of this user's (or root's) stops this user's campaign, and a request
# iolab did not write is ignored with one line, never an internal error.

def _plant(data_dir, body: str):
    path = stop.request_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user's needs root to make")
def test_a_request_another_user_made_is_not_honoured(tmp_path):
    started = time.time()
    path = _plant(tmp_path, json.dumps({"reason": "a prank", "at": time.time(), "job": None}))
    os.chown(path, 65534, 65534)
    doc, message = stop.pending(tmp_path, started)
    assert doc is None and stop.read(tmp_path) is None
    assert message == (f"ignored {path}: a stop request made by uid 65534, not by this user "
                       f"(uid {os.geteuid()}) or root")
    assert path.exists(), "another user's file is left to them"


@pytest.mark.parametrize("body, problem", [
    ('{"reason": "x", "at": "soon"}', "key 'at': 'soon' is not a time"),
    ('{"reason": "x", "at": [1]}', "key 'at': [1] is not a time"),
    ('{"reason": "x", "at": true}', "key 'at': True is not a time"),
    ('{"reason": "x"}', "key 'at': None is not a time"),
    ('{"reason": "x", "at": 1e400}', "key 'at': inf is not a time"),
    ('{"reason": ["x"], "at": 1}', "key 'reason': ['x'] is not text"),
    ('{"reason": "x", "at": 1, "job": {"id": 1}}', "key 'job': {'id': 1} is not text"),
    ('[1, 2]', "not a stop request (a JSON list, not an object)"),
])
def test_a_request_iolab_did_not_write_is_ignored_in_one_line(tmp_path, body, problem):
    path = _plant(tmp_path, body)
    doc, message = stop.pending(tmp_path, 0.0)
    assert doc is None and message.startswith(f"ignored {path}: {problem}")
    assert "\n" not in message
    assert path.read_text() == body, "left as it is"


def test_a_request_nested_too_deeply_asks_for_a_stop_as_unreadable_json_does(tmp_path):
    """Probe 6, C4: 100,000 nested brackets were a RecursionError, which would have ended the
    campaign as an internal error between two runs (so many are more than a request's bound
    now, and ignored: the next test; 30,000 fit in it)."""
    _plant(tmp_path, "[" * 30_000 + "]" * 30_000)
    doc, message = stop.pending(tmp_path, 0.0)
    assert doc["reason"] == "an unreadable stop request" and message == ""


def test_a_request_larger_than_iolab_writes_is_ignored_unread(tmp_path):
    path = _plant(tmp_path, "[" * 100_000 + "]" * 100_000)
    for size in (200_000, 3 << 30):
        os.truncate(path, size)  # sparse beyond what was written: no disk, no memory unless read
        doc, message = stop.pending(tmp_path, 0.0)
        assert doc is None and message == (f"ignored {path}: more than {stop.REQUEST_MOST:,} "
                                           "bytes, so not a stop request iolab wrote")


def test_a_campaign_runs_on_past_an_ignored_request_and_says_so_once(campaign, fake_fio):
    camp = campaign("data", {"seed": 11})
    fake_fio(camp, {c: [1000] * 6 for c in (1, 2, 4, 8)})
    path = _plant(camp.data_dir, '{"reason": "x", "at": "soon"}')
    result = camp.run(progress=False, limit=3)
    assert result.completed == 3 and not result.stopped
    assert result.messages.count(f"ignored {path}: key 'at': 'soon' is not a time (seconds "
                                 "since 1970, a number)") == 1
