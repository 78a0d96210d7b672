"""Benchmarks with their targets (``make bench``); kept out of the test suite on purpose.

- plan: expanding and classifying the largest design of every registered experiment (the lab
  server's params) must take under 2 s, so `iolab plan` stays interactive on the full grids.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from iolab import experiments  # noqa: E402
from iolab.core import spec as specmod, tidy  # noqa: E402
from iolab.core.runner import design_plan  # noqa: E402
from iolab.core.store import campaigns  # noqa: E402
from iolab.paths import default_data_dir  # noqa: E402

LAB = "hpc-server"


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_plans() -> list[tuple[str, float, float]]:
    out = []
    for exp in experiments.all_experiments():
        spec = specmod.load(exp, LAB)
        runs = len(design_plan(exp, spec).runs)
        out.append((f"plan {exp.name} {LAB} (whole design, {runs:,} runs)",
                    timed(lambda: design_plan(exp, spec)), 2.0))
    return out


def bench_tidy() -> list[tuple[str, float, float]]:
    out = []
    data = default_data_dir()
    known = set(experiments.names())
    for name, env in campaigns(data):
        if name not in known:
            continue
        exp = experiments.get(name)
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "data"
            shutil.copytree(data / "raw" / name, copy / "raw" / name)
            n = len(tidy.load(copy, exp, env, use_cache=False))
            cold = timed(lambda: tidy.load(copy, exp, env, use_cache=False), repeat=1)
            tidy.load(copy, exp, env)
            warm = timed(lambda: tidy.load(copy, exp, env))
        out.append((f"tidy {name}/{env} cold, {n} runs (scaled to 1,000)", cold * 1000 / max(n, 1), 10.0))
        out.append((f"tidy {name}/{env} from cache", warm, 0.5))
    return out


def main() -> int:
    results = [*bench_plans(), *bench_tidy()]
    failed = 0
    for name, seconds, target in results:
        ok = seconds <= target
        failed += not ok
        print(f"{'ok  ' if ok else 'SLOW'} {name}: {seconds:.3f} s (target {target:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
