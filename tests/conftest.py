"""Shared test fixtures.

Fake host trees for the knob, journal and inventory tests, so that those tests need neither
root nor particular hardware:

- ``fake_sysroot(...)``: a factory that builds a fake /sys and /proc under ``tmp_path`` and
  returns an ``iolab.host.knobs.SysRoot`` pointing at it; keyword arguments choose the topology,
  the SMT control value, THP settings, cpufreq, the turbo interface and the IRQs.
- ``lab_topology``: the lab server's 96 logical CPUs on two sockets, ids alternating between
  sockets, the SMT sibling of CPU k being k + 48.
- ``vm_topology``: a 2-CPU virtual machine without SMT.

Topologies are lists of (cpu, core, package) tuples.

The book, for the slow tests: ``book_copy`` (session scope) copies the project's tracked files
and replays every notebook there, as `make book` does, and ``html`` builds that book strictly
into a temporary folder and gives the folder of its HTML. tests/test_book.py reads its pages
and tests/test_browser.py loads them in Chromium: one build serves both, and the checkout's
own book/ is never written.

Every test session keeps its locks (``iolab.core.locks``) in a folder of its own
(``$IOLAB_LOCK_DIR``), so that a test never waits for, or takes, the locks of a real campaign
on this host, and its own registry of scratch files (``$IOLAB_STATE_DIR``); every other
``IOLAB_*`` variable of the shell that runs it is put aside for the session, but those that
configure the suite or say where the tools are built (``_KEPT``). The knob locks
are the exception, on purpose: they stay in the system's lock folder, so a test that changes
a real knob (THP) is refused while a real campaign has it changed, never changing it too; a
fake tree's knobs have locks of their own (named by the tree's path), which no real campaign
takes. The suite reads the committed data only: before any test module is imported, the
files git tracks under ``data/`` (and the tidy caches, which are checked against their
digests) are copied into a temporary folder that ``$IOLAB_DATA`` names for every test and every process a test starts.
A user's own environments and runs (``iolab env new``, ``iolab run``) then change no
test's outcome, and no test can write into the checkout's ``data/``. Tests that plan or run
the committed params on this host give them a scratch file in the session's own folder
(:func:`scratch_dir`), so that a user's scratch files do not block them and none is written.

A suite started in the background by a shell without job control (``make test &``, ``nohup``,
some CI runners) inherits SIGINT ignored, and every process it starts would too: the tests
that Ctrl-C an iolab would wait for a signal their child was told to ignore. The session
answers SIGINT as a terminal's foreground process does, so its children start with the
default action.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

_SESSION_DATA: list[Path] = []


def _committed_data(into: Path) -> None:
    """Copy the committed files of ``data/`` (all of it outside a git checkout) and the
    caches into ``into``."""
    from iolab.paths import REPO_ROOT

    source = REPO_ROOT / "data"
    listed = subprocess.run(["git", "ls-files", "-z", "data"], cwd=REPO_ROOT,
                            capture_output=True)
    names = ([n.decode() for n in listed.stdout.split(b"\0") if n]
             if listed.returncode == 0 else
             [str(f.relative_to(REPO_ROOT)) for f in source.rglob("*") if f.is_file()])
    if (source / "cache").is_dir():
        names += [str(f.relative_to(REPO_ROOT)) for f in (source / "cache").rglob("*")
                  if f.is_file() and not f.is_symlink()]
    for name in names:
        out = into / Path(name).relative_to("data")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, out)   # the times too: the caches compare them


# variables that configure the suite or say where this machine's tools are built; every
# other IOLAB_* variable of the user's shell (IOLAB_SKIP_CORRUPT, IOLAB_EXPERIMENTS,
# IOLAB_READS_LOG, IOLAB_RUN, ...) would change what iolab does in a test, so none reaches one
_KEPT = ("IOLAB_TOOLS_DIR", "IOLAB_BUILD_DIR", "IOLAB_TOOLS_SRC", "IOLAB_CHROMIUM",
         "IOLAB_AISIO_DIR", "IOLAB_SHARED_DIR", "IOLAB_FUZZ_")
_SAVED: dict[str, str] = {}


def pytest_configure(config):
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for var in [v for v in os.environ if v.startswith("IOLAB_") and not v.startswith(_KEPT)]:
        _SAVED[var] = os.environ.pop(var)
    root = Path(tempfile.mkdtemp(prefix="iolab-test-"))
    _SESSION_DATA.append(root)
    _committed_data(root / "data")
    for folder in ("scratch", "locks", "state"):
        (root / folder).mkdir()
    os.environ.update(IOLAB_DATA=str(root / "data"), IOLAB_LOCK_DIR=str(root / "locks"),
                      IOLAB_STATE_DIR=str(root / "state"))


def committed_environments() -> set[str]:
    """The environments whose params files git tracks (a user's own ones left out)."""
    from iolab.paths import PARAMS_DIR, REPO_ROOT

    listed = subprocess.run(["git", "ls-files", str(PARAMS_DIR)], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout ({listed.stderr.strip()}): the committed "
                    "environments are unknown")
    return {Path(f).relative_to(PARAMS_DIR.relative_to(REPO_ROOT)).parts[0]
            for f in listed.stdout.splitlines()}


def scratch_dir() -> Path:
    """The session's folder for the scratch files of campaigns that tests run with the
    committed params (``--set target_path=...``): a user's own scratch files, at the paths
    those params name, are never a test's business."""
    return Path(os.environ["IOLAB_DATA"]).parent / "scratch"


def pytest_unconfigure(config):
    while _SESSION_DATA:
        shutil.rmtree(_SESSION_DATA.pop(), ignore_errors=True)
    for var in ("IOLAB_DATA", "IOLAB_LOCK_DIR", "IOLAB_STATE_DIR"):
        os.environ.pop(var, None)
    os.environ.update(_SAVED)


def copy_project(to: Path) -> None:
    """The project's tracked files as they are in the working tree (a clone would miss
    uncommitted work), links kept as links."""
    from iolab.paths import REPO_ROOT

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src, dst = REPO_ROOT / rel, to / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)


@pytest.fixture(scope="session")
def book_copy(tmp_path_factory) -> Path:
    """A copy of the project's tracked files whose notebooks are replayed (as `make book`
    does, from the committed data) into the copy's book/: the checkout's own book/, its
    build record and a user's environment pages are never touched. Slow (papermill)."""
    import sys

    root = tmp_path_factory.mktemp("project") / "p"
    copy_project(root)
    # force: this is the test of replaying, so nothing is taken as up to date
    check = ("from iolab.report.book import environment_pages, render, rendered\n"
             "written = render(log=lambda *_: None, force=True)\n"
             "assert set(written) == set(rendered().values()) | "
             "{p for *_, p in environment_pages()}, written\n")
    proc = subprocess.run([sys.executable, "-c", check], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return root


@pytest.fixture(scope="session")
def html(book_copy, tmp_path_factory):
    """The book of :func:`book_copy`, built with -W -n --keep-going into a temporary folder;
    the path of its HTML. Slow (papermill and Sphinx): only tests marked slow use it."""
    import sys

    out = tmp_path_factory.mktemp("book")
    exe = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(exe), "build", "--all", "-W", "-n", "--keep-going",
                           "--path-output", str(out), str(book_copy / "book")],
                          cwd=book_copy, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out / "_build" / "html"


from iolab.host.knobs import SysRoot, format_cpulist

DEFAULT_IRQS = {
    24: "IO-APIC 5-edge ACPI:Ged",
    40: "PCI-MSIX-0000:00:04.0 0-edge nvme0q0",
    41: "PCI-MSIX-0000:00:04.0 1-edge nvme0q1",
    42: "PCI-MSIX-0000:00:04.0 2-edge nvme0q2",
}


@pytest.fixture
def lab_topology() -> list[tuple[int, int, int]]:
    out = []
    for cpu in range(96):
        first_thread = cpu % 48
        out.append((cpu, first_thread // 2, first_thread % 2))
    return out


@pytest.fixture
def vm_topology() -> list[tuple[int, int, int]]:
    return [(0, 0, 0), (1, 1, 0)]


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@pytest.fixture
def fake_sysroot(tmp_path):
    """Factory: ``fake_sysroot(name="host", topology=..., smt="on", ...) -> SysRoot``.

    ``smt``, ``thp``, ``thp_defrag`` or ``turbo`` set to None leave that file out;
    ``cpufreq=False`` leaves out every cpu*/cpufreq folder; ``turbo`` is "intel_pstate"
    (no_turbo, inverted) or "boost" (cpufreq/boost); ``irqs`` maps IRQ number to the text
    after the counts in /proc/interrupts.
    """

    def build(name: str = "host", *, topology=None, smt: str | None = "on",
              thp: str | None = "always [madvise] never",
              thp_defrag: str | None = "always defer defer+madvise [madvise] never",
              cpufreq: bool = True, governor: str = "powersave",
              governors: str = "performance powersave userspace",
              turbo: str | None = "intel_pstate", irqs: dict[int, str] | None = None,
              irq_cpus: str = "0-1", mem_total_kib: int = 2_113_871_872,
              cpu_model: str = "Intel(R) Xeon(R) Gold 6442Y") -> SysRoot:
        base = tmp_path / name
        root = SysRoot(sys=base / "sys", proc=base / "proc")
        cpu_dir = root.cpu_dir
        topology = topology or [(0, 0, 0), (1, 0, 0), (2, 1, 0), (3, 1, 0)]
        cores: dict[tuple[int, int], list[int]] = {}
        for cpu, core, package in topology:
            cores.setdefault((package, core), []).append(cpu)
        for cpu, core, package in topology:
            topo = cpu_dir / f"cpu{cpu}/topology"
            _put(topo / "core_id", str(core))
            _put(topo / "physical_package_id", str(package))
            _put(topo / "thread_siblings_list", format_cpulist(cores[(package, core)]))
            if cpufreq:
                freq = cpu_dir / f"cpu{cpu}/cpufreq"
                _put(freq / "scaling_governor", governor)
                _put(freq / "scaling_available_governors", governors)
                _put(freq / "scaling_setspeed", "<unsupported>")
                _put(freq / "cpuinfo_min_freq", "800000")
                _put(freq / "cpuinfo_max_freq", "4000000")
        _put(cpu_dir / "online", format_cpulist([cpu for cpu, _, _ in topology]))
        if smt is not None:
            _put(cpu_dir / "smt/control", smt)
            threads = max(len(c) for c in cores.values())
            _put(cpu_dir / "smt/active", "1" if smt == "on" and threads > 1 else "0")
        if turbo == "intel_pstate":
            _put(cpu_dir / "intel_pstate/no_turbo", "0")
        elif turbo == "boost":
            _put(cpu_dir / "cpufreq/boost", "1")
        _put(root.sys / "module/nvme/parameters/poll_queues", "0")
        mm = root.sys / "kernel/mm/transparent_hugepage"
        if thp is not None:
            _put(mm / "enabled", thp)
        if thp_defrag is not None:
            _put(mm / "defrag", thp_defrag)

        irqs = DEFAULT_IRQS if irqs is None else irqs
        n_cpus = len(topology)
        lines = ["     " + " ".join(f"CPU{cpu:<7}" for cpu, _, _ in topology)]
        for irq, description in irqs.items():
            _put(root.proc / f"irq/{irq}/smp_affinity_list", irq_cpus)
            lines.append(f"{irq:>4}: " + " ".join(["0"] * n_cpus) + f"  {description}")
        lines.append(" NMI: " + " ".join(["0"] * n_cpus) + "  Non-maskable interrupts")
        _put(root.proc / "interrupts", "\n".join(lines))
        _put(root.proc / "meminfo", f"MemTotal:       {mem_total_kib} kB\nMemFree:  1000 kB")
        _put(root.proc / "cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro quiet")
        _put(root.proc / "sys/vm/nr_hugepages", "0")
        _put(root.proc / "self/mountinfo", "22 1 254:1 / / rw,relatime shared:1 - ext4 "
                                           "/dev/vda1 rw")
        _put(root.proc / "cpuinfo", f"processor\t: 0\nmodel name\t: {cpu_model}\n")
        return root

    return build


@pytest.fixture
def refuse_writes():
    """Factory: ``refuse_writes(path, how)`` makes a (fake) knob's file refuse writes, and
    returns the function that undoes it (also called when the test ends). ``how``:
    ``"read-only"`` (an immutable file for root, whom a file's mode does not stop; skipped
    where the file system has none) or ``"a folder"`` in the file's place, which cannot be
    read either."""
    import subprocess

    undos: list = []

    def make(path: Path, how: str = "read-only"):
        if how == "a folder":
            text = path.read_text()
            path.unlink()
            path.mkdir()

            def undo() -> None:
                path.rmdir()
                path.write_text(text)
        elif os.geteuid() == 0:
            if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
                pytest.skip("this file system has no immutable files (chattr +i)")

            def undo() -> None:
                subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(0o444)

            def undo() -> None:
                path.chmod(0o644)

        def once() -> None:
            if undo in undos:
                undos.remove(undo)
                undo()

        undos.append(undo)
        return once

    yield make
    for undo in undos:
        undo()


# -- a small experiment for the spec, planner and store tests ------------------------------

from iolab.core.experiment import Experiment, Metric  # noqa: E402
from iolab.core.schema import Choice, Int, Text  # noqa: E402
from iolab.tools.base import CpuRequest, Invocation  # noqa: E402


class Demo(Experiment):
    """fio with two engines, a concurrency and a THP knob; never run by the tests that use it."""

    name = "demo"
    title = "Demo"
    label = "sec-demo"
    chapter = "demo"
    settings = {"tool": Choice("fio", default="fio"), "runtime_s": Int(1, 3600),
                "ramp_s": Int(0, 60, default=0),
                "target": Text(default="/tmp/demo.dat", help="the file fio reads")}
    variables = {"engine": Choice("psync", "io_uring"), "concurrency": Int(1, 1024),
                 "thp": Choice("asis", "always", "never"), "pinned": Choice(False, True)}
    knob_variables = {"thp": "thp"}
    metrics = {"iops": Metric("IOPS", ("fio.iops",))}

    def invocation(self, settings, point):
        options = {"filename": settings["target"], "rw": "randread", "ioengine": point["engine"],
                   "iodepth": point["concurrency"], "runtime": f"{settings['runtime_s']}s",
                   "ramp_time": f"{settings['ramp_s']}s"}
        if point["pinned"]:
            options["cpus_allowed"] = CpuRequest(1)
        return Invocation("fio", options)


def alias_bomb(levels: int) -> str:
    """A YAML flow list whose aliases stand for 10**levels values ("billion laughs" at 9):
    each anchor lists the one before ten times. A few hundred bytes."""
    items = ["&a0 [x, x, x, x, x, x, x, x, x, x]"]
    items += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


DEMO_PARAMS = """experiment: demo
tool: fio
runtime_s: 30
ramp_s: 2
repetitions: 5
base: {engine: psync, concurrency: 16, thp: asis, pinned: false}
grids:
  conc: {vary: {engine: [psync, io_uring], concurrency: [1, 4, 16]}}
  thp: {vary: {thp: [always, never]}}
exclusions: [{when: {engine: io_uring, concurrency: 1}, why: not interesting}]
"""


@pytest.fixture
def demo():
    return Demo()


@pytest.fixture
def params_dir(tmp_path):
    """Factory: ``params_dir({env: yaml_text, ...}, name="demo")`` writes params files under
    tmp_path/params and returns that folder."""
    root = tmp_path / "params"

    def write(files: dict[str, str], name: str = "demo") -> Path:
        for env, text in files.items():
            (root / env).mkdir(parents=True, exist_ok=True)
            (root / env / f"{name}.yaml").write_text(text)
        return root

    return write


# -- the tools `make tools` builds ------------------------------------------------------------

def _tools_dir() -> Path:
    # taken once, before any test points $IOLAB_TOOLS_DIR elsewhere to hide the builds
    from iolab.tools import builds
    return builds.tools_dir()


TOOLS_DIR = _tools_dir()
BUILT = {"spdk": Path("spdk") / "build" / "examples" / "bdevperf",
         "xnvme": Path("xnvme") / "bin" / "xnvmeperf"}


def _built(kind: str) -> Path:
    path = TOOLS_DIR / BUILT[kind]
    if not path.is_file():
        pytest.skip(f"no {kind} build in {TOOLS_DIR}: 'make test' builds it when the sources "
                    "are at hand (see the set-up's message), or run 'make tools TOOLS_SRC=DIR'")
    return TOOLS_DIR / kind if kind == "spdk" else path


@pytest.fixture
def built_spdk() -> Path:
    """The SPDK tree `make tools` built (the test skips, saying why, without one)."""
    return _built("spdk")


@pytest.fixture
def built_xnvmeperf() -> Path:
    """The xnvmeperf `make tools` built (the test skips, saying why, without one)."""
    return _built("xnvme")


def drive(launch, run_dir: Path, timeout: float = 120):
    """Run one Launch's driver the way the runner does: its inputs written into ``run_dir``,
    run there, stdout and stderr kept as the files ``stdout`` and ``stderr``. Returns the
    CompletedProcess (output as bytes)."""
    import subprocess
    run_dir.mkdir(parents=True, exist_ok=True)
    for name, text in launch.inputs.items():
        (run_dir / name).write_text(text)
    done = subprocess.run(launch.argv, cwd=run_dir, capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    (run_dir / "stdout").write_bytes(done.stdout)
    (run_dir / "stderr").write_bytes(done.stderr)
    return done


# -- a real single-node Slurm ------------------------------------------------------------------

def _local_slurm():
    import importlib.util

    from iolab.paths import REPO_ROOT

    path = REPO_ROOT / "scripts" / "local_slurm.py"
    spec = importlib.util.spec_from_file_location("local_slurm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def slurm_cluster():
    """munged, slurmctld and slurmd of Debian's packages, started by scripts/local_slurm.py on
    free ports with their state in a temporary folder, stopped afterwards. Yields the
    environment (SLURM_CONF added) that points Slurm's commands at it. Skips, saying why,
    without root or the packages; a cluster that does not come up fails, with its logs."""
    import tempfile

    local = _local_slurm()
    why = local.missing()
    if why:
        pytest.skip(why)
    parent = Path(tempfile.mkdtemp(prefix="iolab-slurm-", dir="/tmp"))
    parent.chmod(0o755)  # munged refuses a socket below a folder not everybody may search
    root = parent / "cluster"
    try:
        extra = local.start(root)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield {**os.environ, **extra}
    finally:
        local.stop(root)
        parent.rmdir()


@pytest.fixture
def quiet_clock(monkeypatch):
    """The time stamps the quiet collector's snapshots take, in the order given (a fake
    /proc's ticks must fit the time between them)."""
    from iolab.collectors import quiet
    stamps: list[int] = []
    monkeypatch.setattr(quiet.time, "time_ns", lambda: stamps.pop(0))
    return stamps
