"""The import of one AiSIO CIJOE archive, phase by phase: open and index it, record its host,
pair its benchmarks with their captures and AiSIO's results, and store each run.

Responsible for: the order of the phases, opening the target's store (moving a killed
import's leftovers to its ``partial/``, as ``iolab run`` does), and storing the runs in one
batch.
Not responsible for: any phase's own work (the other modules of
:mod:`iolab.importers.cijoe`).
"""

from __future__ import annotations

from pathlib import Path

from iolab.core.store import open_store
from iolab.errors import InputError
from iolab.importers import aisio as exp
from iolab.importers.cijoe.archive import index_commands, open_archive
from iolab.importers.cijoe.host_extras import host_record, record_host, store_extras
from iolab.importers.cijoe.pairing import find_repetitions, pair_results
from iolab.importers.cijoe.report import ImportReport
from iolab.importers.cijoe.runs import ImportBatch, import_one, stored_stdout_shas
from iolab.importers.cijoe.target import import_target, taken_repetitions


def import_archive(archive: Path, experiment: str, environment: str, data_dir: Path, *,
                   progress: bool = True) -> ImportReport:
    """Import one AiSIO CIJOE archive (``.tar.gz`` or extracted folder) into
    ``data/raw/<experiment>/<environment>/``. ``experiment`` is a campaign of its own,
    ``aisio-<name>`` (tidied by :mod:`iolab.importers.aisio`), or a registered experiment
    with ``aisio_kinds`` (e.g. ``pcie_saturation``), whose chapter then shows the imported
    runs apart from its own; benchmarks of other kinds, or of other back ends than its
    ``aisio_backends``, are left out with a note.

    Re-importing is a no-op: runs already stored with the same raw output are skipped (and,
    having been checked when first imported, are not cross-checked again). A run id stored
    with different raw output (e.g. from another archive of the same parameters) counts as
    failed, with a note; nothing stored is ever overwritten.
    """
    target = import_target(experiment)
    arc = open_archive(Path(archive))
    report = ImportReport(arc.name, experiment, environment)
    report.notes.extend(arc.skipped)
    commands = index_commands(arc, report)
    host, fingerprint = host_record(arc, commands, report)
    every = find_repetitions(commands, report)
    pair_results(every, arc, report)
    reps = taken_repetitions(every, target, arc, report)
    own_campaign = isinstance(target, exp.ImportedCampaign)
    if not reps and not own_campaign:
        raise InputError(arc.name, "experiment", f"the archive holds no benchmark that "
                         f"{experiment} takes; nothing was stored ({report.notes[-1]})",
                         allowed=f"archives with {', '.join(target.aisio_kinds)} runs on "
                                 f"the {', '.join(target.aisio_backends)} back end")
    store = open_store(target, environment, data_dir)
    # a killed import's temporary run folders are moved to partial/, as 'iolab run' moves
    # its own: nothing else ever would, and status would show them as interrupted for ever
    report.notes.extend(store.quarantine())
    record_host(store, arc, host, fingerprint, report, own_campaign=own_campaign)
    store_extras(arc, commands, store, report)

    topology = {entry["cpu"]: entry["core"] for entry in host.get("topology") or []}
    iterator = reps
    if progress:
        from tqdm import tqdm
        iterator = tqdm(reps, desc=f"importing {arc.name}", unit="run", leave=False)
    batch = ImportBatch(arc, store, stored_stdout_shas(store), experiment, environment, fingerprint,
                   topology, report)
    with store.batch():  # one sync for the whole archive
        for rep in iterator:
            import_one(rep, batch)
    return report
