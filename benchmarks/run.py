"""Benchmarks with their targets (``make bench``); kept out of the test suite on purpose.

- plan: expanding and classifying the CPU-search grid of seed 000 (2,911 points x 5 reps)
  must take under 2 s, so `iolab plan` stays interactive on the lab server's full grid.
- tidy: loading a stored campaign from the parquet cache must take under 0.5 s, and a cold
  re-parse of every raw file under 10 s per 1,000 runs.

Prints one line per benchmark and exits 1 when a target is missed.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from iolab import planner, spec as specmod, tidy  # noqa: E402
from iolab.paths import default_data_dir  # noqa: E402
from iolab.store import campaigns  # noqa: E402


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_plan() -> tuple[str, float, float]:
    params = (REPO / "tests" / "fixtures" / "specs" / "cpu_search_params.py").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        nbdir = Path(tmp)
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]})]
        nbformat.write(nb, nbdir / "cpu_search.ipynb")
        (nbdir / "params" / "hpc-server").mkdir(parents=True)
        (nbdir / "params" / "hpc-server" / "cpu_search.yaml").write_text("experiment: cpu_search\n")
        spec = specmod.load("cpu_search", "hpc-server", notebooks_dir=nbdir, params_dir=nbdir / "params")
        return "plan cpu_search hpc-server (full grid)", timed(lambda: planner.make_plan(spec, driver_version="1")), 2.0


def bench_tidy() -> list[tuple[str, float, float]]:
    out = []
    data = default_data_dir()
    for exp, env in campaigns(data):
        if exp != "smt_thp":
            continue
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "data"
            shutil.copytree(data / "raw", copy / "raw")
            n = len(tidy.build(copy, exp, env))
            cold = timed(lambda: tidy.load(copy, exp, env, use_cache=False), repeat=1)
            tidy.load(copy, exp, env)
            warm = timed(lambda: tidy.load(copy, exp, env))
        out.append((f"tidy {exp}/{env} cold, {n} runs (scaled to 1,000)", cold * 1000 / max(n, 1), 10.0))
        out.append((f"tidy {exp}/{env} from cache", warm, 0.5))
    return out


def main() -> int:
    results = [bench_plan(), *bench_tidy()]
    failed = 0
    for name, seconds, target in results:
        ok = seconds <= target
        failed += not ok
        print(f"{'ok  ' if ok else 'SLOW'} {name}: {seconds:.3f} s (target {target:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
