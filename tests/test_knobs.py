"""Knobs on a fake sysfs/procfs tree, plus one check of the real THP knob when run as root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from iolab.host import knobs as knobs_module
from iolab.errors import InputError, IolabError
from iolab.host.knobs import (GovernorKnob, IrqAffinityKnob, SmtKnob, SysRoot, ThpDefragKnob,
                              ThpKnob, TurboKnob, format_cpulist, parse_cpulist)
from iolab.host.knobset import make_knobs


def test_cpulist_round_trip():
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert format_cpulist(parse_cpulist("5")) == "5"


@pytest.mark.parametrize("text", ["", "a", "3-1", "1-", "0,,2"])
def test_cpulist_rejects_malformed(text):
    with pytest.raises(ValueError):
        parse_cpulist(text)


def test_make_knobs_names_and_order(fake_sysroot):
    knobs = make_knobs(fake_sysroot())
    assert list(knobs) == ["smt", "thp", "thp_defrag", "turbo", "governor", "irqbalance",
                           "nvme_poll_queues", "irq_affinity", "hugepages", "device_binding"]
    assert all(knob.name == name and knob.allowed for name, knob in knobs.items())


# --- THP -----------------------------------------------------------------------------------

def test_thp_read_apply_restore(fake_sysroot):
    knob = ThpKnob(fake_sysroot())
    assert knob.available() == (True, "")
    before = knob.read()
    assert before == "madvise"
    knob.apply("never")
    assert knob.read() == "never"
    assert knob.matches("never", knob.read())
    knob.restore(before)
    assert knob.read() == "madvise"


def test_thp_defrag_apply_and_restore(fake_sysroot):
    knob = ThpDefragKnob(fake_sysroot())
    assert knob.read() == "madvise"
    knob.apply("defer+madvise")
    assert knob.read() == "defer+madvise"
    knob.restore("madvise")
    assert knob.read() == "madvise"


@pytest.mark.parametrize("cls, bad", [(ThpKnob, "sometimes"), (ThpDefragKnob, "defer+never"),
                                      (SmtKnob, "maybe"), (TurboKnob, True)])
def test_invalid_value_names_knob_and_allowed(fake_sysroot, cls, bad):
    knob = cls(fake_sysroot())
    with pytest.raises(InputError) as info:
        knob.apply(bad)
    assert info.value.key == knob.name
    assert info.value.allowed == knob.allowed
    assert knob.name in str(info.value) and "allowed:" in str(info.value)


def test_thp_absent(fake_sysroot):
    ok, why = ThpKnob(fake_sysroot(thp=None)).available()
    assert not ok and "transparent_hugepage/enabled" in why


# --- SMT -----------------------------------------------------------------------------------

def test_smt_read_apply_restore(fake_sysroot):
    knob = SmtKnob(fake_sysroot())
    before = knob.read()
    assert before == {"control": "on", "active": True}
    knob.apply("off")
    assert knob.read()["control"] == "off"
    assert knob.matches("off", knob.read())
    knob.restore(before)
    assert knob.read() == before


def test_smt_notsupported_is_not_available(fake_sysroot):
    knob = SmtKnob(fake_sysroot(smt="notsupported", topology=[(0, 0, 0), (1, 1, 0)]))
    ok, why = knob.available()
    assert not ok
    assert why == "SMT control reads 'notsupported' (virtual machine or no SMT)"
    assert knob.read() == {"control": "notsupported", "active": False}
    with pytest.raises(IolabError, match="cannot be set on this host"):
        knob.apply("on")


def test_smt_absent_and_forceoff(fake_sysroot):
    ok, why = SmtKnob(fake_sysroot("a", smt=None)).available()
    assert not ok and "no " in why
    ok, why = SmtKnob(fake_sysroot("b", smt="forceoff")).available()
    assert not ok and "reboot" in why


def test_smt_cannot_restore_unwritable_control(fake_sysroot):
    knob = SmtKnob(fake_sysroot())
    with pytest.raises(IolabError, match="only on and off"):
        knob.restore({"control": "forceoff", "active": False})


# --- governor ------------------------------------------------------------------------------

def test_governor_without_cpufreq(fake_sysroot):
    knob = GovernorKnob(fake_sysroot(cpufreq=False))
    ok, why = knob.available()
    assert not ok and why.startswith("no cpufreq in sysfs")
    with pytest.raises(IolabError, match="no cpufreq in sysfs"):
        knob.read()


def test_governor_all_cpus(fake_sysroot):
    knob = GovernorKnob(fake_sysroot())
    before = knob.read()
    assert before == {str(cpu): {"governor": "powersave"} for cpu in range(4)}
    knob.apply("performance")
    after = knob.read()
    assert all(entry == {"governor": "performance"} for entry in after.values())
    assert knob.matches("performance", after)
    knob.restore(before)
    assert knob.read() == before


def test_governor_cpu_subset(fake_sysroot):
    knob = GovernorKnob(fake_sysroot())
    knob.apply({"governor": "performance", "cpus": "1-2"})
    state = knob.read()
    assert [state[c]["governor"] for c in "0123"] == ["powersave", "performance",
                                                      "performance", "powersave"]
    assert knob.matches({"governor": "performance", "cpus": [1, 2]}, state)
    assert not knob.matches("performance", state)


def test_governor_userspace_fixed_frequency(fake_sysroot):
    root = fake_sysroot()
    knob = GovernorKnob(root)
    before = knob.read()
    value = {"governor": "userspace", "khz": 3_000_000, "cpus": [0, 2]}
    knob.apply(value)
    state = knob.read()
    assert state["0"] == state["2"] == {"governor": "userspace", "khz": 3_000_000}
    assert state["1"] == {"governor": "powersave"}
    assert knob.matches(value, state)
    assert (root.cpu_dir / "cpu2/cpufreq/scaling_setspeed").read_text().strip() == "3000000"
    knob.restore(before)
    assert knob.read() == before


def test_governor_restores_a_userspace_frequency(fake_sysroot):
    knob = GovernorKnob(fake_sysroot())
    knob.apply({"governor": "userspace", "khz": 2_000_000})
    saved = knob.read()
    knob.apply({"governor": "userspace", "khz": 3_500_000})
    knob.restore(saved)
    assert knob.read() == saved


@pytest.mark.parametrize("bad, problem", [
    ({"governor": "userspace"}, "needs 'khz'"),
    ({"governor": "userspace", "khz": -5}, "needs 'khz'"),
    ({"governor": "performance", "khz": 3_000_000}, "only goes with"),
    ({"governor": "performance", "speed": 1}, "unknown key"),
    ({"governor": "performance", "cpus": "3-1"}, "backwards"),
    ({"governor": "performance", "cpus": []}, "empty"),
    ({"governor": "Perf ormance"}, "governor name"),
    (42, "invalid value"),
])
def test_governor_rejects_malformed_values(fake_sysroot, bad, problem):
    knob = GovernorKnob(fake_sysroot())
    with pytest.raises(InputError, match=problem) as info:
        knob.apply(bad)
    assert info.value.key == "governor" and info.value.allowed == knob.allowed


def test_governor_rejects_what_the_host_does_not_offer(fake_sysroot):
    knob = GovernorKnob(fake_sysroot())
    before = knob.read()
    with pytest.raises(InputError) as info:
        knob.apply("schedutil")
    assert info.value.allowed == "performance | powersave | userspace"
    active_pstate = GovernorKnob(fake_sysroot("pstate", governors="performance powersave"))
    with pytest.raises(InputError, match="intel_pstate=passive"):
        active_pstate.apply({"governor": "userspace", "khz": 3_000_000})
    with pytest.raises(InputError, match="no cpufreq") as info:
        knob.apply({"governor": "performance", "cpus": "2-9"})
    assert info.value.allowed == "CPUs 0-3"
    with pytest.raises(InputError, match="outside the range") as info:
        knob.apply({"governor": "userspace", "khz": 9_000_000})
    assert info.value.allowed == "800000..4000000 kHz"
    assert knob.read() == before


def test_governor_skips_offline_cpus(fake_sysroot):
    root = fake_sysroot()
    (root.cpu_dir / "online").write_text("0-1\n")
    assert list(GovernorKnob(root).read()) == ["0", "1"]


# --- turbo ---------------------------------------------------------------------------------

def test_turbo_intel_pstate_is_inverted(fake_sysroot):
    root = fake_sysroot(turbo="intel_pstate")
    knob = TurboKnob(root)
    assert knob.read() == "on"
    knob.apply("off")
    assert (root.cpu_dir / "intel_pstate/no_turbo").read_text().strip() == "1"
    assert knob.read() == "off"
    knob.restore("on")
    assert (root.cpu_dir / "intel_pstate/no_turbo").read_text().strip() == "0"


def test_turbo_cpufreq_boost(fake_sysroot):
    root = fake_sysroot(turbo="boost")
    knob = TurboKnob(root)
    assert knob.read() == "on"
    knob.apply("off")
    assert (root.cpu_dir / "cpufreq/boost").read_text().strip() == "0"
    assert knob.read() == "off"
    knob.restore("on")
    assert knob.read() == "on"


def test_turbo_absent(fake_sysroot):
    knob = TurboKnob(fake_sysroot(turbo=None))
    ok, why = knob.available()
    assert not ok and "no_turbo" in why and "boost" in why
    with pytest.raises(IolabError):
        knob.read()


# --- IRQ affinity --------------------------------------------------------------------------

def test_irq_affinity_by_number(fake_sysroot):
    root = fake_sysroot()
    knob = IrqAffinityKnob(root)
    before = knob.read()
    assert before == {"24": "0-1", "40": "0-1", "41": "0-1", "42": "0-1"}
    value = {"irqs": [41, 40], "cpus": "3"}
    knob.apply(value)
    state = knob.read()
    assert state["40"] == state["41"] == "3" and state["24"] == "0-1"
    assert knob.matches(value, state)
    knob.restore(before)
    assert knob.read() == before


def test_irq_affinity_by_pattern(fake_sysroot):
    knob = IrqAffinityKnob(fake_sysroot())
    assert knob.resolve("nvme0q") == [40, 41, 42]
    assert knob.resolve(r"nvme0q[12]$") == [41, 42]
    knob.apply({"irqs": "nvme0q", "cpus": [2, 3]})
    state = knob.read()
    assert [state[irq] for irq in ("24", "40", "41", "42")] == ["0-1", "2-3", "2-3", "2-3"]
    assert knob.matches({"irqs": "nvme", "cpus": "2-3"}, state)


@pytest.mark.parametrize("bad, problem", [
    ({"irqs": [40]}, "exactly the keys"),
    ({"irqs": [], "cpus": "0"}, "non-empty list"),
    ({"irqs": ["40"], "cpus": "0"}, "non-empty list"),
    ({"irqs": "nvme(", "cpus": "0"}, "not a regular expression"),
    ({"irqs": [40], "cpus": "x"}, "CPU number"),
    ({"irqs": [99], "cpus": "0"}, "no IRQ 99"),
    ({"irqs": "mlx5", "cpus": "0"}, "matches no IRQ"),
])
def test_irq_affinity_rejects(fake_sysroot, bad, problem):
    knob = IrqAffinityKnob(fake_sysroot())
    with pytest.raises(InputError, match=problem) as info:
        knob.apply(bad)
    assert info.value.key == "irq_affinity"


def test_irq_affinity_reports_every_refused_irq(fake_sysroot, monkeypatch):
    knob = IrqAffinityKnob(fake_sysroot())
    real_write = knobs_module.write_sysfs

    def managed_irqs_refuse(path: Path, text: str) -> None:
        if path.parent.name in ("41", "42"):
            raise IolabError(f"cannot write '{text}' to {path}: Input/output error")
        real_write(path, text)

    monkeypatch.setattr(knobs_module, "write_sysfs", managed_irqs_refuse)
    with pytest.raises(IolabError, match="2 of 3 IRQ") as info:
        knob.apply({"irqs": "nvme", "cpus": "0"})
    assert "Input/output error" in str(info.value)
    assert knob.read()["40"] == "0"


def test_irq_affinity_same_state_ignores_vanished_irqs(fake_sysroot):
    knob = IrqAffinityKnob(fake_sysroot())
    assert knob.same_state({"40": "0-1", "77": "5"}, {"40": "0,1", "24": "3"})
    assert not knob.same_state({"40": "0-1"}, {"40": "0"})


def test_irq_affinity_without_proc_irq(fake_sysroot):
    ok, why = IrqAffinityKnob(fake_sysroot(irqs={})).available()
    assert not ok and "smp_affinity_list" in why


def test_all_states_are_json(fake_sysroot):
    for knob in make_knobs(fake_sysroot()).values():
        json.dumps(knob.read())


# --- the real host -------------------------------------------------------------------------

REAL_THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.mark.skipif(os.geteuid() != 0 or not os.access(REAL_THP, os.W_OK),
                    reason="needs root and a writable /sys/kernel/mm/transparent_hugepage/enabled")
def test_real_thp_knob_applies_and_restores():
    knob = ThpKnob(SysRoot())
    assert knob.available() == (True, "")
    original = knob.read()
    try:
        knob.apply("never")
        assert knob.read() == "never"
        assert "[never]" in REAL_THP.read_text()
    finally:
        knob.restore(original)
    assert knob.read() == original
