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


@pytest.mark.slow
def test_a_second_build_of_the_same_sources_does_nothing(built_spdk, built_xnvmeperf):
    if not SOURCES.is_dir():
        pytest.skip(f"no tool sources in {SOURCES}")
    record = json.loads((built_spdk / "iolab-build.json").read_text())
    if not Path(record["source"]["path"]).exists():
        pytest.skip("the build was made from sources that are no longer there")
    done = subprocess.run([sys.executable, str(SCRIPT), "--from", str(SOURCES),
                           "--dest", str(built_spdk.parent)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "already built" in done.stdout
    assert "building" not in done.stdout
    assert json.loads((built_spdk / "iolab-build.json").read_text()) == record
