"""What one import of an AiSIO CIJOE archive reports: counts, run ids, notes, and every value
iolab re-derived differently from AiSIO's own record.

Notes quote what the archive holds (a member's name, where a link member points, a recorded
command line), so each printed line has its control characters and line breaks escaped
(:func:`iolab.errors.printable`): nothing in an archive can make a line of the report's own.

Responsible for: the report's records and how they print.
Not responsible for: what goes into them (each phase of the import adds its own notes and
disagreements) or what the CLI does with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iolab.errors import excerpt, printable


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
        return (f"{where}: {self.field}: iolab {excerpt(self.ours)} != AiSIO "
                f"{excerpt(self.aisio)}")


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
        lines = [f"{printable(self.archive)} -> {self.experiment}/{self.environment}: imported "
                 f"{self.imported}, skipped {self.skipped} (already stored), failed {self.failed}; "
                 f"{len(self.disagreements)} disagreements with AiSIO's own results"]
        lines += [f"  disagreement: {printable(str(d))}" for d in self.disagreements]
        lines += [f"  note: {printable(n)}" for n in self.notes]
        return "\n".join(lines)
