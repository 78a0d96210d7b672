"""``iolab search-replay``: search strategies replayed offline against a stored full grid.

Responsible for: its options, and printing the replay's summary and where it was written.
Not responsible for: replaying or scoring the strategies (``iolab.core.search.replay``).
"""

from __future__ import annotations

import argparse
import os

from iolab.cli.common import add_common, data_dir_of, int_arg
from iolab.core import registry
from iolab.errors import InputError, printable

SEEDS_MOST = 100_000  # replays per strategy and budget: the book's replays use 100
JOBS_PER_CPU = 4  # processes per CPU at most: more only share the same CPUs


def jobs_most() -> int:
    """The most ``--jobs`` allowed on this host."""
    return JOBS_PER_CPU * (os.cpu_count() or 1)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search-replay", help="replay search strategies offline against a "
                       "stored full grid, many seeds each, into data/derived/search_replay/")
    p.add_argument("experiment", help=f"one of: {', '.join(registry.names())}")
    p.add_argument("--env", required=True, help="the environment whose params sweep the grid "
                   "(search: {strategy: grid})")
    p.add_argument("--seeds", type=int_arg, default=100, help="replays per strategy and budget "
                   f"(1 to {SEEDS_MOST:,})")
    p.add_argument("--jobs", type=int_arg, default=os.cpu_count() or 1, help="processes (1 to "
                   f"{JOBS_PER_CPU} per CPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common(p)
    p.set_defaults(func=cmd_search_replay)


def cmd_search_replay(args) -> int:
    from iolab.execution.campaign import Campaign
    from iolab.core.search import replay

    check_bounds(args.seeds, args.jobs)
    data = data_dir_of(args)
    campaign = Campaign(args.experiment, args.env, data_dir=data)
    grid = replay.grid_of(campaign.plan(as_recorded=True))
    seeds = list(range(args.seeds))
    path = replay.derived_path(data, args.experiment, args.env)
    replay.check_writable(path)  # before the replays: they take minutes
    rows = replay.derive(grid, seeds, jobs=args.jobs, progress=not args.no_progress)
    replay.write(rows, replay.meta(grid, seeds, replay.BUDGET_SHARES, replay.COMPARED,
                                   args.experiment, args.env), path)
    print(replay.summary(rows, grid.runs).to_string(index=False))
    print(f"wrote {printable(str(path))}")  # under --data, a folder the user names
    return 0


def check_bounds(seeds: int, jobs: int) -> None:
    """InputError naming the flag when ``seeds`` or ``jobs`` is out of its bounds: a list of
    99,999,999,999 seeds ran out of memory, and 99,999 worker processes were started."""
    if not 1 <= seeds <= SEEDS_MOST:
        raise InputError("iolab search-replay", "--seeds", f"{seeds}",
                         allowed=f"1 to {SEEDS_MOST:,}")
    if not 1 <= jobs <= jobs_most():
        raise InputError("iolab search-replay", "--jobs", f"{jobs}",
                         allowed=f"1 to {jobs_most()} ({JOBS_PER_CPU} per CPU of this host)")
