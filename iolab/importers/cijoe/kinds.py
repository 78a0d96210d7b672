"""Which kind one CIJOE command line is: an AiSIO benchmark (one of
``iolab.importers.aisio.BENCHMARK_KINDS``), a capture's start or read, lscpu, the p2p test,
or other.

Responsible for: the command kinds and telling one command line's kind, past the wrappers
(GNU time, taskset, env, sudo, nohup, ``VAR=value``) AiSIO runs it under.
Not responsible for: classifying a whole step in order, which learns the files captures write
(:mod:`iolab.importers.cijoe.archive`), or reading a benchmark's options
(:mod:`iolab.importers.cijoe.params`).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from iolab.importers import aisio as exp
from iolab.parsers import shell_words

# Command kinds besides the benchmarks (iolab.importers.aisio.BENCHMARK_KINDS).
DCGM_START = "dcgmi dmon"
DCGM_READ = "dcgmi dmon capture"
CPUFREQ_START = "cpu freq logger"
CPUFREQ_READ = "cpu freq log"
P2P = "p2pBandwidthLatencyTest"
LSCPU = "lscpu"
OTHER = "other"

# AiSIO names SPDK-tool results "be_upcie" (its default) although they use SPDK's driver.
SPDK_KINDS = (exp.BDEVPERF, exp.SPDK_NVME_PERF)


def classify(cmd: str, capture_files: dict[str, str] | None = None) -> str:
    """The kind of one CIJOE command line.

    ``capture_files`` maps files that started captures write to the capture's kind
    (``DCGM_START`` or ``CPUFREQ_START``), so that ``cat <file>`` is recognised as reading it.
    """
    return classify_argv(cmd, command_words(cmd), capture_files)


def classify_argv(cmd: str, argv: list[str], capture_files: dict[str, str] | None) -> str:
    """:func:`classify` with the line already split (``argv``)."""
    if "dcgmi dmon" in cmd:  # started inside 'screen -dm bash -c "…"'
        return DCGM_START
    program = program_argv(argv)
    if not program:
        return OTHER
    name = PurePosixPath(program[0]).name
    if name == "xnvmeperf" and len(program) > 1 and program[1] in ("run", "cuda-run"):
        return exp.XNVMEPERF_RUN if program[1] == "run" else exp.XNVMEPERF_CUDA_RUN
    if name == "bdevperf":  # the text table; bdevperf.py (RPC client) prints JSON instead
        return exp.BDEVPERF
    if name == "spdk_nvme_perf":
        return exp.SPDK_NVME_PERF
    if name == "cpu_freq_logger.sh":
        return CPUFREQ_START
    if name == "p2pBandwidthLatencyTest":
        return P2P
    if name == "lscpu":
        return LSCPU
    if name == "cat" and len(program) == 2 and capture_files and program[1] in capture_files:
        return {DCGM_START: DCGM_READ, CPUFREQ_START: CPUFREQ_READ}[capture_files[program[1]]]
    return OTHER


def command_words(cmd: str) -> list[str]:
    """A command line split as the shell would; on unbalanced quotes, split on whitespace."""
    try:
        return shell_words.split(cmd)
    except ValueError:
        return cmd.split()


def program_argv(argv: list[str]) -> list[str]:
    """The argv of the program a command line runs, past GNU time (and its options),
    taskset, env, sudo, nohup and VAR=value assignments."""
    at = 0
    while at < len(argv):
        word = PurePosixPath(argv[at]).name
        if word in ("time", "sudo", "nohup", "env") or "=" in argv[at] and not argv[at].startswith("-"):
            at += 1
            while word == "time" and at < len(argv) and argv[at].startswith("-"):
                at += 2 if argv[at] in ("-o", "-f", "--output", "--format") else 1
        elif word == "taskset":
            at += 3 if at + 1 < len(argv) and argv[at + 1].startswith("-") else 2
        else:
            return argv[at:]
    return []
