"""Rendering and building skip what did not change: the keys, and render() acting on them."""

from __future__ import annotations

import os
import shutil

import pytest

from iolab import paths
from iolab.core.store import note_read
from iolab.paths import NOTEBOOKS_DIR
from iolab.report import book, freshness


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BOOK_BUILD_RECORD", tmp_path / "state.json")
    return tmp_path


@pytest.fixture
def data(tmp_path):
    (tmp_path / "data" / "raw" / "x").mkdir(parents=True)
    (tmp_path / "data" / "raw" / "x" / "run.json").write_text("{}")
    return tmp_path / "data"


SRC = NOTEBOOKS_DIR / "smt_thp.ipynb"


def test_a_key_changes_with_data_notebook_and_parameters(data, tmp_path):
    key = freshness.render_key(SRC, {"mode": "replay"}, data)
    assert freshness.render_key(SRC, {"mode": "replay"}, data) == key
    assert freshness.render_key(SRC, {"mode": "replay", "data_dir": "x"}, data) != key
    other = tmp_path / "other.ipynb"
    other.write_bytes(SRC.read_bytes() + b" ")
    assert freshness.render_key(other, {"mode": "replay"}, data) != key
    run = data / "raw" / "x" / "run.json"
    st = run.stat()
    os.utime(run, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    touched = freshness.render_key(SRC, {"mode": "replay"}, data)
    assert touched != key
    (data / "cache").mkdir()  # derived data is not an input
    (data / "cache" / "t.parquet").write_text("x")
    assert freshness.render_key(SRC, {"mode": "replay"}, data) == touched


def test_remembered_only_while_the_output_exists(state):
    out = state / "out.ipynb"
    freshness.remember("out", "k1")
    assert not freshness.is_fresh("out", "k1", out)
    out.write_text("{}")
    assert freshness.is_fresh("out", "k1", out) and not freshness.is_fresh("out", "k2", out)
    freshness.remember("out", None)
    assert not freshness.is_fresh("out", "k1", out)


@pytest.mark.parametrize("kind", ["nested", "too large"])
def test_a_build_record_iolab_cannot_have_written_is_ignored_and_replaced(state, kind):
    """The state-reader pattern of probe 6 (C1-C4, B4-B8): 100,000 nested brackets were a
    RecursionError, and a 3 GB sparse record was read whole."""
    out = state / "out.ipynb"
    out.write_text("{}")
    if kind == "nested":
        paths.BOOK_BUILD_RECORD.write_text("[" * 100_000 + "]" * 100_000)
    else:
        paths.BOOK_BUILD_RECORD.write_text("")
        os.truncate(paths.BOOK_BUILD_RECORD, 3 << 30)  # sparse: no disk, no memory unless read
    assert not freshness.is_fresh("out", "k1", out)  # made again
    freshness.remember("out", "k1")
    assert freshness.is_fresh("out", "k1", out)
    assert paths.BOOK_BUILD_RECORD.stat().st_size < freshness.STATE_MOST


def test_render_replays_only_what_changed(state, data, monkeypatch):
    dst = book.REPO_ROOT / "_build" / "test-freshness" / "smt_thp.ipynb"
    monkeypatch.setattr(book, "rendered", lambda: {SRC: dst})
    calls = []

    def execute(src, out, params):
        calls.append(src)
        note_read("x")  # as a chapter's Store of experiment x does, in the kernel
        shutil.copy(src, out)

    monkeypatch.setattr(book, "execute", execute)
    monkeypatch.setattr(book, "environment_pages", lambda data_dir=None: [])
    try:
        assert book.render(data, log=lambda *_: None) == [dst]
        assert book.render(data, log=lambda *_: None) == [] and len(calls) == 1
        # runs of another experiment, which this chapter did not read: nothing to replay
        (data / "raw" / "y").mkdir()
        (data / "raw" / "y" / "run.json").write_text("{}")
        assert book.render(data, log=lambda *_: None) == [] and len(calls) == 1
        assert freshness.reads_of(str(dst.relative_to(book.REPO_ROOT))) == ["x"]
        (data / "raw" / "x" / "new.json").write_text("{}")
        assert book.render(data, log=lambda *_: None) == [dst] and len(calls) == 2
        assert book.render(data, log=lambda *_: None, force=True) == [dst]

        def fails(src, out, params):
            raise RuntimeError("a cell failed")

        monkeypatch.setattr(book, "execute", fails)
        (data / "raw" / "x" / "newer.json").write_text("{}")
        with pytest.raises(RuntimeError):
            book.render(data, log=lambda *_: None)
        monkeypatch.setattr(book, "execute", execute)
        # the failed replay forgot the old key: the same inputs are replayed, not skipped
        (data / "raw" / "x" / "newer.json").unlink()
        assert book.render(data, log=lambda *_: None) == [dst]
    finally:
        shutil.rmtree(dst.parent, ignore_errors=True)


def test_a_key_counts_only_the_experiments_read(data):
    (data / "raw" / "y").mkdir()
    key = freshness.render_key(SRC, {}, data, ["x"])
    assert freshness.render_key(SRC, {}, data, None) != key  # unknown: all of raw/
    (data / "raw" / "y" / "run.json").write_text("{}")
    assert freshness.render_key(SRC, {}, data, ["x"]) == key
    every = freshness.render_key(SRC, {}, data, ["x", "*"])
    (data / "raw" / "y" / "run2.json").write_text("{}")
    assert freshness.render_key(SRC, {}, data, ["x", "*"]) != every
    (data / "raw" / "x" / "more.json").write_text("{}")
    assert freshness.render_key(SRC, {}, data, ["x"]) != key


def test_what_a_chapter_reads_is_noted_where_asked(tmp_path, monkeypatch):
    from iolab.core.store import READS_LOG, Store, campaigns

    log = tmp_path / "reads"
    monkeypatch.setenv(READS_LOG, str(log))
    Store(tmp_path, "smt_thp", "kvm-2vcpu")
    campaigns(tmp_path)
    assert log.read_text().split() == ["smt_thp", "*"]
    monkeypatch.delenv(READS_LOG)
    Store(tmp_path, "cpu_search", "kvm-2vcpu")
    assert log.read_text().split() == ["smt_thp", "*"]


def test_files_a_page_includes_are_inputs_of_the_build(tmp_path):
    (tmp_path / "book").mkdir()
    page = tmp_path / "book" / "page.md"
    page.write_text("# x\n\n```{literalinclude} ../code/a.py\n```\n\n:::{include} b.md\n:::\n")
    assert freshness._included([page]) == sorted([(tmp_path / "code" / "a.py").resolve(),
                                                  (tmp_path / "book" / "b.md").resolve()])
