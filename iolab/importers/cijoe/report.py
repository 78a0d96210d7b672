"""What one import of an AiSIO CIJOE archive reports: counts, run ids, notes, and every value
iolab re-derived differently from AiSIO's own record.

Responsible for: the report's records and how they print.
Not responsible for: what goes into them (each phase of the import adds its own notes and
disagreements) or what the CLI does with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Disagreement:
    """A value that iolab re-derived differently from AiSIO's own record."""

    result: str  # archive path of AiSIO's result file (or other artifact) compared with
    field: str
    ours: Any
    aisio: Any
    run_id: str | None = None

    def __str__(self) -> str:
        where = f"{self.result}" + (f" (run {self.run_id})" if self.run_id else "")
        return f"{where}: {self.field}: iolab {self.ours!r} != AiSIO {self.aisio!r}"


@dataclass
class ImportReport:
    archive: str
    experiment: str
    environment: str
    imported: int = 0
    skipped: int = 0  # already stored with the same raw output
    failed: int = 0
    run_ids: list[str] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"{self.archive} -> {self.experiment}/{self.environment}: imported {self.imported}, "
                 f"skipped {self.skipped} (already stored), failed {self.failed}; "
                 f"{len(self.disagreements)} disagreements with AiSIO's own results"]
        lines += [f"  disagreement: {d}" for d in self.disagreements]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)
