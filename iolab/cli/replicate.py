"""``iolab replicate``: measure the local experiments' replication packs on this host.

Responsible for: its options, the quiet check's refusal or override, and printing the packs'
plan and each campaign's outcome. Not responsible for: the packs, the environment's name and
params, the quiet check's readings (``iolab.execution.replicate``) or running a campaign
(``iolab.execution.campaign``).
"""

from __future__ import annotations

import argparse
import sys

from iolab.cli.common import add_common, int_arg, say
from iolab.errors import printable
from iolab.execution import options
from iolab.paths import resolve_data_dir, shown


def register(sub: argparse._SubParsersAction) -> None:
    from iolab.execution import replicate as rep

    p = sub.add_parser("replicate", help="measure the replication packs of the local "
                       "experiments on this host, into an environment named after it "
                       "(resumable; about 20 minutes on 2 vCPUs)")
    p.add_argument("--experiment", action="append", metavar="NAME",
                   help="only this experiment's pack (repeatable; default: every experiment "
                        "whose params in --from declare one)")
    p.add_argument("--env", help="the environment to measure into (default: named after this "
                   "host's CPU family and kernel build, e.g. xeon-v657)")
    p.add_argument("--from", dest="source", default=rep.SOURCE_ENV,
                   help=f"the environment whose params hold the packs (default {rep.SOURCE_ENV})")
    p.add_argument("--plan", action="store_true", help="show the packs and the ETA; run "
                   "nothing, write nothing")
    p.add_argument("--busy-ok", action="store_true", help="start on a busy machine all the "
                   "same (recorded in each campaign's log)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a params key of every pack (a quick try: runs so made are "
                        "stored, but a chapter shows the runs its params file plans)")
    options.add_flags(p, "replicate", int_type=int_arg)
    add_common(p)
    p.set_defaults(func=cmd_replicate)


def cmd_replicate(args) -> int:
    from iolab.execution import replicate as rep
    experiments = rep.check_experiments(args.experiment, args.source)
    env = args.env or rep.host_environment()
    summary = rep.plan_packs(env, experiments, args.data, args.source,
                             overrides=args.overrides)
    say(summary.text(), flush=True)
    if args.plan:
        return 0
    if not any(plan.to_run_max for _, plan in summary.plans):
        # a machine already measured: no quiet check (a busy one would be refused for nothing)
        say(f"nothing to measure here: every run of the packs is stored in {env} or blocked "
            "on this host (the plan above says which)")
        return 0
    reading = rep.measure_quiet()
    rep.check_quiet(reading, args.busy_ok)
    if reading.busy:
        say(f"iolab: warning: measuring on a busy machine (--busy-ok): {reading.busy}",
            file=sys.stderr)
    results = rep.run_packs(env, experiments, args.data, reading, busy_ok=args.busy_ok,
                            source_env=args.source, overrides=args.overrides,
                            said=lambda text: say(text, flush=True),
                            **options.given(args, "replicate"))
    code = 0
    for name, result in results:
        if result.skipped:
            say(f"{name}: skipped ({printable(result.skipped)}); the other packs were measured",
                file=sys.stderr)
            code = 1
            continue
        for line in result.messages:  # one line each: a reason may quote a tool's stderr
            say(printable(line))
        print(f"{name}: completed {result.completed} runs, {len(result.failed)} failed")
        if result.unrestored:
            say(f"iolab: error: {printable(result.unrestored)}", file=sys.stderr)
        if result.interrupted:
            return 128 + (result.signal or 2)
        if result.stopped:
            from iolab.execution import stop
            return stop.EXIT_STOPPED
        code = 1 if result.failed else code
    raw = shown(resolve_data_dir(args.data) / "raw")
    say(f"done: the packs are in {printable(str(raw))}/<experiment>/{env}/ with their params "
        f"in {printable(rep.params_shown(env))}/; 'make book' shows this machine among the "
        "others")
    return code
