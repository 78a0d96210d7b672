"""Which experiments were measured on which machine: the environments page's first table.

A machine here is what the host records say of the hardware and system the runs saw: CPU
model, logical CPUs, memory, hypervisor and kernel release. Two campaigns on one machine may
have different fingerprints (the fingerprint also covers the tools each campaign ran), so
they are grouped by these fields, not by fingerprint.

Responsible for: grouping the stored campaigns by machine and counting their runs.
Not responsible for: reading an inventory's details (``iolab.host.inventory``) or collecting it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from iolab.core.store import Store, campaigns


def machine_words(host: dict) -> str:
    """'AMD EPYC, 2 logical CPUs, 3.8 GiB, KVM, kernel 6.18.44-fc-v669'."""
    cpu, lscpu = host.get("cpu") or {}, host.get("lscpu") or {}
    mem = host.get("mem_total_kib")
    return ", ".join([str(cpu.get("model_name")), f"{cpu.get('logical_cpus')} logical CPUs",
                      f"{mem / 2**20:.1f} GiB" if mem else "memory unknown",
                      str(lscpu.get("Hypervisor vendor", "no hypervisor reported")),
                      f"kernel {host.get('kernel_release')}"])


def measured_by_machine(data_dir: Path) -> pd.DataFrame:
    """One row per machine: the environments and experiments measured on it, with each
    campaign's stored runs and the day its host was recorded (empty without campaigns)."""
    found: dict[str, list[tuple[str, str, int, str]]] = {}
    for exp, env in campaigns(data_dir):
        store = Store(data_dir, exp, env)
        host = store.read_host()
        if not host:
            continue
        runs = store.root / "runs"
        n = sum(1 for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else 0
        found.setdefault(machine_words(host), []).append(
            (env, exp, n, str(host.get("collected_at", ""))[:10]))
    return pd.DataFrame([{
        "machine (as recorded)": machine,
        "environment": ", ".join(sorted({c[0] for c in items})),
        "experiments measured (runs)": "; ".join(f"{exp} ({n})" for _, exp, n, _ in items),
        "recorded on": ", ".join(sorted({c[3] for c in items}))}
        for machine, items in found.items()],
        columns=["machine (as recorded)", "environment", "experiments measured (runs)",
                 "recorded on"])
