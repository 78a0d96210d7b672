"""Published values from other work (``<data>/reference/<name>.yaml`` and its table).

A chapter shows published numbers beside its measurements, always labelled as published.
They are read from the data folder the notebook was given, like every other input.

A reference's files are the data folder's own: each is read only when it is a regular file
in ``<data>/reference/`` itself (a YAML's ``table:`` and a registry ``location:`` name a file
there, never a path), never through a link, never from a FIFO or a device, and only up to
:data:`FILE_MOST` bytes (:func:`_read`). Its YAML is read as all of iolab's is
(:mod:`iolab.yamlfile`): a key given twice is refused naming both lines, and aliases that
repeat more than a bounded number of values are refused before anything walks them.

The registry (``<data>/reference/registry.yaml``, :func:`registry`) lists every reference
value the book sets a measurement against, with what it measures (payload or total traffic,
one way or both ways, on which path) and where in the folder its value is kept; :func:`like`
says whether a measurement and a reference are like with like, and why not.

Responsible for: reading a reference and its table, the registry, and like-with-like.
Not responsible for: comparing numbers (the experiment's analysis does) or what the values
mean (the YAML files say where they come from).
"""

from __future__ import annotations

import io
import math
import numbers
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from iolab.errors import InputError, excerpt
from iolab.safefiles import read_regular
from iolab.yamlfile import parse_bytes

REGISTRY = "registry.yaml"
KIND = ("quantity", "direction", "path")
ENTRY_KEYS = ("value", "unit", *KIND, "source", "location")
FILE_MOST = 16 << 20  # bytes of one reference file: the published tables are a few kB
# a number written as text: ASCII digits, a sign, a point, an exponent, nothing around them
_DECIMAL_TEXT = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_ROLE = "a reference's published values"
_NAME_ALLOWED = "the name of a file beside it in the same folder (no '/', not '.' or '..')"


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
    raw = _read(path)
    if raw is None:
        return None
    meta = _yaml(path, raw)
    if not isinstance(meta, dict) or "source" not in meta or "table" not in meta:
        raise InputError(path, "source", "a reference names its source and its table",
                         allowed="a mapping with 'source' and 'table' (a CSV file beside it)")
    table = path.parent / _file_name(path, "table", meta["table"])
    raw_table = _read(table)
    if raw_table is None:
        raise InputError(path, "table", f"{table} does not exist")
    return Reference(meta, pd.read_csv(io.BytesIO(raw_table)), path)


def registry(data_dir: Path, missing_ok: bool = False) -> dict[str, Entry]:
    """The registered reference values of ``data_dir/reference/registry.yaml``, by id;
    ``missing_ok``: none (an empty registry) when nothing is at that name. Anything else
    there, a link to nowhere included, is refused (NotOurs), never taken for none."""
    path = Path(data_dir) / "reference" / REGISTRY
    raw = _read(path)
    if raw is None and missing_ok:
        return {}
    if raw is None:
        raise FileNotFoundError(2, "no reference registry", str(path))
    doc = _yaml(path, raw)
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
        value = _number(path, f"values.{key}.value", item["value"])
        out[key] = Entry(key, value, *(_text(path, f"values.{key}.{k}", item[k])
                                       for k in ENTRY_KEYS[1:]))
    return out


def stored_value(data_dir: Path, entry: Entry) -> float:
    """The value kept at ``entry.location``: ``file.yaml#a.b`` (a key of the YAML, dotted for
    nested ones) or ``file.csv#column@key=value`` (the cell of the row whose key column holds
    that value)."""
    name, _, where = entry.location.partition("#")
    folder = Path(data_dir) / "reference"
    path = folder / _file_name(folder / REGISTRY, f"values.{entry.id}.location", name)
    raw = _read(path)
    if raw is None:
        raise InputError(folder / REGISTRY, f"values.{entry.id}.location",
                         f"{path} does not exist")
    place = f"values.{entry.id}.location"
    if name.endswith(".csv"):
        column, _, row = where.partition("@")
        key, _, value = row.partition("=")
        try:
            table = pd.read_csv(io.BytesIO(raw))
        except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
            raise InputError(path, None, f"not a CSV table: {excerpt(str(exc))}") from None
        if column not in table.columns or key not in table.columns:
            raise InputError(folder / REGISTRY, place, f"{name} has no column "
                             f"{excerpt(column if column not in table.columns else key)}",
                             allowed=_LOCATION_ALLOWED)
        cells = table.loc[table[key].astype(str) == value, column]
        if len(cells) != 1:
            raise InputError(folder / REGISTRY, place, f"{name} has {len(cells)} rows whose "
                             f"{excerpt(key)} is {excerpt(value)}, not one",
                             allowed=_LOCATION_ALLOWED)
        return _number(path, f"{column}@{key}={value}", cells.iloc[0])
    node: Any = _yaml(path, raw)
    for depth, part in enumerate(where.split(".")):
        if not isinstance(node, dict) or part not in node:
            raise InputError(folder / REGISTRY, place, f"{name} has no key "
                             f"{excerpt('.'.join(where.split('.')[:depth + 1]))}",
                             allowed=_LOCATION_ALLOWED)
        node = node[part]
    return _number(path, where, node)


_LOCATION_ALLOWED = ("file.yaml#key.subkey (a key of the YAML) or file.csv#column@key=value (the "
                     "cell of the one row whose key column holds that value)")


def like(measured: dict[str, str], entry: Entry) -> str:
    """"" when a measurement of kind ``measured`` (quantity, direction, path) and the
    reference ``entry`` are like with like; otherwise why not, in words."""
    apart = [f"{key}: {measured.get(key)} here, {getattr(entry, key)} in the reference"
             for key in KIND if measured.get(key) != getattr(entry, key)]
    return "; ".join(apart)


def _read(path: Path) -> bytes | None:
    """The bytes of the reference file ``path``, None when nothing is there; NotOurs for a
    link, a FIFO, a device or a folder (never followed, never a read that blocks), TooLarge
    for a file of more than :data:`FILE_MOST` bytes."""
    return read_regular(path, _ROLE, FILE_MOST)


def _yaml(path: Path, raw: bytes) -> Any:
    """The YAML of the reference file ``path`` as iolab reads every YAML (no key given twice,
    aliases bounded: :mod:`iolab.yamlfile`); InputError naming the file otherwise."""
    return parse_bytes(path, raw)


def _text(path: Path, key: str, value: Any) -> str:
    """``value``, a registry entry's text; InputError naming ``path`` and ``key`` for a
    list, a mapping or anything else that is not text or a number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(path, key, f"{excerpt(value)} is not text", allowed="text")
    return str(value)


def _file_name(path: Path, key: str, name: Any) -> str:
    """``name`` when it names a file beside ``path`` (in the reference folder itself);
    InputError naming ``path`` and ``key`` for anything else: an absolute path or a ``..``
    would read any file on the host into a chapter."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name \
            or "\\" in name or "\0" in name:
        raise InputError(path, key, f"{excerpt(name)} is not a file of the reference folder",
                         allowed=_NAME_ALLOWED)
    return name


def _number(path: Path, key: str, value: Any) -> float:
    """``value`` as a finite float; InputError naming ``path`` and ``key`` otherwise. A
    number written as text (quoted in the YAML, a CSV cell of a column with text in it) is
    read only in ASCII decimals (:data:`_DECIMAL_TEXT`): ``float`` also takes any script's
    digits ('٥٦.١٣٥'), '1_000' and blanks around it, which no published value is written in."""
    number = math.nan  # a bool (YAML's yes) is not a published value
    if isinstance(value, str):
        if _DECIMAL_TEXT.fullmatch(value):
            number = float(value)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            pass
    if not math.isfinite(number):
        raise InputError(path, key, f"{excerpt(value)} is not a number",
                         allowed="a finite number (the published value, in its unit)")
    return number
