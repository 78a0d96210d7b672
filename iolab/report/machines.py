"""Which experiments were measured on which machine: the environments page's first table.

A machine here is what the host records say of the hardware and system the runs saw: CPU
model, logical CPUs, memory, hypervisor and kernel release. Two campaigns on one machine may
have different fingerprints (the fingerprint also covers the tools each campaign ran), so
they are grouped by these fields, not by fingerprint.

:func:`stored_by_experiment` says the same per experiment, in words, for the experiments
index: its stored runs, in which environments, on how many recorded hosts (fingerprints), so
that no page says by hand what the store says.

Responsible for: grouping the stored campaigns by machine and by experiment and counting
their runs.
A host record of another shape, or one that is not JSON, is a machine of its own, shown as
unreadable naming the file and why: the page is built all the same (``iolab verify`` names
every such problem).

Not responsible for: reading an inventory's details (``iolab.host.inventory``) or collecting it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from iolab.core import registry
from iolab.core.store import Store, campaigns
from iolab.errors import InputError, printable
from iolab.host.inventory import shape_problem
from iolab.report.tables import fmt_int


def machine_words(host: dict, source: str = "host.json") -> str:
    """'AMD EPYC, 2 logical CPUs, 3.8 GiB, KVM, kernel 6.18.44-fc-v669'; for a record of
    another shape (:func:`~iolab.host.inventory.shape_problem`), that it is unreadable,
    naming ``source`` (the file), the key and why."""
    problem = shape_problem(host)
    if problem is not None:
        return unreadable(source, f"key {problem[0]}: {problem[1]}")
    cpu, lscpu = host.get("cpu") or {}, host.get("lscpu") or {}
    mem = host.get("mem_total_kib")
    return ", ".join([str(cpu.get("model_name")), f"{cpu.get('logical_cpus')} logical CPUs",
                      f"{mem / 2**20:.1f} GiB" if mem else "memory unknown",
                      str(lscpu.get("Hypervisor vendor", "no hypervisor reported")),
                      f"kernel {host.get('kernel_release')}"])


def unreadable(source: str | Path, why: str) -> str:
    """A host record the tables cannot read, in one line: the file and why."""
    return printable(f"unreadable host record: {source}: {why}")


def measured_by_machine(data_dir: Path) -> pd.DataFrame:
    """One row per machine: the environments and experiments measured on it, with each
    campaign's stored runs and the day its host was recorded (empty without campaigns)."""
    found: dict[str, list[tuple[str, str, int, str]]] = {}
    for exp, env in campaigns(data_dir):
        store = Store(data_dir, exp, env)
        try:
            host = store.read_host()
        except InputError as exc:  # not JSON, not an object: the page says so and goes on
            why = f"key {exc.key}: {exc.problem}" if exc.key else exc.problem
            host, machine = {}, unreadable(store.host_path, why)
        else:
            if not host:
                continue
            machine = machine_words(host, str(store.host_path))
        runs = store.root / "runs"
        n = sum(1 for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else 0
        found.setdefault(machine, []).append(
            (env, exp, n, str(host.get("collected_at", ""))[:10]))
    return pd.DataFrame([{
        "machine (as recorded)": machine,
        "environment": ", ".join(sorted({c[0] for c in items})),
        "experiments measured (runs)": "; ".join(f"{exp} ({n})" for _, exp, n, _ in items),
        "recorded on": ", ".join(sorted({c[3] for c in items}))}
        for machine, items in found.items()],
        columns=["machine (as recorded)", "environment", "experiments measured (runs)",
                 "recorded on"])


def stored_by_experiment(data_dir: Path) -> dict[str, str]:
    """Per registered experiment, its stored runs in words: "342 runs in h200-pcie5 (1 host)",
    "1,808 runs in 4 environments on 4 hosts: ...", or "no runs stored"."""
    found: dict[str, list[tuple[str, int, str]]] = {name: [] for name in registry.names()}
    for exp, env in campaigns(data_dir):
        if exp not in found:
            continue  # an import's folder: shown apart by the chapters that read it
        store = Store(data_dir, exp, env)
        runs = store.root / "runs"
        n = sum(1 for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else 0
        if n:
            try:
                fingerprint = str((store.read_host() or {}).get("fingerprint"))
            except InputError:  # unreadable: a host of its own (measured_by_machine names it)
                fingerprint = f"unreadable {env}"
            found[exp].append((env, n, fingerprint))
    out = {}
    for exp, items in found.items():
        total = sum(n for _, n, _ in items)
        hosts = len({fp for *_, fp in items})
        on = f"{hosts} host{'s' if hosts != 1 else ''}"
        if not items:
            out[exp] = "no runs stored"
        elif len(items) == 1:
            out[exp] = f"{fmt_int(total)} runs in {items[0][0]} ({on})"
        else:
            each = ", ".join(f"{env} ({fmt_int(n)})" for env, n, _ in items)
            out[exp] = f"{fmt_int(total)} runs in {len(items)} environments on {on}: {each}"
    return out
