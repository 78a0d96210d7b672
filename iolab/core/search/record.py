"""A search's record: what the campaign log says a search proposed, and whether it ended.

Every step of a running search is logged (``iolab.execution.runner``: a ``search`` line with
the strategy, version, seed and budget, whether it is done, and the decisions made since the
last line; a resumed campaign logs its decisions from the first again). The proposals among
those decisions, in order and each once, are the search's record. A search made with a
strategy version whose sampler depended on the host (``iolab.core.search.sampler``) is
re-planned from that record rather than re-run, so that it asks for the same runs anywhere;
and a search re-planned with another version than the one that made it would ask for other
runs, so that is refused with the version to name.

Responsible for: reading the record from the log's lines and checking it against the params.
Not responsible for: reading the log file (``iolab.core.store``) or following the record
(``iolab.core.search.strategies``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from iolab.core.identity import canonical_json
from iolab.core.search.params import KEY, RECORDED, SearchSpec
from iolab.errors import InputError


@dataclass(frozen=True)
class Record:
    """The proposals (point keys, in order) and whether the search ended, of one search."""

    version: int
    proposals: tuple[str, ...]
    ended: bool


def _same_search(line: dict[str, Any], spec: SearchSpec) -> bool:
    return (line.get("grid"), line.get("strategy"), line.get("seed"), line.get("budget")) == \
        (spec.grid, spec.strategy, spec.seed, spec.budget)


def records(lines: Iterable[dict[str, Any]], spec: SearchSpec) -> dict[int, Record]:
    """By version, the records of searches of this grid, strategy, seed and budget."""
    found: dict[int, tuple[dict[str, None], bool]] = {}
    for line in lines:
        if line.get("event") != "search" or not _same_search(line, spec):
            continue
        keys, ended = found.get(line.get("version"), ({}, False))
        for decision in line.get("decisions") or []:
            if decision.get("step") == "propose":
                keys.setdefault(canonical_json(decision.get("point")), None)
        found[line.get("version")] = (keys, ended or bool(line.get("done")))
    return {version: Record(version, tuple(keys), ended)
            for version, (keys, ended) in found.items() if isinstance(version, int)}


def proposals(spec: SearchSpec, lines: Iterable[dict[str, Any]] | None, source: Any
              ) -> list[str] | None:
    """The recorded proposals the search must follow (None: it runs its sampler).

    ``lines``: the campaign log's lines (None: no store, as for the design of a campaign);
    ``source``: the params file(s), for errors. Refused: an old version without the record
    of a search that ended, and a current version over a log whose search was made by
    another one (its re-run would ask for other runs)."""
    made = records(lines or [], spec)
    if spec.recorded:
        record = made.get(spec.version)
        if record is None or not record.ended:
            raise InputError(source, f"{KEY}.version", f"version {spec.version} of the "
                             f"{spec.strategy} strategy re-plans a search from its record, and "
                             "the campaign log holds no record of such a search (seed "
                             f"{spec.seed}, budget {spec.budget}) that ended",
                             allowed="the current version, to search again in a new "
                             "environment")
        return list(record.proposals)
    other = sorted(v for v in made if v != spec.version)
    if other:
        raise InputError(source, f"{KEY}.version", f"this campaign's search (seed {spec.seed}, "
                         f"budget {spec.budget}) was made with version {other[0]} of the "
                         f"{spec.strategy} strategy, and version {spec.version} would ask for "
                         "other runs", allowed=f"version: {other[0]}, to re-plan it from its "
                         "record" if other[0] == RECORDED else "a new environment")
    return None
