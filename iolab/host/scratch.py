"""Target files that benchmarks read: written once with data, then reused.

Responsible for: laying out a file of a given size with incompressible data, atomically and
only when it is missing or has another size. Not responsible for: where the files go or how
many (the experiments), or deleting them (the plan names them; the user removes them).
"""

from __future__ import annotations

import os
from pathlib import Path

CHUNK = 1 << 20


def lay_out(path: Path, size: int) -> bool:
    """Write ``size`` bytes of incompressible data to ``path`` unless it already has that
    size; True when it wrote. A file read before it was written would be holes, which the
    filesystem answers without any device I/O."""
    path = Path(path)
    if path.exists() and path.stat().st_size == size:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    block = os.urandom(CHUNK)
    with tmp.open("wb") as out:
        for _ in range(size // CHUNK):
            out.write(block)
        out.write(block[:size % CHUNK])
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(path)
    return True
