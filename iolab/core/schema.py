"""Typed fields for experiment specs: what a params key may hold, checked with file and key named.

An experiment declares three groups of fields (:class:`Schema`): its *settings* (scalar
values that change what is executed, e.g. ``runtime_s``), its *variables* (the axes of its
grids, e.g. ``qdepth``) and its *analysis* keys (presentation and statistics, never part of a
run's identity). Each field has a type, an optional range or value set, an optional default,
and optionally the condition under which a setting applies (``when``: e.g. ``spdk_dir`` only
with ``tool: bdevperf``).

Responsible for: checking one value against its field and phrasing what is allowed.
Not responsible for: where values come from or how they combine (``iolab.core.spec``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iolab.checks import is_positive_int
from iolab.errors import InputError, excerpt


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

# fio's and dd's size notation: a whole number of bytes, optionally with a binary suffix, in
# either case. Spelled without a flag, so that the published JSON Schema uses it as it is.
SIZE_PATTERN = r"[1-9][0-9]*[KMGTPkmgtp]?([iI]?[bB])?"
_SIZE = re.compile(SIZE_PATTERN)


_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
# The largest file Linux can hold (off_t, 2**63 - 1 bytes, 8 EiB): a size beyond it is no
# file's, and its digits need not be read (int() of 4,300 digits and more raises ValueError)
MAX_SIZE = 2**63 - 1
_MAX_SIZE_DIGITS = len(str(MAX_SIZE))


def size_bytes(value: str | int) -> int:
    """A value a :func:`Size` field accepted, in bytes (``256M`` -> 268435456)."""
    if isinstance(value, int):
        return value
    text = value.upper().removesuffix("B").removesuffix("I")
    return int(text[:-1]) * _UNITS[text[-1]] if text[-1] in _UNITS else int(text)


def type_name(value: Any) -> str:
    return {bool: "boolean", int: "whole number", float: "number", str: "string", list: "list",
            dict: "mapping", type(None): "null"}.get(type(value), type(value).__name__)


def _yaml_bool_hint(value: Any, expects: str) -> str:
    if isinstance(value, bool) and expects == "string":
        return " (YAML reads unquoted on/off/yes/no as booleans: write 'on' in quotes)"
    return ""


@dataclass(frozen=True)
class Field:
    """One key's type and constraints; build fields with the functions below."""

    kind: str                           # int | number | text | choice | flag | size | list
    help: str = ""
    default: Any = REQUIRED
    minimum: float | None = None
    maximum: float | None = None
    positive: bool = False              # strictly greater than zero
    choices: tuple[Any, ...] = ()
    item: Field | None = None           # element type of a list
    min_items: int = 1
    when: tuple[tuple[str, Any], ...] = ()  # applies only when these settings have these values
    pattern: str | None = None          # a text must match it (regular expression)
    pattern_help: str = ""              # the pattern in words

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def applies(self, settings: dict[str, Any]) -> bool:
        return all(settings.get(key) == value for key, value in self.when)

    def when_text(self) -> str:
        return " and ".join(f"{key} is {value}" for key, value in self.when)

    def allowed(self) -> str:
        """What this field accepts, in words."""
        if self.kind == "choice":
            return ", ".join(str(c) for c in self.choices)
        if self.kind == "flag":
            return "true, false"
        if self.kind == "size":
            return ("a size such as 1G, 256M, 4096 (bytes; K, M, G, T, P are powers of 1024), "
                    f"at most {MAX_SIZE} bytes")
        if self.kind == "list":
            return f"a list of at least {self.min_items}: {self.item.allowed()}"
        if self.kind == "text":
            return self.pattern_help or "a non-empty string"
        what = "a whole number" if self.kind == "int" else "a number"
        lo = ">0" if self.positive and self.minimum is None else (
            f">={_num(self.minimum)}" if self.minimum is not None else "")
        hi = f"<={_num(self.maximum)}" if self.maximum is not None else ""
        bounds = " and ".join(b for b in (lo, hi) if b)
        return f"{what} {bounds}".strip()

    def check(self, value: Any, path: str | Path | None, key: str) -> Any:
        """``value`` if it fits, else InputError naming the file, the key and what is allowed."""
        def bad(problem: str) -> InputError:
            return InputError(path, key, problem, self.allowed())

        if self.kind in ("int", "number"):
            ok_type = (isinstance(value, int) if self.kind == "int" else
                       isinstance(value, (int, float))) and not isinstance(value, bool)
            if not ok_type:
                raise bad(f"{excerpt(value)} is a {type_name(value)}")
            if isinstance(value, float) and not math.isfinite(value):
                raise bad(f"{excerpt(value)} is not a finite number")
            if (self.positive and value <= 0) or (self.minimum is not None and value < self.minimum) \
                    or (self.maximum is not None and value > self.maximum):
                raise bad(f"{excerpt(value)} is out of range")
            return value
        if self.kind == "text":
            if not isinstance(value, str):
                raise bad(f"{excerpt(value)} is a {type_name(value)}"
                          f"{_yaml_bool_hint(value, 'string')}")
            if not value.strip():
                raise bad("empty string")
            if self.pattern and not re.fullmatch(self.pattern, value):
                raise bad(f"{excerpt(value)} does not have the expected form")
            return value
        if self.kind == "choice":
            # 1 and True compare equal in Python; a choice of numbers must not take a boolean
            if value not in self.choices or any(isinstance(value, bool) != isinstance(c, bool)
                                                for c in self.choices if c == value):
                hint = _yaml_bool_hint(value, "string") if any(isinstance(c, str)
                                                                 for c in self.choices) else ""
                raise bad(f"{excerpt(value)} is not one of the allowed values{hint}")
            return value
        if self.kind == "flag":
            if not isinstance(value, bool):
                raise bad(f"{excerpt(value)} is a {type_name(value)}, not true or false")
            return value
        if self.kind == "size":
            if is_positive_int(value):
                if value > MAX_SIZE:  # no repr: it raises ValueError from 4,300 digits on
                    digits = int(value.bit_length() * math.log10(2)) + 1
                    raise bad(f"a whole number of about {digits} digits is out of range")
                return value
            if not isinstance(value, str) or not _SIZE.fullmatch(value):
                raise bad(f"{excerpt(value)} is not a size")
            digits = len(value) - len(value.lstrip("0123456789"))
            if digits > _MAX_SIZE_DIGITS or size_bytes(value) > MAX_SIZE:
                raise bad(f"{excerpt(value)} is out of range")
            return value
        if self.kind == "list":
            if not isinstance(value, list):
                raise bad(f"{excerpt(value)} is a {type_name(value)}, not a list")
            if len(value) < self.min_items:
                raise bad(f"has {len(value)} entries")
            return [self.item.check(v, path, f"{key}[{i}]") for i, v in enumerate(value)]
        raise AssertionError(f"unknown field kind {self.kind}")


def _num(value: float) -> str:
    """A bound as written: a whole number in full (2**63 - 1, not 9.22337e+18)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _when(when: dict[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((when or {}).items()))


def Int(minimum: int | None = None, maximum: int | None = None, *, default: Any = REQUIRED,
        help: str = "", when: dict[str, Any] | None = None) -> Field:
    return Field("int", help, default, minimum, maximum, when=_when(when))


def Number(minimum: float | None = None, maximum: float | None = None, *, positive: bool = False,
           default: Any = REQUIRED, help: str = "", when: dict[str, Any] | None = None) -> Field:
    return Field("number", help, default, minimum, maximum, positive, when=_when(when))


def Text(*, default: Any = REQUIRED, help: str = "", when: dict[str, Any] | None = None,
         pattern: str | None = None, pattern_help: str = "") -> Field:
    return Field("text", help, default, when=_when(when), pattern=pattern,
                 pattern_help=pattern_help)


def Choice(*choices: Any, default: Any = REQUIRED, help: str = "",
           when: dict[str, Any] | None = None) -> Field:
    return Field("choice", help, default, choices=tuple(choices), when=_when(when))


def Flag(*, default: Any = REQUIRED, help: str = "", when: dict[str, Any] | None = None) -> Field:
    return Field("flag", help, default, when=_when(when))


def Size(*, default: Any = REQUIRED, help: str = "", when: dict[str, Any] | None = None) -> Field:
    return Field("size", help, default, when=_when(when))


def ListOf(item: Field, *, min_items: int = 1, default: Any = REQUIRED, help: str = "",
           when: dict[str, Any] | None = None) -> Field:
    return Field("list", help, default, item=item, min_items=min_items, when=_when(when))


def in_order(fields: dict[str, Field]) -> list[tuple[str, Field]]:
    """Unconditional fields first: the conditions (``when``) of the others refer to them."""
    return sorted(fields.items(), key=lambda kv: bool(kv[1].when))


@dataclass(frozen=True)
class Schema:
    """The fields of one experiment's spec."""

    settings: dict[str, Field]
    variables: dict[str, Field]
    analysis: dict[str, Field] = field(default_factory=dict)
