"""The verbs that look after a data directory and the host after campaigns: ``iolab status``,
``iolab verify``, ``iolab restore`` and ``iolab clean``.

Responsible for: their options, and printing what the status report, the store's checks
(each run's raw files against its sha256 sums, each cached tidy table against the table its
runs give, then every stored file against the published schemas), the knob journal's
restoring and the scratch files' cleaning return.
Not responsible for: working any of it out (``iolab.status``, ``iolab.core``,
``iolab.schemas.verify``, ``iolab.host``).
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from iolab.cli.common import add_common, check_chosen, data_dir_of, file_arg, folder_arg, say
from iolab.errors import InputError, printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="list stored campaigns and a crashed run's journal")
    add_common(p)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("verify", help="read every stored run's raw files and check them "
                       "against the sha256 sums in its run.json, each cached tidy table against "
                       "the table its runs give, then every stored JSON file and params file "
                       "against the published schemas (exit 1 when any run is corrupt, any "
                       "cached table is not its runs' or any file breaks its schema)")
    p.add_argument("experiment", nargs="?", help="only this campaign name")
    p.add_argument("--env", help="only this environment")
    p.add_argument("--quarantine", action="store_true", help="move corrupt runs to partial/ "
                   "(never deleted) so that 'iolab run' measures them again")
    p.add_argument("--fast", action="store_true", help="trust the cache of verified files: a "
                   "file whose size and modification time match its last verification is not "
                   "read again (an alteration that kept both is then not seen), and a cached "
                   "tidy table is not built again from the runs to compare")
    add_common(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("restore", help="end a killed campaign's leftover processes and restore "
                       "the knobs it left changed")
    add_common(p)
    p.add_argument("--journal", type=file_arg,
                   help="journal file (default: DATA/.knob-journal.json)")
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser("clean", help="remove the scratch files iolab wrote for this "
                       "checkout's runs (the target files they read): only files it created, "
                       "still as it left them, that no other checkout's campaign uses; never a "
                       "stored run, never another file; it lists what it leaves and why")
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.add_argument("--under", metavar="DIR", type=folder_arg, help="only files under this folder")
    p.add_argument("--experiment", metavar="EXP", help="only files that campaigns of this "
                   "experiment alone use")
    p.add_argument("--all-checkouts", action="store_true", help="also files other checkouts "
                   "of iolab use, or that an older iolab made without saying which")
    p.set_defaults(func=cmd_clean)


def cmd_status(args) -> int:
    from iolab.children import Stoppable
    from iolab.status import status_lines

    with Stoppable():  # a stop signal ends squeue or scontrol with iolab, not after it
        for line in status_lines(data_dir_of(args)):  # one line each, whatever a name holds
            say(printable(line))
    return 0


def cmd_verify(args) -> int:
    from iolab.core import locks, tidy
    from iolab.schemas import verify as schemas
    from iolab.status import stores, unusable_lines

    data_dir = data_dir_of(args, write=args.quarantine)
    lock = locks.data_lock(data_dir) if args.quarantine else None
    if lock:
        lock.acquire()
    try:
        bad = bad_caches = 0
        chosen = list(stores(data_dir, args.experiment, args.env))
        check_chosen("iolab verify", args.experiment, args.env, _verifiable(data_dir),
                     f"stored under {data_dir / 'raw'}, nor a params file")
        if not chosen:
            say(f"no campaigns under {printable(str(data_dir / 'raw'))}"
                + (f" matching {args.experiment or ''}/{args.env or ''}"
                     if args.experiment or args.env else ""))
        for exp, env, store in chosen:
            runs, corrupt = store.scan(rehash=not args.fast)
            say(f"{exp}/{env}: {len(runs)} intact, {len(corrupt)} corrupt")
            for c in corrupt:
                say(f"  corrupt: {printable(c.describe())}")
            if corrupt:
                tidy.forget(data_dir, exp, env)  # a cached table must not hide them
            if corrupt and args.quarantine:
                for line in store.quarantine_corrupt(corrupt):
                    say(f"  {printable(line)}")
            elif corrupt:
                bad += len(corrupt)
            if not corrupt and not args.fast:
                forged = _cache_line(data_dir, exp, env, runs)
                if forged:
                    say(f"  cache: {printable(forged)}")
                    tidy.forget(data_dir, exp, env)  # never served again without a rebuild
                    bad_caches += 1
            if not corrupt:
                for line in _implausible_lines(data_dir, exp, env):
                    say(f"  {printable(line)}")
        for line in unusable_lines(data_dir):
            say(printable(line))
        if chosen and args.fast:
            say("--fast: a file whose size and modification time match its last "
                "verification was not read again; an alteration that kept both is not seen, "
                "nor a cached table that is not its runs'")
        if bad_caches:
            say(f"cached tables that are not the tables of their runs: {bad_caches}, dropped; "
                "the next 'iolab tidy' builds them from the runs")
        if bad:
            say(f"{bad} corrupt runs; restore them (git checkout, a backup) or move them "
                "aside with 'iolab verify --quarantine'")
        checked = schemas.verify(data_dir, args.experiment, args.env)
        for line in checked.lines():  # a problem quotes a file's name and value: one line
            say(printable(line))
        return 1 if bad or bad_caches or checked.problems else 0
    finally:
        if lock:
            lock.release()


def _verifiable(data_dir: Path) -> set[tuple[str, str]]:
    """The (experiment, environment) pairs verify checks: the stored campaigns, and the
    registered experiments' params files."""
    from iolab.core import registry
    from iolab.core import spec as specmod
    from iolab.core.store import campaigns

    return set(campaigns(data_dir)) | {
        (exp.name, env) for exp in registry.all_experiments()
        for env in specmod.environments(exp.name, exp.params_dir)}


def _cache_line(data_dir: Path, experiment: str, env: str, runs: list) -> str:
    """Why the campaign's cached tidy table is not the one its verified ``runs`` give, in
    words ("" when it is, when none would be served, or for an experiment not registered)."""
    from iolab.core import registry as exps
    from iolab.core import tidy

    if experiment not in exps.names():
        return ""
    return tidy.cache_disagreement(data_dir, exps.get(experiment), env, runs)


def _implausible_lines(data_dir: Path, experiment: str, env: str) -> list[str]:
    """The metrics of a campaign's runs left out of its tidy table as above their ceiling
    (the link's line rate), one line per run, then their count; none for a campaign whose
    experiment holds no metric to a ceiling. They stay in the raw files: no problem of a
    file, so verify still passes."""
    from iolab.core import registry as exps
    from iolab.core import tidy
    from iolab.core.experiment import IMPLAUSIBLE

    source = exps.get(experiment) if experiment in exps.names() else None
    if getattr(source, "link_columns", None) is None:
        return []
    table = tidy.load(data_dir, source, env)
    marked = table[table[IMPLAUSIBLE].fillna("") != ""] if IMPLAUSIBLE in table else table[:0]
    lines = [f"implausible: run {row['run.id']}: {row[IMPLAUSIBLE]}"
             for _, row in marked.iterrows()]
    return lines + [f"{len(marked)} runs with a value above its ceiling, left out of the tidy "
                    "table (the raw files keep it)"] if lines else lines


def cmd_restore(args) -> int:
    from iolab.execution.runner import restore_left

    data_dir = data_dir_of(args)
    for line in restore_left(data_dir, Path(args.journal) if args.journal else None):
        say(printable(line))  # a path or a knob's recorded value in it: one line
    return 0


def cmd_clean(args) -> int:
    from iolab.core import locks
    from iolab.core import registry as exps
    from iolab.host import scratch

    if args.experiment is not None and args.experiment not in exps.names():
        raise InputError("iolab clean", "--experiment", f"{args.experiment!r} is not an "
                         "experiment", allowed=", ".join(exps.names()))
    registry = scratch.Registry()
    # the host lock: a campaign running now reads these files
    with locks.host_lock(None) if not args.dry_run else contextlib.nullcontext():
        lines = scratch.clean(registry, dry_run=args.dry_run,
                              under=Path(args.under) if args.under else None,
                              experiment=args.experiment, any_checkout=args.all_checkouts)
    for line in lines:  # a scratch file's path, its maker's words: one line each
        say(printable(line))
    if not lines:
        say(f"no scratch files of iolab's on this host (registry {printable(str(registry.path))})"
            + (f" under {printable(args.under)}" if args.under else ""))
    return 0
