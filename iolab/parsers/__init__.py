"""Pure parsers of raw tool output: each is a function of file contents and never runs a tool.

Responsible for: turning one output format into numbers, with a clear error naming the source
for malformed input; an error quotes at most a bounded excerpt of the input it could not read
(:func:`iolab.errors.excerpt`, :func:`iolab.errors.shortened`), however long the line.
Not responsible for: finding or running tools, or which files a run has (``iolab.tools``).

A number a report holds must be one a float can hold: Python reads a JSON integer literal, or
a run of digits, at any size, but ``float()`` of one beyond about 1.8e308, and a division of
it, raise OverflowError, which is no ParseError; the run would then end the campaign instead
of failing with its reason. :func:`within_float` names the key of such a number.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from iolab.errors import ParseError

FLOAT_MAX = sys.float_info.max


def within_float(value: Any, key: str, source: str) -> Any:
    """``value``, unless it is an integer too large for a float: then a ParseError naming
    ``key`` (no tool writes one; a report that holds one is damaged or not the tool's)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > FLOAT_MAX:
        digits = int(value.bit_length() * math.log10(2)) + 1  # str() refuses 4,300 and more
        raise ParseError(source, f"{key}: an integer of about {digits} digits, beyond the "
                                 f"largest number a measurement can hold ({FLOAT_MAX:.3g})")
    return value


def int_within_float(text: str, key: str, source: str) -> int:
    """``int(text)``, checked by :func:`within_float`."""
    return within_float(int(text), key, source)
