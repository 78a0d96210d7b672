"""The registry of experiments: every package in ``iolab/experiments/`` that defines
``EXPERIMENT``, found by name when a command, a chapter or a campaign asks for one.

Experiments are plugins: they sit above everything else in the package and are imported here
by name at run time (the only dynamic import of them, held by ``tests/test_layout.py``), so the
layers below depend on the interface (:mod:`iolab.core.experiment`) and never on an
experiment. Adding an experiment means adding its package to ``iolab/experiments/``
(``<name>/__init__.py`` with an :class:`~iolab.core.experiment.Experiment` instance named
``EXPERIMENT``), its notebook, its params files and its entry in ``_toc.yml``
(``iolab new-experiment`` writes them); nothing else names it. The CLI, ``iolab book`` and the
tests take the list from :func:`all_experiments`.

Experiments kept outside this package (a user's own, or the tests' example) are registered
by naming their modules in ``$IOLAB_EXPERIMENTS`` (comma-separated, importable from
``sys.path``); each module defines ``EXPERIMENT`` and says where its notebook and params are.
Its name must be its own: one that another experiment (the package's own or another module's)
has is refused, naming both modules, since the name is the store's folder and the params'
file name, and the later one would silently take the earlier one's campaigns.

Responsible for: discovering experiments, finding one by name, and finding a module of an
experiment's package by name (:func:`part`: its page, its page's ``findings``). Not responsible for: what an experiment does (:mod:`iolab.core.experiment`)
or campaigns that were imported rather than run (``iolab.importers``).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from iolab.core.experiment import Experiment
from iolab.errors import InputError

if TYPE_CHECKING:
    from iolab.analysis.findings import Finding

EXTRA = "IOLAB_EXPERIMENTS"
PACKAGE = "iolab.experiments"  # the folder of the package's own experiments
_REGISTRY: dict[str, Experiment] = {}


def _extra_modules() -> list[str]:
    return [m.strip() for m in os.environ.get(EXTRA, "").split(",") if m.strip()]


def _discover() -> dict[str, Experiment]:
    if _REGISTRY:
        return _REGISTRY
    found: dict[str, Experiment] = {}
    modules: dict[str, str] = {}  # experiment name -> the module that defines it
    # an error in a package of ours is a bug to see as it is; one in a module named in the
    # environment variable is the user's to fix, and says where it came from
    package = importlib.import_module(PACKAGE)
    for info in pkgutil.iter_modules(package.__path__):
        if info.ispkg:
            _add(found, modules, importlib.import_module(f"{PACKAGE}.{info.name}"), None)
    for name in _extra_modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise InputError(f"${EXTRA}", name, f"cannot import it: {exc}",
                             allowed="module names importable from sys.path, "
                                     "comma-separated") from None
        _add(found, modules, module, name)
    # filled only once everything was found: a failure leaves no partial registry behind
    _REGISTRY.update(found)
    return _REGISTRY


def _add(found: dict[str, Experiment], modules: dict[str, str], module,
         extra: str | None) -> None:
    experiment = getattr(module, "EXPERIMENT", None)
    if isinstance(experiment, Experiment):
        before = found.get(experiment.name)
        if before is not None and before is not experiment:
            # the name is the store's folder (raw/<name>/) and its params' file name: the
            # later one would plan, store and read the earlier one's runs as its own
            raise InputError(f"${EXTRA}" if extra else PACKAGE, extra or module.__name__,
                             f"defines the experiment '{experiment.name}', which "
                             f"{modules[experiment.name]} defines already",
                             allowed="a name no other experiment has")
        found[experiment.name] = experiment
        modules[experiment.name] = module.__name__
    elif extra is not None:
        raise InputError(f"${EXTRA}", extra, "defines no EXPERIMENT (an instance of "
                         "iolab.core.experiment.Experiment)")


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


def part(experiment: Experiment, name: str = "page") -> ModuleType:
    """A module of an experiment's package by name (``page``: its chapter's sections;
    ``adaptive``: the CPU search's adaptive sections, ...); an error naming what it has."""
    package = type(experiment).__module__
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.{name}":
            raise  # a module the part itself imports is missing: a bug to see as it is
        raise InputError(f"experiment {experiment.name}", "part", f"no module '{name}'",
                         allowed="the modules of its package, e.g. page") from None


def findings_function(experiment: Experiment) -> Callable[[Any], list[Finding]]:
    """The ``findings(chapter)`` of an experiment's page module; an error naming the
    experiment where it has none (a lab-only chapter computes no findings from runs)."""
    try:
        page = part(experiment)
    except InputError:
        page = None
    if page is None or not hasattr(page, "findings"):
        raise InputError(f"experiment {experiment.name}", "findings",
                         "its chapter computes no findings from runs to compare",
                         allowed="an experiment whose page module has findings(chapter)")
    return page.findings
