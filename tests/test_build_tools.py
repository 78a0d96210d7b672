"""scripts/build_tools.py: which SPDK adaptations a system gets, the patches themselves, the
cache key and source identity, and (where the sources and a build are at hand) that a second
build of the same sources does nothing."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "build_tools.py"
SOURCES = ROOT.parent / "shared" / "tools-src"
spec = importlib.util.spec_from_file_location("build_tools", SCRIPT)
bt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bt)


def _tree(tmp_path: Path, own_dpdk=False, own_isal=False) -> Path:
    tree = tmp_path / "spdk"
    (tree / "dpdk").mkdir(parents=True)
    (tree / "isa-l").mkdir()
    if own_dpdk:
        (tree / "dpdk" / "meson.build").write_text("")
    if own_isal:
        (tree / "isa-l" / "Makefile.am").write_text("")
    return tree


def _system(monkeypatch, tmp_path, dpdk, isal_has_rocksoft):
    header = tmp_path / "crc64.h"
    header.write_text("uint64_t crc64_rocksoft_refl(uint64_t, const unsigned char *, uint64_t);"
                      if isal_has_rocksoft else "uint64_t crc64_ecma_refl(uint64_t);")
    monkeypatch.setattr(bt, "ISAL_HEADER", header)
    monkeypatch.setattr(bt, "pkg_version", lambda name: {"libdpdk": dpdk, "libisal": "2.30.0"}
                        .get(name))


@pytest.mark.parametrize("dpdk, rocksoft, patches", [
    ("22.11.11", False, ["dpdk-before-24.03-libs.patch", "dpdk-22.11-later-lts.patch",
                         "isal-without-crc64-rocksoft.patch"]),   # Debian 12
    ("22.11.4", True, ["dpdk-before-24.03-libs.patch"]),
    ("23.11.0", True, ["dpdk-before-24.03-libs.patch"]),
    ("24.11.1", True, []),
])
def test_adaptations_follow_the_system(tmp_path, monkeypatch, dpdk, rocksoft, patches):
    _system(monkeypatch, tmp_path, dpdk, rocksoft)
    options, found, applied = bt.spdk_adaptations(_tree(tmp_path))
    assert [p["patch"] for p in applied] == patches
    assert "--with-dpdk" in options and "--with-isal=/usr" in options
    assert found == {"dpdk": dpdk, "isal": "2.30.0"}
    assert all(p["why"] and not p["why"].startswith("Why") for p in applied)


def test_a_tree_with_its_own_submodules_is_not_adapted(tmp_path, monkeypatch):
    _system(monkeypatch, tmp_path, "22.11.11", False)
    options, found, applied = bt.spdk_adaptations(_tree(tmp_path, own_dpdk=True, own_isal=True))
    assert applied == [] and "--with-dpdk" not in options
    assert found == {"dpdk": None, "isal": None}


def test_no_system_dpdk_and_no_submodule_names_the_package(tmp_path, monkeypatch):
    _system(monkeypatch, tmp_path, None, True)
    with pytest.raises(bt.BuildError, match="install libdpdk-dev") as exc:
        bt.spdk_adaptations(_tree(tmp_path))
    assert exc.value.status == 3


def test_every_patch_says_why_and_when():
    patches = sorted(bt.PATCHES.glob("*.patch"))
    assert len(patches) == 3
    for patch in patches:
        head = patch.read_text().split("\n--- ", 1)[0]
        assert head.startswith("iolab: "), patch.name
        assert "Why: " in head and "Applied by scripts/build_tools.py only when" in " ".join(head.split())
    referenced = set()
    for line in SCRIPT.read_text().splitlines():
        referenced.update(p.name for p in patches if f'"{p.name}"' in line)
    assert referenced == {p.name for p in patches}  # none unused


@pytest.mark.skipif(not list(SOURCES.glob("spdk*.tar.gz")),
                    reason=f"no SPDK source tarball in {SOURCES}")
def test_the_patches_apply_to_the_spdk_source(tmp_path):
    tarball = sorted(SOURCES.glob("spdk*.tar.gz"))[-1]
    with tarfile.open(tarball) as tar:
        top = tar.getmembers()[0].name.split("/")[0]
        wanted = [f"{top}/{name}" for name in ("lib/env_dpdk/env.mk", "lib/env_dpdk/pci_dpdk.c",
                                                "lib/util/crc64.c")]
        tar.extractall(tmp_path, members=[tar.getmember(w) for w in wanted], filter="tar")
    for patch in sorted(bt.PATCHES.glob("*.patch")):
        done = subprocess.run(["patch", "-p1", "--forward", "-i", str(patch)], cwd=tmp_path / top,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def _git_archive(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "meson.build").write_text("project('x', version: '1.2.3')\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    tarball = tmp_path / "x.tar.gz"
    subprocess.run([*git, "archive", "--prefix=x/", "-o", str(tarball), "HEAD"], check=True)
    return tarball, commit


def test_a_tarball_is_known_by_its_hash_and_git_commit(tmp_path):
    tarball, commit = _git_archive(tmp_path)
    ident = bt.Source(tarball).identity()
    assert ident["commit"] == commit and len(ident["sha256"]) == 64
    out = tmp_path / "unpacked"
    bt.Source(tarball).unpack(out)
    assert (out / "meson.build").exists()
    # the key changes with the source and stays for the same one
    assert bt.build_key("xnvme", ident) == bt.build_key("xnvme", bt.Source(tarball).identity())
    assert bt.build_key("xnvme", ident) != bt.build_key("xnvme", {**ident, "sha256": "0" * 64})
    assert bt.build_key("xnvme", ident) == bt.build_key("xnvme", {**ident, "path": "/moved"})


def test_a_folder_is_copied_and_known_by_its_commit(tmp_path):
    tarball, commit = _git_archive(tmp_path)
    ident = bt.Source(tmp_path / "repo").identity()
    assert ident["commit"] == commit and ident["dirty"] is None
    (tmp_path / "repo" / "meson.build").write_text("changed\n")
    assert bt.Source(tmp_path / "repo").identity()["dirty"]
    out = tmp_path / "copy"
    bt.Source(tmp_path / "repo").unpack(out)
    assert not (out / ".git").exists() and (out / "meson.build").read_text() == "changed\n"


def test_usage_errors(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--from", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "no xNVMe or SPDK source found" in done.stderr
    done = subprocess.run([sys.executable, str(SCRIPT), "--xnvme", str(tmp_path / "nope.tgz"),
                           "--dest", str(tmp_path / "d")], capture_output=True, text=True)
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_a_build_swaps_in_whole_and_removes_the_old_one_and_leftovers(tmp_path):
    dest = tmp_path / "tools"
    dest.mkdir()
    (dest / "spdk").mkdir()  # a build from before builds were kept per key
    (dest / "spdk" / "old.txt").write_text("old")
    (dest / ".spdk-abc123").mkdir()  # the work folder of a killed build
    for key in ("k1", "k2"):
        out = tmp_path / f"out-{key}"
        out.mkdir()
        (out / "which").write_text(key)
        bt.swap_in(dest, "spdk", key, out)
        assert (dest / "spdk").is_symlink() and (dest / "spdk" / "which").read_text() == key
    assert sorted(p.name for p in dest.iterdir()) == ["spdk", "spdk-k2"]


def test_several_sources_of_one_tool_must_be_named(tmp_path):
    (tmp_path / "spdk-a.tar.gz").write_bytes(b"")
    (tmp_path / "spdk-b").mkdir()
    with pytest.raises(bt.BuildError, match="2 spdk sources .*name one with --spdk"):
        bt.find_source("spdk", tmp_path)
    assert bt.find_source("xnvme", tmp_path) is None


def test_unpacking_without_tar_filters_refuses_escaping_members(tmp_path, monkeypatch):
    monkeypatch.delattr(tarfile, "tar_filter", raising=False)  # Python before 3.11.4
    tarball, _ = _git_archive(tmp_path)
    bt.Source(tarball).unpack(tmp_path / "ok")
    assert (tmp_path / "ok" / "meson.build").exists()
    for n, (name, kind, link) in enumerate([("../outside.txt", tarfile.REGTYPE, ""),
                                             ("/abs.txt", tarfile.REGTYPE, ""),
                                             ("x/etc", tarfile.SYMTYPE, "../../../etc"),
                                             ("x/abs", tarfile.SYMTYPE, "/etc"),
                                             ("x/hard", tarfile.LNKTYPE, "../outside")]):
        evil = tmp_path / f"evil{n}.tar.gz"
        with tarfile.open(evil, "w:gz") as tar:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.size = kind, link, 0
            tar.addfile(info)
        with pytest.raises(bt.BuildError, match="outside its folder"):
            bt.Source(evil).unpack(tmp_path / f"bad{n}")
    assert not (tmp_path / "outside.txt").exists()
    # a "." member, as 'tar -C dir -czf x.tar.gz .' writes, is harmless
    dotted = tmp_path / "dotted.tar.gz"
    with tarfile.open(dotted, "w:gz") as tar:
        tar.add(tmp_path / "repo" / "meson.build", arcname="./meson.build")
        info = tarfile.TarInfo(".")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    bt.Source(dotted).unpack(tmp_path / "dotted")
    assert (tmp_path / "dotted" / "meson.build").exists()


@pytest.mark.slow
def test_the_build_here_is_current_for_the_sources_at_hand(built_spdk, tmp_path):
    """What `make test` built is what these sources, patches and libraries give: a second
    build would do nothing (checked by the key, in a scratch folder, never rebuilding)."""
    record = json.loads((built_spdk / "iolab-build.json").read_text())
    tarballs = sorted(SOURCES.glob("spdk*.tar.gz"))
    if not tarballs or bt.sha256(tarballs[-1]) != record["source"].get("sha256"):
        pytest.skip(f"SPDK was built from other sources than those in {SOURCES}")
    assert bt.build_key("spdk", bt.Source(tarballs[-1]).identity()) == record["key"]
    dest = tmp_path / "tools"
    dest.mkdir()
    (dest / "spdk").symlink_to(built_spdk.resolve())
    assert bt.ensure("spdk", tarballs[-1], dest, 1) == record  # returns at once: built


@pytest.mark.parametrize("kind", ["nested", "too large", "link"])
def test_a_build_record_iolab_cannot_have_written_is_one_line(tmp_path, kind):
    """The state-reader pattern of probe 6 (C1-C4, B4-B8): a RecursionError, or a record read
    whole whatever its size, or through a link."""
    import os

    from iolab.errors import ToolError
    from iolab.tools import builds

    path = tmp_path / builds.RECORD
    if kind == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000)
        said = "arrays or objects nested more than 100 levels deep"
    elif kind == "too large":
        path.write_text("")
        os.truncate(path, builds.RECORD_MOST + 1)  # sparse: no disk, and no memory unless read
        said = f"holds {builds.RECORD_MOST + 1:,} bytes (or more)"
    else:
        (tmp_path / "elsewhere.json").write_text('{"version": "x"}')
        path.symlink_to(tmp_path / "elsewhere.json")
        said = "is a symbolic link"
    with pytest.raises(ToolError) as info:
        builds.record(tmp_path)
    assert str(info.value).startswith(f"{path}: not a build record (") and said in str(info.value)
    assert "\n" not in str(info.value)
    path.unlink()
    path.write_text('{"version": "x"}')
    assert builds.record(tmp_path) == {"version": "x"}
    path.unlink()
    assert builds.record(tmp_path) is None
