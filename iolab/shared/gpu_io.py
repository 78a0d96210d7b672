"""What the experiments that move NVMe data into GPU memory share: settings, the GPU counters
around each run, the tidy schema of their metrics, and runs imported from AiSIO's archives.

Three experiments use this: ``pcie_saturation`` (CPU threads submit, the SSDs write into GPU
memory: ``xnvmeperf run --be upcie-cuda``), ``cuda_iosize`` and ``cuda_qdepth`` (GPU threads
submit: ``xnvmeperf cuda-run``; what only those two share is :mod:`iolab.shared.cuda_run`),
and ``gpu_pcie`` its host check. Each is its own package with its own variables; this module
sits below them (:mod:`iolab.shared`), so none of them imports another.

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

The chapters of these experiments need a lab (``lab_needs`` says what hardware) and share
what they show: which runs (:func:`shown`, :func:`shown_text`), the design and the lab
campaign (:func:`lab_design`) and, without findings, the answer (:func:`lab_answer`). The two
device-initiated chapters also share their :class:`Device` (runs, summary, published values,
capacity and the fitted Little's-law model: :func:`device`, :func:`fit`), their curves
(:func:`curves`), the model's error table and AiSIO's saturation table.

Responsible for: the shared settings, variables, metrics, collectors and host checks, the
imported rows, and those shared parts of the chapters. Not responsible for:
the xnvmeperf command line (``iolab.tools.xnvmeperf``), the counters (``iolab.collectors.dcgmi``,
``iolab.collectors.nvml``), analysis (``iolab.analysis.saturation``, ``iolab.analysis.queueing``),
where the model's parameters and the GPU-to-GPU figures come from (``iolab.shared.gpu_sources``)
or a chapter's own
wording (its experiment's ``page``).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from iolab.collectors.dcgmi import DcgmDmon
from iolab.collectors.nvml import INSTALL as NVML_INSTALL
from iolab.collectors.nvml import NvmlPcie
from iolab.core.experiment import Experiment, Metric, missing_value
from iolab.core.schema import Choice, Int, ListOf, Text
from iolab.core.store import StoredRun
from iolab.errors import ToolError
from iolab.host.binding import USER_SPACE_DRIVERS
from iolab.importers.aisio import IMPORTED_SOURCE, ImportedCampaign
from iolab.report import escape

if TYPE_CHECKING:  # imported where a table is made: planning and running need no pandas
    import pandas as pd
    from pandas.io.formats.style import Styler

    from iolab.analysis.queueing import LittleBound
    from iolab.report.chapter import Chapter
    from iolab.report.reference import Reference

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
    "mibs": Metric("payload bandwidth", ("xnvmeperf.mibs",), "MiB/s", ceiling="link"),
    "payload_bytes_per_s": Metric("payload bandwidth", (), "B/s"),
    "failed": Metric("failed commands", ("xnvmeperf.failed",)),
    **{column: Metric(f"GPU PCIe {'receive' if '_rx_' in column else 'transmit'} traffic, "
                      f"{'mean' if '_mean_' in column else '95th percentile'} of the samples "
                      f"in the measurement window", (f"dcgmi.{field}", f"nvml.{field}"), "B/s",
                      ceiling="link")
       for column, field in _COUNTER_FIELDS},
    "gpu_pcie_rx_capture_p95_bytes_per_s": Metric(
        "GPU PCIe receive traffic, 95th percentile over the whole capture (AiSIO's statistic)",
        ("dcgmi.rx_aisio_p95_bytes_per_s",), "B/s", ceiling="link"),
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


# -- what these experiments' chapters share ---------------------------------------------------
# Planning and running import this module: pandas and the analyses are imported where a page
# is made.

# what a device-initiated chapter shows when no run is stored
DEVICE_INSTEAD = ("no machine whose GPU can drive NVMe SSDs directly was available to this "
                  "project, so the chapter shows this package's plan and, where the data folder "
                  "holds them, AiSIO's published values and a model, each labelled as such")


def shown_text(environment: str, rows: pd.DataFrame, origin: str | None, notes: list[str],
               instead: str) -> str:
    """What a chapter shows, for its prose (:func:`shown`'s three results): the runs and where
    they come from, or that none is stored and what it shows ``instead``; then why any runs
    were left out."""
    return (f"{len(rows)} stored runs in environment {environment}: {origin}" if origin
            else f"no stored run in environment {environment}: {instead}") + "".join(
        f"; {note}" for note in notes)


def lab_design(ch: Chapter) -> list[Styler]:
    """The params' design and the lab campaign it plans, with why it did not run here
    (:meth:`~iolab.report.chapter.Chapter.lab_plan` with the experiment's ``lab_needs``)."""
    from iolab.report.tables import design_table

    return [escape.table(design_table(ch.spec, ch.experiment)),
            escape.table(ch.lab_plan(ch.experiment.lab_needs))]


def lab_answer(ch: Chapter) -> Styler:
    """A chapter without findings of its own: its answer (glue key ``answer_text``) and the
    source's claims, each not testable here."""
    ch.text["answer_text"] = (
        "It therefore gives no measured answer of its own: what it gives is the plan that would "
        "measure it, the model of what to expect, and AiSIO's published values, labelled as "
        "theirs. Each claim of AiSIO's chapter below waits for the lab run named beside it."
        if not ch.have else
        "Its findings are not yet computed from runs: the figures above show the runs themselves.")
    return escape.table(ch.claims_table(why=f"no run is stored in environment {ch.environment}"
                                        if not ch.have else "this chapter computes no findings "
                                        "from runs yet"))


@dataclass(frozen=True)
class Device:
    """What the sections of a device-initiated chapter (``cuda_iosize``, ``cuda_qdepth``)
    share: the runs shown and their summary, AiSIO's published values, the device capacity,
    the base point's sizes and, once fitted (:func:`fit`), the Little's-law model."""
    rows: pd.DataFrame               # the runs shown (:func:`shown`)
    origin: str | None               # where they come from, in words; None without runs
    summary: pd.DataFrame            # per point of the chapter's axes: n, mean, interval
    reference: Reference | None      # AiSIO's published values of this chapter
    capacity: dict[str, Any]         # C, one device's IOPS, and where it came from
    ndevs: int                       # the base point's devices, queues and I/O size
    nqueues: int
    iosize: int
    tolerance: float                 # how close to a curve's highest mean is saturated
    model: LittleBound | None = None
    residuals: pd.DataFrame | None = None   # the model at each of its points
    worst: pd.Series | None = None          # its largest error off the fitting point
    link_source: str = ""                   # where the model's link term came from

    @property
    def measured(self) -> bool:
        return not self.rows.empty


def device(ch: Chapter, axes: tuple[str, ...], metric: str) -> Device:
    """A device-initiated chapter's :class:`Device`, its curves along ``axes`` summarised by
    ``metric``, and the texts every such chapter glues (``shown_what``, ``tolerance``, ``ci``,
    ``ndevs``, ``cap_iops``, ``cap_src``)."""
    from iolab.report import reference
    from iolab.shared import gpu_sources

    spec, T = ch.spec, ch.text
    rows, origin, left_out = shown(ch.df, ch.imported, spec.base, axes)
    capacity = gpu_sources.device_capacity(spec.analysis, ch.environment, ch.data_dir)
    tolerance = spec.analysis["saturation_tolerance"]
    T["tolerance"] = f"{tolerance * 100:g} %"
    T["ci"] = f"{ch.confidence * 100:g} %"
    T["ndevs"] = str(int(spec.base["ndevs"]))
    T["cap_iops"] = f"{capacity['iops']:,.0f}"
    T["cap_src"] = capacity["source"]
    T["shown_what"] = shown_text(ch.environment, rows, origin, left_out, DEVICE_INSTEAD)
    return Device(rows, origin, ch.summarize(rows, list(axes), [metric]),
                  reference.load(ch.data_dir, spec.analysis["reference"]), capacity,
                  *(int(spec.base[k]) for k in ("ndevs", "nqueues", "iosize")), tolerance)


def fit(ch: Chapter, dev: Device, points: pd.DataFrame, iosize: str | int) -> Device:
    """``dev`` with the Little's-law model fitted to ``points`` (one row per point: the
    commands in flight ``outstanding`` and the mean ``iops``; ``iosize`` a column of them or
    one size for all), its residuals and its largest error; no model where the points or the
    capacity give no parameter."""
    from iolab.analysis.queueing import fitted_model, residuals, worst_residual
    from iolab.shared import gpu_sources

    link, source = gpu_sources.link_term(ch.spec.analysis, ch.environment, ch.data_dir)
    model = (fitted_model(points, "outstanding", "iops", dev.capacity, link, source, dev.ndevs)
             if not points.empty else None)
    if model is None:
        return replace(dev, link_source=source)
    res = residuals(points, model, "outstanding", "iops", iosize)
    return replace(dev, model=model, residuals=res, worst=worst_residual(res), link_source=source)


def grid_values(spec: Any, variable: str) -> list[Any]:
    """Every value of ``variable`` the params' grids give, in order (a grid that does not vary
    it holds the base value)."""
    return sorted({v for g in spec.grids.values()
                   for v in g["vary"].get(variable, [spec.base[variable]])})


def curves(ax: Any, dev: Device, x: str, xs: Any, by: str, colors: dict[Any, Any],
           label: str, model_y: Callable[[Any], Any], metric: str, scale: float = 1.0) -> None:
    """One curve per value of ``by`` (keys of ``colors``, labelled ``label.format(value)``)
    against ``x``: the model dashed (``model_y(value)``, its values at ``xs``), and the
    measured means joined, their intervals as a band and the repetitions as dots, or without
    runs a legend entry for the model; measured values divided by ``scale``."""
    for value, color in colors.items():
        if dev.model:
            ax.plot(xs, model_y(value), "--", color=color, lw=1, alpha=0.8)
        if dev.measured:
            s = dev.summary[dev.summary[by] == value].sort_values(x)
            ax.plot(s[x], s["mean"] / scale, "o-", color=color, label=label.format(value))
            ax.fill_between(s[x], s["ci_low"] / scale, s["ci_high"] / scale, color=color,
                            alpha=0.15)
            dots = dev.rows[dev.rows[by] == value]
            ax.plot(dots[x], dots[metric] / scale, ".", color=color, ms=3)
        elif dev.model:
            ax.plot([], [], "--", color=color, label=f"{label.format(value)} (model)")


def model_errors(dev: Device, rows: list[str], column: str, row_name: Callable[..., str],
                 column_name: Callable[[Any], str], row_title: str) -> Styler | None:
    """The model's residuals as a table (:func:`iolab.report.tables.residual_table`), captioned
    with what they compare; None without a model."""
    from iolab.report.tables import residual_table

    if not dev.model:
        return None
    return escape.table(
        residual_table(dev.residuals, rows, column, row_name, column_name, row_title),
        caption="The model's error: " + ("measured" if dev.measured else "published")
                + " over model, minus one (\"fit\": the point the model was fitted to).")


def published_saturation(first: dict[str, Any], depths: Any, reached: Any,
                         threads: Any) -> Styler:
    """AiSIO's saturation table, labelled as published: the columns ``first`` (which curve),
    the smallest saturating queue depth it published for each curve and the GPU threads that
    makes (a lower bound where the curve did not saturate)."""
    import pandas as pd

    return escape.table(pd.DataFrame({
        **first,
        "smallest saturating queue depth (published)": [
            f"{int(q)}" if r else f"> {int(q)} (not reached)" for q, r in zip(depths, reached)],
        "GPU threads (published)": [f"{int(t):,}" if r else f"> {int(t):,}"
                                    for t, r in zip(threads, reached)],
    }), caption="Published by AiSIO, not measured here; AiSIO does not state its criterion.")


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
        """The experiment's own package and the shared modules its class is built from (this
        one, and :mod:`iolab.shared.cuda_run` for the device-initiated pair): a change to
        any of them can change a row. No other experiment's code: none imports another."""
        shared = {Path(sys.modules[c.__module__].__file__) for c in type(self).__mro__
                  if c.__module__.startswith("iolab.shared.")}
        return sorted(shared | set(Experiment.code_files(self)))

    def recorded_link(self, row: dict[str, Any]) -> tuple[float, str] | None:
        # the line rate xnvmeperf's driver derived from nvidia-smi's link (AiSIO's archives
        # record none)
        line = row.get("xnvmeperf.link_gbs")
        if not isinstance(line, (int, float)) or isinstance(line, bool) or not line > 0:
            return None
        return float(line), "the GPU's link as the run recorded it"

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
