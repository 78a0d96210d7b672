"""A tiny real fio campaign: plan, run, resume after kill -9, tidy, failure handling, replay.

These tests run fio for about a second per run and are marked slow; they need fio on PATH
(`make test` installs it) and skip with a reason otherwise. The campaign is the repository's
smt_thp design for this machine class, shrunk with --set overrides, in a temporary data folder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from iolab.core.registry import get
from iolab.core.store import sha256_file
from iolab.errors import IolabError, ToolError
from iolab.execution import stop
from iolab.execution.campaign import Campaign
from iolab.paths import REPO_ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")]

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
ENV = "kvm-2vcpu"
CAN_SET_THP = os.geteuid() == 0 and os.access(THP, os.W_OK)


def tiny_overrides(tmp_path: Path, thp: bool = CAN_SET_THP) -> dict:
    """5 points x 2 repetitions of 1 s (and one THP point where THP can be set)."""
    grids = {"concurrency": {"vary": {"engine": ["psync", "io_uring"], "concurrency": [1, 4]}},
             "affinity": {"vary": {"affinity": ["one_core"]}}}
    if thp:
        grids["thp"] = {"vary": {"thp": ["never"]}, "set": {"bs": 131072, "direct": 0}}
    return {"runtime_s": 1, "ramp_s": 0, "repetitions": 2, "target_size": "32M",
            "target_path": str(tmp_path / "target.dat"), "grids": grids}


@pytest.fixture
def tiny(tmp_path):
    overrides = tiny_overrides(tmp_path)
    return Campaign("smt_thp", ENV, data_dir=tmp_path / "data", overrides=overrides), overrides


def assert_whole(store) -> None:
    for run in store.complete_runs():
        for name, meta in run.manifest.files.items():
            assert sha256_file(run.path / name) == meta["sha256"], f"{run.path / name} changed"


def test_campaign_runs_resumes_and_tidies(tiny):
    camp, _ = tiny
    total = camp.plan().counts()["to run"]
    assert total == (5 + (1 if CAN_SET_THP else 0)) * 2
    result = camp.run(progress=False, limit=3)
    assert result.completed == 3 and not result.failed
    assert camp.plan().counts()["to run"] == total - 3
    assert camp.run(progress=False).completed == total - 3
    assert camp.run(progress=False).completed == 0  # nothing left: resume is a no-op

    store = camp.store
    assert_whole(store)
    m = store.complete_runs()[0].manifest
    assert m.argv[:2] == ["fio", "--output-format=json+"] and m.driver == "fio.sh"
    assert m.exit_code == 0 and m.schema_version == 2
    assert m.tool_version.startswith("fio-") and m.overrides["runtime_s"] == 1
    host = json.loads(store.host_path.read_text())
    assert host["fingerprint"] == m.host_fingerprint
    log = [json.loads(line) for line in (store.root / "campaign-log.jsonl").read_text().splitlines()]
    assert [e["event"] for e in log] == ["start", "end"] * 3 and log[0]["limit"] == 3

    df = camp.tidy()
    assert len(df) == total and df["run.id"].is_unique and df["run.config"].nunique() == 1
    assert (df["iops"] > 0).all() and (df["clat_p99_us"] > 0).all()
    assert (df["fio.iops"] == df["iops"]).all() and set(df["engine"]) == {"psync", "io_uring"}
    pinned = df[df["affinity"] == "one_core"]
    assert pinned["run.cpus"].notna().all(), "a pinned run stores its CPU list"
    # the cache is used when nothing changed; a raw file changed behind the manifest's back
    # is not read as a measurement: the table fails naming the run, or leaves it out
    from iolab.core.tidy import cache_path
    assert cache_path(camp.data_dir, "smt_thp", ENV).exists()
    fio_json = store.complete_runs()[0].path / "fio.json"
    doc = json.loads(fio_json.read_text())
    doc["jobs"][0]["read"]["iops"] = 123456789.0
    fio_json.write_text(json.dumps(doc))
    with pytest.raises(IolabError, match=f"{fio_json.parent.name}: fio.json has .* bytes"):
        camp.tidy()
    df = camp.tidy(skip_corrupt=True)
    assert len(df) == total - 1 and df.attrs["corrupt_skipped"] == 1
    assert 123456789.0 not in set(df["iops"])


def test_stored_fio_output_has_latency_histogram_bins(tiny):
    """The adapter asks for json+; nothing on the command line may turn it back into json."""
    camp, _ = tiny
    camp.run(progress=False, limit=1)
    run = camp.store.complete_runs()[0]
    doc = json.loads((run.path / "fio.json").read_text())
    bins = doc["jobs"][0]["read"]["clat_ns"].get("bins")
    assert bins, "fio.json has no clat_ns.bins: the report is json, not json+"
    assert sum(bins.values()) == doc["jobs"][0]["read"]["clat_ns"]["N"]


@pytest.mark.skipif(not CAN_SET_THP, reason="needs root and a writable THP knob")
def test_thp_knob_is_applied_read_back_and_restored(tiny):
    camp, _ = tiny
    before = THP.read_text()
    camp.run(progress=False)
    assert THP.read_text() == before
    df = camp.tidy()
    assert set(df.loc[df["thp"] == "never", "knob.thp"]) == {"never"}


CHILD = """
import json, sys
sys.path.insert(0, {repo!r})
from iolab.execution.campaign import Campaign
c = Campaign("smt_thp", {env!r}, data_dir={data!r}, overrides=json.loads({overrides!r}))
r = c.run(progress=False)
print("INTERRUPTED" if r.interrupted else "STOPPED" if r.stopped else "FINISHED", r.completed)
"""


def child(camp, overrides) -> str:
    return textwrap.dedent(CHILD.format(repo=str(REPO_ROOT), env=ENV, data=str(camp.data_dir),
                                        overrides=json.dumps(overrides)))


def wait_for(runs: Path, stored: int, timeout: float = 60) -> None:
    """Until ``stored`` runs are committed and another is under way."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [p for p in runs.glob("*") if not p.name.startswith(".")] if runs.exists() else []
        if len(done) >= stored and list(runs.glob(".tmp-*")):
            return
        time.sleep(0.05)


def test_kill_9_then_resume_loses_and_duplicates_nothing(tiny):
    camp, overrides = tiny
    total = camp.plan().counts()["to run"]
    proc = subprocess.Popen([sys.executable, "-c", child(camp, overrides)], start_new_session=True,
                            stdout=subprocess.DEVNULL)
    wait_for(camp.store.runs_dir, 2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    stored_before = {r.run_id for r in camp.store.complete_runs()}
    assert 2 <= len(stored_before) < total

    result = camp.run(progress=False)
    assert any("interrupted run" in m for m in result.messages)
    ids = {r.run_id for r in camp.store.complete_runs()}
    assert len(ids) == total and stored_before <= ids
    assert_whole(camp.store)
    assert len(list(camp.store.partial_dir.iterdir())) >= 1


def test_failing_run_is_recorded_and_stops_without_keep_going(tmp_path):
    # 513-byte blocks cannot be read with O_DIRECT: fio starts and fails
    overrides = {**tiny_overrides(tmp_path, thp=False), "base.bs": 513, "base.direct": 1}
    camp = Campaign("smt_thp", ENV, data_dir=tmp_path / "data", overrides=overrides)
    with pytest.raises(IolabError, match="--keep-going"):
        camp.run(progress=False)
    store = camp.store
    assert len(store.failed_runs()) == 1 and {r.run_id for r in store.complete_runs()} == set()
    failed = json.loads((store.failed_runs()[0] / "run.json").read_text())
    assert failed["status"] == "failed" and failed["exit_code"] != 0 and "fio" in failed["failure"]
    result = camp.run(progress=False, keep_going=True)
    assert result.completed == 0 and len(result.failed) == camp.plan().counts()["to run"]


def test_missing_fio_is_reported_before_anything_runs(tiny, monkeypatch):
    camp, _ = tiny
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolError, match="fio not found on PATH.*apt-get install fio"):
        camp.run(progress=False)
    assert not camp.data_dir.exists()


def test_truncated_fio_json_fails_the_run(tiny, monkeypatch):
    camp, _ = tiny
    from iolab.tools.fio import Fio

    real = Fio.parse

    def truncate_then_parse(self, run_dir):
        text = (run_dir / "fio.json").read_text()
        (run_dir / "fio.json").write_text(text[: len(text) // 2])
        return real(self, run_dir)

    monkeypatch.setattr(Fio, "parse", truncate_then_parse)
    result = camp.run(progress=False, keep_going=True, limit=1)
    assert result.completed == 0 and "could not be parsed" in result.messages[-1]
    assert "truncated" in result.messages[-1]


def test_papermill_replay_of_the_chapter(tiny):
    """The real chapter notebook replays from the tiny campaign, given the same overrides."""
    from iolab.report.book import execute

    camp, overrides = tiny
    camp.run(progress=False)
    out = camp.data_dir.parent / "replayed.ipynb"
    execute(get("smt_thp").notebook, out, {"environment": ENV, "data_dir": str(camp.data_dir),
                                           "overrides": overrides})
    nb = json.loads(out.read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    glued = {o["metadata"]["scrapbook"]["name"]: o["data"] for o in outputs
             if "scrapbook" in o.get("metadata", {})}
    total = len({r.run_id for r in camp.store.complete_runs()})
    prefix = "application/papermill.record/"
    assert glued["n_runs"][prefix + "text/plain"] == repr(str(total))
    assert prefix + "image/png" in glued["fig_concurrency"]


def test_ctrl_c_restores_knobs_and_leaves_no_partial_run(tmp_path):
    overrides = tiny_overrides(tmp_path)
    if CAN_SET_THP:  # only THP runs, so the interrupt lands while THP is changed
        overrides["grids"] = {"thp": overrides["grids"]["thp"]}
    camp = Campaign("smt_thp", ENV, data_dir=tmp_path / "data", overrides=overrides)
    before = THP.read_text() if THP.exists() else None
    proc = subprocess.Popen([sys.executable, "-c", child(camp, overrides)], stdout=subprocess.PIPE,
                            text=True)
    wait_for(camp.store.runs_dir, 1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert out.startswith("INTERRUPTED")
    assert not list(camp.store.runs_dir.glob(".tmp-*")), "the unfinished run must be discarded"
    assert not (camp.data_dir / ".knob-journal.json").exists()
    if CAN_SET_THP:  # THP was changed for the stored run, and is back now
        assert set(camp.tidy()["knob.thp"]) == {"never"}
        assert THP.read_text() == before
    assert len({r.run_id for r in camp.store.complete_runs()}) == int(out.split()[1])
    assert_whole(camp.store)


@pytest.mark.parametrize("how", ["iolab stop", "SIGUSR1"])
def test_a_stop_request_ends_the_campaign_after_its_current_run(tmp_path, how):
    overrides = tiny_overrides(tmp_path)
    if CAN_SET_THP:  # THP is changed for the run under way when the request comes
        overrides["grids"] = {"thp": overrides["grids"]["thp"]}
        # runs enough that `iolab stop`, a new Python process, lands before the last one
        # begins on a loaded machine too
        overrides["repetitions"] = 8
    camp = Campaign("smt_thp", ENV, data_dir=tmp_path / "data", overrides=overrides)
    total = camp.plan().counts()["to run"]
    before = THP.read_text() if THP.exists() else None
    proc = subprocess.Popen([sys.executable, "-c", child(camp, overrides)], stdout=subprocess.PIPE,
                            text=True)
    wait_for(camp.store.runs_dir, 1)
    if how == "SIGUSR1":
        proc.send_signal(signal.SIGUSR1)
    else:
        stopped = subprocess.run([sys.executable, "-m", "iolab", "stop", "--data",
                                  str(camp.data_dir)], capture_output=True, text=True, check=True)
        assert "to stop after its current run" in stopped.stdout
    out, _ = proc.communicate(timeout=60)
    assert out.startswith("STOPPED"), out
    stored = {r.run_id for r in camp.store.complete_runs()}
    # the run under way when asked is finished and kept, and no other is begun
    assert len(stored) == int(out.split()[1]) and 2 <= len(stored) < total
    assert not list(camp.store.runs_dir.glob(".tmp-*"))
    assert not (camp.data_dir / ".knob-journal.json").exists()
    if before is not None:
        assert THP.read_text() == before
    assert not stop.request_path(camp.data_dir).exists(), "a request honoured is removed"
    result = camp.run(progress=False)
    assert result.completed == total - len(stored) and not result.stopped
    assert len({r.run_id for r in camp.store.complete_runs()}) == total


def test_a_stale_stop_request_does_not_stop_a_new_campaign(tiny, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)  # a request of its own job is not stale
    camp, _ = tiny
    stop.request(camp.data_dir, "left by a campaign that ended before it read it")
    time.sleep(0.01)
    result = camp.run(progress=False, limit=1)
    assert result.completed == 1 and not result.stopped
    assert any("removed a stale stop request" in m for m in result.messages)
    assert not stop.request_path(camp.data_dir).exists()


@pytest.mark.skipif(not CAN_SET_THP, reason="needs root and a writable THP knob")
def test_a_shared_slurm_node_refuses_knob_changes_unless_allowed(tiny, monkeypatch):
    from iolab.host import slurm

    camp, _ = tiny
    monkeypatch.setattr(slurm, "allocation", lambda env=None: {
        "job_id": "9", "node": "n1", "partition": "p", "cluster": "c", "cpus_on_node": 2,
        "exclusive": False})
    with pytest.raises(IolabError, match="Slurm job 9 on node n1 is shared with other jobs, "
                                         "and this campaign changes system settings \\(thp\\)"):
        camp.run(progress=False, where={"thp": "never"})
    assert not camp.store.root.exists(), "nothing was run or written"
    # points that leave every setting as it is may run beside other jobs
    assert camp.run(progress=False, limit=1, where={"thp": "asis"}).completed == 1
    assert camp.run(progress=False, where={"thp": "never"}, limit=1,
                    allow_shared_node=True).completed == 1
