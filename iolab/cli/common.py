"""What several verbs of the command line share: the ``--data`` option and the data folder it
names, a campaign's experiment and ``--env`` arguments, and the help that lists the
environments.

Responsible for: those options, their help texts and checks (an experiment or ``--env`` given
to choose among campaigns must choose one: :func:`check_chosen`), resolving ``--data`` to a
checked data folder, and printing a text a verb shows with its control characters escaped
(:func:`say`).
Not responsible for: any verb's own options or work (its module's in ``iolab.cli``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import sys

from iolab.core import registry
from iolab.core import spec as specmod
from iolab.errors import printable
from iolab.parsers import is_digits
from iolab.paths import resolve_data_dir


# the most characters of one line a message prints: far beyond any line iolab writes, and a
# recorded string of megabytes (a host name, a stop request's reason) stays a screenful
LINE_MOST = 10_000


def say(text: str, file=None, flush: bool = False) -> None:
    """Print ``text`` with its control characters escaped but its line breaks and tabs: what
    a verb prints quotes recorded strings (a failed run's reason from a tool's stderr, a host
    name, a file's name), and an escape sequence among them must reach the terminal as text,
    not as a command to it. A line longer than :data:`LINE_MOST` characters is cut there,
    saying how much was left out. What is stored stays as it was recorded.

    A line break is kept, so ``say`` cannot tell the verb's own from one inside a recorded
    string: whatever makes a line that quotes a record, a folder's name or a params value
    escapes it there (:func:`iolab.errors.printable`, a line break too), so that it cannot
    print a line of its own."""
    print("\n".join(printable(_bounded(line), keep="\t") for line in str(text).split("\n")),
          file=file or sys.stdout, flush=flush)


def _bounded(line: str) -> str:
    if len(line) <= LINE_MOST:
        return line
    return f"{line[:LINE_MOST]}… ({len(line) - LINE_MOST:,} more characters not shown)"


def envs_help() -> str:
    envs = specmod.environments()
    return (f"environment: one of {', '.join(envs) or 'none yet'} (folders of "
            f"notebooks/params/); make a new one with 'iolab env new NAME'")


def folder_arg(text: str) -> str:
    """A folder given on the command line (every folder option's type): an empty one (an
    unset shell variable) is refused, not taken for the option left out."""
    return _given(text, "a folder")


def file_arg(text: str) -> str:
    """A file given on the command line (every file option's type), refused empty as
    :func:`folder_arg` is."""
    return _given(text, "a file")


def _given(text: str, what: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"empty: give {what} (or leave the option out for "
                                         "the default)")
    return text


# the most digits a whole number on the command line has: more than any count iolab takes,
# fewer than the 4,300 Python refuses to read
INT_DIGITS_MOST = 18


def int_arg(text: str) -> int:
    """A whole number on the command line (every integer option's type): ASCII digits 0-9
    with an optional leading minus (a negative one is refused where it means nothing).
    ``int`` takes more: any script's digits ('３', '٢'), '1_000', '+3', ' 3 '; what a user
    typed is read only as typed."""
    body = text[1:] if text.startswith("-") else text
    if not is_digits(body) or len(body) > INT_DIGITS_MOST:
        raise argparse.ArgumentTypeError(
            f"{printable(repr(text))} is not a whole number (allowed: the ASCII digits 0-9, "
            f"at most {INT_DIGITS_MOST}, with an optional leading -)")
    return int(text)


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", metavar="DIR", type=folder_arg,
                   help="data folder (default: the repository's data/, or $IOLAB_DATA)")


def add_campaign(p: argparse.ArgumentParser, imported: bool = False) -> None:
    extra = "; aisio-<name> for a campaign made by import-cijoe" if imported else ""
    p.add_argument("experiment", help=f"one of: {', '.join(registry.names())}{extra}")
    p.add_argument("--env", required=True, help=envs_help())
    add_common(p)


def data_dir_of(args, write: bool = False) -> Path:
    """The data folder ``--data`` names (or the default), checked to be one."""
    from iolab.core import datadir

    given = args.data or os.environ.get("IOLAB_DATA")  # its links are checked as given too
    return datadir.check(resolve_data_dir(args.data), write=write, given=given)


def check_chosen(command: str, experiment: str | None, env: str | None,
                 known: set[tuple[str, str]], where: str) -> None:
    """InputError naming the name (escaped, one line) when ``experiment`` or ``env`` (None:
    any) chooses none of the ``known`` (experiment, environment) pairs a verb acts on (those
    ``where`` says, e.g. "stored under DATA/raw"): a misspelt name chooses nothing, and must
    not read as a store with nothing wrong in it."""
    from iolab.errors import InputError

    if experiment is not None and all(e != experiment for e, _ in known):
        raise InputError(command, "experiment", f"{experiment!r} names no campaign {where}",
                         allowed=", ".join(sorted({e for e, _ in known})) or "none: there is "
                         "no campaign")
    if env is not None and all(v != env or experiment not in (None, e) for e, v in known):
        of = f" of experiment {experiment!r}" if experiment is not None else ""
        raise InputError(command, "--env", f"{env!r} names no campaign{of} {where}",
                         allowed=", ".join(sorted({v for e, v in known
                                                   if experiment in (None, e)})))
