"""Registry of experiments: the name of each notebook mapped to the module that knows its tool.

An experiment module defines:

- ``NAME`` and ``KNOB_VARIABLES`` (variable -> knob name);
- ``tool(settings) -> iolab.tools.Tool``: the tool and driver for this spec (an experiment may
  use bdevperf on one environment and fio on another);
- ``collectors(settings, params, topology)``: collectors to run around one run;
- ``build_argv(settings, params, topology)``: the driver's argv, run inside the run folder;
- ``parse_run(run_dir)``: metrics of a stored run, a pure function of its files; a non-empty
  ``run_problem`` in the result rejects the run (e.g. fio's error field, bdevperf's Fail/s),
  and a ``note`` is shown to the user once per campaign (e.g. a fallback the parser took);

and optionally:

- ``knob_value(variable, value)``: the knob setting for a variable's value (default: the value);
- ``prepare(run_dir, settings, params, topology)``: write input files (e.g. a tool config) into
  the run folder before the driver starts, so they are stored with the run;
- ``host_block(settings, params, topology) -> str | None``: why this host cannot run a point
  (e.g. more cores than it has), making the point *blocked* in the plan;
- ``campaign_knobs(settings) -> {knob: value}``: knobs set once for the whole campaign (e.g.
  binding devices to a user-space driver) and restored at its end.
"""

from __future__ import annotations

from types import ModuleType

from ..errors import InputError
from . import aisio_import, cpu_search, smt_thp

EXPERIMENTS: dict[str, ModuleType] = {m.NAME: m for m in (cpu_search, smt_thp)}


def get(name: str) -> ModuleType:
    # Campaigns imported from AiSIO archives are named aisio-<name>; one module parses them all.
    if name.startswith(aisio_import.PREFIX):
        return aisio_import
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise InputError(None, "experiment", f"unknown experiment '{name}'",
                         allowed=", ".join(sorted(EXPERIMENTS))) from None
