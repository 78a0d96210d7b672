"""Many comparisons at once: Holm's step-down correction of a family's p-values.

A chapter that tests a family of differences (the IRQ modes and placements, the SMT/THP
grid) would, at 5 % each, call about one in twenty of the equal pairs different. Holm (1979)
controls the family-wise error rate at the chosen level without assuming independence: the
m p-values sorted ascending, the i-th (from 1) is multiplied by m − i + 1, and each adjusted
value is the running maximum of those products, capped at 1. A difference is significant
after correction when its adjusted p-value is below the level.

Responsible for: the adjustment and the verdicts. Not responsible for: the tests that give
the p-values (``iolab.analysis.stats``).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from iolab.analysis import noise

METHOD = "Holm's step-down correction of the family-wise error rate"


def holm(pvalues: list[float]) -> list[float]:
    """The Holm-adjusted p-values, in the order given; a NaN stays NaN and is not counted in
    the family."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    m = len(present)
    out = [math.nan] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def verdicts(pvalues: list[float], level: float = 0.05) -> list[str]:
    """Per comparison: 'significant', 'not significant' (after Holm) or 'undefined'."""
    return ["undefined" if math.isnan(p) else "significant" if p < level else
            "not significant" for p in holm(pvalues)]


def family(rows: list[dict[str, Any]], confidence: float = 0.95) -> pd.DataFrame:
    """A family of comparisons (each row with ``comparison``, ``pct`` and ``p``) with the
    Holm-adjusted ``p_holm`` and the ``verdict`` after correction at 1 − ``confidence``."""
    table = pd.DataFrame(rows, columns=["comparison", "pct", "p"])
    table["p_holm"] = holm(table["p"].tolist())
    table["verdict"] = verdicts(table["p"].tolist(), 1 - confidence)
    return table


def family_text(table: pd.DataFrame, what: str, floor: float | None = None) -> str:
    """The family's outcome in words: how many ``what`` (e.g. 'comparisons of mean IOPS'),
    which stay significant after the correction, and, given the campaign's noise ``floor``
    (relative, :mod:`iolab.analysis.noise`), how many differences are smaller than it."""
    if table.empty:
        return f"no {what} could be made here"
    kept = table[table["verdict"] == "significant"]
    n = len(table)
    if kept.empty:
        text = (f"none of the {n} {what} is significant after Holm's correction for testing "
                "them together")
    else:
        which = "; ".join(f"{r.comparison} ({r.pct:+.1f} %, adjusted p {r.p_holm:.3f})"
                          for r in kept.itertuples())
        text = (f"after Holm's correction for testing the {n} {what} together, {len(kept)} "
                f"remain{'s' if len(kept) == 1 else ''} significant: {which}")
    if floor is None or floor != floor:
        return text
    # a significant difference stands on its own points' spread, whatever the pooled floor
    below = sum(noise.inside(r.pct / 100, floor) for r in table.itertuples()
                if r.verdict == "not significant")
    others = "of them" if kept.empty else f"of the other {n - len(kept)}"
    return (text + f"; {others}, {below} {'is' if below == 1 else 'are'} smaller than this "
            f"campaign's noise floor of {floor * 100:.1f} %: not distinguishable on this machine")
