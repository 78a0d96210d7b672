"""Published values from other work (``<data>/reference/<name>.yaml`` and its table).

A chapter shows published numbers beside its measurements, always labelled as published.
They are read from the data folder the notebook was given, like every other input.

The registry (``<data>/reference/registry.yaml``, :func:`registry`) lists every reference
value the book sets a measurement against, with what it measures (payload or total traffic,
one way or both ways, on which path) and where in the folder its value is kept; :func:`like`
says whether a measurement and a reference are like with like, and why not.

Responsible for: reading a reference and its table, the registry, and like-with-like. Not
responsible for: comparing numbers (the experiment's analysis does) or what the values mean
(the YAML files say where they come from).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from iolab.errors import InputError

REGISTRY = "registry.yaml"
KIND = ("quantity", "direction", "path")
ENTRY_KEYS = ("value", "unit", *KIND, "source", "location")


@dataclass(frozen=True)
class Entry:
    """One registered reference value: what it measures, its source and its location."""
    id: str
    value: float
    unit: str
    quantity: str
    direction: str
    path: str
    source: str
    location: str

    def kind(self) -> dict[str, str]:
        return {key: getattr(self, key) for key in KIND}


@dataclass
class Reference:
    meta: dict[str, Any]   # the YAML: source, statistic, scalar values, columns
    table: pd.DataFrame    # one row per published value
    path: Path


def load(data_dir: Path, name: str) -> Reference | None:
    """The reference ``name`` in ``data_dir/reference/``, or None when that folder lacks it."""
    path = Path(data_dir) / "reference" / f"{name}.yaml"
    if not path.exists():
        return None
    try:
        meta = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(path, None, f"malformed YAML: {exc}") from exc
    if not isinstance(meta, dict) or "source" not in meta or "table" not in meta:
        raise InputError(path, "source", "a reference names its source and its table",
                         allowed="a mapping with 'source' and 'table' (a CSV file beside it)")
    table = path.parent / meta["table"]
    if not table.exists():
        raise InputError(path, "table", f"{table} does not exist")
    return Reference(meta, pd.read_csv(table), path)


def registry(data_dir: Path) -> dict[str, Entry]:
    """The registered reference values of ``data_dir/reference/registry.yaml``, by id."""
    path = Path(data_dir) / "reference" / REGISTRY
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(path, None, f"malformed YAML: {exc}") from exc
    values = doc.get("values") if isinstance(doc, dict) else None
    if not isinstance(values, dict):
        raise InputError(path, "values", "the registry lists its values under 'values'",
                         allowed="a mapping of id -> " + ", ".join(ENTRY_KEYS))
    out = {}
    for key, item in values.items():
        missing = [k for k in ENTRY_KEYS if not isinstance(item, dict) or k not in item]
        if missing:
            raise InputError(path, f"values.{key}.{missing[0]}", "each value says it",
                             allowed=", ".join(ENTRY_KEYS))
        out[key] = Entry(key, float(item["value"]), str(item["unit"]),
                         *(str(item[k]) for k in KIND), str(item["source"]),
                         str(item["location"]))
    return out


def stored_value(data_dir: Path, entry: Entry) -> float:
    """The value kept at ``entry.location``: ``file.yaml#a.b`` (a key of the YAML, dotted for
    nested ones) or ``file.csv#column@key=value`` (the cell of the row whose key column holds
    that value)."""
    name, _, where = entry.location.partition("#")
    path = Path(data_dir) / "reference" / name
    if name.endswith(".csv"):
        column, _, row = where.partition("@")
        key, _, value = row.partition("=")
        table = pd.read_csv(path)
        return float(table.loc[table[key].astype(str) == value, column].iloc[0])
    node: Any = yaml.safe_load(path.read_text())
    for part in where.split("."):
        node = node[part]
    return float(node)


def like(measured: dict[str, str], entry: Entry) -> str:
    """"" when a measurement of kind ``measured`` (quantity, direction, path) and the
    reference ``entry`` are like with like; otherwise why not, in words."""
    apart = [f"{key}: {measured.get(key)} here, {getattr(entry, key)} in the reference"
             for key in KIND if measured.get(key) != getattr(entry, key)]
    return "; ".join(apart)
