"""Command line: ``iolab <verb>`` (also ``python -m iolab``).

Verbs call the same functions the notebooks call. Every verb takes ``--data DIR``.

Responsible for: argument parsing and printing. Not responsible for: any logic of its own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import experiments
from .errors import IolabError
from .paths import resolve_data_dir


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", metavar="DIR", help="data folder (default: the repository's data/, or $IOLAB_DATA)")


def _add_campaign(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", help=f"one of: {', '.join(sorted(experiments.EXPERIMENTS))}; "
                   "aisio-<name> for a campaign made by import-cijoe")
    p.add_argument("--env", required=True, help="environment name (notebooks/params/<env>/<experiment>.yaml)")
    _add_common(p)


def cmd_plan(args) -> int:
    from .runner import plan_for
    from .tools import INSTALL_HINTS
    from . import spec as specmod

    spec = specmod.load(args.experiment, args.env)
    plan = plan_for(spec, resolve_data_dir(args.data))
    tool = experiments.get(args.experiment).tool(spec.scalar_settings())
    where = tool.find()
    print(plan.summary())
    print(f"  tool {tool.name}: " + (f"found at {where}" if where else
                                    f"MISSING; {INSTALL_HINTS.get(tool.name, 'install it first')}"))
    print(f"  params: {' + '.join(spec.sources)}")
    if args.table:
        rows = plan.table()
        cols = list(spec.base) + ["rep", "run_id", "status", "reason"]
        print("\t".join(cols))
        for row in rows:
            print("\t".join(str(row[c]) for c in cols))
    return 0


def cmd_run(args) -> int:
    from .runner import plan_for, run_campaign
    from . import spec as specmod

    data_dir = resolve_data_dir(args.data)
    spec = specmod.load(args.experiment, args.env)
    print(plan_for(spec, data_dir).summary())
    result = run_campaign(spec, data_dir, keep_going=args.keep_going, progress=not args.no_progress,
                          allow_host_change=args.allow_host_change, max_runs=args.max_runs)
    for line in result.messages:
        print(line)
    print(f"completed {result.completed} runs, {len(result.failed)} failed")
    if result.interrupted:
        return 130
    return 1 if result.failed else 0


def cmd_status(args) -> int:
    from .runner import default_journal
    from .store import Store, campaigns

    data_dir = resolve_data_dir(args.data)
    found = campaigns(data_dir)
    if not found:
        print(f"no campaigns under {data_dir / 'raw'}")
    for exp, env in found:
        store = Store(data_dir, exp, env)
        host = store.read_host() or {}
        print(f"{exp}/{env}: {len(store.complete_runs())} complete, {len(store.failed_runs())} failed, "
              f"{len(store.incomplete_runs()) + len(store.stale_tmp_dirs())} incomplete; "
              f"host {host.get('hostname', '?')} fingerprint {host.get('fingerprint', '?')}")
    journal = default_journal(data_dir)
    if journal.exists():
        print(f"a knob journal is present at {journal}: a campaign crashed; run 'iolab restore'")
    return 0


def cmd_restore(args) -> int:
    from .journal import restore_from_journal
    from .knobs import make_knobs
    from .runner import default_journal

    journal = Path(args.journal) if args.journal else default_journal(resolve_data_dir(args.data))
    for line in restore_from_journal(journal, make_knobs()):
        print(line)
    return 0


def cmd_tidy(args) -> int:
    from .tidy import load

    df = load(resolve_data_dir(args.data), args.experiment, args.env,
              allow_mixed_hosts=args.allow_mixed_hosts)
    if args.format == "parquet":
        if not args.output:
            raise IolabError("--format parquet needs -o FILE (parquet is binary)")
        df.to_parquet(args.output, index=False)
    elif args.output:
        df.to_csv(args.output, index=False)
    else:
        df.to_csv(sys.stdout, index=False)
    if args.output:
        print(f"wrote {len(df)} rows to {args.output}", file=sys.stderr)
    return 0


def cmd_import_cijoe(args) -> int:
    from .cijoe_import import import_archive

    report = import_archive(Path(args.archive), args.experiment, args.env,
                            resolve_data_dir(args.data), progress=not args.no_progress)
    print(report.summary())
    return 1 if report.disagreements or report.failed else 0


def cmd_book(args) -> int:
    from .book import build, render

    data_dir = resolve_data_dir(args.data) if args.data else None
    if not args.no_render:
        render(data_dir)
    if args.render_only:
        return 0
    return build(strict=not args.lenient)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iolab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)

    p = sub.add_parser("plan", help="show what a campaign would run, with counts and an ETA (touches nothing)")
    _add_campaign(p)
    p.add_argument("--table", action="store_true", help="also print one line per run")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("run", help="run every planned point not stored yet (resumable)")
    _add_campaign(p)
    p.add_argument("--keep-going", action="store_true", help="record a failing run and continue")
    p.add_argument("--allow-host-change", action="store_true",
                   help="add runs from a host whose fingerprint differs from the campaign's")
    p.add_argument("--max-runs", type=int, help="stop after this many runs")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("status", help="list stored campaigns and a crashed run's journal")
    _add_common(p)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("restore", help="restore knobs a crashed campaign left changed")
    _add_common(p)
    p.add_argument("--journal", help="journal file (default: DATA/.knob-journal.json)")
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser("tidy", help="the tidy table (one row per repetition) as CSV or parquet")
    _add_campaign(p)
    p.add_argument("--format", choices=["csv", "parquet"], default="csv")
    p.add_argument("-o", "--output", help="output file (default: CSV on stdout)")
    p.add_argument("--allow-mixed-hosts", action="store_true", help="pool rows from different hosts")
    p.set_defaults(func=cmd_tidy)

    p = sub.add_parser("import-cijoe", help="import an AiSIO CIJOE result archive, re-deriving "
                       "every metric from its raw output (exit 1 on disagreements or failures)")
    p.add_argument("archive", help="the archive (.tar.gz) or its extracted folder")
    p.add_argument("--experiment", required=True, help="campaign name, aisio-<name>")
    p.add_argument("--env", required=True, help="environment name")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_common(p)
    p.set_defaults(func=cmd_import_cijoe)

    p = sub.add_parser("book", help="replay the notebooks from stored data and build the book strictly")
    _add_common(p)
    p.add_argument("--no-render", action="store_true", help="build from the notebooks already in book/")
    p.add_argument("--render-only", action="store_true", help="replay the notebooks, do not build")
    p.add_argument("--lenient", action="store_true", help="build without -W -n (warnings do not fail)")
    p.set_defaults(func=cmd_book)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except IolabError as exc:
        print(f"iolab: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
