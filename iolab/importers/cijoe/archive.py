"""Opening an AiSIO CIJOE archive and indexing its commands.

The archive is a ``.tar.gz`` or its extracted folder, read into memory and never extracted to
disk; its files are keyed by their path below the CIJOE output root (the folder holding the
``NNN_<step>/cmd_XX.state`` files). The index is every command of every step, in order, each
with its ``.state`` and ``.output`` and classified.

Responsible for: reading the archive's files, their times and its sha256; finding the CIJOE
output root; indexing and classifying the commands in order (a ``cat`` reads a capture only
once the command that started it was seen).
Not responsible for: what kind one command line is (:mod:`iolab.importers.cijoe.kinds`),
reading CIJOE's ``.state`` records (:mod:`iolab.parsers.cijoe_state`), or grouping the
commands into repetitions (:mod:`iolab.importers.cijoe.pairing`).
"""

from __future__ import annotations

import hashlib
import re
import tarfile
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from iolab.core.store import sha256_file
from iolab.errors import InputError, ParseError
from iolab.importers.cijoe.kinds import (CPUFREQ_START, DCGM_START, OTHER, _classify, _program,
                                         _words)
from iolab.importers.cijoe.report import ImportReport
from iolab.parsers.cijoe_state import parse_cijoe_state

_STATE = re.compile(r"^(?P<root>(?:.*/)?)(?P<step>\d{3}_[^/]+)/cmd_(?P<n>\d+)\.state$")
_DMON_OUTPUT = re.compile(r">\s*(\S+?)[\"']?\s*$")


@dataclass
class Command:
    """One CIJOE command: its ``.state`` (parsed and raw) and its ``.output``."""

    step: str
    number: int
    state: dict[str, Any]
    state_bytes: bytes
    output_bytes: bytes
    kind: str = OTHER
    # what params._command_params read from a benchmark's command line (and output), read once
    params: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return f"{self.step}/cmd_{self.number:02d}"

    @property
    def cmd(self) -> str:
        return str(self.state.get("cmd", ""))

    @cached_property
    def argv(self) -> list[str]:
        return _words(self.cmd)


@dataclass
class _Archive:
    name: str
    sha256: str
    files: dict[str, bytes]  # path relative to the CIJOE output root
    mtimes: dict[str, float]


def _open(path: Path) -> _Archive:
    """All regular files of the archive, keyed by their path below the CIJOE output root."""
    if path.is_dir():
        raw = {str(p.relative_to(path).as_posix()): p for p in path.rglob("*") if p.is_file()}
        files = {name: p.read_bytes() for name, p in raw.items()}
        mtimes = {name: p.stat().st_mtime for name, p in raw.items()}
        digest = hashlib.sha256()
        for name in sorted(files):
            digest.update(f"{name}\0{hashlib.sha256(files[name]).hexdigest()}\n".encode())
        sha = digest.hexdigest()
    elif path.is_file():
        files, mtimes = {}, {}
        try:
            with tarfile.open(path, "r:*") as tar:
                for member in tar:
                    if member.isfile():
                        files[member.name] = tar.extractfile(member).read()
                        mtimes[member.name] = float(member.mtime)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise InputError(path, None, f"not a readable tar archive ({exc})") from None
        sha = sha256_file(path)
    elif path.exists():  # a FIFO or a device: never read (a FIFO would block for ever)
        raise InputError(path, None, "is neither a regular file nor a folder",
                         allowed="a .tar.gz archive or its extracted folder")
    else:
        raise InputError(path, None, "no such archive or folder")
    roots = {m.group("root") for m in map(_STATE.match, files) if m}
    if len(roots) != 1:
        raise InputError(path, None, "not a CIJOE output: expected NNN_<step>/cmd_XX.state files "
                         f"under one root folder, found {len(roots)} roots {sorted(roots)}")
    root = roots.pop()
    name = path.name
    return _Archive(name, sha,
                    {n[len(root):]: b for n, b in files.items() if n.startswith(root)},
                    {n[len(root):]: t for n, t in mtimes.items() if n.startswith(root)})


def _index(arc: _Archive, report: ImportReport) -> list[Command]:
    """Every command of every step, in order, classified."""
    commands = []
    for path in arc.files:
        match = _STATE.match(path)
        if not match:
            continue
        state = parse_cijoe_state(arc.files[path], f"{arc.name}:{path}")
        if "cmd" not in state:
            raise ParseError(f"{arc.name}:{path}", "a CIJOE .state without 'cmd'")
        if not all(isinstance(state.get(k), (int, float)) for k in ("begin", "end")):
            raise ParseError(f"{arc.name}:{path}", "a CIJOE .state without numeric 'begin' and 'end'")
        output = path[:-len(".state")] + ".output"
        if output not in arc.files:
            report.notes.append(f"{path}: no .output next to it; treated as empty")
        commands.append(Command(match.group("step"), int(match.group("n")), state,
                                arc.files[path], arc.files.get(output, b"")))
    commands.sort(key=lambda c: (c.step, c.number))
    _classify_all(commands)
    counts = Counter(c.kind for c in commands)
    report.notes.append(f"indexed {len(commands)} commands in "
                        f"{len({c.step for c in commands})} steps: "
                        + ", ".join(f"{n} {kind}" for kind, n in counts.most_common()))
    killed = [c for c in commands if c.state.get("err") == -15 and c.cmd.startswith("pkill")]
    if killed:
        report.notes.append(f"{len(killed)} 'pkill -f …' commands ended with err -15: pkill "
                            f"matched the shell CIJOE ran it in, so anything after it on the same "
                            f"line (AiSIO's 'sleep 0.2' after 'pkill -f dcgmi') never ran")
    return commands


def _classify_all(commands: list[Command]) -> None:
    """Classify in order: a capture's file is known once the command starting it was seen."""
    capture_files: dict[str, str] = {}
    for command in commands:
        command.kind = _classify(command.cmd, command.argv, capture_files)
        if command.kind == CPUFREQ_START and len(_program(command.argv)) > 1:
            capture_files[_program(command.argv)[1]] = CPUFREQ_START
        elif command.kind == DCGM_START:
            target = _DMON_OUTPUT.search(command.cmd)
            if target:
                capture_files[target.group(1)] = DCGM_START
