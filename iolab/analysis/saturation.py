"""Where a throughput curve saturates, by a stated criterion.

A curve is the mean of a metric against a load variable (queue depth) for one setting of
everything else. Its *plateau* is its highest mean. The *saturation point* is the smallest load
whose mean lies within ``tolerance`` (a fraction) of the plateau. When that is the largest load
measured, nothing shows the curve has stopped rising, so the point counts as *not reached*
within the grid (AiSIO's "> 128"). The tolerance is a parameter, printed with every result.

Responsible for: that criterion on summary tables. Not responsible for: the summaries
(:mod:`iolab.analysis.stats`) or models (:mod:`iolab.analysis.queueing`).
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from iolab.errors import InputError


def saturation_points(summary: pd.DataFrame, curve: Sequence[str], load: str,
                      tolerance: float, value: str = "mean") -> pd.DataFrame:
    """One row per curve: its keys, ``plateau`` (highest ``value``), ``load_at_plateau``,
    ``saturation_load`` (smallest load within ``tolerance`` of the plateau), ``reached``
    (False when that load is the largest measured), ``max_load`` and ``points``."""
    if not 0 < tolerance < 1:
        raise InputError(None, "saturation_tolerance", f"{tolerance!r} is not a fraction",
                         allowed="a number between 0 and 1, e.g. 0.05 for 5 %")
    missing = [c for c in [*curve, load, value] if c not in summary]
    if missing:
        raise InputError(None, missing[0], "not a column of the summary",
                         allowed=", ".join(map(str, summary.columns)))
    rows = []
    groups = summary.groupby(list(curve), dropna=False) if curve else [((), summary)]
    for keys, part in groups:
        part = part.dropna(subset=[value]).sort_values(load)
        if part.empty:
            continue
        keys = keys if isinstance(keys, tuple) else (keys,)
        plateau = float(part[value].max())
        within = part[part[value] >= (1 - tolerance) * plateau]
        first = within.iloc[0][load]
        top = part[load].max()
        rows.append({**dict(zip(curve, keys)), "plateau": plateau,
                     "load_at_plateau": part.loc[part[value].idxmax(), load],
                     "saturation_load": first, "reached": bool(first < top),
                     "max_load": top, "points": len(part)})
    return pd.DataFrame(rows)


def describe(row: pd.Series | dict, unit: str = "") -> str:
    """A saturation point in words: '64' or '> 128 (not reached)'."""
    if row["reached"]:
        return f"{row['saturation_load']:g}{unit}"
    return f"> {row['max_load']:g}{unit} (not reached)"
