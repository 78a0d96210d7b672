"""Typed checks of one value that every layer may use: a tool adapter's options, a collector's
settings, a knob's value, a parser's field.

Python counts ``True`` as the whole number 1, and a hand-written ``isinstance(v, int)`` took it
(or forgot to refuse it) in one place or another; these checks say once what a whole number is.
The typed fields of an experiment's params (:mod:`iolab.core.schema`) sit in ``core``, which the
tools, collectors, host and parsers below it cannot import; its sizes use this check too.

Responsible for: telling whether a value is a whole number in range, and refusing one that is
not with an :class:`~iolab.errors.InputError` naming the file, the key and what is allowed.
Not responsible for: where the value comes from (a params file, a command line, a record), or
the checks one adapter alone makes (its value sets, its devices).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.errors import InputError, excerpt

POSITIVE_ALLOWED = "a whole number >=1"


def is_whole_number(value: Any, least: int = 0) -> bool:
    """Whether ``value`` is a whole number (an int, not a bool) of at least ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def is_positive_int(value: Any) -> bool:
    """Whether ``value`` is a positive whole number (1, 2, ...; not True, 0, 1.0 or '1')."""
    return is_whole_number(value, 1)


def positive_int(value: Any, key: str, path: str | Path | None = None, *,
                 what: str = "a positive whole number") -> int:
    """``value`` if it is a positive whole number, else InputError naming ``path`` (if any),
    ``key`` and what is allowed; ``what`` says it in the key's own unit (``whole
    milliseconds >= 1``)."""
    if not is_positive_int(value):
        raise InputError(path, key, f"must be {what}, got {excerpt(value)}", POSITIVE_ALLOWED)
    return value
