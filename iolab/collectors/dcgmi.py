"""DCGM's ``dcgmi dmon`` as a collector: the PCIe traffic of one GPU, sampled around a run.

``DcgmDmon(gpu_id, interval_ms)`` runs ``dcgmi dmon -e 1009,1010 -d <ms> -i <gpu>`` from
``start`` to ``stop``: fields 1009 and 1010 are the PCIe TX and RX rates of the GPU in bytes/s
(protocol overhead included; RX is data arriving at the GPU, e.g. NVMe -> GPU P2P). dcgmi
needs a running DCGM host engine (``nv-hostengine``); :meth:`DcgmDmon.check` says plainly when
it cannot reach one, and ``start`` checks first, so no run goes ahead unmeasured.

Files in the run folder:

- ``dcgm.txt``: dmon's output as printed (stdout and stderr; samples in tests/fixtures/aisio_formats/).
- ``dcgm-times.txt``: one CLOCK_REALTIME nanosecond stamp per line of ``dcgm.txt``, taken when
  the line arrived. dmon prints no timestamps but flushes every sample, so a line's arrival is
  when the sample was taken (pipe latency aside); the window is cut by these stamps.
- ``dcgm.json``: ``{"argv", "pid", "started_ns", "stopped_ns", "exit_status", "signal",
  "ended_before_stop", "killed", "gpu_pci", "gpu_pci_problem"}`` like stress_ng's record:
  ``ended_before_stop`` true means dmon failed or quit before the run ended (its reason is at
  the end of ``dcgm.txt``). ``gpu_pci`` is the PCI address of the watched GPU
  (``0000:4b:00.0``), asked of ``nvidia-smi -i <gpu_id>`` before dmon starts, since DCGM's GPU
  ids follow NVML's indices as nvidia-smi's do: it lets a run check that the GPU watched is the
  GPU its benchmark used. Without nvidia-smi, or when it fails, it is None and
  ``gpu_pci_problem`` says why; the run goes ahead all the same.

:func:`read_argv` reads a dmon command line (an argv list, or a shell line such as AiSIO's
``screen -dm bash -c "dcgmi dmon … > file"``) into ``{field_ids, gpu_ids, interval_ms}``;
:func:`read_capture` turns a capture into the RX/TX samples of its one GPU. The AiSIO
importer uses both.

Responsible for: the argv, starting and stopping dmon (its own process group: SIGTERM to the
group, SIGKILL after a grace period), the timestamps, the RX/TX statistics (mean, p50,
p95 over the window; AiSIO's p95 over the whole capture), and reading ``dcgm.json`` and the
stamps back checked (:func:`read_record`, :func:`read_times`). Not responsible for: parsing dmon's
table (:mod:`iolab.parsers.dcgm_dmon`) or choosing the GPU a benchmark uses.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Mapping, TextIO

from iolab.checks import positive_int
from iolab.errors import (InputError, IolabError, ParseError, ToolError, excerpt,
                          shortened)
from iolab.parsers import (CLOCK_NS_ALLOWED, is_clock_ns, is_digits, record_object,
                           record_value)
from iolab.parsers.dcgm_dmon import aisio_p95, parse_dcgm_dmon, window_stats
from iolab.tools.base import (Collector, Program, check_within, driver_window, end_process_group,
                              pci_address)

TX_FIELD, RX_FIELD = 1009, 1010  # DCGM_FI_PROF_PCIE_TX_BYTES, DCGM_FI_PROF_PCIE_RX_BYTES
FIELDS = (TX_FIELD, RX_FIELD)
CAPTURE, TIMES, RECORD = "dcgm.txt", "dcgm-times.txt", "dcgm.json"
# dmon ends at once on SIGTERM; this is for a dcgmi that hangs talking to the host engine.
GRACE_S = 5.0
CHECK_TIMEOUT_S = 20.0

PROGRAM = Program("dcgmi", "dcgmi", ("--version",),
                  install="install NVIDIA DCGM (the datacenter-gpu-manager packages, "
                          "https://developer.nvidia.com/dcgm) and start nv-hostengine",
                  role="collector")

_OPTIONS = {"-e": "field_ids", "-i": "gpu_ids", "-d": "interval_ms"}
# where a shell line goes on after the command: redirections, pipes, ';', '&&'
_SHELL_OPERATOR = re.compile(r"^(?:[0-9]*[<>]|[|;&])")


def read_argv(cmd_or_argv: str | list[str]) -> dict[str, Any]:
    """``{field_ids, gpu_ids, interval_ms}`` of a ``dcgmi dmon`` command.

    A string is split as the shell would, and a ``dcgmi dmon`` inside a quoted word (``bash -c
    "…"``) is found too; the command ends at a shell operator. Absent options: ``field_ids``
    None, ``gpu_ids`` [] (dmon's default: every GPU), ``interval_ms`` None (dmon's default is
    1000). InputError names an option this reader does not know or a value it cannot read.
    """
    words = _split(cmd_or_argv) if isinstance(cmd_or_argv, str) else list(cmd_or_argv)
    args = _dmon_args(words)
    if args is None:
        raise InputError(None, "argv", f"no 'dcgmi dmon' command in {cmd_or_argv!r}")
    found: dict[str, Any] = {"field_ids": None, "gpu_ids": [], "interval_ms": None}
    at = 0
    while at < len(args):
        flag = args[at]
        if flag not in _OPTIONS:
            raise InputError(None, flag, "not a dcgmi dmon option this reader knows",
                             allowed=", ".join(_OPTIONS))
        if at + 1 >= len(args):
            raise InputError(None, flag, "has no value")
        value = args[at + 1]
        key = _OPTIONS[flag]
        if key == "interval_ms":
            # at most 9 digits: int() refuses 4,300 and more with a ValueError naming no option
            if not re.fullmatch(r"[0-9]{1,9}", value) or int(value) < 1:
                raise InputError(None, flag, f"{excerpt(value)} is not a delay in whole ms",
                                 allowed="1 to 999999999")
            found[key] = int(value)
        else:
            if not re.fullmatch(r"[0-9]{1,9}(?:,[0-9]{1,9})*", value):
                raise InputError(None, flag, f"{excerpt(value)} is not a comma list of ids",
                                 allowed="e.g. 1009,1010 or 0,1 (entity names such as "
                                         "gpu:0 are not read)")
            found[key] = [int(v) for v in value.split(",")]
        at += 2
    return found


def _split(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd)
    except ValueError as exc:
        raise InputError(None, "argv", f"cannot split {cmd!r} as a shell line ({exc})") from None


def _dmon_args(words: list[str]) -> list[str] | None:
    """The words after ``dcgmi dmon`` up to the end of that command, or None."""
    for i, word in enumerate(words[:-1]):
        if PurePosixPath(word).name == "dcgmi" and words[i + 1] == "dmon":
            rest = words[i + 2:]
            end = next((j for j, w in enumerate(rest) if _SHELL_OPERATOR.match(w)), len(rest))
            return rest[:end]
    for word in words:
        if "dcgmi" in word and any(c.isspace() for c in word):
            inner = _dmon_args(_split(word))  # a command line passed as one word (bash -c)
            if inner is not None:
                return inner
    return None


def _no_negative_rate(values: list, name: str, rows: list[int], source: str) -> None:
    """ParseError naming the line of a negative byte rate: no link moves fewer than 0 bytes,
    and one such row among normal ones still gave a mean that passed as a sample."""
    for value, row in zip(values, rows):
        if value is not None and value < 0:
            raise ParseError(source, f"line {row + 1}: {name} is {value} bytes/s (allowed: 0 "
                                     "or more, or N/A)")


def read_capture(text: str, source: str, dmon: Mapping[str, Any]) -> dict[str, Any]:
    """The samples of the one GPU a capture watched: ``rx`` and ``tx`` (bytes/s per sample,
    None for N/A; ``tx`` is None when field 1009 was not sampled), ``rows`` (the 0-based line
    index in ``text`` of each sample) and the parser's ``notes``.

    ``dmon`` is :func:`read_argv` of the command that made the capture. ParseError when field
    1010 was not sampled, the command watched other than one GPU, that GPU has no rows, or
    another entity has any.
    """
    parsed = parse_dcgm_dmon(text, source, field_ids=dmon["field_ids"])
    if RX_FIELD not in parsed["field_ids"]:
        raise ParseError(source, f"field {RX_FIELD} (PCIe RX) was not sampled "
                         f"(fields {parsed['field_ids']})")
    if len(dmon["gpu_ids"]) != 1:
        raise ParseError(source, f"dmon watched GPUs {dmon['gpu_ids']}; the RX figure needs "
                         f"one GPU")
    entity = f"GPU {dmon['gpu_ids'][0]}"
    if entity not in parsed["samples"]:
        raise ParseError(source, f"no rows for {entity} (entities: {sorted(parsed['samples'])})")
    others = sorted(set(parsed["samples"]) - {entity})
    if others:
        # dmon -i prints rows of the entities it was given only: a row of another is no
        # row of this command's (its rows were dropped, and the mean moved with them)
        raise ParseError(source, f"has rows of {excerpt(', '.join(others))}, which the command "
                                 f"did not watch (it watched {entity}; allowed: rows of "
                                 f"{entity} only): not this command's capture")
    columns = parsed["samples"][entity]

    def field(field_id: int) -> list | None:
        ids = parsed["field_ids"]
        return columns[parsed["fields"][ids.index(field_id)]] if field_id in ids else None

    rx = field(RX_FIELD)
    width = 2 + len(parsed["fields"])
    # the parser keeps every full row of the entity, in order, and drops a partial last one
    rows = [i for i, line in enumerate(text.split("\n"))
            if line.split()[:2] == entity.split() and len(line.split()) == width]
    _no_negative_rate(rx, "PCIe RX", rows, source)
    _no_negative_rate(field(TX_FIELD) or [], "PCIe TX", rows, source)
    return {"rx": rx, "tx": field(TX_FIELD), "rows": rows, "notes": parsed["notes"]}


class DcgmDmon(Collector):
    """``dcgmi dmon`` on one GPU, every ``interval_ms`` milliseconds, for one run."""

    name = "dcgmi"

    def __init__(self, gpu_id: int, interval_ms: int = 100) -> None:
        if isinstance(gpu_id, bool) or not isinstance(gpu_id, int) or gpu_id < 0:
            raise InputError(None, "gpu_id", f"must be a GPU id (a whole number >= 0), got "
                             f"{gpu_id!r}")
        positive_int(interval_ms, "interval_ms", what="whole milliseconds >= 1")
        self.gpu_id = gpu_id
        self.interval_ms = interval_ms
        self._proc: subprocess.Popen | None = None
        self._copier: threading.Thread | None = None
        self._argv: list[str] = []
        self._started_ns = 0
        self._gpu_pci: dict[str, str | None] = {}

    def programs(self) -> list[Program]:
        return [PROGRAM]

    def argv(self, executable: str = "dcgmi") -> list[str]:
        return [executable, "dmon", "-e", ",".join(map(str, FIELDS)),
                "-d", str(self.interval_ms), "-i", str(self.gpu_id)]

    @staticmethod
    def check() -> str:
        """dcgmi's path once it has reached the host engine; ToolError saying what is missing
        (dcgmi itself, or a running nv-hostengine) otherwise."""
        executable = PROGRAM.find()
        if executable is None:
            raise ToolError(f"dcgmi not found on PATH; {PROGRAM.install}. Nothing was started.")
        try:
            done = subprocess.run([executable, "discovery", "-l"], capture_output=True, text=True,
                                  check=False, timeout=CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            said, code = f"no answer within {CHECK_TIMEOUT_S:.0f} s", None
        except OSError as exc:
            said, code = str(exc), None
        else:
            said, code = (done.stdout + done.stderr).strip(), done.returncode
        if code != 0:
            first = said.splitlines()[0] if said else f"exit status {code}"
            raise ToolError(f"dcgmi cannot reach the DCGM host engine ({first}): is nv-hostengine "
                            f"running? Start it with 'sudo systemctl start nvidia-dcgm' or "
                            f"'sudo nv-hostengine'. Nothing was started.")
        return executable

    def start(self, run_dir: Path) -> None:
        self._argv = self.argv(self.check())
        # asked before dmon starts: a failure to name the GPU is recorded, never a reason to
        # stop a run whose counter works
        self._gpu_pci = gpu_pci(self.gpu_id)
        run_dir = Path(run_dir)
        capture = open(run_dir / CAPTURE, "wb")
        times = open(run_dir / TIMES, "w")
        try:
            # Its own session, so stop() reaches dmon and anything it forked; a pipe, so that
            # every line is stamped as it arrives.
            self._proc = subprocess.Popen(self._argv, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        except OSError as exc:
            capture.close()
            times.close()
            raise ToolError(f"{self._argv[0]}: could not start dmon ({exc})") from None
        self._started_ns = time.time_ns()
        self._copier = threading.Thread(target=_copy, args=(self._proc.stdout, capture, times),
                                        name="dcgmi-dmon-copier", daemon=True)
        self._copier.start()

    def stop(self, run_dir: Path) -> None:
        proc, copier = self._proc, self._copier
        if proc is None or copier is None:
            raise IolabError("DcgmDmon.stop() called without a start()")
        ended = end_process_group(proc, GRACE_S)
        copier.join()  # the pipe is at its end once the whole group is gone
        record = {"argv": self._argv, "pid": proc.pid, "started_ns": self._started_ns,
                  "stopped_ns": time.time_ns(), **ended, **self._gpu_pci}
        (Path(run_dir) / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        self._proc = self._copier = None

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        """RX and TX statistics (bytes/s) of the samples taken inside ``window`` (every sample
        when None), AiSIO's p95 of RX over the whole capture, and whether dmon lasted."""
        run_dir = Path(run_dir)
        record = read_record(run_dir)
        path = run_dir / CAPTURE
        text = path.read_text(encoding="utf-8", errors="replace")
        capture = read_capture(text, str(path), record["dmon"])
        stamps = read_times((run_dir / TIMES).read_text(), str(run_dir / TIMES))
        lines = text.split("\n")
        if len(stamps) != len(lines) - (lines[-1] == ""):
            raise ParseError(run_dir / TIMES, f"{len(stamps)} stamps for the {len(lines)} lines "
                             f"of {CAPTURE}")
        taken = [stamps[row] for row in capture["rows"]]
        run = driver_window(run_dir)  # dmon ran from start to stop: a stamp far off is not
        for row in capture["rows"]:   # this run's
            check_within(stamps[row], run, f"line {row + 1} of {CAPTURE}", str(run_dir / TIMES))
        inside = [i for i, t in enumerate(taken)
                  if window is None or window[0] <= t <= window[1]]
        out: dict[str, Any] = {"samples": len(inside)}
        for name, values in (("rx", capture["rx"]), ("tx", capture["tx"])):
            stats = window_stats([values[i] for i in inside] if values else [])
            out.update({f"{name}_{stat}_bytes_per_s": stats[stat]
                        for stat in ("mean", "p50", "p95")})
        measured = [v for v in capture["rx"] if v is not None]
        # AiSIO's figure, for comparison with its archives: every sample, idle ones included
        out["rx_aisio_p95_bytes_per_s"] = aisio_p95(measured) if len(measured) >= 2 else None
        out.update({key: record[key] for key in ("ended_before_stop", "killed", "gpu_pci")})
        return out


def _is_pci_address(value: Any) -> bool:
    try:
        return pci_address(value) == value
    except InputError:
        return False


def read_record(run_dir: Path) -> dict[str, Any]:
    """What :meth:`DcgmDmon.parse` takes from ``dcgm.json``, each key checked: the collector's
    own record, read back as any output is, so a cut-off or altered one fails the run naming
    the file, the key and what is allowed, never a KeyError that ends the campaign. ``dmon``
    is :func:`read_argv` of the recorded argv."""
    path = Path(run_dir) / RECORD
    source = str(path)
    record = record_object(path.read_text(), source)
    argv = record_value(record, "argv", source,
                        lambda v: isinstance(v, list) and bool(v)
                        and all(isinstance(w, str) for w in v),
                        "the dcgmi dmon command line, a list of texts")
    try:
        dmon = read_argv(argv)
    except InputError as exc:
        raise ParseError(source, f"argv is not the dmon command this collector runs: {exc}") \
            from None
    flags = {key: record_value(record, key, source, lambda v: isinstance(v, bool),
                               "true or false") for key in ("ended_before_stop", "killed")}
    # records made before the GPU's address was recorded have none: None
    gpu = record_value({"gpu_pci": record.get("gpu_pci")}, "gpu_pci", source,
                       lambda v: v is None or _is_pci_address(v),
                       "null or the GPU's PCI address, such as 0000:4b:00.0")
    return {"dmon": dmon, **flags, "gpu_pci": gpu}


def read_times(text: str, source: str) -> list[int]:
    """The stamps of ``dcgm-times.txt``, one CLOCK_REALTIME ns per line as the copier writes
    them; ParseError for anything else (``int`` would take '+1', '1_000' and any script's
    digits, and a stamp beyond any clock would put every sample outside the window), or for a
    stamp before the one above it (the copier stamps the lines as they come)."""
    stamps = []
    for number, line in enumerate(text.split(), start=1):
        if not (is_digits(line) and len(line) <= 19 and is_clock_ns(int(line))):
            raise ParseError(source, f"stamp {number} is {excerpt(line)} (allowed: "
                                     f"{CLOCK_NS_ALLOWED}, in digits 0-9)")
        if stamps and int(line) < stamps[-1]:  # the copier stamps each line as it comes
            raise ParseError(source, f"stamp {number} ({line}) is before stamp {number - 1} "
                                     f"({stamps[-1]}) (allowed: stamps in time order)")
        stamps.append(int(line))
    return stamps


def gpu_pci(gpu_id: int) -> dict[str, str | None]:
    """``{"gpu_pci", "gpu_pci_problem"}``: the PCI address of NVML's GPU ``gpu_id`` as
    ``nvidia-smi`` reports it (normalised, see :func:`~iolab.tools.base.pci_address`), or None
    and why not. Never raises: a run that cannot name its GPU is still a measurement."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return {"gpu_pci": None, "gpu_pci_problem": "nvidia-smi not found on PATH"}
    argv = [executable, "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", str(gpu_id)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False,
                              timeout=CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"gpu_pci": None, "gpu_pci_problem": f"{' '.join(argv)}: {exc}"}
    said = (done.stdout or done.stderr).strip()
    first = said.splitlines()[0] if said else ""
    if done.returncode != 0:
        return {"gpu_pci": None, "gpu_pci_problem": f"{' '.join(argv)} failed with status "
                                                    f"{done.returncode}: "
                                                    f"{shortened(first) or 'no output'}"}
    try:
        return {"gpu_pci": pci_address(first), "gpu_pci_problem": None}
    except InputError:
        return {"gpu_pci": None, "gpu_pci_problem": f"{' '.join(argv)} printed "
                                                    f"{excerpt(first) if first else 'nothing'}, "
                                                    "not a PCI address"}


def _copy(pipe: BinaryIO, capture: BinaryIO, times: TextIO) -> None:
    with pipe, capture, times:
        for line in pipe:
            stamp = time.time_ns()
            capture.write(line)
            times.write(f"{stamp}\n")
            # on disk sample by sample, so a harness that dies mid-run leaves what was measured
            capture.flush()
            times.flush()
