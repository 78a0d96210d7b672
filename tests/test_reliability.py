"""Reliability: a catalogue of bad inputs and faults, each refused with its own message.

Every case runs one CLI command against a data directory holding a copy of committed runs
(their sha256 sums verified once, as a user's would be), and asserts that the command
* exits non-zero, with no traceback,
* prints the expected message (a fragment of its one line, quoted exactly), and
* leaves the data directory byte for byte as it was (file names, contents and modes; the
  derived ``cache/`` aside where a fault was injected into a stored run).

The randomized kill-and-resume trials and the full-disk case, which need fio, are in
``test_faults.py``.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from conftest import scratch_dir

from iolab.cli import main
from iolab.core import locks
from iolab.core import registry
from iolab.paths import REPO_ROOT, default_data_dir

SOURCE = default_data_dir() / "raw" / "smt_thp" / "kvm-2vcpu"
ENV = ["--env", "kvm-2vcpu"]
PLAN = ["plan", "smt_thp", *ENV]
# its target: a scratch file of the test session's, never one at the params' own path
RUN = ["run", "smt_thp", *ENV, "--no-progress", "--set",
       f"target_path={scratch_dir() / 'smt_thp.dat'}"]
TIDY = ["tidy", "smt_thp", *ENV]


def tree_digest(root: Path, with_cache: bool = True) -> dict[str, str]:
    """Every path under ``root`` with its mode and content hash (folders: mode only);
    without ``cache/`` where a fault was injected into a stored run, since a file found
    altered leaves the cache of verified files (no later command takes it for verified)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if not with_cache and path.relative_to(root).parts[0] == "cache":
            continue
        st = path.lstat()
        rel = str(path.relative_to(root))
        if path.is_file():
            out[rel] = f"{st.st_mode:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
        else:
            out[rel] = f"{st.st_mode:o}"
    return out


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def copy_committed(data: Path, runs: int) -> Path:
    """A data directory at ``data`` with the first ``runs`` committed smt_thp runs and their
    host record (skips, saying why, without them)."""
    if not SOURCE.exists():
        pytest.skip(f"no committed campaign at {SOURCE}")
    target = data / "raw" / "smt_thp" / "kvm-2vcpu"
    (target / "runs").mkdir(parents=True)
    shutil.copy2(SOURCE / "host.json", target / "host.json")
    for run in sorted((SOURCE / "runs").iterdir())[:runs]:
        shutil.copytree(run, target / "runs" / run.name)
    return data


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A data directory with six committed runs and their host record, verified once."""
    data = copy_committed(tmp_path_factory.mktemp("template") / "data", 6)
    assert cli(["verify", "--data", str(data)])[0] == 0
    return data


@pytest.fixture
def data(template, tmp_path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(template, copy)
    return copy


def first_run(data: Path) -> Path:
    return sorted((data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs").iterdir())[0]


def edit_manifest(data: Path, **changes) -> None:
    path = first_run(data) / "run.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, **changes}))


def truncate(path: Path) -> None:
    text = path.read_bytes()
    path.write_bytes(text[: len(text) // 2])


def same_size_garbage(path: Path) -> None:
    path.write_bytes(b"x" * path.stat().st_size)


def tarball(tmp: Path) -> Path:
    """A tar.gz that is a valid archive but not a CIJOE result."""
    (tmp / "src").mkdir()
    (tmp / "src" / "hello.txt").write_text("not a result archive\n")
    out = tmp / "not-cijoe.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        tar.add(tmp / "src", arcname="src")
    return out


@dataclass
class Case:
    """``argv(data, tmp)``: the command; ``setup(data, tmp)``: the fault, before the snapshot."""

    id: str
    argv: Callable[[Path, Path], list[str]]
    message: str
    setup: Callable[[Path, Path], object] | None = None
    code: int = 2


def d(*argv: str) -> Callable[[Path, Path], list[str]]:
    """A command with ``--data`` the case's data directory."""
    return lambda data, tmp: [*argv, "--data", str(data)]


CASES = [
    # -- params and overrides: types, ranges, bounds ---------------------------------------
    Case("repetitions-huge", d(*PLAN, "--set", "repetitions=1000000000"),
         "key 'repetitions': 1000000000 is out of range (allowed: a whole number >=1 and <=1000)"),
    Case("ramp-negative", d(*PLAN, "--set", "ramp_s=-3"),
         "key 'ramp_s': -3 is out of range (allowed: a whole number >=0 and <=3600)"),
    Case("runtime-negative", d(*RUN, "--set", "runtime_s=-1"),
         "key 'runtime_s': -1 is out of range (allowed: a whole number >=1 and <=86400)"),
    Case("runtime-text", d(*PLAN, "--set", "runtime_s=abc"),
         "key 'runtime_s': 'abc' is a string (allowed: a whole number >=1 and <=86400)"),
    Case("size-with-space", d(*PLAN, "--set", "target_size=1 GB"),
         "key 'target_size': '1 GB' is not a size (allowed: a size such as 1G"),
    Case("size-zero", d(*RUN, "--set", "target_size=0"),
         "key 'target_size': 0 is not a size"),
    Case("misspelt-key", d(*PLAN, "--set", "runtime=3"),
         "key 'runtime': unknown top-level key; did you mean 'runtime_s'?"),
    Case("not-key-value", d(*PLAN, "--set", "runtime_s"),
         "--set: 'runtime_s' is not KEY=VALUE (allowed: e.g. runtime_s=1)"),
    Case("bad-yaml", d(*PLAN, "--set", "runtime_s=[1"), "--set runtime_s: value '[1' is not valid YAML"),
    Case("concurrency-zero", d(*PLAN, "--set", "base.concurrency=0"),
         "key 'base.concurrency': 0 is out of range (allowed: a whole number >=1 and <=4096)"),
    Case("engine-unknown", d(*PLAN, "--set", "base.engine=foo"),
         "key 'base.engine': 'foo' is not one of the allowed values (allowed: psync, io_uring)"),
    Case("grid-unknown-variable", d(*PLAN, "--set", "grids={g: {vary: {colour: [1]}}}"),
         "key 'grids.g.vary.colour': names an unknown variable"),
    Case("where-unknown-variable", d(*PLAN, "--where", "colour=1"),
         "--where: key 'colour': is not a variable of this experiment"),
    Case("where-bad-value", d(*PLAN, "--where", "engine=spdk"),
         "--where: key 'engine': 'spdk' is not one of the allowed values (allowed: psync, io_uring)"),
    Case("limit-negative", d(*RUN, "--limit", "-1"), "--limit: -1 is negative (allowed: 0 or more)"),
    Case("max-runs-zero", d(*PLAN, "--max-runs", "0"), "--max-runs: 0 is not positive"),
    Case("design-over-limit", d(*PLAN, "--max-runs", "50"),
         "key 'grids': the design has up to 272 runs (concurrency: 14 points, affinity: 8 "
         "points, smt: 4 points, thp: 4 points, layout: 4 points; x at most 8 repetitions), "
         "more than the limit of 50"),
    Case("design-over-default-limit",
         d(*PLAN, "--set", "repetitions=1000", "--set",
           "grids={g: {vary: {concurrency: " + str(list(range(1, 1002))) + "}}}"),
         "key 'grids': the design has up to 1,001,000 runs (g: 1,001 points; x 1000 "
         "repetitions), more than the limit of 1,000,000"),
    Case("design-over-point-limit",
         d(*PLAN, "--set", "grids={g: {vary: {concurrency: " + str(list(range(1, 4097)))
           + ", bs: " + str([512 * k for k in range(1, 26)]) + "}}}"),
         "notebooks/params/kvm-2vcpu/smt_thp.yaml: key 'grids': the design has up to 102,400 "
         "points (g: 102,400 points), more than a plan holds (each point is kept in memory); "
         "split it into several params files or shrink the grids (allowed: at most 100,000 "
         "points)"),
    Case("cuda-run-qdepth-not-power-of-two",
         d("plan", "cuda_iosize", "--env", "hpc-server", "--set",
           "grids.iosize-qdepth.vary.qdepth=[3]"),
         "key 'qdepth': cuda-run takes only a power of two up to 1024, got 3, in the point"),
    Case("gpu-counter-unknown", d("plan", "cuda_qdepth", "--env", "hpc-server", "--set",
                                  "gpu_counter=smi"),
         "key 'gpu_counter': 'smi' is not one of the allowed values (allowed: dcgmi, nvml, none)"),
    Case("import-into-experiment-without-imports",
         lambda data, tmp: ["import-cijoe", str(tarball(tmp)), "--experiment", "smt_thp",
                            "--env", "lab", "--data", str(data)],
         "key 'experiment': smt_thp cannot take runs imported from AiSIO's archives"),
    # -- names that become paths -----------------------------------------------------------
    Case("env-traversal-plan", d("plan", "smt_thp", "--env", "../../x"),
         "key 'environment': '../../x' is not a usable environment name"),
    Case("env-traversal-run", d("run", "smt_thp", "--env", "../../x"),
         "key 'environment': '../../x' is not a usable environment name"),
    Case("env-traversal-tidy", d("tidy", "smt_thp", "--env", "../x"),
         "key 'environment': '../x' is not a usable environment name"),
    Case("env-traversal-import", lambda data, tmp: ["import-cijoe", str(tarball(tmp)),
                                                    "--experiment", "aisio-x", "--env",
                                                    "../../x", "--data", str(data)],
         "key 'environment': '../../x' is not a usable environment name"),
    Case("experiment-traversal-import", lambda data, tmp: ["import-cijoe", str(tarball(tmp)),
                                                           "--experiment", "aisio-../x", "--env",
                                                           "lab", "--data", str(data)],
         "key 'experiment': 'aisio-../x' is not a usable experiment name"),
    Case("env-traversal-verify", d("verify", "--env", "../x"),
         "key 'environment': '../x' is not a usable environment name"),
    Case("misspelt-experiment", d("plan", "smt_thq", *ENV),
         # the list from the registry: a new experiment needs no edit here
         f"key 'experiment': unknown experiment 'smt_thq' (allowed: "
         f"{', '.join(registry.names())})"),
    Case("unknown-environment", d("plan", "smt_thp", "--env", "nowhere"),
         "no params file for environment 'nowhere'; create one with 'iolab env new nowhere'"),
    # -- the data directory ----------------------------------------------------------------
    Case("data-is-a-file-plan", lambda data, tmp: [*PLAN, "--data", str(data / "raw" / "smt_thp"
                                                                        / "kvm-2vcpu" / "host.json")],
         "host.json: is a file, not a data directory"),
    Case("data-is-a-file-run", lambda data, tmp: [*RUN, "--data", str(data / "raw" / "smt_thp"
                                                                      / "kvm-2vcpu" / "host.json")],
         "host.json: is a file, not a data directory"),
    Case("data-is-a-file-status", lambda data, tmp: ["status", "--data", str(
        data / "raw" / "smt_thp" / "kvm-2vcpu" / "host.json")], "is a file, not a data directory"),
    Case("data-is-raw-plan", lambda data, tmp: [*PLAN, "--data", str(data / "raw")],
         "raw: is the raw/ folder of a data directory, not a data directory; pass its parent"),
    Case("data-is-raw-run", lambda data, tmp: [*RUN, "--data", str(data / "raw")],
         "raw: is the raw/ folder of a data directory, not a data directory; pass its parent"),
    Case("data-is-raw-tidy", lambda data, tmp: [*TIDY, "--data", str(data / "raw")],
         "is the raw/ folder of a data directory"),
    # -- stored runs damaged after they were committed -------------------------------------
    Case("truncated-manifest-tidy", d(*TIDY), "run.json cannot be read (not valid JSON, cut off",
         setup=lambda data, tmp: truncate(first_run(data) / "run.json")),
    Case("truncated-manifest-run", d(*RUN, "--limit", "1"),
         "1 stored run(s) are corrupt, so this campaign would be wrong or incomplete",
         setup=lambda data, tmp: truncate(first_run(data) / "run.json")),
    Case("truncated-manifest-chapter",
         lambda data, tmp: ["notebook", "smt_thp", *ENV, "--data", str(data), "-o",
                            str(tmp / "out.ipynb")],
         "raised IolabError: 1 stored run(s) are corrupt, so its table would be wrong",
         setup=lambda data, tmp: truncate(first_run(data) / "run.json")),
    Case("garbage-output-tidy", d(*TIDY), "fio.json differs from what run.json records",
         setup=lambda data, tmp: same_size_garbage(first_run(data) / "fio.json")),
    Case("garbage-output-verify", d("verify"), "fio.json differs from what run.json records",
         setup=lambda data, tmp: same_size_garbage(first_run(data) / "fio.json"), code=1),
    Case("truncated-output-tidy", d(*TIDY), "(truncated or altered)",
         setup=lambda data, tmp: truncate(first_run(data) / "fio.json")),
    Case("deleted-output-tidy", d(*TIDY), "fio.json is missing (run.json records it)",
         setup=lambda data, tmp: (first_run(data) / "fio.json").unlink()),
    Case("deleted-output-run", d(*RUN), "fio.json is missing (run.json records it)",
         setup=lambda data, tmp: (first_run(data) / "fio.json").unlink()),
    Case("deleted-output-verify", d("verify", "smt_thp"), "1 corrupt runs; restore them",
         setup=lambda data, tmp: (first_run(data) / "fio.json").unlink(), code=1),
    Case("deleted-collector-file", d(*TIDY), "procstat.after is missing",
         setup=lambda data, tmp: (first_run(data) / "procstat.after").unlink()),
    Case("failed-run-under-runs", d(*TIDY), "run.json says status 'failed'; only committed runs",
         setup=lambda data, tmp: edit_manifest(data, status="failed")),
    Case("manifest-of-another-run", d(*TIDY), "run.json is the manifest of run 'ffffffffffff-r0'",
         setup=lambda data, tmp: edit_manifest(data, run_id="ffffffffffff-r0")),
    Case("manifest-from-the-future", d(*TIDY),
         "key 'schema_version': 999 is not a manifest version this iolab reads",
         setup=lambda data, tmp: edit_manifest(data, schema_version=999)),
    Case("corrupt-host-record", d(*RUN, "--limit", "1"), "host.json: not valid JSON",
         setup=lambda data, tmp: (data / "raw" / "smt_thp" / "kvm-2vcpu" / "host.json")
         .write_text("{oops")),
    Case("garbage-knob-journal", d("restore"), ".knob-journal.json: not a readable knob journal",
         setup=lambda data, tmp: (data / ".knob-journal.json").write_text("{oops")),
    # -- concurrency ---------------------------------------------------------------------
    Case("data-locked-run", d(*RUN, "--limit", "1"), "is held by pid",
         setup=lambda data, tmp: locks.data_lock(data).acquire()),
    Case("host-locked-run", d(*RUN, "--limit", "1"), "this host's system settings (knobs) and "
         "measurements is held by pid", setup=lambda data, tmp: locks.host_lock(None).acquire()),
    Case("host-locked-restore", d("restore"), "is held by pid",
         setup=lambda data, tmp: locks.host_lock(None).acquire()),
    Case("data-locked-verify-quarantine", d("verify", "--quarantine"), "is held by pid",
         setup=lambda data, tmp: locks.data_lock(data).acquire()),
    # -- other commands --------------------------------------------------------------------
    Case("parquet-to-stdout", d(*TIDY, "--format", "parquet"), "--format parquet needs -o FILE"),
    Case("tidy-of-nothing", d("tidy", "cpu_search", *ENV), "no stored campaign for experiment "
         "'cpu_search', environment 'kvm-2vcpu'"),
    Case("import-not-an-archive", lambda data, tmp: ["import-cijoe", str(data / "raw" / "smt_thp"
                                                                        / "kvm-2vcpu" / "host.json"),
                                                     "--experiment", "aisio-x", "--env", "lab",
                                                     "--data", str(data)],
         "host.json: not a readable tar archive"),
    Case("import-missing-archive", lambda data, tmp: ["import-cijoe", str(tmp / "nope.tar.gz"),
                                                      "--experiment", "aisio-x", "--env", "lab",
                                                      "--data", str(data)],
         "nope.tar.gz: no such archive or folder"),
    Case("import-wrong-name", lambda data, tmp: ["import-cijoe", str(tarball(tmp)), "--experiment",
                                                 "x", "--env", "lab", "--data", str(data)],
         "imported campaigns are named 'aisio-<name>'"),
    Case("unknown-mode", d("notebook", "smt_thp", *ENV, "--mode", "measure"),
         "argument --mode: invalid choice: 'measure'"),
    # -- the second fault pass (issue 30) ------------------------------------------------------
    Case("where-twice", d(*PLAN, "--where", "engine=psync", "--where", "engine=io_uring"),
         "--where: key 'engine': is given twice ('psync' and 'io_uring'); give it once, with a "
         "list for several values"),
    Case("where-empty-list", d(*PLAN, "--where", "engine=[]"),
         "--where: key 'engine': an empty list matches no point"),
    Case("where-no-value", d(*PLAN, "--where", "engine="), "--where: key 'engine': has no value"),
    Case("where-no-equals", d(*PLAN, "--where", "engine"),
         "--where: 'engine' is not KEY=VALUE (allowed: e.g. engine=io_uring)"),
    Case("set-experiment", d(*PLAN, "--set", "experiment=cpu_search"),
         "--set: key 'experiment': names what the params file is for"),
    Case("set-deeply-nested", d(*PLAN, "--set", "grids=" + "[" * 5000),
         "--set grids: value is nested too deeply"),
    Case("data-empty", lambda data, tmp: [*RUN, "--data", ""],
         "argument --data: empty: give a folder"),
    Case("runs-without-json", d(*PLAN, "--runs"), "--runs: lists the runs inside the JSON object"),
    Case("book-render-only-and-no-render", d("book", "--render-only", "--no-render"),
         "argument --no-render: not allowed with argument --render-only"),
    Case("tidy-into-a-file", lambda data, tmp: [*TIDY, "--data", str(data), "-o", str(
        data / "raw" / "smt_thp" / "kvm-2vcpu" / "host.json" / "t.csv")],
         "host.json is not a folder"),
    Case("env-from-traversal", lambda data, tmp: ["env", "new", "x", "--from", "../params"],
         "key 'environment': '../params' is not a usable environment name"),
    Case("journal-is-a-folder", lambda data, tmp: ["restore", "--data", str(data), "--journal",
                                                   str(data / "raw")],
         "raw: is not a regular file, so not a knob journal"),
    Case("journal-is-a-fifo", lambda data, tmp: ["restore", "--data", str(data), "--journal",
                                                 str(tmp / "fifo")],
         "fifo: is not a regular file, so not a knob journal",
         setup=lambda data, tmp: os.mkfifo(tmp / "fifo")),
    Case("journal-a-list", lambda data, tmp: ["restore", "--data", str(data), "--journal",
                                              str(tmp / "j.json")],
         "j.json: is a JSON list, not a knob journal",
         setup=lambda data, tmp: (tmp / "j.json").write_text("[1]")),
    Case("host-record-a-list", d(*RUN, "--limit", "1"),
         "host.json: is not a JSON object, so not a host record",
         setup=lambda data, tmp: (data / "raw" / "smt_thp" / "kvm-2vcpu" / "host.json")
         .write_text("[]")),
    Case("manifest-files-not-a-mapping", d(*TIDY),
         "run.json is not a valid manifest (key 'files'): is str, not a dict",
         setup=lambda data, tmp: edit_manifest(data, files="x")),
    Case("manifest-size-a-string", d("verify"),
         "run.json is not a valid manifest (key 'files.fio.json.bytes'): '0' is not a size",
         setup=lambda data, tmp: edit_manifest(data, files={**json.loads(
             (first_run(data) / "run.json").read_text())["files"],
             "fio.json": {"sha256": "0" * 64, "bytes": "0"}}), code=1),
    Case("manifest-without-point", d("verify"),
         "run.json is not a valid manifest (key 'point'): missing from the manifest",
         setup=lambda data, tmp: edit_manifest_without(data, "point"), code=1),
    Case("host-record-deleted-runs-of-another-host", d(*RUN, "--limit", "1"),
         "host.json is missing, but the campaign's stored runs were made on a host with "
         "fingerprint ffff",
         setup=lambda data, tmp: other_host_without_record(data)),
]


def edit_manifest_without(data: Path, key: str) -> None:
    path = first_run(data) / "run.json"
    doc = json.loads(path.read_text())
    del doc[key]
    path.write_text(json.dumps(doc))


def other_host_without_record(data: Path) -> None:
    """The campaign's runs made on another host, and its host.json gone."""
    runs = data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs"
    for run in runs.iterdir():
        path = run / "run.json"
        path.write_text(json.dumps({**json.loads(path.read_text()),
                                    "host_fingerprint": "ffff"}))
    (data / "raw" / "smt_thp" / "kvm-2vcpu" / "host.json").unlink()


@pytest.fixture(autouse=True)
def _release_locks():
    """A case that holds a lock releases it at the end (its file descriptor is closed)."""
    held = []
    real = locks.Lock.acquire

    def tracking(self):
        held.append(self)
        return real(self)

    locks.Lock.acquire = tracking
    yield
    locks.Lock.acquire = real
    for lock in held:
        lock.release()


def test_the_catalogue_is_large_enough():
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_and_faults_are_refused_clearly_and_change_nothing(case, data, tmp_path):
    if case.setup:
        case.setup(data, tmp_path)
    with_cache = case.setup is None  # bad input alone changes nothing, not even a cache
    before = tree_digest(data, with_cache)
    code, out, err = cli(case.argv(data, tmp_path))
    assert code == case.code and code != 0, (out, err)
    assert case.message in out + err, f"expected {case.message!r} in:\n{out}{err}"
    assert "Traceback" not in out + err
    assert tree_digest(data, with_cache) == before, "the data directory changed"


# -- cases that need their own set-up -------------------------------------------------------


def test_a_read_only_data_directory_is_one_line(data, tmp_path):
    """chmod stops other users; root is stopped only by a read-only file system, so as root
    the data directory is a read-only bind mount of the copy."""
    target = data
    if os.geteuid() == 0:
        target = tmp_path / "ro"
        target.mkdir()
        if subprocess.run(["mount", "--bind", "-o", "ro", str(data), str(target)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot make a read-only bind mount here")
        # older util-linux ignores ro on the first bind: remount to be sure
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], capture_output=True)
    else:
        for path in [data, *data.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
    try:
        before = tree_digest(target)
        why = ("the data directory is on a read-only file system" if target != data else
               "the data directory is not writable by this user")
        code, out, err = cli([*RUN, "--limit", "1", "--data", str(target)])
        assert code == 2 and why in err, err
        code2, out2, err2 = cli(["verify", "--quarantine", "--data", str(target)])
        assert code2 == 2 and why in err2, err2
        assert "Traceback" not in err + err2 and tree_digest(target) == before
        # reading still works
        assert cli([*TIDY, "--data", str(target), "-o", str(tmp_path / "t.csv")])[0] == 0
    finally:
        if target != data:
            subprocess.run(["umount", str(target)])


def test_an_os_error_is_one_line_and_debug_shows_the_traceback(tmp_path, monkeypatch):
    from iolab.core import store

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))

    monkeypatch.setattr(store.Store, "scan", full)
    (tmp_path / "raw" / "smt_thp" / "kvm-2vcpu").mkdir(parents=True)
    code, _, err = cli([*TIDY, "--data", str(tmp_path)])
    assert code == 2 and err.strip() == (f"iolab: error: {tmp_path / 'x'}: the disk is full; free "
                                         "space and run the same command again (stored runs are "
                                         "kept; an unfinished one is discarded)")
    with pytest.raises(OSError):
        cli(["--debug", *TIDY, "--data", str(tmp_path)])


def test_status_names_corrupt_runs_and_agrees_with_tidy(data):
    (first_run(data) / "fio.json").unlink()
    code, out, _ = cli(["status", "--data", str(data)])
    assert code == 0 and "smt_thp/kvm-2vcpu: 5 complete, 1 corrupt" in out
    assert f"corrupt: {first_run(data)}: fio.json is missing" in out
    code, out, err = cli([*TIDY, "--data", str(data), "--skip-corrupt"])
    assert code == 0 and len(out.strip().splitlines()) == 1 + 5
    assert "left out 1 corrupt runs" in err


def test_verify_quarantine_moves_corrupt_runs_aside_for_a_rerun(data):
    broken = first_run(data)
    (broken / "fio.json").unlink()
    code, out, _ = cli(["verify", "--quarantine", "--data", str(data)])
    assert code == 0 and "moved corrupt run" in out and not broken.exists()
    partial = list((broken.parent.parent / "partial").iterdir())
    assert len(partial) == 1 and (partial[0] / "run.json").exists()
    assert cli(["verify", "--data", str(data)])[0] == 0


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    lock = locks.data_lock(tmp_path)
    proc = subprocess.run(["true"])
    assert proc.returncode == 0
    dead = 2 ** 22 + 7  # above pid_max's default: no such process
    lock.path.write_text(json.dumps({"pid": dead, "argv": ["iolab", "run"], "data_dir": "x",
                                     "since": "earlier"}))
    with lock:
        assert lock.messages == [f"took over {lock.path} from pid {dead} ('iolab run', data x, "
                                 "since earlier), which is no longer running"]
        assert locks.holder(lock.path)["pid"] == os.getpid()
    assert locks.holder(lock.path) is None


def test_a_released_data_lock_leaves_no_file_and_a_removed_one_is_not_taken(tmp_path,
                                                                          monkeypatch):
    """Data locks do not pile up in the lock folder (one file per data directory ever used);
    a process that locked the file just as its holder removed it starts again instead of
    holding a lock nobody else can see."""
    lock = locks.data_lock(tmp_path)
    with lock:
        assert lock.path.exists()
        with pytest.raises(locks.LockHeld):
            locks.data_lock(tmp_path).acquire()
    assert not lock.path.exists() and locks.holder(lock.path) is None
    host = locks.host_lock(tmp_path)
    with host:
        pass
    assert host.path.exists(), "the host lock's file stays (it may be another user's)"
    # the race: the first file this process locks is removed before it looks again
    real_lock_file = locks.Lock._lock_file
    opened = []

    def removed_after_locking(self):
        fd = real_lock_file(self)
        if not opened:
            os.unlink(self.path)  # its holder's release, between our open and our check
        opened.append(os.fstat(fd).st_ino)
        return fd

    monkeypatch.setattr(locks.Lock, "_lock_file", removed_after_locking)
    again = locks.data_lock(tmp_path)
    with again:
        assert len(opened) == 2, "it tried again with a fresh file"
        assert os.stat(again.path).st_ino == opened[1]
        assert locks.holder(again.path)["pid"] == os.getpid()
    assert not again.path.exists()
    # a file that cannot be removed (another user's, in a sticky folder) is emptied instead,
    # so the next taker reports no takeover from a process that released it cleanly
    monkeypatch.setattr(locks.Lock, "_lock_file", real_lock_file)

    def refused(path):
        raise PermissionError(path)

    with monkeypatch.context() as m:
        m.setattr(locks.os, "unlink", refused)
        with locks.data_lock(tmp_path) as kept:
            pass
    assert kept.path.exists() and kept.path.read_text() == ""
    with locks.data_lock(tmp_path) as next_one:
        assert next_one.messages == []


HOLD_THP = """
import sys, time
from pathlib import Path
from iolab.core.locks import KnobLocks
from iolab.host.journal import KnobSession
from iolab.host.knobs import SysRoot, ThpKnob
root = SysRoot(Path(sys.argv[1]), Path(sys.argv[2]))
with KnobLocks(None) as claims, KnobSession({"thp": ThpKnob(root)}, Path(sys.argv[3]),
                                          claim=claims.claim) as session:
    session.set("thp", "never")
    print("set", flush=True)
    time.sleep(60)
"""


def test_a_knob_changed_by_a_campaign_of_another_lock_folder_is_refused_naming_it(
        tmp_path, fake_sysroot, monkeypatch):
    """Two campaigns given two lock folders hold two host locks; the knob's own lock, in the
    system's lock folder whatever the variable says, still keeps the second off THP while
    the first has it changed, and off restoring a journal of THP under it."""
    from iolab.host.journal import KnobSession, restore_from_journal
    from iolab.host.knobs import ThpKnob

    root = fake_sysroot()
    first = subprocess.Popen([sys.executable, "-c", HOLD_THP, str(root.sys), str(root.proc),
                              str(tmp_path / "first.json")], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "IOLAB_LOCK_DIR": str(tmp_path / "first")})
    try:
        assert first.stdout.readline() == "set\n"
        monkeypatch.setenv("IOLAB_LOCK_DIR", str(tmp_path / "second"))
        thp = ThpKnob(root)
        journal = tmp_path / "second.json"
        with locks.KnobLocks(tmp_path) as claims:
            with pytest.raises(locks.LockHeld) as info:
                with KnobSession({"thp": thp}, journal, claim=claims.claim) as session:
                    session.set("thp", "always")
            assert session.restore_report == [] and not journal.exists()
            journal.write_text(json.dumps({"schema_version": 1, "pid": 1, "changes": [
                {"knob": "thp", "before": "always"}]}))
            with pytest.raises(locks.LockHeld):
                restore_from_journal(journal, {"thp": thp}, claim=claims.claim)
            claims.claim(ThpKnob(fake_sysroot("other")))  # another tree's THP is another knob
        assert thp.read() == "never", "the second campaign left THP as the first set it"
        assert str(info.value).startswith(f"{locks.knob_lock_path(thp)}: the knob 'thp' of "
                                          f"{root.sys} is held by pid {first.pid} (")
        assert locks.knob_lock_path(thp).parent == locks.system_lock_dir()
    finally:
        first.terminate()  # its session restores THP on SIGTERM
        first.wait(timeout=30)
    assert thp.read() == "madvise" and not locks.knob_lock_path(thp).exists()
    with locks.KnobLocks(None) as claims:  # now the journal can be restored
        lines = restore_from_journal(journal, {"thp": thp}, claim=claims.claim)
    assert lines[1] == 'thp: restored to "always"' and not journal.exists()


def test_two_campaigns_on_one_data_directory_name_the_running_one(data):
    with locks.data_lock(data):
        code, _, err = cli([*RUN, "--limit", "1", "--data", str(data)])
        status = cli(["status", "--data", str(data)])[1]
    assert code == 2 and f"is held by pid {os.getpid()}" in err
    assert "previous run did not restore" not in err
    assert f"a campaign is running on this data directory: pid {os.getpid()}" in status


def test_an_unwritable_target_is_named_before_anything_runs(tmp_path):
    """A target in another user's folder (here: root's, planned by 'nobody')."""
    folder = tmp_path / "theirs"
    folder.mkdir()
    target = folder / "target.dat"
    data = tmp_path / "data"
    argv = ["plan", "smt_thp", *ENV, "--data", str(data), "--set", f"target_path={target}"]
    if os.geteuid() == 0:
        # the other user runs this checkout's iolab: every folder above it must let them in
        closed = [d for d in (REPO_ROOT, *REPO_ROOT.parents) if not d.stat().st_mode & 0o001]
        if closed:
            pytest.skip(f"another user cannot reach this checkout ({closed[0]} is not "
                        "searchable by others), so a file of theirs cannot be shown")
        tmp_path.chmod(0o755)
        for parent in tmp_path.parents:  # pytest's folders are private to root
            if parent.stat().st_mode & 0o001 == 0 and parent != Path("/"):
                parent.chmod(parent.stat().st_mode | 0o001)
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               str(REPO_ROOT / ".venv" / "bin" / "iolab"), *argv],
                              capture_output=True, text=True,
                              env={**os.environ, "IOLAB_LOCK_DIR": str(tmp_path / "locks")})
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    else:
        folder.chmod(0o555)
        code, out, err = cli(argv)
    assert code == 0, err
    uid = 65534 if os.geteuid() == 0 else os.getuid()
    assert (f"--set target_path: {target} cannot be created: {folder} is not a folder this "
            f"user (uid {uid}) may write" in out), out
    assert "to run 0" in out
    assert not data.exists()


def test_a_chapter_built_with_skip_corrupt_says_how_many_it_left_out(data, monkeypatch):
    from iolab.core.tidy import SKIP_CORRUPT_VAR
    from iolab.errors import IolabError
    from iolab.report.chapter import Chapter

    (first_run(data) / "fio.json").unlink()
    with pytest.raises(IolabError, match="fio.json is missing"):
        Chapter("smt_thp", "kvm-2vcpu", data_dir=data)
    monkeypatch.setenv(SKIP_CORRUPT_VAR, "1")  # what 'iolab book --skip-corrupt' sets
    chapter = Chapter("smt_thp", "kvm-2vcpu", data_dir=data)
    table = chapter.what_ran()
    [left_out] = table[table.iloc[:, 0] == "left out"].iloc[:, 1]
    assert left_out.startswith("1 stored runs whose raw files do not match their manifests")


def test_verify_rereads_what_the_caches_trust_and_tidy_then_serves_no_cached_table(data,
                                                                                   tmp_path):
    """Bit rot or a careless copy: a raw file altered with its size and modification time
    kept. The caches of verified files and of the tidy table key on both, so only reading
    the bytes sees it; 'iolab verify' does, and from then on the cached table is not served."""
    assert cli([*TIDY, "--data", str(data), "-o", str(tmp_path / "t.csv")])[0] == 0  # cached
    target = first_run(data) / "fio.json"
    st = target.stat()
    same_size_garbage(target)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cli([*TIDY, "--data", str(data), "-o", str(tmp_path / "t.csv")])[0] == 0, \
        "before anyone reads the bytes, the caches cannot know"
    code, out, _ = cli(["verify", "--fast", "--data", str(data)])
    assert code == 0 and "6 intact" in out and "an alteration that kept both is not seen" in out
    code, out, _ = cli(["verify", "--data", str(data)])
    assert code == 1 and "fio.json differs from what run.json records" in out
    code, out, err = cli([*TIDY, "--data", str(data), "-o", str(tmp_path / "t.csv")])
    assert code == 2 and "fio.json differs from what run.json records" in err
    code, out, _ = cli(["verify", "--fast", "--data", str(data)])
    assert code == 1, "once found, the file is never again taken for verified"


def test_a_loop_of_links_among_the_runs_is_a_corrupt_run_not_a_stop(data):
    (first_run(data).parent / "loopx").symlink_to("loopx")
    code, out, _ = cli(["status", "--data", str(data)])
    assert code == 0 and "smt_thp/kvm-2vcpu: 6 complete, 1 corrupt" in out
    code, out, _ = cli(["verify", "--data", str(data)])
    assert code == 1 and "loopx: is a symbolic link to loopx, not a run folder" in out


def test_a_bug_is_one_line_with_its_own_status(monkeypatch):
    def broken(args):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr("iolab.cli.data.cmd_status", broken)
    code, out, err = cli(["status"])
    assert code == 70 and err.strip() == (
        "iolab: internal error (a bug in iolab, please report it): ZeroDivisionError: division "
        "by zero; run the same command with --debug for the traceback")
    with pytest.raises(ZeroDivisionError):
        cli(["status", "--debug"])
