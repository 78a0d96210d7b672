"""Import an AiSIO CIJOE result archive into the run store, re-deriving every metric.

An AiSIO archive (``artifacts/<experiment>.tar.gz`` in github.com/xnvme/aisio) is a CIJOE
output folder: ``NNN_<step>/cmd_XX.state`` (YAML: begin, end, elapsed, cmd, err, …) with
``cmd_XX.output`` (stdout and stderr merged), ``config*.orig``, ``workflow.*`` and
``artifacts/`` where AiSIO's scripts write one JSON result per repetition
(``artifacts/bench-results/d16-c1-o512-q128-be_upcie-tool_xnvmeperf-thrsib0-freq_performance-
stress0-SMT1-turbo1-0.out``).

How AiSIO's ``run`` step lays out one repetition (seen in both archived runs; every CIJOE
command is one ``cmd_XX`` in order)::

    cpupower frequency-set -g ondemand --max 4.0GHz --min 0.8GHz    reset all CPUs
    for cpu in 0; do cpupower -c $cpu frequency-set -g performance; done
    /tmp/cpu_freq_logger.sh /tmp/cpu_freq_logger.out 0.5            logger starts (detached)
    rm -f /tmp/dcgm_monitor.txt                                     } upcie-cuda only
    screen -dm bash -c "dcgmi dmon -d 100 -i 0 -e 1009,1010 > …"    }
    /usr/bin/time xnvmeperf run --cpumask 0001 … <BDF> …            the benchmark
    pkill -f cpu_freq_logger                                        err -15 (see below)
    cat /tmp/cpu_freq_logger.out                                    the frequency log
    pkill -f dcgmi; sleep 0.2                                       } upcie-cuda only
    cat /tmp/dcgm_monitor.txt                                       }
    (AiSIO writes the result JSON; no command)

So a benchmark's captures are the logger/dmon starts since the previous benchmark and the
``cat`` of their files before the next one; the result JSON's modification time (whole
seconds in the tar) lies between the benchmark's end and the next benchmark's begin. SMT,
turbo and ``lscpu -e`` come once per step, before the first repetition. ``pkill -f`` matches
the shell CIJOE runs it in, so those commands end with err -15 and the ``sleep 0.2`` meant to
let dmon flush never runs. The frequency log's timestamps are UTC (they match the ``.state``
epochs of the logger's start); the importer notes any log that does not.

The import's phases, one module each: ``archive`` (open and index), ``kinds`` (what a
command is), ``host_extras`` (the host record and raw extras), ``pairing`` (repetitions and
AiSIO's result files), ``params`` (a benchmark's parameters), ``target`` (where the import
goes and what it takes), ``crosscheck`` (iolab's values against AiSIO's), ``runs`` (one
repetition into the store), and ``driver`` (:func:`import_archive`, the phases in order);
``report`` holds what an import reports.

Responsible for: reading the archive (tar.gz or an extracted folder, never extracting to
disk), indexing and classifying commands, pairing, cross-checking, and writing runs, the
host record and archive-level extras with :class:`~iolab.core.store.Store`. Not responsible
for: reading CIJOE's ``.state`` records and splitting command lines
(:mod:`iolab.parsers.cijoe_state`, :mod:`iolab.parsers.shell_words`), reading a tool's command
line or output (its adapter in ``iolab.tools``, and ``iolab.parsers``) or turning a run folder
into metrics (:mod:`iolab.importers.aisio`, shared with ``iolab tidy``).
"""

from iolab.importers.cijoe.crosscheck import RTOL
from iolab.importers.cijoe.driver import import_archive
from iolab.importers.cijoe.kinds import (CPUFREQ_READ, CPUFREQ_START, DCGM_READ, DCGM_START,
                                         LSCPU, OTHER, P2P, classify)

__all__ = ["CPUFREQ_READ", "CPUFREQ_START", "DCGM_READ", "DCGM_START", "LSCPU", "OTHER", "P2P",
           "RTOL", "classify", "import_archive"]
