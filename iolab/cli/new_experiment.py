"""``iolab new-experiment``: a new experiment written from the package's template.

Responsible for: its options, saying what was written and what comes next, and making a stop
signal (SIGTERM, Ctrl-C) an exception while it writes, so that the files are all written or
none (``iolab.scaffold`` removes what it made on any exception; SIGTERM's default action
would end the process before that).
Not responsible for: what is written, the name's checks or the template (``iolab.scaffold``).
"""

from __future__ import annotations

import argparse

from iolab.children import Stoppable
from iolab.cli.common import folder_arg
from iolab.errors import printable
from iolab.paths import REPO_ROOT
from iolab.scaffold import (EXPERIMENT_NAME_RULE, SMALLEST_ENV, new_experiment,
                            publish_params_schema, template_environments)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "new-experiment", help="a new experiment: the book's example copied under a new name "
        "(module, analysis, notebook, params and its chapter in _toc.yml)")
    p.add_argument("name", help=EXPERIMENT_NAME_RULE)
    p.add_argument("--env", metavar="ENVIRONMENT",
                   help="write params for this environment only (default: "
                        f"{', '.join(template_environments())}, which the package needs)")
    p.add_argument("--where", metavar="DIR", type=folder_arg,
                   help="write it outside the package, in DIR/NAME/, for $IOLAB_EXPERIMENTS "
                        "(default: into the package)")
    p.set_defaults(func=cmd_new_experiment)


def cmd_new_experiment(args: argparse.Namespace) -> int:
    with Stoppable():  # a stop signal raises: the files made so far are removed
        written = new_experiment(args.name, where=args.where, environment=args.env)
        if args.where is None:
            written.append(publish_params_schema(args.name))
    for path in written:
        shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        # the folder is the user's (--where, the checkout's): an escape sequence or a line
        # break in its name is shown as text, never as a line of its own
        print(f"{'changed' if path.name == '_toc.yml' else 'wrote'} {printable(str(shown))}")
    env = args.env or SMALLEST_ENV
    if args.where is not None:
        print(f"register it with IOLAB_EXPERIMENTS={args.name} and {printable(args.where)} on "
              "PYTHONPATH")
    else:
        print("the fast test suite takes it as it is; make it measure what you want, with its "
              "claims, page and tests: see book/architecture.md")
    print(f"edit what it measures, then look before you run: iolab plan {args.name} --env {env}")
    return 0

