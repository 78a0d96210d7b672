"""The hugepages knob (iolab.host.hugepages): a fake /proc with a fake mount command, and one
real reserve-and-restore on this host where it may (root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iolab.errors import InputError, IolabError
from iolab.host.hugepages import HugepagesKnob
from iolab.host.knobs import SysRoot
from iolab.host.knobset import make_knobs

ROOT_LINE = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
HUGE_LINE = "40 22 0:33 / /dev/hugepages rw,relatime shared:2 - hugetlbfs hugetlbfs rw,pagesize=2M\n"


class FakeMounts:
    """Stands in for mount(8)/umount(8): edits the fake mountinfo, records each argv."""

    def __init__(self, info: Path):
        self.info, self.calls = info, []

    def __call__(self, argv: list[str]) -> None:
        self.calls.append(argv)
        lines = self.info.read_text().splitlines(keepends=True)
        if argv[0] == "mount":
            lines.append(HUGE_LINE)
        else:
            lines = [line for line in lines if f" {argv[1]} " not in line]
        self.info.write_text("".join(lines))


@pytest.fixture
def knob(tmp_path):
    (tmp_path / "proc/sys/vm").mkdir(parents=True)
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/sys/vm/nr_hugepages").write_text("0\n")
    (tmp_path / "proc/self/mountinfo").write_text(ROOT_LINE)
    root = SysRoot(sys=tmp_path / "sys", proc=tmp_path / "proc")
    mounts = FakeMounts(tmp_path / "proc/self/mountinfo")
    return HugepagesKnob(root, command=mounts), mounts


def test_reserve_mounts_and_restore_unmounts(knob):
    k, mounts = knob
    before = k.read()
    assert before == {"nr_hugepages": 0, "hugetlbfs": []}
    k.apply({"pages": 512})
    after = k.read()
    assert after == {"nr_hugepages": 512, "hugetlbfs": ["/dev/hugepages"]}
    assert k.matches({"pages": 512}, after)
    assert mounts.calls == [["mount", "-t", "hugetlbfs", "nodev", "/dev/hugepages"]]
    k.restore(before)
    assert k.read() == before
    assert mounts.calls[-1] == ["umount", "/dev/hugepages"]
    k.restore(before)  # idempotent: nothing to do, nothing called
    assert len(mounts.calls) == 2


def test_an_existing_mount_is_used_and_kept(knob):
    k, mounts = knob
    info = k.root.proc / "self/mountinfo"
    info.write_text(ROOT_LINE + HUGE_LINE)
    before = k.read()
    k.apply({"pages": 8})
    k.restore(before)
    assert mounts.calls == []
    assert k.read() == before


def test_fewer_pages_than_asked_do_not_match(knob):
    k, _ = knob
    assert not k.matches({"pages": 512}, {"nr_hugepages": 300, "hugetlbfs": ["/dev/hugepages"]})
    assert not k.matches({"pages": 512}, {"nr_hugepages": 512, "hugetlbfs": []})
    assert k.matches({"pages": 512}, {"nr_hugepages": 1024, "hugetlbfs": ["/dev/hugepages"]})


def test_a_larger_pool_is_left_alone_and_restored_as_it_was(knob):
    k, mounts = knob
    (k.root.proc / "sys/vm/nr_hugepages").write_text("2048\n")
    before = k.read()
    k.apply({"pages": 512})
    assert k.read()["nr_hugepages"] == 2048  # others may be using it: not shrunk
    k.restore(before)
    assert k.read() == before


def test_a_failed_unmount_still_gives_the_pages_back(knob):
    k, mounts = knob
    before = k.read()
    k.apply({"pages": 64})

    def busy(argv):
        if argv[0] == "umount":
            raise IolabError("umount /dev/hugepages failed with status 32: target is busy")
        mounts(argv)
    k.command = busy
    with pytest.raises(IolabError, match="back to 0 pages, but umount /dev/hugepages failed"):
        k.restore(before)
    assert k.read()["nr_hugepages"] == 0


def test_only_its_own_mount_is_removed(knob):
    k, mounts = knob
    before = k.read()
    k.apply({"pages": 8})
    info = k.root.proc / "self/mountinfo"
    info.write_text(info.read_text() + HUGE_LINE.replace("/dev/hugepages", "/mnt/other")
                    .replace("40 22", "41 22"))
    k.restore(before)
    assert k.read()["hugetlbfs"] == ["/mnt/other"]  # someone else's, kept


@pytest.mark.parametrize("bad", [512, {"pages": 0}, {"pages": True}, {"pages": "1G"},
                                 {"pages": 4, "size": "2M"}])
def test_bad_values_name_the_knob(knob, bad):
    with pytest.raises(InputError) as exc:
        knob[0].validate(bad)
    assert exc.value.key == "hugepages"


def test_the_knob_set_has_it():
    assert isinstance(make_knobs()["hugepages"], HugepagesKnob)


@pytest.mark.slow
def test_real_reserve_and_restore():
    k = HugepagesKnob()
    ok, why = k.available()
    if not ok or os.geteuid() != 0:
        pytest.skip(f"cannot change hugepages here: {why or 'not root'}")
    before = k.read()
    if before["nr_hugepages"] or before["hugetlbfs"]:
        pytest.skip("this host already has hugepages or a hugetlbfs: not changing them")
    try:
        k.apply({"pages": 4})
        assert k.matches({"pages": 4}, k.read()), k.read()
    finally:
        k.restore(before)
    assert k.read() == before
