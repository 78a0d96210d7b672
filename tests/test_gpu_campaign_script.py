"""scripts/gpu_campaign.sh, a GPU experiment's campaign as one bounded call on a borrowed GPU
machine, run for real (on the GPU link experiment) with fakes: a fake nvcc that "builds" a fake probe (a Python script writing a report
of the probe's format), a fake nvidia-smi and cuobjdump, and a Python for iolab that sees a fake
NVIDIA driver folder. Checked: its argument errors, a failed build and a missing nvcc (the logs
still come back packed), a whole campaign stopped after its current run at the deadline and then
resumed, and the tarball's contents."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from iolab.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "gpu_campaign.sh"
EXP = "gpu_pcie"

FAKE_NVCC = """#!/usr/bin/env bash
[[ "${1:-}" == --version ]] && { echo "fake nvcc, release 13.0"; exit 0; }
[[ -n "${FAKE_NVCC_FAIL:-}" ]] && { echo "fake nvcc: error: planted failure" >&2; exit 1; }
out=""; while [[ $# -gt 0 ]]; do [[ "$1" == -o ]] && out=$2; shift; done
cp "$FAKE_PROBE" "$out"
"""

# writes a report of the real probe's format, with plausible numbers
FAKE_PROBE = """#!{python}
import json, os, sys, time
a = sys.argv[1:]
if a == ["--version"]:
    print("gpu_pcie_probe 1 (CUDA runtime 13.0)"); sys.exit(0)
o = dict(zip(a[::2], a[1::2]))
mode, n = o["--mode"], int(o["--iterations"])
copy = mode == "copy"
t0 = time.time_ns()
time.sleep(float(os.environ.get("FAKE_PROBE_SECONDS", "0")))
if copy:
    b = int(o["--bytes"])
    its = [{{"seconds": b / 50e9 + 5e-6, "bytes": b, "requests": 1}}] * n
else:
    io, w, r = int(o["--iosize"]), int(o["--inflight"]), int(o["--requests-per-warp"])
    its = [{{"seconds": w * r * io / 40e9, "bytes": w * r * io, "requests": w * r}}] * n
doc = {{"schema_version": 1, "probe_version": "1", "cuda_runtime": 13000, "cuda_driver": 13000,
       "device": {{"index": 0, "name": "FAKE GPU", "pci_bus_id": "0000:00:06.0", "sms": 132,
                  "max_threads_per_sm": 2048}},
       "mode": mode, "direction": o.get("--direction"),
       "bytes": int(o["--bytes"]) if copy else None, "iosize": None if copy else io,
       "inflight": None if copy else w, "requests_per_warp": None if copy else r,
       "resident_warps": None if copy else min(w, 8448),
       "buffer_bytes": None if copy else int(o.get("--buffer", 1073741824)),
       "warmup": int(o["--warmup"]), "seed": None if copy else int(o.get("--seed", 1)),
       "iterations": its, "window_ns": [t0, time.time_ns()], "checksum": 0}}
json.dump(doc, open(o["--output"], "w"))
"""

FAKE_SMI = """#!/usr/bin/env bash
if [[ "$1" == -q ]]; then
    printf '    Product Name : FAKE GPU\\n            PCIe Generation\\n                Current : 5\\n'
    exit 0
fi
echo "0, 00000000:00:06.0, 1980, 2619, 1980, 2619, 5, 16"
"""

# iolab under a Python that finds the fake driver's GPU folder
FAKE_PYTHON = """#!/usr/bin/env bash
shift 2  # -m iolab
exec {python} -c 'import runpy, sys
import iolab.shared.gpu_io as g
g.GPU_DIR = sys.argv.pop(1)
sys.argv[0] = "iolab"
runpy.run_module("iolab", run_name="__main__")' {gpus} "$@"
"""


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def fakes(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gpus = tmp_path / "gpus"
    (gpus / "0000:00:06.0").mkdir(parents=True)
    probe = _exe(tmp_path / "probe.py", FAKE_PROBE.format(python=sys.executable))
    _exe(bin_dir / "nvcc", FAKE_NVCC)
    _exe(bin_dir / "nvidia-smi", FAKE_SMI)
    _exe(bin_dir / "cuobjdump", "#!/bin/sh\necho 'ELF file    1: fake.sm_90.cubin'\n")
    python = _exe(tmp_path / "python", FAKE_PYTHON.format(python=sys.executable, gpus=gpus))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_PROBE": str(probe),
           "IOLAB_BUILD_DIR": str(tmp_path / "build"), "IOLAB_PYTHON": str(python)}
    return tmp_path, env


def campaign(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=300)


def packed(out: Path) -> list[str]:
    with tarfile.open(out / f"{EXP}-h200-pcie5.tar.gz") as tar:
        return tar.getnames()


@pytest.mark.parametrize("args, message", [
    ([], "--experiment is required"),
    (["--experiment", "../x"], "--experiment '../x': letters, digits, '_' only"),
    (["--env", "h200-pcie5"], "--experiment is required"),
    (["--experiment", EXP], "--env is required"),
    (["--experiment", EXP, "--env", "nope", "--out", "o", "--stop-at", "1"],
     f"no notebooks/params/nope/{EXP}.yaml"),
    (["--experiment", EXP, "--env", "../x", "--out", "o", "--stop-at", "1"], "letters, digits"),
    (["--experiment", EXP, "--env", "h200-pcie5", "--stop-at", "1"], "--out is required"),
    (["--experiment", EXP, "--env", "h200-pcie5", "--out", "o"], "--stop-at is required"),
    (["--experiment", EXP, "--env", "h200-pcie5", "--out", "o", "--stop-at", "1m"],
     "a whole number of seconds"),
    (["--experiment", EXP, "--env", "h200-pcie5", "--out", "o", "--stop-at", "1", "--grace"],
     "--grace needs a value"),
    (["--env", "h200-pcie5", "--bogus"], "unknown argument '--bogus'"),
])
def test_argument_errors(tmp_path, args, message):
    done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and "usage: gpu_campaign.sh" in done.stderr
    assert not (tmp_path / "o").exists(), "nothing is written on a usage error"


@pytest.mark.slow
def test_a_failed_build_or_a_missing_nvcc_still_packs_the_logs(fakes):
    tmp, env = fakes
    out = tmp / "out"
    done = campaign(["--experiment", EXP, "--env", "h200-pcie5", "--out", str(out),
                     "--stop-at", "60", "--data", str(tmp / "data"), "--",
                     "--set", "gpu_counter=none"], {**env, "FAKE_NVCC_FAIL": "1"})
    assert done.returncode != 0, done.stdout
    assert "the smoke point failed" in done.stdout
    assert "planted failure" in (out / "gpu-campaign.log").read_text()
    assert "fake nvcc, release 13.0" in (out / "build-record.txt").read_text()
    assert {"nvidia-smi-q.txt", "build-record.txt", "gpu-campaign.log"} <= set(packed(out))

    bare = {**env, "PATH": "/usr/bin:/bin", "CUDA_HOME": str(tmp / "no-cuda")}
    done = campaign(["--experiment", EXP, "--env", "h200-pcie5", "--out", str(tmp / "out2"),
                     "--stop-at", "60", "--data", str(tmp / "data"), "--",
                     "--set", "gpu_counter=none"], bare)
    assert done.returncode != 0
    assert "nvcc" in done.stdout and "Nothing was run" in done.stdout
    assert "(nvcc did not run)" in (tmp / "out2" / "build-record.txt").read_text()
    assert not list((tmp / "data").glob(f"raw/{EXP}/*/runs/*")), "nothing ran"


@pytest.mark.slow
def test_stopped_at_the_deadline_then_resumed(fakes):
    tmp, env = fakes
    out, data = tmp / "out", tmp / "data"
    args = ["--experiment", EXP, "--env", "h200-pcie5", "--out", str(out), "--data", str(data),
            "--",
            "--set", "gpu_counter=none", "--where", "mode=copy"]
    # asked to stop at once (that is, 10 s after the campaign started, once its handlers are
    # in place), with runs of 0.4 s: the smoke point and what ran until then are stored
    env = {**env, "FAKE_PROBE_SECONDS": "0.4"}
    done = campaign(["--stop-at", "0", *args], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "asking the campaign to stop after its current run" in done.stdout
    assert "campaign ended with status 3" in done.stdout
    runs = [n for n in packed(out) if n.endswith("/run.json")]
    assert 1 <= len(runs) < 54, "the smoke point and what ran before the stop"
    assert {f"raw/{EXP}/h200-pcie5/host.json", f"raw/{EXP}/h200-pcie5/campaign-log.jsonl",
            "build-record.txt", "nvidia-smi-q.txt", "gpu-campaign.log"} <= set(packed(out))
    record = (out / "build-record.txt").read_text()
    assert "program: gpu_pcie_probe" in record and "ELF file    1: fake.sm_90.cubin" in record
    # run again with time enough: it resumes and ends with every copy point's three runs
    done = campaign(["--stop-at", "250", *args], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "campaign ended with status 0" in done.stdout
    assert len([n for n in packed(out) if n.endswith("/run.json")]) == 54
