"""The CUDA PCIe probe's driver, run for real with fakes: a fake nvcc whose "binary" is a shell
script that prints its arguments, a fake nvidia-smi, on a PATH that holds only the fakes and the
few system tools the driver needs, so that a real toolkit or driver cannot answer. Then the probe's
source (its version line, its options), and, where nvcc and a GPU exist, the real build and two
tiny points checked against the report's schema."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_xnvmeperf import fake_program

from iolab.paths import DRIVERS_DIR

DRIVER = DRIVERS_DIR / "gpu_pcie_probe.sh"
SOURCE = DRIVERS_DIR.parent / "src" / "gpu_pcie_probe.cu"

# the system tools the driver and the fakes use, and nothing else
SYSTEM_TOOLS = ("bash", "sh", "sha256sum", "mkdir", "mktemp", "mv", "rm", "chmod", "cat")

# What the fake nvcc does, by $FAKE_NVCC_MODE: "ok" builds anything; "no-native" refuses
# -arch=native as nvcc does on a host without a GPU; "broken" refuses every build. Each call is
# appended to $FAKE_NVCC_LOG. The "binary" it writes says which -arch built it, then prints
# each argument it is given on a line of its own.
FAKE_NVCC = r"""
out=""; arch=""; prev=""
for a in "$@"; do
    if [ "$prev" = "-o" ]; then out="$a"; fi
    case "$a" in -arch=*) arch="${a#-arch=}" ;; esac
    prev="$a"
done
echo "$*" >>"$FAKE_NVCC_LOG"
case "${FAKE_NVCC_MODE:-ok}" in
    broken)
        echo "gpu_pcie_probe.cu(42): error: identifier \"oops\" is undefined" >&2
        exit 2 ;;
    no-native)
        if [ "$arch" = native ]; then
            echo "nvcc fatal   : Could not find any GPU" >&2
            exit 1
        fi ;;
esac
cat >"$out" <<EOF
#!/bin/sh
echo "fake probe built with -arch=$arch"
for arg in "\$@"; do printf 'probe-arg [%s]\n' "\$arg"; done
exit 3
EOF
"""

NVIDIA_SMI_QUERY = ("--query-gpu=index,pci.bus_id,clocks.sm,clocks.mem,clocks.max.sm,"
                    "clocks.max.mem,pcie.link.gen.current,pcie.link.width.current "
                    "--format=csv,noheader,nounits")
CLOCK_LISTING = ["0, 00000000:4B:00.0, 1755, 2619, 1980, 2619, 5, 16",
                 "1, 00000000:CA:00.0, 345, 1593, 1980, 2619, 4, 8"]
FAKE_NVIDIA_SMI = f"""
if [ "$*" != "{NVIDIA_SMI_QUERY}" ]; then echo "unexpected arguments: $*"; exit 9; fi
""" + "".join(f"echo '{line}'\n" for line in CLOCK_LISTING)

PROBE_ARGS = ["--output", "out dir/p.json", "--mode", "read", "--iosize", "4096", "--inflight",
              "1024", "--requests-per-warp", "8", "--iterations", "5", "--warmup", "2",
              "--seed", "$HOME", "*", ""]


class Sandbox:
    """A temporary PATH with fakes, a build folder and the calls the fake nvcc received."""

    def __init__(self, tmp_path: Path, programs: dict[str, str]):
        self.tmp = tmp_path
        self.fakes, system = tmp_path / "fakes", tmp_path / "system"
        system.mkdir(parents=True, exist_ok=True)
        for tool in SYSTEM_TOOLS:
            if not (system / tool).exists():
                (system / tool).symlink_to(shutil.which(tool))
        self.fakes.mkdir(exist_ok=True)
        for name, script in programs.items():
            fake_program(self.fakes, name, script)
        self.build = tmp_path / "build"
        self.log = tmp_path / "nvcc.log"
        self.env = {"PATH": f"{self.fakes}{os.pathsep}{system}",
                    "IOLAB_BUILD_DIR": str(self.build),
                    "CUDA_HOME": str(tmp_path / "no-cuda-here"),
                    "FAKE_NVCC_LOG": str(self.log)}

    @property
    def binary(self) -> Path:
        return self.build / "gpu_pcie_probe"

    def nvcc_calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(DRIVER), *args], capture_output=True, text=True,
                              env={**self.env, **env}, timeout=60)


def source_sha256() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()


def probe_lines(args: list[str], arch: str = "native") -> list[str]:
    return [f"fake probe built with -arch={arch}"] + [f"probe-arg [{a}]" for a in args]


def test_driver_declares_its_version_and_strict_mode():
    text = DRIVER.read_text()
    assert "# iolab-driver-version: 1\n" in text
    assert "\nset -euo pipefail\n" in text
    assert os.access(DRIVER, os.X_OK)


def test_it_builds_once_and_reuses_the_binary(tmp_path):
    box = Sandbox(tmp_path, {"nvcc": FAKE_NVCC, "nvidia-smi": FAKE_NVIDIA_SMI})
    first = box.run(*PROBE_ARGS)
    assert first.returncode == 3, first.stderr  # the probe's own status
    assert first.stderr == ""
    (call,) = box.nvcc_calls()
    words = call.split(" ")
    assert words[:4] == ["-O3", "-std=c++17", "-arch=native", "-o"]
    assert words[5:] == [str(SOURCE.resolve())]
    assert Path(words[4]).parent == box.build.resolve()  # built beside, then renamed
    assert box.binary.exists() and os.access(box.binary, os.X_OK)
    assert (box.build / "gpu_pcie_probe.stamp").read_text() == source_sha256() + "\n"
    assert sorted(p.name for p in box.build.iterdir()) == ["gpu_pcie_probe",
                                                           "gpu_pcie_probe.stamp"]
    again = box.run(*PROBE_ARGS)
    assert again.returncode == 3 and again.stdout == first.stdout
    assert len(box.nvcc_calls()) == 1  # the stamp matched: no second build


def test_a_stale_stamp_or_a_missing_binary_rebuilds(tmp_path):
    box = Sandbox(tmp_path, {"nvcc": FAKE_NVCC})
    assert box.run("--version").returncode == 3
    stamp = box.build / "gpu_pcie_probe.stamp"
    stamp.write_text("0" * 64 + "\n")  # as if built from another version of the source
    assert box.run("--version").returncode == 3
    assert len(box.nvcc_calls()) == 2
    assert stamp.read_text() == source_sha256() + "\n"
    box.binary.unlink()
    assert box.run("--version").returncode == 3
    assert len(box.nvcc_calls()) == 3
    assert box.run("--version").returncode == 3
    assert len(box.nvcc_calls()) == 3


def test_it_falls_back_to_sm_90_when_native_is_refused(tmp_path):
    box = Sandbox(tmp_path, {"nvcc": FAKE_NVCC})
    done = box.run(*PROBE_ARGS, FAKE_NVCC_MODE="no-native")
    assert done.returncode == 3, done.stderr
    calls = box.nvcc_calls()
    assert [c.split(" ")[2] for c in calls] == ["-arch=native", "-arch=sm_90"]
    assert done.stdout.splitlines()[-len(PROBE_ARGS) - 1:] == probe_lines(PROBE_ARGS, "sm_90")
    assert "built for -arch=sm_90" in done.stderr
    assert sorted(p.name for p in box.build.iterdir()) == ["gpu_pcie_probe",
                                                           "gpu_pcie_probe.stamp"]


def test_without_nvcc_it_exits_127_and_says_why(tmp_path):
    box = Sandbox(tmp_path, {"nvidia-smi": FAKE_NVIDIA_SMI})
    done = box.run(*PROBE_ARGS)
    assert done.returncode == 127
    assert done.stdout == ""
    assert "gpu_pcie_probe.sh: nvcc not found" in done.stderr
    assert "the CUDA toolkit's nvcc is needed" in done.stderr
    assert "no GPU run is possible without it" in done.stderr
    assert not box.binary.exists()


def test_nvcc_under_cuda_home_is_found(tmp_path):
    box = Sandbox(tmp_path, {})
    fake_program(tmp_path / "cuda" / "bin", "nvcc", FAKE_NVCC)
    done = box.run("--version", CUDA_HOME=str(tmp_path / "cuda"))
    assert done.returncode == 3, done.stderr
    assert len(box.nvcc_calls()) == 1


def test_a_failing_build_exits_1_with_nvccs_output(tmp_path):
    box = Sandbox(tmp_path, {"nvcc": FAKE_NVCC, "nvidia-smi": FAKE_NVIDIA_SMI})
    done = box.run(*PROBE_ARGS, FAKE_NVCC_MODE="broken")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "with -arch=native and with -arch=sm_90" in done.stderr
    assert done.stderr.count('error: identifier "oops" is undefined') == 2
    assert len(box.nvcc_calls()) == 2
    assert list(box.build.iterdir()) == []  # no binary, no stamp, no leftovers


def test_provenance_lines_come_first_with_nvidia_smi(tmp_path):
    box = Sandbox(tmp_path, {"nvcc": FAKE_NVCC, "nvidia-smi": FAKE_NVIDIA_SMI})
    done = box.run(*PROBE_ARGS)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == [
        f"gpu_pcie_probe: {box.binary.resolve()}",
        *(f"iolab-gpu-clocks: {line}" for line in CLOCK_LISTING),
        *probe_lines(PROBE_ARGS),
    ]


def test_provenance_without_nvidia_smi(tmp_path):
    box = Sandbox(tmp_path, {"nvcc": FAKE_NVCC})
    done = box.run(*PROBE_ARGS)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == [
        f"gpu_pcie_probe: {box.binary.resolve()}",
        "iolab-gpu-clocks: unavailable (nvidia-smi not found)",
        *probe_lines(PROBE_ARGS),
    ]


def test_a_failing_nvidia_smi_is_recorded_and_the_probe_still_runs(tmp_path):
    failing = ("echo 'NVIDIA-SMI has failed because it could not communicate with the driver.'\n"
               "exit 9\n")
    box = Sandbox(tmp_path, {"nvcc": FAKE_NVCC, "nvidia-smi": failing})
    done = box.run(*PROBE_ARGS)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines()[1] == (
        "iolab-gpu-clocks: unavailable (nvidia-smi failed with status 9: NVIDIA-SMI has failed "
        "because it could not communicate with the driver.)")
    assert done.stdout.splitlines()[2:] == probe_lines(PROBE_ARGS)


def test_version_prints_no_provenance(tmp_path):
    box = Sandbox(tmp_path, {"nvcc": FAKE_NVCC, "nvidia-smi": FAKE_NVIDIA_SMI})
    done = box.run("--version")
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == probe_lines(["--version"])


def test_no_arguments_is_a_usage_error(tmp_path):
    box = Sandbox(tmp_path, {"nvcc": FAKE_NVCC})
    done = box.run()
    assert done.returncode == 2 and "gpu_pcie_probe.sh: no arguments" in done.stderr
    assert box.nvcc_calls() == []


# --- the probe's source ---------------------------------------------------------------------------

OPTIONS = ["--version", "--output", "--mode", "--direction", "--bytes", "--iosize", "--inflight",
           "--requests-per-warp", "--iterations", "--warmup", "--device", "--buffer", "--seed"]
REPORT_KEYS = ["schema_version", "probe_version", "cuda_runtime", "cuda_driver", "device", "index",
               "name", "pci_bus_id", "sms", "max_threads_per_sm", "mode", "direction", "bytes",
               "iosize", "inflight", "requests_per_warp", "resident_warps", "buffer_bytes",
               "warmup", "seed", "iterations", "seconds", "requests", "window_ns", "checksum"]


def test_the_source_declares_its_version_and_its_options():
    text = SOURCE.read_text()
    assert "\n// iolab-probe-version: 1\n" in text
    for option in OPTIONS:
        assert f'"{option}"' in text, f"{option} is not parsed"
        assert option in text.split("#include")[0], f"{option} is not in the header comment"
    for word in ("copy", "read", "write", "h2d", "d2h"):
        assert f'"{word}"' in text
    for key in REPORT_KEYS:
        assert f'\\"{key}\\"' in text or f'"{key}"' in text, f"the report lacks {key}"
    for call in ("cudaHostAlloc", "cudaHostAllocMapped", "cudaHostGetDevicePointer",
                 "cudaMemcpyAsync", "cudaEventElapsedTime", "cudaRuntimeGetVersion",
                 "cudaDriverGetVersion", "cudaDeviceGetPCIBusId", "CLOCK_REALTIME",
                 "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "rename"):
        assert call in text
    assert "clockRate" not in text  # deprecated in CUDA 12, gone in 13


# --- the report's schema, and the real probe where nvcc and a GPU exist ---------------------------

def check_report(doc: dict, mode: str, **expected) -> None:
    """Asserts that doc is a probe report of schema version 1 for mode with these arguments."""
    assert sorted(doc) == sorted(["schema_version", "probe_version", "cuda_runtime", "cuda_driver",
                                  "device", "mode", "direction", "bytes", "iosize", "inflight",
                                  "requests_per_warp", "resident_warps", "buffer_bytes", "warmup",
                                  "seed", "iterations", "window_ns", "checksum"])
    assert doc["schema_version"] == 1 and doc["probe_version"] == "1"
    assert isinstance(doc["cuda_runtime"], int) and doc["cuda_runtime"] >= 1000
    assert isinstance(doc["cuda_driver"], int) and doc["cuda_driver"] >= 1000
    device = doc["device"]
    assert sorted(device) == ["index", "max_threads_per_sm", "name", "pci_bus_id", "sms"]
    assert isinstance(device["index"], int) and isinstance(device["name"], str)
    assert isinstance(device["pci_bus_id"], str) and device["pci_bus_id"].count(":") == 2
    assert device["sms"] > 0 and device["max_threads_per_sm"] > 0
    assert doc["mode"] == mode
    copy = mode == "copy"
    for key in ("bytes",):
        assert (doc[key] is None) != copy
    for key in ("iosize", "inflight", "requests_per_warp", "resident_warps", "buffer_bytes",
                "seed"):
        assert (doc[key] is None) == copy, key
    assert (doc["direction"] in ("h2d", "d2h")) if copy else doc["direction"] is None
    for key, value in expected.items():
        assert doc[key] == value, key
    if not copy:
        assert 0 < doc["resident_warps"] <= doc["inflight"]
    assert isinstance(doc["iterations"], list) and doc["iterations"]
    for it in doc["iterations"]:
        assert sorted(it) == ["bytes", "requests", "seconds"]
        assert isinstance(it["seconds"], float) and it["seconds"] > 0
        if copy:
            assert (it["bytes"], it["requests"]) == (doc["bytes"], 1)
        else:
            requests = doc["inflight"] * doc["requests_per_warp"]
            assert (it["bytes"], it["requests"]) == (requests * doc["iosize"], requests)
    start, end = doc["window_ns"]
    assert isinstance(start, int) and isinstance(end, int) and 0 < start <= end
    assert isinstance(doc["checksum"], int) and 0 <= doc["checksum"] < 2 ** 64
    if mode != "read":
        assert doc["checksum"] == 0


SAMPLE = {"schema_version": 1, "probe_version": "1", "cuda_runtime": 12090, "cuda_driver": 12040,
          "device": {"index": 0, "name": "NVIDIA H100 PCIe", "pci_bus_id": "0000:4b:00.0",
                     "sms": 114, "max_threads_per_sm": 2048},
          "mode": "read", "direction": None, "bytes": None, "iosize": 4096, "inflight": 64,
          "requests_per_warp": 3, "resident_warps": 64, "buffer_bytes": 1048576, "warmup": 1,
          "seed": 7, "iterations": [{"seconds": 1.47e-06, "bytes": 786432, "requests": 192}],
          "window_ns": [1795473642443451907, 1795473642443461761], "checksum": 12345}


def test_the_schema_check_itself():
    check_report(SAMPLE, "read", iosize=4096, inflight=64)
    broken = {**SAMPLE, "iterations": [{"seconds": 1e-6, "bytes": 1, "requests": 192}]}
    with pytest.raises(AssertionError):
        check_report(broken, "read")
    with pytest.raises(AssertionError):
        check_report({**SAMPLE, "bytes": 4096}, "read")


def _nvcc() -> str | None:
    return shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None)


def _gpu() -> bool:
    gpus = Path("/proc/driver/nvidia/gpus")
    return gpus.is_dir() and any(gpus.iterdir())


@pytest.mark.slow
@pytest.mark.skipif(not _gpu(), reason="no GPU here")
@pytest.mark.skipif(_nvcc() is None, reason="no nvcc here")  # the closest mark is told first
class TestTheRealProbe:
    @pytest.fixture(autouse=True)
    def build_dir(self, tmp_path, monkeypatch):
        monkeypatch.setenv("IOLAB_BUILD_DIR", str(tmp_path / "build"))
        self.tmp = tmp_path

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(DRIVER), *args], capture_output=True, text=True, timeout=600)

    def test_version(self):
        done = self.run("--version")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("gpu_pcie_probe 1 (CUDA runtime ")

    def test_a_copy_point(self):
        out = self.tmp / "copy.json"
        done = self.run("--output", str(out), "--mode", "copy", "--direction", "h2d",
                        "--bytes", "1048576", "--iterations", "3", "--warmup", "1")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith("gpu_pcie_probe: ")
        assert lines[1].startswith("iolab-gpu-clocks: ")
        doc = json.loads(out.read_text())
        check_report(doc, "copy", direction="h2d", bytes=1048576, warmup=1)
        assert len(doc["iterations"]) == 3
        assert not Path(str(out) + ".tmp").exists()

    def test_a_read_point_and_its_checksum(self):
        args = ["--mode", "read", "--iosize", "4096", "--inflight", "64",
                "--requests-per-warp", "2", "--iterations", "2", "--warmup", "1",
                "--buffer", str(16 << 20), "--seed", "7"]
        docs = []
        for name in ("a.json", "b.json"):
            done = self.run("--output", str(self.tmp / name), *args)
            assert done.returncode == 0, done.stderr
            docs.append(json.loads((self.tmp / name).read_text()))
        check_report(docs[0], "read", iosize=4096, inflight=64, requests_per_warp=2,
                     buffer_bytes=16 << 20, seed=7, warmup=1)
        assert docs[0]["checksum"] == docs[1]["checksum"]  # the same offsets, the same data

    def test_a_write_point(self):
        out = self.tmp / "write.json"
        done = self.run("--output", str(out), "--mode", "write", "--iosize", "512",
                        "--inflight", "32", "--requests-per-warp", "4", "--iterations", "2",
                        "--warmup", "0", "--buffer", str(1 << 20))
        assert done.returncode == 0, done.stderr
        check_report(json.loads(out.read_text()), "write", iosize=512, inflight=32)

    def test_errors_are_clear(self):
        out = self.tmp / "x.json"
        usage = self.run("--output", str(out), "--mode", "read", "--iosize", "1000")
        assert usage.returncode == 2
        assert "gpu_pcie_probe: --iosize: '1000' is not allowed (allowed: a power of two" \
            in usage.stderr
        far = self.run("--output", str(out), "--mode", "copy", "--direction", "d2h",
                       "--bytes", "4096", "--iterations", "1", "--warmup", "0",
                       "--device", "1023")
        assert far.returncode == 1
        assert "gpu_pcie_probe: cudaSetDevice: invalid device ordinal" in far.stderr
        assert not out.exists()
