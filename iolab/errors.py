"""Error types that carry enough context to act on: which file, which key, what is allowed.

Responsible for: the exception classes every module raises for bad input or failed runs.
Not responsible for: printing them (the CLI does that) or recovering from them.
"""

from __future__ import annotations

from pathlib import Path


def printable(text: str) -> str:
    """``text`` with what a terminal would not show as itself (a newline, a carriage return,
    other control characters) written as its escape, so that a message stays one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class IolabError(Exception):
    """Base class: a problem the user can fix, phrased so they can."""


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
    """A raw tool output that cannot be parsed; names the file and what is wrong."""

    def __init__(self, source: str | Path, problem: str):
        self.source = str(source)
        self.problem = problem
        super().__init__(f"{self.source}: {problem}")

    def __reduce__(self):
        return type(self), (self.source, self.problem)


class ToolError(IolabError):
    """A required system tool is missing or failed."""
