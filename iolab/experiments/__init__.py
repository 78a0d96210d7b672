"""The registry of experiments: every package in this folder that defines ``EXPERIMENT``.

Adding an experiment means adding its package here (``<name>/__init__.py`` with an
:class:`~iolab.experiments.base.Experiment` instance named ``EXPERIMENT``), its notebook, its
params files and one line in ``_toc.yml``; nothing else names it. The CLI, ``iolab book``,
``make clean`` and the tests take the list from :func:`all_experiments`.

Experiments kept outside this package (a user's own, or the tests' example) are registered
by naming their modules in ``$IOLAB_EXPERIMENTS`` (comma-separated, importable from
``sys.path``); each module defines ``EXPERIMENT`` and says where its notebook and params are.

Responsible for: discovering experiments and finding one by name. Not responsible for: what
an experiment does (``base``) or campaigns that were imported rather than run
(``iolab.importers``).
"""

from __future__ import annotations

import importlib
import os
import pkgutil

from iolab.errors import InputError
from iolab.experiments.base import Experiment

EXTRA = "IOLAB_EXPERIMENTS"
_REGISTRY: dict[str, Experiment] = {}


def _extra_modules() -> list[str]:
    return [m.strip() for m in os.environ.get(EXTRA, "").split(",") if m.strip()]


def _discover() -> dict[str, Experiment]:
    if _REGISTRY:
        return _REGISTRY
    found: dict[str, Experiment] = {}
    # an error in a package of ours is a bug to see as it is; one in a module named in the
    # environment variable is the user's to fix, and says where it came from
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            _add(found, importlib.import_module(f"{__name__}.{info.name}"), None)
    for name in _extra_modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise InputError(f"${EXTRA}", name, f"cannot import it: {exc}",
                             allowed="module names importable from sys.path, "
                                     "comma-separated") from None
        _add(found, module, name)
    # filled only once everything was found: a failure leaves no partial registry behind
    _REGISTRY.update(found)
    return _REGISTRY


def _add(found: dict[str, Experiment], module, extra: str | None) -> None:
    experiment = getattr(module, "EXPERIMENT", None)
    if isinstance(experiment, Experiment):
        found[experiment.name] = experiment
    elif extra is not None:
        raise InputError(f"${EXTRA}", extra, "defines no EXPERIMENT (an instance of "
                         "iolab.experiments.base.Experiment)")


def all_experiments() -> list[Experiment]:
    return [_discover()[name] for name in sorted(_discover())]


def names() -> list[str]:
    return sorted(_discover())


def get(name: str) -> Experiment:
    try:
        return _discover()[name]
    except KeyError:
        raise InputError(None, "experiment", f"unknown experiment '{name}'",
                         allowed=", ".join(names())) from None


def reload() -> None:
    """Discover again (after ``$IOLAB_EXPERIMENTS`` changed)."""
    _REGISTRY.clear()
