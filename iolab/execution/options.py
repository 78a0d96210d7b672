"""The options a caller chooses about one execution of a campaign, defined once.

:class:`RunOptions` is what the runner takes. Each of its fields that a user chooses carries,
in its metadata, a :class:`Choice`: its command-line flag, its help, its kind and the commands
that offer it. Everything else that lists the run options derives from that one definition:

* the flags of ``iolab plan``, ``iolab run``, ``iolab replicate``, ``iolab notebook`` and
  ``iolab submit`` (:func:`add_flags`), read back as the options given (:func:`given`);
* a notebook's ``run_options``, the papermill parameter that ``iolab notebook`` (and so a
  batch job) passes to its chapter's run step: the options of ``iolab notebook``
  (:func:`names`, checked by :func:`check`);
* the ``iolab notebook`` command line of a batch job's script (:func:`argv`) and the options
  its job record keeps (:func:`recorded`).

So a new option is one new field here, with its :func:`choice`; a field without one
(``knobs``, ``journal_path``, ``show_plan``: tests and the CLI's own printing) is offered by
no command. ``tests/test_options.py`` adds one and follows it to the runner.

Responsible for: that definition and what is derived from it. Not responsible for: what an
option does (``iolab.execution.runner``), nor checking a value against a campaign (a
``--where`` against its variables: ``iolab.core.spec``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from iolab.core.planner import MAX_RUNS, Plan
from iolab.errors import InputError

COMMANDS = ("plan", "run", "replicate", "notebook", "submit")
# flag: a switch that sets True; off: a switch (--no-...) that sets False; count: a whole
# number (the CLI's integer type); list: repeatable, each one item
KINDS = ("flag", "off", "count", "list")
ALL = ("plan", "run", "notebook", "submit")  # every command that selects runs
RUNNING = ("run", "notebook", "submit")  # every way a campaign is run by a user


@dataclass(frozen=True)
class Choice:
    """How a user chooses one option: its flag, its help, its kind (:data:`KINDS`) and the
    commands (:data:`COMMANDS`) that offer it. The notebook's ``run_options`` take those of
    ``notebook``; a batch job's script can only pass on what ``iolab notebook`` takes."""

    flag: str
    help: str
    commands: tuple[str, ...]
    kind: str = "flag"
    metavar: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.flag}: kind {self.kind!r}, not one of {KINDS}")
        if "submit" in self.commands and "notebook" not in self.commands:
            raise ValueError(f"option {self.flag}: a batch job runs 'iolab notebook', so an "
                             "option of 'submit' must be one of 'notebook' too")


def choice(default: Any, flag: str, help: str, commands: tuple[str, ...], *,
           kind: str = "flag", metavar: str | None = None) -> Any:
    """A :class:`RunOptions` field that a user chooses with ``flag``."""
    return field(default=default, metadata={"choice": Choice(flag, help, tuple(commands), kind,
                                                             metavar)})


@dataclass(frozen=True)
class RunOptions:
    """What the caller chooses about one execution of a campaign: the CLI's flags, a
    notebook's ``run_options``, a batch job's. ``where`` and ``limit`` select runs of the plan;
    ``knobs`` and ``journal_path`` replace the host's (tests); ``show_plan`` is given the plan,
    made once under the locks, before anything runs."""

    where: dict[str, list[Any]] | None = choice(
        None, "--where", "only points whose variable has this value (or one of a YAML list); "
        "repeatable, all must hold", ALL, kind="list", metavar="VAR=VALUE")
    limit: int | None = choice(None, "--limit", "at most N of the runs still to do", ALL,
                               kind="count", metavar="N")
    max_runs: int = choice(MAX_RUNS, "--max-runs",
                           f"refuse a design of more than N runs (default {MAX_RUNS:,})",
                           ("plan", "run"), kind="count", metavar="N")
    keep_going: bool = choice(False, "--keep-going", "record a failing run and continue",
                              ("run", "replicate"))
    allow_host_change: bool = choice(
        False, "--allow-host-change",
        "add runs from a host whose fingerprint differs from the campaign's", RUNNING)
    progress: bool = choice(True, "--no-progress", "no progress bar", ("run", "replicate"),
                           kind="off")
    allow_shared_node: bool = choice(
        False, "--allow-shared-node", "inside a Slurm job on a node shared with other jobs, "
        "change system settings all the same (refused by default)", ("run", "notebook"))
    knobs: dict | None = None
    journal_path: Path | None = None
    show_plan: Callable[[Plan], None] | None = None


def choices(command: str) -> dict[str, Choice]:
    """The options ``command`` offers, by field name, in the definition's order."""
    if command not in COMMANDS:
        raise ValueError(f"no command {command!r}: one of {', '.join(COMMANDS)}")
    return {f.name: f.metadata["choice"] for f in dataclasses.fields(RunOptions)
            if "choice" in f.metadata and command in f.metadata["choice"].commands}


def names(command: str = "notebook") -> tuple[str, ...]:
    """The names of the options ``command`` offers: for ``notebook``, the keys a notebook's
    ``run_options`` may hold."""
    return tuple(choices(command))


def _cli_default(name: str, kind: str) -> Any:
    """What the command line holds for an option not given."""
    if kind == "list":
        return []
    if kind == "flag":
        return False
    return _field_default(name)


def _field_default(name: str) -> Any:
    return next(f.default for f in dataclasses.fields(RunOptions) if f.name == name)


def add_flags(parser: Any, command: str, *, int_type: Callable[[str], int] = int,
              note: str = "") -> None:
    """Add ``command``'s options to an argparse ``parser`` (``int_type``: the type of a
    count; ``note``: put before each help, e.g. "with --mode run: ")."""
    for name, c in choices(command).items():
        kwargs: dict[str, Any] = {"dest": name, "help": note + c.help}
        if c.kind == "flag":
            kwargs["action"] = "store_true"
        elif c.kind == "off":
            kwargs["action"] = "store_false"
        elif c.kind == "list":
            kwargs.update(action="append", default=[], metavar=c.metavar)
        else:
            kwargs.update(type=int_type, default=_field_default(name), metavar=c.metavar)
        parser.add_argument(c.flag, **kwargs)


def given(values: Any, command: str) -> dict[str, Any]:
    """The options of ``command`` that ``values`` (parsed arguments, or a mapping) sets to
    other than what an option not given holds, by name."""
    get = values.get if isinstance(values, dict) else lambda n, d: getattr(values, n, d)
    out = {}
    for name, c in choices(command).items():
        default = _cli_default(name, c.kind)
        value = get(name, default)
        if c.kind == "list":
            value = list(value or [])
        if value is not None and value != default:
            out[name] = value
    return out


def flags(options: dict[str, Any], command: str = "notebook") -> list[str]:
    """The flags of the options in ``options``, as a user gives them."""
    return [c.flag for name, c in choices(command).items() if name in options]


def check(options: dict[str, Any], command: str, where: str | Path, key: str | None) -> None:
    """Refuse an option that ``command`` does not offer, naming ``where`` and ``key``."""
    unknown = sorted(set(options) - set(names(command)))
    if unknown:
        raise InputError(where, key, f"unknown option {', '.join(map(repr, unknown))}",
                         allowed=", ".join(names(command)))


def argv(options: dict[str, Any], command: str = "notebook") -> list[list[str]]:
    """The ``options`` (given ones, by name) as ``command`` takes them on its command line:
    one group for each flag, a list's items one group each."""
    check(options, command, f"iolab {command}", None)
    groups: list[list[str]] = []
    for name, c in choices(command).items():
        if name not in options:
            continue
        value = options[name]
        if c.kind == "list":
            groups += [[c.flag, str(item)] for item in value]
        elif c.kind == "count":
            groups.append([c.flag, str(value)])
        elif value == (c.kind == "flag"):  # a switch, set
            groups.append([c.flag])
    return groups


def recorded(options: dict[str, Any], command: str = "submit") -> dict[str, Any]:
    """Every option of ``command`` with its value in ``options``, or what an option not given
    holds: what a job's record keeps."""
    return {name: options.get(name, _cli_default(name, c.kind))
            for name, c in choices(command).items()}
