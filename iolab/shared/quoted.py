"""The published points a GPU chapter quotes, read from its reference rather than its code.

A reference YAML (:mod:`iolab.report.reference`) may list under ``quoted:`` the points of its
table that the chapter's text quotes, each under the name the chapter glues it as, mapped to
the coordinates of one row of the table (its axis columns, within the rows of one ``kind``);
``compared:`` (and ``compared_from:``) name which of them the chapter sets its model against.
The chapter reads the values and the coordinates from there, so a change of the published
grid is a change of data: a point its table lacks is one error naming the file and the key,
never a ``KeyError`` in a page.

Responsible for: checking those mappings against the table and returning each point.
Not responsible for: reading the files (:mod:`iolab.report.reference`) or how a value is
worded and formatted (the chapter's page).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from iolab.errors import InputError
from iolab.report.reference import Reference


@dataclass(frozen=True)
class Point:
    """One quoted value of the published table and where in its grid it lies."""
    key: str
    at: dict[str, int]
    value: float


def points(ref: Reference, kind: str, axes: tuple[str, ...]) -> dict[str, Point]:
    """Every point the reference's ``quoted:`` lists, in its order, checked against the rows of
    ``kind`` in its table (each names exactly ``axes``, whole numbers, and one row)."""
    declared = ref.meta.get("quoted", {})
    if not isinstance(declared, dict):
        raise InputError(ref.path, "quoted", f"is {type(declared).__name__}",
                         allowed="a mapping of glue names to points of the table")
    rows = ref.table[ref.table["kind"] == kind]
    return {str(key): _point(ref, str(key), at, rows, kind, axes)
            for key, at in declared.items()}


def named(ref: Reference, role: str, quoted: dict[str, Point]) -> Point:
    """The quoted point the reference's ``role`` key (``compared``, ``compared_from``) names."""
    key = ref.meta.get(role)
    if not isinstance(key, str) or key not in quoted:
        raise InputError(ref.path, role, f"is {key!r}",
                         allowed="one of the names under 'quoted': " + ", ".join(quoted))
    return quoted[key]


def value_at(ref: Reference, kind: str, at: dict[str, int]) -> float | None:
    """The table's value of ``kind`` at ``at``, or None when it publishes none there."""
    rows = _matching(ref.table[ref.table["kind"] == kind], at)
    return float(rows["value"].iloc[0]) if len(rows) == 1 else None


def _point(ref: Reference, key: str, at: object, rows: pd.DataFrame, kind: str,
           axes: tuple[str, ...]) -> Point:
    allowed = "a mapping of " + ", ".join(axes) + " to whole numbers"
    if (not isinstance(at, dict) or set(at) != set(axes)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in at.values())):
        raise InputError(ref.path, f"quoted.{key}", f"is {at!r}", allowed=allowed)
    match = _matching(rows, at)
    if len(match) != 1:
        raise InputError(ref.path, f"quoted.{key}",
                         f"names {len(match)} rows of kind {kind} in its table, not one",
                         allowed=f"the coordinates of one {kind} row of {ref.meta['table']}")
    return Point(key, {a: at[a] for a in axes}, float(match["value"].iloc[0]))


def _matching(rows: pd.DataFrame, at: dict[str, int]) -> pd.DataFrame:
    for axis, value in at.items():
        if axis not in rows.columns:
            return rows.iloc[0:0]
        rows = rows[rows[axis] == value]
    return rows
