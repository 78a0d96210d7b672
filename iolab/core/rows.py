"""One run's row of the tidy table, from its manifest and raw files (see ``iolab.core.tidy``
for the columns).

Kept apart from the table itself so that what runs campaigns (the runner, the experiments)
does not import pandas: a campaign's start-up then stays a fraction of a second.

Responsible for: the columns every run made by this package has, and which window the
collectors are given (the tool's own, else the driver's; a tool's own outside the driver's is
another run's report: ParseError). Not responsible for: the table, its cache or its checks
(``tidy``), or reading the driver's window (``iolab.tools.base.driver_window``).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from iolab.core import tool_registry
from iolab.core.store import StoredRun
from iolab.tools.base import check_tool_window, driver_window


def _flat(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def standard_row(run: StoredRun, derive: Callable[[dict[str, Any]], dict[str, Any]],
                 variables: list[str]) -> dict[str, Any]:
    """The row of a run made by this package: see the module docstring for the columns.

    Columns come in a fixed order (variables as the experiment declares them, settings
    sorted), whatever order a manifest stored them in.
    """
    m = run.manifest
    row: dict[str, Any] = {v: m.point[v] for v in variables if v in m.point}
    row.update({k: v for k, v in m.point.items() if k not in row})
    row.update({
        "run.id": m.run_id, "run.rep": m.rep, "run.environment": m.environment,
        "run.host_fingerprint": m.host_fingerprint, "run.config": m.config_id,
        "run.tool": m.tool, "run.tool_version": m.tool_version,
        "run.driver_version": m.driver_version, "run.started_at": m.started_at,
        "run.duration_s": m.duration_s, "run.grids": ",".join(m.grids),
        "run.cpus": ",".join(map(str, m.cpus)) if m.cpus is not None else None,
    })
    if "confirm" in (m.identity or {}):  # a confirmation run: its label (iolab.core.confirm)
        row["run.confirm"] = m.identity["confirm"]
    row.update({f"config.{k}": _flat(v) for k, v in sorted(m.settings.items())})
    adapter = tool_registry.adapter(m.tool)
    row.update({f"{m.tool}.{k}": v for k, v in adapter.parse(run.path).items()})
    window, run_window = adapter.window(run.path), driver_window(run.path)
    check_tool_window(window, run_window, str(run.path))
    window = window or run_window
    for name in m.collectors:
        parsed = tool_registry.collector(name).parse(run.path, window)
        row.update({f"{name}.{k}": _flat(v) for k, v in parsed.items()})
    for name, rec in (m.knobs or {}).items():
        row[f"knob.{name}"] = _flat(rec.get("after") if isinstance(rec, dict) else rec)
    row.update(derive(row))
    return row
