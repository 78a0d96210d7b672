"""A benchmark's parameters, with AiSIO's names: those its command line shows (qdepth, iosize,
ndevs, ncpus, nqueues, backend, tool, runtime) and those only AiSIO's JSON records (thr_sib,
smt, turbo, stress, cpu_governor, fixed_freq).

bdevperf's command line names only its device config, so its ndevs is the number of bdevs its
table lists.

AiSIO's JSON comes from the archive, so it is read as data (:func:`read_result`): a result
that is not UTF-8, not JSON, nested too deeply, not an object, holds a number no float holds,
or a setting or ``cpu_freqs`` of a shape AiSIO never writes is no record, and the run is
imported without a cross-check, with a note saying why.

Responsible for: reading a benchmark command's parameters (once per command), checking AiSIO's
JSON and reading a setting from it.
Not responsible for: reading a tool's command line (its adapter in ``iolab.tools``) or output
(``iolab.parsers``), or comparing the parameters with AiSIO's
(:mod:`iolab.importers.cijoe.crosscheck`).
"""

from __future__ import annotations

import math
from typing import Any

from iolab.errors import InputError, ParseError, excerpt, shortened
from iolab.importers import aisio as exp
from iolab.importers.cijoe.archive import Command
from iolab.importers.cijoe.kinds import program_argv
from iolab.parsers import is_digits, load_json, within_float
from iolab.parsers.bdevperf import parse_bdevperf_text
from iolab.tools import spdk_nvme_perf, xnvmeperf

# AiSIO's tool names (the "tool" key of its JSON) per benchmark kind.
TOOL_NAMES = {exp.XNVMEPERF_RUN: "xnvmeperf", exp.XNVMEPERF_CUDA_RUN: "xnvmeperf-cuda",
              exp.BDEVPERF: "bdevperf", exp.SPDK_NVME_PERF: "spdk_nvme_perf"}
# bdevperf's options that take a value; its adapter has no reader of command lines yet
_BDEVPERF_VALUED = {"-c", "-m", "-q", "-o", "-t", "-w", "-r", "-M", "-j", "-S", "-P", "-T"}
# Settings AiSIO records only in its JSON (and the file name), never on the command line.
JSON_SETTINGS = ("thr_sib", "smt", "turbo", "stress", "cpu_governor", "fixed_freq")
_SWITCHES = ("thr_sib", "smt", "turbo", "stress")  # AiSIO writes 0 or 1 (or a boolean)


def command_params(bench: Command, archive: str) -> dict[str, Any]:
    """Parameters visible on a benchmark's command line, with AiSIO's names (bdevperf's
    devices from its table: :func:`_bdevperf_bdevs`).

    ``cpus`` (the cpumask's CPU ids) is not an AiSIO parameter; it selects the frequency
    columns. cuda-run has no cpumask: AiSIO names it ``c0`` and so does this. A command line
    the tool's adapter cannot read raises InputError naming the ``.state`` file. Read once
    per command (pairing, selection and import all ask).
    """
    if bench.params is None:
        bench.params = _read_command_params(bench, archive)
    return bench.params


def _read_command_params(bench: Command, archive: str) -> dict[str, Any]:
    argv = program_argv(bench.argv)
    kind = bench.kind
    params: dict[str, Any] = {"tool": TOOL_NAMES[kind]}
    try:
        if kind in (exp.XNVMEPERF_RUN, exp.XNVMEPERF_CUDA_RUN):
            opts = xnvmeperf.read_argv(argv)
            cpus, devices = opts["cpumask"], opts["devices"]
            params.update(qdepth=opts["qdepth"], iosize=opts["iosize"], runtime_s=opts["runtime"],
                          # xnvmeperf's defaults where the line leaves them out (its echo agrees)
                          nqueues=(xnvmeperf.DEFAULT_NQUEUES if opts["nqueues"] is None
                                   else opts["nqueues"]),
                          backend=opts["be"] or (xnvmeperf.CUDA_BACKEND
                                                 if kind == exp.XNVMEPERF_CUDA_RUN else None))
        elif kind == exp.SPDK_NVME_PERF:
            opts = spdk_nvme_perf.read_argv(argv)
            cpus, devices = opts["core_mask"], opts["devices"]
            params.update(qdepth=opts["io_depth"], iosize=opts["io_size"], runtime_s=opts["time"],
                          nqueues=None, backend="spdk")
        else:  # bdevperf: -c names its JSON config, which holds the devices
            opts = _options(argv[1:], _BDEVPERF_VALUED)
            mask = _last(opts, "-m")
            cpus = spdk_nvme_perf.core_mask_cpus(mask) if mask else None
            devices = _bdevperf_bdevs(bench)
            params.update(qdepth=_int(_last(opts, "-q")), iosize=_int(_last(opts, "-o")),
                          runtime_s=_int(_last(opts, "-t")), nqueues=None, backend="spdk")
    except InputError as exc:
        raise InputError(f"{archive}:{bench.path}.state", exc.key, exc.problem,
                         exc.allowed) from None
    params["cpus"] = cpus
    params["ncpus"] = (len(cpus) if cpus is not None
                       else 0 if kind == exp.XNVMEPERF_CUDA_RUN else None)
    params["ndevs"] = len(devices) if devices is not None else None
    return params


def _bdevperf_bdevs(bench: Command) -> list[str] | None:
    """The bdevs a bdevperf run measured (None without a readable table).

    Its command line names only its ``-c`` config, and the archive keeps AiSIO's configs
    (``<step>/bdevperf-configs/d<N>.json``) but not which one was copied there for a run.
    Each attaches one controller per device and bdevperf runs a job on every bdev, so the
    bdevs of the table are the run's devices.
    """
    text = bench.output_bytes.decode("utf-8", errors="replace")
    try:
        jobs = parse_bdevperf_text(text, f"{bench.path}.output")["jobs"]
    except ParseError:
        return None
    return sorted({job["name"] for job in jobs})


def _options(words: list[str], valued: set[str]) -> dict[str, list[str]]:
    """{option: [values]} for the options in ``valued`` (``-o value`` or ``-o=value``)."""
    out: dict[str, list[str]] = {}
    at = 0
    while at < len(words):
        name, eq, value = words[at].partition("=")
        if eq and name in valued:
            out.setdefault(name, []).append(value)
        elif words[at] in valued and at + 1 < len(words):
            out.setdefault(words[at], []).append(words[at + 1])
            at += 1
        at += 1
    return out


def _last(opts: dict[str, list[str]], name: str) -> str | None:
    return opts[name][-1] if name in opts else None


def _int(value: str | None) -> int | None:
    # ASCII digits, as a command line's numbers are ('²' passes str.isdigit, then int()
    # raises), and no more than 18 of them (int() refuses 4,300 with an error naming nothing)
    return int(value) if value is not None and is_digits(value) and len(value) <= 18 else None


def aisio_setting(aisio: dict | None, key: str) -> Any:
    """A setting from AiSIO's JSON; its booleans as 0/1 (archived files already use 0/1)."""
    if aisio is None:
        return None
    value = aisio.get(key)
    return int(value) if isinstance(value, bool) else value


def read_result(data: bytes, source: str) -> dict:
    """AiSIO's JSON result for one repetition, checked as data from elsewhere; ParseError
    naming ``source`` and why it is no record AiSIO writes (the caller notes it and imports
    the run without a cross-check). What is checked is what the import uses: the settings
    (they become the run's parameters), ``cpu_freqs`` (walked by the cross-check) and that
    every number is one a float holds (the cross-check computes with them)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(source, f"not UTF-8 (byte {exc.start})") from None
    try:
        record = load_json(text, source)
    except ValueError as exc:
        raise ParseError(source, f"not valid JSON ({excerpt(str(exc))})") from None
    if not isinstance(record, dict):
        raise ParseError(source, f"holds {type(record).__name__}, not the object AiSIO writes")
    _within_float(record, source)
    for key in JSON_SETTINGS:
        value = record.get(key)
        if value is not None and not _usable_setting(key, value):
            raise ParseError(source, f"{key} is {excerpt(value)} (allowed: "
                             f"{_SETTING_ALLOWED.get(key, '0 or 1')})")
    if not _usable_cpu_freqs(record.get("cpu_freqs")):
        raise ParseError(source, f"cpu_freqs is {excerpt(record['cpu_freqs'])} (allowed: a list "
                         "of [[mean kHz, variance], [cpu, core]], or N/A)")
    return record


_SETTING_ALLOWED = {"cpu_governor": "a governor's name",
                    "fixed_freq": "a frequency in GHz, 0 for none"}


def _usable_setting(key: str, value: Any) -> bool:
    if key in _SWITCHES:
        return value in (0, 1) and isinstance(value, (bool, int))
    if key == "cpu_governor":
        return isinstance(value, str) and value.isprintable() and len(value) <= 64
    return _is_number(value) and math.isfinite(value) and value >= 0  # fixed_freq


def _usable_cpu_freqs(value: Any) -> bool:
    if value is None or value == "N/A":
        return True
    return isinstance(value, list) and all(
        isinstance(entry, list) and len(entry) == 2
        and isinstance(entry[0], list) and len(entry[0]) == 2 and all(map(_is_number, entry[0]))
        and isinstance(entry[1], list) and len(entry[1]) == 2
        and all(isinstance(i, int) and not isinstance(i, bool) for i in entry[1])
        for entry in value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _within_float(value: Any, source: str, key: str = "the result") -> None:
    """ParseError for an integer anywhere in ``value`` beyond what a float holds (the
    cross-check's tolerance would raise OverflowError on it); nesting is bounded by
    :func:`load_json`."""
    if isinstance(value, dict):
        for name, item in value.items():
            _within_float(item, source, shortened(str(name), 40))
    elif isinstance(value, list):
        for item in value:
            _within_float(item, source, key)
    else:
        within_float(value, key, source)
