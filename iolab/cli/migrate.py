"""``iolab migrate``: version-1 run manifests rewritten as version 2.

Responsible for: its options, choosing the campaigns it names (a name that chooses none is
refused), and printing what each
migration plan holds and what applying it did.
Not responsible for: planning or rewriting a manifest (``iolab.core.migrate``).
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from iolab.cli.common import add_common, check_chosen, data_dir_of, int_arg, say
from iolab.core import registry


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help="rewrite version-1 run manifests as version 2 (dry run "
                       "unless --apply; running it twice changes nothing)")
    p.add_argument("experiment", nargs="?", help="only this campaign name")
    p.add_argument("--env", help="only this environment")
    p.add_argument("--apply", action="store_true", help="do it (default: only show what would happen)")
    p.add_argument("--show", type=int_arg, default=5, metavar="N", help="list N runs per campaign")
    add_common(p)
    p.set_defaults(func=cmd_migrate)


def cmd_migrate(args) -> int:
    from iolab.core import locks

    data_dir = data_dir_of(args, write=args.apply)
    with locks.data_lock(data_dir) if args.apply else contextlib.nullcontext():
        return _migrate(args, data_dir)


def _migrate(args, data_dir: Path) -> int:
    from iolab.execution.campaign import source
    from iolab.core import migrate
    from iolab.core.store import campaigns, open_store
    from iolab.importers.aisio import PREFIX

    stored = campaigns(data_dir)
    check_chosen("iolab migrate", args.experiment, args.env, set(stored),
                 f"stored under {data_dir / 'raw'}")
    chosen = [(e, v) for e, v in stored
              if (args.experiment in (None, e)) and (args.env in (None, v))]
    pending = 0
    for exp, env in chosen:
        if not (exp.startswith(PREFIX) or exp in registry.names()):
            say(f"{exp}/{env}: not a registered experiment; skipped")
            continue
        todo = migrate.plan(open_store(source(exp), env, data_dir))
        if not todo:
            say(f"{exp}/{env}: nothing to migrate")
            continue
        pending += len(todo)
        left = [m for m in todo if m.problem]
        say(f"{exp}/{env}: {len(todo)} version-1 runs")
        # every run left as it is is listed; of the others, the first few
        shown = left + [m for m in todo if not m.problem][:args.show]
        for m in shown:
            say(f"  {m.describe()}")
        if len(todo) > len(shown):
            say(f"  ... and {len(todo) - len(shown)} more")
        if args.apply:
            done = migrate.apply(todo, log=lambda line: None)
            say(f"  done: {done} runs rewritten as version 2"
                + (f"; {len(left)} left as they are" if left else ""))
    if pending and not args.apply:
        say("dry run: nothing was changed; add --apply to migrate")
    return 0
