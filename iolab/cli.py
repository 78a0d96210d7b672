"""Command line: ``iolab <verb>`` (also ``python -m iolab``).

Verbs call the same functions the notebooks call. Every verb takes ``--data DIR``.

Responsible for: argument parsing and printing. Not responsible for: any logic of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from pathlib import Path

from iolab.core import registry
from iolab import paths, streams
from iolab.batch.script import DEFAULT_SIGNAL_BEFORE_S
from iolab.core import spec as specmod
from iolab.core.planner import MAX_RUNS
from iolab.errors import InputError, IolabError, printable
from iolab.paths import PARAMS_DIR, REPO_ROOT, resolve_data_dir

DEFAULT_TEMPLATE_ENV = "kvm-2vcpu"


def _envs_help() -> str:
    envs = specmod.environments()
    return (f"environment: one of {', '.join(envs) or 'none yet'} (folders of "
            f"notebooks/params/); make a new one with 'iolab env new NAME'")


def _folder_arg(text: str) -> str:
    """A folder given on the command line: an empty one (an unset shell variable) is refused,
    not taken for the default."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty: give a folder (or leave the option out for "
                                         "the default)")
    return text


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", metavar="DIR", type=_folder_arg,
                   help="data folder (default: the repository's data/, or $IOLAB_DATA)")


def _add_campaign(p: argparse.ArgumentParser, imported: bool = False) -> None:
    extra = "; aisio-<name> for a campaign made by import-cijoe" if imported else ""
    p.add_argument("experiment", help=f"one of: {', '.join(registry.names())}{extra}")
    p.add_argument("--env", required=True, help=_envs_help())
    _add_common(p)


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a params key (dotted for nested keys, e.g. base.qdepth=64; "
                        "the value is read as YAML); repeatable, a later one for the same key "
                        "wins; validated like the file")
    p.add_argument("--where", action="append", default=[], metavar="VAR=VALUE",
                   help="only points whose variable has this value (or one of a YAML list); "
                        "repeatable, all must hold")
    p.add_argument("--limit", type=int, metavar="N", help="at most N of the runs still to do")
    p.add_argument("--max-runs", type=int, default=MAX_RUNS, metavar="N",
                   help=f"refuse a design of more than N runs (default {MAX_RUNS:,})")


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
        doc = plan.to_dict()
        if args.runs:
            doc["run_list"] = plan.table()
        print(json.dumps(doc, indent=2, default=str))
    elif args.format == "table":
        cols = camp.spec.variables + ["rep", "run_id", "status", "reason"]
        print("\t".join(cols))
        for row in plan.table():
            print("\t".join(str(row[c]) for c in cols))
    else:
        print(plan.summary())
    return 0


def cmd_run(args) -> int:
    from iolab.execution import stop

    camp = _campaign(args)
    result = camp.run(where=args.where, limit=args.limit, keep_going=args.keep_going,
                      progress=not args.no_progress, allow_host_change=args.allow_host_change,
                      max_runs=args.max_runs, allow_shared_node=args.allow_shared_node,
                      show_plan=lambda plan: print(plan.summary(), flush=True))
    for line in result.messages:
        print(line)
    print(f"completed {result.completed} runs, {len(result.failed)} failed")
    if result.interrupted:
        return 128 + (result.signal or 2)
    if result.failed:
        return 1
    return stop.EXIT_STOPPED if result.stopped else 0


def cmd_stop(args) -> int:
    from iolab.core import locks
    from iolab.execution import stop

    data_dir = _data_dir(args)
    holder = locks.holder(locks.data_lock_path(data_dir))
    if holder is None:
        print(f"no campaign is running on {data_dir} on this host; nothing to stop (a Slurm "
              "job's campaign runs on its node: scancel --batch --signal=USR1 JOBID)")
        return 0
    path = stop.request(data_dir, f"'iolab stop' by uid {os.getuid()}")
    print(f"asked the campaign ({locks.describe(holder)}) to stop after its current run "
          f"({path}); its knobs are restored as it ends")
    return 0


def _data_dir(args, write: bool = False) -> Path:
    from iolab.core import datadir

    return datadir.check(resolve_data_dir(args.data), write=write)


def _stores(data_dir: Path, experiment: str | None = None, env: str | None = None):
    """(experiment, environment, store) of every campaign under ``data_dir``, optionally one;
    stores of registered experiments and imports read version-1 manifests too."""
    from iolab.execution.campaign import source
    from iolab.core.store import Store, campaigns, open_store
    from iolab.paths import check_name

    if experiment is not None:
        check_name("experiment", experiment)
    if env is not None:
        check_name("environment", env)

    for exp, environment in campaigns(data_dir):
        if experiment not in (None, exp) or env not in (None, environment):
            continue
        try:
            yield exp, environment, open_store(source(exp), environment, data_dir)
        except InputError:  # a folder that is not a registered experiment: read as it is
            yield exp, environment, Store(data_dir, exp, environment)


def cmd_status(args) -> int:
    from iolab.core import locks
    from iolab import procs
    from iolab.execution.runner import default_journal

    data_dir = _data_dir(args)
    found = list(_stores(data_dir))
    if not found:
        print(f"no campaigns under {data_dir / 'raw'}")
    for exp, env, store in found:
        try:
            host = store.read_host() or {}
            runs, corrupt = store.scan()
            print(f"{exp}/{env}: {len(runs)} complete, {len(corrupt)} corrupt, "
                  f"{len(store.failed_runs())} failed, {len(store.stale_tmp_dirs())} "
                  f"interrupted; host {host.get('hostname', '?')} fingerprint "
                  f"{host.get('fingerprint', '?')}")
            for c in corrupt:
                print(f"  corrupt: {c.describe()}")
            for line in _rule_lines(exp, env, data_dir):
                print(f"  {line}")
            for line in _job_lines(exp, env, store, data_dir):
                print(f"  {line}")
        except IolabError as exc:  # one unreadable campaign must not hide the others
            print(f"{exp}/{env}: cannot be read: {exc}")
    holder = locks.holder(locks.data_lock_path(data_dir))
    if holder is not None:
        print(f"a campaign is running on this data directory: {locks.describe(holder)}")
    for p in procs.leftovers(data_dir):
        print(f"leftover process of a killed campaign: {p.describe()}; 'iolab run' or "
              "'iolab restore' ends it")
    journal = default_journal(data_dir)
    if journal.exists() and holder is None:
        print(f"a knob journal is present at {journal}: a campaign crashed; run 'iolab restore'")
    return 0


def _rule_lines(exp: str, env: str, data_dir: Path) -> list[str]:
    """Under a repetition rule, the points' decisions by reason and the runs still to do."""
    from iolab.execution.campaign import Campaign
    from iolab.core.repetitions import REASON_TEXT

    if exp not in registry.names():
        return []
    try:
        campaign = Campaign(exp, env, data_dir=data_dir)
    except InputError:  # no params file for this environment (any more): nothing to decide
        return []
    rule = campaign.spec.rule
    if rule.fixed:
        return []
    try:
        plan = campaign.plan()
    except IolabError as exc:
        return [f"its params' rule cannot be applied: {exc}"]
    settled = plan.settled()
    counts = ", ".join(f"{n} {REASON_TEXT[r]}" for r, n in settled.items())
    return [f"rule (of the params file): {rule.min} to {rule.max} runs per point, until the "
            f"{rule.confidence * 100:g} % CI of {rule.metric} is within "
            f"±{rule.target_ci_pct:g} %: {counts}; {plan.counts()['to run']} to "
            f"{plan.to_run_max} runs still to do"]


def _job_lines(exp: str, env: str, store, data_dir: Path) -> list[str]:
    """The campaign's Slurm jobs with their states, and what the last job's selection has
    left to run."""
    from iolab.batch import jobs
    from iolab.host import slurm

    folder = jobs.jobs_dir(store.root)
    records = jobs.read_all(folder)
    if not records:
        return []
    try:
        states = slurm.job_states([r.job_id for r in records])
    except IolabError as exc:
        return [jobs.describe(r, None, folder, unknown=str(exc)) for r in records]
    lines = [jobs.describe(r, states.get(r.job_id), folder) for r in records]
    last = records[-1]
    if last.mode == "run" and exp in registry.names():
        from iolab.execution.campaign import Campaign

        try:
            plan = Campaign(exp, env, data_dir=data_dir,
                            overrides=last.options.get("overrides") or []).plan(
                where=last.options.get("where") or [])
            c = plan.counts()
            lines.append(f"the last job's selection: {c['stored']} stored, {c['to run']} to "
                         f"run, {c['blocked']} blocked on this host")
        except IolabError as exc:
            lines.append(f"the last job's selection cannot be planned: {exc}")
    return lines


def cmd_verify(args) -> int:
    from iolab.core import locks, tidy

    data_dir = _data_dir(args, write=args.quarantine)
    lock = locks.data_lock(data_dir) if args.quarantine else None
    if lock:
        lock.acquire()
    try:
        bad = 0
        chosen = list(_stores(data_dir, args.experiment, args.env))
        if not chosen:
            print(f"no campaigns under {data_dir / 'raw'}"
                  + (f" matching {args.experiment or ''}/{args.env or ''}"
                     if args.experiment or args.env else ""))
        for exp, env, store in chosen:
            runs, corrupt = store.scan(rehash=not args.fast)
            print(f"{exp}/{env}: {len(runs)} intact, {len(corrupt)} corrupt")
            for c in corrupt:
                print(f"  corrupt: {c.describe()}")
            if corrupt:
                tidy.forget(data_dir, exp, env)  # a cached table must not hide them
            if corrupt and args.quarantine:
                for line in store.quarantine_corrupt(corrupt):
                    print(f"  {line}")
            elif corrupt:
                bad += len(corrupt)
        if chosen and args.fast:
            print("--fast: a file whose size and modification time match its last "
                  "verification was not read again; an alteration that kept both is not seen")
        if bad:
            print(f"{bad} corrupt runs; restore them (git checkout, a backup) or move them "
                  "aside with 'iolab verify --quarantine'")
        return 1 if bad else 0
    finally:
        if lock:
            lock.release()


def cmd_restore(args) -> int:
    from iolab.execution.runner import default_journal
    from iolab.host.journal import restore_from_journal
    from iolab.host.knobset import make_knobs

    from iolab.core import locks
    from iolab import procs

    data_dir = _data_dir(args)
    journal = Path(args.journal) if args.journal else default_journal(data_dir)
    with locks.data_lock(data_dir) as dlock, locks.host_lock(data_dir) as hlock:
        lines = dlock.messages + hlock.messages + procs.end_leftovers(data_dir)
        lines += restore_from_journal(journal, make_knobs())
    for line in lines:
        print(line)
    return 0


def cmd_clean(args) -> int:
    from iolab.core import locks
    from iolab.host import scratch

    registry = scratch.Registry()
    # the host lock: a campaign running now reads these files
    with locks.host_lock(None) if not args.dry_run else contextlib.nullcontext():
        lines = scratch.clean(registry, dry_run=args.dry_run,
                              under=Path(args.under) if args.under else None)
    for line in lines:
        print(line)
    if not lines:
        print(f"no scratch files of iolab's on this host (registry {registry.path})"
              + (f" under {args.under}" if args.under else ""))
    return 0


def cmd_tidy(args) -> int:
    from iolab.execution.campaign import source
    from iolab.core.tidy import load

    if args.format == "parquet" and not args.output:
        raise IolabError("--format parquet needs -o FILE (parquet is binary)")
    if args.output:
        _check_output(Path(args.output))  # before the table is built: nothing done in vain
    if args.decisions:
        import pandas as pd

        from iolab.execution.campaign import Campaign

        if args.experiment not in registry.names():
            raise IolabError(f"--decisions: '{args.experiment}' has no params file to "
                             "decide with (an imported campaign)")
        df = pd.DataFrame(Campaign(args.experiment, args.env, data_dir=_data_dir(args))
                          .plan().decision_rows())
    else:
        df = load(_data_dir(args), source(args.experiment), args.env,
                  allow_mixed_hosts=args.allow_mixed_hosts, skip_corrupt=args.skip_corrupt)
    if df.attrs.get("corrupt_skipped"):
        print(f"left out {df.attrs['corrupt_skipped']} corrupt runs ('iolab verify' names them)",
              file=sys.stderr)
    if not args.output:
        df.to_csv(sys.stdout, index=False)
    else:
        _write_table(df, Path(args.output), args.format)
    if args.output:
        print(f"wrote {len(df)} rows to {args.output}", file=sys.stderr)
    return 0


def _check_output(out: Path) -> None:
    """Refuse an output path that cannot take a file, naming -o."""
    if not out.parent.is_dir():
        raise InputError("-o", None, f"{out}: its folder {out.parent} "
                         f"{'is not a folder' if out.parent.exists() else 'does not exist'}")
    if out.is_dir():
        raise InputError("-o", None, f"{out} is a folder", allowed="a file path")


def _write_table(df, out: Path, fmt: str) -> None:
    """The table into ``out``, written whole or not at all; a refusal names -o."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        if fmt == "parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise IolabError(f"-o {out}: cannot be written ({exc.strerror or exc})") from None


def cmd_import_cijoe(args) -> int:
    from iolab.importers.cijoe import import_archive

    from iolab.core import locks
    from iolab.paths import check_name

    # both become folders: checked before the archive is read or anything is written
    check_name("experiment", args.experiment)
    specmod.check_environment_name(args.env)
    data_dir = _data_dir(args, write=True)
    with locks.data_lock(data_dir):
        report = import_archive(Path(args.archive), args.experiment, args.env, data_dir,
                                progress=not args.no_progress)
    print(report.summary())
    return 1 if report.disagreements or report.failed else 0


def cmd_book(args) -> int:
    from iolab.core.tidy import SKIP_CORRUPT_VAR
    from iolab.report.book import build, clean, render, write_glue_snapshot

    if args.clean:
        clean()
        shutil.rmtree(REPO_ROOT / "_build", ignore_errors=True)
        return 0
    data_dir = _data_dir(args) if args.data else None
    if args.skip_corrupt:
        os.environ[SKIP_CORRUPT_VAR] = "1"  # the notebooks' kernels inherit it
    if not args.no_render:
        render(data_dir, force=args.force)
    if args.glue_snapshot:
        write_glue_snapshot(Path(args.glue_snapshot))
        print(f"wrote the glued values to {args.glue_snapshot}")
    if args.render_only:
        return 0
    return build(strict=not args.lenient, force=args.force)


def cmd_notebook(args) -> int:
    from iolab.batch.job import run_notebook

    if args.limit is not None and args.limit < 0:
        raise InputError("--limit", None, f"{args.limit} is negative", allowed="0 or more")
    out = Path(args.output or f"{args.experiment}-{args.env}-{args.mode}.ipynb")
    return run_notebook(args.experiment, args.env, mode=args.mode, output=out,
                        data_dir=_data_dir(args) if args.data else None,
                        overrides=args.overrides, where=args.where, limit=args.limit,
                        allow_shared_node=args.allow_shared_node,
                        allow_host_change=args.allow_host_change, resubmit=args.resubmit)


def _slurm_options(args) -> dict[str, str]:
    from iolab.batch.script import SLURM_OPTIONS

    return {key: getattr(args, key) for key in SLURM_OPTIONS if getattr(args, key)}


def cmd_submit(args) -> int:
    from iolab.batch import submit

    if args.resume:
        given = [flag for flag, value in (("--set", args.overrides), ("--where", args.where),
                                          ("--limit", args.limit is not None),
                                          ("--requeue", args.requeue),
                                          ("--allow-host-change", args.allow_host_change),
                                          ("--signal-before",
                                           args.signal_before != DEFAULT_SIGNAL_BEFORE_S),
                                          ("--sbatch", args.sbatch),
                                          ("--mode", args.mode != "run"))
                 if value] + [f"--{k}" for k in _slurm_options(args)]
        if given:
            raise InputError("--resume", None, f"takes the options of the last job's script, "
                             f"not {', '.join(given)}", allowed="--resume with --env and --data "
                             "only; submit anew to change options")
        for experiment in args.experiments:
            for env in args.env:
                submit.resume(experiment, env, args.data)
        return 0
    request = submit.Request(mode=args.mode, data_dir=args.data, overrides=args.overrides,
                             where=args.where, limit=args.limit, requeue=args.requeue,
                             allow_host_change=args.allow_host_change,
                             signal_before_s=args.signal_before, slurm=_slurm_options(args),
                             sbatch_args=args.sbatch)
    submit.submit(args.experiments, args.env, request)
    return 0


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
        print(f"{r['name']}: {r['title']}\n  label {r['label']}; notebook {r['notebook']}; "
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
    data = _data_dir(args)
    found = {env: findings_of(Chapter(args.experiment, env, mode="replay", data_dir=data))
             for env in envs}
    print(compare.as_text(compare.table(found)))
    return 0


def cmd_search_replay(args) -> int:
    from iolab.execution.campaign import Campaign
    from iolab.core.search import replay

    if args.seeds < 1:
        raise InputError("iolab search-replay", "--seeds", f"{args.seeds}", allowed="1 or more")
    data = _data_dir(args)
    campaign = Campaign(args.experiment, args.env, data_dir=data)
    grid = replay.grid_of(campaign.plan(as_recorded=True))
    seeds = list(range(args.seeds))
    rows = replay.derive(grid, seeds, jobs=max(1, args.jobs), progress=not args.no_progress)
    path = replay.derived_path(data, args.experiment, args.env)
    replay.write(rows, replay.meta(grid, seeds, replay.BUDGET_SHARES, replay.COMPARED,
                                   args.experiment, args.env), path)
    print(replay.summary(rows, grid.runs).to_string(index=False))
    print(f"wrote {path}")
    return 0


def cmd_env_new(args) -> int:
    name = specmod.check_environment_name(args.name)
    source = PARAMS_DIR / specmod.check_environment_name(args.source)
    target = PARAMS_DIR / name
    if not source.is_dir():
        raise InputError(source, None, f"no environment '{args.source}' to copy",
                         allowed=", ".join(specmod.environments()))
    if target.exists():
        raise InputError(target, None, "exists already; edit its files, or choose another name")
    shutil.copytree(source, target)
    files = sorted(p.name for p in target.glob("*.yaml"))
    shown = target.relative_to(REPO_ROOT) if target.is_relative_to(REPO_ROOT) else target
    print(f"created {shown} from {args.source}: {', '.join(files)}")
    print("edit what differs on this machine (target_path, file_dir, devices, runtimes, grids), "
          f"then look before you run: iolab plan EXPERIMENT --env {name}")
    return 0


def cmd_migrate(args) -> int:
    from iolab.core import locks

    data_dir = _data_dir(args, write=args.apply)
    with locks.data_lock(data_dir) if args.apply else contextlib.nullcontext():
        return _migrate(args, data_dir)


def _migrate(args, data_dir: Path) -> int:
    from iolab.execution.campaign import source
    from iolab.core import migrate
    from iolab.core.store import campaigns, open_store
    from iolab.importers.aisio import PREFIX

    chosen = [(e, v) for e, v in campaigns(data_dir)
              if (args.experiment in (None, e)) and (args.env in (None, v))]
    pending = 0
    for exp, env in chosen:
        if not (exp.startswith(PREFIX) or exp in registry.names()):
            print(f"{exp}/{env}: not a registered experiment; skipped")
            continue
        todo = migrate.plan(open_store(source(exp), env, data_dir))
        if not todo:
            print(f"{exp}/{env}: nothing to migrate")
            continue
        pending += len(todo)
        left = [m for m in todo if m.problem]
        print(f"{exp}/{env}: {len(todo)} version-1 runs")
        # every run left as it is is listed; of the others, the first few
        shown = left + [m for m in todo if not m.problem][:args.show]
        for m in shown:
            print(f"  {m.describe()}")
        if len(todo) > len(shown):
            print(f"  ... and {len(todo) - len(shown)} more")
        if args.apply:
            done = migrate.apply(todo, log=lambda line: None)
            print(f"  done: {done} runs rewritten as version 2"
                  + (f"; {len(left)} left as they are" if left else ""))
    if pending and not args.apply:
        print("dry run: nothing was changed; add --apply to migrate")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse's parser, refusing bad arguments in one line that says where help is."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {printable(message)} (see '{self.prog} --help')\n")


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="iolab", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = parser.add_subparsers(dest="verb", required=True)

    p = sub.add_parser("plan", help="show what a campaign would run, with counts, an ETA and "
                       "the programs it needs (touches nothing)")
    _add_campaign(p)
    _add_selection(p)
    p.add_argument("--format", choices=["text", "json", "table"], default="text",
                   help="text (default), one JSON object, or one tab-separated line per run")
    p.add_argument("--runs", action="store_true", help="with --format json: every run too")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("run", help="run every planned point not stored yet (resumable)")
    _add_campaign(p)
    _add_selection(p)
    p.add_argument("--keep-going", action="store_true", help="record a failing run and continue")
    p.add_argument("--allow-host-change", action="store_true",
                   help="add runs from a host whose fingerprint differs from the campaign's")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--allow-shared-node", action="store_true",
                   help="inside a Slurm job on a node shared with other jobs, change system "
                        "settings all the same (refused by default)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("stop", help="ask the campaign running on a data directory to stop "
                       "after its current run (exit status 3 tells it stopped early)")
    _add_common(p)
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("status", help="list stored campaigns and a crashed run's journal")
    _add_common(p)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("verify", help="read every stored run's raw files and check them "
                       "against the sha256 sums in its run.json (exit 1 when any run is "
                       "corrupt)")
    p.add_argument("experiment", nargs="?", help="only this campaign name")
    p.add_argument("--env", help="only this environment")
    p.add_argument("--quarantine", action="store_true", help="move corrupt runs to partial/ "
                   "(never deleted) so that 'iolab run' measures them again")
    p.add_argument("--fast", action="store_true", help="trust the cache of verified files: a "
                   "file whose size and modification time match its last verification is not "
                   "read again (an alteration that kept both is then not seen)")
    _add_common(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("restore", help="end a killed campaign's leftover processes and restore "
                       "the knobs it left changed")
    _add_common(p)
    p.add_argument("--journal", help="journal file (default: DATA/.knob-journal.json)")
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser("clean", help="remove the scratch files iolab wrote for its runs (the "
                       "target files it reads): only files it created and that are still as it "
                       "left them; never a stored run, never another file")
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.add_argument("--under", metavar="DIR", help="only files under this folder")
    p.set_defaults(func=cmd_clean)

    p = sub.add_parser("tidy", help="the tidy table (one row per repetition) as CSV or parquet")
    _add_campaign(p, imported=True)
    p.add_argument("--format", choices=["csv", "parquet"], default="csv")
    p.add_argument("-o", "--output", help="output file (default: CSV on stdout)")
    p.add_argument("--allow-mixed-hosts", action="store_true", help="pool rows from different hosts")
    p.add_argument("--skip-corrupt", action="store_true", help="leave out corrupt runs (say "
                   "how many) instead of failing")
    p.add_argument("--decisions", action="store_true", help="instead, one row per point: its "
                   "runs (n), the mean of the repetition rule's metric, the interval's "
                   "half-width in %% of the mean and the rule's decision")
    p.set_defaults(func=cmd_tidy)

    p = sub.add_parser("import-cijoe", help="import an AiSIO CIJOE result archive, re-deriving "
                       "every metric from its raw output (exit 1 on disagreements or failures)")
    p.add_argument("archive", help="the archive (.tar.gz) or its extracted folder")
    takers = ", ".join(e.name for e in registry.all_experiments() if getattr(e, "aisio_kinds", ()))
    p.add_argument("--experiment", required=True,
                   help=f"aisio-<name> (a campaign of its own) or an experiment that takes "
                        f"AiSIO's runs ({takers})")
    p.add_argument("--env", required=True, help="environment name")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_common(p)
    p.set_defaults(func=cmd_import_cijoe)

    p = sub.add_parser("book", help="replay the notebooks from stored data and build the book strictly")
    _add_common(p)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--no-render", action="store_true",
                      help="build from the notebooks already in book/")
    what.add_argument("--render-only", action="store_true",
                      help="replay the notebooks, do not build")
    p.add_argument("--lenient", action="store_true", help="build without -W -n (warnings do not fail)")
    what.add_argument("--clean", action="store_true",
                      help="remove the rendered notebooks and _build/")
    p.add_argument("--force", action="store_true", help="replay every notebook and build, even "
                   "those whose inputs did not change since the last time")
    p.add_argument("--skip-corrupt", action="store_true", help="leave corrupt runs out of the "
                   "chapters (each says how many) instead of failing")
    p.add_argument("--glue-snapshot", metavar="FILE", help="also write every glued text value "
                   "to FILE (JSON), e.g. tests/fixtures/glued_values.json after an intended change")
    p.set_defaults(func=cmd_book)

    p = sub.add_parser("notebook", help="execute an experiment's notebook (e.g. as a batch job "
                       "that runs the campaign and renders it), bounded by the cell and kernel "
                       "start timeouts of its params")
    _add_campaign(p)
    p.add_argument("--mode", choices=["replay", "plan", "run"], default="replay")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a params key, as for 'plan' and 'run'")
    p.add_argument("--where", action="append", default=[], metavar="VAR=VALUE",
                   help="with --mode run: only these points, as for 'run'")
    p.add_argument("--limit", type=int, metavar="N", help="with --mode run: at most N runs")
    p.add_argument("--allow-shared-node", action="store_true",
                   help="with --mode run: as for 'run'")
    p.add_argument("--allow-host-change", action="store_true",
                   help="with --mode run: as for 'run'")
    p.add_argument("--resubmit", action="store_true", help="in a Slurm job of 'iolab submit': "
                   "when the campaign stopped before the time limit with runs left, submit the "
                   "job's script again (what 'iolab submit --requeue' asks for)")
    p.add_argument("-o", "--output", help="the executed notebook (default: "
                   "EXPERIMENT-ENV-MODE.ipynb here)")
    p.set_defaults(func=cmd_notebook)

    p = sub.add_parser("submit", help="run campaigns as Slurm batch jobs: write a batch script "
                       "into each campaign's jobs/ folder and submit it (one job per "
                       "experiment and environment)")
    p.add_argument("experiments", nargs="+", metavar="experiment",
                   help=f"one or more of: {', '.join(registry.names())}")
    p.add_argument("--env", action="append", required=True,
                   help=_envs_help() + "; repeatable")
    _add_common(p)
    p.add_argument("--mode", choices=["run", "replay", "plan"], default="run",
                   help="what the job's notebook does (default run: measure what is left, on a "
                        "node of its own)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a params key, as for 'run'")
    p.add_argument("--where", action="append", default=[], metavar="VAR=VALUE",
                   help="only these points, as for 'run'")
    p.add_argument("--limit", type=int, metavar="N", help="at most N runs in each job")
    p.add_argument("--partition", help="the Slurm partition (checked with sinfo)")
    p.add_argument("--time", help="the job's time limit, as sbatch takes it (e.g. 2:00:00)")
    p.add_argument("--nodelist", help="the node(s) to run on, as sbatch takes it")
    p.add_argument("--account", help="the Slurm account to charge")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="one more sbatch option, written as a #SBATCH line (repeatable; give "
                        "it with =, e.g. --sbatch=--mem=0)")
    p.add_argument("--signal-before", type=int, default=DEFAULT_SIGNAL_BEFORE_S,
                   metavar="SECONDS",
                   help="ask Slurm for SIGUSR1 this long before the time limit, when the "
                        f"campaign stops after its current run (default {DEFAULT_SIGNAL_BEFORE_S})")
    p.add_argument("--allow-host-change", action="store_true",
                   help="as for 'run': add runs from a host whose fingerprint differs from "
                        "the campaign's")
    p.add_argument("--requeue", action="store_true",
                   help="a job stopped before its time limit with runs left submits the next "
                        "job itself")
    p.add_argument("--resume", action="store_true",
                   help="submit each campaign's last script again (after its job, if that "
                        "has not ended): the campaign goes on where it stopped")
    p.set_defaults(func=cmd_submit)

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
    _add_common(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("search-replay", help="replay search strategies offline against a "
                       "stored full grid, many seeds each, into data/derived/search_replay/")
    p.add_argument("experiment", help=f"one of: {', '.join(registry.names())}")
    p.add_argument("--env", required=True, help="the environment whose params sweep the grid "
                   "(search: {strategy: grid})")
    p.add_argument("--seeds", type=int, default=100, help="replays per strategy and budget")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_common(p)
    p.set_defaults(func=cmd_search_replay)

    p = sub.add_parser("env", help="environments (notebooks/params/<name>/)")
    env_sub = p.add_subparsers(dest="env_verb", required=True)
    q = env_sub.add_parser("new", help="a new environment: a copy of another's params files")
    q.add_argument("name", help="the new environment's name (a folder name)")
    q.add_argument("--from", dest="source", default=DEFAULT_TEMPLATE_ENV,
                   help=f"environment to copy (default: {DEFAULT_TEMPLATE_ENV})")
    q.set_defaults(func=cmd_env_new)

    p = sub.add_parser("migrate", help="rewrite version-1 run manifests as version 2 (dry run "
                       "unless --apply; running it twice changes nothing)")
    p.add_argument("experiment", nargs="?", help="only this campaign name")
    p.add_argument("--env", help="only this environment")
    p.add_argument("--apply", action="store_true", help="do it (default: only show what would happen)")
    p.add_argument("--show", type=int, default=5, metavar="N", help="list N runs per campaign")
    _add_common(p)
    p.set_defaults(func=cmd_migrate)
    _debug_everywhere(parser)
    return parser


def _debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after the verb too (``iolab plan ... --debug``), as before it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                 help="show a traceback on errors")
                _debug_everywhere(sub)


def main(argv: list[str] | None = None) -> int:
    """Run one verb; its exit status: 0, 1 (runs failed, corrupt runs found), 2 (bad input or
    a refusal, one line on standard error), 3 (a campaign stopped on request), 70 (a bug in
    iolab), 128 + N (a campaign ended by signal N), 74 or 141 (it succeeded, but its output
    was lost)."""
    saved = sys.stdout, sys.stderr
    out, err = streams.guard()
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:  # argparse: --help, or a refusal it printed
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    finally:
        # flushed here, so that output lost in a buffer is seen now and not at exit
        streams.settle(out, err)
        if saved[0] is not None and saved[1] is not None:
            sys.stdout, sys.stderr = saved
    return streams.exit_status(code, out, err)


EXIT_INTERNAL = 70  # EX_SOFTWARE of sysexits.h: a bug of iolab's, not the user's input


def _main(argv: list[str] | None) -> int:
    from iolab.core.datadir import from_os_error

    args = make_parser().parse_args(argv)
    elsewhere = paths.foreign_checkout()
    if elsewhere is not None:
        print(f"iolab: warning: this is the iolab of {paths.REPO_ROOT}, not of the checkout "
              f"you are in ({elsewhere}): its params, data and book are that one's; make this "
              "checkout's own virtualenv (make setup venv) to work on this one",
              file=sys.stderr)
    try:
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C before a campaign began (a campaign handles its own)
        print("iolab: interrupted", file=sys.stderr)
        return 130
    except IolabError as exc:
        if args.debug:
            raise
        print(f"iolab: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file system's refusal is the user's to fix, not a bug
        if args.debug:
            raise
        print(f"iolab: error: {from_os_error(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: one line with how to see more, and its own status
        if args.debug:
            raise
        print(f"iolab: internal error (a bug in iolab, please report it): "
              f"{type(exc).__name__}: {printable(str(exc))}; run the same command with "
              "--debug for the traceback", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
