"""The AiSIO CIJOE importer (iolab.importers.cijoe) and imported campaigns (iolab.importers.aisio).

Two parts:

* A small CIJOE output folder built here from synthesised outputs (no real data): pairing,
  cross-checks that must report a planted disagreement, re-import, failed runs, the host
  record (no secret copied), extras, and ``iolab tidy`` on the result; and a tool
  comparison of bdevperf and spdk_nvme_perf with and without thread siblings, whose runs
  must all be paired with their AiSIO results. Fast.
* The two real AiSIO archives in ``../shared/aisio/`` (public data, never committed): counts,
  zero disagreements, AiSIO's archived numbers (docs/aisio-reference.md §4.5, §4.8)
  reproduced from the tidy table, and idempotent re-import, marked slow (about 10 s); and,
  fast, the importer's compiled-pattern readers of records, command lines and frequency logs
  against YAML, shlex and a strptime-based reading on every one of them. Skipped where the
  archives are absent.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import tarfile
from pathlib import Path, PurePosixPath

import pandas as pd
import pytest
import yaml

from iolab import cli, paths
from iolab.core.store import Store
from iolab.core.tidy import load
from iolab.errors import InputError, ParseError
from iolab.execution.campaign import source
from iolab.importers import aisio as aisio_import
from iolab.importers.aisio import ImportedCampaign
from iolab.importers.cijoe import (CPUFREQ_READ, CPUFREQ_START, DCGM_READ, DCGM_START, LSCPU,
                                   OTHER, P2P, classify, import_archive)
from iolab.parsers import shell_words
from iolab.parsers.cijoe_state import parse_cijoe_state
from iolab.parsers.cpufreq_log import aisio_cpu_freqs, parse_cpufreq_log
from test_parsers_aisio import strptime_lines

FIX = Path(__file__).parent / "fixtures" / "aisio_formats"
AISIO_DIR = Path(paths.REPO_ROOT).parent / "shared" / "aisio"
UPCIE = AISIO_DIR / "cpu-initiated-upcie.tar.gz"
PCIE = AISIO_DIR / "pcie-bandwidth-saturation.tar.gz"
AISIO_COLUMNS = ["qdepth", "iosize", "ndevs", "ncpus", "nqueues", "tool", "backend", "thr_sib",
                 "smt", "turbo", "stress", "cpu_governor", "fixed_freq", "iops", "mibs",
                 "cpu_usage"]


# --- classification ---------------------------------------------------------------------------

@pytest.mark.parametrize("cmd, kind", [
    ("/usr/bin/time xnvmeperf run --cpumask 0001 --qdepth 128 0000:4a:00.0", aisio_import.XNVMEPERF_RUN),
    ("/usr/bin/time xnvmeperf cuda-run --qdepth 128 --nqueues 2 0000:4a:00.0",
     aisio_import.XNVMEPERF_CUDA_RUN),
    ("/usr/bin/time /root/spdk/build/examples/bdevperf -c /tmp/c.json -m 3 -q 128", aisio_import.BDEVPERF),
    ("/usr/bin/time -o t.txt -v xnvmeperf run --qdepth 1 0000:4a:00.0", aisio_import.XNVMEPERF_RUN),
    ("spdk/examples/bdev/bdevperf/bdevperf.py perform_tests -q 128", OTHER),
    ("taskset -c 0 /usr/bin/time /root/spdk/build/bin/spdk_nvme_perf -c 3 -r 'trtype:PCIe traddr:0000:01:00.0'",
     aisio_import.SPDK_NVME_PERF),
    ('screen -dm bash -c "dcgmi dmon -d 100 -i 0 -e 1009,1010 > /tmp/dcgm_monitor.txt"', DCGM_START),
    ("/tmp/cpu_freq_logger.sh /tmp/cpu_freq_logger.out 0.5", CPUFREQ_START),
    ("/root/git/cuda-samples/build/Samples/5_Domain_Specific/p2pBandwidthLatencyTest/"
     "p2pBandwidthLatencyTest", P2P),
    ("lscpu -e", LSCPU),
    ("pkill -f cpu_freq_logger", OTHER),
    ("pkill -f dcgmi; sleep 0.2", OTHER),
    ("cat /tmp/unrelated", OTHER),
])
def test_classify(cmd, kind):
    assert classify(cmd) == kind


def test_classify_reads_of_capture_files():
    files = {"/tmp/cpu_freq_logger.out": CPUFREQ_START, "/tmp/dcgm_monitor.txt": DCGM_START}
    assert classify("cat /tmp/cpu_freq_logger.out", files) == CPUFREQ_READ
    assert classify("cat /tmp/dcgm_monitor.txt", files) == DCGM_READ


# --- a synthesised CIJOE output folder --------------------------------------------------------

T0 = 1767225600.0  # 2026-01-01T00:00:00Z
DEVICES = ["0000:01:00.0", "0000:02:00.0"]
LSCPU_E = """CPU NODE SOCKET CORE L1d:L1i:L2:L3 ONLINE    MAXMHZ   MINMHZ       MHZ
  0    0      0    0 0:0:0:0          yes 4000.0000 800.0000 3000.0000
  1    0      0    1 1:1:1:0          yes 4000.0000 800.0000 3000.0000
  2    0      0    0 0:0:0:0          yes 4000.0000 800.0000  800.0000
  3    0      0    1 1:1:1:0          yes 4000.0000 800.0000  800.0000
"""
CONFIG = """devices = [{ pci_addr = "0000:01:00.0" }, { pci_addr = "0000:02:00.0" }]

[os]
distro = "ubuntu"
version = "noble"

[xnvme.repository]
remote = "https://github.com/xnvme/xnvme"
branch = "next"
path = "/root/git/xnvme"

[cijoe.transport.ssh]
username = "root"
password = "do-not-copy-me"
"""


def xnvmeperf_text(iops_per_device: list[float], cpus: str = "0,1") -> str:
    """An xnvmeperf run report (as in xnvmeperf_run.txt) for 512 B I/O, with GNU time after."""
    rows = [(dev, iops, round(iops * 512 / 2**20, 2)) for dev, iops in zip(DEVICES, iops_per_device)]
    total_iops = sum(iops_per_device)
    return "\n".join(
        ["Running xnvmeperf with arguments:",
         f"- Devices: [{', '.join(DEVICES)}] (total: {len(DEVICES)})",
         "- io pattern: randread", "- queues per device: 1", "- queue depth: 64", "- io size: 512",
         "- runtime: 10", "- CPUs: [0, 1] (total: 2)", "", "=" * 68,
         " xnvmeperf (elapsed: 10.00s)", "=" * 68,
         " Device                  CPUs          IOPS      MiB/s   Failed"]
        + [f" {dev:<20}{cpus:>8}{iops:>14.2f}{mibs:>11.2f}{0:>9d}" for dev, iops, mibs in rows]
        + ["-" * 68, f" {'Total:':<28}{total_iops:>14.2f}{total_iops * 512 / 2**20:>11.2f}{0:>9d}",
           "=" * 68,
           "20.02user 0.50system 0:10.80elapsed 190%CPU (0avgtext+0avgdata 16128maxresident)k",
           "0inputs+0outputs (0major+2593minor)pagefaults 0swaps", ""])


def cpufreq_text(start: float, n: int = 22) -> str:
    """A 4-CPU log starting at ``start`` (UTC), two samples per second."""
    from datetime import datetime, timezone

    lines = []
    for i in range(n):
        stamp = datetime.fromtimestamp(start + i // 2, timezone.utc).strftime("%Y-%m-%d_%H:%M:%S")
        lines.append(f"{stamp} {3000000 + 1000 * i} {3100000 - 500 * i} 800000 {900000 + i} ")
    return "\n".join(lines) + "\n"


def dcgm_text(rx: list[int]) -> str:
    rows = [f"{'#Entity':<10}{'PCITX':<28}{'PCIRX':<28}", "ID"]
    rows += [f"{'GPU 0':<10}{v // 100:<28}{v:<28}" for v in rx]
    return "\n".join(rows) + "\n"


def aisio_result(text_out: str, freq: str, rx: list[int], iops_override: float | None = None) -> dict:
    """What AiSIO's run step would have written, computed here independently of iolab."""
    total = [line for line in text_out.splitlines() if line.startswith(" Total:")][0].split()
    pieces = freq.split("\n")
    n = len(pieces)
    kept = [p.split() for p in pieces[int(0.1 * n):int(0.9 * n)] if p.strip()]
    freqs = []
    for cpu, core in ((0, 0), (1, 1)):
        column = [int(p[1 + cpu]) for p in kept]
        freqs.append([[statistics.mean(column), statistics.pvariance(column)], [cpu, core]])
    return {"qdepth": 64, "iosize": 512, "ndevs": 2, "ncpus": 2, "cpu_usage": 190,
            "cpu_freqs": freqs, "fixed_freq": 0, "cpu_governor": "performance", "thr_sib": 0,
            "smt": 1, "turbo": 1, "stress": 0, "tool": "xnvmeperf", "backend": "upcie-cuda",
            "iops": iops_override if iops_override is not None else float(total[1]),
            "mibs": float(total[2]),
            "dcgm": statistics.quantiles(rx, n=100, method="inclusive")[94]}


def write_cmd(step: Path, number: int, cmd: str, output: str, begin: float, end: float,
              err: int = 0) -> None:
    step.mkdir(parents=True, exist_ok=True)
    state = {"begin": begin, "cmd": cmd, "cwd": "None", "elapsed": end - begin, "end": end,
             "err": err, "is_done": True}
    (step / f"cmd_{number:02d}.state").write_text(yaml.dump(state))  # as CIJOE writes it
    (step / f"cmd_{number:02d}.output").write_text(output)


RESULT_NAME = "d2-c2-o512-q64-be_upcie-cuda-tool_xnvmeperf-thrsib0-freq_performance-stress0-SMT1-turbo1-{}.out"


def make_cijoe(root: Path, *, orphan: bool = True, bad_rep: int | None = 1) -> Path:
    """A CIJOE output folder with two repetitions of one xnvmeperf point and a p2p step.

    Repetition ``bad_rep``'s AiSIO JSON carries a wrong iops, and with ``orphan`` a third JSON
    exists without any benchmark output.
    """
    out = root / "cijoe-output"
    (out / "config.orig").parent.mkdir(parents=True, exist_ok=True)
    (out / "config.orig").write_text(CONFIG)
    step = out / "003_run"
    results = out / "artifacts" / "bench-results"
    results.mkdir(parents=True)
    write_cmd(step, 1, "lscpu -e", LSCPU_E, T0 - 5, T0 - 4.9)
    number = 2
    cmd = ("/usr/bin/time xnvmeperf run --cpumask 3 --qdepth 64 --iosize 512 --runtime 10 "
           "--iopattern randread --be upcie-cuda " + " ".join(DEVICES))
    for rep in range(2):
        t = T0 + 20 * rep
        output = xnvmeperf_text([1000000.00 + rep, 1100000.50])
        freq = cpufreq_text(t)
        rx = [0, 5000 + rep, 9000, 9100, 9050, 100]
        steps = [
            ("/tmp/cpu_freq_logger.sh /tmp/cpu_freq_logger.out 0.5",
             "Started logging CPU frequencies in /tmp/cpu_freq_logger.out\n", t, t + 0.01, 0),
            ('screen -dm bash -c "dcgmi dmon -d 100 -i 0 -e 1009,1010 > /tmp/dcgm_monitor.txt"',
             "", t + 0.02, t + 0.03, 0),
            (cmd, output, t + 0.05, t + 10.85, 0),
            ("pkill -f cpu_freq_logger", "", t + 10.86, t + 10.9, -15),
            ("cat /tmp/cpu_freq_logger.out", freq, t + 10.91, t + 10.92, 0),
            ("pkill -f dcgmi; sleep 0.2", "", t + 10.93, t + 10.97, -15),
            ("cat /tmp/dcgm_monitor.txt", dcgm_text(rx), t + 10.98, t + 10.99, 0),
        ]
        for cmd_i, out_i, begin, end, err in steps:
            write_cmd(step, number, cmd_i, out_i, begin, end, err)
            number += 1
        result = results / RESULT_NAME.format(rep)
        result.write_text(json.dumps(aisio_result(
            output, freq, rx, iops_override=2000000.0 if rep == bad_rep else None), indent=2))
        os.utime(result, (t + 11, t + 11))
    if orphan:
        stale = results / RESULT_NAME.format(2)
        stale.write_text((results / RESULT_NAME.format(0)).read_text())
        os.utime(stale, (T0 - 1000, T0 - 1000))
    p2p = out / "004_cuda_bandwidth"
    write_cmd(p2p, 1, "/opt/cuda-samples/p2pBandwidthLatencyTest",
              (FIX / "p2p_bandwidth.txt").read_text(), T0 + 100, T0 + 101)
    (out / "artifacts" / "cuda-sample-p2p-bandwidth").write_text("50.5")
    return out


def tar_gz(folder: Path, archive: Path) -> Path:
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return archive


@pytest.fixture
def mini(tmp_path):
    """(archive path, data dir) for the synthesised CIJOE output."""
    folder = make_cijoe(tmp_path / "src")
    return tar_gz(folder, tmp_path / "mini.tar.gz"), tmp_path / "data"


def test_import_pairs_checks_and_reports_the_planted_disagreement(mini):
    archive, data = mini
    report = import_archive(archive, "aisio-mini", "lab", data, progress=False)
    assert (report.imported, report.skipped, report.failed) == (2, 0, 0)
    assert [(d.result.rsplit("/", 1)[-1], d.field, d.ours, d.aisio) for d in report.disagreements] == [
        (RESULT_NAME.format(1), "iops", 2100001.5, 2000000.0)]
    assert any(RESULT_NAME.format(2) in n and "no benchmark output" in n for n in report.notes)
    assert "imported 2, skipped 0 (already stored), failed 0; 1 disagreements" in report.summary()

    again = import_archive(archive, "aisio-mini", "lab", data, progress=False)
    assert (again.imported, again.skipped, again.failed) == (0, 2, 0)
    assert again.run_ids == report.run_ids


def test_import_writes_the_store_layout(mini):
    archive, data = mini
    report = import_archive(archive, "aisio-mini", "lab", data, progress=False)
    root = data / "raw" / "aisio-mini" / "lab"
    host = json.loads((root / "host.json").read_text())
    assert host["source"] == "aisio-cijoe-import" and host["hostname"] is None
    assert host["archive"] == "mini.tar.gz"
    assert host["archive_sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert host["cpu"] == {"model_name": None, "logical_cpus": 4, "threads_per_core": 2}
    assert host["topology"][0]["siblings"] == [0, 2]
    assert host["devices"] == DEVICES and host["software"]["xnvme"]["branch"] == "next"
    assert "do-not-copy-me" not in (root / "host.json").read_text()

    run_dir = root / "runs" / report.run_ids[0]
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "aisio.json", "cijoe.state", "cpufreq.log", "dcgm.txt", "run.json", "stdout"]
    src = archive.parent / "src" / "cijoe-output" / "003_run"
    assert (run_dir / "stdout").read_bytes() == (src / "cmd_04.output").read_bytes()
    assert (run_dir / "cpufreq.log").read_bytes() == (src / "cmd_06.output").read_bytes()
    assert (run_dir / "dcgm.txt").read_bytes() == (src / "cmd_08.output").read_bytes()
    stored = {r.run_id: r for r in Store(data, "aisio-mini", "lab").complete_runs()}
    m = stored[report.run_ids[0]].manifest
    assert m.status == "ok" and m.failure is None and m.exit_code == 0 and m.rep == 0
    assert m.point == {"qdepth": 64, "iosize": 512, "ndevs": 2, "ncpus": 2, "nqueues": 1,
                       "tool": "xnvmeperf", "backend": "upcie-cuda", "thr_sib": 0, "smt": 1,
                       "turbo": 1, "stress": 0, "cpu_governor": "performance", "fixed_freq": 0}
    assert m.settings == {"runtime_s": 10, "tool": "xnvmeperf", "backend": "upcie-cuda",
                          "source": "aisio"}
    assert m.argv[:4] == ["/usr/bin/time", "xnvmeperf", "run", "--cpumask"]
    assert m.cpus == [0, 1]
    assert m.started_at == "2026-01-01T00:00:00.050+00:00"
    assert m.extra["tool_kind"] == aisio_import.XNVMEPERF_RUN
    assert m.extra["dcgm"] == {"field_ids": [1009, 1010], "gpu_ids": [0], "interval_ms": 100,
                               "cmd": 'screen -dm bash -c "dcgmi dmon -d 100 -i 0 -e 1009,1010 '
                                      '> /tmp/dcgm_monitor.txt"'}
    assert m.extra["imported_from"]["output"] == "003_run/cmd_04.output"
    assert m.extra["imported_from"]["aisio_result"].endswith(RESULT_NAME.format(0))

    extras = root / "extras" / "mini"
    assert (extras / "p2pBandwidthLatencyTest-004_cuda_bandwidth-cmd_01.output").read_text() == \
        (FIX / "p2p_bandwidth.txt").read_text()


def test_tidy_row_rederives_metrics(mini):
    archive, data = mini
    report = import_archive(archive, "aisio-mini", "lab", data, progress=False)
    stored = {r.run_id: r for r in Store(data, "aisio-mini", "lab").complete_runs()}
    metrics = ImportedCampaign("aisio-mini").tidy_row(stored[report.run_ids[0]])
    assert metrics["run.id"] == report.run_ids[0] and metrics["run.rep"] == 0
    rx = [0, 5000, 9000, 9100, 9050, 100]
    assert metrics["iops"] == 2100000.50 and metrics["mibs"] == round(2100000.5 * 512 / 2**20, 2)
    assert metrics["failed"] == 0 and metrics["elapsed_s"] == 10.0 and metrics["cpu_usage"] == 190
    assert metrics["run_problem"] == ""
    assert metrics["dcgm_p95_bytes_per_s"] == statistics.quantiles(rx, n=100, method="inclusive")[94]
    assert metrics["dcgm_mean_bytes_per_s"] == statistics.mean(rx)
    # AiSIO's trim keeps lines 2..19 of 23 pieces; CPU 0 is 3000000 + 1000 i, CPU 1 3100000 - 500 i
    assert metrics["cpufreq_mean_khz"] == ((3000000 + 1000 * 10.5) + (3100000 - 500 * 10.5)) / 2
    # whole seconds inside [00:00:00.05, 00:00:10.85]: 00:00:01..00:00:09, i = 2..19
    assert metrics["cpufreq_window_mean_khz"] == ((3000000 + 1000 * 10.5) + (3100000 - 500 * 10.5)) / 2


def test_derive_spdk_nvme_perf_and_unknown_kinds(tmp_path):
    (tmp_path / "stdout").write_text((FIX / "spdk_nvme_perf.txt").read_text())
    metrics = aisio_import.derive(tmp_path, aisio_import.SPDK_NVME_PERF, None, None).metrics
    assert metrics == {"iops": 4093737.12, "mibs": 1998.89, "failed": None, "elapsed_s": None,
                       "cpu_usage": 190, "run_problem": "", "dcgm_p95_bytes_per_s": None,
                       "dcgm_mean_bytes_per_s": None, "cpufreq_mean_khz": None,
                       "cpufreq_window_mean_khz": None}
    with pytest.raises(ParseError, match="no parser for 'fio'"):
        aisio_import.derive(tmp_path, "fio", None, None)
    (tmp_path / "stdout").write_text((FIX / "xnvmeperf_run.txt").read_text())
    with pytest.raises(ParseError, match="output is a 'run' report"):
        aisio_import.derive(tmp_path, aisio_import.XNVMEPERF_CUDA_RUN, None, None)


def test_tidy_and_cli_on_an_imported_campaign(mini, capsys):
    archive, data = mini
    assert cli.main(["import-cijoe", str(archive), "--experiment", "aisio-mini", "--env", "lab",
                     "--data", str(data), "--no-progress"]) == 1  # the planted disagreement
    assert "disagreement:" in capsys.readouterr().out
    assert isinstance(source("aisio-mini"), ImportedCampaign)
    assert cli.main(["tidy", "aisio-mini", "--env", "lab", "--data", str(data)]) == 0
    df = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert len(df) == 2 and set(AISIO_COLUMNS) <= set(df.columns)
    assert sorted(df["iops"]) == [2100000.5, 2100001.5]


def test_failed_benchmark_is_stored_as_failed(tmp_path):
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    state = folder / "003_run" / "cmd_11.state"
    broken = yaml.safe_load(state.read_text())
    broken["err"] = 1
    state.write_text(yaml.dump(broken))
    (folder / "003_run" / "cmd_11.output").write_text((FIX / "xnvmeperf_error.txt").read_text())
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1)
    assert any("stored as failed: the benchmark exited with err 1" in n and "xnvme_dev_open" in n
               for n in report.notes)
    failed = list((tmp_path / "data" / "raw" / "aisio-mini" / "lab" / "failed").iterdir())
    assert len(failed) == 1
    again = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (again.imported, again.skipped, again.failed) == (0, 2, 0)


def tenfold_mibs(text: str) -> str:
    """An xnvmeperf report with every MiB/s ten times as large (rows and Total agree)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        words = line.split()
        if len(words) in (4, 5) and (words[0] == "Total:" or words[0] in DEVICES):
            mibs = words[-2]
            lines[i] = line.replace(f" {mibs} ", f" {float(mibs) * 10:.2f} ")
    return "\n".join(lines)


@pytest.mark.parametrize("name, edit, reason", [
    # P10 Q1: MiB/s ten times IOPS × the echoed io size, the rows and Total in agreement
    ("cmd_04.output", tenfold_mibs, "line 14: MiB/s 4882.80 is not IOPS 1000000.00 × the "
                                    "echoed io size 512 B"),
    # P10 Q2: 0.01 s of a 10 s runtime
    ("cmd_04.output", lambda t: t.replace("(elapsed: 10.00s)", "(elapsed: 0.01s)"),
     "elapsed 0.01 s is far below the echoed runtime 10 s"),
    # P10 Q3: CIJOE never saw the command finish
    ("cmd_04.state", lambda t: t.replace("is_done: true", "is_done: false"),
     "CIJOE's state says is_done False: it never saw the benchmark finish"),
], ids=["mibs not iops x io size", "elapsed far below runtime", "is_done false"])
def test_a_run_that_is_no_measurement_is_stored_as_failed(tmp_path, name, edit, reason):
    """Each was imported as a good sample (imported 2, failed 0)."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    path = folder / "003_run" / name
    text = path.read_text()
    assert edit(text) != text
    path.write_text(edit(text))
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1), report.notes
    assert any("stored as failed: " in n and reason in n for n in report.notes), report.notes


def tar_with_link(folder, archive, name: str, target: str):
    """``folder`` as a tar's cijoe-output/, with a symbolic link ``name`` to ``target``
    added after it."""
    with tarfile.open(archive, "w") as tar:
        tar.add(folder, arcname="cijoe-output")
        link = tarfile.TarInfo(f"cijoe-output/{name}")
        link.type, link.linkname = tarfile.SYMTYPE, target
        tar.addfile(link)
    return archive


def import_with_time_line(tmp_path, line: str):
    """The mini archive imported with ``line`` added to its xnvmeperf run's GNU time report,
    just before the report's elapsed/%CPU line."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    output = folder / "003_run" / "cmd_04.output"
    lines = output.read_text().split("\n")
    at = next(i for i, text in enumerate(lines) if "elapsed" in text and "%CPU" in text)
    output.write_text("\n".join(lines[:at] + [line] + lines[at:]))
    return import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)


@pytest.mark.parametrize("line, reason", [
    ("Command exited with non-zero status 3", "the tool exited with status 3"),
    ("Command terminated by signal 9", "the tool was killed by signal 9"),
], ids=["exit 3", "signal 9"])
def test_a_tool_gnu_time_says_failed_is_stored_as_failed(tmp_path, line, reason):
    """GNU time's report saying the tool exited 3 or was killed by signal 9 was imported as a
    good run (CIJOE's state said err 0; only the times were read from the report)."""
    report = import_with_time_line(tmp_path, line)
    assert (report.imported, report.failed) == (1, 1)
    assert any("stored as failed: GNU time's report says " + reason in n
               for n in report.notes), report.notes
    assert any("CIJOE's state says err 0, but GNU time's report says the tool did not end "
               "well" in n for n in report.notes), report.notes


@pytest.mark.parametrize("line, reason", [
    ("Command exited with non-zero status " + "9" * 5000, "(5000 digits) is none a process"),
    ("Command exited with non-zero status 999", "exit status 999 is none a process can have"),
], ids=["5000 digits", "999"])
def test_a_gnu_time_status_no_process_has_fails_the_run_not_the_import(tmp_path, line, reason):
    """A 5,000-digit status ended the whole import as an internal error (rc 70); 999 was a
    good run."""
    report = import_with_time_line(tmp_path, line)
    assert (report.imported, report.failed) == (1, 1)
    assert any("stored as failed: " in n and reason in n for n in report.notes), report.notes


@pytest.mark.parametrize("value", ["\u00b2", "\u0665\u0661\u0662", "9" * 5000, "1_000"])
def test_a_command_lines_number_in_other_than_ascii_digits_is_not_read(value):
    """'²' passed str.isdigit and int() then raised: the import ended as an internal error."""
    from iolab.importers.cijoe.params import _int
    assert _int(value) is None and _int("512") == 512


def test_a_frequency_log_off_its_start_is_noted_with_and_without_a_cpumask(tmp_path):
    """A log's first sample is checked against its logger's start command: from the lines
    derive read (a run with a cpumask), or, for cuda-run (no cpumask), read for the check."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    step = folder / "003_run"
    (step / "cmd_06.output").write_text(cpufreq_text(T0 + 30))  # repetition 0: 30 s late
    state = yaml.safe_load((step / "cmd_11.state").read_text())
    state["cmd"] = ("/usr/bin/time xnvmeperf cuda-run --qdepth 128 --iosize 512 --runtime 10 "
                    "--nqueues 2 --iopattern randread " + " ".join(DEVICES))
    (step / "cmd_11.state").write_text(yaml.dump(state))
    (step / "cmd_11.output").write_text((FIX / "xnvmeperf_cuda_run.txt").read_text())
    (step / "cmd_13.output").write_text(cpufreq_text(T0 + 20 - 40))  # repetition 1: 40 s early
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert report.imported == 2
    off = [n for n in report.notes if "its timestamps may not be UTC" in n]
    assert len(off) == 2
    assert "starts at +30.0 s from the logger's start" in off[0]
    assert off[1].startswith("003_run/cmd_11.output: the frequency log starts at -40.0 s")


@pytest.mark.parametrize("state, message", [
    ('{"cmd": "lscpu -e", "begin": 1, "end": 2}', "line 1: expected 'key: value'"),
    ("begin: 1\nend: 2\n", "a CIJOE .state without 'cmd'"),
    ("begin: x\ncmd: lscpu -e\nend: 2\n", "a CIJOE .state without numeric 'begin' and 'end'"),
    ("begin: 1\ncmd: lscpu -e\nend: 0x2\n", "line 3: key 'end': '0x2' is a YAML 1.1 number"),
])
def test_malformed_state_is_refused_naming_the_file(tmp_path, state, message):
    folder = make_cijoe(tmp_path / "src")
    (folder / "003_run" / "cmd_01.state").write_text(state)
    with pytest.raises(ParseError, match=f"^cijoe-output:003_run/cmd_01.state: {message}"):
        import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert not (tmp_path / "data" / "raw").exists()


def test_experiment_name_must_carry_the_prefix(mini):
    archive, data = mini
    with pytest.raises(InputError, match="aisio-<name>"):
        import_archive(archive, "mini", "lab", data, progress=False)


def test_not_a_cijoe_archive(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="not a CIJOE output"):
        import_archive(tmp_path / "empty", "aisio-x", "lab", tmp_path / "data", progress=False)


# --- what is not ours: links, special files, size, a path ending in .. -----------------------

SECRET = "root's own secret\n"


def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


def holds_secret(data: Path) -> list[Path]:
    return [p for p in data.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


def test_links_and_special_files_in_a_folder_are_never_followed(tmp_path):
    """A benchmark's output that is a link to a root-only file is not read (the run is stored
    as failed, its output empty); a linked folder is not entered; a FIFO is not opened."""
    folder = make_cijoe(tmp_path / "src", orphan=False)
    target = secret(tmp_path)
    output = folder / "003_run" / "cmd_04.output"
    output.unlink()
    output.symlink_to(target)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "cmd_01.output").write_text(SECRET)
    (folder / "005_more").symlink_to(tmp_path / "elsewhere")
    os.mkfifo(folder / "artifacts" / "pipe.out")
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1)
    assert f"003_run/cmd_04.output: a symbolic link to {target} in the folder; not followed" \
        in report.notes
    assert f"005_more: a symbolic link to {tmp_path / 'elsewhere'} in the folder; not " \
           "followed" in report.notes
    assert "artifacts/pipe.out: a FIFO (named pipe) in the folder; not read" in report.notes
    assert holds_secret(tmp_path / "data") == []


def test_a_file_with_other_names_in_a_folder_is_never_read(tmp_path):
    """A hard link to a root-only file (a tar's hard link member is skipped the same way)."""
    folder = make_cijoe(tmp_path / "src", orphan=False)
    target = secret(tmp_path)
    output = folder / "003_run" / "cmd_04.output"
    output.unlink()
    os.link(target, output)
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1)
    assert ("003_run/cmd_04.output: a file with 2 names (hard links) in the folder, so maybe "
            "one from elsewhere; not read (links are never followed)") in report.notes
    assert holds_secret(tmp_path / "data") == []


def test_a_file_name_that_is_not_utf8_in_a_folder_is_no_crash(tmp_path):
    """An odd name among the folder's files (bytes \\xff\\xfe) was an internal error."""
    folder = make_cijoe(tmp_path / "src", orphan=False)
    odd = os.path.join(os.fsencode(folder / "003_run"), b"\xff\xfe-bad.out")
    with open(odd, "wb") as fh:
        fh.write(b"not a command's output\n")
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert report.imported >= 1


def test_an_imported_campaign_passes_the_schema_check(tmp_path):
    """Its host record is the archive's, checked against its own schema; against a live
    inventory's, every import had made 'iolab verify' fail."""
    from iolab.schemas import verify as sv

    folder = make_cijoe(tmp_path / "src", orphan=False)
    import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    hosts = [(p, s) for p, s in sv.raw_files(tmp_path / "data") if p.name == "host.json"]
    assert [s for _, s in hosts] == ["host-imported.schema.json"]
    checked = sv.verify(tmp_path / "data", "aisio-mini")
    assert [str(p) for p in checked.problems if "host.json" in str(p)] == []


def test_link_members_of_a_tar_are_never_followed(tmp_path):
    folder = make_cijoe(tmp_path / "src", orphan=False)
    target = secret(tmp_path)
    archive = tmp_path / "links.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            name = f"cijoe-output/{path.relative_to(folder).as_posix()}"
            if name.endswith("003_run/cmd_04.output"):
                link = tarfile.TarInfo(name)
                link.type, link.linkname = tarfile.SYMTYPE, str(target)
                tar.addfile(link)
            elif name.endswith("003_run/cmd_11.output"):
                link = tarfile.TarInfo(name)
                link.type, link.linkname = tarfile.LNKTYPE, "cijoe-output/config.orig"
                tar.addfile(link)
            else:
                tar.add(path, arcname=name, recursive=False)
    report = import_archive(archive, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (0, 2)
    assert [n for n in report.notes if "link" in n and "not read" in n] == [
        f"cijoe-output/003_run/cmd_04.output: a symbolic link to {target} in the archive; not "
        "read (links are never followed)",
        "cijoe-output/003_run/cmd_11.output: a hard link to cijoe-output/config.orig in the "
        "archive; not read (links are never followed)"]
    assert holds_secret(tmp_path / "data") == []


def tar_with(folder: Path, archive: Path, extra: dict[str, bytes]) -> Path:
    """``folder`` as a tar.gz under ``cijoe-output/``, with ``extra`` members added."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="cijoe-output")
        for name, data in extra.items():
            member = tarfile.TarInfo(f"cijoe-output/{name}")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return archive


@pytest.mark.parametrize("second", ["file", "link"])
def test_a_tar_holding_a_member_twice_is_refused_naming_it(tmp_path, second):
    """The later copy (every number doubled) had silently replaced the first and been stored."""
    folder = make_cijoe(tmp_path / "src", orphan=False)
    output = folder / "003_run" / "cmd_04.output"
    doubled = re.sub(rb"\d+", lambda m: str(2 * int(m.group())).encode(), output.read_bytes())
    if second == "file":
        archive = tar_with(folder, tmp_path / "twice.tar.gz", {"003_run/cmd_04.output": doubled})
    else:
        archive = tar_with_link(folder, tmp_path / "twice.tar", "003_run/cmd_04.output",
                                "/etc/passwd")
    with pytest.raises(InputError) as err:
        import_archive(archive, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert str(err.value) == (f"{archive}: member 'cijoe-output/003_run/cmd_04.output' is "
                              "given twice; which copy is the command's cannot be told "
                              "(allowed: archives holding each file once)")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("form", ["tar", "folder"])
def test_the_bytes_an_import_reads_are_bounded(tmp_path, monkeypatch, form):
    """Past the limit (patched down here from 1 GiB), the import stops naming the member and
    the limit, and stores nothing."""
    from iolab.importers.cijoe import archive as arc

    folder = make_cijoe(tmp_path / "src", orphan=False)
    big = b"x" * 300_000
    if form == "tar":
        path = tar_with(folder, tmp_path / "big.tar.gz", {"003_run/cmd_99.output": big})
        member = "member cijoe-output/003_run/cmd_99.output"
    else:
        (folder / "003_run" / "cmd_99.output").write_bytes(big)
        path, member = folder, "member 003_run/cmd_99.output"
    monkeypatch.setattr(arc, "MAX_BYTES", 200_000)
    with pytest.raises(InputError, match=f"{path.name}: reading {member} would take more than "
                                         "200,000 bytes out of the archive"):
        import_archive(path, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert not (tmp_path / "data").exists()


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar makes the sparse member")
def test_a_sparse_member_is_bounded_by_the_size_it_unpacks_to(tmp_path, monkeypatch):
    """A sparse member's holes take no room in the tar stream (a 3 GiB one fits in 225 KB)
    but fill memory as zeros when read: it is refused by its size, before a byte is read."""
    from iolab.importers.cijoe import archive as arc

    folder = make_cijoe(tmp_path / "src", orphan=False)
    member = folder / "003_run" / "cmd_99.output"
    with open(member, "wb") as fh:
        fh.truncate(3 * 2**20)  # all hole
    archive = tmp_path / "sparse.tar.gz"
    subprocess.run(["tar", "-S", "-czf", str(archive), "-C", str(folder.parent), folder.name],
                   check=True)
    assert archive.stat().st_size < 100_000
    with tarfile.open(archive) as tar:
        assert tar.getmember("cijoe-output/003_run/cmd_99.output").issparse()
    monkeypatch.setattr(arc, "MAX_BYTES", 2**20)
    with pytest.raises(InputError, match=f"{archive.name}: reading member cijoe-output/003_run/"
                                         "cmd_99.output would take more than 1,048,576 bytes"):
        import_archive(archive, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("form", ["tar", "folder"])
def test_what_the_import_does_not_use_is_streamed_past_not_held(tmp_path, form):
    """CIJOE's report.html (21 MB in a real archive) and the like are read in blocks, never
    whole: reading an archive with a 32 MiB such member takes a few MiB at most."""

    folder = make_cijoe(tmp_path / "src", orphan=False)
    big = bytes(32 * 2**20)
    if form == "tar":
        path = tar_with(folder, tmp_path / "report.tar.gz", {"report.html": big})
    else:
        (folder / "report.html").write_bytes(big)
        path = folder
    del big
    arc, peak = _opened_with_peak(path)
    assert "report.html" not in arc.files and "003_run/cmd_04.output" in arc.files
    assert peak < 8 * 2**20, f"{peak:,} bytes held at once"


def test_a_path_ending_in_dot_dot_is_the_folder_it_names(tmp_path, capsys):
    """``import-cijoe some/dir/..``: the archive is the folder ``some``, named so; its host
    record goes to ``extras/some/``, never over the experiment's own host.json."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    (folder / "sub").mkdir()
    data = tmp_path / "data"
    code = cli.main(["import-cijoe", str(folder / "sub" / ".."), "--experiment",
                     "pcie_saturation", "--env", "lab", "--data", str(data), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("cijoe-output -> pcie_saturation/lab: imported 2")
    root = data / "raw" / "pcie_saturation" / "lab"
    assert not (root / "host.json").exists(), "the archive's host taken for the campaign's"
    assert sorted(p.name for p in (root / "extras").iterdir()) == ["cijoe-output"]
    host = json.loads((root / "extras" / "cijoe-output" / "host.json").read_text())
    assert host["archive"] == "cijoe-output"


def test_an_archive_named_so_that_its_extras_would_leave_their_folder_is_refused(tmp_path):
    from iolab.importers.cijoe.archive import Archive
    from iolab.importers.cijoe.host_extras import _extras_folder

    store = Store(tmp_path / "data", "pcie_saturation", "lab")
    for name in ("..", ".", "", ".tar.gz"):
        with pytest.raises(InputError, match="gives no folder for its extras"):
            _extras_folder(store, Archive(name, "0" * 64, {}, {}))
    assert _extras_folder(store, Archive("a.tar.gz", "0" * 64, {}, {})) == \
        store.root / "extras" / "a"


def test_a_campaign_folder_that_is_a_link_is_never_imported_into(tmp_path, capsys):
    """raw/<exp>/<env> as a link had received the host record, the runs and the extras."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data = tmp_path / "data"
    (data / "raw" / "aisio-k").mkdir(parents=True)
    (data / "raw" / "aisio-k" / "lab").symlink_to(elsewhere)
    code = cli.main(["import-cijoe", str(folder), "--experiment", "aisio-k", "--env", "lab",
                     "--data", str(data), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "lab: is a symbolic link to" in err and "never followed" in err
    assert list(elsewhere.iterdir()) == []


def test_an_extras_folder_that_is_a_link_is_never_written_through(tmp_path):
    """A re-import had written the archive's extras into the target of a linked extras/."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    data = tmp_path / "data"
    import_archive(folder, "aisio-k", "lab", data, progress=False)
    extras = data / "raw" / "aisio-k" / "lab" / "extras"
    shutil.rmtree(extras)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    extras.symlink_to(elsewhere)
    with pytest.raises(InputError, match="extras: is a symbolic link to .*never followed"):
        import_archive(folder, "aisio-k", "lab", data, progress=False)
    assert list(elsewhere.iterdir()) == []


def test_a_killed_imports_leftovers_are_moved_aside_by_the_next(tmp_path):
    """A killed import's runs/.tmp-* folders had stayed, 'interrupted' in status for ever:
    the next import moves them to partial/, as 'iolab run' moves its own."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    data = tmp_path / "data"
    store = Store(data, "aisio-k", "lab")
    # of a process that has ended: its pid names no import that is still running
    leftover = store.runs_dir / f".tmp-0123456789ab-r0-{_ended_pid()}"
    leftover.mkdir(parents=True)
    (leftover / "stdout").write_text("half of a run")
    assert store.stale_tmp_dirs() == [leftover]
    report = import_archive(folder, "aisio-k", "lab", data, progress=False)
    assert store.stale_tmp_dirs() == [] and report.imported == 2
    (moved,) = store.partial_dir.iterdir()
    assert (moved / "stdout").read_text() == "half of a run"
    assert any(f"moved interrupted run {leftover}" in n for n in report.notes)


def _ended_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# --- the real AiSIO archives --------------------------------------------------------------------

real = pytest.mark.skipif(not (UPCIE.exists() and PCIE.exists()),
                          reason=f"AiSIO archives not found in {AISIO_DIR} (public data, never "
                                 f"committed; see ../shared/aisio/README.md)")


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    data = tmp_path_factory.mktemp("aisio") / "data"
    reports = {
        "pcie": import_archive(PCIE, "aisio-pcie", "hpc-server", data, progress=False),
        "upcie": import_archive(UPCIE, "aisio-upcie", "hpc-server", data, progress=False),
    }
    return data, reports


@real
@pytest.mark.slow
def test_real_archives_import_without_disagreement(imported):
    data, reports = imported
    assert (reports["pcie"].imported, reports["pcie"].skipped, reports["pcie"].failed) == (15, 0, 0)
    assert (reports["upcie"].imported, reports["upcie"].skipped, reports["upcie"].failed) == (160, 0, 0)
    assert reports["pcie"].disagreements == [] and reports["upcie"].disagreements == []
    # both archives were measured on the same host
    hosts = [json.loads((data / "raw" / e / "hpc-server" / "host.json").read_text())
             for e in ("aisio-pcie", "aisio-upcie")]
    assert hosts[0]["fingerprint"] == hosts[1]["fingerprint"]
    assert hosts[0]["cpu"] == {"model_name": None, "logical_cpus": 96, "threads_per_core": 2}
    assert hosts[0]["archive_sha256"] == hashlib.sha256(PCIE.read_bytes()).hexdigest()
    extras = data / "raw" / "aisio-pcie" / "hpc-server" / "extras" / "pcie-bandwidth-saturation"
    assert [p.suffix for p in sorted(extras.iterdir())] == [".output", ".state"]


@real
@pytest.mark.slow
def test_real_upcie_cores_sweep_means(imported):
    """docs/aisio-reference.md §4.8 (means of 5 repetitions, millions of IOPS)."""
    data, _ = imported
    df = load(data, source("aisio-upcie"), "hpc-server", use_cache=False)
    assert len(df) == 160
    means = df.groupby(["backend", "ncpus"])["iops"].mean() / 1e6
    upcie = [35.33, 61.32, 61.71, 61.63, 61.73, 61.01, 61.72, 61.73, 61.73, 61.72,
             59.03, 56.84, 56.32, 55.23, 53.50, 52.90]
    assert [round(means["upcie", n], 2) for n in range(1, 17)] == upcie
    assert round(means["upcie-cuda", 1], 2) == 37.09
    # §4.8 says "≈61.70–61.73" for 2..16 cores; 14 cores is 61.694 M (AiSIO's own plot data agrees)
    assert all(61.69 <= round(means["upcie-cuda", n], 2) <= 61.73 for n in range(2, 17))
    # AiSIO's spread is the population SD: sigma 2.52 M at 1 core
    assert round(df[(df.backend == "upcie") & (df.ncpus == 1)]["iops"].std(ddof=0) / 1e6, 2) == 2.52


@real
@pytest.mark.slow
def test_real_upcie_matches_aisio_plot_data(imported):
    """Every mean and population SD in the archive's own lineplot-upcie-ncpus.yaml (ints)."""
    data, _ = imported
    with tarfile.open(UPCIE) as tar:
        member = next(m for m in tar if m.name.endswith("artifacts/lineplot-upcie-ncpus.yaml"))
        plot = yaml.safe_load(tar.extractfile(member))
    df = load(data, source("aisio-upcie"), "hpc-server", use_cache=False)
    grouped = df.groupby(["backend", "ncpus"])["iops"]
    means, sds = grouped.mean(), grouped.std(ddof=0)
    ours = {(be, int(bar["label"])): (round(means[be, int(bar["label"])]),
                                      round(sds[be, int(bar["label"])]))
            for bar in plot["bars"] for be in ("upcie", "upcie-cuda")}
    theirs = {(be, int(bar["label"])): (bar[be], bar[f"{be}_std"])
              for bar in plot["bars"] for be in ("upcie", "upcie-cuda")}
    assert len(ours) == 32 and ours == theirs


@real
@pytest.mark.slow
def test_real_pcie_512_rep0(imported):
    """docs/aisio-reference.md §4.5: the archived per-repetition example."""
    data, _ = imported
    df = load(data, source("aisio-pcie"), "hpc-server", use_cache=False)
    assert len(df) == 15
    row = df[(df.iosize == 512) & (df["run.rep"] == 0)].iloc[0]
    assert row.iops == 15433231.11 and row.mibs == 7535.76 and row.cpu_usage == 98
    assert row.dcgm_p95_bytes_per_s == pytest.approx(10117837519.9, rel=1e-12)
    assert (row.ndevs, row.ncpus, row.qdepth, row.backend) == (4, 1, 128, "upcie-cuda")
    payload = df.groupby("iosize")["mibs"].mean() * 2**20
    assert round(payload[512]) == pytest.approx(7901726900, abs=1)  # §4.5 archived bytes/s


@real
@pytest.mark.slow
def test_real_reimport_is_a_no_op(imported):
    data, reports = imported
    again = import_archive(PCIE, "aisio-pcie", "hpc-server", data, progress=False)
    assert (again.imported, again.skipped, again.failed) == (0, 15, 0)
    assert again.run_ids == reports["pcie"].run_ids
    again = import_archive(UPCIE, "aisio-upcie", "hpc-server", data, progress=False)
    assert (again.imported, again.skipped, again.failed) == (0, 160, 0)


@real
@pytest.mark.slow
def test_real_tidy_csv_has_aisio_columns(imported, capsys):
    data, _ = imported
    assert cli.main(["tidy", "aisio-pcie", "--env", "hpc-server", "--data", str(data)]) == 0
    df = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert len(df) == 15 and set(AISIO_COLUMNS) <= set(df.columns)
    assert {"dcgm_p95_bytes_per_s", "cpufreq_mean_khz", "failed", "elapsed_s"} <= set(df.columns)


@real
@pytest.mark.slow
def test_real_upcie_through_the_cpu_search_analysis(imported):
    """The imported archive goes through the same analysis as the chapter's own campaigns."""
    from iolab.experiments.cpu_search import analysis as ca

    data, _ = imported
    df = ca.normalize(load(data, source("aisio-upcie"), "hpc-server"))
    upcie = df[df.backend == "upcie"]
    # AiSIO's 0/1 flags and logical CPU count map onto this package's variables
    assert set(upcie["smt"]) == {"on"} and set(upcie["turbo"]) == {"on"}
    assert (upcie["ncores"] == upcie["ncpus"]).all()  # no thread siblings in this sweep
    reference = ca.optimum(upcie)
    assert reference["ncores"] in range(2, 11) and reference["ndevs"] == 16
    sweep = ca.sweep(upcie, reference, "ncores").set_index("ncores")
    assert list(sweep.index) == list(range(1, 17)) and (sweep["n"] == 5).all()
    assert round(sweep.loc[16, "mean"] / 1e6, 2) == 52.90
    # beyond 10 cores the rate falls: 16 cores are slower than the best point, CI excluded
    drop = ca.effect(upcie, reference, {"ncores": 16})
    assert drop["pct"] < 0 and drop["ci_high"] < 0


@pytest.fixture(scope="module")
def archive_files():
    """{archive name: {member name: bytes}} of both real archives' regular files."""
    files = {}
    for archive in (UPCIE, PCIE):
        with tarfile.open(archive) as tar:
            files[archive.name] = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    return files


@real
def test_real_states_commands_and_logs_read_as_the_general_parsers_read_them(archive_files):
    """The importer's compiled-pattern readers give what YAML, shlex and a strptime-based
    reading give, on every .state, command line and frequency log of both archives."""
    states = logs = 0
    for files in archive_files.values():
        for name, data in files.items():
            if not re.search(r"/\d{3}_[^/]+/cmd_\d+\.state$", name):  # a command's record
                continue
            state = parse_cijoe_state(data, name)
            expected = yaml.load(data, Loader=yaml.CSafeLoader)
            assert state == expected and all(type(state[k]) is type(expected[k]) for k in expected)
            assert shell_words.split(state["cmd"]) == shlex.split(state["cmd"])
            states += 1
            if state["cmd"] == "cat /tmp/cpu_freq_logger.out":
                log = files[name[:-len(".state")] + ".output"].decode()
                parsed = parse_cpufreq_log(log, name)
                assert [tuple(line) for line in parsed["lines"]] == strptime_lines(log)
                pieces = log.split("\n")
                kept = [p.split() for p in pieces[int(0.1 * len(pieces)):int(0.9 * len(pieces))]
                        if p.strip()]
                assert aisio_cpu_freqs(log, list(range(16)), name) == {
                    cpu: (statistics.mean(int(p[1 + cpu]) for p in kept),
                          statistics.pvariance([int(p[1 + cpu]) for p in kept]))
                    for cpu in range(16)}
                logs += 1
    assert (states, logs) == (1459, 175)


# --- the SPDK tools of a tool comparison that used thread siblings -----------------------------

SPDK_BIN = {aisio_import.BDEVPERF: "/root/git/spdk/build/examples/bdevperf",
            aisio_import.SPDK_NVME_PERF: "/root/git/spdk/build/bin/spdk_nvme_perf"}
# The 2 CPUs AiSIO picks on LSCPU_E's topology by thr_sib: in id order without thread
# siblings, ordered by core (CPU 0 and its sibling 2) with them
SIBLING_CPUS = {0: [0, 1], 1: [0, 2]}
GNU_TIME = ("19.80user 0.20system 0:21.80elapsed 91%CPU (0avgtext+0avgdata 16128maxresident)k\n"
            "0inputs+0outputs (0major+2593minor)pagefaults 0swaps\n")


def bdevperf_text(cpus: list[int], iops: float) -> str:
    """bdevperf's v25.09 table (as in tests/fixtures/bdevperf/) with one job per device, 512 B
    at QD 64 on ``cpus`` in turn, and GNU time's report after it."""
    jobs = [(f"nvme{i:02d}n1", 1 << cpus[i % len(cpus)], iops + 1000 * i)
            for i in range(len(DEVICES))]
    total = sum(job_iops for _, _, job_iops in jobs)
    lines = ["Running I/O for 10 seconds...", f"{'Latency(us)':>107}",
             "\r Device Information          : runtime(s)       IOPS      MiB/s     Fail/s     TO/s"
             "    Average        min        max"]
    for name, mask, job_iops in jobs:
        lines += [f"Job: {name} (Core Mask {mask:#x}, workload: randread, depth: 64, IO size: 512)",
                  f"\t {name:<20}: {10:10.2f} {job_iops:10.2f} {job_iops * 512 / 2**20:10.2f} "
                  f"{0:10.2f} {0:8.2f} {60:10.2f} {40:10.2f} {300:10.2f}"]
    lines += ["\r " + "=" * 115,
              f"\r {'Total':<28}: {'':10} {total:10.2f} {total * 512 / 2**20:10.2f} {0:10.2f} "
              f"{0:8.2f} {60:10.2f} {40:10.2f} {300:10.2f}"]
    return "\n".join(lines) + "\n" + GNU_TIME


def spdk_nvme_perf_text(cpus: list[int], iops: float) -> str:
    """spdk_nvme_perf's table (as in spdk_nvme_perf.txt) with one namespace per device on
    ``cpus`` in turn, and GNU time's report after it."""
    rows = [(dev, cpus[i % len(cpus)], iops + 1000 * i) for i, dev in enumerate(DEVICES)]
    total = sum(row_iops for _, _, row_iops in rows)
    lines = ["Initializing NVMe Controllers"]
    lines += [f"Attached to NVMe Controller at PCIE ({dev}) [144d:ac00]" for dev in DEVICES]
    lines += [f"Associating PCIE ({dev}) [144d:ac00] NSID 1 with lcore {cpu}"
              for dev, cpu, _ in rows]
    lines += ["Initialization complete. Launching workers.", "=" * 56, f"{'Latency(us)':>88}",
              f"{'Device Information':<55}:       IOPS      MiB/s    Average        min        max"]
    lines += [f"PCIE ({dev}) [144d:ac00] NSID 1 from core {cpu:2d}: {row_iops:10.2f} "
              f"{row_iops * 512 / 2**20:10.2f} {60:10.2f} {40:10.2f} {300:10.2f}"
              for dev, cpu, row_iops in rows]
    lines += ["=" * 56, f"{'Total':<55}: {total:10.2f} {total * 512 / 2**20:10.2f} {60:10.2f} "
              f"{40:10.2f} {300:10.2f}", ""]
    return "\n".join(lines) + "\n" + GNU_TIME


def spdk_result(tool: str, thr_sib: int, rep: int, text_out: str, freq: str) -> tuple[str, dict]:
    """The name and content of AiSIO's result for one repetition of an SPDK tool, computed here
    independently of iolab: its April 2026 keys, ``thr_sib`` and ``stress`` as the booleans
    bench_helper.py writes, and the default ``be_upcie`` in the name."""
    total = next(line for line in text_out.splitlines() if line.strip().startswith("Total"))
    iops, mibs = (float(v) for v in total.partition(":")[2].split()[:2])
    pieces = freq.split("\n")
    kept = [p.split() for p in pieces[int(0.1 * len(pieces)):int(0.9 * len(pieces))] if p.strip()]
    freqs = []
    for cpu in SIBLING_CPUS[thr_sib]:
        column = [int(p[1 + cpu]) for p in kept]
        freqs.append([[statistics.mean(column), statistics.pvariance(column)], [cpu, cpu % 2]])
    name = (f"d2-c2-o512-q64-be_upcie-tool_{tool}-thrsib{thr_sib}-freq_performance-stress0-"
            f"SMT1-turbo1-{rep}.out")
    return name, {"qdepth": 64, "iosize": 512, "ndevs": 2, "ncpus": 2, "cpu_usage": 91,
                  "cpu_freqs": freqs, "fixed_freq": 0, "cpu_governor": "performance",
                  "thr_sib": bool(thr_sib), "smt": 1, "turbo": 1, "stress": False, "tool": tool,
                  "backend": "upcie", "iops": iops, "mibs": mibs, "dcgm": None}


def spdk_command(kind: str, cpus: list[int]) -> str:
    """The command line AiSIO's bdevperf.py or spdk_nvme_perf.py builds (QD 64, 512 B)."""
    mask = f"{sum(1 << cpu for cpu in cpus):04x}"
    if kind == aisio_import.BDEVPERF:  # the devices are in the config AiSIO copied to /tmp
        return (f"/usr/bin/time {SPDK_BIN[kind]} -c /tmp/bdevperf-config.json -m {mask} -q 64 "
                f"-o 512 -t 10 -w randread")
    return (f"/usr/bin/time {SPDK_BIN[kind]} -c {mask} -q 64 -o 512 -t 10 -w randread "
            + " ".join(f'-r "trtype:PCIe traddr:{dev}"' for dev in DEVICES))


def make_tool_comparison(root: Path) -> Path:
    """A CIJOE output folder of a tool comparison: a step per SPDK tool running one 2-CPU
    point without thread siblings (one repetition), then with them (two), as AiSIO's
    bench_runall.py does: a fresh ``lscpu -e`` when it turns siblings on, bdevperf's device
    config written to the step folder, each result written after its run."""
    out = root / "cijoe-output"
    out.mkdir(parents=True)
    (out / "config.orig").write_text(CONFIG)
    results = out / "artifacts" / "bench-results"
    results.mkdir(parents=True)
    t = T0
    started = "Started logging CPU frequencies in /tmp/cpu_freq_logger.out\n"
    for s, (kind, tool) in enumerate(((aisio_import.BDEVPERF, "bdevperf"),
                                      (aisio_import.SPDK_NVME_PERF, "spdk_nvme_perf"))):
        step = out / f"00{3 + s}_run_{tool}"
        write_cmd(step, 1, "lscpu -e", LSCPU_E, t, t + 0.1)
        number = 2
        for thr_sib, rep in ((0, 0), (1, 0), (1, 1)):
            cpus = SIBLING_CPUS[thr_sib]
            if thr_sib and rep == 0:
                write_cmd(step, number, "lscpu -e", LSCPU_E, t + 1, t + 1.1)
                number += 1
            t += 30
            text = (bdevperf_text if kind == aisio_import.BDEVPERF
                    else spdk_nvme_perf_text)(cpus, 1000000.0 + 10 * rep + thr_sib)
            freq = cpufreq_text(t)
            for cmd, output, begin, end, err in [
                    ("/tmp/cpu_freq_logger.sh /tmp/cpu_freq_logger.out 0.5", started, t, t + 0.01, 0),
                    (spdk_command(kind, cpus), text, t + 0.05, t + 21.85, 0),
                    ("pkill -f cpu_freq_logger", "", t + 21.86, t + 21.9, -15),
                    ("cat /tmp/cpu_freq_logger.out", freq, t + 21.91, t + 21.92, 0)]:
                write_cmd(step, number, cmd, output, begin, end, err)
                number += 1
            name, result = spdk_result(tool, thr_sib, rep, text, freq)
            (results / name).write_text(json.dumps(result, indent=2))
            os.utime(results / name, (t + 22, t + 22))
        if kind == aisio_import.BDEVPERF:
            controllers = [{"method": "bdev_nvme_attach_controller",
                            "params": {"name": f"nvme{i:02d}", "trtype": "PCIe", "traddr": dev}}
                           for i, dev in enumerate(DEVICES)]
            (step / "bdevperf-configs").mkdir()
            (step / "bdevperf-configs" / "d2.json").write_text(json.dumps(
                {"subsystems": [{"subsystem": "bdev", "config": controllers}]}, indent=2))
    return out


def tar_gz_reversed(folder: Path, archive: Path) -> Path:
    """Like :func:`tar_gz`, with the members in reverse name order (a tar keeps any order)."""
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.rglob("*"), reverse=True):
            tar.add(path, arcname=f"{folder.name}/{path.relative_to(folder)}", recursive=False)
    return archive


@pytest.mark.parametrize("times", ["kept", "lost"])
def test_spdk_runs_with_thread_siblings_are_paired_and_cross_checked(tmp_path, times):
    """Every bdevperf and spdk_nvme_perf run gets its own AiSIO result, also where the result
    files lost their times and the archive lists them in no useful order: bdevperf's command
    line does not show its devices, and a result's name differs from another only in
    ``thrsib`` (so AiSIO's order of runs has to tell them apart)."""
    folder = make_tool_comparison(tmp_path / "src")
    if times == "kept":
        archive = tar_gz(folder, tmp_path / "tools.tar.gz")
    else:
        for result in (folder / "artifacts" / "bench-results").iterdir():
            os.utime(result, (T0 - 1000, T0 - 1000))
        archive = tar_gz_reversed(folder, tmp_path / "tools.tar.gz")
    report = import_archive(archive, "aisio-tools", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed, report.disagreements) == (6, 0, [])
    assert not [n for n in report.notes if "without a cross-check" in n or "not imported" in n]

    df = load(tmp_path / "data", source("aisio-tools"), "lab", use_cache=False)
    assert sorted(zip(df["tool"], df["thr_sib"], df["run.rep"])) == [
        ("bdevperf", 0, 0), ("bdevperf", 1, 0), ("bdevperf", 1, 1),
        ("spdk_nvme_perf", 0, 0), ("spdk_nvme_perf", 1, 0), ("spdk_nvme_perf", 1, 1)]
    assert (df["ndevs"] == 2).all() and (df["ncpus"] == 2).all()
    for run in Store(tmp_path / "data", "aisio-tools", "lab").complete_runs():
        m = run.manifest
        assert m.cpus == SIBLING_CPUS[m.point["thr_sib"]]
        name = PurePosixPath(m.extra["imported_from"]["aisio_result"]).name
        assert name == (f"d2-c2-o512-q64-be_upcie-tool_{m.tool}-thrsib{m.point['thr_sib']}-"
                        f"freq_performance-stress0-SMT1-turbo1-{m.rep}.out")


@pytest.mark.parametrize("value, reason", [
    ("inf", "IOPS: 'inf' is no measurement"),
    ("nan", "IOPS: 'nan' is no measurement"),
    ("2e10", "metric iops reads 2.00011e+10 op/s, above what any device this package can measure "
             "does (1e+10 operations per second)"),
], ids=["inf", "nan", "beyond any device"])
def test_an_imported_run_gets_the_sample_check_of_a_measured_one(tmp_path, value, reason):
    """An IOPS of inf was imported as a complete, intact run (the sum check let inf - inf, a
    NaN, through, and the importer applied no sample check); NaN was only a disagreement."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    output = folder / "003_run" / "cmd_04.output"
    text = output.read_text()
    device, total = " 1100000.50 ", " 2100000.50 "
    assert device in text and total in text
    if value == "2e10":  # the rows still add up, and each MiB/s is its IOPS × 512 B
        text = xnvmeperf_text([20000000000.00, 1100000.50]).replace(",120000", ",1 20000")
    else:
        text = text.replace(device, f" {value} ").replace(total, f" {value} ")
    output.write_text(text)
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1)
    assert any("stored as failed: " in n and reason in n for n in report.notes), report.notes


@pytest.mark.parametrize("file, old, new, reason", [
    ("output", "- queue depth: 64", "- queue depth: 128",
     "its argument echo has queue_depth 128, the run gave xnvmeperf qdepth 64"),
    ("output", "- io pattern: randread", "- io pattern: randwrite",
     "its argument echo has io_pattern 'randwrite', the run gave xnvmeperf iopattern 'randread'"),
    ("state", "--runtime 10", "--runtime 100",
     "its argument echo has runtime 10, the run gave xnvmeperf runtime 100"),
], ids=["qdepth", "io-pattern", "runtime"])
def test_an_imported_xnvmeperf_output_its_command_contradicts_is_a_failed_run(
        tmp_path, file, old, new, reason):
    """An xnvmeperf output whose argument echo contradicts CIJOE's command (queue depth, io
    pattern, runtime) was imported as a good sample, with at most a note: the importer never
    asked the adapter's foreign_report, which fails such a measured run. Now it does."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    path = folder / "003_run" / f"cmd_04.{file}"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1)
    assert any("stored as failed: stdout is not this run's report: " in n and reason in n
               for n in report.notes), report.notes


@pytest.mark.parametrize("line, option, key", [
    ("- queue depth: 64\n", ("--qdepth 64", "--qdepth 128"), "queue_depth"),
    ("- io pattern: randread\n", ("--iopattern randread", "--iopattern randwrite"),
     "io_pattern"),
    ("- runtime: 10\n", ("--runtime 10", "--runtime 100"), "runtime"),
    ("- io size: 512\n", ("--iosize 512", "--iosize 4096"), "io_size"),
], ids=["qdepth", "io-pattern", "runtime", "io-size"])
def test_an_imported_xnvmeperf_echo_without_a_line_is_a_failed_run(tmp_path, line, option, key):
    """Probe 12's I1/I2: with the echo's queue depth (io pattern, runtime, io size) line
    removed and CIJOE's command changed, the run was imported as a good sample at the
    command's value, which the output never confirmed (a MiB/s of IOPS × 512 stored as
    4096 B I/O)."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    output, state = (folder / "003_run" / f"cmd_04.{ext}" for ext in ("output", "state"))
    assert line in output.read_text() and option[0] in state.read_text()
    output.write_text(output.read_text().replace(line, ""))
    state.write_text(state.read_text().replace(*option))
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1)
    assert any("stored as failed: " in n and f"the argument echo lacks {key} " in n
               for n in report.notes), report.notes


def test_an_echo_of_queues_the_command_leaves_to_the_default_is_a_note(tmp_path):
    """A command line without --nqueues leaves xnvmeperf its default: an echo of another
    count cannot contradict the command, so the run is kept, with a note saying so."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    path = folder / "003_run" / "cmd_04.output"
    path.write_text(path.read_text().replace("- queues per device: 1", "- queues per device: 2"))
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (2, 0)
    assert [n for n in report.notes if "nqueues" in n] == [
        f"artifacts/bench-results/{RESULT_NAME.format(0)}: the command line leaves nqueues to "
        "xnvmeperf's default 1, but xnvmeperf's echo says 2"], report.notes


@pytest.mark.parametrize("old, new, reason", [
    ("depth: 64", "depth: 128", "ran with queue_depth 128, the run gave bdevperf -q '64'"),
    ("workload: randread", "workload: write", "ran with workload 'write', the run gave "
                                              "bdevperf -w 'randread'"),
], ids=["depth", "workload"])
def test_an_imported_bdevperf_table_its_command_contradicts_is_a_failed_run(tmp_path, old, new,
                                                                           reason):
    """bdevperf's table says each job's workload, depth and I/O size; one that contradicts
    CIJOE's command line (-q, -w) was imported as a good sample (only AiSIO's JSON was held
    to the command line). The adapter's foreign_report, a measured run's check, now decides."""
    folder = make_tool_comparison(tmp_path / "src")
    path = folder / "003_run_bdevperf" / "cmd_03.output"
    text = path.read_text()
    assert old in text and "bdevperf -c" in (path.with_suffix(".state")).read_text()
    path.write_text(text.replace(old, new))
    report = import_archive(folder, "aisio-tools", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (5, 1)
    assert any("stored as failed: stdout is not this run's report: its job 0 " in n
               and reason in n for n in report.notes), report.notes


# --- AiSIO's result files, member names and member counts, read as data from elsewhere ------

HUGE = "1" + "0" * 5000  # more digits than Python reads (4,300)
BEYOND_FLOAT = "1" + "0" * 400  # read by Python, but beyond any float


@pytest.mark.parametrize("content, reason", [
    (b'{"iops": 1\xff}', "not UTF-8 (byte 10)"),
    (("[" * 100_000 + "]" * 100_000).encode(), "nested more than 100 levels deep"),
    (b"[1, 2]", "holds list, not the object AiSIO writes"),
    (b'"x"', "holds str, not the object AiSIO writes"),
    (f'{{"iops": {HUGE}}}'.encode(), "a number that cannot be read"),
    (f'{{"iops": {BEYOND_FLOAT}}}'.encode(), "iops: an integer of about 401 digits"),
    (b'{"smt": [1]}', "smt is [1] (allowed: 0 or 1)"),
    (b'{"fixed_freq": NaN}', "fixed_freq is nan (allowed: a frequency in GHz"),
    (b'{"cpu_governor": {"a": 1}}', "cpu_governor is {'a': 1} (allowed: a governor's name)"),
    (b'{"cpu_freqs": "x"}', "cpu_freqs is 'x' (allowed: a list of [[mean kHz, variance]"),
    (b'{"cpu_freqs": [[1, 2]]}', "cpu_freqs is [[1, 2]]"),
    (b'{"iops": 1', "not valid JSON"),
], ids=["not-utf8", "nested", "list", "string", "huge-int", "beyond-float", "smt-list",
        "freq-nan", "governor-dict", "freqs-string", "freqs-shape", "cut-off"])
def test_an_aisio_result_that_is_no_record_is_a_note_not_an_internal_error(tmp_path, content,
                                                                           reason):
    """AiSIO's result JSON was read with a bare json.loads and used as a mapping: a result
    that is not UTF-8, nested 100,000 deep, a list, or holds a 5,000-digit integer ended the
    import as an internal error (rc 70). Each is now a note naming the file, and the run is
    imported without a cross-check, as a result that is not JSON was."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    name = f"artifacts/bench-results/{RESULT_NAME.format(0)}"
    (folder / name).write_bytes(content)
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed, report.disagreements) == (2, 0, [])
    notes = [n for n in report.notes if n.startswith(f"{name}: ")]
    assert len(notes) == 1 and reason in notes[0] and notes[0].endswith("; no cross-check"), \
        report.notes


def test_an_aisio_p2p_result_that_is_no_number_is_a_note(tmp_path):
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    (folder / "artifacts" / "cuda-sample-p2p-bandwidth").write_bytes(b"5\xff0")
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert "artifacts/cuda-sample-p2p-bandwidth: b'5\\xff0' is not the one number AiSIO " \
           "writes there; no cross-check" in report.notes


def test_what_an_archive_names_prints_on_its_own_line_escaped(tmp_path, capsys):
    """A link member's name and target, and a recorded command line, are quoted by the
    import's notes: a line break in them printed lines of their own ("FAKE LINE: imported
    999, all good")."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    log = '"/tmp/log\nFAKE LINE: from a cmd"'
    write_cmd(folder / "005_more", 1, f"/tmp/cpu_freq_logger.sh {log} 0.5", "", T0 + 200,
              T0 + 201)
    write_cmd(folder / "005_more", 2, f"cat {log}", "", T0 + 202, T0 + 203)
    archive = tar_with_link(folder, tmp_path / "a.tar", "x\nFAKE LINE: imported 999, all good",
                            "/etc/shadow\n  note: FAKE NOTE\x1b[2J")
    code = cli.main(["import-cijoe", str(archive), "--experiment", "aisio-mini", "--env", "lab",
                     "--data", str(tmp_path / "data"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert not [line for line in lines if line.startswith(("FAKE", "  note: FAKE"))], out
    assert "\x1b" not in out
    assert ("  note: cijoe-output/x\\nFAKE LINE: imported 999, all good: a symbolic link to "
            "/etc/shadow\\n  note: FAKE NOTE\\x1b[2J in the archive; not read") in out
    assert ("  note: 005_more/cmd_02: 'cat \"/tmp/log\\nFAKE LINE: from a cmd\"' reads a "
            "capture that no preceding benchmark started afresh; not used") in lines, out


@pytest.mark.parametrize("form", ["tar", "folder"])
def test_the_members_an_import_reads_are_bounded(tmp_path, monkeypatch, form):
    """Past the limit (patched down here from 100,000), the import stops naming the limit,
    and stores nothing."""
    from iolab.importers.cijoe import archive as arc

    folder = make_cijoe(tmp_path / "src", orphan=False)
    extra = {f"empty/{i}": b"" for i in range(60)}
    if form == "tar":
        path = tar_with(folder, tmp_path / "many.tar.gz", extra)
    else:
        (folder / "empty").mkdir()
        for name in extra:
            (folder / name).write_bytes(b"")
        path = folder
    monkeypatch.setattr(arc, "MAX_MEMBERS", 50)
    with pytest.raises(InputError, match=f"{path.name}: holds more than 50 members .files, "
                                         "folders and links., the most an import reads"):
        import_archive(path, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert not (tmp_path / "data").exists()


def test_a_folder_of_any_depth_is_refused_in_one_line_never_a_recursion_error(tmp_path):
    """Probe 11, B1's pattern in the importer: os.walk recurses once a level, so a folder
    1,100 levels deep (past Python's recursion limit) ended import-cijoe in a RecursionError
    (rc 70); folders deeper than MAX_DEPTH are refused, naming the first, and nothing is
    stored."""
    from iolab.importers.cijoe import archive as arc

    folder = make_cijoe(tmp_path / "src", orphan=False)
    levels = [folder / "deep"]
    for _ in range(1100):  # os.mkdir: pathlib's parents recurse too
        levels.append(levels[-1] / "a")
    for level in levels:
        os.mkdir(level)
    try:
        first = "/".join(["deep", *["a"] * arc.MAX_DEPTH])
        with pytest.raises(InputError, match=f"{folder.name}: holds the folder {first}, more "
                                             f"than {arc.MAX_DEPTH} levels deep"):
            import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
        assert not (tmp_path / "data").exists()
    finally:
        for level in reversed(levels):  # rmtree recurses as deep
            os.rmdir(level)


def test_a_tars_members_are_streamed_not_kept(tmp_path):
    """tarfile keeps the header of every member it read, so an archive of 300,000 empty
    members took 169 MB; the import keeps none of them."""

    folder = make_cijoe(tmp_path / "src", orphan=False)
    path = tar_with(folder, tmp_path / "many.tar.gz", {f"e/{i}": b"" for i in range(20_000)})
    arc, peak = _opened_with_peak(path)
    assert "003_run/cmd_04.output" in arc.files
    assert peak < 2 * 2**20, f"{peak:,} bytes held at once"


def test_a_negative_rate_in_an_archive_is_no_sample(tmp_path):
    """A device row of -1,000,000 IOPS beside one of 1,100,000.50 adds up to a Total of
    100,000.50, which was stored as a good sample (float() took the sign)."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    output = folder / "003_run" / "cmd_04.output"
    text = output.read_text()
    assert " 1000000.00 " in text and " 2100000.50 " in text
    output.write_text(text.replace(" 1000000.00 ", " -1000000.00 ").replace(
        " 2100000.50 ", " 100000.50 "))
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1)
    assert any("stored as failed: " in n and "IOPS: '-1000000.00' is no measurement" in n
               for n in report.notes), report.notes


@pytest.mark.parametrize("digits", ["\u0661", "9" * 5000])
def test_a_result_or_command_numbered_in_other_digits_or_beyond_any_count_is_not_one(digits):
    """An AiSIO result name or a CIJOE command file numbered in another script's digits was
    read as if in ASCII (\\d and str.isdigit take them); one of 5,000 digits made int() raise
    a ValueError that named no file."""
    from iolab.importers.cijoe import archive, pairing

    name = ("d1-c2-o4096-q128-be_io_uring-tool_fio-thrsib0-freq_performance-stress0-SMT1-"
            "turbo1-{}.out")
    assert pairing.parse_result_name(name.format(3))["rep"] == 3
    assert pairing.parse_result_name(name.format(digits)) is None
    assert archive._STATE.match("run/001_bench/cmd_7.state")
    assert archive._STATE.match(f"run/001_bench/cmd_{digits}.state") is None
    assert not archive.KEPT.search(f"run/001_bench/cmd_{digits}.output")


def _opened_with_peak(path):
    """The archive opened as the import opens it, and the most bytes Python held meanwhile."""
    import tracemalloc

    from iolab.importers.cijoe.archive import open_archive

    tracemalloc.start()
    try:
        arc = open_archive(path)
        return arc, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("begin,end", [(".inf", None), (".nan", None), ("-.inf", None),
                                       ("1.0e+300", "1.0e+301"), ("12.5", None)],
                         ids=["inf", "nan", "-inf", "beyond any clock", "before any CIJOE"])
def test_a_state_time_no_clock_gives_fails_that_run_and_the_import_goes_on(tmp_path, begin,
                                                                           end):
    """Probe 10, Q4: a benchmark's .state 'begin: .inf' (or .nan, or 1e300) ended the import
    with an internal error (OverflowError: timestamp out of range), rc 70, and left the run's
    .tmp-* folder in the store."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    state = folder / "003_run" / "cmd_04.state"
    text = state.read_text()
    text = re.sub(r"(?m)^begin: .*$", f"begin: {begin}", text)
    if end is not None:
        text = re.sub(r"(?m)^end: .*$", f"end: {end}", text)
    state.write_text(text)
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1), report.notes
    assert any("003_run/cmd_04.state" in n and "are not a time window" in n
               and "stored as failed" in n for n in report.notes), report.notes
    runs = tmp_path / "data" / "raw" / "aisio-mini" / "lab" / "runs"
    assert not [p.name for p in runs.iterdir() if p.name.startswith(".tmp-")]
    (failed,) = (tmp_path / "data" / "raw" / "aisio-mini" / "lab" / "failed").iterdir()
    assert json.loads((failed / "run.json").read_text())["started_at"] is None


def test_a_dcgm_row_of_a_gpu_the_command_did_not_watch_fails_the_run(tmp_path):
    """Probe 12 D2: a row of GPU 1 in the capture of ``dcgmi dmon ... -i 0`` was dropped
    silently, and the run imported with its mean moved (4,650 B/s where 5,375 was read)."""
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)
    capture = folder / "003_run" / "cmd_08.output"
    text = capture.read_text()
    assert "GPU 0     90                          9000" in text
    capture.write_text(text.replace("GPU 0     90                          9000",
                                    "GPU 1     90                          9000", 1))
    report = import_archive(folder, "aisio-mini", "lab", tmp_path / "data", progress=False)
    assert (report.imported, report.failed) == (1, 1), report.notes
    assert any("has rows of 'GPU 1', which the command did not watch" in n
               for n in report.notes), report.notes
