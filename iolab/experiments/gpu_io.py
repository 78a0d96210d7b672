"""What the experiments that move NVMe data into GPU memory share: settings, the GPU counters
around each run, the tidy schema of their metrics, and runs imported from AiSIO's archives.

Three experiments use this: ``pcie_saturation`` (CPU threads submit, the SSDs write into GPU
memory: ``xnvmeperf run --be upcie-cuda``), ``cuda_iosize`` and ``cuda_qdepth`` (GPU threads
submit: ``xnvmeperf cuda-run``). Each is its own package with its own variables; this module
is not an experiment (the registry only looks at packages).

One tidy schema whichever counter ran (DCGM's ``dcgmi dmon`` where the host engine runs, NVML
where it does not), in bytes per second over the samples inside the measurement window:
``gpu_pcie_rx_mean_bytes_per_s``, ``gpu_pcie_rx_p95_bytes_per_s`` (and ``tx``). ``payload_bytes_per_s``
is xnvmeperf's MiB/s x 2^20. ``gpu_check`` compares the PCI address of the GPU the benchmark
used (recorded by the driver) with that of the GPU the counter watched: ``same GPU``, or why
the two cannot be compared or differ; analyses drop rows whose check is not ``same GPU`` when
a counter ran.

Runs imported with ``iolab import-cijoe --experiment <one of these>`` keep AiSIO's raw files
and are re-derived by :mod:`iolab.importers.aisio`; :func:`imported_row` maps them onto the
experiment's schema, with ``run.source`` naming the archive. AiSIO's DCGM captures carry no
timestamps, so for them only AiSIO's statistic exists: the p95 over the whole capture
(``gpu_pcie_rx_capture_p95_bytes_per_s``), idle samples before and after the run included.

Responsible for: the shared settings, variables, metrics, collectors and host checks, and
the imported rows. Not responsible for: the xnvmeperf command line (``iolab.tools.xnvmeperf``),
the counters (``iolab.tools.dcgmi``, ``iolab.tools.nvml``) or analysis
(``iolab.analysis.saturation``, ``iolab.analysis.queueing``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from iolab.core.schema import Choice, Int, ListOf, Text
from iolab.core.store import StoredRun
from iolab.errors import ToolError
from iolab.experiments.base import Experiment, Metric, missing_value
from iolab.host.binding import USER_SPACE_DRIVERS
from iolab.importers.aisio import IMPORTED_SOURCE, ImportedCampaign
from iolab.tools.dcgmi import DcgmDmon
from iolab.tools.nvml import INSTALL as NVML_INSTALL
from iolab.tools.nvml import NvmlPcie

if TYPE_CHECKING:  # imported where a table is made: planning and running need no pandas
    import pandas as pd

BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[01][0-9a-fA-F]\.[0-7]"
MIB = 2 ** 20
COUNTERS = ("dcgmi", "nvml", "none")
SAME_GPU = "same GPU"
NO_COUNTER = "no GPU counter"
GPU_DIR = "/proc/driver/nvidia/gpus"  # one folder per GPU the NVIDIA driver found

SETTINGS = {
    "runtime_s": Int(1, 86400, help="measured seconds per run"),
    "iopattern": Choice("randread", "read", default="randread", help="xnvmeperf's I/O pattern"),
    "devices": ListOf(Text(pattern=BDF, pattern_help="a PCIe address such as 0000:4a:00.0"),
                      help="NVMe controllers, bound to a user-space driver for the campaign"),
    "user_space_driver": Choice(*USER_SPACE_DRIVERS, default="uio_pci_generic"),
    "gpu": Int(0, 63, default=0, help="the GPU that receives the data: its CUDA ordinal in "
               "PCI bus order, which is also its NVML index"),
    "gpu_counter": Choice(*COUNTERS, default="dcgmi",
                          help="what samples the GPU's PCIe traffic: dcgmi (needs "
                               "nv-hostengine), nvml (nvidia-ml-py) or none"),
    "sample_interval_ms": Int(20, 10_000, default=100, help="GPU counter sampling interval"),
}
CPU_VARIABLES = {
    "cpu_governor": Choice("asis", "powersave", "performance"),
    "turbo": Choice("asis", "on", "off"),
    "smt": Choice("asis", "on", "off"),
}
KNOBS = {"cpu_governor": "governor", "turbo": "turbo", "smt": "smt"}

# The tidy columns every GPU experiment has, whichever counter ran.
_COUNTER_FIELDS = [(f"gpu_pcie_{d}_{s}_bytes_per_s", f"{d}_{s}_bytes_per_s")
                   for d in ("rx", "tx") for s in ("mean", "p95")]
METRICS = {
    "iops": Metric("IOPS", ("xnvmeperf.iops",)),
    "mibs": Metric("payload bandwidth", ("xnvmeperf.mibs",), "MiB/s"),
    "payload_bytes_per_s": Metric("payload bandwidth", (), "B/s"),
    "failed": Metric("failed commands", ("xnvmeperf.failed",)),
    **{column: Metric(f"GPU PCIe {'receive' if '_rx_' in column else 'transmit'} traffic, "
                      f"{'mean' if '_mean_' in column else '95th percentile'} of the samples "
                      f"in the measurement window", (f"dcgmi.{field}", f"nvml.{field}"), "B/s")
       for column, field in _COUNTER_FIELDS},
    "gpu_pcie_rx_capture_p95_bytes_per_s": Metric(
        "GPU PCIe receive traffic, 95th percentile over the whole capture (AiSIO's statistic)",
        ("dcgmi.rx_aisio_p95_bytes_per_s",), "B/s"),
    "link_gbs": Metric("line rate of the GPU's link, one direction", ("xnvmeperf.link_gbs",),
                       "GB/s"),
}
VALUE_LABELS = {
    "cpu_governor": {"asis": "as found"},
    "turbo": {"asis": "as found"},
    "smt": {"asis": "as found"},
}


def gpu_check(row: dict[str, Any]) -> str:
    """Whether the counter watched the GPU the benchmark used, by PCI address."""
    counters = [c for c in ("dcgmi", "nvml") if f"{c}.samples" in row]
    if not counters:
        return NO_COUNTER
    watched = row.get(f"{counters[0]}.gpu_pci")
    used = row.get("xnvmeperf.gpu_pci")
    if missing_value(watched) or missing_value(used):
        return ("cannot compare: the counter did not record its GPU's PCI address"
                if missing_value(watched) else
                "cannot compare: the driver did not record the benchmark's GPU")
    return SAME_GPU if watched == used else f"the counter watched {watched}, the benchmark used {used}"


def check_gpu_host(experiment: str, gpu: int, counter: str) -> None:
    """Before a campaign's first run (and before any knob): the GPU and the counter must be
    there, or nothing starts. These are checks of the host that runs, so they are not in an
    experiment's ``host_block``, which a replayed chapter applies to the host it recorded."""
    gpus = Path(GPU_DIR)
    found = len(list(gpus.iterdir())) if gpus.is_dir() else 0
    if gpu >= found:
        raise ToolError(f"{experiment}: needs NVIDIA GPU {gpu}, the NVIDIA driver lists "
                        f"{found or 'none'} here ({GPU_DIR}); nothing was run")
    if counter == "nvml" and importlib.util.find_spec("pynvml") is None:
        raise ToolError(f"{experiment}: gpu_counter nvml needs NVML's Python binding: "
                        f"{NVML_INSTALL}; nothing was run")
    if counter == "dcgmi":
        DcgmDmon.check()


def usable(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows whose counter watched the benchmark's GPU (or that had no counter; AiSIO's
    imports are taken as AiSIO recorded them), and why each other row was left out, counted."""
    if rows.empty:
        return rows, []
    keep = rows["gpu_check"].isin([SAME_GPU, NO_COUNTER]) | \
        rows["run.source"].fillna("").str.startswith(IMPORTED_SOURCE)
    left = rows.loc[~keep, "gpu_check"].value_counts()
    return (rows[keep].reset_index(drop=True),
            [f"{n} run(s) left out: {why}" for why, n in left.items()])


def at_base(rows: pd.DataFrame, base: dict[str, Any], free: tuple[str, ...]) -> pd.DataFrame:
    """The rows at the params' base point with only the ``free`` variables (a chapter's axes)
    and the benchmark let loose: one set of curves, never a pool of configurations. A value
    the rows did not record (None, such as the CPU state of AiSIO's cuda-run runs) does not
    select."""
    import pandas as pd

    keep = pd.Series(True, index=rows.index)
    for key, value in base.items():
        if key not in free and key != "benchmark" and key in rows:
            keep &= (rows[key] == value) | rows[key].isna()
    return rows[keep].reset_index(drop=True)


def shown(own: pd.DataFrame, imported: pd.DataFrame, base: dict[str, Any],
          free: tuple[str, ...]) -> tuple[pd.DataFrame, str | None, list[str]]:
    """What a chapter shows: this package's runs where any are stored, else runs imported
    from AiSIO, never both; only usable ones (:func:`usable`) at the base point with the
    ``free`` axes loose (:func:`at_base`). Returns the rows, where they come from in words
    (None when there are none) and why any were left out."""
    rows, origin = ((own, "this package's runs") if not own.empty else
                    (imported, "AiSIO's runs, imported from its archive") if not imported.empty
                    else (own, None))
    kept, notes = usable(rows)
    at = at_base(kept, base, free) if not kept.empty else kept
    if len(at) < len(kept):
        notes.append(f"{len(kept) - len(at)} run(s) of other points than this chapter's "
                     "curves not shown")
    return at, (origin if not at.empty else None), notes


class GpuExperiment(Experiment):
    """The shared part of the GPU experiments; subclasses add variables and the invocation."""
    timed = False  # a run moves a fixed amount of data; how long it takes is the result

    settings = SETTINGS
    knob_variables = KNOBS
    needs_gpu = True
    metrics = METRICS
    # the AiSIO benchmark kinds (iolab.importers.aisio) whose archives this experiment imports,
    # and the xNVMe back end they must have used: only upcie-cuda puts the data in GPU memory
    aisio_kinds: tuple[str, ...] = ()
    aisio_backends: tuple[str, ...] = ("upcie-cuda",)
    # The hardware a run needs, in words: what a chapter without runs says it waits for
    # (iolab.report.chapter.Chapter.lab_plan), rather than what the host building the book lacks.
    lab_needs: ClassVar[str] = ("an NVIDIA GPU and NVMe SSDs, bound to a user-space driver, "
                                "that write into the GPU's memory peer to peer (xNVMe's "
                                "upcie-cuda back end)")

    def collectors(self, settings, point, cpus, topology) -> list:
        counter = settings["gpu_counter"]
        if counter == "dcgmi":
            return [DcgmDmon(settings["gpu"], settings["sample_interval_ms"])]
        if counter == "nvml":
            return [NvmlPcie(settings["gpu"], settings["sample_interval_ms"])]
        return []

    def host_block(self, settings: dict[str, Any], point: dict[str, Any],
                   topology: list[dict[str, Any]]) -> str | None:
        ndevs = point.get("ndevs")
        if ndevs is not None and ndevs > len(settings["devices"]):
            return f"needs {ndevs} devices, the environment lists {len(settings['devices'])}"
        return None

    def prepare_host(self, settings: dict[str, Any]) -> None:
        check_gpu_host(self.name, settings["gpu"], settings["gpu_counter"])

    def campaign_knobs(self, settings: dict[str, Any]) -> dict[str, Any]:
        """xNVMe's user-space back ends need the devices on a user-space driver; the knob
        refuses a device in use (mounted, root) and gives them back at the end."""
        return {"device_binding": {"devices": settings["devices"],
                                   "driver": settings["user_space_driver"]}}

    def code_files(self) -> list[Path]:
        """This module and every GPU experiment's package: their analyses import each other."""
        from iolab import experiments

        return sorted({Path(__file__), *(path for e in experiments.all_experiments()
                                         if isinstance(e, GpuExperiment)
                                         for path in Experiment.code_files(e))})

    def derive(self, row: dict[str, Any]) -> dict[str, Any]:
        out = super().derive(row)
        out["payload_bytes_per_s"] = out["mibs"] * MIB
        out["gpu_check"] = gpu_check(row)
        out["run.source"] = "iolab"
        return out

    def tidy_row(self, run: StoredRun) -> dict[str, Any]:
        if "imported_from" in (run.manifest.extra or {}):
            return imported_row(run, self)
        return super().tidy_row(run)


def imported_row(run: StoredRun, experiment: GpuExperiment) -> dict[str, Any]:
    """A run imported from an AiSIO archive, in the experiment's schema: its variables as
    far as AiSIO's parameters give them (others None), the metrics AiSIO's raw files give."""
    aisio = ImportedCampaign(run.manifest.experiment).tidy_row(run)
    row: dict[str, Any] = {v: aisio.get(v) for v in experiment.variables}
    if "ncores" in experiment.variables:
        # AiSIO counts logical CPUs; with thread siblings two of them make one core
        ncpus = aisio.get("ncpus")
        row["ncores"] = ncpus // 2 if aisio.get("thr_sib") == 1 and ncpus else ncpus
    for variable, value in {"cpu_governor": aisio.get("cpu_governor"),
                            "turbo": _onoff(aisio.get("turbo")),
                            "smt": _onoff(aisio.get("smt"))}.items():
        if variable in row:
            row[variable] = value
    if "benchmark" in experiment.variables:
        row["benchmark"] = "nvme_to_gpu"
    row.update({key: value for key, value in aisio.items() if key.startswith("run.")})
    imported = run.manifest.extra["imported_from"]
    mibs = aisio["mibs"]
    row.update({
        "run.source": f"{IMPORTED_SOURCE} {imported['archive']}",
        "config.runtime_s": run.manifest.settings.get("runtime_s"),
        "iops": aisio["iops"], "mibs": mibs,
        "payload_bytes_per_s": mibs * MIB if mibs is not None else float("nan"),
        "failed": aisio["failed"],
        "gpu_pcie_rx_capture_p95_bytes_per_s": _nan(aisio["dcgm_p95_bytes_per_s"]),
        # no timestamps in AiSIO's captures: no window, so no window statistics
        **{column: float("nan") for column, _ in _COUNTER_FIELDS},
        "link_gbs": float("nan"),
        "gpu_check": "not recorded by AiSIO (it watched GPU 0 without checking)",
        "run_problem": aisio.get("run_problem") or None,
    })
    return row


def _onoff(value: Any) -> Any:
    return {1: "on", 0: "off", True: "on", False: "off"}.get(value, value)


def _nan(value: Any) -> float:
    return float("nan") if value is None else float(value)
