"""Reader of CIJOE's command records (``cmd_XX.state``).

CIJOE writes one record per command with ``yaml.dump`` of a flat dict (``begin``, ``cmd``,
``cwd``, ``elapsed``, ``end``, ``err``, ``is_done``, ``output_dpath``, ``output_fpath``): a
block mapping of scalars, one ``key: value`` line each, where a value longer than the line
width continues on lines indented by two spaces, and a string is single- or double-quoted
only where plain text would read as something else (a number, ``key: value``, a non-ASCII or
control character). This module reads exactly that shape with compiled patterns: an import
reads one record per command (about 1,300 per archive), where a general YAML parser cost more
than everything else the importer does with them.

Values come out as PyYAML's ``safe_load`` gives them (YAML 1.1): plain ``null``/``~``/empty
as None, ``true``/``false`` (and yes/no/on/off) as bool, decimal integers and floats (with
``.inf``/``.nan``) as int and float, anything else as str; quoted values as str, with line
folding and (double-quoted) escapes applied. A plain value that YAML 1.1 would read as
another type (hex, octal or sexagesimal numbers, underscores in numbers, dates, ``<<``,
``=``) and every other YAML construct (comments, flow or block collections, block scalars,
anchors, tags, document markers) raise :class:`~iolab.errors.ParseError`, naming the
record, the line and the key: CIJOE never writes them, and a guessed value would be wrong
silently. So does a key given twice (``yaml.dump`` writes each once; keeping either value,
say ``err: 0`` over ``err: 1``, would import a failed command as good).

Responsible for: turning one record's text into a dict. Not responsible for: which keys a
record must have or what they mean (:mod:`iolab.importers.cijoe`, which also checks that
``cmd``, ``begin`` and ``end`` are there).
"""

from __future__ import annotations

import re
from typing import Any

from iolab.errors import ParseError, excerpt, shortened

_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?:[ \t]+(.*)|[ \t]*)")
# A value continued on the next line: indented by spaces (YAML takes no tab as indentation).
_CONTINUATION = re.compile(r" +[^ \t]")
# What YAML's reader refuses anywhere in a stream (the complement of its NON_PRINTABLE), and
# the line breaks other than \n and \r that YAML would split lines at (\x85, \u2028, \u2029).
# Listed rather than negated: the negated class of everything allowed compiles slowly.
_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")

# Plain scalars (YAML 1.1 as PyYAML's resolver reads them).
_NULL = {"", "~", "null", "Null", "NULL"}
_BOOL = {word: value for value, words in ((True, "yes Yes YES true True TRUE on On ON"),
                                          (False, "no No NO false False FALSE off Off OFF"))
         for word in words.split()}
_TYPED_START = frozenset("-+.0123456789<=")  # what a number, a date, '<<' or '=' starts with
_NUMBER = re.compile(r"""(?P<int>[-+]?(?:0|[1-9][0-9]*))
                       | (?P<float>[-+]?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?
                                  | \.[0-9]+(?:[eE][-+][0-9]+)?)
                       | (?P<inf>[-+]?\.(?:inf|Inf|INF)) | (?P<nan>\.(?:nan|NaN|NAN))""", re.X)
# The other forms PyYAML's resolver gives a type: refused rather than read as text.
_OTHER_TYPED = re.compile(r"""
    [-+]?0b[0-1_]+ | [-+]?0[0-7_]+ | [-+]?(?:0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+
  | [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
  | [-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)? | \.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
  | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
  | [0-9]{4}-[0-9]{2}-[0-9]{2}
  | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?
    (?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?
  | << | =""", re.X)
# A plain scalar cannot start with a character that starts a flow collection, a comment, an
# anchor, an alias, a tag, a block scalar, a directive or a reserved indicator, nor with '-',
# '?' or ':' before a blank; and it cannot hold ': ' (a mapping) or ' #' (a comment) anywhere.
# (Substring tests: a regex search for these costs more than the rest of a record.)
_PLAIN_BAD_FIRST = frozenset(",[]{}#&*!|>%@`")
_PLAIN_BAD_INSIDE = (": ", ":\t", ":\n", " #", "\t#", "\n#")

_SINGLE = re.compile(r"'((?:[^']|'')*)'")
_DOUBLE = re.compile(r'"((?:[^"\\]|\\[\s\S])*)"')
_ESCAPES = {"0": "\0", "a": "\x07", "b": "\x08", "t": "\t", "\t": "\t", "n": "\n", "v": "\x0b",
            "f": "\x0c", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "\\": "\\", "/": "/",
            "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_CODE_LENGTHS = {"x": 2, "u": 4, "U": 8}
# One step through a double-quoted scalar: text, an escaped line break (and the empty lines
# after it), a line break with the blanks around it (folded), an escape, or blanks.
_DOUBLE_STEP = re.compile(r"""([^ \t\n\\]+)
                            | \\\n((?:[ \t]*\n)*)[ \t]*
                            | [ \t]*\n((?:[ \t]*\n)*)[ \t]*
                            | \\(x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[\s\S])
                            | ([ \t]+)""", re.X)


def parse_cijoe_state(data: bytes | str, source: str) -> dict[str, Any]:
    """The record's keys and values (see the module docstring); ParseError names ``source``."""
    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise ParseError(source, f"not UTF-8 text ({exc})") from None
    bad = _REFUSED.search(text)
    if bad:
        raise ParseError(source, f"character {excerpt(bad.group())} at offset {bad.start()}: "
                         "not in a CIJOE .state (allowed: printable text, tabs and \\n line "
                         "breaks)")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    record: dict[str, Any] = {}
    entry: tuple[int, str, list[str]] | None = None  # (line number, key, value lines)
    seen: dict[str, int] = {}  # key -> the line it was first given on
    for number, line in enumerate(lines, start=1):
        match = _KEY.fullmatch(line)
        if match:
            if entry:
                record[entry[1]] = _value(*entry, source)
            if match.group(1) in _NULL or match.group(1) in _BOOL:
                raise ParseError(source, f"line {number}: key {excerpt(match.group(1))} reads "
                                 "as a YAML null or boolean (allowed: a name such as 'cmd')")
            if match.group(1) in seen:  # yaml.dump never writes one twice: which would count?
                raise ParseError(source, f"line {number}: key {excerpt(match.group(1))} is "
                                 f"given twice (first on line {seen[match.group(1)]}); "
                                 "allowed: each key once, as CIJOE's yaml.dump writes it")
            seen[match.group(1)] = number
            entry = (number, match.group(1), [match.group(2) or ""])
        elif not line.strip(" ") or (entry and _CONTINUATION.match(line)):
            if entry:
                entry[2].append(line)
        else:
            raise ParseError(source, f"line {number}: expected 'key: value' or a value continued "
                             f"on an indented line, got {excerpt(line[:60])} (a CIJOE .state is "
                             f"the flat YAML mapping that CIJOE's yaml.dump writes)")
    if entry:
        record[entry[1]] = _value(*entry, source)
    return record


def _value(number: int, key: str, pieces: list[str], source: str) -> Any:
    """The value of ``key`` from its line (``number``) and its continuation lines."""
    while pieces and not pieces[0].strip(" \t"):  # a value may start on the next line
        pieces = pieces[1:]
        number += 1
    if not pieces:
        return None
    text = "\n".join(pieces).strip(" \t")
    if text[0] not in "'\"":
        return _plain(text, number, key, source)
    match = (_SINGLE if text[0] == "'" else _DOUBLE).match(text)
    where = f"line {number}: key '{shortened(key)}'"
    if match is None:
        raise ParseError(source, f"{where}: no closing quote {text[0]}")
    if text[match.end():].strip(" \t\n"):
        raise ParseError(source, f"{where}: {excerpt(text[match.end():].strip()[:40])} after the "
                         "closing quote (allowed: nothing)")
    if text[0] == "'":
        return _fold(match.group(1)).replace("''", "'")
    return _unescape(match.group(1), where, source)


def _plain(text: str, number: int, key: str, source: str) -> Any:
    if "\n" in text:
        lines = [line.strip(" \t") for line in text.split("\n")]
        while not lines[-1]:
            lines.pop()
        text = _join(lines)
    if (text[0] in _PLAIN_BAD_FIRST or (text[0] in "-?:" and text[1:2] in ("", " ", "\t", "\n"))
            or text[-1] == ":" or any(bad in text for bad in _PLAIN_BAD_INSIDE)):
        raise ParseError(source, f"line {number}: key '{shortened(key)}': {excerpt(text[:60])} "
                         "is not a plain value as CIJOE writes it (it starts with a YAML "
                         "indicator, or holds ': ' or ' #', which CIJOE quotes)")
    if text in _NULL:
        return None
    if text in _BOOL:
        return _BOOL[text]
    if text[0] in _TYPED_START:
        number_match = _NUMBER.fullmatch(text)
        if number_match is not None:
            kind = number_match.lastgroup
            if kind == "int":
                return int(text)
            if kind == "float":
                return float(text)
            return float("nan") if kind == "nan" else float(text.replace(".", "", 1))
        if _OTHER_TYPED.fullmatch(text):
            raise ParseError(source, f"line {number}: key '{shortened(key)}': {excerpt(text)} "
                             "is a YAML 1.1 number, date or merge key in a form this reader does "
                             "not decode (allowed: decimal numbers, true/false, null, text)")
    return text


def _fold(text: str) -> str:
    """A quoted scalar's text with its line breaks folded: blanks around each break dropped,
    a single break read as a space, each further (empty) line as a newline."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    last = len(lines) - 1
    return _join([line.rstrip(" \t") if i == 0 else line.lstrip(" \t") if i == last
                  else line.strip(" \t") for i, line in enumerate(lines)])


def _join(lines: list[str]) -> str:
    """Lines joined as YAML folds them: one break is a space, n empty lines are n newlines.
    The first and last line are never taken as empty ones (in a quoted scalar they hold the
    quotes; a plain one has none at its ends)."""
    out = [lines[0]]
    empty = 0
    for i, line in enumerate(lines[1:], start=1):
        if not line and i < len(lines) - 1:
            empty += 1
            continue
        out.append("\n" * empty if empty else " ")
        out.append(line)
        empty = 0
    return "".join(out)


def _unescape(text: str, where: str, source: str) -> str:
    """A double-quoted scalar's text: escapes decoded and line breaks folded as YAML does."""
    out = []
    at = 0
    while at < len(text):
        # every character starts a step: _DOUBLE left no lone backslash at the end
        step = _DOUBLE_STEP.match(text, at)
        literal, escaped_break, folded, escape, blanks = step.groups()
        if literal is not None:
            out.append(literal)
        elif escaped_break is not None:
            out.append("\n" * escaped_break.count("\n"))
        elif folded is not None:
            out.append("\n" * folded.count("\n") if folded else " ")
        elif escape is not None:
            if escape[0] in _CODE_LENGTHS and len(escape) > 1:
                try:
                    out.append(chr(int(escape[1:], 16)))
                except (ValueError, OverflowError):
                    raise ParseError(source, f"{where}: \\{escape} is not a character") from None
            elif escape in _ESCAPES:
                out.append(_ESCAPES[escape])
            else:
                raise ParseError(source, f"{where}: unknown escape \\{escape} (allowed: YAML's "
                                 "double-quoted escapes)")
        else:
            out.append(blanks)
        at = step.end()
    return "".join(out)
