"""Shared test fixtures.

Fake host trees for the knob, journal and inventory tests, so that those tests need neither
root nor particular hardware:

- ``fake_sysroot(...)``: a factory that builds a fake /sys and /proc under ``tmp_path`` and
  returns an ``iolab.knobs.SysRoot`` pointing at it; keyword arguments choose the topology,
  the SMT control value, THP settings, cpufreq, the turbo interface and the IRQs.
- ``lab_topology``: the lab server's 96 logical CPUs on two sockets, ids alternating between
  sockets, the SMT sibling of CPU k being k + 48.
- ``vm_topology``: a 2-CPU virtual machine without SMT.

Topologies are lists of (cpu, core, package) tuples.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.knobs import SysRoot, format_cpulist

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
        _put(root.proc / "cpuinfo", f"processor\t: 0\nmodel name\t: {cpu_model}\n")
        return root

    return build


# -- experiment specs (spec, planner, runner tests) -----------------------------------------

import nbformat as _nbformat
import pytest as _pytest


def write_notebook(path, parameters_source: str) -> None:
    """A minimal experiment notebook whose only code cell is the tagged parameters cell."""
    nb = _nbformat.v4.new_notebook()
    nb.cells = [_nbformat.v4.new_code_cell(parameters_source, metadata={"tags": ["parameters"]})]
    path.parent.mkdir(parents=True, exist_ok=True)
    _nbformat.write(nb, path)


@_pytest.fixture
def make_experiment(tmp_path):
    """Factory: write notebooks/<name>.ipynb and params/<env>/<name>.yaml under tmp_path.

    Returns (notebooks_dir, params_dir).
    """
    notebooks = tmp_path / "notebooks"
    params = notebooks / "params"

    def make(name: str, parameters_source: str, params_files: dict[str, str] | None = None):
        write_notebook(notebooks / f"{name}.ipynb", parameters_source)
        for env, text in (params_files or {}).items():
            (params / env).mkdir(parents=True, exist_ok=True)
            (params / env / f"{name}.yaml").write_text(text)
        return notebooks, params

    return make
