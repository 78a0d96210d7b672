"""What the host is: the inventory in host.json, its fingerprint, and CPU sets from its topology.

Responsible for: collecting CPU, topology, memory, kernel, block devices, knob states and tool
versions by reading procfs/sysfs and running read-only commands (argv lists, a timeout, the C
locale, each in a process group ended whole at its timeout: ``iolab.children``); a
fingerprint over the fields that can change results; naming the fields in which two
inventories differ, and those of the fingerprint an inventory lacks; picking logical CPUs for
a number of physical cores.
Not responsible for: writing host.json or deciding what a differing fingerprint means (the run
store and runner), or changing any setting (``iolab.host.knobs``, ``iolab.host.journal``). A command that
is missing, fails or hangs is recorded under ``errors``; collection never stops for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from iolab import __version__, children
from iolab.checks import positive_int
from iolab.errors import InputError, IolabError, excerpt, printable
from iolab.host.journal import states
from iolab.host.knobs import Knob, SysRoot, parse_cpulist
from iolab.host.knobset import make_knobs

SCHEMA_VERSION = 1
COMMAND_TIMEOUT_S = 20.0

# host.json's fields: {field: (its JSON types, what it holds)}. collect_inventory writes each
# but "fingerprint", which the store adds; the published schema (iolab.schemas) is made from
# this, and a test holds collect_inventory to it.
FIELDS: dict[str, tuple[tuple[str, ...], str]] = {
    "schema_version": (("integer",), "the inventory format's version"),
    "collected_at": (("string",), "when it was collected (ISO 8601, UTC)"),
    "hostname": (("string",), "the host's name"),
    "uname": (("object",), "os.uname(): sysname, nodename, release, version, machine"),
    "kernel_release": (("string",), "the kernel release (uname -r)"),
    "cmdline": (("string", "null"), "the kernel command line (/proc/cmdline)"),
    "mem_total_kib": (("integer", "null"), "MemTotal of /proc/meminfo, in KiB"),
    "cpu": (("object",), "model_name, logical_cpus, threads_per_core"),
    "lscpu": (("object", "null"), "lscpu -J as one flat {field: value}"),
    "lscpu_e": (("string", "null"), "lscpu -e=CPU,CORE,SOCKET,NODE,ONLINE as printed"),
    "block_devices": (("array", "null"), "lsblk -J's blockdevices"),
    "topology": (("array",), "the online CPUs: {cpu, core, package, siblings}"),
    "knobs": (("object",), "each knob's state when the inventory was collected"),
    "knobs_not_controllable": (("object",), "{knob: why} for knobs this host cannot set"),
    "tools": (("object",), "{tool: {argv, version, error}}: the benchmark tools' versions"),
    "python": (("string",), "the Python version"),
    "iolab_version": (("string",), "the iolab that collected it"),
    "errors": (("object",), "{what: why} for each command or file that could not be read"),
    "fingerprint": (("string",), "16 hex digits over the fields that can change results"),
}

MEM_KIB_MOST = 2**50  # KiB (1 EiB): more memory than any machine has
LOGICAL_CPUS_MOST = 65536  # more logical CPUs than any machine has (Linux allows 8192)
# what FIELDS' values may be beyond their JSON types, in JSON Schema's words: the published
# schema carries it (iolab.schemas.generate, so 'iolab verify' checks it) and shape_problem
# checks the same; a record iolab never writes (memory of -4096 KiB or 10**400 KiB, 0 CPUs, a
# list for a CPU model) would bound the samples' CPU shares and memory, and stop the pages
VALUES: dict[str, dict[str, Any]] = {
    "mem_total_kib": {"minimum": 1, "maximum": MEM_KIB_MOST},
    "cpu": {"properties": {
        "model_name": {"type": ["string", "null"]},
        "logical_cpus": {"type": ["integer", "null"], "minimum": 1,
                         "maximum": LOGICAL_CPUS_MOST},
        "threads_per_core": {"type": ["integer", "null"], "minimum": 1,
                             "maximum": LOGICAL_CPUS_MOST}}},
}


def version_output(argv: list[str] | tuple[str, ...],
                   timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
    """What ``argv`` (a program asked for its version) printed, run once per process and
    program: the plan and the host inventory both ask, and a campaign needs one answer.
    Raises OSError or TimeoutExpired when it cannot run; failures are not remembered."""
    exe = shutil.which(argv[0]) or argv[0]
    try:
        st = os.stat(exe)
        identity: tuple = (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        identity = ()
    return _version_output((exe, *argv[1:]), timeout, identity)


@lru_cache(maxsize=64)
def _version_output(argv: tuple[str, ...], timeout: float,
                    identity: tuple) -> subprocess.CompletedProcess:
    # keyed on the executable's inode, size and time too, so that a tool upgraded while a
    # notebook's kernel lives is asked again; the C locale, so that a localized tool prints
    # the same version everywhere
    # in a process group of its own: a tool that hangs is ended with what it started
    return children.run(list(argv), timeout=timeout, env={**os.environ, "LC_ALL": "C"})


def _run(argv: list[str], timeout: float, version: bool = False) -> tuple[str | None, str | None]:
    """(stdout, None) on success, else (None, what went wrong). A tool's ``version`` is
    asked through :func:`version_output`, once per process."""
    # lscpu translates its field names; the C locale keeps them parseable.
    env = {**os.environ, "LC_ALL": "C"}
    try:
        done = (version_output(argv, timeout) if version else
                children.run(argv, timeout=timeout, env=env))
    except FileNotFoundError:
        return None, f"command not found: {argv[0]}"
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(argv)} timed out after {timeout:g} s"
    except OSError as exc:
        return None, f"{' '.join(argv)} could not start: {exc.strerror or exc}"
    if done.returncode != 0:
        return None, (f"{' '.join(argv)} exited with status {done.returncode}"
                      + _said(done.stderr.strip() or done.stdout.strip()))
    # Some tools print their version on stderr.
    return done.stdout or done.stderr, None


def _said(text: str, most: int = 5, width: int = 300) -> str:
    """What a failed command said, as one bounded line: a build's first line names what
    failed and its last lines say why (a compiler's error), so both ends are kept."""
    lines = [line.strip()[:width] for line in text.splitlines() if line.strip()]
    if len(lines) > most:
        lines = lines[:2] + ["..."] + lines[-(most - 2):]
    return f": {' / '.join(lines)}" if lines else ""


def _flatten_lscpu(parsed: dict[str, Any]) -> dict[str, str]:
    """lscpu -J nests fields under 'children' in newer util-linux; give one flat {field: data}."""
    flat: dict[str, str] = {}

    def walk(entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            flat[entry["field"].rstrip(":")] = entry.get("data")
            walk(entry.get("children", []))

    walk(parsed.get("lscpu", []))
    return flat


def _read(path: os.PathLike, errors: dict[str, str], key: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError as exc:
        errors[key] = f"cannot read {path}: {exc.strerror or exc}"
        return None


def _mem_total_kib(meminfo: str | None) -> int | None:
    for line in (meminfo or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return None


def _cpu_summary(lscpu: dict[str, str], topo: list[dict[str, Any]],
                 cpuinfo: str | None) -> dict[str, Any]:
    """Model name, logical CPUs and threads per core: from lscpu, else from /proc and sysfs."""
    model = lscpu.get("Model name")
    if model is None:
        model = next((line.split(":", 1)[1].strip() for line in (cpuinfo or "").splitlines()
                      if line.startswith("model name")), None)
    logical = int(lscpu["CPU(s)"]) if "CPU(s)" in lscpu else (len(topo) or None)
    if "Thread(s) per core" in lscpu:
        threads = int(lscpu["Thread(s) per core"])
    else:
        threads = max((len(entry["siblings"]) for entry in topo), default=None)
    return {"model_name": model, "logical_cpus": logical, "threads_per_core": threads}


def _not_controllable(knobs: dict[str, Knob]) -> dict[str, str]:
    """{knob: why} for each knob this host does not let us control."""
    out = {}
    for name, knob in knobs.items():
        try:
            ok, why = knob.available()
        except IolabError as exc:
            ok, why = False, str(exc)
        if not ok:
            out[name] = why
    return out


def topology(root: SysRoot | None = None) -> list[dict[str, Any]]:
    """Online CPUs by id: [{"cpu", "core", "package", "siblings"}], from sysfs.

    Offline CPUs have no topology folder and are left out; ``core`` ids repeat across
    packages, so a physical core is the pair (package, core).
    """
    root = root or SysRoot()
    out = []
    for cpu_dir in root.cpu_dir.glob("cpu[0-9]*"):
        topo = cpu_dir / "topology"
        if not cpu_dir.name[3:].isdigit() or not topo.is_dir():
            continue
        out.append({
            "cpu": int(cpu_dir.name[3:]),
            "core": int((topo / "core_id").read_text()),
            "package": int((topo / "physical_package_id").read_text()),
            "siblings": parse_cpulist((topo / "thread_siblings_list").read_text()),
        })
    return sorted(out, key=lambda entry: entry["cpu"])


def pick_cpus(topology: list[dict[str, Any]], n_cores: int, use_siblings: bool) -> list[int]:
    """Logical CPUs for ``n_cores`` physical cores, sorted by CPU id.

    Cores are taken in the order of their lowest CPU id. Without siblings each chosen core
    gives that lowest id; with siblings it gives all of its online threads.
    """
    positive_int(n_cores, "n_cores")
    cores: dict[tuple[int, int], list[int]] = {}
    for entry in sorted(topology, key=lambda e: e["cpu"]):
        cores.setdefault((entry["package"], entry["core"]), []).append(entry["cpu"])
    if n_cores > len(cores):
        raise InputError(None, "n_cores",
                         f"{n_cores} physical cores requested, but the host has {len(cores)} "
                         f"physical cores ({len(topology)} logical CPUs online)",
                         f"1..{len(cores)}")
    chosen = list(cores.values())[:n_cores]
    return sorted(cpu for threads in chosen for cpu in (threads if use_siblings else threads[:1]))


def collect_inventory(tools: dict[str, list[str]], *, root: SysRoot | None = None,
                      knobs: dict[str, Knob] | None = None,
                      timeout: float = COMMAND_TIMEOUT_S) -> dict[str, Any]:
    """The host inventory for host.json.

    ``tools`` maps a tool name to the argv printing its version, e.g. {"fio": ["fio",
    "--version"]}; each becomes {"argv", "version", "error"}, with version None when the tool
    is missing or fails. ``root`` and ``knobs`` default to the real /sys, /proc and knobs.
    """
    _check_tools(tools)
    root = root or SysRoot()
    knobs = make_knobs(root) if knobs is None else knobs
    commands = _Commands(timeout)
    errors = commands.errors
    lscpu_parsed = commands.json("lscpu", ["lscpu", "-J"])
    lscpu = _flatten_lscpu(lscpu_parsed) if isinstance(lscpu_parsed, dict) else {}
    lsblk = commands.json("lsblk", ["lsblk", "-J", "-o",
                                    "NAME,SIZE,TYPE,MODEL,ROTA,MOUNTPOINTS,TRAN"])
    topo = _topology_or_error(root, errors)
    uname = os.uname()
    cmdline = _read(root.proc / "cmdline", errors, "cmdline")
    tool_versions = _tool_versions(tools, timeout)
    return {
        "schema_version": SCHEMA_VERSION,
        "collected_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "uname": {"sysname": uname.sysname, "nodename": uname.nodename, "release": uname.release,
                  "version": uname.version, "machine": uname.machine},
        "kernel_release": uname.release,
        "cmdline": cmdline.strip() if cmdline is not None else None,
        "mem_total_kib": _mem_total_kib(_read(root.proc / "meminfo", errors, "meminfo")),
        "cpu": _cpu_summary(lscpu, topo, _read(root.proc / "cpuinfo", errors, "cpuinfo")),
        "lscpu": lscpu or None,
        "lscpu_e": commands.text("lscpu_e", ["lscpu", "-e=CPU,CORE,SOCKET,NODE,ONLINE"]),
        "block_devices": lsblk.get("blockdevices") if isinstance(lsblk, dict) else None,
        "topology": topo,
        "knobs": states(knobs),
        "knobs_not_controllable": _not_controllable(knobs),
        "tools": tool_versions,
        "python": platform.python_version(),
        "iolab_version": __version__,
        "errors": errors,
    }


def _check_tools(tools: dict[str, list[str]]) -> None:
    """Refuse a version command that is not a non-empty argv list of strings."""
    for name, argv in tools.items():
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise InputError(None, f"tools.{name}", f"the version command must be a non-empty "
                             f"argv list of strings, got {argv!r}", '["fio", "--version"]')


class _Commands:
    """Runs the inventory's read-only commands, recording what went wrong in ``errors`` (by
    key) instead of stopping."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.errors: dict[str, str] = {}

    def text(self, key: str, argv: list[str]) -> str | None:
        out, error = _run(argv, self.timeout)
        if error:
            self.errors[key] = error
        return out

    def json(self, key: str, argv: list[str]) -> Any:
        out = self.text(key, argv)
        if out is None:
            return None
        try:
            return json.loads(out)
        except ValueError as exc:
            self.errors[key] = f"{' '.join(argv)} printed no valid JSON: {exc}"
            return None


def _topology_or_error(root: SysRoot, errors: dict[str, str]) -> list[dict]:
    """The CPU topology, or [] with the reason under ``errors``."""
    try:
        return topology(root)
    except (OSError, ValueError) as exc:
        errors["topology"] = f"cannot read CPU topology under {root.cpu_dir}: {exc}"
        return []


# the most of a tool's version text the record keeps: every real one is far shorter (60
# characters at most in the committed records), and a tool that prints megabytes at
# --version would otherwise make a host record, and every plan that names it, as large
VERSION_MOST = 4096


def _tool_versions(tools: dict[str, list[str]], timeout: float) -> dict[str, dict[str, Any]]:
    """Each tool's {"argv", "version", "error"} (see :func:`collect_inventory`); a version
    longer than :data:`VERSION_MOST` characters is cut there, ending in "…"."""
    versions = {}
    for name, argv in tools.items():
        out, error = _run(argv, timeout, version=True)
        version = out.strip() if out else None
        if version and len(version) > VERSION_MOST:
            version = version[:VERSION_MOST - 1] + "…"
        versions[name] = {"argv": list(argv), "version": version, "error": error}
    return versions


def _fingerprint_fields(inventory: dict[str, Any]) -> dict[str, Any]:
    """The stable fields that can change results; never hostname, times or knob states."""
    cpu = inventory.get("cpu") or {}
    mem_kib = inventory.get("mem_total_kib")
    return {
        "cpu_model": cpu.get("model_name"),
        "logical_cpus": cpu.get("logical_cpus"),
        "threads_per_core": cpu.get("threads_per_core"),
        "kernel_release": inventory.get("kernel_release"),
        # Whole GiB, because MemTotal moves by a few MiB between boots of the same machine.
        "mem_total_gib": round(mem_kib / 2**20) if mem_kib else None,
        "tools": {name: (tool or {}).get("version")
                  for name, tool in sorted((inventory.get("tools") or {}).items())},
    }


# The keys of an inventory's ``errors`` that say why a fingerprint field is missing.
_FIELD_SOURCES = {"cpu_model": ("lscpu", "cpuinfo"), "logical_cpus": ("lscpu", "topology"),
                  "threads_per_core": ("lscpu", "topology"), "kernel_release": (),
                  "mem_total_gib": ("meminfo",)}


def fingerprint_gaps(inventory: dict[str, Any], versioned: list[str]) -> list[str]:
    """The fingerprint's fields that the inventory lacks, each as 'field (why)', why being
    the error of the command or file that should have given it. A record made while they
    could not be read (a limit on processes or memory, a tool that could not start) has a
    fingerprint that the same host no longer gives once they can, so every later run would
    be refused as another host's. ``versioned``: the tools that print a version (a tool
    that prints none is no gap)."""
    fields = _fingerprint_fields(inventory)
    errors = inventory.get("errors") or {}
    tools = inventory.get("tools") or {}
    gaps = []
    for name, sources in _FIELD_SOURCES.items():
        if fields[name] is None:
            why = "; ".join(errors[k] for k in sources if k in errors)
            gaps.append(f"{name} ({why or 'none of its sources gave it'})")
    for name in sorted(versioned):
        if fields["tools"].get(name) is None:
            why = (tools.get(name) or {}).get("error")
            gaps.append(f"tools.{name} ({why or 'it printed no version'})")
    return gaps


def fingerprint(inventory: dict[str, Any]) -> str:
    """A 16-hex-digit sha256 over the result-relevant fields of an inventory."""
    canonical = json.dumps(_fingerprint_fields(inventory), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def imported_fingerprint(source: str, cpu: Any, topology: Any) -> str:
    """The fingerprint of an imported host record (``source`` says which importer made it):
    an archive records no kernel or tool versions, so it is the CPU and topology's."""
    canonical = json.dumps({"source": source, "cpu": cpu, "topology": topology},
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def record_fingerprint(record: dict[str, Any]) -> str:
    """The fingerprint a stored host record's own fields give: an imported one's (it names
    its ``source``) by :func:`imported_fingerprint`, any other's by :func:`fingerprint`."""
    if "source" in record:
        return imported_fingerprint(record["source"], record.get("cpu"), record.get("topology"))
    return fingerprint(record)


def fingerprint_problem(record: dict[str, Any]) -> str:
    """Why a stored host record's ``fingerprint`` is not the fingerprint of its own fields
    ("" when it is, or when it has none): a record edited or damaged after it was made
    (a kernel release, a CPU model, a tool's version changed) would otherwise be taken as
    the host every run's ``host_fingerprint`` vouches for."""
    stored = record.get("fingerprint")
    if stored is None:
        return ""
    try:
        own = record_fingerprint(record)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return ""  # a field of a shape iolab never writes: the record's shape check names it
    if stored != own:
        return (f"fingerprint {excerpt(stored)} is not the fingerprint of the record's own "
                f"fields ({own}): the record was changed after it was made")
    return ""


def fingerprint_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The fingerprint fields in which two inventories differ, as 'field: A != B' lines."""
    def flat(inventory: dict[str, Any]) -> dict[str, Any]:
        fields = _fingerprint_fields(inventory)
        tools = fields.pop("tools")
        return {**fields, **{f"tools.{name}": version for name, version in tools.items()}}

    fa, fb = flat(a), flat(b)
    return [f"{key}: {fa.get(key)!r} != {fb.get(key)!r}"
            for key in sorted(fa.keys() | fb.keys()) if fa.get(key) != fb.get(key)]


# JSON's types as FIELDS names them, and what each is in Python (a bool is no number)
_JSON = {"integer": int, "number": (int, float), "string": str, "object": dict, "array": list,
         "null": type(None)}
SUMMARY = ("CPU model", "logical CPUs / threads per core", "sockets / NUMA nodes", "hypervisor",
           "memory", "kernel", "block devices", "tools", "THP enabled (at campaign start)",
           "SMT control", "knobs not controllable", "recorded at", "fingerprint")


def shape_problem(inventory: dict[str, Any]) -> tuple[str, str] | None:
    """(key, problem in words) for the first field of a stored inventory that is not of the
    shape iolab records (a JSON type of :data:`FIELDS`, a value within :data:`VALUES`, and
    each block device an object); None when every field is. A summary reads the record
    without ``iolab verify``'s schema check, and a field of another shape
    (``mem_total_kib: "lots"``, or ``10**400``, which no float holds) would stop it."""
    for key, (types, _) in FIELDS.items():
        if key in inventory:
            problem = _value_problem(key, inventory[key], {"type": list(types),
                                                           **VALUES.get(key, {})})
            if problem is not None:
                return problem
    for i, device in enumerate(inventory.get("block_devices") or []):
        if not isinstance(device, dict):
            return f"block_devices[{i}]", f"{excerpt(device)} is not an object, as lsblk writes"
    for name, tool in (inventory.get("tools") or {}).items():
        if not isinstance(tool, (dict, type(None))):
            return f"tools.{name}", f"{excerpt(tool)} is not an object, as iolab records it"
    return None


def _value_problem(key: str, value: Any, rule: dict[str, Any]) -> tuple[str, str] | None:
    """(key, problem) when ``value`` breaks ``rule`` (JSON Schema's ``type``, ``minimum``,
    ``maximum`` and ``properties``, as :data:`VALUES` uses them), else None."""
    types = rule.get("type", [])
    types = [types] if isinstance(types, str) else types
    if types and (isinstance(value, bool)
                  or not isinstance(value, tuple(_JSON[t] for t in types))):
        return key, f"{excerpt(value)} is not {' or '.join(types)}, as iolab records it"
    low, high = rule.get("minimum"), rule.get("maximum")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and (
            (low is not None and value < low) or (high is not None and value > high)):
        return key, (f"{excerpt(value)} is out of range, a value no host has (allowed: "
                     f"{low} to {high})")
    for name, sub in rule.get("properties", {}).items():
        if isinstance(value, dict) and name in value:
            problem = _value_problem(f"{key}.{name}", value[name], sub)
            if problem is not None:
                return problem
    return None


def summary_row(inventory: dict[str, Any], source: str = "host.json") -> dict[str, str]:
    """A one-column summary of a stored inventory, for the book's table of measured hosts. A
    record of another shape (:func:`shape_problem`) is shown as unreadable, its first field
    naming ``source`` (the file), the key and why: the page is built all the same."""
    problem = shape_problem(inventory)
    if problem is not None:
        key, why = problem
        return {name: printable(f"unreadable: {source}, key {key}: {why}") if i == 0
                else "unreadable" for i, name in enumerate(SUMMARY)}
    cpu = inventory.get("cpu") or {}
    lscpu = inventory.get("lscpu") or {}
    knobs = inventory.get("knobs") or {}
    disks = [f"{d.get('name')} ({d.get('size')}, {d.get('model') or 'no model'}"
             f"{', rotational' if d.get('rota') else ''})"
             for d in inventory.get("block_devices") or [] if d.get("type") == "disk"]
    mem = inventory.get("mem_total_kib")
    smt = knobs.get("smt")
    return {
        "CPU model": str(cpu.get("model_name")),
        "logical CPUs / threads per core": f"{cpu.get('logical_cpus')} / {cpu.get('threads_per_core')}",
        "sockets / NUMA nodes": f"{lscpu.get('Socket(s)', '?')} / {lscpu.get('NUMA node(s)', '?')}",
        "hypervisor": str(lscpu.get("Hypervisor vendor", "none reported")),
        "memory": f"{mem / 2**20:.1f} GiB" if mem else "unknown",
        "kernel": str(inventory.get("kernel_release")),
        "block devices": "; ".join(disks) or "none reported",
        # a version line that starts with the tool's name is not prefixed with it again
        "tools": ", ".join(v if str(v).startswith(k) else f"{k} {v}" for k, v in
                           ((k, (r or {}).get("version")) for k, r in
                            (inventory.get("tools") or {}).items())),
        "THP enabled (at campaign start)": str(knobs.get("thp")),
        "SMT control": (f"{smt.get('control')} (sibling threads "
                        f"{'active' if smt.get('active') else 'not active'})"
                        if isinstance(smt, dict) else "not readable"),
        "knobs not controllable": "; ".join(f"{k}: {v}" for k, v in
                                           (inventory.get("knobs_not_controllable") or {}).items()) or "none",
        "recorded at": str(inventory.get("collected_at")),
        "fingerprint": str(inventory.get("fingerprint")),
    }
