"""``iolab import-cijoe``: an AiSIO CIJOE result archive into a campaign's store.

Responsible for: its options, checking the names it makes folders of before anything is
read, and printing the import's report.
Not responsible for: reading the archive or re-deriving its metrics (``iolab.importers``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from iolab.cli.common import add_common, data_dir_of, say
from iolab.core import registry
from iolab.core import spec as specmod


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-cijoe", help="import an AiSIO CIJOE result archive, re-deriving "
                       "every metric from its raw output (exit 1 on disagreements or failures)")
    p.add_argument("archive", help="the archive (.tar.gz) or its extracted folder")
    takers = ", ".join(e.name for e in registry.all_experiments() if getattr(e, "aisio_kinds", ()))
    p.add_argument("--experiment", required=True,
                   help=f"aisio-<name> (a campaign of its own) or an experiment that takes "
                        f"AiSIO's runs ({takers})")
    p.add_argument("--env", required=True, help="environment name")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common(p)
    p.set_defaults(func=cmd_import_cijoe)


def cmd_import_cijoe(args) -> int:
    from iolab.importers.cijoe import import_archive

    from iolab.core import locks
    from iolab.paths import check_name

    # both become folders: checked before the archive is read or anything is written
    check_name("experiment", args.experiment)
    specmod.check_environment_name(args.env)
    data_dir = data_dir_of(args, write=True)
    with locks.data_lock(data_dir):
        report = import_archive(Path(args.archive), args.experiment, args.env, data_dir,
                                progress=not args.no_progress)
    say(report.summary())
    return 1 if report.disagreements or report.failed else 0
