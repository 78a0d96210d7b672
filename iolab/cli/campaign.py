"""The verbs of one campaign's measuring: ``iolab plan``, ``iolab run`` and ``iolab stop``.

Responsible for: their options, and printing what the campaign's plan and run return.
Not responsible for: planning, running or stopping (``iolab.execution.campaign``,
``iolab.execution.stop``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import textwrap

from iolab.cli.common import add_campaign, add_common, data_dir_of, int_arg, say
from iolab.errors import InputError, printable
from iolab.execution import options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="show what a campaign would run, with counts, an ETA and "
                       "the programs it needs (touches nothing)")
    add_campaign(p)
    _add_selection(p, "plan")
    p.add_argument("--format", choices=["text", "json", "table"], default="text",
                   help="text (default), one JSON object, or one tab-separated line per run")
    p.add_argument("--runs", action="store_true", help="with --format json: every run too")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("run", help="run every planned point not stored yet (resumable)")
    add_campaign(p)
    _add_selection(p, "run")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("stop", help="ask the campaign running on a data directory to stop "
                       "after its current run (exit status 3 tells it stopped early)")
    add_common(p)
    p.set_defaults(func=cmd_stop)


def _add_selection(p: argparse.ArgumentParser, command: str) -> None:
    """``--set`` and the run options ``command`` offers (``iolab.execution.options``)."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a params key (dotted for nested keys, e.g. base.qdepth=64; "
                        "the value is read as YAML); repeatable, a later one for the same key "
                        "wins; validated like the file")
    options.add_flags(p, command, int_type=int_arg)


def _campaign(args):
    from iolab.execution.campaign import Campaign

    if args.limit is not None and args.limit < 0:
        raise InputError("--limit", None, f"{args.limit} is negative", allowed="0 or more")
    if args.max_runs < 1:
        raise InputError("--max-runs", None, f"{args.max_runs} is not positive", allowed="1 or more")
    return Campaign(args.experiment, args.env, data_dir=args.data, overrides=args.overrides)


def cmd_plan(args) -> int:
    if args.runs and args.format != "json":
        raise InputError("--runs", None, "lists the runs inside the JSON object",
                         allowed="--runs with --format json (--format table lists them too)")
    camp = _campaign(args)
    plan = camp.plan(where=args.where, limit=args.limit, max_runs=args.max_runs)
    if args.format == "json":
        _print_json(plan.to_dict(), plan.table() if args.runs else None)
    elif args.format == "table":
        cols = camp.spec.variables + ["rep", "run_id", "status", "reason"]
        print("\t".join(cols))
        for row in plan.table():
            print("\t".join(printable(str(row[c])) for c in cols))
    else:
        say(plan.summary())
    return 0


def _print_json(doc: dict, run_list=None) -> None:
    """``doc`` as indented JSON, with ``run_list`` (rows, made one by one) as its last key,
    written row by row: a plan's runs are never all in memory at once."""
    text = json.dumps(doc, indent=2, default=str)
    if run_list is None:
        print(text)
        return
    rows = iter(run_list)
    first = next(rows, None)
    if first is None:
        print(json.dumps({**doc, "run_list": []}, indent=2, default=str))
        return
    # the text json.dumps gives for the whole object, in pieces: the object without its
    # closing brace, then each row indented to its place
    print(text[:-len("\n}")] + ',\n  "run_list": [', end="")
    for n, row in enumerate(itertools.chain([first], rows)):
        row_text = textwrap.indent(json.dumps(row, indent=2, default=str), " " * 4)
        print(("\n" if n == 0 else ",\n") + row_text, end="")
    print("\n  ]\n}")


def cmd_run(args) -> int:
    from iolab.execution import stop

    camp = _campaign(args)
    result = camp.run(**options.given(args, "run"),
                      show_plan=lambda plan: say(plan.summary(), flush=True))
    for line in result.messages:  # one line each: a reason may quote a tool's stderr
        say(printable(line))
    print(f"completed {result.completed} runs, {len(result.failed)} failed")
    if result.unrestored:  # an interrupted campaign's knobs left changed
        say(f"iolab: error: {printable(result.unrestored)}", file=sys.stderr)
    if result.interrupted:
        return 128 + (result.signal or 2)
    if result.failed:
        return 1
    return stop.EXIT_STOPPED if result.stopped else 0


def cmd_stop(args) -> int:
    from iolab.core import locks
    from iolab.execution import stop

    data_dir = data_dir_of(args)
    holder = locks.holder(locks.data_lock_path(data_dir))
    if holder is None:
        print(f"no campaign is running on {printable(str(data_dir))} on this host; nothing to "
              "stop (a Slurm "
              "job's campaign runs on its node: scancel --batch --signal=USR1 JOBID)")
        return 0
    path = stop.request(data_dir, f"'iolab stop' by uid {os.getuid()}")
    # the holder's words are read from the lock file, the path is under --data: each on
    # this line, whatever it holds
    say(f"asked the campaign ({printable(locks.describe(holder))}) to stop after its current "
        f"run ({printable(str(path))}); its knobs are restored as it ends")
    return 0
