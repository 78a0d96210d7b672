"""Registry of experiments: the name of each notebook mapped to the module that knows its tool.

An experiment module defines: ``NAME``, ``TOOL`` (the system tool it needs),
``TOOL_VERSION_ARGV``, ``DRIVER`` (script name under ``scripts/drivers``), ``KNOB_VARIABLES``
(variable -> knob), ``collectors()``, ``build_argv(settings, params, topology)`` (run inside the run folder) and
``parse_run(run_dir)`` (a pure function of the stored files).
"""

from __future__ import annotations

from types import ModuleType

from ..errors import InputError
from . import smt_thp

EXPERIMENTS: dict[str, ModuleType] = {smt_thp.NAME: smt_thp}


def get(name: str) -> ModuleType:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise InputError(None, "experiment", f"unknown experiment '{name}'",
                         allowed=", ".join(sorted(EXPERIMENTS))) from None
