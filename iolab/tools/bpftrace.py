"""The bpftrace adapter: a bpftrace program run with JSON output, and its maps -> metrics.

Options: exactly one of ``file`` (the path of a ``.bt`` program) and ``program`` (program
text, run with ``-e``). A file's text is copied into the run folder (``program.bt``) and run
from there, so a stored run keeps what ran, and its sha256 enters the run's identity (an
edited file gives new runs, not silent reuse of old ones). The program must end itself (e.g.
``interval:s:10 { exit(); }``); bpftrace prints its maps when it exits.

Output is always ``-f json -o bpftrace.json``: JSON mode is the unambiguous one (see
:mod:`iolab.parsers.bpftrace`), and a format is not part of what a run measures, so it is no
option. There is no driver script yet (``driver`` is None): :meth:`Bpftrace.launch` gives
bpftrace's own argv, its path first.

Metrics: ``probes``, ``lost_events``, ``helper_errors``, and one column per map entry named
``@map[key,…]`` (``@map`` without keys): counts and other numbers as they are, ``stats()`` as
``….count``, ``….average``, ``….total``, histograms as ``….hist``, a JSON list of
``{"min", "max", "count"}`` buckets.

Responsible for: the argv, finding bpftrace, the run's identity, and the metrics of a stored
run. Not responsible for: parsing bpftrace's output (:mod:`iolab.parsers.bpftrace`), or what a
program measures.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from iolab.errors import InputError, ParseError, excerpt
from iolab.parsers import read_report
from iolab.parsers.bpftrace import parse_bpftrace_json
from iolab.tools.base import Invocation, Launch, Program, ToolAdapter

OUTPUT = "bpftrace.json"
PROGRAM_FILE = "program.bt"  # the copy of ``file`` in the run folder
OPTIONS = ("file", "program")

PROGRAM = Program("bpftrace", "bpftrace", ("--version",),
                  install="install it with 'apt-get install bpftrace'")


def _source(options: Mapping[str, Any]) -> tuple[str, str]:
    """("file", its text) or ("program", the text); InputError unless exactly one is given."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InputError(None, unknown[0], "not a bpftrace option", allowed=", ".join(OPTIONS))
    given = [key for key in OPTIONS if options.get(key) is not None]
    if len(given) != 1:
        raise InputError(None, "file/program", f"give exactly one of them, got {given or 'none'}",
                         allowed="file: a .bt path, or program: the text for -e")
    key = given[0]
    value = options[key]
    if not isinstance(value, str) or not value.strip():
        raise InputError(None, key, f"must be a non-empty string, got {value!r}")
    if key == "program":
        return key, value
    path = Path(value)
    if not path.is_file():
        raise InputError(path, "file", "no such bpftrace program file")
    return key, path.read_text()


def build_argv(options: Mapping[str, Any], executable: str = PROGRAM.executable) -> list[str]:
    """bpftrace's argv, run inside the run folder (a file runs from its copy there)."""
    key, text = _source(options)
    program = ["-e", text] if key == "program" else [PROGRAM_FILE]
    return [executable, "-f", "json", "-o", OUTPUT, *program]


def _column(name: str, key: tuple) -> str:
    return f"{name}[{','.join(map(str, key))}]" if key else name


class Bpftrace(ToolAdapter):
    name = "bpftrace"
    driver = None
    # compiling the program and attaching its probes; an estimate for the plan
    startup_s = 3.0

    def program(self, options: Mapping[str, Any] | None = None) -> Program:
        return PROGRAM

    def identity(self, invocation: Invocation) -> dict[str, Any]:
        ident = super().identity(invocation)
        key, text = _source(invocation.options)
        if key == "file":
            ident["file_sha256"] = hashlib.sha256(text.encode()).hexdigest()
        return ident

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        key, text = _source(invocation.options)
        inputs = {PROGRAM_FILE: text} if key == "file" else {}
        return Launch(build_argv(invocation.options, PROGRAM.find() or PROGRAM.executable), inputs=inputs)

    def parse(self, run_dir: Path) -> dict[str, Any]:
        path = Path(run_dir) / OUTPUT
        parsed = parse_bpftrace_json(read_report(path, "bpftrace"), str(path))
        metrics: dict[str, Any] = {key: parsed[key]
                                   for key in ("probes", "lost_events", "helper_errors")}
        for name, entries in parsed["maps"].items():
            for key, value in entries.items():
                column = _column(name, key)
                if any(c == column or c.startswith(f"{column}.") for c in metrics):
                    # two maps or keys in one column: the last would hide the other's value
                    raise ParseError(path, f"map {excerpt(name)} key {excerpt(key)} gives the "
                                     f"column {excerpt(column)} another map or key already has")
                if isinstance(value, dict):
                    metrics.update({f"{column}.{k}": v for k, v in value.items()})
                elif isinstance(value, list):
                    metrics[f"{column}.hist"] = json.dumps(value)
                else:
                    metrics[column] = value
        problems = []
        if parsed["probes"] is None:
            problems.append("bpftrace never reported attaching its probes (it failed to start?)")
        if parsed["helper_errors"]:
            # a failed map update means a count is missing, so the maps undercount
            problems.append(f"{parsed['helper_errors']} BPF helper errors")
        metrics.update(problem="; ".join(problems) or None, note=None)
        return metrics
