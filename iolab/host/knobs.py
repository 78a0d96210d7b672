"""System knobs that change storage I/O results, one small class per knob.

Responsible for: saying whether this host can control a knob (and why not), reading its
current state as JSON-ready data, validating a requested value, writing it to sysfs/procfs,
writing a previously read state back, judging whether a read-back state is what was
requested (``matches``) or what was saved (``same_state``), and, for a knob that one sysfs
write sets, the shell command that writes a state back by hand (``restore_command``).
Not responsible for: remembering what was changed or undoing it after a crash
(``iolab.host.journal``), deciding which points need which knob (``iolab.core.planner``), or trusting
its own writes: ``apply`` writes and the caller reads back, because the kernel may clamp,
round or silently ignore a value.

Every path comes from a ``SysRoot``, so tests run the same code against a fake tree.
``read_sysfs``, ``write_sysfs`` and ``sysfs_writable`` are shared with the knobs of other modules
(``binding``, ``hugepages``, ``kernel_modules``).

Knob values (what ``apply`` takes) and states (what ``read`` returns):

==============  ===========================================  ==================================
knob            value                                        state
==============  ===========================================  ==================================
thp             "always" | "madvise" | "never"               the selected word, e.g. "madvise"
thp_defrag      "always" | "defer" | "defer+madvise" |       the selected word
                "madvise" | "never"
smt             "on" | "off"                                 {"control": "on", "active": true}
governor        "performance" (every CPU with cpufreq), or   {"0": {"governor": "powersave"},
                {"governor": "performance",                   "1": {"governor": "userspace",
                 "cpus": "0-3,8" or [0, 1, 2, 3, 8]},               "khz": 3000000}, ...}
                {"governor": "userspace", "khz": 3000000,     one entry per online CPU with
                 "cpus": ...}  ("khz" required with, and      cpufreq; "khz" (scaling_setspeed)
                 only with, userspace; "cpus" optional:       only for userspace CPUs
                 default every CPU with cpufreq)
turbo           "on" | "off"                                 "on" | "off"
irq_affinity    {"irqs": [24, 25] or "nvme0q",               {"24": "0-3", "25": "0-95", ...}
                 "cpus": "0-3" or [0, 1, 2, 3]}               every IRQ in /proc/irq
                a string "irqs" is a regular expression
                searched in the /proc/interrupts line
                (chip, hw irq, type and action names)
==============  ===========================================  ==================================
"""

from __future__ import annotations

import os
import re
import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iolab.checks import is_positive_int
from iolab.errors import InputError, IolabError


@dataclass(frozen=True)
class SysRoot:
    """Where sysfs and procfs live; tests point these at a fake tree."""

    sys: Path = Path("/sys")
    proc: Path = Path("/proc")

    @property
    def cpu_dir(self) -> Path:
        return self.sys / "devices/system/cpu"


def parse_cpulist(text: str) -> list[int]:
    """Parse a kernel CPU list such as ``0-3,8`` into sorted CPU ids (ValueError if malformed)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"'{part}' is not a CPU number or range in '{text}'")
        lo, hi = int(first), int(last) if dash else int(first)
        if hi < lo:
            raise ValueError(f"range '{part}' runs backwards in '{text}'")
        cpus.update(range(lo, hi + 1))
    return sorted(cpus)


def format_cpulist(cpus: list[int] | set[int]) -> str:
    """The kernel's compact form of a CPU set: [0, 1, 2, 3, 8] -> ``0-3,8``."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)


def read_sysfs(path: Path) -> str:
    """A sysfs/procfs file's text, stripped; IolabError naming the file if it cannot be read."""
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise IolabError(f"cannot read {path}: {exc.strerror or exc}") from exc


def write_sysfs(path: Path, text: str) -> None:
    """Write one value to a sysfs/procfs file; IolabError naming the value and file if refused."""
    # sysfs reports a rejected value as an errno from write() or close(); both are inside the try.
    try:
        with open(path, "w") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        raise IolabError(f"cannot write '{text}' to {path}: {exc.strerror or exc}") from exc


def _echo(text: str, path: Path) -> str:
    """The shell command that writes ``text`` to ``path``, as a user would type it."""
    return f"echo {shlex.quote(text)} > {shlex.quote(str(path))}"


def sysfs_writable(path: Path) -> tuple[bool, str]:
    """(True, "") if this process may write ``path``, else (False, why): a knob's ``available``."""
    if not os.access(path, os.W_OK):
        return False, f"{path} is not writable (needs root and a read-write /sys)"
    return True, ""


def _cpus_value(value: Any) -> list[int]:
    """A CPU set given as a cpulist string or a list of ids; ValueError when neither."""
    if isinstance(value, str):
        cpus = parse_cpulist(value)
    elif isinstance(value, list) and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
                                         for c in value):
        cpus = sorted(set(value))
    else:
        raise ValueError(f"'cpus' must be a CPU list such as '0-3,8' or a list of CPU ids, "
                         f"got {value!r}")
    if not cpus:
        raise ValueError("'cpus' is empty")
    return cpus


class Knob(ABC):
    """One controllable system setting.

    Subclasses set ``name`` and ``allowed`` and implement ``available``, ``read``, ``validate``
    and ``_write``; ``restore`` writes only when the state differs, so it is idempotent.
    """

    name: str
    allowed: str

    def __init__(self, root: SysRoot | None = None) -> None:
        self.root = root or SysRoot()

    @abstractmethod
    def available(self) -> tuple[bool, str]:
        """(True, "") when this host lets us control the knob, else (False, why not)."""

    @abstractmethod
    def read(self) -> Any:
        """The current state, JSON-ready; raises IolabError when there is nothing to read."""

    @abstractmethod
    def validate(self, value: Any) -> Any:
        """The value in normal form; raises InputError naming the knob and what is allowed."""

    @abstractmethod
    def _write(self, value: Any) -> None:
        """Write a validated value."""

    def apply(self, value: Any) -> None:
        """Validate and write ``value``; the caller reads back to learn what the kernel did."""
        value = self.validate(value)
        ok, why = self.available()
        if not ok:
            raise IolabError(f"knob '{self.name}' cannot be set on this host: {why}")
        self._write(value)

    def restore(self, state: Any) -> None:
        """Write back a state that ``read`` returned; does nothing when it is already in place."""
        if not self.same_state(state, self.read()):
            self._restore(state)

    def _restore(self, state: Any) -> None:
        self.apply(state)

    def restore_command(self, state: Any) -> str | None:
        """The shell command that writes ``state`` back by hand, for a knob left changed;
        None where it takes more than one write (``iolab restore`` does those)."""
        return None

    def matches(self, value: Any, state: Any) -> bool:
        """Whether a read-back ``state`` shows the requested ``value`` in effect."""
        return self.validate(value) == state

    def same_state(self, expected: Any, actual: Any) -> bool:
        """Whether ``actual`` is the saved state ``expected`` (used to verify a restore)."""
        return expected == actual

    def _invalid(self, problem: str) -> InputError:
        return InputError(None, self.name, problem, self.allowed)


class _BracketChoiceKnob(Knob):
    """A sysfs file listing its choices, the selected one in brackets (``a [b] c``)."""

    relpath: str
    choices: tuple[str, ...]

    def __init__(self, root: SysRoot | None = None) -> None:
        super().__init__(root)
        self.allowed = " | ".join(self.choices)

    @property
    def path(self) -> Path:
        return self.root.sys / self.relpath

    def available(self) -> tuple[bool, str]:
        if not self.path.exists():
            return False, f"no {self.path} (kernel without transparent hugepages)"
        return sysfs_writable(self.path)

    def read(self) -> str:
        text = read_sysfs(self.path)
        selected = re.search(r"\[([^\]]+)\]", text)
        # Fake trees in tests hold just the value, without the list of choices.
        return selected.group(1) if selected else text

    def validate(self, value: Any) -> str:
        if value not in self.choices:
            raise self._invalid(f"invalid value {value!r}")
        return value

    def _write(self, value: str) -> None:
        write_sysfs(self.path, value)

    def restore_command(self, state: Any) -> str | None:
        return _echo(state, self.path) if state in self.choices else None


class ThpKnob(_BracketChoiceKnob):
    name = "thp"
    relpath = "kernel/mm/transparent_hugepage/enabled"
    choices = ("always", "madvise", "never")


class ThpDefragKnob(_BracketChoiceKnob):
    name = "thp_defrag"
    relpath = "kernel/mm/transparent_hugepage/defrag"
    choices = ("always", "defer", "defer+madvise", "madvise", "never")


class SmtKnob(Knob):
    name = "smt"
    allowed = "on | off"

    # Control values the kernel shows but refuses to change at run time.
    _FIXED = {
        "notsupported": "virtual machine or no SMT",
        "notimplemented": "kernel built without SMT control",
        "forceoff": "disabled with nosmt=force at boot; only a reboot changes it",
    }

    @property
    def control_path(self) -> Path:
        return self.root.cpu_dir / "smt/control"

    @property
    def active_path(self) -> Path:
        return self.root.cpu_dir / "smt/active"

    def available(self) -> tuple[bool, str]:
        if not self.control_path.exists():
            return False, f"no {self.control_path} (kernel without SMT control)"
        control = read_sysfs(self.control_path)
        if control in self._FIXED:
            return False, f"SMT control reads '{control}' ({self._FIXED[control]})"
        return sysfs_writable(self.control_path)

    def read(self) -> dict[str, Any]:
        active = read_sysfs(self.active_path) == "1" if self.active_path.exists() else None
        return {"control": read_sysfs(self.control_path), "active": active}

    def validate(self, value: Any) -> str:
        if value not in ("on", "off"):
            raise self._invalid(f"invalid value {value!r}")
        return value

    def _write(self, value: str) -> None:
        write_sysfs(self.control_path, value)

    def matches(self, value: Any, state: Any) -> bool:
        # The control write is synchronous (siblings are on- or offlined before it returns),
        # so the control value read back is the evidence; "active" is recorded for the reader.
        return state.get("control") == self.validate(value)

    def _restore(self, state: dict[str, Any]) -> None:
        control = state.get("control")
        if control not in ("on", "off"):
            raise IolabError(f"knob 'smt': cannot write the control back to '{control}'; "
                             f"only on and off are writable")
        self.apply(control)

    def restore_command(self, state: Any) -> str | None:
        control = state.get("control") if isinstance(state, dict) else None
        return _echo(control, self.control_path) if control in ("on", "off") else None


class GovernorKnob(Knob):
    name = "governor"
    allowed = ("a governor name for every CPU, or {'governor': name, 'cpus': '0-3' or [0, 1, 2, 3] "
               "(default: every CPU with cpufreq), 'khz': fixed frequency (with 'userspace' only, "
               "required there)}")

    def _online(self) -> set[int] | None:
        online = self.root.cpu_dir / "online"
        return set(parse_cpulist(read_sysfs(online))) if online.exists() else None

    def _cpufreq_dirs(self) -> dict[int, Path]:
        """cpufreq folder of every online CPU that has one, by CPU id."""
        # An offline CPU keeps its cpufreq link but reading through it fails with EBUSY.
        online = self._online()
        dirs = {}
        for cpu_dir in self.root.cpu_dir.glob("cpu[0-9]*"):
            cpu = cpu_dir.name[3:]
            if (cpu.isdigit() and (cpu_dir / "cpufreq").is_dir()
                    and (online is None or int(cpu) in online)):
                dirs[int(cpu)] = cpu_dir / "cpufreq"
        return dict(sorted(dirs.items()))

    def _no_cpufreq(self) -> str:
        return (f"no cpufreq in sysfs (no {self.root.cpu_dir}/cpu*/cpufreq: virtual machine or "
                f"no cpufreq driver loaded)")

    def available(self) -> tuple[bool, str]:
        dirs = self._cpufreq_dirs()
        if not dirs:
            return False, self._no_cpufreq()
        return sysfs_writable(next(iter(dirs.values())) / "scaling_governor")

    def read(self) -> dict[str, dict[str, Any]]:
        dirs = self._cpufreq_dirs()
        if not dirs:
            raise IolabError(f"knob 'governor': {self._no_cpufreq()}")
        state = {}
        for cpu, freq_dir in dirs.items():
            entry: dict[str, Any] = {"governor": read_sysfs(freq_dir / "scaling_governor")}
            if entry["governor"] == "userspace":
                entry["khz"] = int(read_sysfs(freq_dir / "scaling_setspeed"))
            state[str(cpu)] = entry
        return state

    def validate(self, value: Any) -> dict[str, Any]:
        if isinstance(value, str):
            value = {"governor": value}
        if not isinstance(value, dict):
            raise self._invalid(f"invalid value {value!r}")
        unknown = sorted(set(value) - {"governor", "cpus", "khz"})
        if unknown:
            raise self._invalid(f"unknown key(s) {', '.join(unknown)} in {value!r}")
        governor = value.get("governor")
        if not isinstance(governor, str) or not re.fullmatch(r"[a-z0-9_]+", governor):
            raise self._invalid(f"'governor' must be a governor name, got {governor!r}")
        normal: dict[str, Any] = {"governor": governor, "cpus": None}
        if value.get("cpus") is not None:
            try:
                normal["cpus"] = _cpus_value(value["cpus"])
            except ValueError as exc:
                raise self._invalid(str(exc)) from None
        khz = value.get("khz")
        if governor == "userspace":
            if not is_positive_int(khz):
                raise self._invalid(f"'userspace' needs 'khz', a positive whole number of kHz; "
                                    f"got {khz!r}")
            normal["khz"] = khz
        elif khz is not None:
            raise self._invalid(f"'khz' only goes with the 'userspace' governor, not '{governor}'")
        return normal

    def _targets(self, cpus: list[int] | None) -> dict[int, Path]:
        dirs = self._cpufreq_dirs()
        if cpus is None:
            return dirs
        missing = [cpu for cpu in cpus if cpu not in dirs]
        if missing:
            raise InputError(None, self.name,
                             f"CPU(s) {format_cpulist(missing)} have no cpufreq "
                             f"(offline or absent)",
                             f"CPUs {format_cpulist(list(dirs))}")
        return {cpu: dirs[cpu] for cpu in cpus}

    def _check_host(self, value: dict[str, Any], targets: dict[int, Path]) -> None:
        """Refuse a governor or frequency this host does not offer, before anything is written."""
        for cpu, freq_dir in targets.items():
            offered = read_sysfs(freq_dir / "scaling_available_governors").split()
            if value["governor"] not in offered:
                # The common surprise on Intel servers, so the message names the way out.
                hint = (" (intel_pstate in active mode offers only performance and powersave; "
                        "boot with intel_pstate=passive for userspace)"
                        if value["governor"] == "userspace" else "")
                raise InputError(None, self.name, f"governor '{value['governor']}' is not offered "
                                 f"for CPU {cpu}{hint}", " | ".join(offered))
            if "khz" in value and (freq_dir / "cpuinfo_min_freq").exists():
                lo = int(read_sysfs(freq_dir / "cpuinfo_min_freq"))
                hi = int(read_sysfs(freq_dir / "cpuinfo_max_freq"))
                if not lo <= value["khz"] <= hi:
                    raise InputError(None, self.name,
                                     f"{value['khz']} kHz is outside the range of CPU {cpu}",
                                     f"{lo}..{hi} kHz")

    def _write(self, value: dict[str, Any]) -> None:
        targets = self._targets(value["cpus"])
        self._check_host(value, targets)
        for freq_dir in targets.values():
            write_sysfs(freq_dir / "scaling_governor", value["governor"])
            if "khz" in value:
                write_sysfs(freq_dir / "scaling_setspeed", str(value["khz"]))

    def matches(self, value: Any, state: Any) -> bool:
        value = self.validate(value)
        cpus = value["cpus"] if value["cpus"] is not None else [int(cpu) for cpu in state]
        wanted = {key: value[key] for key in ("governor", "khz") if key in value}
        return all(state.get(str(cpu)) == wanted for cpu in cpus)

    def _restore(self, state: dict[str, dict[str, Any]]) -> None:
        current = self.read()
        for cpu, entry in state.items():
            if current.get(cpu) == entry:
                continue
            if cpu not in current:
                raise IolabError(f"knob 'governor': CPU {cpu} has no cpufreq now (offline?), "
                                 f"cannot restore {entry}")
            self._write(self.validate({**entry, "cpus": [int(cpu)]}))


class TurboKnob(Knob):
    name = "turbo"
    allowed = "on | off"

    def _interface(self) -> tuple[Path, bool] | None:
        """The turbo switch and whether it is inverted (intel_pstate's no_turbo)."""
        no_turbo = self.root.cpu_dir / "intel_pstate/no_turbo"
        if no_turbo.exists():
            return no_turbo, True
        boost = self.root.cpu_dir / "cpufreq/boost"
        if boost.exists():
            return boost, False
        return None

    def _missing(self) -> str:
        return "no intel_pstate/no_turbo or cpufreq/boost in sysfs (no turbo control)"

    def available(self) -> tuple[bool, str]:
        interface = self._interface()
        if interface is None:
            return False, self._missing()
        return sysfs_writable(interface[0])

    def read(self) -> str:
        interface = self._interface()
        if interface is None:
            raise IolabError(f"knob 'turbo': {self._missing()}")
        path, inverted = interface
        flag = read_sysfs(path) == "1"
        return "on" if flag != inverted else "off"

    def validate(self, value: Any) -> str:
        if value not in ("on", "off"):
            raise self._invalid(f"invalid value {value!r}")
        return value

    def _write(self, value: str) -> None:
        path, inverted = self._interface()
        write_sysfs(path, "1" if (value == "on") != inverted else "0")

    def restore_command(self, state: Any) -> str | None:
        interface = self._interface()
        if interface is None or state not in ("on", "off"):
            return None
        path, inverted = interface
        return _echo("1" if (state == "on") != inverted else "0", path)


class IrqAffinityKnob(Knob):
    name = "irq_affinity"
    allowed = ("{'irqs': [IRQ numbers] or a regular expression searched in /proc/interrupts, "
               "'cpus': '0-3' or [0, 1, 2, 3]}")

    @property
    def irq_dir(self) -> Path:
        return self.root.proc / "irq"

    def _irqs(self) -> list[int]:
        if not self.irq_dir.is_dir():
            return []
        return sorted(int(d.name) for d in self.irq_dir.iterdir()
                      if d.name.isdigit() and (d / "smp_affinity_list").exists())

    def available(self) -> tuple[bool, str]:
        irqs = self._irqs()
        if not irqs:
            return False, f"no IRQ with an smp_affinity_list under {self.irq_dir}"
        return sysfs_writable(self.irq_dir / str(irqs[0]) / "smp_affinity_list")

    def read(self) -> dict[str, str]:
        irqs = self._irqs()
        if not irqs:
            raise IolabError(f"knob 'irq_affinity': no IRQ with an smp_affinity_list under "
                             f"{self.irq_dir}")
        return {str(irq): read_sysfs(self.irq_dir / str(irq) / "smp_affinity_list") for irq in irqs}

    def validate(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict) or set(value) != {"irqs", "cpus"}:
            raise self._invalid(f"invalid value {value!r}: needs exactly the keys 'irqs' "
                                f"and 'cpus'")
        irqs = value["irqs"]
        if isinstance(irqs, str):
            if not irqs:
                raise self._invalid("'irqs' pattern is empty")
            try:
                re.compile(irqs)
            except re.error as exc:
                raise self._invalid(f"'irqs' pattern {irqs!r} is not a regular expression: "
                                    f"{exc}") from None
        elif (isinstance(irqs, list) and irqs
              and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in irqs)):
            irqs = sorted(set(irqs))
        else:
            raise self._invalid(f"'irqs' must be a non-empty list of IRQ numbers or a pattern, "
                                f"got {irqs!r}")
        try:
            cpus = _cpus_value(value["cpus"])
        except ValueError as exc:
            raise self._invalid(str(exc)) from None
        return {"irqs": irqs, "cpus": cpus}

    def resolve(self, irqs: list[int] | str) -> list[int]:
        """The IRQ numbers a value names: checked to exist, or matched in /proc/interrupts."""
        if isinstance(irqs, list):
            missing = sorted(set(irqs) - set(self._irqs()))
            if missing:
                raise InputError(None, self.name, f"no IRQ {', '.join(map(str, missing))} under "
                                 f"{self.irq_dir}", "IRQ numbers listed in /proc/interrupts")
            return irqs
        lines = read_sysfs(self.root.proc / "interrupts").splitlines()
        n_cpus = len(lines[0].split()) if lines else 0
        found = []
        for line in lines[1:]:
            number, _, rest = line.partition(":")
            if not number.strip().isdigit():
                continue
            # After the per-CPU counts come the chip, hw irq, trigger type and action names.
            description = " ".join(rest.split()[n_cpus:])
            if re.search(irqs, description):
                found.append(int(number))
        if not found:
            raise InputError(None, self.name, f"pattern {irqs!r} matches no IRQ in "
                             f"{self.root.proc / 'interrupts'}", self.allowed)
        return found

    def _write_each(self, targets: dict[int, str]) -> None:
        """Write every IRQ, then report all failures at once (managed IRQs refuse together)."""
        failures = []
        for irq, cpus in targets.items():
            try:
                write_sysfs(self.irq_dir / str(irq) / "smp_affinity_list", cpus)
            except IolabError as exc:
                failures.append(str(exc))
        if failures:
            raise IolabError(f"knob 'irq_affinity': {len(failures)} of {len(targets)} IRQ(s) "
                             f"refused (kernel-managed IRQs such as NVMe queues answer "
                             f"'Input/output error'): " + "; ".join(failures))

    def _write(self, value: dict[str, Any]) -> None:
        cpus = format_cpulist(value["cpus"])
        self._write_each({irq: cpus for irq in self.resolve(value["irqs"])})

    def matches(self, value: Any, state: Any) -> bool:
        value = self.validate(value)
        wanted = set(value["cpus"])
        return all(str(irq) in state and set(parse_cpulist(state[str(irq)])) == wanted
                   for irq in self.resolve(value["irqs"]))

    def same_state(self, expected: Any, actual: Any) -> bool:
        # IRQs come and go with devices; only those present in both states can be compared.
        return all(set(parse_cpulist(cpus)) == set(parse_cpulist(actual[irq]))
                   for irq, cpus in expected.items() if irq in actual)

    def _restore(self, state: dict[str, str]) -> None:
        current = self.read()
        self._write_each({int(irq): cpus for irq, cpus in state.items()
                          if irq in current
                          and set(parse_cpulist(cpus)) != set(parse_cpulist(current[irq]))})
