"""A tiny real fio campaign: plan, run, resume after kill -9, tidy, failure handling, replay.

These tests run fio for about a second per run and are marked slow; they need fio on PATH
(CI installs it) and skip with a reason otherwise.
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

from iolab import spec as specmod, tidy
from iolab.errors import IolabError, ToolError
from iolab.paths import NOTEBOOKS_DIR, REPO_ROOT
from iolab.runner import plan_for, run_campaign
from iolab.store import Store, sha256_file

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")]

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
# The tiny campaign uses the local environment's name so that the real chapter notebook can
# replay it (its spec comes from the repository, its data from the temporary folder).
ENV = "kvm-2vcpu"
CAN_SET_THP = os.geteuid() == 0 and os.access(THP, os.W_OK)

TINY = """experiment: smt_thp
runtime_s: 1
ramp_s: 0
repetitions: 2
target_path: {target}
target_size: 32M
grids:
  concurrency: {{vary: {{engine: [psync, io_uring], concurrency: [1, 4]}}}}
  affinity: {{vary: {{affinity: [one_core]}}}}
  smt: null
  thp: {thp}
"""


@pytest.fixture
def tiny(tmp_path):
    """A tiny smt_thp campaign (5 points x 2 reps, 1 s each) in a temporary data folder."""
    notebooks = tmp_path / "notebooks"
    (notebooks / "params" / ENV).mkdir(parents=True)
    shutil.copy(NOTEBOOKS_DIR / "smt_thp.ipynb", notebooks)
    thp = "{vary: {thp: [never]}, set: {bs: 131072, direct: 0}}" if CAN_SET_THP else "null"
    (notebooks / "params" / ENV / "smt_thp.yaml").write_text(
        TINY.format(target=tmp_path / "target.dat", thp=thp))
    spec = specmod.load("smt_thp", ENV, notebooks_dir=notebooks, params_dir=notebooks / "params")
    return spec, tmp_path / "data"


def assert_whole(store: Store) -> None:
    for run in store.complete_runs():
        for name, meta in run.manifest["files"].items():
            assert sha256_file(run.path / name) == meta["sha256"], f"{run.path / name} changed"


def test_campaign_runs_resumes_and_tidies(tiny):
    spec, data = tiny
    plan = plan_for(spec, data)
    total = plan.counts()["to run"]
    assert total == (5 + (1 if CAN_SET_THP else 0)) * 2
    result = run_campaign(spec, data, progress=False, max_runs=3)
    assert result.completed == 3 and not result.failed
    assert plan_for(spec, data).counts()["to run"] == total - 3
    result = run_campaign(spec, data, progress=False)
    assert result.completed == total - 3
    assert run_campaign(spec, data, progress=False).completed == 0  # nothing left: resume is a no-op

    store = Store(data, "smt_thp", ENV)
    assert_whole(store)
    manifest = store.complete_runs()[0].manifest
    assert manifest["argv"][0] == "scripts/drivers/fio.sh" and manifest["exit_code"] == 0
    assert manifest["tool_version"].startswith("fio-")
    host = json.loads(store.host_path.read_text())
    assert host["fingerprint"] == manifest["host_fingerprint"]

    df = tidy.load(data, "smt_thp", ENV)
    assert len(df) == total and df["run_id"].is_unique
    assert (df["iops"] > 0).all() and (df["clat_p99_us"] > 0).all()
    assert set(df["engine"]) == {"psync", "io_uring"}
    # the cache is used when nothing changed, and rebuilt when a raw file changes
    assert tidy.cache_path(data, "smt_thp", ENV).exists()
    fio_json = store.complete_runs()[0].path / "fio.json"
    doc = json.loads(fio_json.read_text())
    doc["jobs"][0]["read"]["iops"] = 123456789.0
    fio_json.write_text(json.dumps(doc))
    assert 123456789.0 in set(tidy.load(data, "smt_thp", ENV)["iops"])


@pytest.mark.skipif(not CAN_SET_THP, reason="needs root and a writable THP knob")
def test_thp_knob_is_applied_read_back_and_restored(tiny):
    spec, data = tiny
    before = THP.read_text()
    run_campaign(spec, data, progress=False)
    assert THP.read_text() == before
    df = tidy.load(data, "smt_thp", ENV)
    assert set(df.loc[df["thp"] == "never", "knob_thp"]) == {"never"}


def test_kill_9_then_resume_loses_and_duplicates_nothing(tiny, tmp_path):
    spec, data = tiny
    total = plan_for(spec, data).counts()["to run"]
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from pathlib import Path
        from iolab import spec as specmod
        from iolab.runner import run_campaign
        nb = Path({str(spec.notebook.parent)!r})
        s = specmod.load("smt_thp", {ENV!r}, notebooks_dir=nb, params_dir=nb / "params")
        run_campaign(s, Path({str(data)!r}), progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    runs = data / "raw" / "smt_thp" / ENV / "runs"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until 2 runs are stored and a third is under way
        done = [p for p in runs.glob("*") if not p.name.startswith(".")] if runs.exists() else []
        if len(done) >= 2 and list(runs.glob(".tmp-*")):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    store = Store(data, "smt_thp", ENV)
    stored_before = store.complete_ids()
    assert 2 <= len(stored_before) < total

    result = run_campaign(spec, data, progress=False)
    assert any("interrupted run" in m for m in result.messages)
    ids = store.complete_ids()
    assert len(ids) == total and stored_before <= ids
    assert_whole(store)
    assert len(list((store.root / "partial").iterdir())) >= 1
    if CAN_SET_THP:
        assert THP.exists()  # the knob journal of the killed run was restored before resuming


def test_failing_run_is_recorded_and_stops_without_keep_going(tiny, monkeypatch):
    spec, data = tiny
    spec.values["target_path"] = "/proc/iolab-cannot-create-this"
    with pytest.raises(IolabError, match="--keep-going"):
        run_campaign(spec, data, progress=False)
    store = Store(data, "smt_thp", ENV)
    assert len(store.failed_runs()) == 1 and store.complete_ids() == set()
    failed = json.loads((store.failed_runs()[0] / "run.json").read_text())
    assert failed["status"] == "failed" and failed["exit_code"] != 0 and "fio" in failed["failure"]
    result = run_campaign(spec, data, progress=False, keep_going=True)
    assert result.completed == 0 and len(result.failed) == plan_for(spec, data).counts()["to run"]


def test_missing_fio_is_reported_before_anything_runs(tiny, monkeypatch):
    spec, data = tiny
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolError, match="fio not found on PATH.*apt-get install fio"):
        run_campaign(spec, data, progress=False)
    assert not data.exists()


def test_truncated_fio_json_fails_the_run(tiny, monkeypatch):
    spec, data = tiny
    from iolab.experiments import smt_thp

    real = smt_thp.parse_run

    def truncate_then_parse(run_dir):
        text = (run_dir / "fio.json").read_text()
        (run_dir / "fio.json").write_text(text[: len(text) // 2])
        return real(run_dir)

    monkeypatch.setattr(smt_thp, "parse_run", truncate_then_parse)
    result = run_campaign(spec, data, progress=False, keep_going=True, max_runs=1)
    assert result.completed == 0 and "could not be parsed" in result.messages[0]
    assert "truncated" in result.messages[0]


def test_papermill_replay_of_the_chapter(tiny):
    """The real chapter notebook replays from the tiny campaign without errors."""
    papermill = pytest.importorskip("papermill")
    spec, data = tiny
    run_campaign(spec, data, progress=False)
    out = data.parent / "replayed.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS_DIR / "smt_thp.ipynb"), str(out),
                               parameters={"environment": ENV, "data_dir": str(data)},
                               cwd=str(NOTEBOOKS_DIR), kernel_name="python3", progress_bar=False)
    nb = json.loads(out.read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    glued = {o["metadata"]["scrapbook"]["name"]: o["data"] for o in outputs
             if "scrapbook" in o.get("metadata", {})}
    total = len(Store(data, "smt_thp", ENV).complete_ids())
    prefix = "application/papermill.record/"
    assert glued["n_runs"][prefix + "text/plain"] == repr(str(total))
    assert prefix + "image/png" in glued["fig_concurrency"]


def test_ctrl_c_restores_knobs_and_leaves_no_partial_run(tiny):
    spec, data = tiny
    if CAN_SET_THP:  # only THP runs, so the interrupt lands while THP is changed
        params = spec.notebook.parent / "params" / ENV / "smt_thp.yaml"
        params.write_text(params.read_text().replace("concurrency: {vary", "concurrency: null\n#")
                          .replace("affinity: {vary", "affinity: null\n#"))
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from pathlib import Path
        from iolab import spec as specmod
        from iolab.runner import run_campaign
        nb = Path({str(spec.notebook.parent)!r})
        s = specmod.load("smt_thp", {ENV!r}, notebooks_dir=nb, params_dir=nb / "params")
        r = run_campaign(s, Path({str(data)!r}), progress=False)
        print("INTERRUPTED" if r.interrupted else "FINISHED", r.completed)
    """)
    before = THP.read_text() if THP.exists() else None
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    runs = data / "raw" / "smt_thp" / ENV / "runs"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # one run stored and the next one under way
        if runs.exists() and [p for p in runs.glob("*") if not p.name.startswith(".")] \
                and list(runs.glob(".tmp-*")):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert out.startswith("INTERRUPTED")
    assert not list(runs.glob(".tmp-*")), "the unfinished run must be discarded"
    assert not (data / ".knob-journal.json").exists()
    if CAN_SET_THP:  # THP was changed for the stored run, and is back now
        assert set(tidy.load(data, "smt_thp", ENV)["knob_thp"]) == {"never"}
        assert THP.read_text() == before
    store = Store(data, "smt_thp", ENV)
    assert len(store.complete_ids()) == int(out.split()[1])
    assert_whole(store)
