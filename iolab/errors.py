"""Error types that carry enough context to act on: which file, which key, what is allowed.

A message quotes what it was given so that it stays one short line whatever that holds:
control characters escaped (:func:`printable`), and a value from a file or a tool's output cut
to a bounded excerpt (:func:`excerpt`, or :func:`shortened` for a name shown unquoted): a
run's failure quoting a whole 900 MB line took gigabytes to make and store.

Responsible for: the exception classes every module raises for bad input or failed runs, and
quoting values in their messages. Not responsible for: printing them (the CLI does that) or
recovering from them.
"""

from __future__ import annotations

import reprlib
import shlex
from pathlib import Path


def printable(text: str, keep: str = "") -> str:
    """``text`` with what a terminal would not show as itself (a newline, a carriage return,
    an escape sequence's ESC, other control characters) written as its escape, so that a
    message stays one line and a tool's output or a recorded string cannot move the cursor,
    clear the screen or retitle the terminal it is printed to. Characters in ``keep`` (the
    line breaks of a multi-line text) are left as they are."""
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


EXCERPT = 200  # characters of a value quoted in a message: an input's whole line may be huge
PROBLEM_MOST = 2000  # characters of a parser's problem (a few excerpts and their words)


def excerpt(value: object, limit: int = EXCERPT) -> str:
    """``value`` quoted as ``repr`` does, cut to at most ``limit`` characters ending in "…"
    when longer: a message that quotes what it could not read stays short whatever the input
    (a 900 MB line of a tool's output became a run's recorded failure, and its repr took
    gigabytes). A long string is cut before it is quoted, so nothing the size of the input
    is made."""
    if isinstance(value, (str, bytes)):
        text, cut = repr(value[:limit]), len(value) > limit
    else:
        text, cut = _SHORT.repr(value), False
    if len(text) > limit:
        text, cut = text[:limit - 1], True
    return text + "…" if cut else text


def shortened(text: str, limit: int = EXCERPT) -> str:
    """``text`` as it is when at most ``limit`` characters, else cut to ``limit`` ending in
    "…": for a name a message shows unquoted (a job's, a map's, a row's), which a parser takes
    from its input and which may be as long as a line of it."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def shell_word(value: object) -> str:
    """``value`` (a path, most often) as one word of a shell command iolab prints for the user
    to paste: quoted (``shlex.quote``), so that a ``$(...)``, a backquote, a ``;`` or a space
    in it is pasted as the characters it is and never run, with control characters escaped
    (:func:`printable`) so that the line stays one line."""
    return printable(shlex.quote(str(value)))


class _ShortRepr(reprlib.Repr):
    """A repr that quotes at most a few items of a container and a few hundred characters of
    a string or a number (a JSON document from a tool's output can be any size)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = EXCERPT

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 4 * EXCERPT:  # repr refuses past 4300 digits, and takes long
            return f"<an integer of about {int(x.bit_length() * 0.30103)} digits>"
        return super().repr_int(x, level)


_SHORT = _ShortRepr()


class IolabError(Exception):
    """Base class: a problem the user can fix, phrased so they can.

    ``listed``: its message is several lines (a list of corrupt runs, of knobs not restored),
    each made one line where it was written, what it quotes escaped (:func:`listed_error`);
    the command line prints them as they are, and any other error as one line, escaped
    whole."""

    listed = False


def listed_error(message: str) -> IolabError:
    """An IolabError whose ``message`` is several lines, each escaped where it was made."""
    exc = IolabError(message)
    exc.listed = True  # pickled with it (a worker of the tidy table)
    return exc


class InputError(IolabError):
    """Bad input: names the file, the key and what is allowed."""

    def __init__(self, path: str | Path | None, key: str | None, problem: str,
                 allowed: str | None = None):
        self.path = str(path) if path is not None else None
        self.key = key
        self.problem = problem
        self.allowed = allowed
        parts = []
        if self.path:
            parts.append(printable(self.path))
        if key:
            parts.append(f"key '{printable(str(key))}'")
        where = ": ".join(parts)
        # the problem may quote what the user gave: one line whatever it holds
        msg = f"{where}: {printable(problem)}" if where else printable(problem)
        if allowed:
            msg += f" (allowed: {printable(allowed)})"
        super().__init__(msg)

    def __reduce__(self):
        # rebuilt from the constructor's arguments, so that it crosses a process boundary
        # (a worker of the tidy table) as itself
        return type(self), (self.path, self.key, self.problem, self.allowed)


class ParseError(IolabError):
    """A raw tool output that cannot be parsed; names the file and what is wrong.

    A parser quotes the input it could not read through :func:`excerpt`; a problem longer than
    :data:`PROBLEM_MOST` characters all the same (a name taken whole from a huge line) is cut,
    since it becomes a failed run's recorded reason."""

    def __init__(self, source: str | Path, problem: str):
        self.source = str(source)
        if len(problem) > PROBLEM_MOST:
            problem = problem[:PROBLEM_MOST - 1] + "…"
        self.problem = problem
        super().__init__(f"{self.source}: {problem}")

    def __reduce__(self):
        return type(self), (self.source, self.problem)


class ToolError(IolabError):
    """A required system tool is missing or failed."""
