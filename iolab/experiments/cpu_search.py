"""CPU-initiated I/O: the optimal parameter search of AiSIO's first chapter, with SPDK bdevperf
on hosts that have it and fio (io_uring) everywhere else.

Variables: ``governor`` (asis | powersave | performance | userspace-3.0GHz), ``turbo`` and
``smt`` (asis | on | off), ``thr_sib`` (use both hardware threads of each core), ``stress``
(stress-ng on every CPU the run does not use), ``qdepth``, ``iosize`` (bytes), ``ncores``
(physical cores) and ``ndevs`` (devices; files for fio).

With bdevperf, each run gets its own SPDK bdev config (one ``bdev_nvme_attach_controller`` per
device, from the environment's ``devices`` list) and a CPU mask built from the host topology.
With fio, one job per selected logical CPU (``cpus_allowed_policy=split``) reads all device
files with direct I/O at the given queue depth, the closest fio analogue of bdevperf's
per-core jobs.

Responsible for: the point -> argv/config mapping, which points this host can run, and the
metrics of a stored run. Not responsible for: applying knobs or running stress-ng (the runner
and the collectors do), statistics, or plotting.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..collectors import (CpufreqSampler, Hugepages, OutputMarker, ProcStat, ProcTreeCpu,
                          gnu_time_prefix, parse_cpufreq_samples, parse_gnu_time_kv,
                          parse_proctree_cpu)
from ..errors import ParseError
from ..inventory import pick_cpus
from ..parsers.bdevperf import parse_bdevperf_json, parse_bdevperf_text, spdk_supports_json
from ..parsers.fio import parse_fio_file
from ..spdk import bdev_config, bdevperf_argv, cpu_mask
from ..stress import StressNg, unused_cpus
from ..tools import Tool

NAME = "cpu_search"
KNOB_VARIABLES = {"cpu_governor": "governor", "turbo": "turbo", "smt": "smt"}
FIO = Tool("fio", "fio.sh", ("fio", "--version"))
TIME_FILE = "time.txt"
CPUS_FILE = "cpus.json"
BDEV_CONFIG = "bdev.json"
BDEVPERF_JSON = "bdevperf-results.json"
FIXED_FREQ_KHZ = {"userspace-3.0GHz": 3_000_000}
BDEVPERF_START = r"Running I/O for (\d+) seconds"  # bdevperf's announcement of its measurement


def tool(settings: dict[str, Any]) -> Tool:
    if settings["tool"] == "bdevperf":
        spdk = settings["spdk_dir"]
        return Tool("bdevperf", "bdevperf.sh", (f"{spdk}/build/examples/bdevperf", "--version"),
                    executable=f"{spdk}/build/examples/bdevperf")
    return FIO


def campaign_knobs(settings: dict[str, Any]) -> dict[str, Any]:
    """bdevperf needs the devices on a user-space driver; the knob refuses any device in use."""
    if settings["tool"] != "bdevperf":
        return {}
    return {"device_binding": {"devices": settings["devices"], "driver": settings["user_space_driver"]}}


def knob_value(variable: str, value: Any) -> Any:
    if variable == "cpu_governor" and value in FIXED_FREQ_KHZ:
        return {"governor": "userspace", "khz": FIXED_FREQ_KHZ[value]}
    return value


def run_cpus(params: dict[str, Any], topology: list[dict]) -> list[int]:
    """Logical CPUs of a run: ``ncores`` physical cores in CPU-id order, both threads with siblings."""
    return pick_cpus(topology, params["ncores"], use_siblings=params["thr_sib"])


def host_block(settings: dict[str, Any], params: dict[str, Any], topology: list[dict]) -> str | None:
    cores = {(c["package"], c["core"]) for c in topology}
    if params["ncores"] > len(cores):
        return f"needs {params['ncores']} physical cores, this host has {len(cores)}"
    if params["thr_sib"] and all(len(c["siblings"]) < 2 for c in topology):
        return "thread siblings requested, but this host has one hardware thread per core"
    if params["stress"] and not unused_cpus([c["cpu"] for c in topology], run_cpus(params, topology)):
        return "stress requested, but the run uses every CPU of this host"
    if settings["tool"] == "bdevperf" and params["ndevs"] > len(settings["devices"]):
        return f"needs {params['ndevs']} devices, the environment lists {len(settings['devices'])}"
    return None


def collectors(settings: dict[str, Any], params: dict[str, Any], topology: list[dict]) -> list:
    cpus = run_cpus(params, topology)
    out = [ProcStat(), CpufreqSampler(cpus), Hugepages(), ProcTreeCpu()]
    if settings["tool"] == "bdevperf":
        out.append(OutputMarker(BDEVPERF_START))
    if params["stress"]:
        seconds = float(settings["runtime_s"]) + float(settings.get("ramp_s", 0))
        out.append(StressNg(unused_cpus([c["cpu"] for c in topology], cpus), seconds))
    return out


def device_files(settings: dict[str, Any], ndevs: int) -> list[str]:
    return [str(Path(settings["file_dir"]) / f"dev{i:02d}.dat") for i in range(ndevs)]


def prepare(run_dir: Path, settings: dict[str, Any], params: dict[str, Any], topology: list[dict]) -> None:
    """Store the run's inputs with it: the CPU list and, for bdevperf, the SPDK bdev config."""
    cpus = run_cpus(params, topology)
    (run_dir / CPUS_FILE).write_text(json.dumps({"cpus": cpus, "mask": cpu_mask(cpus)}) + "\n")
    if settings["tool"] == "bdevperf":
        config = bdev_config(settings["devices"][: params["ndevs"]])
        (run_dir / BDEV_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    else:
        Path(settings["file_dir"]).mkdir(parents=True, exist_ok=True)


def build_argv(settings: dict[str, Any], params: dict[str, Any], topology: list[dict]) -> list[str]:
    cpus = run_cpus(params, topology)
    timing = gnu_time_prefix(TIME_FILE)
    if settings["tool"] == "bdevperf":
        driver = tool(settings).driver_path
        extra = ["--json-results", BDEVPERF_JSON] if settings["bdevperf_json"] else []
        return timing + [str(driver), "--spdk-dir", settings["spdk_dir"], "--config", BDEV_CONFIG,
                         *extra, "--",
                         *bdevperf_argv(cpu_mask(cpus), params["qdepth"], params["iosize"],
                                        settings["runtime_s"], settings["workload"])]
    argv = timing + [
        str(FIO.driver_path), "--output", "fio.json", "--output-format=json",
        "--name=cpu_search", "--filename=" + ":".join(device_files(settings, params["ndevs"])),
        f"--filesize={settings['file_size']}", f"--rw={settings['workload']}",
        f"--bs={params['iosize']}", "--direct=1", f"--ioengine={settings['fio_ioengine']}",
        f"--iodepth={params['qdepth']}", f"--numjobs={len(cpus)}", "--thread=1",
        f"--cpus_allowed={','.join(map(str, cpus))}", "--cpus_allowed_policy=split",
        "--group_reporting=1", "--time_based=1", f"--runtime={settings['runtime_s']}s",
        f"--ramp_time={settings['ramp_s']}s", "--norandommap=1", "--randrepeat=0",
    ]
    if settings["fio_hipri"]:
        argv.append("--hipri=1")
    return argv


def measurement_window(run_dir: Path, runtime_ms: float | None) -> tuple[int, int] | None:
    """When the tool measured, in CLOCK_REALTIME ns, from the tool's own output.

    fio stamps its report (``timestamp_ms``) when the measurement ends, and reports how long
    it measured; bdevperf announces the start ("Running I/O for T seconds"), timestamped by
    the marker collector. Falls back to the driver's whole run when neither is there.
    """
    fio_json = run_dir / "fio.json"
    marker = run_dir / "marker.json"
    if fio_json.exists() and runtime_ms:
        end_ms = json.loads(fio_json.read_text())["timestamp_ms"]
        return int((end_ms - runtime_ms) * 1e6), int(end_ms * 1e6)
    if marker.exists():
        mark = json.loads(marker.read_text())
        seconds = int(re.search(BDEVPERF_START, mark["line"]).group(1))
        return mark["time_ns"], mark["time_ns"] + seconds * 10**9
    path = run_dir / "driver-window.json"
    if path.exists():
        w = json.loads(path.read_text())
        return int(w["start_ns"]), int(w["end_ns"])
    return None


def parse_run(run_dir: Path) -> dict[str, Any]:
    """Metrics of one stored run, re-derived from its raw files."""
    runtime_ms = None
    if (run_dir / "fio.json").exists():
        fio = parse_fio_file(run_dir / "fio.json")
        runtime_ms = fio["runtime_ms"]
        metrics = {"iops": fio["iops"], "mibs": fio["mibs"], "clat_mean_us": fio["clat_mean_us"],
                   "clat_p99_us": fio["clat_p99_us"], "usr_cpu": fio["usr_cpu"], "sys_cpu": fio["sys_cpu"],
                   "tool_version": fio["fio_version"],
                   "run_problem": f"fio reported error {fio['error']}" if fio["error"] else None}
    else:
        stdout = run_dir / "stdout"
        text = parse_bdevperf_text(stdout.read_text(errors="replace"), str(stdout))
        res, source, note = text, "text table", None
        json_path = run_dir / BDEVPERF_JSON
        if json_path.exists():  # JSON results were asked for
            if not spdk_supports_json(text.get("spdk_version")):
                note = (f"SPDK {text.get('spdk_version')} predates JSON results (needs v24.09 or "
                        "later): results are read from bdevperf's text table")
            elif json_path.stat().st_size:
                try:
                    res = {**parse_bdevperf_json(json_path.read_text(), str(json_path)),
                           "spdk_version": text.get("spdk_version")}
                    source = "perform_tests JSON"
                except ParseError:
                    # SPDK answers perform_tests with a JSON-RPC error when a job fails; the
                    # text table on stdout still shows the failed job, so it decides
                    note = "perform_tests returned an error instead of results: text table used"
        metrics = {"iops": res["iops"], "mibs": res["mibs"], "clat_mean_us": res["avg_latency_us"],
                   "fail_per_s": res["fail_per_s"], "timeout_per_s": res["timeout_per_s"],
                   "tool_version": res.get("spdk_version"), "results_from": source, "note": note,
                   "run_problem": "; ".join(res["problems"]) if not res["ok"] else None}
    if (run_dir / TIME_FILE).exists():
        timing = parse_gnu_time_kv((run_dir / TIME_FILE).read_text(), str(run_dir / TIME_FILE))
        metrics["cpu_usage_lifetime_pct"] = timing["cpu_pct"]
    window = measurement_window(run_dir, runtime_ms)
    freq_csv = run_dir / "cpufreq.csv"
    if window and freq_csv.exists():
        freq = parse_cpufreq_samples(freq_csv.read_text(), *window, str(freq_csv))
        metrics["cpufreq_mean_khz"] = freq.get("mean_khz")
    tree = run_dir / "proctree-cpu.csv"
    if window and tree.exists():
        cpu = parse_proctree_cpu(tree.read_text(), (run_dir / "proctree-cpu.json").read_text(),
                                 *window, str(tree))
        metrics["cpu_usage_window_pct"] = cpu["cpu_pct"]
    if not (run_dir / CPUS_FILE).exists():
        raise ParseError(run_dir / CPUS_FILE, "missing: every cpu_search run stores its CPU list")
    metrics["cpus"] = ",".join(map(str, json.loads((run_dir / CPUS_FILE).read_text())["cpus"]))
    return metrics
