"""``iolab replicate``: the replication packs of the local experiments, measured on this host
into an environment named after it.

Each local experiment's params file of the book's VM (``notebooks/params/kvm-2vcpu/``) holds a
``replicate:`` pack: the few points behind its chapter's findings (``grids``) and their
repetition rule (``repetitions``). This module

- names the environment after the host (:func:`environment_name`: the CPU's model family and
  the kernel build, ``xeon-v657``, ``epyc-v782``);
- writes that environment's params files, one per pack: the source file with the pack's grids
  and repetitions in place of its own (:func:`pack_document`), leaving a file that exists
  as it is (made by an earlier call, perhaps edited for this machine), so that a second call
  continues the same campaigns, and never writing through a link at the environment's (or
  the params) folder;
- plans every pack with the campaign's own planner, so the ETA is ``iolab plan``'s, and
  refuses to start on a busy machine (:func:`busy`: load average, or foreign CPU over a short
  sample) unless told ``--busy-ok``, which the campaign log records (its ``quiet`` line).

Responsible for: the packs, the name, the environment's params, the plan of all packs and the
quiet check. Not responsible for: running a campaign (``iolab.execution.campaign``), what a
run records of the machine's quiet (``iolab.collectors.quiet``), or the chapters.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from iolab.collectors import quiet
from iolab.core import spec as specmod
from iolab.core.planner import format_duration
from iolab.errors import InputError, IolabError
from iolab.paths import NAME, NAME_MOST, PARAMS_DIR, shown
from iolab.safefiles import NotOurs, own_folder

SOURCE_ENV = "kvm-2vcpu"   # the book's VM: its params files hold the local experiments' packs
BUDGET_S = 20 * 60        # what the packs together may take on a 2-vCPU machine (issue 45)
# the stated shares of a busy machine: a one-minute load average above half of its CPUs, or
# other processes' CPU above iolab.collectors.quiet's share over a short sample
LOAD_PER_CPU = 0.5
SAMPLE_S = 2.0
# keys of a params file that name grids of the file's own design, meaningless beside the
# pack's grids; the seed is drawn anew for the pack's campaign
_DROPPED = ("search", "confirm", "seed")

# the model family: the first of these words in the model name, as it is spelled there
_FAMILIES = ("epyc", "xeon", "ryzen", "threadripper", "opteron", "core", "atom", "pentium",
             "celeron", "neoverse", "graviton", "ampere", "power", "thunderx")
# words of a model name that say nothing of its family
_NOISE = {"intel", "amd", "r", "tm", "cpu", "processor", "genuine", "authentic", "with",
          "radeon", "graphics", "apple", "arm"}


def environment_name(model_name: str | None, kernel_release: str | None) -> str:
    """The environment of a host: its CPU's model family and its kernel build, lower case,
    only the characters an environment name allows. 'Intel(R) Xeon(R) Processor' on
    '6.18.44-fc-v657' gives 'xeon-v657'; 'AMD EPYC 7B13' on '6.1.0-18-amd64' gives
    'epyc-6.1.0-18'. The build is the release's last part when it is a build tag (a letter
    and digits, 'v657'), else the release without its trailing words ('amd64', 'generic')."""
    words = re.findall(r"[a-z0-9]+", (model_name or "").lower())
    family = next((w for w in words if w in _FAMILIES), None)
    if family is None:
        family = next((w for w in words if w not in _NOISE and not w.isdigit()), "cpu")
    return _clean(f"{family}-{_kernel_build(kernel_release or '')}")


# trailing parts of a kernel release that name its architecture or flavour, not its build
_FLAVOURS = {"amd64", "arm64", "x86_64", "aarch64", "i386", "i686", "ppc64le", "s390x",
             "generic", "cloud", "aws", "azure", "gcp", "kvm", "rt", "lowlatency", "virtual"}


def _kernel_build(release: str) -> str:
    parts = [p for p in release.strip().lower().split("-") if p]
    while len(parts) > 1 and (parts[-1] in _FLAVOURS or not any(c.isdigit() for c in parts[-1])):
        parts.pop()  # 6.1.0-18-amd64, 5.15.0-91-generic
    if len(parts) > 1 and re.fullmatch(r"[a-z]+[0-9]+", parts[-1]):
        return parts[-1]  # a build tag: 6.18.44-fc-v657
    return "-".join(parts) or "unknown"


def _clean(name: str) -> str:
    """Only letters, digits, '.', '_' and '-', starting with a letter or digit, no '..', at
    most NAME_MOST characters."""
    name = re.sub(r"[^a-z0-9._-]+", "-", name)
    # a run of separators is one: a '-' where it holds one, else its first ('..' never)
    name = re.sub(r"[-._]{2,}", lambda m: "-" if "-" in m.group() else m.group()[0], name)
    # cut to the longest name allowed: a kernel release alone may be 64 characters
    name = name[:NAME_MOST].strip("-._") or "host"
    assert NAME.fullmatch(name) and len(name) <= NAME_MOST, name
    return name


def host_environment() -> str:
    """The environment name of this host, from what its inventory reads."""
    from iolab.host.inventory import collect_inventory

    inventory = collect_inventory({})
    return environment_name((inventory.get("cpu") or {}).get("model_name"),
                            inventory.get("kernel_release"))


def _experiment(experiment):
    """An experiment, given as one or by its name."""
    from iolab.core import registry

    return registry.get(experiment) if isinstance(experiment, str) else experiment


def pack_document(experiment, source_env: str = SOURCE_ENV,
                  params_dir: Path = PARAMS_DIR) -> dict[str, Any]:
    """The params of ``experiment``'s pack: the source environment's file with the pack's
    grids and repetitions in place of its own (and without what names the file's own grids:
    its search and confirmation step). InputError naming the file when it has no pack."""
    exp = _experiment(experiment)
    spec = specmod.load(exp, source_env, params_dir=params_dir)  # checks the pack too
    if spec.replicate is None:
        raise InputError(spec.params_file, "replicate", "missing: this experiment has no "
                         "replication pack here", allowed="replicate: {grids: ..., "
                         "repetitions: ...}, the points behind the chapter's findings")
    doc = specmod.read_params_doc(spec.params_file)
    out = {k: v for k, v in doc.items() if k not in (*_DROPPED, "replicate")}
    out.update(spec.replicate)
    _check_pack_size(exp, out, spec)
    return out


def _check_pack_size(exp, doc: dict[str, Any], source: specmod.Spec) -> None:
    """InputError naming the source file and ``replicate.grids`` when the pack's design is
    larger than a plan holds (planner.MAX_POINTS points, MAX_RUNS runs): checked here, on
    what the user wrote, since the plan that would refuse it reads a draft in a temporary
    folder, deleted by the time its error is read, under a key the user never wrote there."""
    from iolab.core.planner import MAX_POINTS, MAX_RUNS, design_points, design_size

    pack = specmod.validate(exp, source.environment, doc, source.params_file)
    points, runs = design_points(pack), design_size(pack)
    if points > MAX_POINTS or runs > MAX_RUNS:
        per_grid = ", ".join(f"{name}: {math.prod(len(v) for v in g['vary'].values()):,} "
                             "points" for name, g in pack.grids.items())
        raise InputError(source.params_file, "replicate.grids", f"the pack's design has up to "
                         f"{points:,} points and {runs:,} runs ({per_grid}), more than a plan "
                         "holds; shrink the pack's grids",
                         allowed=f"at most {MAX_POINTS:,} points and {MAX_RUNS:,} runs")


def pack_text(experiment: str, source_env: str, doc: dict[str, Any]) -> str:
    head = (f"# The replication pack of {experiment}, made by 'iolab replicate' from\n"
            f"# notebooks/params/{source_env}/{experiment}.yaml (its 'replicate' key): the "
            "points behind\n# the chapter's findings. Edit what differs on this machine "
            "(paths, devices); a run\n# already stored stays stored only while its point "
            "and settings stay the same.\n")
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=96)


@dataclass
class Pack:
    """One experiment's pack in the replication environment."""
    experiment: Any       # the experiment (an Experiment, or its name)
    params_dir: Path      # where its params file is (the environment's, or a draft's)
    created: bool         # whether this call wrote it into the environment


def prepare(env: str, experiments: tuple, source_env: str = SOURCE_ENV, *,
            write: bool, params_dir: Path = PARAMS_DIR,
            draft_dir: Path | None = None) -> list[Pack]:
    """Each pack's params file: the environment's own where it exists, else the pack made
    from the source (written into the environment with ``write``, else into ``draft_dir``
    for a plan that writes nothing)."""
    specmod.check_environment_name(env)
    packs = []
    for experiment in experiments:
        name = _experiment(experiment).name
        target = specmod.params_path(name, env, params_dir)
        if os.path.lexists(target):
            packs.append(Pack(experiment, params_dir, False))
            continue
        text = pack_text(name, source_env, pack_document(experiment, source_env, params_dir))
        base = params_dir if write else draft_dir
        if base is None:
            raise ValueError("a draft folder is needed to plan without writing")
        path = specmod.params_path(name, env, base)
        # never through a link at the environment's folder (or the params folder): the pack
        # would be written wherever it points
        own_folder(path.parent, f"the params of environment '{env}'", 2)
        with open(path, "x") as f:  # never over a file: one made meanwhile is kept
            f.write(text)
        packs.append(Pack(experiment, base, write))
    return packs


def check_source(source_env: str, params_dir: Path = PARAMS_DIR) -> str:
    """``source_env`` if it names an environment of ``params_dir``; else InputError. A path
    (``../x``, ``/tmp/x``) would read params from outside the params folder, and a misspelt
    name would give no pack at all, which reads as every pack done."""
    try:
        specmod.check_environment_name(source_env)
    except InputError as exc:
        raise InputError("--from", None, exc.problem, allowed=exc.allowed) from None
    folder = Path(params_dir) / source_env
    if os.path.islink(folder):
        # never followed: its params (and the packs copied from them) would be read from
        # wherever it points, a folder outside the checkout another user may keep
        try:
            target = os.readlink(folder)
        except OSError:  # removed since
            target = "an unreadable target"
        raise NotOurs(folder, None, f"is a symbolic link to {target}, where --from reads the "
                      f"params of environment {source_env!r}; it is never followed",
                      allowed="a folder of notebooks/params, not a link to one")
    if not folder.is_dir():
        raise InputError("--from", None, f"no environment {source_env!r} in "
                         f"{shown(Path(params_dir))}",
                         allowed=", ".join(specmod.environments(params_dir=params_dir))
                         or "none")
    return source_env


def experiments_with_packs(source_env: str = SOURCE_ENV,
                           params_dir: Path = PARAMS_DIR) -> tuple[str, ...]:
    """The experiments whose params in ``source_env`` (an environment :func:`check_source`
    accepts) declare a pack, in the registry's order (the local experiments; the list is
    the params', not this module's)."""
    from iolab.core import registry

    check_source(source_env, params_dir)
    out = []
    for name in registry.names():
        path = specmod.params_path(name, source_env, params_dir)
        if path.is_file() and "replicate" in specmod.read_params_doc(path):
            out.append(name)
    return tuple(out)


def check_experiments(names: list[str] | None, source_env: str = SOURCE_ENV,
                      params_dir: Path = PARAMS_DIR) -> tuple[str, ...]:
    """The experiments ``--experiment`` names (each once), or every one with a pack."""
    packed = experiments_with_packs(source_env, params_dir)
    for name in names or ():
        if name not in packed:
            raise InputError("--experiment", None, f"{name!r} has no replication pack in "
                             f"{source_env}'s params", allowed=", ".join(packed) or "none")
    return tuple(dict.fromkeys(names)) if names else packed


@dataclass
class Quiet:
    """What the quiet check measured, and why the machine is busy ("" when it is quiet)."""
    load_average: float
    cpus: int
    foreign_cpu_pct: float
    steal_pct: float
    sample_s: float = SAMPLE_S
    busy: str = ""

    def record(self, busy_ok: bool) -> dict[str, Any]:
        from iolab.execution.one_run import now_iso

        nan = self.foreign_cpu_pct != self.foreign_cpu_pct
        return {"event": "quiet", "at": now_iso(), "load_average": self.load_average,
                "cpus": self.cpus,
                "foreign_cpu_pct": None if nan else round(self.foreign_cpu_pct, 2),
                "steal_pct": None if nan else round(self.steal_pct, 2),
                "sample_s": self.sample_s, "busy": self.busy, "busy_ok": busy_ok}


def busy(load_average: float, cpus: int, foreign_cpu_pct: float, steal_pct: float) -> str:
    """Why a machine with these readings is too busy to measure on ("" when it is quiet). A
    load average that is not a number of 0 or more is no reading of a quiet machine: NaN
    passes every comparison, so it is named as a reason, never let through."""
    reasons = []
    if not (math.isfinite(load_average) and load_average >= 0):
        reasons.append(f"load average {load_average!r} is not a reading (allowed: a number "
                       "of 0 or more)")
    elif load_average > LOAD_PER_CPU * cpus:
        reasons.append(f"load average {load_average:.2f} over the last minute on {cpus} CPUs "
                       f"(allowed: {LOAD_PER_CPU * cpus:.2f}, {LOAD_PER_CPU:g} per CPU)")
    if foreign_cpu_pct > quiet.FOREIGN_CPU_PCT:
        reasons.append(f"{foreign_cpu_pct:.1f} % of its CPU used by other processes over "
                       f"{SAMPLE_S:g} s (allowed: {quiet.FOREIGN_CPU_PCT:g} %)")
    if steal_pct > quiet.STEAL_PCT:
        reasons.append(f"{steal_pct:.1f} % of its CPU stolen by the hypervisor over "
                       f"{SAMPLE_S:g} s (allowed: {quiet.STEAL_PCT:g} %)")
    return "; ".join(reasons)


def measure_quiet(proc: Path = Path("/proc"), sleep: Callable[[float], None] | None = None,
                  cpus: int | None = None) -> Quiet:
    """The load average, and foreign CPU and steal over :data:`SAMPLE_S` seconds, now."""
    load = quiet.load_average(proc)
    sample = quiet.sample(SAMPLE_S, proc, sleep=sleep or time.sleep)
    n = cpus or os.cpu_count() or 1
    reading = Quiet(load, n, sample["foreign_cpu_pct"], sample["steal_pct"])
    reading.busy = busy(load, n, sample["foreign_cpu_pct"], sample["steal_pct"])
    return reading


def refusal(reading: Quiet) -> str:
    """The one line that refuses a busy machine."""
    return (f"this machine is busy: {reading.busy}; measure on a quiet machine (no test suite, "
            "build or other campaign running), or pass --busy-ok to measure anyway (recorded "
            "in each campaign's log, and runs under foreign load are marked)")


@dataclass
class Summary:
    """The plans of every pack, for the text 'iolab replicate --plan' prints."""
    environment: str
    plans: list = field(default_factory=list)   # (experiment, Plan)

    def _runnable(self) -> list:
        return [plan for _, plan in self.plans if not missing_tools(plan)]

    @property
    def eta_s(self) -> float:
        return sum(plan.eta_s for plan in self._runnable())

    @property
    def eta_max_s(self) -> float:
        return sum(plan.eta_max_s for plan in self._runnable())

    def text(self) -> str:
        lines = [f"replication packs into environment '{self.environment}':"]
        for exp, plan in self.plans:
            name = _experiment(exp).name
            counts = plan.counts()
            points = len(plan.points())
            lines.append(f"  {name}: {points} points, {plan.spec.repetitions_text} repetitions "
                         f"each; {counts['stored']} runs stored, {counts['to run']} to run, "
                         f"{counts['blocked']} blocked; {format_duration(plan.eta_s)} to "
                         f"{format_duration(plan.eta_max_s)}")
            why = missing_tools(plan)
            if why:
                lines.append(f"    skipped here: {why}")
        span = (f" to {format_duration(self.eta_max_s)}" if self.eta_max_s > self.eta_s else "")
        lines.append(f"time for the runs to do: {format_duration(self.eta_s)}{span} "
                     f"(budget {format_duration(BUDGET_S)} on 2 vCPUs; each campaign's own "
                     "estimate, as 'iolab plan' gives it)")
        return "\n".join(lines)


def plan_packs(env: str, experiments: tuple, data_dir, source_env: str = SOURCE_ENV,
               params_dir: Path = PARAMS_DIR, overrides: list[str] | None = None) -> Summary:
    """Every pack's plan against the store and this host, writing nothing: a pack whose
    params the environment lacks is planned from a draft in a temporary folder."""
    from iolab.execution.campaign import Campaign

    summary = Summary(env)
    with tempfile.TemporaryDirectory(prefix="iolab-replicate-") as draft:
        for pack in prepare(env, experiments, source_env, write=False, params_dir=params_dir,
                            draft_dir=Path(draft)):
            camp = Campaign(pack.experiment, env, data_dir=data_dir, params_dir=pack.params_dir,
                            overrides=overrides or None)
            summary.plans.append((pack.experiment, camp.plan()))
    return summary


def missing_tools(plan) -> str:
    """Why this host cannot run a pack's campaign at all ("" when it can): the programs its
    runs still to do need that are not here, each with how to get it. A replication measures
    the other packs and names this one, rather than stopping at it."""
    from iolab.execution.runner import missing_program

    return "; ".join(missing_program(p) for p in plan.missing_programs() if p["needed_now"])


def params_shown(env: str, params_dir: Path = PARAMS_DIR) -> str:
    return shown(Path(params_dir) / env)


def check_quiet(reading: Quiet, busy_ok: bool) -> None:
    """IolabError (one line: what was measured, and the override) on a busy machine, unless
    ``busy_ok``."""
    if reading.busy and not busy_ok:
        raise IolabError(refusal(reading))


def run_packs(env: str, experiments: tuple, data_dir, reading: Quiet, *, busy_ok: bool,
              source_env: str = SOURCE_ENV, params_dir: Path = PARAMS_DIR,
              overrides: list[str] | None = None, campaign=None,
              said: Callable[[str], None] = print, **options: Any) -> list:
    """Each pack's campaign, one after the other (each interleaved under its rule, as 'iolab
    run' runs it): its params written where the environment lacks them, the quiet check's
    reading and ``busy_ok`` logged first (a ``quiet`` line of its campaign log). A pack whose
    runs are all stored is named and left as it is (nothing logged); one whose programs this
    host lacks (:func:`missing_tools`) is named and skipped, its params file left for a later
    call. Stops after a campaign that was interrupted or stopped. Returns
    [(experiment name, CampaignResult)], a skipped pack's result holding only its reason.
    ``campaign`` makes a campaign (tests: one without the host's knobs); ``options`` are
    :class:`~iolab.execution.runner.RunOptions`' fields."""
    from iolab.execution.campaign import Campaign
    from iolab.execution.runner import CampaignResult

    check_quiet(reading, busy_ok)
    make = campaign or Campaign
    results = []
    for pack in prepare(env, experiments, source_env, write=True, params_dir=params_dir):
        name = _experiment(pack.experiment).name
        if pack.created:
            said(f"wrote {params_shown(env, params_dir)}/{name}.yaml from the pack of "
                 f"{source_env}")
        camp = make(pack.experiment, env, data_dir=data_dir, params_dir=params_dir,
                    overrides=overrides or None)
        plan = camp.plan()
        if not plan.to_run_max:   # nothing this host can run: nothing to log or record
            counts = plan.counts()
            said(f"== {name}: nothing to measure here: {counts['stored']} runs stored in {env}, "
                 f"{counts['blocked']} blocked on this host ('iolab plan' says why)")
            results.append((name, CampaignResult()))
            continue
        why = missing_tools(plan)
        if why:
            said(f"== {name}: skipped, this host cannot run it: {why}")
            results.append((name, CampaignResult(skipped=why)))
            continue
        camp.store.log(reading.record(busy_ok))
        said(f"== {name} into {env}")
        result = camp.run(**options)
        results.append((name, result))
        if result.interrupted or result.stopped:
            break
    return results
