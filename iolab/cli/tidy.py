"""``iolab tidy``: a campaign's tidy table, or its points' decisions, as CSV or parquet.

Responsible for: its options, and writing the table the package builds to standard output
(no ``-o``, or ``-o -``) or, whole or not at all, to a file: through a temporary file and a
rename, and never over anything but a regular file (a link, a FIFO or a device there is
refused: :func:`iolab.safefiles.replace_output`). A recorded string is data: in a file and
on a standard output that is a pipe or a file it is written as recorded, byte for byte; on a
standard output that is a terminal its control characters are shown escaped (``\x1b``, as
``iolab plan`` shows them), so that a tool version holding an escape sequence cannot retitle
or clear the terminal.
Not responsible for: building the table (``iolab.core.tidy``, the plan's decisions).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from iolab.cli.common import add_campaign, data_dir_of, file_arg
from iolab.core import registry
from iolab.errors import IolabError, printable
from iolab.safefiles import check_output, replace_output


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tidy", help="the tidy table (one row per repetition) as CSV or parquet")
    add_campaign(p, imported=True)
    p.add_argument("--format", choices=["csv", "parquet"], default="csv")
    p.add_argument("-o", "--output", type=file_arg,
                   help="output file, replaced whole if it is a regular file "
                   "(default, or -: CSV on stdout, its control characters shown escaped "
                   "when stdout is a terminal)")
    p.add_argument("--allow-mixed-hosts", action="store_true", help="pool rows from different hosts")
    p.add_argument("--skip-corrupt", action="store_true", help="leave out corrupt runs (say "
                   "how many) instead of failing")
    p.add_argument("--decisions", action="store_true", help="instead, one row per point: its "
                   "runs (n), the mean of the repetition rule's metric, the interval's "
                   "half-width in %% of the mean and the rule's decision")
    p.set_defaults(func=cmd_tidy)


def cmd_tidy(args) -> int:
    from iolab.execution.campaign import source
    from iolab.core.tidy import load

    if args.output == "-":
        args.output = None  # standard output, as without -o
    if args.format == "parquet" and not args.output:
        raise IolabError("--format parquet needs -o FILE (parquet is binary)")
    if args.output:
        # before the table is built: nothing done in vain
        check_output(Path(args.output), "-o", data_dir=data_dir_of(args))
    if args.decisions:
        import pandas as pd

        from iolab.execution.campaign import Campaign

        if args.experiment not in registry.names():
            raise IolabError(f"--decisions: '{args.experiment}' has no params file to "
                             "decide with (an imported campaign)")
        df = pd.DataFrame(Campaign(args.experiment, args.env, data_dir=data_dir_of(args))
                          .plan().decision_rows())
    else:
        df = load(data_dir_of(args), source(args.experiment), args.env,
                  allow_mixed_hosts=args.allow_mixed_hosts, skip_corrupt=args.skip_corrupt)
    if df.attrs.get("corrupt_skipped"):
        print(f"left out {df.attrs['corrupt_skipped']} corrupt runs ('iolab verify' names them)",
              file=sys.stderr)
    if not args.output:
        _to_stdout(df)
    else:
        _write_table(df, Path(args.output), args.format, data_dir_of(args))
    if args.output:
        # the path is the user's: an escape sequence or a line break in it is shown as text
        print(f"wrote {len(df)} rows to {printable(args.output)}", file=sys.stderr)
    return 0


def _to_stdout(df) -> None:
    """The table as CSV on standard output: to a terminal with every string's control
    characters escaped (a recorded tool version printed ESC ] 0 and ESC [ 2J raw, which
    retitled and cleared the terminal), to a pipe or a file as recorded, for a program to
    read."""
    if sys.stdout.isatty():
        import pandas as pd

        df = df.rename(columns=lambda name: printable(str(name)))
        for name in df.columns:
            if not pd.api.types.is_numeric_dtype(df[name]):  # numbers and flags hold none
                df[name] = df[name].map(lambda v: printable(v) if isinstance(v, str) else v)
    df.to_csv(sys.stdout, index=False)


def _write_table(df, out: Path, fmt: str, data_dir: Path) -> None:
    """The table into ``out``, written whole or not at all; a refusal names -o."""
    def write(tmp: Path) -> None:
        if fmt == "parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)

    try:
        replace_output(out, write, "-o", data_dir=data_dir)
    except OSError as exc:
        raise IolabError(f"-o {out}: cannot be written ({exc.strerror or exc})") from None
