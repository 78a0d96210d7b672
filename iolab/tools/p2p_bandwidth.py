"""The cuda-samples ``p2pBandwidthLatencyTest`` adapter: its argv, and its matrices -> metrics.

The test copies between every pair of GPUs with peer-to-peer access off and on, and prints
bandwidth and latency matrices (samples in tests/fixtures/aisio_formats/). Options, named after its flags:

=================  ===================================================================
``executable``     the built test (a path, or a name on PATH; default
                   ``p2pBandwidthLatencyTest``); cuda-samples build trees differ between
                   releases, so the path is given rather than derived
``p2p_read``       also measure P2P reads (``--p2p_read``); default False
``sm_copy``        copy with SM kernels instead of copy engines (``--sm_copy``); default False
``num_elems``      integers per copy (``--numElems=N``; None: the test's 40,000,000)
=================  ===================================================================

Metrics are means over ordered GPU pairs (i ≠ j) of one matrix each, in the matrix's unit
(GB/s = 10^9 B/s, µs). A bidirectional cell counts the bytes of both directions, so
``bidir_p2p_gbs`` is a two-way aggregate, not a one-way ceiling; ``p2p_write_gbs`` is the
one-way figure (mean over pairs), and ``p2p_write_min_gbs`` that of the slowest ordered
pair. Either describes GPU-to-GPU copies, not the path from an SSD to a GPU, so neither is a
ceiling for NVMe-to-GPU traffic: a chapter draws them as references. :func:`aisio_reference` is
AiSIO's "p2p ceiling" (cells (0,1) and (1,0) of the bidirectional P2P matrix), kept for
comparing with AiSIO's archives.

Runs go through ``scripts/drivers/p2p_bandwidth.sh``, which prints provenance lines before the
test's report (``p2pBandwidthLatencyTest: PATH`` and the host's GPUs from nvidia-smi, ``iolab-gpu:
…``); :meth:`P2pBandwidth.parse` blanks them before parsing.

Responsible for: the argv, finding the test, the metrics of a stored run (via
:mod:`iolab.parsers.p2p_bandwidth`), and whether a stored report is the run's own (its P2P
read matrices against ``--p2p_read``). Not responsible for: parsing the report, or choosing
which figure is a roofline for an experiment.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Mapping

from iolab.checks import positive_int
from iolab.errors import InputError, ParseError
from iolab.parsers import read_report
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.tools.base import Invocation, Launch, Program, ToolAdapter

EXECUTABLE = "p2pBandwidthLatencyTest"
OPTIONS = ("executable", "p2p_read", "sm_copy", "num_elems")

UNIDIR_STAGED = "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)"
UNIDIR_WRITE = "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)"
UNIDIR_READ = "Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)"
BIDIR_P2P = "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)"
WRITE_LATENCY = "P2P=Enabled Latency (P2P Writes) Matrix (us) [GPU]"
# Printed whatever the flags; a report without them was cut off.
_REQUIRED = (UNIDIR_STAGED, UNIDIR_WRITE, BIDIR_P2P, WRITE_LATENCY)
# Lines scripts/drivers/p2p_bandwidth.sh prints before the test's own.
_PROVENANCE = (f"{EXECUTABLE}: ", "iolab-gpu: ")


def check(options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option with its default filled in, after checking it."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InputError(None, unknown[0], "not a p2pBandwidthLatencyTest option",
                         allowed=", ".join(OPTIONS))
    o = {"executable": EXECUTABLE, "p2p_read": False, "sm_copy": False, "num_elems": None,
         **options}
    if not isinstance(o["executable"], str) or not o["executable"] \
            or o["executable"].startswith("-"):
        raise InputError(None, "executable", f"{o['executable']!r} is not a program path or name")
    for key in ("p2p_read", "sm_copy"):
        if not isinstance(o[key], bool):
            raise InputError(None, key, f"must be true or false, got {o[key]!r}")
    if o["num_elems"] is not None:
        positive_int(o["num_elems"], "num_elems")
    return o


def build_argv(options: Mapping[str, Any]) -> list[str]:
    o = check(options)
    argv = [o["executable"]]
    if o["p2p_read"]:
        argv.append("--p2p_read")
    if o["sm_copy"]:
        argv.append("--sm_copy")
    if o["num_elems"] is not None:
        # the test reads only the attached form of this flag
        argv.append(f"--numElems={o['num_elems']}")
    return argv


def without_provenance(text: str) -> str:
    """The test's output with the driver's provenance lines blanked (not removed, so the
    parser's line numbers stay those of the file)."""
    return "\n".join("" if line.startswith(_PROVENANCE) else line for line in text.split("\n"))


def _pairs(matrix: dict[str, Any] | None) -> list[float]:
    """The off-diagonal cells (every ordered pair of different GPUs)."""
    if matrix is None:
        return []
    return [value for row_id, row in zip(matrix["row_ids"], matrix["values"])
            for col_id, value in zip(matrix["col_ids"], row) if row_id != col_id]


def _pairs_mean(matrix: dict[str, Any] | None) -> float | None:
    """Mean of the off-diagonal cells, or None."""
    cells = _pairs(matrix)
    return statistics.mean(cells) if cells else None


def aisio_reference(parsed: Mapping[str, Any]) -> float | None:
    """AiSIO's p2p figure: the mean of cells (0,1) and (1,0) of the bidirectional P2P matrix
    (GB/s, both directions together); None with fewer than two GPUs."""
    matrix = parsed["matrices"].get(BIDIR_P2P)
    if not matrix or len(matrix["values"]) < 2:
        return None
    return (matrix["values"][0][1] + matrix["values"][1][0]) / 2


def metrics(parsed: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The metrics of a parsed report (see the module docstring); ParseError names
    ``source`` when a section every report has is missing."""
    matrices = parsed["matrices"]
    missing = [name for name in _REQUIRED if name not in matrices]
    if missing:
        raise ParseError(source, f"no section {missing[0]!r} (truncated output?)")
    gpus = len(parsed["devices"]) or len(matrices[BIDIR_P2P]["row_ids"])
    denied = [(a["from"], a["to"]) for a in parsed["peer_access"] if not a["can"]]
    return {"gpus": gpus,
            "p2p_write_gbs": _pairs_mean(matrices[UNIDIR_WRITE]),
            "p2p_write_min_gbs": min(_pairs(matrices[UNIDIR_WRITE]), default=None),
            "p2p_read_gbs": _pairs_mean(matrices.get(UNIDIR_READ)),
            "staged_gbs": _pairs_mean(matrices[UNIDIR_STAGED]),
            "bidir_p2p_gbs": _pairs_mean(matrices[BIDIR_P2P]),
            "p2p_write_latency_us": _pairs_mean(matrices[WRITE_LATENCY]),
            "peer_access_denied": len(denied),
            "problem": (None if gpus >= 2 else
                        f"{gpus} GPU(s): peer-to-peer figures need at least two"),
            # without peer access the P2P=Enabled copies are staged through the host too
            "note": (None if not denied else "no peer access from GPU " + ", ".join(
                f"{a} to GPU {b}" for a, b in denied) + ": those P2P=Enabled figures are "
                "host-staged copies")}


class P2pBandwidth(ToolAdapter):
    name = "p2p_bandwidth"
    driver = "p2p_bandwidth.sh"
    # CUDA context creation on every GPU dominates; an estimate for the plan
    startup_s = 5.0
    rates = {key: "GB/s" for key in ("p2p_write_gbs", "p2p_write_min_gbs", "p2p_read_gbs",
                                      "staged_gbs", "bidir_p2p_gbs")}

    def program(self, options: Mapping[str, Any]) -> Program:
        # the test prints no version (its cuda-samples release appears nowhere); --help only
        # checks that it starts
        return Program("p2pBandwidthLatencyTest", check(options)["executable"], ("--help",),
                       reports_version=False,
                       install="build cuda-samples (https://github.com/NVIDIA/cuda-samples) "
                               "and set executable to Samples/5_Domain_Specific/"
                               "p2pBandwidthLatencyTest in its build tree")

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        options = dict(invocation.options)
        executable = self.program(options).find() or check(options)["executable"]
        return Launch([str(self.driver_path), "--executable", executable, "--",
                       *build_argv(options)[1:]])

    def foreign_report(self, run_dir: Path, argv: list[str]) -> str:
        """The test prints its P2P read matrices when, and only when, it is given
        ``--p2p_read``: a report with them in a run without it, or without them in a run with
        it, is another run's (the only option the report shows)."""
        given = "--p2p_read" in argv[argv.index("--") + 1:] if "--" in argv else None
        if given is None:
            return ""
        stdout = Path(run_dir) / "stdout"
        text = without_provenance(read_report(stdout, "p2p_bandwidth"))
        has = UNIDIR_READ in parse_p2p_bandwidth(text, str(stdout))["matrices"]
        if has == given:
            return ""
        return (f"stdout is not this run's report: it {'has' if has else 'lacks'} the section "
                f"{UNIDIR_READ!r}, and the run {'did not give' if has else 'gave'} the test "
                "--p2p_read, which prints it")

    def parse(self, run_dir: Path) -> dict[str, Any]:
        stdout = Path(run_dir) / "stdout"
        text = without_provenance(read_report(stdout, "p2p_bandwidth"))
        return metrics(parse_p2p_bandwidth(text, str(stdout)), str(stdout))
