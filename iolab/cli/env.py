"""``iolab env new``: a new environment, a copy of another's params files.

Responsible for: its options, checking the names, and copying the params folder (its regular
files only: the folder or anything in it that is a link, a FIFO or a device is refused in one
line, never followed; each file no larger than ``plan`` reads a params file, at most
:data:`FILES_MOST` of them, folders at most :data:`DEPTH_MOST` deep), whole or not at all
(a stop signal included: the copy is removed, and the new environment never exists half
made), and saying what it copied (a file's name escaped, on one line).
Not responsible for: what the params files hold or how they are read (``iolab.core.spec``).
"""

from __future__ import annotations

import argparse
import os

from iolab.children import Stoppable
from iolab.cli.common import say
from iolab.core import spec as specmod
from iolab.errors import InputError, printable
from iolab.paths import PARAMS_DIR, REPO_ROOT
from iolab.safefiles import copy_folder, refuse_linked

DEFAULT_TEMPLATE_ENV = "kvm-2vcpu"
FILES_MOST = 1000  # files an environment's params folder may hold (one per experiment, notes)
DEPTH_MOST = 8     # levels of folders in it (the package's are flat)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="environments (notebooks/params/<name>/)")
    env_sub = p.add_subparsers(dest="env_verb", required=True)
    q = env_sub.add_parser("new", help="a new environment: a copy of another's params files")
    q.add_argument("name", help="the new environment's name (a folder name)")
    q.add_argument("--from", dest="source", default=DEFAULT_TEMPLATE_ENV,
                   help=f"environment to copy (default: {DEFAULT_TEMPLATE_ENV})")
    q.set_defaults(func=cmd_env_new)


def cmd_env_new(args) -> int:
    name = specmod.check_environment_name(args.name)
    source = PARAMS_DIR / specmod.check_environment_name(args.source)
    target = PARAMS_DIR / name
    if not source.is_dir():
        raise InputError(source, None, f"no environment '{args.source}' to copy",
                         allowed=", ".join(specmod.environments()))
    if os.path.lexists(target):  # a link to nowhere too: never made a folder through
        raise InputError(target, None, "exists already; edit its files, or choose another name")
    # never through a link: one to a root-only file would copy its content, one to /dev/null
    # make a world-writable params file (copytree follows links and copies their mode)
    refuse_linked(PARAMS_DIR, "the environments' params")  # the copy would land where it points
    # Stoppable: SIGTERM (or Ctrl-C) raises, and the half-made copy is removed as on any error
    with Stoppable():
        copy_folder(source, target, f"the params folder of environment '{args.source}'",
                    file_most=specmod.PARAMS_MOST, files_most=FILES_MOST, depth_most=DEPTH_MOST)
    files = sorted(p.name for p in target.glob("*.yaml"))
    shown = target.relative_to(REPO_ROOT) if target.is_relative_to(REPO_ROOT) else target
    # a file's name may hold an escape sequence or a line break: shown as text, on this line
    say(f"created {printable(str(shown))} from {args.source}: "
        f"{', '.join(printable(f) for f in files)}")
    say("edit what differs on this machine (target_path, file_dir, devices, runtimes, grids), "
        f"then look before you run: iolab plan EXPERIMENT --env {name}")
    return 0
