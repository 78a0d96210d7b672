"""Where an import goes, and which of the archive's benchmarks it takes.

An import goes into a campaign of its own (``aisio-<name>``, tidied by
:mod:`iolab.importers.aisio`), which takes every benchmark, or into a registered experiment
that declares the AiSIO benchmark kinds (``aisio_kinds``) and back ends
(``aisio_backends``) it takes.

Responsible for: finding the target by name, refusing one that cannot take AiSIO's runs,
and leaving out (with a note) the repetitions it does not take.
Not responsible for: the experiment registry (:mod:`iolab.core.registry`) or opening the
target's store (:func:`iolab.core.store.open_store`).
"""

from __future__ import annotations

from typing import Any

from iolab.core import registry
from iolab.errors import InputError
from iolab.importers import aisio as exp
from iolab.importers.cijoe.archive import Archive
from iolab.importers.cijoe.pairing import Repetition
from iolab.importers.cijoe.params import command_params
from iolab.importers.cijoe.report import ImportReport


def import_target(experiment: str) -> Any:
    """Where an import goes: a campaign of its own (``aisio-<name>``), or a registered
    experiment that declares which AiSIO benchmark kinds it takes (``aisio_kinds``)."""
    if experiment.startswith(exp.PREFIX):
        return exp.ImportedCampaign(experiment)
    takers = [e.name for e in registry.all_experiments() if getattr(e, "aisio_kinds", ())]
    allowed = f"{exp.PREFIX}<name>, or one of {', '.join(takers)}"
    if experiment not in registry.names():
        raise InputError(None, "experiment", f"unknown experiment {experiment!r}: imported "
                         f"campaigns are named '{exp.PREFIX}<name>' or go into an experiment "
                         "that takes AiSIO's runs", allowed=allowed)
    target = registry.get(experiment)
    if not getattr(target, "aisio_kinds", ()):
        raise InputError(None, "experiment", f"{experiment} cannot take runs imported from "
                         "AiSIO's archives", allowed=allowed)
    return target


def taken_repetitions(reps: list[Repetition], target: Any, arc: Archive,
                      report: ImportReport) -> list[Repetition]:
    """The repetitions of the benchmark kinds and back ends the target takes (every one for
    a campaign of its own); each left out is noted."""
    kinds = getattr(target, "aisio_kinds", None)
    backends = getattr(target, "aisio_backends", None)
    taken = []
    for rep in reps:
        if kinds is not None and rep.bench.kind not in kinds:
            report.notes.append(f"{rep.bench.path}: a '{rep.bench.kind}' benchmark, which "
                                f"{report.experiment} does not take ({', '.join(kinds)}); "
                                "not imported")
            continue
        backend = command_params(rep.bench, arc.name)["backend"]
        if backends is not None and backend not in backends:
            report.notes.append(f"{rep.bench.path}: back end {backend!r}, which "
                                f"{report.experiment} does not take ({', '.join(backends)}); "
                                "not imported")
            continue
        taken.append(rep)
    return taken
