"""The I/O-size chapter's page: what each of its sections glues, draws and shows.

Each function serves one section of ``notebooks/cuda_iosize.ipynb``: it takes the
:class:`~iolab.report.chapter.Chapter` and the :class:`~iolab.shared.gpu_io.Device` that
:func:`intro` derives once, fills ``ch.text`` (the glued texts) and ``ch.figures``, and
returns what the section displays. Without runs the chapter stands on AiSIO's published
values, and says so in every text, caption and title that uses them.

Responsible for: this chapter's wording, number formats, figure and tables.
Not responsible for: what it shares with the queue-depth chapter (the runs shown, the model,
the design, the answer: :mod:`iolab.shared.gpu_io`), where the model's parameters and the
GPU-to-GPU reference come from (:mod:`iolab.shared.gpu_sources`), the saturation criterion
(:mod:`iolab.analysis.saturation`), or which keys the prose glues (the notebook's Markdown).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from iolab.analysis import saturation
from iolab.report import escape
from iolab.report import figures as fg
from iolab.report import reference
from iolab.report.chapter import Chapter
from iolab.shared import gpu_io, gpu_sources, quoted

AXES = ("iosize", "qdepth")  # the chapter's axes; every other variable at its base value
GB = 1e9


def intro(ch: Chapter) -> gpu_io.Device:
    """The texts of the opening and of the model (``model_text``, ``model_basis``), and the
    :class:`~iolab.shared.gpu_io.Device` the later sections use: its model fitted to the
    measured means, else to AiSIO's published payloads."""
    dev = gpu_io.device(ch, AXES, "payload_bytes_per_s")
    if dev.measured:
        points = dev.summary.assign(outstanding=dev.summary["qdepth"] * dev.ndevs * dev.nqueues,
                                    iops=dev.summary["mean"] / dev.summary["iosize"]) \
            .rename(columns={"mean": "payload"})
    elif dev.reference:
        pub = dev.reference.table[dev.reference.table["kind"] == "payload_gbs"]
        points = pd.DataFrame({"iosize": pub["iosize"], "qdepth": pub["qdepth"],
                               "payload": pub["value"] * GB})
        points["outstanding"] = (points["qdepth"] * dev.ndevs
                                 * int(dev.reference.meta["nqueues"]))
        points["iops"] = points["payload"] / points["iosize"]
    else:
        points = pd.DataFrame()
    dev = gpu_io.fit(ch, dev, points, "iosize")
    basis = ("fitted to the runs shown" if dev.measured else
             "fitted to AiSIO's published values, not to measurements")
    model, worst = dev.model, dev.worst
    if model:
        ch.text["model_text"] = (
            f"Here L = {model.latency_s * 1e6:.1f} µs ({model.sources['latency_s']}), C = "
            f"{dev.capacity['iops']:,.0f} IOPS ({dev.capacity['source']}) and B = "
            f"{model.link_bytes_per_s / GB:.1f} GB/s ({dev.link_source}). The model is "
            f"{basis}: its latency comes from the points it is drawn through, so it is a "
            "model, not a bound, drawn as dashed lines with its fitting point marked" + (
                f"; on the other {int((~dev.residuals['fitted']).sum())} points its largest "
                f"error is {worst['residual'] * 100:+.0f} % ({int(worst['iosize']):,} B at "
                f"queue depth {int(worst['qdepth'])})" if worst is not None else "") + ".")
    else:
        ch.text["model_text"] = ("Neither stored runs nor published values give its "
                                 "parameters here, so no model is drawn.")
    ch.text["model_basis"] = basis if model else "none: no parameters"
    return dev


def figure(ch: Chapter, dev: gpu_io.Device) -> None:
    """``fig_cuda_iosize``: payload against I/O size, one curve per queue depth, with the
    model, AiSIO's published values and the GPU-to-GPU reference."""
    spec, ref, model = ch.spec, dev.reference, dev.model
    fig, ax = plt.subplots(figsize=(spec.analysis["figure_width"], 5))
    depths = gpu_io.grid_values(spec, "qdepth")
    sizes = np.array(gpu_io.grid_values(spec, "iosize"))
    cmap = plt.get_cmap("viridis", len(depths))
    gpu_io.curves(ax, dev, "iosize", sizes, "qdepth",
                  {q: cmap(i) for i, q in enumerate(depths)}, "queue depth {}",
                  lambda q: model.bytes_per_s(q * dev.ndevs * dev.nqueues, sizes) / GB,
                  "payload_bytes_per_s", GB)
    if model:
        fit = dev.residuals[dev.residuals["fitted"]]
        ax.plot(fit["iosize"], fit["iops"] * fit["iosize"] / GB, "s", mfc="none", mec="black",
                ms=11, label="the model's fitting point")
    if not dev.measured and ref:
        pub = ref.table[ref.table["kind"] == "payload_gbs"]
        ax.plot(pub["iosize"], pub["value"], "k*", ms=10, label="published by AiSIO")
    p2p = gpu_sources.p2p_reference(spec.analysis, ch.environment, ch.data_dir)
    ceilings = ([(p2p["p2p_write_gbs"], "GPU-to-GPU P2P write, one direction")] if p2p else
                [(ref.meta["p2p_reference_gbs"], "AiSIO's p2p figure (two directions "
                  "together: not a one-way ceiling)")] if ref else [])
    for value, what in ceilings:
        ax.axhline(value, color="0.3", ls=":", lw=1)
        ax.text(sizes[0], value, f" {what}", va="bottom", fontsize=8)
    ax.set_xscale("log", base=2)
    fg.value_ticks(ax, list(sizes), log2=True, sizes=True)
    ax.set(xlabel="I/O size", ylabel="payload GB/s (10^9 B/s)",
           title=(dev.origin or "model and published values; no measurement stored here"))
    ax.set_ylim(0, max([ax.get_ylim()[1]] + [v for v, _ in ceilings]) * 1.08)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    ch.figures["fig_cuda_iosize"] = fig
    plt.close(fig)


def model_errors(dev: gpu_io.Device) -> Styler | None:
    """The model's error at each point, by I/O size and queue depth; None without a model."""
    return gpu_io.model_errors(dev, ["iosize"], "qdepth", lambda s: f"{int(s):,}",
                               lambda q: f"queue depth {int(q)}", "I/O size (bytes)")


def saturation_tables(ch: Chapter, dev: gpu_io.Device) -> list[Styler]:
    """The saturation section: the measured table (with runs) and AiSIO's, with their texts
    (``sat_text``, the published values ``pub_*`` and ``bound_text``, the model against the
    published rate of the smallest reads)."""
    T, tables, ref = ch.text, [], dev.reference
    threads = dev.ndevs * dev.nqueues
    if dev.measured:
        sat = saturation.saturation_points(dev.summary, ["iosize"], "qdepth", dev.tolerance)
        tables.append(escape.table(pd.DataFrame({
            "I/O size (bytes)": sat["iosize"].map(lambda v: f"{int(v):,}"),
            "highest mean GB/s": (sat["plateau"] / GB).map(lambda v: f"{v:.2f}"),
            "smallest saturating queue depth": sat.apply(saturation.describe, axis=1),
            "GPU threads": [f"{int(load * threads):,}" if r else f"> {int(m * threads):,}"
                            for load, r, m in zip(sat["saturation_load"], sat["reached"],
                                                  sat["max_load"])]}),
            caption=f"Measured; saturated = within {T['tolerance']} of the highest mean at "
                    "that size."))
        first = sat[sat["reached"]]
        T["sat_text"] = (f"With the {T['tolerance']} criterion, the smallest I/O size that "
                         f"saturates within the grid is {int(first['iosize'].min()):,} bytes."
                         if len(first) else "No I/O size saturates within the grid.")
    else:
        T["sat_text"] = ("No run is stored here, so this package has no saturation table of "
                         "its own; AiSIO's follows.")
    if not ref:
        return tables
    pub = ref.table[ref.table["kind"] == "min_qdepth"]
    per_depth = int(ref.meta["ndevs"]) * int(ref.meta["nqueues"])
    tables.append(gpu_io.published_saturation(
        {"I/O size (bytes)": pub["iosize"].map(lambda v: f"{int(v):,}")}, pub["qdepth"],
        pub["reached"], [int(q) * per_depth for q in pub["qdepth"]]))
    quotes = quoted.points(ref, "payload_gbs", ("iosize", "qdepth"))
    T.update({key: f"{point.value:.1f}" for key, point in quotes.items()})
    compared = quoted.named(ref, "compared", quotes)
    size, depth = compared.at["iosize"], compared.at["qdepth"]
    # named for the point, as the text that quotes them names it: were the reference to compare
    # another point, the text's glue would go unfilled (a build error), never show it as this
    at = f"{size}_q{depth}"
    T[f"pub_{at}_miops"] = f"{compared.value * GB / size / 1e6:.1f}"
    T[f"pub_{at}_threads"] = f"{depth * per_depth:,}"
    T["pub_p2p_gbs"] = f"{ref.meta['p2p_reference_gbs']:.1f}"
    qref = reference.load(ch.data_dir, ch.spec.analysis["qdepth_reference"])
    same = qref and quoted.value_at(qref, "iops", {"nqueues": int(ref.meta["nqueues"]),
                                                   "qdepth": depth})
    if same:
        T[f"pub_qdepth_{at}_miops"] = f"{same / 1e6:.1f}"
    T["pub_plateau"] = f"{ref.meta['plateau_gbs_low']:.0f}–{ref.meta['plateau_gbs_high']:.0f}"
    if dev.model:
        T["bound_text"] = _bound_words(dev, compared, per_depth)
    return tables


def _bound_words(dev: gpu_io.Device, compared: quoted.Point, per_depth: int) -> str:
    """The model against the published point ``compared`` (``per_depth`` GPU threads per
    unit of queue depth), and what a large shortfall points to."""
    size, depth = compared.at["iosize"], compared.at["qdepth"]
    allowed = dev.model.bytes_per_s(depth * per_depth, size) / GB
    share = compared.value / allowed
    return (
        f"For {size:,} B at queue depth {depth} the model allows {allowed:.1f} GB/s, set by "
        f"the {dev.model.binding(depth * per_depth, size)} term; the published value is "
        f"{share * 100:.0f} % of it. " + (
            "Where data fall this far below the model, something the model leaves out "
            "binds at small I/O sizes: a candidate is the lock-step rounds in which a "
            "queue's threads submit and reap, another the rate at which one queue takes "
            "commands; the queue-depth chapter, next, adds queues to tell them apart."
            if share < 0.9 else
            "The data come close to the model there."))
