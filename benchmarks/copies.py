"""A large campaign for the ingest benchmark, made of copies of real stored fio runs.

The tidy table's speed depends on how many runs a campaign holds; the committed campaigns
hold tens. This module copies the runs of one stored campaign (raw files byte for byte)
into a temporary data folder until it holds the number asked for. Each copy gets its own
run id and says in its manifest (``extra.benchmark_copy_of``) which real run it copies, and
the folder holds a ``COPIES.txt`` that says so too: the numbers in these runs were measured
once, in the run they copy, and nothing here presents them as new measurements.

Responsible for: making the copied campaign. Not responsible for: timing (``run.py``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from iolab.core.manifest import FILE as MANIFEST

NOTE = ("Every run under raw/ is a copy of a real run stored in the repository's data/ "
        "(named in its run.json, extra.benchmark_copy_of), made by benchmarks/copies.py to "
        "time the tidy table on {n} runs. They are not measurements of their own.\n")


def copy_campaign(source: Path, dest_data: Path, experiment: str, environment: str,
                  n: int) -> Path:
    """``n`` runs under ``dest_data/raw/<experiment>/<environment>/runs``, copied in turn
    from the run folders of the stored campaign ``source``; returns the campaign folder."""
    originals = sorted(d for d in (source / "runs").iterdir() if (d / MANIFEST).is_file())
    if not originals:
        raise SystemExit(f"{source}: no stored runs to copy")
    camp = Path(dest_data) / "raw" / experiment / environment
    (camp / "runs").mkdir(parents=True)
    shutil.copy2(source / "host.json", camp / "host.json")
    (Path(dest_data) / "COPIES.txt").write_text(NOTE.format(n=n))
    docs = [json.loads((d / MANIFEST).read_text()) for d in originals]
    for i in range(n):
        k = i % len(originals)
        orig, doc = originals[k], dict(docs[k])
        run_id = f"{hashlib.sha256(f'copy {i}'.encode()).hexdigest()[:12]}-r{doc['rep']}"
        doc["run_id"] = run_id
        doc["extra"] = {**(doc.get("extra") or {}), "benchmark_copy_of": orig.name}
        folder = camp / "runs" / run_id
        folder.mkdir()
        for f in orig.iterdir():
            if f.name != MANIFEST and f.is_file():
                shutil.copy2(f, folder / f.name)
        (folder / MANIFEST).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return camp
