"""``iolab experiments`` and ``iolab compare``: what the registry holds, and an experiment's
findings in several environments side by side.

Responsible for: their options, and printing the registry's rows and the comparison's table.
Not responsible for: the findings or how they are compared (``iolab.report.compare``).
"""

from __future__ import annotations

import argparse
import json

from iolab.cli.common import add_common, data_dir_of, say
from iolab.core import registry
from iolab.core import spec as specmod
from iolab.errors import InputError
from iolab.paths import REPO_ROOT


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiments", help="list the experiments, their chapters, notebooks "
                       "and the environments that have params")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_experiments)

    p = sub.add_parser("compare", help="an experiment's findings in two or more environments, "
                       "side by side: which replicate, which differ, which cannot be compared")
    p.add_argument("experiment", help=f"one of: {', '.join(registry.names())}")
    p.add_argument("--env", action="append", required=True,
                   help="an environment with stored runs (twice or more; the first is the "
                        "one the others are set against)")
    add_common(p)
    p.set_defaults(func=cmd_compare)


def cmd_experiments(args) -> int:
    rows = []
    for exp in registry.all_experiments():
        rows.append({"name": exp.name, "label": exp.label, "title": exp.title,
                     "notebook": str(exp.notebook.relative_to(REPO_ROOT))
                     if exp.notebook.is_relative_to(REPO_ROOT) else str(exp.notebook),
                     "chapter": f"book/{exp.chapter}.ipynb",
                     "environments": specmod.environments(exp.name, exp.params_dir)})
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        say(f"{r['name']}: {r['title']}\n  label {r['label']}; notebook {r['notebook']}; "
            f"chapter {r['chapter']}\n  environments with params: "
            f"{', '.join(r['environments']) or 'none'}")
    return 0


def cmd_compare(args) -> int:
    from iolab.report import compare
    from iolab.report.chapter import Chapter

    envs = list(dict.fromkeys(args.env))
    if len(envs) < 2:
        raise InputError("iolab compare", "--env", f"{len(envs)} environment given",
                         allowed="two or more, each with --env")
    findings_of = registry.findings_function(registry.get(args.experiment))
    data = data_dir_of(args)
    found = {env: findings_of(Chapter(args.experiment, env, mode="replay", data_dir=data))
             for env in envs}
    say(compare.as_text(compare.table(found)))
    return 0
