"""The queue-depth chapter's page: what each of its sections glues, draws and shows.

Each function serves one section of ``notebooks/cuda_qdepth.ipynb``: it takes the
:class:`~iolab.report.chapter.Chapter` and the :class:`~iolab.shared.gpu_io.Device` that
:func:`intro` derives once, fills ``ch.text`` (the glued texts) and ``ch.figures``, and
returns what the section displays. Without runs the chapter stands on AiSIO's published
values, and says so in every text, caption and title that uses them.

Responsible for: this chapter's wording, number formats, roofline, figure and tables.
Not responsible for: what it shares with the I/O-size chapter (the runs shown, the model, the
design, the answer: :mod:`iolab.shared.gpu_io`), where the model's parameters come from
(:mod:`iolab.shared.gpu_sources`), the saturation criterion
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
from iolab.report.chapter import Chapter
from iolab.shared import gpu_io, quoted

AXES = ("nqueues", "qdepth")  # the chapter's axes; every other variable at its base value
GB = 1e9


def roofline(dev: gpu_io.Device) -> float:
    """The devices times one device's capacity, in IOPS (NaN where the capacity is unknown)."""
    return dev.ndevs * dev.capacity["iops"]


def intro(ch: Chapter) -> gpu_io.Device:
    """The texts of the opening and of the roofline and model (``iosize_text``, the grid's
    ``qdepth_values`` and ``nqueues_values``, ``roofline_iops``, ``model_text``), and the
    :class:`~iolab.shared.gpu_io.Device` the later sections use: its model fitted to the
    measured means, else to AiSIO's published rates."""
    T, spec = ch.text, ch.spec
    dev = gpu_io.device(ch, AXES, "iops")
    T["roofline_iops"] = f"{roofline(dev):,.0f}"
    if dev.measured:
        points = dev.summary.assign(
            outstanding=dev.summary["qdepth"] * dev.summary["nqueues"] * dev.ndevs) \
            .rename(columns={"mean": "iops"})
    elif dev.reference:
        pub = dev.reference.table[dev.reference.table["kind"] == "iops"]
        points = pd.DataFrame({"nqueues": pub["nqueues"], "qdepth": pub["qdepth"],
                               "iops": pub["value"]})
        points["outstanding"] = points["qdepth"] * points["nqueues"] * dev.ndevs
    else:
        points = pd.DataFrame()
    dev = gpu_io.fit(ch, dev, points, dev.iosize)
    model, worst = dev.model, dev.worst
    T["model_text"] = (
        f"Here L = {model.latency_s * 1e6:.1f} µs ({model.sources['latency_s']}), the "
        f"roofline above, and B = {model.link_bytes_per_s / GB:.1f} GB/s "
        f"({dev.link_source}). It is " +
        ("fitted to the runs shown" if dev.measured else
         "fitted to AiSIO's published values, not to measurements") +
        ", so a model, not a bound; drawn dashed, with its fitting point marked" + (
            f"; on the other {int((~dev.residuals['fitted']).sum())} points its largest error "
            f"is {worst['residual'] * 100:+.0f} % ({int(worst['nqueues'])} queue(s) per "
            f"device at queue depth {int(worst['qdepth'])})" if worst is not None else "")
        + "." if model else
        "Neither stored runs nor published values give its parameters here, so no model is "
        "drawn.")
    T["iosize_text"] = str(dev.iosize)
    for var in ("qdepth", "nqueues"):
        values = sorted({v for g in spec.grids.values() for v in g["vary"].get(var, [])})
        T[f"{var}_values"] = ", ".join(map(str, values)) or str(spec.base[var])
    return dev


def figure(ch: Chapter, dev: gpu_io.Device) -> None:
    """``fig_cuda_qdepth``: IOPS against queue depth, one curve per number of queues per
    device, with the model, AiSIO's published rates and the roofline."""
    spec, model, roof = ch.spec, dev.model, roofline(dev)
    fig, ax = plt.subplots(figsize=(spec.analysis["figure_width"], 5))
    queues = gpu_io.grid_values(spec, "nqueues")
    depths = np.array(gpu_io.grid_values(spec, "qdepth"))
    colors = fg.colors(queues, spec.analysis["palette"])
    gpu_io.curves(ax, dev, "qdepth", depths, "nqueues", colors, "{} queue(s) per device",
                  lambda q: model.iops(depths * q * dev.ndevs, dev.iosize), "iops")
    if model:
        fit = dev.residuals[dev.residuals["fitted"]]
        ax.plot(fit["qdepth"], fit["iops"], "s", mfc="none", mec="black", ms=12,
                label="the model's fitting point")
    if not dev.measured and dev.reference:
        pub = dev.reference.table[dev.reference.table["kind"] == "iops"]
        for q, part in pub.groupby("nqueues"):
            ax.plot(part["qdepth"], part["value"], "*", color=colors.get(q, "k"), ms=11,
                    markeredgecolor="k", label=f"published by AiSIO, {q} queue(s)")
    if roof == roof:
        ax.axhline(roof, color="0.2", lw=1)
        ax.text(depths[0], roof, " roofline: devices × device capacity", va="bottom",
                fontsize=8)
    ax.set_xscale("log", base=2)
    fg.value_ticks(ax, list(depths), log2=True)
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v / 1e6:g}"))
    ax.set(xlabel="queue depth", ylabel="IOPS (millions)",
           title=(dev.origin or "model and published values; no measurement stored here"))
    ax.set_ylim(bottom=0, top=max(roof if roof == roof else 0, ax.get_ylim()[1]) * 1.1)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    ch.figures["fig_cuda_qdepth"] = fig
    plt.close(fig)


def model_errors(dev: gpu_io.Device) -> Styler | None:
    """The model's error at each point, by queues per device and queue depth; None without
    a model."""
    return gpu_io.model_errors(dev, ["nqueues"], "qdepth", lambda n: f"{int(n)}",
                               lambda q: f"queue depth {int(q)}", "queues per device")


def _knee_words(dev: gpu_io.Device, pub: pd.DataFrame) -> str:
    """Where the model's curve reaches its ceiling (the commands in flight at which the
    latency term meets the lower of the others), in queue depth with one queue per device,
    against the published table's saturation of one queue per device."""
    model = dev.model
    ceiling = min(model.ndevs * model.device_iops, model.link_bytes_per_s / dev.iosize)
    knee = model.latency_s * ceiling
    depth = knee / dev.ndevs
    one = pub[pub["nqueues"] == 1]
    short = len(one) and not bool(one["reached"].iloc[0])
    said = ("AiSIO's table has one queue per device still short of saturation at queue depth "
            f"{int(one['qdepth'].iloc[0])}" if short else "")
    return (f"The model reaches its ceiling from about {knee:,.0f} commands in flight, queue "
            f"depth {depth:,.0f} with one queue on each of the {dev.ndevs} devices"
            + (f", earlier than the published data: {said}. "
               if short and depth < int(one["qdepth"].iloc[0]) else ". "))


def saturation_tables(ch: Chapter, dev: gpu_io.Device) -> list[Styler]:
    """The thread-budget section: the measured table (with runs) and AiSIO's, with their
    texts (``sat_text``, the published values ``pub_*`` and ``one_queue_text``, the model
    against the published rate of one queue per device)."""
    T, tables, ref, roof = ch.text, [], dev.reference, roofline(dev)
    if dev.measured:
        sat = saturation.saturation_points(dev.summary, ["nqueues"], "qdepth", dev.tolerance)
        tables.append(escape.table(pd.DataFrame({
            "queues per device": sat["nqueues"],
            "highest mean IOPS": sat["plateau"].map(lambda v: f"{v:,.0f}"),
            "of the roofline": (sat["plateau"] / roof).map(lambda v: f"{v * 100:.1f} %"),
            "smallest saturating queue depth": sat.apply(saturation.describe, axis=1),
            "GPU threads": [f"{int(load * q * dev.ndevs):,}" if r else
                            f"> {int(m * q * dev.ndevs):,}"
                            for load, q, r, m in zip(sat["saturation_load"], sat["nqueues"],
                                                     sat["reached"], sat["max_load"])],
        }), caption=f"Measured; saturated = within {T['tolerance']} of the highest mean with "
                    "that many queues."))
        T["sat_text"] = "The table above is computed from the stored runs."
    else:
        T["sat_text"] = ("No run is stored here, so this package has no table of its own; "
                         "AiSIO's follows.")
    if not ref:
        return tables
    pub = ref.table[ref.table["kind"] == "min_qdepth"]
    nd_pub = int(ref.meta["ndevs"])
    tables.append(gpu_io.published_saturation(
        {"queues per device": pub["nqueues"].astype(int)}, pub["qdepth"], pub["reached"],
        [q * n * nd_pub for q, n in zip(pub["qdepth"], pub["nqueues"])]))
    quotes = quoted.points(ref, "iops", ("nqueues", "qdepth"))
    T.update({key: f"{point.value / 1e6:.1f}" for key, point in quotes.items()})
    T["pub_roofline"] = f"{ref.meta['roofline_iops']:,}"
    T["pub_roofline_m"] = f"{ref.meta['roofline_iops'] / 1e6:.1f}"
    T["pub_ndevs"] = str(nd_pub)
    if dev.model:
        T["one_queue_text"] = _model_words(dev, pub, quoted.named(ref, "compared", quotes),
                                           quoted.named(ref, "compared_from", quotes))
    else:
        T["one_queue_text"] = "Without the model's parameters there is no model to compare with."
    return tables


def _model_words(dev: gpu_io.Device, pub: pd.DataFrame, compared: quoted.Point,
                 start: quoted.Point) -> str:
    """The model against the published point ``compared``, and that point's growth from
    ``start``."""
    queues, depth = compared.at["nqueues"], compared.at["qdepth"]
    load = depth * queues * dev.ndevs
    allowed = float(dev.model.iops(load, dev.iosize))
    share = compared.value / allowed
    grew = compared.value / start.value - 1
    return (
        f"With {'one queue' if queues == 1 else f'{queues} queues'} and queue depth {depth} "
        f"the model allows {allowed / 1e6:.1f} million IOPS, set by its "
        f"{dev.model.binding(load, dev.iosize)} term; the published rate is "
        f"{share * 100:.0f} % of it, after growing by {grew * 100:.0f} % from queue depth "
        f"{start.at['qdepth']}. " + _knee_words(dev, pub) + "A hypothesis for the "
        "shortfall, which this grid can test once measured: a queue's threads advance in "
        "lock-step rounds, so the slowest command of each round holds back the rest, and "
        "more queues per device run more rounds at once.")
