"""YAML as iolab reads it, wherever it reads YAML: params files and ``--set``/``--where``
values, the reference registry and its tables, each experiment's ``claims.yaml``, the book's
table of contents and a search replay's record.

* **Safe:** no tag builds a Python object (YAML's safe loader).
* **No key twice:** a key given twice in one mapping is refused, naming both lines; PyYAML
  keeps the last one silently, and a repeated ``repetitions`` or reference ``value`` would
  then override the first unseen.
* **Aliases bounded:** an alias (``*name``) stands for its anchor's (``&name``) whole value
  wherever it is used, so nine lines of anchors, each listing the one before ten times (a
  "billion laughs"), stand for 10^9 values. The loaded document shares them and is small,
  but every walk over it (a copy, a check, a message quoting it) builds them all: gigabytes
  and minutes from a 4 KB file. Aliases may repeat at most :data:`ALIAS_MOST` values in all,
  and an alias inside its own anchor (a value without end) is refused, both before anything
  walks the document. A document without aliases is not affected.
* **Numbers:** an integer Python will not read (more than 4,300 digits) is a YAMLError, not a
  crash.
* **Files** (:func:`read_file`) are read as a regular file (never through a link, never a FIFO
  or device) of at most the bytes its caller states (:func:`iolab.safefiles.read_regular`),
  UTF-8, and every problem is one :class:`~iolab.errors.InputError` naming the file.

Responsible for: turning YAML text into Python values with those checks, and the one-line
wording of a YAML error. Not responsible for: what the documents must hold (their modules).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from iolab.errors import InputError, excerpt
from iolab.safefiles import read_regular

# values (scalars, lists and mappings, keys included) aliases may repeat in one document, in
# all: hand-written anchors for a shared block repeat a few hundred; a "billion laughs", 10^9
ALIAS_MOST = 10_000


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, first: int, second: int):
        super().__init__(f"key {excerpt(key)} is given twice, on line {first} and on line "
                         f"{second}: keep one")
        self.key = key


class AliasBound(yaml.YAMLError):
    """Aliases that stand for more values than :data:`ALIAS_MOST`, or for themselves."""


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping and aliases past the
    bound (module docstring)."""

    def compose_document(self) -> yaml.Node:
        node = super().compose_document()
        _check_aliases(node)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class says so
                break
            if first is not None:
                raise DuplicateKey(key, first, key_node.start_mark.line + 1)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                              _StrictLoader.construct_mapping)


def _check_aliases(root: yaml.Node | None) -> None:
    """AliasBound when the tree ``root`` stands for (each alias counted as its anchor's whole
    value, at each use) holds more than :data:`ALIAS_MOST` values beyond the document's own
    nodes, or when a node lies inside itself. Each node is counted once (its size kept), so
    this takes time in the document's size, not in what it stands for."""
    if root is None:
        return
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in open_nodes:
            mark = node.start_mark
            raise AliasBound(f"an alias inside its own anchor (line {mark.line + 1}, column "
                             f"{mark.column + 1}) stands for a value without end")
        open_nodes.add(id(node))
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(key) + size(value) for key, value in node.value)
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    expanded = size(root)
    repeated = expanded - len(sizes)  # each distinct node once is the document's own
    if repeated > ALIAS_MOST:
        raise AliasBound(f"its aliases repeat {repeated:,} values, more than the {ALIAS_MOST:,} "
                         "iolab reads: write the values out, or anchor smaller blocks")


def load_yaml(text: str) -> Any:
    """``text`` read as YAML: safe, no key twice, aliases bounded (module docstring), and a
    number Python will not read (an integer of more than 4,300 digits) a YAMLError, not a
    crash."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except ValueError as exc:  # int() of a run of digits beyond sys.get_int_max_str_digits
        raise yaml.YAMLError(f"a number that cannot be read: {str(exc)[:120]}") from None


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line, with its line and column where YAML gives them."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        context = f"{exc.context}, " if exc.context else ""
        return " ".join(f"{context}{exc.problem} (line {mark.line + 1}, column "
                        f"{mark.column + 1})".split())
    return " ".join(str(exc).split())


def read_file(path: Path, role: str, most: int) -> Any:
    """The YAML document of the file ``path`` (``role``: what it is, for a refusal); an
    InputError naming the file, in one line, for nothing there, anything but a regular file
    (a link is never followed), more than ``most`` bytes, text that is not UTF-8 and YAML
    that :func:`load_yaml` refuses."""
    try:
        raw = read_regular(Path(path), role, most)
    except OSError as exc:
        raise InputError(path, None, f"cannot read it: {exc.strerror or exc}") from None
    if raw is None:
        raise InputError(path, None, "does not exist", allowed=f"a YAML file: {role}")
    return parse_bytes(path, raw)


def parse_bytes(path: Path, raw: bytes) -> Any:
    """The YAML document of ``raw``, the bytes of the file ``path``; InputError naming it, in
    one line, for text that is not UTF-8 and YAML that :func:`load_yaml` refuses."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(path, None, f"is not UTF-8 text (byte {raw[exc.start]:#04x} on line "
                         f"{line}); save it as UTF-8") from None
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise InputError(path, None, f"malformed YAML: {yaml_problem(exc)}") from None
    except RecursionError:
        raise InputError(path, None, "malformed YAML: nested too deeply") from None
