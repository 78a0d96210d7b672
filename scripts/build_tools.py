#!/usr/bin/env python3
"""Build xNVMe (xnvme, xnvmeperf) and SPDK (bdevperf) from source into a git-ignored folder.

Usage: build_tools.py [--from DIR] [--xnvme SRC] [--spdk SRC] [--dest DIR] [--jobs N] [--only xnvme|spdk]

SRC is a source tarball (``git archive`` output, e.g. spdk-3230130e6a.tar.gz) or a source
folder (a checkout; it is copied, never built in place). ``--from DIR`` looks in DIR for
``xnvme*.tar.gz`` / ``spdk*.tar.gz`` or ``xnvme*/`` / ``spdk*/`` folders. DEST (default
``.tools/`` in the repository, or $IOLAB_TOOLS_DIR) then holds

    xnvme/bin/xnvmeperf, xnvme/bin/xnvme      static against libxnvme, so they run anywhere
    xnvme/iolab-build.json                    what was built (see below)
    spdk/                                     the SPDK tree, built; bdevperf is
                                              spdk/build/examples/bdevperf
    spdk/iolab-build.json

where ``xnvme`` and ``spdk`` are symlinks to ``xnvme-<key>/`` and ``spdk-<key>/``, swapped in
one rename when a new build is complete.

The record ``iolab-build.json`` names the tool, its version, the source (path, sha256 of a
tarball), the source commit (from the tarball's ``git archive`` header or the checkout), the
patches applied and why, the configure options, the versions of the system libraries
detected, and a build key. A build whose key matches the record is not repeated (idempotent);
a changed source, patch, option, library or compiler version gives a new build, made beside
the old one and swapped in only when complete, so a half-finished build is never used.

SPDK's sources are adapted only where the system needs it, each adaptation a patch file in
scripts/patches/spdk/ whose header says why and when it applies; the conditions are checked
here from pkg-config and the installed headers (see ``spdk_adaptations``).

Exit status: 0 built or already built; 1 a build failed (the log's tail is printed, the log
kept in DEST); 2 usage error or no source found; 3 build dependencies missing (named, with the
Debian packages that provide them).

Only the Python standard library is used: this runs before the project's virtual environment
exists. Every command is an argv list.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PATCHES = REPO / "scripts" / "patches" / "spdk"
RECORD = "iolab-build.json"
ISAL_HEADER = Path("/usr/include/isa-l/crc64.h")
# Bump when this script builds differently, so old builds are redone.
RECIPE = 2

XNVME_MESON = ["-Dwith-spdk=disabled", "-Dwith-libvfn=disabled", "-Dwith-cuda=disabled",
               "-Dwith-hip=disabled", "-Dexamples=false", "-Dtests=false",
               "-Dbuild_subprojects=false", "-Ddefault_library=static", "--buildtype=release"]
SPDK_CONFIGURE = ["--with-shared", "--without-isal-crypto", "--without-crypto",
                  "--without-vhost", "--without-virtio", "--without-ocf", "--without-xnvme",
                  "--without-vfio-user", "--without-nvme-cuse", "--without-fsdev",
                  "--without-aio-fsdev", "--with-uring", "--without-usdt", "--disable-tests",
                  "--disable-unit-tests"]

# What each build runs, and the Debian package that provides it.
NEEDS = {
    "xnvme": {"cc": "gcc", "meson": "meson", "ninja": "ninja-build", "pkg-config": "pkgconf",
              "/usr/include/liburing.h": "liburing-dev", "/usr/include/libaio.h": "libaio-dev"},
    "spdk": {"cc": "gcc", "c++": "g++", "make": "make", "pkg-config": "pkgconf",
             "python3": "python3", "patch": "patch", "/usr/include/numa.h": "libnuma-dev",
             "/usr/include/uuid/uuid.h": "uuid-dev", "/usr/include/openssl/ssl.h": "libssl-dev",
             "/usr/include/json-c/json.h": "libjson-c-dev",
             "/usr/include/keyutils.h": "libkeyutils-dev",
             "/usr/include/ncurses.h": "libncurses-dev",
             "/usr/include/fuse3/fuse.h": "libfuse3-dev",
             "/usr/include/liburing.h": "liburing-dev", "/usr/include/libaio.h": "libaio-dev",
             "/usr/include/isa-l/crc64.h": "libisal-dev"},
}
# SPDK's code generator runs the system python3 with these modules.
SPDK_PY_MODULES = {"yaml": "python3-yaml", "jinja2": "python3-jinja2",
                   "tabulate": "python3-tabulate"}


class BuildError(Exception):
    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def say(message: str) -> None:
    print(f"build_tools: {message}", flush=True)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def missing_needs(tool: str) -> list[str]:
    gone = [pkg for need, pkg in NEEDS[tool].items()
            if not (Path(need).exists() if need.startswith("/") else shutil.which(need))]
    if tool == "spdk" and spdk_python() is None:
        gone += [pkg for mod, pkg in SPDK_PY_MODULES.items()
                 if not python_has(shutil.which("python3") or "python3", [mod])]
    return sorted(set(gone))


def python_has(python: str, modules: list[str]) -> bool:
    try:
        return subprocess.run([python, "-c", f"import {', '.join(modules)}"],
                              capture_output=True, check=False).returncode == 0
    except OSError:
        return False


def spdk_python() -> str | None:
    """A python3 with SPDK's generator modules: the one on PATH, else the system's (a pyenv or
    virtual environment first on PATH usually lacks the Debian packages)."""
    for python in (shutil.which("python3"), "/usr/bin/python3"):
        if python and python_has(python, list(SPDK_PY_MODULES)):
            return python
    return None


def compiler_version() -> str | None:
    if not shutil.which("cc"):
        return None
    done = subprocess.run(["cc", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0].strip() if done.stdout else None


def pkg_version(name: str) -> str | None:
    if not shutil.which("pkg-config"):
        return None
    done = subprocess.run(["pkg-config", "--modversion", name], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or None if done.returncode == 0 else None


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


# --- sources -------------------------------------------------------------------------------

class Source:
    """A tarball or a folder, identified by content (tarball hash, or checkout commit)."""

    def __init__(self, path: Path):
        self.path = path.resolve()
        if not self.path.exists():
            raise BuildError(f"source {path} does not exist", 2)
        self.is_tarball = self.path.is_file()

    def identity(self) -> dict:
        if self.is_tarball:
            return {"path": str(self.path), "sha256": sha256(self.path),
                    "commit": self.tar_commit()}
        commit, dirty = self.git_state()
        return {"path": str(self.path), "commit": commit, "dirty": dirty,
                "tree": None if commit else self.tree_hash()}

    def tar_commit(self) -> str | None:
        # git archive writes the commit into a pax global header ("comment" keyword)
        try:
            with tarfile.open(self.path) as tar:
                comment = tar.pax_headers.get("comment", "")
        except (tarfile.TarError, OSError) as exc:
            raise BuildError(f"{self.path}: not a readable tarball ({exc})", 2) from None
        return comment.strip() if re.fullmatch(r"[0-9a-f]{40}", comment.strip()) else None

    def git_state(self) -> tuple[str | None, str | None]:
        if not (self.path / ".git").exists() or not shutil.which("git"):
            return None, None
        head = subprocess.run(["git", "-C", str(self.path), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=False)
        if head.returncode:
            return None, None
        status = subprocess.run(["git", "-C", str(self.path), "status", "--porcelain"],
                                capture_output=True, text=True, check=False).stdout
        diff = subprocess.run(["git", "-C", str(self.path), "diff", "HEAD"],
                              capture_output=True, check=False).stdout
        digest = hashlib.sha256(status.encode() + diff)
        untracked = subprocess.run(["git", "-C", str(self.path), "ls-files", "--others",
                                    "--exclude-standard", "-z"], capture_output=True,
                                   check=False).stdout.split(b"\0")
        for name in sorted(n for n in untracked if n):
            path = self.path / os.fsdecode(name)
            if path.is_file():  # an edited untracked file must give a new build too
                digest.update(name + b"\0" + path.read_bytes())
        dirty = digest.hexdigest()[:12] if status else None
        return head.stdout.strip(), dirty

    def tree_hash(self) -> str:
        digest = hashlib.sha256()
        for path in sorted(self.path.rglob("*")):
            if path.is_file():
                st = path.stat()
                digest.update(f"{path.relative_to(self.path)}\0{st.st_size}\0"
                              f"{st.st_mtime_ns}\n".encode())
        return digest.hexdigest()[:16]

    def unpack(self, into: Path) -> None:
        """The source tree at ``into`` (which must not exist)."""
        if not self.is_tarball:
            shutil.copytree(self.path, into, symlinks=True,
                            ignore=shutil.ignore_patterns(".git"))
            return
        with tempfile.TemporaryDirectory(dir=into.parent) as tmp:
            with tarfile.open(self.path) as tar:
                if hasattr(tarfile, "tar_filter"):
                    tar.extractall(tmp, filter="tar")
                else:  # Python before 3.11.4: refuse members that would land outside tmp
                    for member in tar.getmembers():
                        check_member(member, Path(tmp), self.path)
                    tar.extractall(tmp)
            tops = list(Path(tmp).iterdir())
            top = tops[0] if len(tops) == 1 and tops[0].is_dir() else Path(tmp)
            shutil.move(str(top), into)


def check_member(member: tarfile.TarInfo, root: Path, tarball: Path) -> None:
    """BuildError for a member that would be written, or link, outside ``root``: an absolute
    or '..' name, a link to an absolute path, or a link whose target climbs out."""
    root = root.resolve()

    def inside(path: Path) -> bool:
        resolved = path.resolve()
        return resolved == root or root in resolved.parents

    name = Path(member.name)
    problem = None
    if name.is_absolute() or not inside(root / name):
        problem = "would be unpacked outside its folder"
    elif member.issym() or member.islnk():
        target = Path(member.linkname)
        base = (root / name).parent if member.issym() else root
        if target.is_absolute() or not inside(base / target):
            problem = f"links to {member.linkname!r}, outside its folder"
    if problem:
        raise BuildError(f"{tarball}: member {member.name!r} {problem}", 2)


def find_source(tool: str, folder: Path | None) -> Path | None:
    """The one ``<tool>*.tar.gz`` or ``<tool>*/`` in ``folder``; BuildError when there are
    several (which one is meant is the user's to say, with --xnvme or --spdk)."""
    if folder is None or not folder.is_dir():
        return None
    found = sorted(folder.glob(f"{tool}*.tar.gz")) + sorted(
        p for p in folder.glob(f"{tool}*") if p.is_dir())
    if len(found) > 1:
        raise BuildError(f"{folder} holds {len(found)} {tool} sources "
                         f"({', '.join(p.name for p in found)}); name one with --{tool}", 2)
    return found[0] if found else None


# --- building ------------------------------------------------------------------------------

def run_logged(argv: list[str], cwd: Path, log: Path, env: dict | None = None) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}  (in {cwd})\n")
        out.flush()
        done = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False,
                              env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    if done.returncode:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise BuildError(f"{argv[0]} failed with status {done.returncode} in {cwd}; the last "
                         f"lines of {log}:\n{tail}")


def spdk_adaptations(tree: Path) -> tuple[list[str], dict, list[dict]]:
    """Configure options, the system libraries found, and the patches this system needs."""
    options = list(SPDK_CONFIGURE)
    dpdk = pkg_version("libdpdk")
    has_own_dpdk = (tree / "dpdk" / "meson.build").exists()
    has_own_isal = (tree / "isa-l" / "Makefile.am").exists()
    isal_header = ISAL_HEADER
    found = {"dpdk": None if has_own_dpdk else dpdk, "isal": None if has_own_isal else
             pkg_version("libisal")}
    patches = []
    if not has_own_dpdk:
        if dpdk is None:
            raise BuildError("the SPDK source has no dpdk submodule and no system DPDK was "
                             "found (pkg-config libdpdk); install libdpdk-dev", 3)
        options.append("--with-dpdk")
        v = version_tuple(dpdk)
        if v < (24, 3):
            patches.append("dpdk-before-24.03-libs.patch")
        if v[:2] == (22, 11) and len(v) > 2 and v[2] > 4:
            patches.append("dpdk-22.11-later-lts.patch")
    if not has_own_isal:
        options.append("--with-isal=/usr")
        if isal_header.exists() and "crc64_rocksoft_refl" not in isal_header.read_text():
            patches.append("isal-without-crc64-rocksoft.patch")
    records = [{"patch": name, "why": patch_reason(PATCHES / name)} for name in patches]
    return options, found, records


def patch_reason(path: Path) -> str:
    """The patch header's first paragraph after its title line."""
    head = path.read_text().split("\n--- ", 1)[0]
    paragraphs = [p.strip() for p in head.split("\n\n") if p.strip()]
    reason = " ".join((paragraphs[1] if len(paragraphs) > 1 else paragraphs[0]).split())
    return reason.removeprefix("Why: ")


def build_xnvme(source: Source, dest: Path, jobs: int, log: Path) -> dict:
    work = Path(tempfile.mkdtemp(prefix=".xnvme-", dir=dest))
    try:
        tree, build, prefix = work / "src", work / "build", work / "out"
        source.unpack(tree)
        run_logged(["meson", "setup", str(build), *XNVME_MESON], tree, log)
        run_logged(["ninja", "-C", str(build), "-j", str(jobs)], tree, log)
        (prefix / "bin").mkdir(parents=True)
        for exe in ("tools/xnvmeperf/xnvmeperf", "tools/xnvme"):
            shutil.copy2(build / exe, prefix / "bin" / Path(exe).name)
        version = re.search(r"version:\s*'([^']+)'", (tree / "meson.build").read_text())
        return {"work": work, "out": prefix, "version": version.group(1) if version else None,
                "options": XNVME_MESON, "patches": [], "libraries": {
                    "liburing": pkg_version("liburing"), "libaio": None}}
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def build_spdk(source: Source, dest: Path, jobs: int, log: Path) -> dict:
    work = Path(tempfile.mkdtemp(prefix=".spdk-", dir=dest))
    try:
        tree = work / "spdk"
        source.unpack(tree)
        options, libraries, patches = spdk_adaptations(tree)
        for patch in patches:
            run_logged(["patch", "-p1", "--forward", "-i", str(PATCHES / patch["patch"])],
                       tree, log)
        # SPDK's scripts call "python3" from PATH: make it one with the modules they import
        shim = work / "python-shim"
        shim.mkdir()
        (shim / "python3").symlink_to(spdk_python() or "/usr/bin/python3")
        env = {"PATH": f"{shim}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        run_logged(["./configure", *options], tree, log, env)
        config = tree / "mk" / "config.mk"
        if not (tree / "intel-ipsec-mb" / "Makefile").exists():
            # Debian's DPDK links IPSec_MB, so configure turns it on and make would then build
            # the absent intel-ipsec-mb submodule; nothing here needs it (crypto is off).
            text = re.sub(r"^CONFIG_IPSEC_MB\?=y$", "CONFIG_IPSEC_MB?=n", config.read_text(),
                          flags=re.M)
            config.write_text(text)
        # SPDK stamps "git sha1" from `git rev-parse` in the tree, which would find the
        # repository around .tools/: give it the source's own commit, or keep git out
        commit = source.identity().get("commit")
        make = ["make", f"-j{jobs}"] + ([f"SPDK_GIT_COMMIT={commit[:10]}"] if commit else [])
        env["GIT_CEILING_DIRECTORIES"] = str(work)
        run_logged(make, tree, log, env)
        bdevperf = tree / "build" / "examples" / "bdevperf"
        if not bdevperf.exists():
            raise BuildError(f"the SPDK build finished without {bdevperf}")
        version = (tree / "VERSION").read_text().strip() if (tree / "VERSION").exists() else None
        return {"work": work, "out": tree, "version": version, "options": options,
                "patches": patches, "libraries": libraries}
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


BUILDERS = {"xnvme": build_xnvme, "spdk": build_spdk}
PROGRAMS = {"xnvme": {"xnvmeperf": "bin/xnvmeperf", "xnvme": "bin/xnvme"},
            "spdk": {"bdevperf": "build/examples/bdevperf"}}


def build_key(tool: str, source_id: dict) -> str:
    patches = {p.name: sha256(p) for p in sorted(PATCHES.glob("*.patch"))} if tool == "spdk" \
        else {}
    libraries = ({"dpdk": pkg_version("libdpdk"), "isal": pkg_version("libisal")}
                 if tool == "spdk" else {})
    libraries.update(liburing=pkg_version("liburing"), compiler=compiler_version())
    # the source by content (hash or commit), not by where it lies
    source = {k: v for k, v in source_id.items() if k != "path"}
    blob = json.dumps({"recipe": RECIPE, "tool": tool, "source": source,
                       "options": XNVME_MESON if tool == "xnvme" else SPDK_CONFIGURE,
                       "patches": patches, "libraries": libraries}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def current(dest: Path, tool: str) -> dict | None:
    record = dest / tool / RECORD
    try:
        return json.loads(record.read_text())
    except (OSError, ValueError):
        return None


def swap_in(dest: Path, tool: str, key: str, out: Path) -> None:
    """Make ``dest/<tool>`` the finished build ``out``: the build moves to
    ``dest/<tool>-<key>`` and the symlink ``dest/<tool>`` is replaced in one rename, so
    ``dest/<tool>`` is at every moment the old build or the new one. Other builds of the tool
    are removed afterwards (a campaign still running one of them fails on its next run)."""
    home = dest / f"{tool}-{key}"
    if home.exists():
        shutil.rmtree(home)
    out.rename(home)
    final = dest / tool
    if final.exists() and not final.is_symlink():
        # a build from before builds were kept per key: move it aside to remove it below
        final.rename(dest / f".{tool}-unkeyed-{os.getpid()}")
    link = dest / f".{tool}-link-{os.getpid()}"
    link.unlink(missing_ok=True)
    link.symlink_to(home.name)
    os.replace(link, final)
    for stale in dest.glob(f"{tool}-*"):
        if stale.is_dir() and stale.name != home.name:
            shutil.rmtree(stale, ignore_errors=True)
    remove_leftovers(dest, tool)


def remove_leftovers(dest: Path, tool: str) -> None:
    """Work folders and moved-aside builds of a build that was killed (``.spdk-…``), removed
    while the build lock is held, so no build is using them."""
    for stale in dest.glob(f".{tool}-*"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


def ensure(tool: str, source_path: Path, dest: Path, jobs: int) -> dict:
    source = Source(source_path)
    source_id = source.identity()
    key = build_key(tool, source_id)
    have = current(dest, tool)
    if have and have.get("key") == key and all(
            (dest / tool / rel).exists() for rel in PROGRAMS[tool].values()):
        say(f"{tool} {have.get('version')} already built (key {key}) in {dest / tool}")
        return have
    remove_leftovers(dest, tool)
    gone = missing_needs(tool)
    if gone:
        raise BuildError(f"cannot build {tool}: missing {', '.join(gone)} (Debian/Ubuntu: "
                         f"apt-get install {' '.join(gone)})", 3)
    log = dest / f"{tool}-build.log"
    log.write_text(f"building {tool} from {source.path} at {time.strftime('%F %T')}\n")
    say(f"building {tool} from {source.path} ({jobs} jobs; log {log}) ...")
    started = time.monotonic()
    built = BUILDERS[tool](source, dest, jobs, log)
    record = {"tool": tool, "version": built["version"], "key": key,
              "source": source_id, "source_commit": source_id.get("commit"),
              "options": built["options"], "patches": built["patches"],
              # every system input of the key, so a new key can be explained from the record
              "libraries": {**built["libraries"], "liburing": pkg_version("liburing"),
                            "compiler": compiler_version()},
              "programs": PROGRAMS[tool], "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "build_s": round(time.monotonic() - started, 1)}
    (built["out"] / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    swap_in(dest, tool, key, built["out"])
    shutil.rmtree(built["work"], ignore_errors=True)
    say(f"built {tool} {record['version']} (commit {record['source_commit']}) in "
        f"{record['build_s']} s")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source_dir", type=Path,
                        help="a folder with xnvme*/spdk* tarballs or source folders")
    parser.add_argument("--xnvme", type=Path, help="xNVMe source tarball or folder")
    parser.add_argument("--spdk", type=Path, help="SPDK source tarball or folder")
    parser.add_argument("--dest", type=Path,
                        default=Path(os.environ.get("IOLAB_TOOLS_DIR", REPO / ".tools")))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", choices=sorted(BUILDERS))
    args = parser.parse_args(argv)
    try:
        sources = {tool: getattr(args, tool) or find_source(tool, args.source_dir)
                   for tool in BUILDERS if args.only in (None, tool)}
    except BuildError as exc:
        print(f"build_tools: {exc}", file=sys.stderr)
        return exc.status
    if not any(sources.values()):
        where = args.source_dir or "(no --from folder given)"
        print(f"build_tools: no xNVMe or SPDK source found in {where}; give --from DIR, "
              "--xnvme SRC or --spdk SRC (a tarball or a source folder)", file=sys.stderr)
        return 2
    args.dest.mkdir(parents=True, exist_ok=True)
    status = 0
    with (args.dest / ".lock").open("w") as lock:
        # two test runs on one checkout build one after the other, the second finds it built
        fcntl.flock(lock, fcntl.LOCK_EX)
        for tool, source in sources.items():
            if source is None:
                say(f"no {tool} source found; {tool} is not built")
                continue
            try:
                ensure(tool, source, args.dest, max(1, args.jobs))
            except BuildError as exc:
                print(f"build_tools: {exc}", file=sys.stderr)
                status = max(status, exc.status)
            except (OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
                # a broken build must not stop the other tool's, nor end in a traceback
                print(f"build_tools: building {tool} failed: {exc}", file=sys.stderr)
                status = max(status, 1)
    return status


if __name__ == "__main__":
    sys.exit(main())
