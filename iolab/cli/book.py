"""``iolab book`` and ``iolab notebook``: the book built from the notebooks, and one
experiment's notebook executed (e.g. as a batch job).

Responsible for: their options, and handing them to the book's build and the notebook's run;
the outputs they name (``--glue-snapshot FILE``, ``-`` for standard output; ``-o``) are
written only where nothing is or over a regular file (:mod:`iolab.safefiles`).
Not responsible for: replaying, building or executing anything (``iolab.report.book``,
``iolab.batch.job``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from iolab.cli.common import add_campaign, add_common, data_dir_of, file_arg, int_arg
from iolab.errors import InputError, printable
from iolab.execution import options
from iolab.paths import REPO_ROOT
from iolab.safefiles import check_output


def register(sub: argparse._SubParsersAction) -> None:
    _add_book(sub)
    _add_notebook(sub)


def _add_book(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("book", help="replay the notebooks from stored data and build the book strictly")
    add_common(p)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--no-render", action="store_true",
                      help="build from the notebooks already in book/")
    what.add_argument("--render-only", action="store_true",
                      help="replay the notebooks, do not build")
    p.add_argument("--lenient", action="store_true", help="build without -W -n (warnings do not fail)")
    p.add_argument("--pdf", action="store_true",
                   help="build the book as one PDF, _build/pdf/book.pdf (XeLaTeX), instead "
                        "of the HTML")
    what.add_argument("--clean", action="store_true",
                      help="remove the rendered notebooks and _build/")
    p.add_argument("--force", action="store_true", help="replay every notebook and build, even "
                   "those whose inputs did not change since the last time")
    p.add_argument("--skip-corrupt", action="store_true", help="leave corrupt runs out of the "
                   "chapters (each says how many) instead of failing")
    p.add_argument("--glue-snapshot", metavar="FILE", type=file_arg,
                   help="also write every glued text value "
                   "to FILE (JSON; - for standard output), e.g. tests/fixtures/glued_values.json "
                   "after an intended change")
    p.set_defaults(func=cmd_book)


def _add_notebook(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("notebook", help="execute an experiment's notebook (e.g. as a batch job "
                       "that runs the campaign and renders it), bounded by the cell and kernel "
                       "start timeouts of its params")
    add_campaign(p)
    p.add_argument("--mode", choices=["replay", "plan", "run"], default="replay")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a params key, as for 'plan' and 'run'")
    # the notebook's run_options (iolab.execution.options)
    options.add_flags(p, "notebook", int_type=int_arg, note="with --mode run: ")
    p.add_argument("--resubmit", action="store_true", help="in a Slurm job of 'iolab submit': "
                   "when the campaign stopped before the time limit with runs left, submit the "
                   "job's script again (what 'iolab submit --requeue' asks for)")
    p.add_argument("-o", "--output", type=file_arg,
                   help="the executed notebook, a new file or one it replaces "
                   "(default: "
                   "EXPERIMENT-ENV-MODE.ipynb here)")
    p.set_defaults(func=cmd_notebook)


def cmd_book(args) -> int:
    from iolab.core.tidy import SKIP_CORRUPT_VAR
    from iolab.report.book import GLUE_SNAPSHOT, build, clean, render, write_glue_snapshot

    if args.pdf and (args.render_only or args.clean):
        print("iolab book: error: --pdf builds, which --render-only and --clean do not "
              "(see 'iolab book --help')", file=sys.stderr)
        return 2
    if args.clean:
        clean()
        shutil.rmtree(REPO_ROOT / "_build", ignore_errors=True)
        return 0
    data_dir = data_dir_of(args) if args.data else None
    if args.glue_snapshot and args.glue_snapshot != "-":
        # before the replay
        check_output(Path(args.glue_snapshot), "--glue-snapshot", data_dir=data_dir,
                     renews=[GLUE_SNAPSHOT])
    if args.skip_corrupt:
        os.environ[SKIP_CORRUPT_VAR] = "1"  # the notebooks' kernels inherit it
    if not args.no_render:
        render(data_dir, force=args.force)
    if args.glue_snapshot:
        write_glue_snapshot(None if args.glue_snapshot == "-" else Path(args.glue_snapshot))
        if args.glue_snapshot != "-":
            print(f"wrote the glued values to {printable(args.glue_snapshot)}")
    if args.render_only:
        return 0
    if args.pdf:
        from iolab.report import pdf
        return pdf.build(strict=not args.lenient, force=args.force)
    return build(strict=not args.lenient, force=args.force)


def cmd_notebook(args) -> int:
    from iolab.batch.job import run_notebook

    if args.limit is not None and args.limit < 0:
        raise InputError("--limit", None, f"{args.limit} is negative", allowed="0 or more")
    if args.output == "-":
        raise InputError("-o", None, "a notebook is written to a file, not to standard output",
                         allowed="a file path")
    out = Path(args.output or f"{args.experiment}-{args.env}-{args.mode}.ipynb")
    # before anything runs
    check_output(out, "-o", data_dir=data_dir_of(args) if args.data else None)
    return run_notebook(args.experiment, args.env, mode=args.mode, output=out,
                        data_dir=data_dir_of(args) if args.data else None,
                        overrides=args.overrides, resubmit=args.resubmit,
                        **options.given(args, "notebook"))
