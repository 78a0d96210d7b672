"""A benchmark's parameters, with AiSIO's names: those its command line shows (qdepth, iosize,
ndevs, ncpus, nqueues, backend, tool, runtime) and those only AiSIO's JSON records (thr_sib,
smt, turbo, stress, cpu_governor, fixed_freq).

bdevperf's command line names only its device config, so its ndevs is the number of bdevs its
table lists.

Responsible for: reading a benchmark command's parameters (once per command) and a setting
from AiSIO's JSON.
Not responsible for: reading a tool's command line (its adapter in ``iolab.tools``) or output
(``iolab.parsers``), or comparing the parameters with AiSIO's
(:mod:`iolab.importers.cijoe.crosscheck`).
"""

from __future__ import annotations

from typing import Any

from iolab.errors import InputError, ParseError
from iolab.importers import aisio as exp
from iolab.importers.cijoe.archive import Command
from iolab.importers.cijoe.kinds import _program
from iolab.parsers.bdevperf import parse_bdevperf_text
from iolab.tools import spdk_nvme_perf, xnvmeperf

# AiSIO's tool names (the "tool" key of its JSON) per benchmark kind.
TOOL_NAMES = {exp.XNVMEPERF_RUN: "xnvmeperf", exp.XNVMEPERF_CUDA_RUN: "xnvmeperf-cuda",
              exp.BDEVPERF: "bdevperf", exp.SPDK_NVME_PERF: "spdk_nvme_perf"}
# bdevperf's options that take a value; its adapter has no reader of command lines yet
_BDEVPERF_VALUED = {"-c", "-m", "-q", "-o", "-t", "-w", "-r", "-M", "-j", "-S", "-P", "-T"}
# Settings AiSIO records only in its JSON (and the file name), never on the command line.
JSON_SETTINGS = ("thr_sib", "smt", "turbo", "stress", "cpu_governor", "fixed_freq")


def _command_params(bench: Command, archive: str) -> dict[str, Any]:
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
    argv = _program(bench.argv)
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
    return int(value) if value is not None and value.isdigit() else None


def _setting(aisio: dict | None, key: str) -> Any:
    """A setting from AiSIO's JSON; its booleans as 0/1 (archived files already use 0/1)."""
    if aisio is None:
        return None
    value = aisio.get(key)
    return int(value) if isinstance(value, bool) else value
