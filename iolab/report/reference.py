"""Published values from other work (``<data>/reference/<name>.yaml`` and its table).

A chapter shows published numbers beside its measurements, always labelled as published.
They are read from the data folder the notebook was given, like every other input.

Responsible for: reading a reference and its table. Not responsible for: comparing (the
experiment's analysis does) or what the values mean (the YAML file says where they come from).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from iolab.errors import InputError


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
