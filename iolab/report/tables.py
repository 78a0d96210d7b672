"""Numbers as the book prints them, and the summary tables of the chapters.

Responsible for: formatting (thousands separators, ranges, signed percentages; "n/a" for a
number that is missing) and turning a summary (:func:`iolab.analysis.stats.summarize`) into a
wide table of "mean (sd; interval)" cells, one row per point, that names its interval method.
Not responsible for: computing anything.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from iolab.analysis.stats import METHODS


def missing(x: Any) -> bool:
    """Whether a number is absent: None or NaN (a mean of no runs, the interval of one run)."""
    return x is None or (isinstance(x, (float, np.floating)) and math.isnan(x))


def fmt_int(x: float) -> str:
    return "n/a" if missing(x) else f"{x:,.0f}"


def fmt_num(x: float | None, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals and no separators ('1.23', '1307'); 'n/a' if missing."""
    return "n/a" if missing(x) else f"{x:.{digits}f}"


def fmt_range(low: float, high: float, fmt: Callable[[float], str] = fmt_int,
              sep: str = " – ") -> str:
    if missing(low) or missing(high):
        return "n/a"
    return f"{fmt(low)}{sep}{fmt(high)}"


def fmt_pct(x: float, digits: int = 1) -> str:
    """'+2.1 %'; a change that is near −100 % but above it keeps the digits that say so (a
    bound of a log-scale interval never reaches −100 %, and must not be printed as if)."""
    if missing(x):
        return "n/a"
    while x > -100 and round(x, digits) <= -100 and digits < 6:
        digits += 1
    return f"{x:+.{digits}f} %"


def pct_with_interval(change: dict[str, float], digits: int = 1) -> tuple[str, str]:
    """('+2.1 %', '-3.4 % to +7.6 %') from :func:`iolab.analysis.stats.pct_change`; 'n/a'
    for what one run per side leaves undefined."""
    return (fmt_pct(change["pct"], digits),
            fmt_range(change["ci_low"], change["ci_high"], lambda v: fmt_pct(v, digits), " to "))


def cell(row: pd.Series, digits: int) -> str:
    """'mean (sd s; low – high)' of one summary row."""
    f = lambda v: "n/a" if pd.isna(v) else f"{v:,.{digits}f}"  # noqa: E731
    return f"{f(row['mean'])} (sd {f(row['sd'])}; {f(row['ci_low'])} – {f(row['ci_high'])})"


def summary_table(summary: pd.DataFrame, keys: Sequence[str], metrics: dict[str, str],
                  digits: dict[str, int] | None = None,
                  label: Callable[[str, Any], str] = lambda k, v: str(v),
                  key_names: dict[str, str] | None = None,
                  confidence: float = 0.95,
                  outliers: pd.Series | None = None) -> pd.DataFrame:
    """One row per point: its keys (readable), n, and per metric 'mean (sd; interval)'.

    ``metrics`` maps a metric to its column title; the interval's method is added to the
    title, so a reader sees which interval each column holds. ``outliers``, the number of a
    point's runs flagged as outliers (indexed like a groupby over ``keys``), adds a column
    "outlier runs".
    """
    digits = digits or {}
    key_names = key_names or {}
    rows = []
    for key, group in summary.groupby(list(keys), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        by_metric = group.set_index("metric")
        row: dict[str, Any] = {key_names.get(k, k): label(k, v) for k, v in zip(keys, key)}
        row["n"] = int(by_metric["n"].iloc[0])
        for metric, title in metrics.items():
            m = by_metric.loc[metric]
            ci = f"{confidence * 100:g} % CI, {METHODS[m['method']]}"
            row[f"{title}: mean (sd; {ci})"] = cell(m, digits.get(metric, 0))
        if outliers is not None:
            row["outlier runs"] = int(outliers.get(key if len(key) > 1 else key[0], 0))
        rows.append(row)
    return pd.DataFrame(rows)


def design_table(spec, experiment) -> pd.DataFrame:
    """The params file's design: each variable with every value its grids give it (varied,
    set, or the base value where a grid leaves it alone), and the grids that vary it."""
    rows = []
    for name in experiment.variables:
        values, grids, sets = [], [], []
        for grid, body in spec.grids.items():
            if name in body["vary"]:
                values += body["vary"][name]
                grids.append(grid)
            else:  # this grid holds the variable at its set or base value
                values.append(body.get("set", {}).get(name, spec.base[name]))
                if name in body.get("set", {}):
                    sets.append(grid)
        values = list(dict.fromkeys(values))
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            values.sort()
        rows.append({"variable": experiment.variable_labels.get(name, name),
                     "values": ", ".join(experiment.describe(name, v) for v in values),
                     "varied in": ", ".join(grids + [f"{g} (set)" for g in sets])
                                  or "(base value)"})
    return pd.DataFrame(rows)


def residual_table(res: pd.DataFrame, rows: Sequence[str], column: str,
                   row_name: Callable[..., str], column_name: Callable[[Any], str],
                   row_title: str) -> pd.DataFrame:
    """A model's residuals (``residual``: measured / model - 1, ``fitted``: the fitting point)
    as a table: one row per value of ``rows`` (named by ``row_name(*values)`` under
    ``row_title``), one column per value of ``column`` (named by ``column_name``), each cell
    the residual as a signed percentage, or "fit" for the point the model was fitted to."""
    cells = res.assign(cell=[("fit" if f else fmt_pct(r * 100))
                             for r, f in zip(res["residual"], res["fitted"])])
    table = cells.pivot(index=list(rows), columns=column, values="cell").fillna("")
    table.columns = [column_name(c) for c in table.columns]
    keys = table.index.to_frame(index=False)
    table = table.reset_index(drop=True)
    table.insert(0, row_title, [row_name(*values) for values in keys.itertuples(index=False)])
    return table


def estimate_texts(row: pd.Series | None, key: str,
                   describe: Callable[[dict[str, Any]], str], variables: Sequence[str],
                   confidence: float = 0.95) -> dict[str, str]:
    """Glue texts of a confirmed point (a row of
    ``iolab.analysis.confirmation.confirmed_points``) under ``<key>_conf...``: the mean, n,
    interval, the change from the search with its interval, and the point in words; none
    for no row."""
    if row is None:
        return {}
    return {f"{key}_conf": fmt_int(row["mean"]), f"{key}_conf_n": str(int(row["n"])),
            f"{key}_conf_ci": fmt_range(row["ci_low"], row["ci_high"]),
            f"{key}_conf_change": (f"{row['pct']:+.1f} % ({confidence * 100:g} % CI "
                                   f"{row['pct_low']:+.1f} to {row['pct_high']:+.1f})"),
            f"{key}_conf_point": describe({k: row[k] for k in variables if k in row})}
