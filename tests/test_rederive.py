"""Every committed derived file comes out byte for byte as committed on the host at hand,
whatever its CPU offers numpy.

numpy dispatches some routines (sorting among them) to code for the CPU it finds: AVX-512,
AVX2 or plain x86-64, and these differ in the last bits of floating-point results and in how
an unstable sort orders ties. A derivation whose decisions hang on either comes out otherwise
on another host (seen: the search replays, derived on an AVX2 host, differed on an AVX-512
one). So each sample is derived twice, in child processes (``tests/rederive.py``): once with
numpy's dispatch as this host has it, once with its AVX-512 code disabled. On a host with
AVX-512 the two take different paths; on one without, the same path twice.

The committed derived files are those under ``data/derived/``, the reference tables whose
YAML says how they were derived (``derived_by``), the glued-values snapshot and the published
schemas; a fast test holds that :data:`COVERED` names every one of them.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from iolab.paths import REPO_ROOT

# numpy 2.4's AVX-512 dispatch targets; a name a build does not dispatch is ignored
WITHOUT_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR"
DISPATCH = {"as-the-host-has-it": None, "without-avx512": WITHOUT_AVX512}
# what each kind of tests/rederive.py derives again: the committed files it covers
COVERED = {
    "search_replay": ("data/derived/search_replay/*/*.csv", "data/derived/search_replay/*/*.yaml"),
    "aisio_runs": ("data/reference/aisio_pcie_saturation_runs.csv",
                   "data/reference/aisio_pcie_saturation_runs.yaml"),
    "glue": ("tests/fixtures/glued_values.json",),
    "schemas": ("iolab/schemas/*.schema.json",),
}
WORKER = REPO_ROOT / "tests" / "rederive.py"


def _committed() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout ({out.stderr.strip()}): the committed files are unknown")
    return out.stdout.splitlines()


def derived_files() -> list[str]:
    """The committed files that code derives (the module docstring says which)."""
    files = _committed()
    out = [f for f in files if f.startswith("data/derived/")]
    for f in files:
        if f.startswith("data/reference/") and f.endswith(".yaml"):
            if "derived_by" in (yaml.safe_load((REPO_ROOT / f).read_text()) or {}):
                out += [g for g in files if g.rsplit(".", 1)[0] == f.rsplit(".", 1)[0]]
    return sorted(set(out) | {f for globs in COVERED.values() for f in files
                              if any(fnmatch.fnmatch(f, g) for g in globs)})


def test_every_committed_derived_file_is_derived_again_here():
    files = derived_files()
    uncovered = [f for f in files if not any(fnmatch.fnmatch(f, g)
                                             for globs in COVERED.values() for g in globs)]
    assert not uncovered, f"derived files no kind of tests/rederive.py derives: {uncovered}"
    for kind, globs in COVERED.items():
        for g in globs:
            assert any(fnmatch.fnmatch(f, g) for f in files), f"{kind}: {g} names no file"


def _derive(kind: str, disabled: str | None, out: Path) -> int:
    env = {k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"}
    if disabled:
        env["NPY_DISABLE_CPU_FEATURES"] = disabled
    proc = subprocess.run([sys.executable, str(WORKER), kind, str(out)], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True)
    assert proc.returncode in (0, 3), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.returncode


def _seed_lines(text: str, seeds: tuple[int, ...]) -> list[str]:
    """A replay CSV's header and the lines of ``seeds``, as they are written."""
    import csv
    import io

    lines = text.splitlines()
    column = next(csv.reader([lines[0]])).index("seed")
    return [lines[0]] + [line for line in lines[1:]
                         if int(next(csv.reader(io.StringIO(line)))[column]) in seeds]


def _expected(kind: str, rel: str) -> bytes | str | dict:
    """What the re-derived sample of committed file ``rel`` must be."""
    from rederive import GLUE_PAGES, SEEDS

    text = (REPO_ROOT / rel).read_text()
    if kind == "search_replay" and rel.endswith(".csv"):
        return "\n".join(_seed_lines(text, SEEDS))
    if kind == "glue":
        return {page: json.loads(text)[page] for page in GLUE_PAGES}
    return text


def _derived(kind: str, path: Path) -> str | dict:
    from rederive import SEEDS

    text = path.read_text()
    if kind == "search_replay" and path.suffix == ".csv":
        return "\n".join(_seed_lines(text, SEEDS))
    if kind == "glue":
        return json.loads(text)
    return text


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(COVERED))
@pytest.mark.parametrize("dispatch", sorted(DISPATCH))
def test_a_sample_of_each_derived_file_comes_out_as_committed(kind, dispatch, tmp_path):
    if _derive(kind, DISPATCH[dispatch], tmp_path) == 3:
        pytest.skip("AiSIO's archive is not in ../shared/aisio/ (public data, never "
                    "committed): its table cannot be derived again here")
    covered = [f for f in derived_files() if any(fnmatch.fnmatch(f, g) for g in COVERED[kind])]
    for rel in covered:
        made = tmp_path / rel
        assert made.is_file(), f"{kind} did not derive {rel} again"
        assert _derived(kind, made) == _expected(kind, rel), f"{rel} differs ({dispatch})"
