"""Splitting a command line into words as ``shlex.split`` does (POSIX quoting, no comments).

Words are separated by spaces, tabs, carriage returns and newlines; inside a word, a
backslash outside quotes takes the next character literally, ``'…'`` is taken literally, and
``"…"`` is taken literally except that a backslash before ``"`` or ``\\`` takes that
character. An unclosed quote or a backslash at the very end raises ValueError, as shlex
does.

Responsible for: exactly that, with compiled patterns: the importer splits every command
line of an archive (about 1,300), where shlex's character-by-character reader cost more than
the rest of indexing them. Not responsible for: what the words mean (the tool adapters'
``read_argv``) or shell syntax beyond quoting (operators, variables and globs stay words).
"""

from __future__ import annotations

import re

_BLANKS = re.compile(r"[ \t\r\n]*")
# A word: unquoted characters, backslash escapes and quoted strings, with no blank between.
_WORD = re.compile(r"""(?:[^ \t\r\n'"\\]+|\\[\s\S]|'[^']*'|"(?:[^"\\]|\\[\s\S])*")+""")
_PART = re.compile(r"""\\([\s\S])|'([^']*)'|"((?:[^"\\]|\\[\s\S])*)"|([^'"\\]+)""")
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\([\\"])')
# What is left when a backslash has nothing after it (shlex's "No escaped character"),
# outside quotes or inside an unclosed double quote.
_ENDS_IN_ESCAPE = re.compile(r'"?(?:[^"\\]|\\[\s\S])*\\')


def split(cmd: str) -> list[str]:
    """The words of ``cmd``, as ``shlex.split(cmd)`` gives them."""
    words = []
    at = _BLANKS.match(cmd).end()
    while at < len(cmd):
        word = _WORD.match(cmd, at)
        if word is None:  # an unclosed quote, or a backslash ending the line
            raise ValueError("No escaped character" if cmd[at] != "'"
                             and _ENDS_IN_ESCAPE.fullmatch(cmd, at) else "No closing quotation")
        words.append(_unquote(word.group()))
        at = _BLANKS.match(cmd, word.end()).end()
    return words


def _unquote(word: str) -> str:
    if "\\" not in word and "'" not in word and '"' not in word:
        return word
    out = []
    for escaped, single, double, plain in _PART.findall(word):
        # findall gives "" for the groups that did not take part: one of the four holds the part
        out.append(escaped or single or _DOUBLE_QUOTED_ESCAPE.sub(r"\1", double) or plain)
    return "".join(out)
