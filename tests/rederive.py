"""Derive a sample of the committed derived files again, into a folder: the child process of
tests/test_rederive.py, which starts it with numpy's SIMD dispatch chosen beforehand
(``NPY_DISABLE_CPU_FEATURES`` is read once, when numpy is imported).

    python tests/rederive.py KIND OUT

Each KIND writes its files under OUT at the committed files' paths in the repository:

* ``search_replay``: for every committed replay (``data/derived/search_replay/EXP/ENV.csv``),
  the rows of seeds :data:`SEEDS` derived again from the grid's stored runs, and its YAML;
* ``aisio_runs``: ``data/reference/aisio_pcie_saturation_runs.*`` from AiSIO's archive (exit
  status 3, nothing written, where the archive is absent);
* ``glue``: ``tests/fixtures/glued_values.json`` with the pages of :data:`GLUE_PAGES` only,
  their notebooks replayed into a temporary folder;
* ``schemas``: ``iolab/schemas/*.schema.json``.

Not a test module (no ``test_`` prefix): pytest does not collect it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from iolab.paths import BOOK_DIR, REPO_ROOT

SEEDS = (0, 1)                                # of a replay's seeds, those derived again
GLUE_PAGES = ("experiments/cpu_initiated.ipynb",)   # the search, best sets, the replays
NO_ARCHIVE = 3


def search_replay(out: Path) -> int:
    import yaml

    from iolab.core.search import replay
    from iolab.execution.campaign import Campaign

    for committed in sorted((REPO_ROOT / "data" / "derived" / "search_replay").glob("*/*.csv")):
        experiment, environment = committed.parent.name, committed.stem
        grid = replay.grid_of(Campaign(experiment, environment).plan(as_recorded=True))
        low, high = yaml.safe_load(committed.with_suffix(".yaml").read_text())["seeds"]
        rows = replay.derive(grid, SEEDS)
        info = replay.meta(grid, list(range(low, high + 1)), replay.BUDGET_SHARES,
                           replay.COMPARED, experiment, environment)
        replay.write(rows, info, out / committed.relative_to(REPO_ROOT))
    return 0


def aisio_runs(out: Path) -> int:
    from iolab.importers import aisio_runs as importer

    archive = REPO_ROOT.parent / "shared" / "aisio" / "pcie-bandwidth-saturation.tar.gz"
    if not archive.exists():
        return NO_ARCHIVE
    folder = out / "data" / "reference"
    folder.mkdir(parents=True)
    importer.write(importer.derive_runs(archive), folder)
    return 0


def glue(out: Path) -> int:
    from iolab.report.book import execute, glued_in, rendered

    sources = {str(dst.relative_to(BOOK_DIR)): src for src, dst in rendered().items()}
    values = {}
    with tempfile.TemporaryDirectory() as tmp:
        for page in GLUE_PAGES:
            executed = Path(tmp) / Path(page).name
            execute(sources[page], executed, {"mode": "replay"})
            values[page] = glued_in(executed)
    path = out / "tests" / "fixtures" / "glued_values.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(values, indent=1, ensure_ascii=False) + "\n")
    return 0


def schemas(out: Path) -> int:
    from iolab.schemas import generate

    folder = out / "iolab" / "schemas"
    folder.mkdir(parents=True)
    generate.write(folder)
    return 0


KINDS = {"search_replay": search_replay, "aisio_runs": aisio_runs, "glue": glue,
         "schemas": schemas}

if __name__ == "__main__":
    kind, out = sys.argv[1], Path(sys.argv[2])
    sys.exit(KINDS[kind](out))
