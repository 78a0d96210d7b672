"""``iolab submit``: campaigns run as Slurm batch jobs, one per experiment and environment.

Responsible for: its options, refusing options that ``--resume`` cannot take, and handing the
request to the batch package.
Not responsible for: writing or submitting the scripts (``iolab.batch``).
"""

from __future__ import annotations

import argparse

from iolab.batch.script import DEFAULT_SIGNAL_BEFORE_S
from iolab.cli.common import add_common, envs_help, int_arg
from iolab.core import registry
from iolab.errors import InputError
from iolab.execution import options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="run campaigns as Slurm batch jobs: write a batch script "
                       "into each campaign's jobs/ folder and submit it (one job per "
                       "experiment and environment)")
    p.add_argument("experiments", nargs="+", metavar="experiment",
                   help=f"one or more of: {', '.join(registry.names())}")
    p.add_argument("--env", action="append", required=True,
                   help=envs_help() + "; repeatable")
    add_common(p)
    p.add_argument("--mode", choices=["run", "replay", "plan"], default="run",
                   help="what the job's notebook does (default run: measure what is left, on a "
                        "node of its own)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a params key, as for 'run'")
    # what each job's notebook is given as its run_options (iolab.execution.options)
    options.add_flags(p, "submit", int_type=int_arg, note="in each job: ")
    p.add_argument("--partition", help="the Slurm partition (checked with sinfo)")
    p.add_argument("--time", help="the job's time limit, as sbatch takes it (e.g. 2:00:00)")
    p.add_argument("--nodelist", help="the node(s) to run on, as sbatch takes it")
    p.add_argument("--account", help="the Slurm account to charge")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="one more sbatch option, written as a #SBATCH line (repeatable; give "
                        "it with =, e.g. --sbatch=--mem=0)")
    p.add_argument("--signal-before", type=int_arg, default=DEFAULT_SIGNAL_BEFORE_S,
                   metavar="SECONDS",
                   help="ask Slurm for SIGUSR1 this long before the time limit, when the "
                        f"campaign stops after its current run (default {DEFAULT_SIGNAL_BEFORE_S})")
    p.add_argument("--requeue", action="store_true",
                   help="a job stopped before its time limit with runs left submits the next "
                        "job itself")
    p.add_argument("--resume", action="store_true",
                   help="submit each campaign's last script again (after its job, if that "
                        "has not ended): the campaign goes on where it stopped")
    p.set_defaults(func=cmd_submit)


def _slurm_options(args) -> dict[str, str]:
    from iolab.batch.script import SLURM_OPTIONS

    return {key: getattr(args, key) for key in SLURM_OPTIONS if getattr(args, key)}


def cmd_submit(args) -> int:
    from iolab.children import Stoppable

    # a stop signal ends sbatch (and any other Slurm client) and leaves no script unrecorded
    with Stoppable():
        return _submit(args)


def _submit(args) -> int:
    from iolab.batch import submit

    if args.resume:
        given = [flag for flag, value in (("--set", args.overrides),
                                          *((flag, True) for flag in options.flags(
                                              options.given(args, "submit"), "submit")),
                                          ("--requeue", args.requeue),
                                          ("--signal-before",
                                           args.signal_before != DEFAULT_SIGNAL_BEFORE_S),
                                          ("--sbatch", args.sbatch),
                                          ("--mode", args.mode != "run"))
                 if value] + [f"--{k}" for k in _slurm_options(args)]
        if given:
            raise InputError("--resume", None, f"takes the options of the last job's script, "
                             f"not {', '.join(given)}", allowed="--resume with --env and --data "
                             "only; submit anew to change options")
        for experiment in dict.fromkeys(args.experiments):  # each campaign once
            for env in dict.fromkeys(args.env):
                submit.resume(experiment, env, args.data)
        return 0
    request = submit.Request(mode=args.mode, data_dir=args.data, overrides=args.overrides,
                             run_options=options.given(args, "submit"), requeue=args.requeue,
                             signal_before_s=args.signal_before, slurm=_slurm_options(args),
                             sbatch_args=args.sbatch)
    submit.submit(args.experiments, args.env, request)
    return 0
