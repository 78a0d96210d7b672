"""AiSIO's own runs of its PCIe saturation chapter as a committed reference table.

AiSIO published only the means of its runs; its archive (``artifacts/pcie-bandwidth-
saturation.tar.gz`` in github.com/xnvme/aisio) holds every run. The archive is never
committed here, but the values derived from it are facts, so this module writes them as a
reference table with their provenance::

    python -m iolab.importers.aisio_runs --archive pcie-bandwidth-saturation.tar.gz \\
        --out data/reference/

writes ``aisio_pcie_saturation_runs.csv`` (one row per run: the I/O size, the repetition,
xnvmeperf's IOPS and payload, the total PCIe RX p95 as AiSIO computed it, and the archive's
files each came from) and ``aisio_pcie_saturation_runs.yaml`` (the archive's name and sha256,
the repository and commit it comes from, the point every run shares, how each column was
derived, and the GPU-to-GPU reference of the archive's one p2pBandwidthLatencyTest run).
Both files are generated: edit this module, not them. Each is replaced whole, never over a
link or a special file (:func:`iolab.safefiles.replace_output`).

How: the archive is imported with :func:`iolab.importers.cijoe.import_archive` into a
temporary store (pairing each benchmark with its captures and with AiSIO's own result file,
and comparing every re-derived value with that file); each stored run is then derived with
:func:`iolab.importers.aisio.derive` (the same derivation ``iolab tidy`` uses), and the
p2pBandwidthLatencyTest output the import keeps is read with
:func:`iolab.tools.p2p_bandwidth.metrics`. Nothing of the archive outlives the temporary
folder but the derived values and the names of the files they came from.

The derivation stops with an error naming the archive and the file inside it where: a file
is malformed; a re-derived value disagrees with AiSIO's own result; AiSIO's results hold a
run whose benchmark output the archive lacks (its means would then rest on a run this table
cannot hold); the runs differ in anything but the I/O size; a run has no DCGM capture; there
is not exactly one p2pBandwidthLatencyTest output. An archive whose sha256 is not one this
module knows needs its repository and commit given (``--repository``, ``--commit``), so that
the provenance never names a source the table did not come from.

Responsible for: deriving the per-run table and its provenance from an archive, and writing
both.
Not responsible for: reading archives, pairing and cross-checking
(:mod:`iolab.importers.cijoe`), the per-run derivation (:mod:`iolab.importers.aisio`), or
the statistics a chapter computes over the table (the experiment's ``analysis``).
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from iolab.core import manifest as mf
from iolab.core.store import open_store
from iolab.errors import InputError, IolabError, ParseError, printable
from iolab.importers import aisio as exp
from iolab.importers.cijoe import P2P, RTOL, import_archive
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.paths import REPO_ROOT
from iolab.safefiles import check_output, read_regular, replace_output
from iolab.tools import p2p_bandwidth

NAME = "aisio_pcie_saturation_runs"
REFERENCE = REPO_ROOT / "data" / "reference"  # where the committed table lies
MODULE = "iolab.importers.aisio_runs"  # what the YAML names as its maker (run with -m)
# the temporary campaign the archive is imported into (a campaign of its own: every run kept)
CAMPAIGN, ENVIRONMENT = f"{exp.PREFIX}pcie-saturation-runs", "hpc-server"
COLUMNS = ["iosize", "rep", "iops", "payload_bytes_per_s", "rx_p95_bytes_per_s",
           "xnvmeperf_output", "dcgm_output", "aisio_result"]
# what AiSIO's runs all share, from their command lines and AiSIO's result files
SHARED = ("tool", "backend", "qdepth", "ndevs", "ncpus", "nqueues", "thr_sib", "smt", "turbo",
          "stress", "cpu_governor", "fixed_freq")
MIB = 2 ** 20

# Archives whose source this module knows, by sha256: the repository, its commit and the
# archive's path there (from ../shared/aisio/README.md, which names the commit).
KNOWN_ARCHIVES = {
    "11841f22c2c59c7393e0e5b8fa39bf0d123fe1cec2b14fa4078bce716fbedb24": {
        "repository": "github.com/xnvme/aisio", "commit": "31b032a",
        "path": "artifacts/pcie-bandwidth-saturation.tar.gz", "environment": "hpc-server"},
}

STATEMENT = (
    "AiSIO's measurements, not this package's: every value was measured by AiSIO on its "
    "server and is only re-derived here, by iolab's parsers, from the raw tool output in "
    "AiSIO's result archive. They are neither published text (AiSIO's chapter gives only "
    "their means, in aisio_pcie_saturation.yaml) nor taken from comments in AiSIO's sources.")

DERIVATION = {
    "iosize": "bytes per read: --iosize of the xnvmeperf command line (the .state file beside "
              "xnvmeperf_output)",
    "rep": "AiSIO's repetition number, the last field of its result file's name (aisio_result)",
    "iops": "IOPS of the Total row of xnvmeperf's report (xnvmeperf_output)",
    "payload_bytes_per_s": "MiB/s of the Total row of xnvmeperf's report (xnvmeperf_output) "
                           "x 2^20, as AiSIO computes its payload",
    "rx_p95_bytes_per_s": "the 95th percentile (statistics.quantiles, n=100, inclusive, as "
                          "AiSIO's dcgm_helper computes it) of every sample of DCGM field 1010 "
                          "(PCIe RX bytes/s of the watched GPU, protocol traffic included) in "
                          "the run's dcgmi dmon capture (dcgm_output). AiSIO starts dmon "
                          "before the benchmark and stops it after; the capture has no "
                          "timestamps, so samples before and after the benchmark are in it "
                          "and cannot be cut to the benchmark's own window",
    "xnvmeperf_output": "the archive's file (below cijoe-output/) holding the run's xnvmeperf "
                        "report, CIJOE's capture of its stdout and stderr",
    "dcgm_output": "the archive's file holding the run's dcgmi dmon capture (CIJOE's output "
                   "of 'cat /tmp/dcgm_monitor.txt' after the run)",
    "aisio_result": "AiSIO's own result file for the run (artifacts/bench-results/); its iops, "
                    "mibs and dcgm agree with the values here within a relative "
                    f"{RTOL:g} (the importer's cross-check; the derivation stops otherwise)",
}

P2P_DERIVATION = {
    "p2p_write_gbs": "one direction: mean over the ordered GPU pairs of the 'Unidirectional "
                     "P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)'",
    "p2p_write_min_gbs": "one direction: the slowest ordered GPU pair of that matrix",
    "bidir_p2p_gbs": "both directions together: mean over the ordered GPU pairs of the "
                     "'Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)' (each cell counts "
                     "the bytes of both directions)",
    "aisio_reference_gbs": "AiSIO's figure: the mean of cells (0,1) and (1,0) of the "
                           "bidirectional matrix; it agrees with the archive's "
                           "artifacts/cuda-sample-p2p-bandwidth (the importer's cross-check)",
}


@dataclass
class AisioRuns:
    """What :func:`derive_runs` finds in an archive."""

    archive: str            # the archive's file name
    sha256: str
    table: pd.DataFrame     # COLUMNS, one row per run, ordered by I/O size and repetition
    point: dict[str, Any]   # the parameters every run shares, with the runtime and dmon's
    p2p: dict[str, Any]     # the GPU-to-GPU figures and the file they came from


def derive_runs(archive: Path) -> AisioRuns:
    """Every run of an AiSIO PCIe saturation archive (``.tar.gz`` or its extracted folder);
    raises :class:`~iolab.errors.IolabError` naming the archive's file where one is unusable
    (see the module docstring)."""
    archive = Path(archive)
    with tempfile.TemporaryDirectory(prefix="iolab-aisio-runs-") as tmp:
        data = Path(tmp)
        report = import_archive(archive, CAMPAIGN, ENVIRONMENT, data, progress=False)
        name = report.archive
        if report.disagreements:
            raise InputError(name, None, "iolab's derivation disagrees with AiSIO's own results: "
                             + "; ".join(map(str, report.disagreements)))
        orphans = [n.split(":", 1)[0] for n in report.notes if "with no benchmark output" in n]
        if orphans:
            raise InputError(name, None, f"AiSIO's result {orphans[0]} has no benchmark output "
                             "in the archive, so AiSIO's means rest on a run this table cannot "
                             f"hold ({len(orphans)} such result(s))")
        store = open_store(exp.ImportedCampaign(CAMPAIGN), ENVIRONMENT, data)
        for folder in store.failed_runs():
            _raise_failed(folder, name)
        runs = store.complete_runs()
        if not runs:
            raise InputError(name, None, "holds no xnvmeperf benchmark")
        rows, points = [], []
        for run in runs:
            row, point = _row(run.path, run.manifest, name)
            rows.append(row)
            points.append(point)
        point = _shared_point(points, name)
        p2p = _p2p(store.root / "extras", name)
        # as the importer recorded it: the file's sha256 (a folder's: a digest of its files)
        sha = runs[0].manifest.extra["imported_from"]["archive_sha256"]
    table = pd.DataFrame(rows, columns=COLUMNS).sort_values(["iosize", "rep"], ignore_index=True)
    twice = table[table.duplicated(["iosize", "rep"], keep=False)]
    if not twice.empty:
        raise InputError(name, None, f"I/O size {twice['iosize'].iloc[0]} has repetition "
                         f"{twice['rep'].iloc[0]} more than once "
                         f"({', '.join(twice['xnvmeperf_output'])})")
    return AisioRuns(name, sha, table, point, p2p)


def _member(name: str, path: str | None) -> str:
    return f"{name}:{path}"


def _raise_failed(folder: Path, name: str) -> None:
    """Stop on a run the importer stored as failed, naming the archive's file at fault."""
    manifest = mf.from_json(mf.load_json(folder / mf.FILE), folder / mf.FILE)
    came = manifest.extra["imported_from"]
    files = {exp.STDOUT: came["output"], exp.STATE: came["state"], exp.DCGM: came["dcgm"],
             exp.CPUFREQ: came["cpufreq"]}
    try:
        exp.derive(folder, manifest.extra["tool_kind"], manifest.cpus, manifest.extra.get("dcgm"),
                   manifest.point.get("iosize"))
    except ParseError as exc:
        raise ParseError(_member(name, files.get(Path(exc.source).name, came["output"])),
                         exc.problem) from None
    raise InputError(_member(name, came["output"]), None,
                     f"AiSIO's run cannot be used: {manifest.failure}")


def _row(path: Path, manifest: Any, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    came = manifest.extra["imported_from"]
    output = _member(name, came["output"])
    if manifest.extra["tool_kind"] != exp.XNVMEPERF_RUN:
        raise InputError(output, None, f"a '{manifest.extra['tool_kind']}' benchmark; the "
                         f"table holds '{exp.XNVMEPERF_RUN}' runs only")
    if not came["aisio_result"]:
        raise InputError(output, None, "no AiSIO result file pairs with this benchmark, so "
                         "its repetition number and AiSIO's own values are unknown")
    if not came["dcgm"]:
        raise InputError(output, None, "no dcgmi dmon capture belongs to this benchmark")
    metrics = exp.derive(path, manifest.extra["tool_kind"], manifest.cpus,
                         manifest.extra.get("dcgm"), manifest.point.get("iosize")).metrics
    row = {"iosize": manifest.point["iosize"], "rep": manifest.rep, "iops": metrics["iops"],
           "payload_bytes_per_s": metrics["mibs"] * MIB,
           "rx_p95_bytes_per_s": metrics["dcgm_p95_bytes_per_s"],
           "xnvmeperf_output": came["output"], "dcgm_output": came["dcgm"],
           "aisio_result": came["aisio_result"]}
    dmon = manifest.extra["dcgm"]
    point = {**{k: manifest.point.get(k) for k in SHARED},
             "runtime_s": manifest.settings.get("runtime_s"),
             "dcgm_fields": dmon["field_ids"], "dcgm_gpus": dmon["gpu_ids"],
             "dcgm_interval_ms": dmon["interval_ms"]}
    return row, point


def _shared_point(points: list[dict[str, Any]], name: str) -> dict[str, Any]:
    first = points[0]
    for point in points[1:]:
        differ = [k for k in first if point[k] != first[k]]
        if differ:
            raise InputError(name, differ[0], f"the runs differ in {differ[0]} "
                             f"({first[differ[0]]!r}, {point[differ[0]]!r}); the table holds "
                             "runs that differ in the I/O size only")
    return first


def _p2p(extras: Path, name: str) -> dict[str, Any]:
    outputs = sorted(extras.glob(f"*/{P2P}-*.output"))
    if len(outputs) != 1:
        raise InputError(name, None, f"{len(outputs)} {P2P} outputs; the table's GPU-to-GPU "
                         "reference needs exactly one")
    # the importer names the copy '<test>-<step>-cmd_NN.output'
    step, cmd = outputs[0].name.removeprefix(f"{P2P}-").rsplit("-", 1)
    member = f"{step}/{cmd}"
    source = _member(name, member)
    raw = read_regular(outputs[0], "a raw extra file") or b""  # never through a link
    parsed = parse_p2p_bandwidth(raw.decode("utf-8", errors="replace"), source)
    figures = p2p_bandwidth.metrics(parsed, source)
    if figures["problem"]:
        raise ParseError(source, figures["problem"])
    return {"source_file": member, "runs": 1, "gpus": figures["gpus"],
            "p2p_write_gbs": figures["p2p_write_gbs"],
            "p2p_write_min_gbs": figures["p2p_write_min_gbs"],
            "bidir_p2p_gbs": figures["bidir_p2p_gbs"],
            "aisio_reference_gbs": p2p_bandwidth.aisio_reference(parsed),
            "note": figures["note"]}


# -- writing --------------------------------------------------------------------------------

def provenance(runs: AisioRuns, repository: str | None = None,
               commit: str | None = None) -> dict[str, Any]:
    """The YAML beside the table. The source of an archive :data:`KNOWN_ARCHIVES` lacks must
    be given (``repository`` and ``commit``); InputError otherwise."""
    known = KNOWN_ARCHIVES.get(runs.sha256, {})
    repository, commit = repository or known.get("repository"), commit or known.get("commit")
    if not (repository and commit):
        raise InputError(runs.archive, None, f"an archive this module does not know (sha256 "
                         f"{runs.sha256}): give the repository and commit it comes from",
                         allowed="--repository and --commit")
    point = dict(runs.point)
    return {
        "source": STATEMENT,
        "archive": {"file": runs.archive, "sha256": runs.sha256, "repository": repository,
                    "commit": commit, "path": known.get("path")},
        "environment": known.get("environment"),
        "derived_by": f"python -m {MODULE} --archive {runs.archive} --out <folder> "
                      "(generated: edit that module, not this file)",
        "runs": len(runs.table),
        "point": {"tool": f"xnvmeperf run, back end {point.pop('backend')}",
                  **{k: v for k, v in point.items() if k != "tool"}},
        "statistic": "one value per run; the total PCIe RX is AiSIO's statistic, a 95th "
                     "percentile over the whole capture, while the payload is xnvmeperf's "
                     "mean over its run: their ratio is a p95 over a mean",
        "table": f"{NAME}.csv",
        "columns": DERIVATION,
        "p2p": {**runs.p2p, "derivation": P2P_DERIVATION},
    }


def write(runs: AisioRuns, out: Path, repository: str | None = None,
          commit: str | None = None) -> tuple[Path, Path]:
    """Write the table and its YAML into ``out``; returns their paths."""
    meta = provenance(runs, repository, commit)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, yaml_path = out / f"{NAME}.csv", out / f"{NAME}.yaml"
    buffer = io.StringIO()
    runs.table.to_csv(buffer, index=False, lineterminator="\n")
    header = ("# AiSIO's measurements, NOT measurements of this package: its runs, re-derived "
              "from its archive.\n# Generated by python -m iolab.importers.aisio_runs; do not "
              "edit by hand.\n")
    text = header + yaml.safe_dump(meta, sort_keys=False, width=92, allow_unicode=True)
    # each replaced whole, never over a link or a special file (iolab.safefiles), nor over a
    # file iolab keeps but the committed reference table this module renews
    renews = [REFERENCE / f"{NAME}.csv", REFERENCE / f"{NAME}.yaml"]
    for path in (csv_path, yaml_path):
        check_output(path, "--out", renews=renews)  # both, before either is written
    for path, content in ((csv_path, buffer.getvalue()), (yaml_path, text)):
        replace_output(path, lambda tmp, content=content: tmp.write_text(content), "--out",
                       renews=renews)
    return csv_path, yaml_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {MODULE}",
        description="Write AiSIO's PCIe saturation runs, re-derived from its archive, as a "
                    f"reference table ({NAME}.csv and .yaml).")
    parser.add_argument("--archive", type=Path, required=True,
                        help="pcie-bandwidth-saturation.tar.gz or its extracted folder")
    parser.add_argument("--out", type=Path, required=True, help="folder to write into, "
                        "e.g. data/reference/")
    parser.add_argument("--repository", help="where the archive comes from (needed for an "
                        "archive this module does not know)")
    parser.add_argument("--commit", help="the repository's commit the archive comes from")
    args = parser.parse_args(argv)
    try:
        paths = write(derive_runs(args.archive), args.out, args.repository, args.commit)
    except IolabError as exc:
        print(f"error: {printable(str(exc))}", file=sys.stderr)  # one line, whatever it quotes
        return 2
    for path in paths:
        print(f"wrote {printable(str(path))}")  # under --out, the user's folder
    return 0


if __name__ == "__main__":
    sys.exit(main())
