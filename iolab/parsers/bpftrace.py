"""Parser for bpftrace's map output, in text mode (the default) and in JSON mode (``-f json``).

Responsible for: turning what bpftrace printed into its maps (every key and value of the last
printing of each map), the number of attached probes, lost events and helper errors, and
raising :class:`~iolab.errors.ParseError` (naming the source and the problem) for malformed or
truncated output.

Not responsible for: running bpftrace, its stderr (warnings such as RLIMIT_MEMLOCK), maps whose
values are not numbers (strings, stacks, tuples: refused with a ParseError), or ``printf``
output (skipped).

One result for both modes (samples in tests/fixtures/bpftrace/; format strings of bpftrace's ``output.cpp``):

* ``maps``: ``{"@name": {key: value}}``. A key is a tuple of its components: ``()`` for a
  keyless map (``@plain: 1``), ``(33,)`` for ``@b[33]``, ``(1, "a")`` for ``@m[1, a]``;
  components that are decimal integers become ints, so text and JSON mode (which quotes every
  key) agree. A value is an int (count, sum, min, max, avg), a dict ``{"count", "average",
  "total"}`` (``stats()``) or a list of histogram buckets ``{"min", "max", "count"}`` with
  inclusive bounds, ``None`` for an open end (text ``[4, 8)`` is min 4, max 7; ``(..., 0)`` is
  min None, max -1; ``[100, ...)`` is min 100, max None; ``1K`` is 1024).
* ``prints``: how often each map was printed; only the last printing is kept in ``maps``
  (a program that prints a map every interval reports its last state).
* ``probes`` (None when no "Attaching N probes" / ``attached_probes`` line: bpftrace ran with
  ``-q`` or never attached), ``lost_events`` and ``helper_errors`` (JSON mode only; text mode
  prints them as warnings bpftrace locates in the program, not counted here).
* ``format``: "text" or "json".

Ambiguities that are reported rather than guessed:

* Text mode prints string keys raw and multiple keys joined by ", "; JSON mode joins them by
  ",". A string key containing the separator therefore looks like several keys. Every key of a
  map must have the same number of components, or the map is refused; integer keys (or a key
  without commas) avoid the problem.
* Text mode separates printings by a blank line, but a histogram map also separates its
  entries by one; a key that appears twice within what reads as one printing is refused (JSON
  mode, one line per printing, has no such problem).
* A printf line that starts with ``@`` is read as a map line.
"""

from __future__ import annotations

import re
from typing import Any

from iolab.errors import ParseError, excerpt, shortened
from iolab.parsers import int_within_float, load_json, within_float

_STATS_KEYS = ("count", "average", "total")
# a map's name as bpftrace's text mode prints it: a JSON name outside it would become a column
# with control characters, or one that reads as another map's key ('@a[1]')
_MAP_NAME = re.compile(r"@[A-Za-z0-9_]*")
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

# re.ASCII throughout: \d, \w and \s would take other scripts' digits, letters and spaces,
# and int() reads such digits as numbers; bpftrace prints ASCII
_ATTACHING = re.compile(r"^Attaching (\d+) probes?\.\.\.$", re.ASCII)
_LOST = re.compile(r"^Lost (\d+) events$", re.ASCII)
_MAP_LINE = re.compile(r"^(?P<name>@\w*)(?:\[(?P<key>.*)\])?:(?: (?P<value>.*))?$", re.ASCII)
# Canonical decimal integers only: a string key such as "007" stays a string.
_INT = re.compile(r"^-?(?:0|[1-9]\d*)$", re.ASCII)
# a count or label of at most 20 digits, as a 64-bit integer has: bpftrace prints no longer
_STATS = re.compile(r"^count (-?\d{1,20}), average (-?\d{1,20}), total (-?\d{1,20})$",
                    re.ASCII)
_LABEL = r"-?\d{1,20}[KMGT]?"
_BUCKET = re.compile(
    rf"^(?:\[(?P<one>{_LABEL})\]|\[(?P<lo>{_LABEL}), (?P<hi>{_LABEL})\)"
    rf"|\[(?P<above>{_LABEL}), \.\.\.\)|\(\.\.\., (?P<below>{_LABEL})\))"
    r"\s+(?P<count>\d{1,20}) \|@* *\|$", re.ASCII)


def parse_bpftrace(text: str, source: str = "<string>") -> dict[str, Any]:
    """Parse bpftrace's stdout in whichever mode it was written (JSON when the first non-blank
    line is a JSON object)."""
    first = next((line.strip() for line in _lines(text) if line.strip()), "")
    if first.startswith("{"):
        return parse_bpftrace_json(text, source)
    return parse_bpftrace_text(text, source)


def parse_bpftrace_text(text: str, source: str = "<string>") -> dict[str, Any]:
    """Parse bpftrace's default text output (see the module docstring for the result)."""
    reader = _TextReader(source)
    for number, raw in enumerate(_lines(text), start=1):
        reader.line(number, raw.rstrip())
    reader.close_hist()
    _check_maps(reader.result["maps"], source)
    _check_sizes(reader.result, source)
    return reader.result


class _TextReader:
    """Text mode read line by line into ``result``."""

    def __init__(self, source: str):
        self.source = source
        self.result = _empty("text")
        self.block: dict | None = None   # the printing the current run of map lines belongs to
        self.block_name: str | None = None
        # (map, key, line) whose buckets are being read
        self.hist: tuple[str, tuple, int] | None = None

    def close_hist(self) -> None:
        """End the histogram entry being read, refusing one without buckets."""
        hist = self.hist
        if hist is not None and not self.block[hist[1]]:
            raise ParseError(self.source, f"line {hist[2]}: histogram "
                             f"{_label(hist[0], hist[1])} has no buckets (truncated output?)")
        self.hist = None

    def line(self, number: int, line: str) -> None:
        """Read one line (``number``, from 1), without its trailing white space."""
        if not line:
            if self.hist is not None:
                self.close_hist()  # the end of one histogram entry; the map may list more
            else:
                self.block = self.block_name = None
            return
        bucket = _BUCKET.match(line)
        if bucket:
            if self.hist is None:
                raise ParseError(self.source, f"line {number}: a histogram bucket outside a "
                                 f"histogram: {excerpt(line)}")
            self.block[self.hist[1]].append(_text_bucket(bucket))
            return
        if self.hist is not None and line.startswith(("[", "(")):
            raise ParseError(self.source, f"line {number}: histogram "
                             f"{_label(self.hist[0], self.hist[1])}: malformed bucket line "
                             f"{excerpt(line)} (truncated output?)")
        self.close_hist()
        if line.startswith("@"):
            self._map_line(number, line)
            return
        self.block = self.block_name = None
        if attaching := _ATTACHING.match(line):
            self.result["probes"] = int_within_float(attaching.group(1),
                                                     f"line {number}: probes", self.source)
        elif lost := _LOST.match(line):
            self.result["lost_events"] += int_within_float(lost.group(1),
                                                           f"line {number}: lost events",
                                                           self.source)

    def _map_line(self, number: int, line: str) -> None:
        """A map's entry: its value, or the start of a histogram whose buckets follow."""
        source = self.source
        match = _MAP_LINE.match(line)
        if match is None:
            raise ParseError(source, f"line {number}: not a map line ('@name[key]: value' "
                             f"or '@name: value'): {excerpt(line)}")
        name = match.group("name")
        if name != self.block_name:
            self.block, self.block_name = {}, name
            self.result["maps"][name] = self.block
            self.result["prints"][name] = self.result["prints"].get(name, 0) + 1
        key = _key(match.group("key"), ", ")
        if key in self.block:
            raise ParseError(source, f"line {number}: {_label(name, key)} appears twice in "
                             f"one printing (printed twice without a blank line in "
                             f"between? JSON mode tells printings apart)")
        value = match.group("value")
        if not value:
            self.block[key] = []
            self.hist = (name, key, number)
        else:
            self.block[key] = _text_value(value, name, key, number, source)


def parse_bpftrace_json(text: str, source: str = "<string>") -> dict[str, Any]:
    """Parse the newline-delimited JSON of ``bpftrace -f json`` (see the module docstring)."""
    result = _empty("json")
    for number, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue  # bpftrace writes blank lines between events
        try:
            event = load_json(line, f"{source}: line {number}")
        except ValueError:
            raise ParseError(source, f"line {number}: not a JSON object (truncated output?): "
                             f"{excerpt(line[:80])}") from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ParseError(source, f"line {number}: an event without a 'type': "
                                     f"{excerpt(line[:80])}")
        kind, data = event["type"], event.get("data")
        if kind == "attached_probes":
            result["probes"] = _count(data, "probes", number, source)
        elif kind == "lost_events":
            result["lost_events"] += _count(data, "events", number, source)
        elif kind == "helper_error":
            result["helper_errors"] += 1
        elif kind in ("map", "hist", "stats"):
            if not isinstance(data, dict) or len(data) != 1 \
                    or not str(next(iter(data))).startswith("@"):
                raise ParseError(source, f"line {number}: a '{kind}' event must hold exactly "
                                 f"one map, got {excerpt(str(data)[:80])}")
            name, value = next(iter(data.items()))
            if not _MAP_NAME.fullmatch(name):
                raise ParseError(source, f"line {number}: map name {excerpt(name)} is not '@' "
                                 f"and letters, digits or '_' (A-Za-z0-9_), as bpftrace names "
                                 f"maps")
            result["maps"][name] = _json_map(kind, name, value, number, source)
            result["prints"][name] = result["prints"].get(name, 0) + 1
        # printf, time, cat, join, syscall and value events carry no map
    _check_maps(result["maps"], source)
    _check_sizes(result, source)
    return result


def _empty(mode: str) -> dict[str, Any]:
    return {"format": mode, "probes": None, "lost_events": 0, "helper_errors": 0, "maps": {},
            "prints": {}}


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _key(raw: str | None, separator: str) -> tuple:
    if raw is None:
        return ()
    # a key of more digits than any integer bpftrace prints stays text (int() would refuse it)
    return tuple(int(part) if _INT.match(part) and len(part) <= 21 else part
                 for part in raw.split(separator))


def _label(name: str, key: tuple) -> str:
    return shortened(f"{name}[{', '.join(map(str, key))}]" if key else name)


def _text_value(value: str, name: str, key: tuple, number: int, source: str) -> int | dict:
    if _INT.match(value):
        return int_within_float(value, f"line {number}: {_label(name, key)}", source)
    if stats := _STATS.match(value):
        return _checked_stats(dict(zip(_STATS_KEYS, map(int, stats.groups()))),
                              f"line {number}: {_label(name, key)}", source)
    raise ParseError(source, f"line {number}: {_label(name, key)}: value {excerpt(value)} is "
                     f"neither a number nor 'count N, average N, total N' (maps of strings or "
                     f"stacks are not read)")


def _number(label: str) -> int:
    suffix = label[-1] if label[-1] in "KMGT" else ""
    return int(label[:len(label) - len(suffix)]) * _SUFFIX[suffix]


def _text_bucket(match: re.Match) -> dict[str, int | None]:
    count = int(match.group("count"))
    if match.group("one") is not None:
        value = _number(match.group("one"))
        return {"min": value, "max": value, "count": count}
    if match.group("lo") is not None:
        return {"min": _number(match.group("lo")), "max": _number(match.group("hi")) - 1,
                "count": count}
    if match.group("above") is not None:
        return {"min": _number(match.group("above")), "max": None, "count": count}
    return {"min": None, "max": _number(match.group("below")) - 1, "count": count}


def _count(data: Any, field: str, number: int, source: str) -> int:
    value = data.get(field) if isinstance(data, dict) else None
    if not _is_int(value) or value < 0:
        raise ParseError(source, f"line {number}: expected {{\"{field}\": N}}, got {excerpt(data)}")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_map(kind: str, name: str, value: Any, number: int, source: str) -> dict:
    def where(key: tuple) -> str:
        return f"line {number}: {_label(name, key)}"

    def one(key: tuple, item: Any) -> Any:
        if kind == "hist":
            return _json_buckets(item, where(key), source)
        if _is_int(item):
            return item
        if kind == "stats" and isinstance(item, dict) and set(item) == set(_STATS_KEYS) \
                and all(_is_int(v) for v in item.values()):
            return _checked_stats({k: item[k] for k in _STATS_KEYS}, where(key), source)
        raise ParseError(source, f"{where(key)}: value {excerpt(item)} is not a number (maps of "
                         f"strings, stacks or tuples are not read)")

    keyless = (isinstance(value, list) if kind == "hist" else
               not isinstance(value, dict) or (kind == "stats" and set(value) == set(_STATS_KEYS)
                                               and all(_is_int(v) for v in value.values())))
    if keyless:
        return {(): one((), value)}
    if not isinstance(value, dict):
        raise ParseError(source, f"line {number}: {shortened(name)}: expected an object of "
                         f"keys, got {excerpt(value)}")
    return {_key(k, ","): one(_key(k, ","), v) for k, v in value.items()}


def _json_buckets(buckets: Any, where: str, source: str) -> list[dict[str, int | None]]:
    if not isinstance(buckets, list) or not buckets:
        raise ParseError(source, f"{where}: a histogram must be a non-empty list of buckets, "
                         f"got {excerpt(buckets)}")
    out = []
    for bucket in buckets:
        bounds = {k: bucket.get(k) for k in ("min", "max")} if isinstance(bucket, dict) else {}
        if not isinstance(bucket, dict) or not _is_int(bucket.get("count")) \
                or not any(_is_int(v) for v in bounds.values()) \
                or not all(v is None or _is_int(v) for v in bounds.values()):
            raise ParseError(source, f"{where}: a bucket needs an integer 'count' and 'min' "
                             f"and/or 'max', got {excerpt(bucket)}")
        out.append({**bounds, "count": bucket["count"]})
    return _checked_buckets(out, where, source)


def _checked_stats(stats: dict[str, int], where: str, source: str) -> dict[str, int]:
    """bpftrace's stats(): count >= 0 and average = total / count in C's integer division (0
    with no values); anything else is no stats() bpftrace printed."""
    count, average, total = (stats[k] for k in _STATS_KEYS)
    expected = 0 if count == 0 else abs(total) // count * (1 if total >= 0 else -1)
    if count < 0 or average != expected or (count == 0 and total != 0):
        raise ParseError(source, f"{where}: stats count {count}, average {average}, total "
                         f"{total} do not agree (average = total / count, 0 with count 0)")
    return stats


def _checked_buckets(buckets: list[dict], where: str, source: str) -> list[dict]:
    """Histogram buckets as bpftrace prints them: counts >= 0, each min <= its max, and in
    order without overlapping (each bucket starts above the one before it ends)."""
    end = None
    for i, bucket in enumerate(buckets):
        lo, hi = bucket.get("min"), bucket.get("max")
        if bucket["count"] < 0:
            raise ParseError(source, f"{where}: bucket {i} has a count of {bucket['count']}; a "
                             f"count is 0 or more")
        if lo is not None and hi is not None and lo > hi:
            raise ParseError(source, f"{where}: bucket {i} has min {lo} above its max {hi}")
        if i and (end is None or lo is None or lo <= end):
            raise ParseError(source, f"{where}: bucket {i} [{lo}, {hi}] does not start after "
                             f"bucket {i - 1} ends ({end}): buckets overlap or are out of order")
        end = hi
    return buckets


def _check_sizes(result: dict[str, Any], source: str) -> None:
    """Every count a float can hold (:func:`iolab.parsers.within_float`)."""
    for field in ("probes", "lost_events"):
        within_float(result[field], field, source)
    for name, entries in result["maps"].items():
        for key, value in entries.items():
            where = _label(name, key)
            items = (value if isinstance(value, list) else [value])
            for item in items:
                for part, number in (item.items() if isinstance(item, dict) else [("", item)]):
                    within_float(number, f"{where}{'.' if part else ''}{part}", source)


def _check_maps(maps: dict[str, dict], source: str) -> None:
    for name, entries in maps.items():
        sizes = {len(key) for key in entries}
        if len(sizes) > 1:
            raise ParseError(source, f"{shortened(name)}: keys have {sorted(sizes)} components; "
                             f"a string key containing the key separator is ambiguous (use "
                             f"integer keys)")
