"""The tidy table's cache: a warm load keyed on the files' sizes and modification times,
and everything else read again the moment anything changed."""

from __future__ import annotations

import os
import shutil
import signal
import stat
from pathlib import Path

import pytest

from iolab.core import registry
from iolab.core import tidy
from iolab.core.store import Store
from iolab.errors import IolabError
from iolab.paths import default_data_dir

CAMPAIGN = default_data_dir() / "raw" / "smt_thp" / "kvm-2vcpu"


@pytest.fixture
def data(tmp_path):
    """Four real stored smt_thp runs in a data folder of their own."""
    if not CAMPAIGN.exists():
        pytest.skip(f"{CAMPAIGN} is not in this checkout")
    dest = tmp_path / "data" / "raw" / "smt_thp" / "kvm-2vcpu"
    (dest / "runs").mkdir(parents=True)
    shutil.copy2(CAMPAIGN / "host.json", dest / "host.json")
    for run in sorted((CAMPAIGN / "runs").iterdir())[:4]:
        shutil.copytree(run, dest / "runs" / run.name)
    return tmp_path / "data"


def load(data):
    return tidy.load(data, registry.get("smt_thp"), "kvm-2vcpu")


def test_a_warm_load_reads_no_manifest(data, monkeypatch):
    first = load(data)
    monkeypatch.setattr(Store, "scan", lambda *a, **k: pytest.fail("scanned the store"))
    warm = load(data)
    assert warm.equals(first) and len(warm) == 4


def test_a_rewritten_raw_file_is_verified_again_and_refused(data):
    load(data)
    run = sorted((data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs").iterdir())[0]
    stdout = run / "fio.json"
    text = stdout.read_bytes()
    stdout.write_bytes(text.replace(b'"iops"', b'"IOPS"', 1))  # same size, other bytes
    st = stdout.stat()
    os.utime(stdout, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with pytest.raises(IolabError, match=f"{run.name}.*fio.json differs"):
        load(data)


def test_a_new_run_is_a_new_key(data):
    runs = data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs"
    moved = sorted(runs.iterdir())[-1]
    aside = data / "aside"
    shutil.move(moved, aside)
    assert len(load(data)) == 3
    shutil.move(aside, moved)
    assert len(load(data)) == 4


def test_a_table_that_left_corrupt_runs_out_keeps_reporting_them(data):
    run = sorted((data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs").iterdir())[0]
    (run / "stdout").write_text("edited\n")
    for _ in range(2):
        df = tidy.load(data, registry.get("smt_thp"), "kvm-2vcpu", skip_corrupt=True)
        assert len(df) == 3 and df.attrs["corrupt_skipped"] == 1


def test_rows_parsed_by_forked_workers_equal_those_parsed_in_line(data, monkeypatch):
    exp = registry.get("smt_thp")
    runs = Store(data, "smt_thp", "kvm-2vcpu").complete_runs()
    in_line = tidy.build(exp, runs)
    monkeypatch.setattr(tidy, "PARALLEL_FROM", 2)
    monkeypatch.setattr(tidy.os, "cpu_count", lambda: 2)
    # a thread another test left running would make build() parse in-line, rightly
    monkeypatch.setattr(tidy.threading, "active_count", lambda: 1)
    from concurrent.futures import ProcessPoolExecutor

    mapped = []
    real = ProcessPoolExecutor.map
    monkeypatch.setattr(ProcessPoolExecutor, "map",
                        lambda self, fn, *its: mapped.append(fn) or real(self, fn, *its))
    forked = tidy.build(exp, runs)
    assert mapped == [tidy._rows_of_slice], "the rows were not parsed by workers"
    assert forked.equals(in_line) and len(forked) == 4


def test_a_cache_that_could_not_be_written_never_vouches_for_an_old_table(data, monkeypatch):
    runs = data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs"
    moved = sorted(runs.iterdir())[-1]
    shutil.move(moved, data / "aside")
    assert len(load(data)) == 3  # cached with its key
    shutil.move(data / "aside", moved)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tidy.pd.DataFrame, "to_parquet", full_disk)
    assert len(load(data)) == 4  # rebuilt, but not cached
    monkeypatch.undo()
    assert len(load(data)) == 4  # the old table of 3 is not served


def test_a_parse_error_in_a_forked_worker_names_the_file(data, monkeypatch):
    from iolab.errors import ParseError

    run = sorted((data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs").iterdir())[0]
    runs = Store(data, "smt_thp", "kvm-2vcpu").complete_runs()
    (run / "fio.json").write_text("{ not json")  # after the scan: only the parser sees it
    monkeypatch.setattr(tidy, "PARALLEL_FROM", 2)
    monkeypatch.setattr(tidy.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(tidy.threading, "active_count", lambda: 1)
    with pytest.raises(ParseError, match=f"{run.name}/fio.json"):
        tidy.build(registry.get("smt_thp"), runs)


# -- the cache's own files: checked, never followed, blocked on or removed -------------------

def cache_files(data) -> dict[str, Path]:
    path = tidy.cache_path(data, "smt_thp", "kvm-2vcpu")
    return {"parquet": path, "digest": path.with_suffix(".digest"),
            "stat": path.with_suffix(".stat")}


def cut_short(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def overwritten(path) -> None:
    path.write_bytes(b"x" * path.stat().st_size)


@pytest.mark.parametrize("damage", [cut_short, overwritten])
def test_a_damaged_cache_is_built_again_and_the_user_told_once(data, capsys, damage):
    first = load(data)
    damage(cache_files(data)["parquet"])
    assert load(data).equals(first)
    told = capsys.readouterr().err
    assert told == (f"iolab: the cached table {cache_files(data)['parquet']} does not match "
                    "the sha256 written with it in kvm-2vcpu.digest (cut short or "
                    "overwritten); the table was built again from the stored runs\n")
    assert load(data).equals(first) and capsys.readouterr().err == "", "told once"


def test_a_damaged_cache_is_found_without_a_scan_too(data, capsys, monkeypatch):
    """The warm path (no manifest read) checks the bytes as well."""
    first = load(data)
    overwritten(cache_files(data)["parquet"])
    scans = []
    real = Store.scan
    monkeypatch.setattr(Store, "scan", lambda *a, **k: scans.append(1) or real(*a, **k))
    assert load(data).equals(first) and scans == [1]
    assert "does not match the sha256" in capsys.readouterr().err


@pytest.fixture
def never_blocks():
    """A read that waits on a FIFO would hang the suite: it fails the test instead."""
    def blocked(signum, frame):
        raise AssertionError("blocked: a FIFO was opened and waited on")

    saved = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(300)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, saved)


def put(path, kind: str, outside) -> str:
    """Something that is not a regular file at ``path``; what the user is told it is."""
    if kind == "folder":
        path.mkdir()
        (path / "inside").write_text("kept\n")
        return "a folder"
    if kind == "fifo":
        os.mkfifo(path)  # a read of it would wait for a writer forever
        return "a FIFO (named pipe)"
    path.symlink_to(outside)
    return f"a symbolic link to {outside}"


def still_there(path, kind: str) -> bool:
    if kind == "folder":
        return (path / "inside").read_text() == "kept\n"
    return path.is_symlink() if kind == "link" else stat.S_ISFIFO(path.lstat().st_mode)


@pytest.mark.parametrize("name", ["parquet", "digest", "stat"])
@pytest.mark.parametrize("kind", ["folder", "fifo", "link"])
def test_what_is_not_a_file_in_a_caches_place_is_left_and_the_table_built(
        data, tmp_path, capsys, never_blocks, name, kind):
    first = load(data)
    path = cache_files(data)[name]
    path.unlink()
    outside = tmp_path / "not-iolabs"
    outside.write_text("kept\n")
    what = put(path, kind, outside)
    for _ in range(2):  # never an empty table, and nothing cached in its place
        assert load(data).equals(first)
        assert capsys.readouterr().err == (
            f"iolab: {path}: is {what}, where iolab keeps the tidy table's cache; it is never "
            "followed, opened or replaced (allowed: a regular file, or nothing (iolab then "
            "makes it); remove what is there if it is not yours to keep); the table was built "
            "from the stored runs without the cache\n")
    assert outside.read_text() == "kept\n" and still_there(path, kind)


def test_a_fifo_in_place_of_the_cache_of_verified_files_is_left_and_said_once(
        data, capsys, never_blocks, monkeypatch):
    from iolab.core import integrity

    monkeypatch.setattr(integrity, "_TOLD", set(), raising=False)
    verified = Store(data, "smt_thp", "kvm-2vcpu").verify_cache_path
    verified.parent.mkdir(parents=True)
    os.mkfifo(verified)
    assert len(load(data)) == 4
    assert len(tidy.load(data, registry.get("smt_thp"), "kvm-2vcpu", use_cache=False)) == 4
    told = capsys.readouterr().err
    assert told == (f"iolab: {verified}: is a FIFO (named pipe), where iolab keeps the cache "
                    "of verified files; it is never followed, opened or replaced (allowed: a "
                    "regular file, or nothing (iolab then makes it); remove what is there if it "
                    "is not yours to keep); every file is hashed without it\n")
    assert stat.S_ISFIFO(verified.lstat().st_mode)


@pytest.mark.parametrize("name", ["parquet", "digest", "stat"])
def test_a_cache_file_larger_than_iolab_writes_is_not_read_and_is_replaced(data, capsys, name):
    """Probe 6, B6: a 3 GB sparse file in the cache's place was read whole: MemoryError, an
    internal error on every 'tidy' until it was removed by hand."""
    first = load(data)
    path = cache_files(data)[name]
    os.truncate(path, 3 << 30)  # sparse: no disk, and no memory unless read
    assert load(data).equals(first)
    most = tidy.CACHE_MOST if name == "parquet" else tidy.CACHE_NOTE_MOST
    assert capsys.readouterr().err == (
        f"iolab: {path}: holds {3 << 30:,} bytes (or more), more than iolab ever writes in the "
        f"tidy table's cache; it is not read; the table was built again from the stored runs, "
        "and replaces it\n")
    assert path.stat().st_size < most
    assert load(data).equals(first) and capsys.readouterr().err == ""  # said once


@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, None])
def test_a_cache_of_verified_files_nested_too_deeply_or_too_large_is_ignored(
        data, capsys, monkeypatch, content):
    """Probe 6, C3 and B10: a RecursionError or a MemoryError in 'verify' and a cold 'tidy';
    now the cache is ignored (every file hashed) and replaced, as a damaged one is."""
    from iolab.core import integrity

    monkeypatch.setattr(integrity, "_TOLD", set(), raising=False)
    verified = Store(data, "smt_thp", "kvm-2vcpu").verify_cache_path
    verified.parent.mkdir(parents=True)
    if content is None:
        verified.write_text("")
        os.truncate(verified, 3 << 30)  # sparse: no disk, and no memory unless read
    else:
        verified.write_text(content)
    verified.chmod(0o644)  # as iolab writes it, whatever this host's umask
    assert len(tidy.load(data, registry.get("smt_thp"), "kvm-2vcpu", use_cache=False)) == 4
    told = capsys.readouterr().err
    if content is None:
        assert told == (f"iolab: {verified}: holds {3 << 30:,} bytes (or more), more than iolab "
                        "ever writes in the cache of verified files; it is not read; every file "
                        "is hashed without it\n")
    else:
        assert told == ""
    assert verified.stat().st_size < integrity.CACHE_MOST  # replaced by what was verified
    assert integrity.Checker(verified)._load(), "it holds what was verified now"


def forge(parquet) -> None:
    """iops x10 in the cached table, and the digest's sha256 line made to match (as anyone
    who may write the cache can do)."""
    import hashlib
    import io

    import pandas as pd

    frame = pd.read_parquet(parquet)
    frame["iops"] = frame["iops"] * 10
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    parquet.write_bytes(buffer.getvalue())  # written into: its owner and mode are kept
    digest = parquet.with_suffix(".digest")
    lines = digest.read_text().split("\n")
    lines[1] = hashlib.sha256(buffer.getvalue()).hexdigest()
    digest.write_text("\n".join(lines))


def test_a_cache_others_may_write_is_never_served_and_is_replaced(data, capsys):
    """Probe 9, C2: a cache made under 'umask 000' was 0666; another user rewrote it (iops x10,
    its digest to match) and 'tidy' served it."""
    first = load(data)
    files = cache_files(data)
    for path in files.values():
        path.chmod(0o666)
    forge(files["parquet"])
    assert load(data).equals(first), "a cache others may write was served"
    assert capsys.readouterr().err == (
        f"iolab: the tidy table's cache file {files['parquet']} is writable by others than its "
        "owner (mode 0666); another user's file is never served: the table was built again "
        "from the stored runs, and replaces it\n")
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files.values()} == {oct(0o644)}
    assert load(data).equals(first) and capsys.readouterr().err == ""  # trusted again


def test_a_cache_in_a_folder_others_may_write_is_not_read_and_left(data, capsys):
    """Probe 9, F1: a cache in a shared folder (another user's there) was served as the table:
    whoever may write the folder may put files and a matching digest there."""
    first = load(data)
    files = cache_files(data)
    forge(files["parquet"])
    folder = files["parquet"].parent
    folder.chmod(0o777)  # no sticky bit: anyone may replace the files
    try:
        for _ in range(2):
            assert load(data).equals(first), "a cache others could have written was served"
            assert capsys.readouterr().err == (
                f"iolab: the folder {folder} is writable by every user (mode 0777) without the "
                f"sticky bit: others could have written the tidy table's cache {files['parquet']} "
                "there; the table was built from the stored runs without the cache (make the "
                "folders this user's alone, e.g. chmod go-w, or remove them)\n")
        assert pd_iops(files["parquet"]) == [i * 10 for i in first["iops"]], "left as it was"
    finally:
        folder.chmod(0o755)


def pd_iops(parquet) -> list:
    import pandas as pd

    return list(pd.read_parquet(parquet)["iops"])


def test_a_cache_file_of_another_user_is_not_trusted():
    """Probe 9, F1: the owner half of the rule (a file of another uid cannot be made in a
    test that runs as one user)."""
    from iolab.safefiles import trust_problem

    def st(uid, mode):
        return os.stat_result((stat.S_IFREG | mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))

    other = os.geteuid() + 1
    assert trust_problem(st(other, 0o644)) == (
        f"belongs to uid {other}, not to this user (uid {os.geteuid()}) or root")
    assert trust_problem(st(0, 0o644)) is None and trust_problem(st(os.geteuid(), 0o600)) is None
    assert "mode 0664" in trust_problem(st(os.geteuid(), 0o664))


def test_caches_are_made_with_their_own_modes_whatever_the_umask(data):
    """Probe 9, C2: under 'umask 000' the cache folders were 0777 and the files 0666."""
    old = os.umask(0)
    try:
        load(data)
        tidy.load(data, registry.get("smt_thp"), "kvm-2vcpu", use_cache=False)
    finally:
        os.umask(old)
    verified = Store(data, "smt_thp", "kvm-2vcpu").verify_cache_path
    made = [*cache_files(data).values(), verified]
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in made} == {oct(0o644)}
    folders = {p.parent for p in made} | {data / "cache" / "tidy", data / "cache" / "verified",
                                          data / "cache"}
    assert {oct(stat.S_IMODE(f.stat().st_mode)) for f in folders} == {oct(0o755)}


def test_a_cache_of_verified_files_others_may_write_vouches_for_nothing(data, capsys,
                                                                        monkeypatch):
    """Probe 9, C2 for the cache of verified files: one others may write could say that an
    altered raw file (its size and time kept) was verified."""
    from iolab.core import integrity

    monkeypatch.setattr(integrity, "_TOLD", set(), raising=False)
    load(data)
    verified = Store(data, "smt_thp", "kvm-2vcpu").verify_cache_path
    run = sorted((data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs").iterdir())[0]
    raw = run / "fio.json"
    st = raw.stat()
    raw.write_bytes(raw.read_bytes().replace(b'"iops"', b'"IOPS"', 1))  # same size
    os.utime(raw, ns=(st.st_atime_ns, st.st_mtime_ns))  # and time: the cache vouches for it
    fresh = dict(use_cache=False)
    assert len(tidy.load(data, registry.get("smt_thp"), "kvm-2vcpu", **fresh)) == 4, \
        "the cache this user wrote is trusted (its documented limit)"
    verified.chmod(0o666)
    with pytest.raises(IolabError, match=f"{run.name}.*fio.json differs"):
        tidy.load(data, registry.get("smt_thp"), "kvm-2vcpu", **fresh)
    assert f"the cache of verified files {verified} is writable by others than its owner " \
           "(mode 0666); another user's file is never trusted" in capsys.readouterr().err


def _forge_cache(data) -> Path:
    """The campaign's cached table with its IOPS ten times what the runs say, and the sha256
    in its digest file written again for the forged bytes (as probe 13's P13-07 did)."""
    import hashlib

    import pandas as pd

    path = tidy.cache_path(data, "smt_thp", "kvm-2vcpu")
    frame = pd.read_parquet(path)
    frame["iops"] = frame["iops"] * 10
    frame.to_parquet(path, index=False)
    digest = path.with_suffix(".digest")
    first = digest.read_text().split("\n")[0]
    digest.write_text(f"{first}\n{hashlib.sha256(path.read_bytes()).hexdigest()}\n")
    return path


def test_verify_rederives_a_cached_table_edited_under_its_digest(data, capsys):
    """Probe 13 P13-07: the cached table, edited and its digest's sha256 written again, was
    served as the campaign's table, and 'iolab verify' said nothing (172 intact). verify now
    builds each cached table again from its verified runs, names the value that differs,
    drops the cache and exits 1; the next table is the runs' own."""
    from iolab.cli import main

    truth = load(data)
    _forge_cache(data)
    assert list(load(data)["iops"]) == list(truth["iops"] * 10)  # what a digest cannot see
    run, iops = truth["run.id"].iloc[0], truth["iops"].iloc[0].item()
    assert main(["verify", "smt_thp", "--env", "kvm-2vcpu", "--data", str(data)]) == 1
    out = capsys.readouterr().out
    assert (f"  cache: the cached table {tidy.cache_path(data, 'smt_thp', 'kvm-2vcpu')} is "
            f"not the table its 4 stored runs give (iops of run {run} reads "
            f"{iops * 10!r} where the run gives {iops!r}), "
            "though the sha256 beside it matches") in out
    assert load(data).equals(truth)
    assert main(["verify", "smt_thp", "--env", "kvm-2vcpu", "--data", str(data)]) == 0
    assert "cache:" not in capsys.readouterr().out


def test_a_cached_table_its_runs_give_is_no_disagreement(data):
    """The re-derived table goes through parquet as the cache did: an unedited cache agrees
    (no false alarm from dtypes or NaN), and so does a campaign with no cache."""
    runs, _ = Store(data, "smt_thp", "kvm-2vcpu").scan()
    source = registry.get("smt_thp")
    assert tidy.cache_disagreement(data, source, "kvm-2vcpu", runs) == ""
    load(data)
    assert tidy.cache_disagreement(data, source, "kvm-2vcpu", runs) == ""
