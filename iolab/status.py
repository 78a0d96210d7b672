"""What ``iolab status`` reports on a data directory: each stored campaign's counts, its
repetition rule's progress and its Slurm jobs, then a running campaign, a killed one's leftover
processes and a crashed one's knob journal.

Responsible for: finding the campaigns stored under a data directory (``stores``, which
``iolab verify`` walks too) and working out the status report, line by line.
Not responsible for: printing it or reading the command line (``iolab.cli``), nor changing
anything: it only reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from iolab.core import registry
from iolab.errors import InputError, IolabError, printable


def stores(data_dir: Path, experiment: str | None = None, env: str | None = None):
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


def status_lines(data_dir: Path) -> Iterator[str]:
    """The report on ``data_dir``, each line as soon as it is worked out (a campaign's Slurm
    jobs ask Slurm, which can take a while)."""
    found = list(stores(data_dir))
    if not found:
        # the folder's name is the user's ($IOLAB_DATA): a line break in it is not a line
        yield f"no campaigns under {printable(str(data_dir / 'raw'))}"
    for exp, env, store in found:
        yield from _campaign_lines(exp, env, store, data_dir)
    yield from unusable_lines(data_dir)
    yield from _leftover_lines(data_dir)


def unusable_lines(data_dir: Path) -> Iterator[str]:
    """A line for each folder at a campaign's place under raw/ that iolab leaves alone."""
    from iolab.core.store import unusable_folders

    for folder in unusable_folders(data_dir):
        name = printable(str(folder.relative_to(data_dir)))  # a line break in it is text
        yield (f"not a campaign: {name} (no experiment or environment has such a name; "
               "iolab neither reads nor changes it)")


def _campaign_lines(exp: str, env: str, store, data_dir: Path) -> Iterator[str]:
    """One campaign: its counts and host, its corrupt runs, its rule's progress, its jobs."""
    try:
        host = store.read_host() or {}
        runs, corrupt = store.scan()
        yield (f"{exp}/{env}: {len(runs)} complete, {len(corrupt)} corrupt, "
               f"{len(store.failed_runs())} failed, {len(store.stale_tmp_dirs())} "
               f"interrupted; host {printable(str(host.get('hostname', '?')))} fingerprint "
               f"{printable(str(host.get('fingerprint', '?')))}")
        for c in corrupt:
            yield f"  corrupt: {c.describe()}"
        for line in _rule_lines(exp, env, data_dir):
            yield f"  {line}"
        for line in _job_lines(exp, env, store, data_dir):
            yield f"  {line}"
    except IolabError as exc:  # one unreadable campaign must not hide the others
        yield f"{exp}/{env}: cannot be read: {exc}"


def _leftover_lines(data_dir: Path) -> Iterator[str]:
    """A campaign running on ``data_dir``, and what a killed or crashed one left behind."""
    from iolab.core import locks
    from iolab import procs
    from iolab.execution.runner import default_journal

    holder = locks.holder(locks.data_lock_path(data_dir))
    if holder is not None:
        yield f"a campaign is running on this data directory: {locks.describe(holder)}"
    for p in procs.leftovers(data_dir):
        yield (f"leftover process of a killed campaign: {p.describe()}; 'iolab run' or "
               "'iolab restore' ends it")
    journal = default_journal(data_dir)
    if journal.exists() and holder is None:
        yield f"a knob journal is present at {journal}: a campaign crashed; run 'iolab restore'"


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
    try:
        records = jobs.read_all(folder)
    except IolabError as exc:  # a bad record: named, and the campaigns after it still shown
        return [f"its Slurm jobs cannot be read: {exc}"]
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
