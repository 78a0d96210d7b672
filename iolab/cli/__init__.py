"""Command line: ``iolab <verb>`` (also ``python -m iolab``).

Verbs call the same functions the notebooks call. Every verb takes ``--data DIR``.

Each verb, or a small family of them, is a module of this package: its ``register(subparsers)``
adds the verbs' parsers, each with ``set_defaults(func=cmd_...)``, and its ``cmd_*`` functions
only read the arguments, call the package and print. A new verb is one new module with a
``register``, imported and added to ``VERB_MODULES`` below; what several verbs share (``--data``,
a campaign's experiment and ``--env``) is in ``common``.

Responsible for: the top parser, running the verb asked for, and its exit status (an error as
one line, the exit codes). Not responsible for: any verb's options or printing (its module's),
nor any logic of its own.
"""

from __future__ import annotations

import argparse
import sys

from iolab import paths, streams
from iolab.cli import (book, campaign, cijoe, data, env, info, migrate, new_experiment,
                       replicate, search, submit, tidy)
from iolab.cli.common import say
from iolab.errors import IolabError, printable

# the modules of the verbs, in the order 'iolab --help' lists their verbs
VERB_MODULES = (
    campaign,        # plan, run, stop
    replicate,       # replicate
    data,            # status, verify, restore, clean
    tidy,            # tidy
    cijoe,           # import-cijoe
    book,            # book, notebook
    submit,          # submit
    info,            # experiments, compare
    search,          # search-replay
    env,             # env new
    new_experiment,  # new-experiment
    migrate,         # migrate
)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, refusing bad arguments in one line that says where help is."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {printable(message)} (see '{self.prog} --help')\n")


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="iolab", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = parser.add_subparsers(dest="verb", required=True)
    for module in VERB_MODULES:
        module.register(sub)
    _debug_everywhere(parser)
    return parser


def _debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after the verb too (``iolab plan ... --debug``), as before it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                 help="show a traceback on errors")
                _debug_everywhere(sub)


def main(argv: list[str] | None = None) -> int:
    """Run one verb; its exit status: 0, 1 (runs failed, corrupt runs found), 2 (bad input or
    a refusal, one line on standard error), 3 (a campaign stopped on request), 70 (a bug in
    iolab), 128 + N (a campaign ended by signal N), 74 or 141 (it succeeded, but its output
    was lost)."""
    saved = sys.stdout, sys.stderr
    out, err = streams.guard()
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:  # argparse: --help, or a refusal it printed
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    finally:
        # flushed here, so that output lost in a buffer is seen now and not at exit
        streams.settle(out, err)
        if saved[0] is not None and saved[1] is not None:
            sys.stdout, sys.stderr = saved
    return streams.exit_status(code, out, err)


EXIT_INTERNAL = 70  # EX_SOFTWARE of sysexits.h: a bug of iolab's, not the user's input


def _main(argv: list[str] | None) -> int:
    from iolab.core.datadir import from_os_error

    try:
        parser = make_parser()  # it imports the experiments $IOLAB_EXPERIMENTS names
    except IolabError as exc:
        say(f"iolab: error: {_error_text(exc)}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    elsewhere = paths.foreign_checkout()
    if elsewhere is not None:
        # the folders' names are whoever made them's: an escape sequence or a line break in
        # one is shown as text, never as a line of its own
        print(f"iolab: warning: this is the iolab of {printable(str(paths.REPO_ROOT))}, not of "
              f"the checkout you are in ({printable(str(elsewhere))}): its params, data and book "
              "are that one's; make this "
              "checkout's own virtualenv (make setup venv) to work on this one",
              file=sys.stderr)
    try:
        return args.func(args)
    except KeyboardInterrupt as exc:  # Ctrl-C before a campaign began (a campaign handles
        # its own), or a stop signal of a verb that waits for Slurm (iolab.children)
        print("iolab: interrupted", file=sys.stderr)
        return 128 + getattr(exc, "signum", 2)  # 130 for Ctrl-C's SIGINT
    except IolabError as exc:
        if args.debug:
            raise
        say(f"iolab: error: {_error_text(exc)}", file=sys.stderr)
        _print_notes(exc)
        return 2
    except OSError as exc:  # a file system's refusal is the user's to fix, not a bug
        if args.debug:
            raise
        say(f"iolab: error: {printable(str(from_os_error(exc)))}", file=sys.stderr)
        _print_notes(exc)
        return 2
    except Exception as exc:  # a bug: one line with how to see more, and its own status
        if args.debug:
            raise
        print(f"iolab: internal error (a bug in iolab, please report it): "
              f"{type(exc).__name__}: {printable(str(exc))}; run the same command with "
              "--debug for the traceback", file=sys.stderr)
        _print_notes(exc)
        return EXIT_INTERNAL


def _error_text(exc: IolabError) -> str:
    """The error's message on one line (a tool's words, a path or a recorded string in it
    shown as text: a line break in a folder's name made a line of its own), or a listed
    error's lines, each made one line where it was written."""
    return str(exc) if exc.listed else printable(str(exc))


def _print_notes(exc: BaseException) -> None:
    """What was added to an error on its way out (knobs that could not be restored after
    it, ``iolab.host.journal``), and to the error it was raised from: a line each."""
    while exc is not None:
        for note in getattr(exc, "__notes__", ()):
            say(f"iolab: error: {printable(str(note))}", file=sys.stderr)
        exc = exc.__cause__
