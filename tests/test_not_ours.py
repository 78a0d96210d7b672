"""Nothing that is not ours is written or followed (iolab.safefiles, iolab.lockfile).

Every file iolab keeps at a fixed name (the host and data locks, the scratch registry and its
lock, stop requests, the knob journal, the book's build record) gets a symbolic link to a
file of the user's, a link to nowhere, a FIFO or a device node planted at its name: the
command refuses in one line naming the path, the file the link points to is untouched (and
a link to nowhere makes nothing), and a FIFO never blocks a read. State files and folders
have modes 0600 and 0700 under ``umask 000``; lock files 0644 (another user's iolab must be
able to lock the host lock). A lock file that is not ours is never truncated. An output a
user names (``tidy -o``, ``notebook -o``, ``--glue-snapshot``) that is not a regular file is
refused; ``-`` is standard output.

Device nodes need root (CAP_MKNOD) to make; those cases skip, saying why, without it.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from iolab import paths
from iolab import lockfile, safefiles
from iolab.core import locks
from iolab.errors import IolabError
from iolab.execution import stop
from iolab.host import scratch
from iolab.host.journal import KnobSession, restore_from_journal
from iolab.paths import REPO_ROOT
from iolab.report import book, freshness
from test_reliability import cli, copy_committed

ROOT = os.geteuid() == 0
KINDS = ["link", "dangling link", "fifo", "device"]


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A lock folder, a state folder, a data folder and a build record of this test's own."""
    (tmp_path / "locks").mkdir(mode=0o700)
    (tmp_path / "state").mkdir(mode=0o700)
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("IOLAB_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(paths, "BOOK_BUILD_RECORD", tmp_path / "build" / ".iolab-fresh.json")
    (tmp_path / "build").mkdir()
    return tmp_path


def registry(tmp: Path) -> scratch.Registry:
    return scratch.Registry(tmp / "state" / "scratch.json")


def _session(tmp: Path) -> None:
    with KnobSession({}, tmp / "data" / ".knob-journal.json"):
        pass


# (the fixed name, what writes there) for every state file iolab keeps
WRITERS: dict[str, tuple[Callable[[Path], Path], Callable[[Path], Any]]] = {
    "host lock": (lambda tmp: tmp / "locks" / locks.HOST_LOCK,
                  lambda tmp: locks.host_lock(None).acquire().release()),
    "data lock": (lambda tmp: locks.data_lock_path(tmp / "data"),
                  lambda tmp: locks.data_lock(tmp / "data").acquire().release()),
    "scratch registry": (lambda tmp: tmp / "state" / "scratch.json",
                         lambda tmp: registry(tmp).tidy()),
    "scratch registry's lock": (lambda tmp: tmp / "state" / ".scratch.json.lock",
                                lambda tmp: registry(tmp).tidy()),
    "stop request": (lambda tmp: stop.request_path(tmp / "data"),
                     lambda tmp: stop.request(tmp / "data", "asked by a test")),
    "knob journal": (lambda tmp: tmp / "data" / ".knob-journal.json", _session),
    "build record": (lambda tmp: paths.BOOK_BUILD_RECORD,
                     lambda tmp: freshness.remember("page", "0" * 64)),
}


def plant(path: Path, kind: str, victim: Path) -> None:
    """Put a ``kind`` at ``path``: a link to ``victim``, a link to a file that does not exist
    (beside the victim), a FIFO, or /dev/null's device node."""
    if kind == "link":
        path.symlink_to(victim)
    elif kind == "dangling link":
        path.symlink_to(victim.with_name("made-through-the-link"))
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        if not ROOT:
            pytest.skip("making a device node needs root (CAP_MKNOD)")
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))


def ends(fn: Callable[[], Any], fifo: Path | None = None) -> dict[str, Any]:
    """Run ``fn`` in a thread and assert it ends: a read of a FIFO with no writer would block
    for ever (then the FIFO is opened here, so that the thread, and the test, end). Returns
    {"value": ...} or {"error": exc}."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(30)
    blocked = thread.is_alive()
    if blocked and fifo is not None:
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer: the blocked open returns
        os.close(fd)
        thread.join(30)
    assert not blocked, f"blocked on {fifo}"
    return result


def as_it_was(path: Path, kind: str, victim: Path) -> None:
    st = os.lstat(path)
    expected = {"link": stat.S_ISLNK, "dangling link": stat.S_ISLNK, "fifo": stat.S_ISFIFO,
                "device": stat.S_ISCHR}[kind]
    assert expected(st.st_mode), f"{path} was replaced"
    assert victim.read_text() == "the user's own file\n", "the file behind the link changed"
    assert oct(victim.stat().st_mode & 0o777) == oct(0o600)
    assert not victim.with_name("made-through-the-link").exists(), "a file made through a link"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(WRITERS))
def test_what_is_planted_at_a_fixed_name_is_refused_and_left_as_it_was(places, name, kind):
    where, write = WRITERS[name]
    path = where(places)
    victim = places / "victim"
    victim.write_text("the user's own file\n")
    victim.chmod(0o600)
    plant(path, kind, victim)
    result = ends(lambda: write(places), path if kind == "fifo" else None)
    error = result.get("error")
    assert isinstance(error, IolabError), f"not refused: {result}"
    assert str(path) in str(error) and "\n" not in str(error)
    as_it_was(path, kind, victim)


# what reads a state file: a FIFO in its place is refused (or no request), never a read that
# blocks
READERS: dict[str, tuple[Callable[[Path], Path], Callable[[Path], Any]]] = {
    "scratch registry (plan)": (lambda tmp: tmp / "state" / "scratch.json",
                                lambda tmp: registry(tmp).entry(tmp / "t.dat")),
    "scratch registry (clean)": (lambda tmp: tmp / "state" / "scratch.json",
                                 lambda tmp: scratch.clean(registry(tmp), dry_run=True)),
    "stop request": (lambda tmp: stop.request_path(tmp / "data"),
                     lambda tmp: stop.read(tmp / "data")),
    "knob journal (restore)": (lambda tmp: tmp / "data" / ".knob-journal.json",
                               lambda tmp: restore_from_journal(
                                   tmp / "data" / ".knob-journal.json", {})),
    "build record": (lambda tmp: paths.BOOK_BUILD_RECORD,
                     lambda tmp: freshness.is_fresh("page", "0" * 64, tmp / "build")),
    "lock holder (status)": (lambda tmp: tmp / "locks" / locks.HOST_LOCK,
                             lambda tmp: locks.holder(tmp / "locks" / locks.HOST_LOCK)),
}


@pytest.mark.parametrize("name", list(READERS))
def test_a_fifo_in_place_of_a_state_file_is_refused_without_blocking(places, name):
    where, read = READERS[name]
    path = where(places)
    os.mkfifo(path)
    result = ends(lambda: read(places), path)
    if "error" in result:
        assert isinstance(result["error"], IolabError), result
        assert str(path) in str(result["error"])
    else:  # a stop request or a lock holder that is not one: nobody asked, nobody holds
        assert result["value"] is None
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


def test_clean_with_a_fifo_for_a_registry_says_so_in_one_line(places):
    path = places / "state" / f"scratch-{scratch._machine()}.json"
    os.mkfifo(path)
    result = ends(lambda: cli(["clean", "--dry-run"]), path)
    code, out, err = result["value"]
    assert code == 2 and f"{path}: is a FIFO (named pipe)" in err and len(err.splitlines()) == 1


# -- modes, whatever the umask ------------------------------------------------------------

@pytest.fixture
def umask_000():
    old = os.umask(0)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_state_files_are_0600_and_state_folders_0700_under_umask_000(tmp_path, monkeypatch,
                                                                    umask_000):
    monkeypatch.setenv("IOLAB_LOCK_DIR", str(tmp_path / "new" / "locks"))
    monkeypatch.setattr(paths, "BOOK_BUILD_RECORD", tmp_path / "build" / ".iolab-fresh.json")
    (tmp_path / "build").mkdir()
    data = tmp_path / "data"
    data.mkdir(0o755)  # a knob journal is kept only where no other user may write
    data.chmod(0o755)
    reg = scratch.Registry(tmp_path / "home" / "state" / "iolab" / "scratch.json")
    reg.tidy()
    stop.request(data, "asked by a test")
    freshness.remember("page", "0" * 64)
    journal = data / ".knob-journal.json"
    with KnobSession({}, journal):
        assert mode(journal) == 0o600
    host, dlock = locks.host_lock(data), locks.data_lock(data)
    with host, dlock:
        assert mode(dlock.path) == 0o644
    assert {p.name: oct(mode(p)) for p in (reg.path, reg.path.with_name(".scratch.json.lock"),
                                           stop.request_path(data), paths.BOOK_BUILD_RECORD)} == {
        p: oct(0o600) for p in ("scratch.json", ".scratch.json.lock",
                                stop.request_path(data).name, ".iolab-fresh.json")}
    # lock files are readable by every user: another user's iolab locks the host lock too
    assert mode(host.path) == 0o644
    # every folder iolab made for its state, the parents it made included
    for folder in (tmp_path / "home", tmp_path / "home" / "state",
                   tmp_path / "home" / "state" / "iolab", tmp_path / "new",
                   tmp_path / "new" / "locks"):
        assert mode(folder) == 0o700, folder


def test_a_stored_file_keeps_the_umask_a_state_file_does_not(tmp_path, umask_000):
    from iolab.durable import write_json_atomic

    write_json_atomic(tmp_path / "run.json", {"a": 1})
    write_json_atomic(tmp_path / "state.json", {"a": 1}, mode=safefiles.STATE_MODE)
    assert (mode(tmp_path / "run.json"), mode(tmp_path / "state.json")) == (0o666, 0o600)


# -- the lock folder ----------------------------------------------------------------------

@pytest.mark.parametrize("folder_mode, allowed", [(0o700, True), (0o1777, True), (0o777, False),
                                                  (0o757, False)])
def test_a_lock_folder_others_can_write_into_is_refused_unless_sticky(tmp_path, monkeypatch,
                                                                      folder_mode, allowed):
    folder = tmp_path / "locks"
    folder.mkdir()
    folder.chmod(folder_mode)
    monkeypatch.setenv("IOLAB_LOCK_DIR", str(folder))
    if allowed:
        locks.host_lock(None).acquire().release()
        return
    with pytest.raises(safefiles.NotOurs, match=f"{folder}: is writable by every user"):
        locks.host_lock(None)
    assert list(folder.iterdir()) == []


@pytest.mark.skipif(not ROOT, reason="another user's folder and link need root to make")
@pytest.mark.parametrize("planted", ["folder", "link"])
def test_a_lock_folder_another_user_made_is_refused(tmp_path, monkeypatch, planted):
    """/tmp/iolab-locks.<uid> at a fixed name: another user may make it (or a link by that
    name) before this user does."""
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    folder = tmp_path / "iolab-locks.0"
    if planted == "folder":
        folder.mkdir(mode=0o700)
    else:
        folder.symlink_to(mine)
    os.chown(folder, 65534, 65534, follow_symlinks=False)
    monkeypatch.setenv("IOLAB_LOCK_DIR", str(folder))
    with pytest.raises(safefiles.NotOurs, match=str(folder)):
        locks.data_lock(tmp_path / "data")
    assert list(mine.iterdir()) == []


@pytest.mark.parametrize("through", ["folder", "link", "IOLAB_DATA"])
def test_a_data_directory_others_may_redirect_is_never_written(tmp_path, monkeypatch, through):
    """Probe 11, F1: 'import-cijoe --data' through another user's link to that user's 0777
    folder made the host record, the runs and the campaign log there: that user may rename
    or replace the folder between two commands. (A link another user made needs root: a
    folder every user may write into, or this user's link to one, stands for it here.)"""
    from test_import_cijoe import make_cijoe

    source = make_cijoe(tmp_path / "cijoe")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone may put a link in place of what is there
    folder = shared if through == "folder" else tmp_path / "link"
    if through != "folder":
        folder.symlink_to(shared)
    data = folder / "d"
    argv = ["import-cijoe", str(source), "--experiment", "aisio-mini", "--env", "lab",
            "--no-progress"]
    if through == "IOLAB_DATA":
        monkeypatch.setenv("IOLAB_DATA", str(data))
    else:
        argv += ["--data", str(data)]
    try:
        code, out_text, err = cli(argv)
        assert code == 2 and len(err.splitlines()) == 1, err
        assert (f"{shared}, a folder of its path, is writable by every user (mode 0777) "
                "without the sticky bit") in err
        assert "a data directory is never written where another user decides" in err
        assert list(shared.iterdir()) == [], "the data directory was made"
    finally:
        shared.chmod(0o755)


@pytest.mark.skipif(not ROOT, reason="another user's link needs root to make")
def test_a_data_directory_through_another_users_link_is_never_written(tmp_path):
    """Probe 11, F1 as found: the link itself is another user's (its target this user's)."""
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    link = tmp_path / "nlink"
    link.symlink_to(mine)
    os.chown(link, 65534, 65534, follow_symlinks=False)
    code, _, err = cli(["verify", "--quarantine", "--data", str(link / "d")])
    assert code == 2 and f"{link}, a folder of its path, is a symbolic link made by uid 65534" \
        in err and len(err.splitlines()) == 1, err
    from iolab.execution.campaign import Campaign

    campaign = Campaign("smt_thp", "kvm-2vcpu", data_dir=link / "d")  # reading is allowed
    with pytest.raises(safefiles.NotOurs, match="a symbolic link made by uid 65534"):
        campaign.run(limit=0)  # a run writes: refused before the runner starts
    assert list(mine.iterdir()) == []


# -- whose lock file the holder is written into -------------------------------------------

@pytest.mark.skipif(not ROOT, reason="a file of another user's needs root to make")
def test_another_users_lock_file_is_locked_but_never_written(places):
    path = places / "locks" / locks.HOST_LOCK
    path.write_text("")
    os.chown(path, 65534, 65534)
    with locks.host_lock(None) as lock:
        assert lock.messages == [] and path.read_text() == ""
    assert path.read_text() == "" and path.stat().st_uid == 65534


def test_a_lock_file_holding_something_else_is_refused_never_truncated(places):
    path = places / "locks" / locks.HOST_LOCK
    path.write_text("a note the admin keeps here\n")
    with pytest.raises(safefiles.NotOurs, match=f"{path}: holds something other than an "
                                                "iolab lock's holder record"):
        locks.host_lock(None).acquire()
    assert path.read_text() == "a note the admin keeps here\n"


@pytest.mark.parametrize("first", [" " * 65536, '{"pid": 1}' + " " * 65526])
def test_a_lock_file_is_judged_whole_and_one_with_data_after_64_kib_never_truncated(places,
                                                                                  first):
    """Probe 6, A3: only the first 64 KiB were read; all blanks (or a holder's record) there
    made the file ours, and the data after them was truncated away."""
    path = places / "locks" / locks.HOST_LOCK
    content = first + "PRECIOUS USER DATA\n"
    path.write_text(content)
    with pytest.raises(safefiles.NotOurs, match=f"{path}: holds something other than an "
                                                "iolab lock's holder record"):
        locks.host_lock(None).acquire()
    assert path.read_text() == content


@pytest.mark.parametrize("owner", ["mine", "another user's"])
def test_a_lock_file_nested_too_deeply_is_no_crash(places, owner):
    """Probe 6, C2: 65,536 '[' at the host lock's name, which any user may put in /run/lock,
    was a RecursionError in every command that takes the host lock."""
    if owner != "mine" and not ROOT:
        pytest.skip("a file of another user's needs root to make")
    path = places / "locks" / locks.HOST_LOCK
    path.write_text("[" * 65536)
    if owner == "mine":
        with pytest.raises(safefiles.NotOurs, match="holds something other than an iolab "
                                                    "lock's holder record"):
            locks.host_lock(None).acquire()
    else:
        os.chown(path, 65534, 65534)
        with locks.host_lock(None) as lock:  # locked as it is, its holder unnamed
            assert lock.messages == []
            assert lockfile.holder(path) == {"pid": None}  # status: held, by nobody named
    assert path.read_text() == "[" * 65536


def test_a_huge_command_line_still_fits_the_holder_record(places, monkeypatch):
    """A record over the bound would be refused by the next iolab as not a lock's."""
    monkeypatch.setattr("sys.argv", ["iolab", "plan", *["--set=x=1"] * 20_000])
    lock = locks.host_lock(None)
    with lock:
        info = json.loads(lock.path.read_text())
        assert len(lock.path.read_bytes()) <= lockfile.RECORD_MOST
        assert info["argv"][0].startswith("iolab plan --set=x=1") and info["argv"][0][-1] == "…"
    with locks.host_lock(None):  # the next one takes it as iolab's
        pass


def test_a_state_file_larger_than_its_role_holds_is_refused_unread(tmp_path):
    """Probe 6, B4-B8, B10: read_regular read a file of any size whole (a 3 GB sparse file:
    MemoryError, an internal error); now each reader states its bound."""
    path = tmp_path / "state.json"
    with open(path, "wb") as fh:
        fh.truncate(3 << 30)  # sparse: no disk, and no memory unless read
    with pytest.raises(safefiles.TooLarge) as info:
        safefiles.read_regular(path, "a test's state", most=1 << 20)
    assert str(info.value) == (f"{path}: holds {3 << 30:,} bytes (or more), more than iolab "
                               "ever writes in a test's state; it is not read (allowed: at most "
                               "1,048,576 bytes; move the file away if it is not iolab's)")
    path.write_bytes(b"x" * (1 << 20))
    assert safefiles.read_regular(path, "a test's state", most=1 << 20) == b"x" * (1 << 20)


def test_a_read_takes_memory_for_the_file_not_for_its_bound(tmp_path):
    """Probe 7, M1: read_regular read with fh.read(most + 1), which reserves the whole bound
    before it reads a byte (1 GiB for a 58 kB tidy cache): under ulimit -v 2000000 'iolab
    verify --fast' and 'iolab compare' ended as internal errors (MemoryError). A process
    limited to 1 GiB of address space reads a 2-byte file under a bound of 4 GiB."""
    path = tmp_path / "small.json"
    path.write_bytes(b"{}")
    code = ("import resource, sys; from pathlib import Path; from iolab import safefiles; "
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "print(safefiles.read_regular(Path(sys.argv[1]), 'a test', most=4 << 30))")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "b'{}'\n", "")


def test_a_file_grown_past_its_size_is_read_to_one_byte_past_the_bound():
    """read_bounded reads as the fstat's size says, then on in blocks: a file that grew (or
    a size of 0, as /proc gives) is still read whole, or to one byte past the bound."""
    assert safefiles.read_bounded(io.BytesIO(b"x" * 100), 10, 50) == b"x" * 51
    assert safefiles.read_bounded(io.BytesIO(b"abc"), 0, 50) == b"abc"
    assert safefiles.read_bounded(io.BytesIO(b"abc"), 3, 50) == b"abc"
    assert safefiles.read_bounded(io.BytesIO(b"ab"), 3, 50) == b"ab"  # shrunk since


@pytest.mark.skipif(not ROOT, reason="a file of another user's needs root to make")
def test_a_state_file_of_another_users_is_refused_where_its_reader_asks(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("{}")
    os.chown(path, 65534, 65534)
    assert safefiles.read_regular(path, "a test's state") == b"{}"
    with pytest.raises(safefiles.NotOurs, match=f"{path}: belongs to uid 65534, not to this "
                                                "user \\(uid 0\\) or root"):
        safefiles.read_regular(path, "a test's state", own=True)


def test_a_lock_file_with_other_names_is_refused(places):
    victim = places / "victim"
    victim.write_text("")
    path = places / "locks" / locks.HOST_LOCK
    os.link(victim, path)
    with pytest.raises(safefiles.NotOurs, match=f"{path}: has 2 names"):
        locks.host_lock(None).acquire()
    assert victim.read_text() == ""


def test_our_own_lock_file_names_its_holder_and_is_emptied_on_release(places):
    lock = locks.host_lock(places / "data")
    with lock:
        info = json.loads(lock.path.read_text())
        assert info["pid"] == os.getpid() and info["data_dir"] == str(places / "data")
    assert lock.path.read_text() == ""


# -- outputs a user names -------------------------------------------------------------------

@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    return copy_committed(tmp_path_factory.mktemp("stored") / "data", 2)


TIDY = ["tidy", "smt_thp", "--env", "kvm-2vcpu"]


@pytest.mark.parametrize("kind", [*KINDS, "folder"])
def test_an_output_that_is_not_a_regular_file_is_refused(stored, tmp_path, kind):
    out = tmp_path / "table.csv"
    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    victim.chmod(0o600)
    if kind == "folder":
        out.mkdir()
    else:
        plant(out, kind, victim)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out_text, err = ends(lambda: cli([*TIDY, "--data", str(stored), "-o", str(out)]),
                               out if kind == "fifo" else None)["value"]
    assert code == 2 and out_text == "" and len(err.splitlines()) == 1, err
    assert f"-o: {out} is " in err and "or - for standard output" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "a temporary file was left"
    if kind != "folder":
        as_it_was(out, kind, victim)


@pytest.mark.parametrize("through", ["folder", "link"])
def test_an_output_in_a_folder_others_may_write_into_is_refused(stored, tmp_path, through):
    """Probe 9, F4: 'tidy -o' wrote through another user's link to that user's folder: whoever
    may write a folder of the path decides where the output (and its temporary file) lands.
    (A link another user made cannot be made in a test that runs as one user: a folder
    every user may write into, or this user's link to one, stands for it.)"""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone may put a link in place of what is there
    folder = shared if through == "folder" else tmp_path / "link"
    if through == "link":
        folder.symlink_to(shared)
    out = folder / "table.csv"
    try:
        code, out_text, err = cli([*TIDY, "--data", str(stored), "-o", str(out)])
        assert code == 2 and out_text == "" and len(err.splitlines()) == 1, err
        assert (f"-o: {out}: {folder}, a folder of its path, is writable by every user (mode "
                "0777) without the sticky bit") in err
        assert "an output is never written where another user decides where it lands" in err
        assert list(shared.iterdir()) == [], "written, or a temporary file left"
        with pytest.raises(safefiles.NotOurs, match="a folder of its path"):
            safefiles.replace_output(out, lambda tmp: tmp.write_text("x"), "-o")
        assert list(shared.iterdir()) == []
    finally:
        shared.chmod(0o755)


def test_an_output_over_a_regular_file_replaces_it_whole_and_dash_is_standard_output(
        stored, tmp_path):
    out = tmp_path / "table.csv"
    out.write_text("an older table\n")
    code, _, err = cli([*TIDY, "--data", str(stored), "-o", str(out)])
    assert code == 0 and out.read_text().startswith("engine,") and "wrote 2 rows" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]
    code, text, _ = cli([*TIDY, "--data", str(stored), "-o", "-"])
    assert code == 0 and text == out.read_text()
    assert not Path("-").exists()


@pytest.mark.skipif(not ROOT, reason="a file of another user's needs root to make")
def test_an_output_over_another_users_file_is_refused(stored, tmp_path):
    """Probe 13, P13-02: 'tidy -o' over another user's regular file (in a sticky folder such
    as /tmp, where anyone may put one) renamed this user's table onto it: the file was
    replaced, and then belonged to root."""
    out = tmp_path / "other.csv"
    out.write_text("someone else's\n")
    os.chown(out, 65534, 65534)
    code, out_text, err = cli([*TIDY, "--data", str(stored), "-o", str(out)])
    assert code == 2 and out_text == "" and len(err.splitlines()) == 1, err
    assert (f"-o: {out} belongs to uid 65534, not to this user (uid 0); an output never "
            "replaces another user's file") in err and "a regular file of this user's" in err
    assert out.read_text() == "someone else's\n" and out.stat().st_uid == 65534
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.csv"], "a temporary file left"
    with pytest.raises(safefiles.NotOurs, match="belongs to uid 65534"):
        safefiles.replace_output(out, lambda tmp: tmp.write_text("x"), "--glue-snapshot")
    assert out.read_text() == "someone else's\n"


def test_a_notebook_output_that_is_a_link_is_refused_before_anything_runs(tmp_path,
                                                                          monkeypatch):
    ran = []
    monkeypatch.setattr("iolab.report.book.execute",
                        lambda src, dst, params, **_: ran.append(dst) or dst.write_text("{}"))
    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    victim.chmod(0o600)
    out = tmp_path / "out.ipynb"
    out.symlink_to(victim)
    code, _, err = cli(["notebook", "smt_thp", "--env", "kvm-2vcpu", "-o", str(out)])
    assert code == 2 and f"-o: {out} is a symbolic link" in err and ran == []
    as_it_was(out, "link", victim)
    code, _, err = cli(["notebook", "smt_thp", "--env", "kvm-2vcpu", "-o", "-"])
    assert code == 2 and "a notebook is written to a file" in err and ran == []


def test_an_executed_notebook_is_renamed_onto_its_output(tmp_path, monkeypatch):
    """papermill writes into a temporary file (whose name holds nothing it would take for a
    parameter), renamed onto the output when it is done."""
    seen = []

    def execute(src, dst, params, **_):
        seen.append(dst)
        assert dst.parent == tmp_path and dst.name.startswith(".iolab-") and "{" not in dst.name
        dst.write_text('{"cells": []}')

    monkeypatch.setattr("iolab.report.book.execute", execute)
    out = tmp_path / "smt_thp-{name}.ipynb"
    code, _, err = cli(["notebook", "smt_thp", "--env", "kvm-2vcpu", "-o", str(out)])
    assert code == 0, err
    assert out.read_text() == '{"cells": []}' and not seen[0].exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_a_glue_snapshot_over_a_link_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(book, "glued_values", lambda: {"page": {"key": "1.0"}})
    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    victim.chmod(0o600)
    out = tmp_path / "glued.json"
    out.symlink_to(victim)
    with pytest.raises(safefiles.NotOurs, match=f"--glue-snapshot: {out} is a symbolic link"):
        book.write_glue_snapshot(out)
    as_it_was(out, "link", victim)
    out.unlink()
    book.write_glue_snapshot(out)
    assert json.loads(out.read_text()) == {"page": {"key": "1.0"}}


def test_a_temporary_file_is_never_one_someone_else_put_there(tmp_path):
    """The name of a temporary file is random and it is made exclusively: a link planted at
    a name iolab would once have used (``.<name>.<pid>.tmp``) is never written through."""
    from iolab.durable import write_json_atomic

    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    planted = tmp_path / f".out.json.{os.getpid()}.tmp"
    planted.symlink_to(victim)
    write_json_atomic(tmp_path / "out.json", {"a": 1}, mode=safefiles.STATE_MODE)
    assert json.loads((tmp_path / "out.json").read_text()) == {"a": 1}
    assert victim.read_text() == "the user's own file\n" and planted.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == [planted.name, "out.json", "victim"]


def test_the_registry_lock_is_a_lock_file_that_names_its_holder(tmp_path):
    reg = scratch.Registry(tmp_path / "state" / "scratch.json")
    lock_path = reg.path.with_name(".scratch.json.lock")
    seen = []
    real_load = reg._load

    def load():
        seen.append(json.loads(lock_path.read_text())["pid"])
        return real_load()

    reg._load = load
    reg.tidy()
    assert seen == [os.getpid()] and lock_path.read_text() == ""


# -- what a data directory holds ------------------------------------------------------------
# The campaign log, the host record and each run's run.json and raw files: a link there is
# not followed, a FIFO never blocks a command (run, status, tidy, verify), a device is never
# opened. The log and the host record are refused in one line; a run whose run.json or raw
# file is one of them is corrupt, and listed as corrupt runs are.

CAMPAIGN = ("raw", "smt_thp", "kvm-2vcpu")


def _campaign(tmp: Path) -> tuple[Path, Path]:
    """(a data directory with two committed runs, its campaign's folder)."""
    data = copy_committed(tmp / "data", 2)
    return data, data.joinpath(*CAMPAIGN)


@pytest.mark.parametrize("kind", KINDS)
def test_a_campaign_log_that_is_not_a_regular_file_is_never_appended_to(tmp_path, kind):
    from iolab.core.store import LOG, Store

    store = Store(tmp_path / "data", "smt_thp", "kvm-2vcpu")
    store.root.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    victim.chmod(0o600)
    path = store.root / LOG
    plant(path, kind, victim)
    line = {"event": "quarantined", "run": "r", "reason": "a test"}
    result = ends(lambda: store.log(line), path if kind == "fifo" else None)
    error = result.get("error")
    assert isinstance(error, safefiles.NotOurs), f"not refused: {result}"
    assert f"{path}: is " in str(error) and "the campaign log" in str(error)
    assert "\n" not in str(error)
    as_it_was(path, kind, victim)


def test_a_campaign_log_is_appended_to_and_made_as_the_umask_says(tmp_path):
    from iolab.core.store import LOG, Store

    store = Store(tmp_path / "data", "smt_thp", "kvm-2vcpu")
    old = os.umask(0o022)
    try:
        store.log({"event": "quarantined", "run": "a", "reason": "first"})
        store.log({"event": "quarantined", "run": "b", "reason": "second"})
    finally:
        os.umask(old)
    assert [r["run"] for r in store.log_lines("quarantined")] == ["a", "b"]
    assert mode(store.root / LOG) == 0o644  # a stored file, readable as the others


# (what is planted, the command, what it must say) for each read-only command and each file
# it reads: one line naming the file, or the run listed as corrupt
DATA_READERS = {
    "log (verify)": ("campaign-log.jsonl", ["verify"], 1, "campaign-log.jsonl: is a FIFO"),
    "host record (status)": ("host.json", ["status"], 0, "host.json: is a FIFO"),
    "run.json (tidy)": ("runs/{run}/run.json", ["tidy", "smt_thp", "--env", "kvm-2vcpu"], 2,
                        "run.json cannot be read (is a FIFO"),
    "run.json (verify)": ("runs/{run}/run.json", ["verify"], 1,
                          "run.json cannot be read (is a FIFO"),
    "raw file (verify)": ("runs/{run}/stderr", ["verify"], 1,
                          "stderr is a FIFO (named pipe), not the regular file"),
}


@pytest.mark.parametrize("name", list(DATA_READERS))
def test_a_fifo_in_a_data_directory_never_blocks_a_read_only_command(tmp_path, name):
    planted, argv, code, message = DATA_READERS[name]
    data, campaign = _campaign(tmp_path)
    run = sorted((campaign / "runs").iterdir())[0].name
    path = campaign / planted.format(run=run)
    if path.name == "stderr":  # a raw file the manifest records as empty: the size agrees
        assert json.loads((path.parent / "run.json").read_text())["files"]["stderr"][
            "bytes"] == 0
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    result = ends(lambda: cli([*argv, "--data", str(data)]), path)
    got, out, err = result["value"]
    assert got == code and message in out + err, (out, err)
    if "run.json" in planted or "stderr" in planted:
        # listed as corrupt runs are
        assert re.search(rf"\n  (corrupt: )?{re.escape(str(path.parent))}: ", out + err)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_host_record_that_is_not_a_regular_file_is_refused_in_one_line(tmp_path, kind):
    from iolab.core.store import Store

    data, campaign = _campaign(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text(json.dumps({"hostname": "not this campaign's"}))
    (campaign / "host.json").unlink()
    plant(campaign / "host.json", kind, victim)
    store = Store(data, "smt_thp", "kvm-2vcpu")
    result = ends(store.read_host, campaign / "host.json" if kind == "fifo" else None)
    error = result.get("error")
    assert isinstance(error, safefiles.NotOurs), result
    assert str(error).startswith(f"{campaign / 'host.json'}: is ") and "\n" not in str(error)


def test_a_campaign_log_with_another_name_is_never_appended_to(tmp_path):
    """A hard link at the log's name would take the campaign's events into the file it shares
    its inode with, outside the data directory."""
    from iolab.core.store import LOG, Store

    store = Store(tmp_path / "data", "smt_thp", "kvm-2vcpu")
    store.root.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    os.link(victim, store.root / LOG)
    with pytest.raises(safefiles.NotOurs, match="has 2 names"):
        store.log({"event": "quarantined", "run": "r", "reason": "a test"})
    assert victim.read_text() == "the user's own file\n"


def test_a_run_folder_that_is_a_link_is_corrupt_never_followed(tmp_path):
    """Every file of a run is refused when it is a link; a link in place of the whole run's
    folder had been followed, and what it pointed to counted as a stored run."""
    import shutil

    from iolab.core.store import Store

    source = Path(os.environ["IOLAB_DATA"]) / "raw" / "irq_affinity" / "xeon-2vcpu-v657"
    if not source.is_dir():
        pytest.skip("no committed irq_affinity/xeon-2vcpu-v657 campaign")
    data = tmp_path / "data"
    shutil.copytree(source, data / "raw" / "irq_affinity" / "xeon-2vcpu-v657")
    store = Store(data, "irq_affinity", "xeon-2vcpu-v657")
    first = store.run_folders()[0]
    outside = tmp_path / "outside"
    first.rename(outside)
    first.symlink_to(outside)
    runs, corrupt = store.scan()
    assert first.name not in {r.run_id for r in runs} and len(runs) == 17
    assert [c.path.name for c in corrupt] == [first.name]
    assert "is a symbolic link to" in corrupt[0].reason and "never followed" in corrupt[0].reason


def test_the_schema_check_never_reads_through_a_linked_run_folder(tmp_path):
    import shutil

    from iolab.schemas import verify as sv

    source = Path(os.environ["IOLAB_DATA"]) / "raw" / "irq_affinity" / "xeon-2vcpu-v657"
    if not source.is_dir():
        pytest.skip("no committed irq_affinity/xeon-2vcpu-v657 campaign")
    data = tmp_path / "data"
    env = data / "raw" / "irq_affinity" / "xeon-2vcpu-v657"
    shutil.copytree(source, env)
    first = sorted((env / "runs").iterdir())[0]
    outside = tmp_path / "outside"
    first.rename(outside)
    first.symlink_to(outside)
    files = [f for f, _ in sv.raw_files(data)]
    assert first / "run.json" not in files and len(files) == 2 + 17


@pytest.mark.parametrize("change, key", [({"tools": {"fio": "fio-3.33"}}, "tools.fio"),
                                         ({"tools": ["fio"]}, "tools"), ({"cpu": "x"}, "cpu")])
def test_a_host_record_of_another_shape_is_named_in_one_line(tmp_path, change, key):
    """A tool's entry as a string had been an internal error where the fingerprint reads it."""
    import json as json_

    from iolab.core.store import Store
    from iolab.errors import InputError

    store = Store(tmp_path / "data", "smt_thp", "kvm-2vcpu")
    store.root.mkdir(parents=True)
    store.host_path.write_text(json_.dumps({"hostname": "vm", "cpu": {}, "tools": {},
                                            **change}))
    with pytest.raises(InputError) as info:
        store.read_host()
    assert info.value.key == key and "\n" not in str(info.value)


@pytest.mark.parametrize("folder", ["failed", "partial", "runs"])
def test_a_store_folder_that_is_a_link_is_never_written_through(tmp_path, folder):
    """failed/ as a link had taken a failed run's record outside the data directory."""
    from iolab.core.store import Store

    store = Store(tmp_path / "data", "smt_thp", "kvm-2vcpu")
    store.root.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (store.root / folder).symlink_to(elsewhere)
    with pytest.raises(safefiles.NotOurs, match="is a symbolic link to .*it is never followed"):
        safefiles.own_folder(store.root / folder, "a test")
    assert list(elsewhere.iterdir()) == []


def test_a_cache_folder_that_is_a_link_is_left_and_the_table_built(tmp_path):
    from iolab.core import tidy

    data = tmp_path / "data"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data.mkdir()
    (data / "cache").symlink_to(elsewhere)
    import pandas as pd

    cache = tidy._Cache(tidy.cache_path(data, "smt_thp", "kvm-2vcpu"))
    assert cache.write(pd.DataFrame({"a": [1]}), "digest") is False
    cache.write_stamp("stamp")
    assert list(elsewhere.rglob("*")) == []


# -- stored files larger, or nested deeper, than iolab writes ---------------------------------
# Probe 6, B7 and B8: a 3 GB sparse host.json or run.json was read whole (MemoryError: an
# internal error of 'status' and 'verify', which then showed nothing); 100,000 nested brackets
# were a RecursionError. Each is now that file's problem, in one line.

OVERSIZED = {
    "host record (status)": ("host.json", ["status"], 0, "kvm-2vcpu: cannot be read: {path}: "
                             "holds {size:,} bytes (or more), more than iolab ever writes in "
                             "the campaign's host record; it is not read"),
    "run.json (status)": ("runs/{run}/run.json", ["status"], 0, "  corrupt: {path.parent}: "
                          "run.json cannot be read (holds {size:,} bytes (or more), more than "
                          "iolab ever writes in a run's manifest; it is not read)"),
    "run.json (verify --fast)": ("runs/{run}/run.json", ["verify", "--fast"], 1,
                                 "run.json cannot be read (holds {size:,} bytes"),
    "run.json (verify)": ("runs/{run}/run.json", ["verify"], 1, "{path}: holds {size:,} bytes "
                          "(or more), more than iolab ever writes in a stored file; it is not "
                          "read"),
    "log (verify)": ("campaign-log.jsonl", ["verify"], 1, "{path}: holds {size:,} bytes (or "
                     "more), more than iolab ever writes in a stored file; it is not read"),
}


@pytest.mark.parametrize("name", list(OVERSIZED))
def test_a_stored_file_larger_than_iolab_writes_is_named_unread(tmp_path, name):
    from iolab.core import manifest, store
    from iolab.host import record

    planted, argv, code, message = OVERSIZED[name]
    data, campaign = _campaign(tmp_path)
    run = sorted((campaign / "runs").iterdir())[0].name
    path = campaign / planted.format(run=run)
    most = {"host.json": record.HOST_MOST, "run.json": manifest.MANIFEST_MOST,
            "campaign-log.jsonl": store.LOG_MOST}[path.name]
    path.write_text("")
    os.truncate(path, most + 1)  # sparse: no disk, and no memory unless read
    got, out, err = cli([*argv, "--data", str(data)])
    assert got == code and message.format(path=path, size=most + 1) in out + err, (out, err)
    assert "internal error" not in out + err


@pytest.mark.parametrize("name", ["host record (status)", "run.json (status)",
                                  "run.json (verify)", "log (verify)"])
def test_a_stored_file_nested_too_deeply_is_named_in_one_line(tmp_path, name):
    planted, argv, code, _ = OVERSIZED[name]
    data, campaign = _campaign(tmp_path)
    run = sorted((campaign / "runs").iterdir())[0].name
    path = campaign / planted.format(run=run)
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    got, out, err = cli([*argv, "--data", str(data)])
    assert got == code and "arrays or objects nested more than 100 levels deep" in out + err, (
        out, err)
    assert "internal error" not in out + err and "Traceback" not in out + err


def test_a_build_record_others_may_write_is_refused_in_one_line(places):
    """The owner and mode rule of the caches (probe 9, C2) for the book's build record: one
    others may rewrite could call any page fresh."""
    path = paths.BOOK_BUILD_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    freshness.remember("page", "0" * 64)
    assert freshness.is_fresh("page", "0" * 64, path)
    path.chmod(0o666)
    with pytest.raises(safefiles.NotOurs, match=re.escape(
            f"{path}: is writable by others than its owner (mode 0666), where iolab keeps the "
            "book's build record")):
        freshness.is_fresh("page", "0" * 64, path)


@pytest.mark.parametrize("kept", ["raw file", "host record", "params file"])
def test_an_output_over_a_file_iolab_keeps_is_refused(stored, tmp_path, kept):
    """Probe 10, F1: 'tidy -o' named a stored run's fio.json (or the host record, or a params
    file) and replaced it with the table: the campaign no longer verified. A file inside the
    data directory, or one git tracks in the checkout, is never an output."""
    env = stored / "raw" / "smt_thp" / "kvm-2vcpu"
    out = {"raw file": next(env.glob("runs/*/fio.json")), "host record": env / "host.json",
           "params file": REPO_ROOT / "notebooks" / "params" / "kvm-2vcpu" / "smt_thp.yaml"}[kept]
    if kept == "params file" and not safefiles._tracked(REPO_ROOT, out):
        pytest.skip("not a git checkout: nothing is tracked")
    before = out.read_bytes()
    names = sorted(p.name for p in out.parent.iterdir())
    code, out_text, err = cli([*TIDY, "--data", str(stored), "-o", str(out)])
    assert code == 2 and out_text == "" and len(err.splitlines()) == 1, err
    assert f"-o: {out} is " in err and "an output never replaces a file iolab keeps" in err
    assert out.read_bytes() == before and sorted(p.name for p in out.parent.iterdir()) == names
    with pytest.raises(safefiles.NotOurs, match="iolab keeps"):
        safefiles.replace_output(out, lambda tmp: tmp.write_text("x"), "--out", data_dir=stored)
    assert out.read_bytes() == before


@pytest.mark.parametrize("kept", ["git config", "git index", "new git hook", "worktree .git",
                                  "scratch registry", "lock file", "new file in the lock folder"])
def test_an_output_over_git_or_iolab_state_is_refused(stored, places, kept):
    """Probe 11, F6 and F7: 'tidy -o' named a checkout's .git/config (or its index) and iolab's
    scratch registry, and replaced them with the table: git no longer read its clone, and
    iolab forgot every scratch file it had made. A file in a .git folder, in iolab's state
    folder or in its lock folder is never an output, nor is a new one (a new hook is run by
    git, a new lock file taken for a lock)."""
    checkout = places / "checkout"
    (checkout / ".git" / "hooks").mkdir(parents=True)
    out = {"git config": checkout / ".git" / "config", "git index": checkout / ".git" / "index",
           "new git hook": checkout / ".git" / "hooks" / "pre-commit",
           "worktree .git": checkout / "wt" / ".git",
           "scratch registry": places / "state" / "scratch-host.json",
           "lock file": places / "locks" / "iolab-host.lock",
           "new file in the lock folder": places / "locks" / "table.csv"}[kept]
    out.parent.mkdir(parents=True, exist_ok=True)
    if not kept.startswith("new"):
        out.write_text("kept\n")
    names = sorted(p.name for p in out.parent.iterdir())
    code, out_text, err = cli([*TIDY, "--data", str(stored), "-o", str(out)])
    assert code == 2 and out_text == "" and len(err.splitlines()) == 1, err
    assert f"-o: {out} is " in err and "an output never replaces or adds a file there" in err
    where = {"git": "git's own", "worktree": "git's own", "scratch": "iolab's state folder",
             "new git": "git's own", "lock": "iolab's lock folder",
             "new file": "iolab's lock folder"}
    assert any(kept.startswith(k) and w in err for k, w in where.items()), err
    assert sorted(p.name for p in out.parent.iterdir()) == names, "written, or a temporary left"
    if not kept.startswith("new"):
        assert out.read_text() == "kept\n"
    with pytest.raises(safefiles.NotOurs, match="never replaces or adds a file there"):
        safefiles.replace_output(out, lambda tmp: tmp.write_text("x"), "--out", data_dir=stored)


@pytest.mark.parametrize("through", ["link", "real folder"])
@pytest.mark.parametrize("folder", ["IOLAB_STATE_DIR", "IOLAB_LOCK_DIR", "data"])
def test_an_output_into_a_state_lock_or_data_folder_that_is_a_link_is_refused(
        stored, places, monkeypatch, folder, through):
    """Probe 12, F1: with $IOLAB_STATE_DIR a link to the state folder (as ~/.local/state
    often is), 'tidy -o' over the scratch registry wrote the table there (every scratch file
    forgotten), and outputs into a linked lock folder were written too: the folder was
    compared with its link unresolved, so no output's real path ever lay inside it. The
    same for a data directory given as a link."""
    real = stored if folder == "data" else places / f"{folder.lower()}-real"
    real.mkdir(mode=0o700, exist_ok=True)
    link = places / f"{folder.lower()}-link"
    link.symlink_to(real)
    if folder != "data":
        monkeypatch.setenv(folder, str(link))
    name = {"IOLAB_STATE_DIR": "scratch-host.json", "IOLAB_LOCK_DIR": "iolab-host.lock",
            "data": "raw/smt_thp/kvm-2vcpu/host.json"}[folder]
    out = (link if through == "link" else real) / name
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        out.write_text("kept\n")
    before = out.read_bytes()
    data = str(link if folder == "data" else stored)
    code, out_text, err = cli([*TIDY, "--data", data, "-o", str(out)])
    assert code == 2 and out_text == "" and len(err.splitlines()) == 1, err
    assert f"-o: {out} is " in err and f"{real}" in err, err
    assert out.read_bytes() == before
    with pytest.raises(safefiles.NotOurs, match="never replaces"):
        safefiles.replace_output(out, lambda tmp: tmp.write_text("x"), "--out",
                                 data_dir=link if folder == "data" else stored)
    assert out.read_bytes() == before


def test_an_iolab_lock_file_in_a_system_lock_folder_reached_through_a_link_is_refused(
        monkeypatch, tmp_path):
    """Probe 12, F1's class: /var/lock is a link to /run/lock on most hosts; an iolab lock
    file there is refused as an output whichever of the two names the folder has."""
    monkeypatch.delenv("IOLAB_LOCK_DIR")
    (tmp_path / "run-lock").mkdir()
    (tmp_path / "var-lock").symlink_to(tmp_path / "run-lock")
    monkeypatch.setattr(paths, "HOST_LOCK_DIRS", (tmp_path / "var-lock",))
    assert "one of iolab's lock files" in safefiles.state_problem(
        tmp_path / "run-lock" / "iolab-host.lock")


def test_an_output_beside_iolab_locks_in_a_system_lock_folder_is_only_refused_for_its_names(
        monkeypatch, tmp_path):
    """A system lock folder (/run/lock) is every program's: only iolab's own lock files in it
    are refused as outputs."""
    monkeypatch.delenv("IOLAB_LOCK_DIR")
    monkeypatch.setattr(paths, "HOST_LOCK_DIRS", (tmp_path,))
    assert "one of iolab's lock files" in safefiles.state_problem(tmp_path / "iolab-host.lock")
    assert safefiles.state_problem(tmp_path / "table.csv") is None


def test_an_output_renews_only_the_kept_file_it_exists_for(stored, tmp_path):
    """The files a verb exists to renew (the glue snapshot, a derived replay, the AiSIO
    reference table) are replaced; a new file beside a kept one is not a kept one."""
    kept = stored / "raw" / "smt_thp" / "kvm-2vcpu" / "host.json"
    safefiles.check_output(kept, "-o", data_dir=stored, renews=[kept])
    safefiles.check_output(kept.parent / "new.csv", "-o", data_dir=stored)
    with pytest.raises(safefiles.NotOurs, match="inside the data directory"):
        safefiles.check_output(kept, "-o", data_dir=stored, renews=[kept.parent / "new.csv"])
