"""``make bench``: the harness's own costs on this machine, against the targets of issue 13.

Every key is measured in one invocation, so that ratios taken on a noisy machine compare
things measured side by side:

==================================  ===========================================================
``fidelity_ratio``                  IOPS of one fio job run through ``iolab run`` over the IOPS
                                    of the same fio argv run bare, A/B pairs interleaved (the
                                    order alternates); mean of the per-pair ratios, 95 % t CI
``overhead_per_run_s``              what ``iolab run`` adds to each run of a sweep of N short
                                    fio runs beyond the bare fio processes, once its fixed
                                    cost (the same command with nothing left to run) is taken
                                    off: (t_iolab - t_iolab_nothing_to_do - t_bare) / N per
                                    round, median over the rounds
``bench_fio_overhead_per_run_s``    the same for bench-fio (fio-plot), the same sweep (pinned
                                    and threaded alike; it asks for json and its logs), its
                                    fixed cost taken as its ``--dry-run``
``campaign_fixed_s``                ``iolab run`` with nothing left to run, interpreter start
                                    included: what a campaign costs before its first run
``ingest_cold_s``/``ingest_warm_s``  the tidy table of 10,000 runs (copies of real stored fio
                                    runs, made in a temporary folder by ``copies.py`` and
                                    labelled as copies) without any cache, then again
``plan_s``                          the plan of the full CPU search (hpc-server params, ~19,000
                                    runs) against the store and this host, in process, median
                                    of three after a first plan (which also loads the params
                                    and asks the tools' versions)
``book_clean_s``/``book_noop_s``    ``iolab book`` in a copy of the repository without
                                    rendered notebooks or HTML, then again with nothing changed
``import_s``                        ``iolab import-cijoe`` of AiSIO's CPU-initiated archive
                                    (160 runs), the whole command
==================================  ===========================================================

The sweeps are interleaved round by round (bare, iolab, bench-fio, in a rotating order) and
each key is the median over the rounds. The result goes to
``benchmarks/results/<machine-class>.json`` (the framework chapter shows the committed one)
and a table is printed. Targets are goals, not tests: a missed one is reported, and the
exit status is 0 unless a measurement itself failed.

Responsible for: measuring and recording. Not responsible for: making anything fast.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from copies import copy_campaign  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
SETTINGS = REPO / "benchmarks" / "settings.yaml"    # which campaigns each key is measured with
IOLAB = [sys.executable, "-m", "iolab"]

# (key, unit, target, "max" when the value must stay at or below it, "min" at or above)
TARGETS = {
    "fidelity_ratio": ("", 0.99, "min"),
    "overhead_per_run_s": ("s", 0.05, "max"),
    "bench_fio_overhead_per_run_s": ("s", None, None),
    "campaign_fixed_s": ("s", 0.2, "max"),
    "ingest_cold_s": ("s", 5.0, "max"),
    "ingest_warm_s": ("s", 0.5, "max"),
    "plan_s": ("s", 1.0, "max"),
    "book_clean_s": ("s", None, None),
    "book_noop_s": ("s", 5.0, "max"),
    "import_s": ("s", 1.0, "max"),
}


def machine_class() -> str:
    """``<hypervisor>-<n>vcpu`` on a virtual machine (``kvm-2vcpu``; a container inside it
    does not count), else ``<hostname>-<n>cpu``."""
    n = os.cpu_count() or 1
    try:
        virt = subprocess.run(["systemd-detect-virt", "--vm"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        virt = ""
    if virt and virt != "none":
        return f"{virt}-{n}vcpu"
    return f"{platform.node()}-{n}cpu"


def wall(argv: list[str], **kw: Any) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t0


def progress(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- the fio sweeps ------------------------------------------------------------------------------

class Sweep:
    """N short fio runs (settings.yaml, ``sweep``: one fio job on one core reading a file),
    as ``iolab run`` makes them, as a shell loop of the same argv, and as bench-fio."""

    def __init__(self, work: Path, conf: dict[str, Any], values: list[int], runtime_s: int,
                 repetitions: int = 1):
        self.work, self.conf, self.values, self.runtime_s = work, conf, values, runtime_s
        self.files = work / "files"
        sets = [*conf["set"], f"runtime_s={runtime_s}", f"repetitions={repetitions}",
                f"file_dir={self.files}",
                f"grids={{sweep: {{vary: {{{conf['variable']}: {values}}}}}}}"]
        self.sets = [a for s in sets for a in ("--set", s)]
        self.rounds = 0

    def runs_dir(self, data: Path) -> Path:
        return data / "raw" / self.conf["experiment"] / self.conf["environment"] / "runs"

    def iolab(self, data: Path, *extra: str) -> float:
        data.mkdir(exist_ok=True)
        return wall(IOLAB + ["run", self.conf["experiment"], "--env", self.conf["environment"],
                             "--data", str(data), "--no-progress", *self.sets, *extra], cwd=REPO)

    def argvs(self, data: Path) -> list[list[str]]:
        """The fio argv of every stored run (after the GNU time wrapper), in sweep order."""
        out = {}
        for manifest in self.runs_dir(data).glob("*/run.json"):
            doc = json.loads(manifest.read_text())
            argv = doc["argv"]
            out[doc["point"][self.conf["variable"]]] = argv[argv.index("fio"):]
        return [out[q] for q in self.values]

    def prepare(self) -> list[list[str]]:
        """One iolab sweep lays out the files and gives the argv the other ways repeat."""
        self.iolab(self.work / "warm-up")
        return self.argvs(self.work / "warm-up")

    def bare(self, argvs: list[list[str]]) -> float:
        out = self.work / "bare"
        out.mkdir(exist_ok=True)
        script = "set -e\n" + "".join(
            f"{shlex.join(a)} >/dev/null\n" for a in argvs)
        return wall(["bash", "-c", script], cwd=out)

    def bench_fio(self, fio_argv: list[str], dry: bool = False) -> float:
        """bench-fio over the same file and queue depths, pinned and threaded like the fio
        argv iolab ran (``fio_argv``). Two differences stay: bench-fio asks fio for json, not
        json+, and for its bandwidth, latency and IOPS logs (one sample a second)."""
        self.rounds += 1
        out = self.work / f"bench-fio-{self.rounds}"
        argv = [str(Path(sys.executable).with_name("bench-fio")),
                "--target", str(self.files / "dev00.dat"), "--type", "file", "--size", "64M",
                "--mode", "randread", "--block-size", "4k", "--engine", "libaio",
                "--direct", "1", "--numjobs", "1", "--runtime", str(self.runtime_s),
                "--time-based",
                # the sweep variable is the queue depth (settings.yaml), bench-fio's --iodepth
                "--iodepth", *map(str, self.values), "--output", str(out), "--quiet"]
        same = [a[2:] for a in fio_argv if a.startswith(("--cpus_allowed=", "--thread="))]
        if same:
            argv += ["--extra-opts", *same]
        return wall(argv + (["--dry-run"] if dry else []), cwd=self.work)


def bench_sweeps(work: Path, conf: dict[str, Any], rounds: int) -> dict[str, Any]:
    runtime_s = conf["runtime_s"]
    sweep = Sweep(work, conf, conf["values"], runtime_s)
    argvs = sweep.prepare()
    n = len(conf["values"])
    samples: dict[str, list[float]] = {"bare": [], "iolab": [], "iolab_nothing": [],
                                       "bench_fio": [], "bench_fio_dry": []}
    ways: list[tuple[str, Callable[[int], None]]] = [
        ("bare", lambda r: samples["bare"].append(sweep.bare(argvs))),
        ("iolab", lambda r: (samples["iolab"].append(sweep.iolab(work / f"iolab-{r}")),
                             samples["iolab_nothing"].append(sweep.iolab(work / f"iolab-{r}")))),
        ("bench-fio", lambda r: (samples["bench_fio"].append(sweep.bench_fio(argvs[0])),
                                 samples["bench_fio_dry"].append(
                                     sweep.bench_fio(argvs[0], dry=True)))),
    ]
    for r in range(rounds):
        for name, do in ways[r % 3:] + ways[:r % 3]:  # each way first in turn
            progress(f"sweep round {r + 1}/{rounds}: {name} ({n} fio runs of {runtime_s} s)")
            do(r)
    med = {k: statistics.median(v) for k, v in samples.items()}
    # per round first (the three ways ran side by side), then the median over the rounds
    ours = [(a - z - b) / n for a, z, b in
            zip(samples["iolab"], samples["iolab_nothing"], samples["bare"])]
    theirs = [(a - z - b) / n for a, z, b in
              zip(samples["bench_fio"], samples["bench_fio_dry"], samples["bare"])]
    return {
        "overhead_per_run_s": statistics.median(ours),
        "bench_fio_overhead_per_run_s": statistics.median(theirs),
        "campaign_fixed_s": med["iolab_nothing"],
        "_sweeps": {"runs_per_sweep": n, "runtime_s": runtime_s, "rounds": rounds,
                    conf["variable"]: conf["values"], "seconds": samples, "median_s": med,
                    "iolab_per_round_s": ours, "bench_fio_per_round_s": theirs},
    }


def bench_fidelity(work: Path, conf: dict[str, Any], pairs: int) -> dict[str, Any]:
    from iolab.analysis.stats import t_interval
    from iolab.parsers.fio import parse_fio_file

    runtime_s, value = conf["fidelity_runtime_s"], conf["fidelity_value"]
    sweep = Sweep(work, conf, [value], runtime_s, repetitions=pairs)
    data = work / "fidelity"
    bare_dir = work / "fidelity-bare"
    bare_dir.mkdir()
    iolab_iops: list[float] = []
    bare_iops: list[float] = []
    argv: list[str] | None = None
    for i in range(pairs):
        order = ("iolab", "bare") if i % 2 == 0 or argv is None else ("bare", "iolab")
        for way in order:
            progress(f"fidelity pair {i + 1}/{pairs}: {way}")
            if way == "iolab":
                sweep.iolab(data, "--limit", "1")
                runs = sorted(sweep.runs_dir(data).iterdir(),
                              key=lambda d: json.loads((d / "run.json").read_text())["started_at"])
                iolab_iops.append(parse_fio_file(runs[-1] / "fio.json")["iops"])
                if argv is None:
                    doc = json.loads((runs[-1] / "run.json").read_text())
                    argv = doc["argv"][doc["argv"].index("fio"):]
            else:
                subprocess.run(argv, check=True, cwd=bare_dir, stdout=subprocess.DEVNULL)
                bare_iops.append(parse_fio_file(bare_dir / "fio.json")["iops"])
    ratios = [a / b for a, b in zip(iolab_iops, bare_iops)]
    ci = t_interval(ratios)
    return {"fidelity_ratio": ci["mean"],
            "_fidelity": {"pairs": pairs, "runtime_s": runtime_s, conf["variable"]: value,
                          "iolab_iops": iolab_iops, "bare_iops": bare_iops, "ratios": ratios,
                          "ci95_low": ci["ci_low"], "ci95_high": ci["ci_high"],
                          "sd": ci["sd"], "method": "mean of per-pair ratios, Student's t "
                          "95 % CI, sd with ddof=1"}}


def bench_startup() -> dict[str, Any]:
    """What any command pays before its own work: the interpreter, then the CLI's imports."""
    progress("interpreter start and the CLI's imports")
    bare = [wall([sys.executable, "-c", "pass"]) for _ in range(5)]
    cli = [wall([sys.executable, "-c", "import iolab.cli"], cwd=REPO) for _ in range(5)]
    return {"_startup": {"python_s": statistics.median(bare),
                         "python_and_cli_imports_s": statistics.median(cli)}}


# -- ingest, plan, book, import ----------------------------------------------------------------

def bench_ingest(work: Path, conf: dict[str, Any], n: int) -> dict[str, Any]:
    from iolab.core import registry
    from iolab.core import tidy

    progress(f"copying real fio runs into a {n:,}-run campaign")
    data = work / "ingest"
    name, env = conf["experiment"], conf["environment"]
    source = REPO / "data" / "raw" / name / env
    copy_campaign(source, data, name, env, n)
    exp = registry.get(name)
    progress("tidy table, cold")
    t0 = time.perf_counter()
    rows = len(tidy.load(data, exp, env))
    cold = time.perf_counter() - t0
    progress("tidy table, warm")
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        tidy.load(data, exp, env)
        warm.append(time.perf_counter() - t0)
    files = sum(len(os.listdir(d)) for d in (data / "raw" / name / env / "runs").iterdir())
    return {"ingest_cold_s": cold, "ingest_warm_s": statistics.median(warm),
            "_ingest": {"runs": rows, "files": files, "workers": min(os.cpu_count() or 1, 8),
                        "copies_of": str(source.relative_to(REPO)),
                        "warm_s": warm}}


def bench_plan(conf: dict[str, Any]) -> dict[str, Any]:
    from iolab.execution.campaign import Campaign

    progress(f"plan of {conf['experiment']} with {conf['environment']}'s params")
    camp = Campaign(conf["experiment"], conf["environment"])
    runs = len(camp.plan().runs)  # the first also imports and warms caches
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        camp.plan()
        times.append(time.perf_counter() - t0)
    return {"plan_s": statistics.median(times), "_plan": {"runs": runs, "seconds": times}}


def bench_book(work: Path) -> dict[str, Any]:
    """In a copy of the repository (so the checkout's book is not touched)."""
    copy = work / "repo"
    derived = {".git", ".venv", "_build", ".tools", ".build", ".pytest_cache", "__pycache__",
               ".ipynb_checkpoints"}

    def ignore(folder: str, names: list[str]) -> set[str]:
        out = {n for n in names if n in derived}
        if Path(folder) == REPO / "data":
            out.add("cache")
        if Path(folder).is_relative_to(REPO / "book"):
            out |= {n for n in names if n.endswith(".ipynb")}  # rendered: the build makes them
        return out

    shutil.copytree(REPO, copy, symlinks=True, ignore=ignore)
    env = {**os.environ, "IOLAB_DATA": str(copy / "data"), "PYTHONPATH": str(copy)}
    progress("book from a clean copy (every notebook replayed, strict HTML build)")
    clean = wall(IOLAB + ["book"], cwd=copy, env=env)
    progress("book again, nothing changed")
    noop = wall(IOLAB + ["book"], cwd=copy, env=env)
    return {"book_clean_s": clean, "book_noop_s": noop}


def bench_import(work: Path, conf: dict[str, Any]) -> dict[str, Any]:
    archive = (REPO / conf["archive"]).resolve()
    if not archive.exists():
        return {"import_s": None, "_import": {"skipped": f"{archive} is not here"}}
    times = []
    for i in range(3):
        progress(f"import of {archive.name} ({i + 1}/3)")
        times.append(wall(IOLAB + ["import-cijoe", str(archive), "--experiment",
                                   conf["experiment"], "--env", "bench", "--data",
                                   str(work / f"import-{i}"), "--no-progress"], cwd=REPO))
    return {"import_s": statistics.median(times),
            "_import": {"archive": archive.name, "seconds": times}}


# -- the record ----------------------------------------------------------------------------

def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def record(measured: dict[str, Any], klass: str, seconds: float) -> dict[str, Any]:
    results = {}
    for key, (unit, target, sense) in TARGETS.items():
        value = measured.get(key)
        met = None
        if value is not None and target is not None:
            met = value >= target if sense == "min" else value <= target
        if key == "overhead_per_run_s" and met and measured.get("bench_fio_overhead_per_run_s") \
                is not None:
            met = value < measured["bench_fio_overhead_per_run_s"]  # and below bench-fio's
        results[key] = {"value": value, "unit": unit, "target": target,
                        "target_is": sense, "met": met}
    return {
        "machine_class": klass,
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": _git("rev-parse", "--short=12", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "host": {"cpus": os.cpu_count(), "kernel": platform.release(),
                 "python": platform.python_version(),
                 "fio": subprocess.run(["fio", "--version"], capture_output=True,
                                       text=True).stdout.strip()},
        "bench_seconds": round(seconds, 1),
        "results": results,
        "details": {k.lstrip("_"): v for k, v in measured.items() if k.startswith("_")},
    }


def table(doc: dict[str, Any]) -> str:
    lines = [f"{'key':32} {'value':>10} {'target':>10}  met"]
    for key, r in doc["results"].items():
        value = "-" if r["value"] is None else f"{r['value']:.3f}"
        target = "-" if r["target"] is None else \
            f"{'>=' if r['target_is'] == 'min' else '<='}{r['target']:g}"
        met = {True: "yes", False: "NO", None: ""}[r["met"]]
        lines.append(f"{key:32} {value:>10} {target:>10}  {met}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machine-class", default=machine_class(),
                    help="names the result file (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved sweep rounds")
    ap.add_argument("--pairs", type=int, default=10, help="fidelity A/B pairs (at least 5)")
    ap.add_argument("--runs", type=int, help="runs of the ingest campaign (default: "
                    "settings.yaml's)")
    ap.add_argument("--only", nargs="*", choices=["startup", "sweeps", "fidelity", "ingest",
                                                  "plan", "book", "import"],
                    help="measure only these (the result file is not written)")
    ap.add_argument("--output", type=Path, help="result file (default: "
                    "benchmarks/results/<machine-class>.json)")
    args = ap.parse_args(argv)
    if args.pairs < 5:
        ap.error("--pairs must be at least 5")
    if shutil.which("fio") is None:
        print("bench: fio is not installed (make setup installs it)", file=sys.stderr)
        return 2
    if not Path(sys.executable).with_name("bench-fio").exists():
        print("bench: bench-fio is not installed (make bench installs fio-plot)", file=sys.stderr)
        return 2
    from iolab.yamlfile import load_yaml

    conf = load_yaml(SETTINGS.read_text())
    parts: dict[str, Callable[[Path], dict[str, Any]]] = {
        "startup": lambda w: bench_startup(),
        "sweeps": lambda w: bench_sweeps(w, conf["sweep"], args.rounds),
        "fidelity": lambda w: bench_fidelity(w, conf["sweep"], args.pairs),
        "ingest": lambda w: bench_ingest(w, conf["ingest"], args.runs or conf["ingest"]["runs"]),
        "plan": lambda w: bench_plan(conf["plan"]),
        "book": bench_book,
        "import": lambda w: bench_import(w, conf["import"]),
    }
    # Python writes a module's bytecode on its first import, unless told not to (this
    # machine class sets PYTHONDONTWRITEBYTECODE): compiled once here, every command measured
    # below starts as it would in a normal installation, not compiling the package each time
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "iolab")], check=True)
    failed: dict[str, str] = {}
    measured: dict[str, Any] = {"_python": {
        "bytecode": "compiled beforehand (python -m compileall iolab)",
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE")}}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="iolab-bench-", dir="/var/tmp") as tmp:
        for name, fn in parts.items():
            if args.only and name not in args.only:
                continue
            work = Path(tmp) / name
            work.mkdir()
            try:
                measured.update(fn(work))
            except (subprocess.CalledProcessError, OSError, ValueError, KeyError) as exc:
                # the other parts still run and are recorded; this one is named as failed
                failed[name] = f"{type(exc).__name__}: {exc}"
                progress(f"{name} failed: {failed[name]}")
    if failed:
        measured["_failed"] = failed
    doc = record(measured, args.machine_class, time.perf_counter() - t0)
    print(table(doc))
    if args.only:
        return 1 if failed else 0
    out = args.output or RESULTS / f"{args.machine_class}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
