"""The SPDK bdevperf adapter: the bdev configuration, core mask and options of one run, and
the metrics of its text table or ``perform_tests`` JSON.

Options (bdevperf's vocabulary): ``spdk_dir`` (an SPDK tree with a build; None: the one
``make tools`` built, see :mod:`iolab.tools.builds`), ``devices`` (what the bdevs are made
of, in this order), ``json_results`` (ask ``perform_tests`` for JSON, SPDK >= 24.09),
``core_mask`` (a :class:`~iolab.tools.base.CpuRequest`), ``queue_depth``, ``io_size``,
``seconds``, ``workload``, and, only where they differ from the default (so older runs keep
their identity):

==============  ==========================================================================
``bdev``        "nvme" (default: ``devices`` are PCIe addresses, one
                ``bdev_nvme_attach_controller`` each), "aio" or "uring" (``devices`` are
                files or block devices, one ``bdev_aio_create`` / ``bdev_uring_create``
                each), "malloc" (``devices`` are sizes in MiB, one RAM bdev each)
``block_size``  the logical block size of aio, uring and malloc bdevs (SPDK cannot detect
                it on a regular file); default 512
``all_cores``   true: every core of the mask submits to every bdev (bdevperf ``-C``);
                without it one bdev is driven by one core only
``memory_mib``  run without hugepages (``--no-huge -s MIB``); absent: hugepages, reserved
                by the ``hugepages`` knob
==============  ==========================================================================

Any bdev other than nvme runs without PCI access (``-u``). A build made with the adaptation
that relaxes SPDK's DPDK PCI check (:data:`iolab.tools.builds.PCI_GUARD_PATCH`) is refused for
nvme bdevs. The driver is ``scripts/drivers/bdevperf.sh``; bdevperf announces its measurement
("Running I/O for T seconds"), which :class:`~iolab.tools.marker.OutputMarker` timestamps.
The build record of a package-built SPDK is copied into every run (``spdk-build.json``).

Responsible for: the SPDK JSON subsystem configuration, hex core masks, bdevperf's option
list, finding bdevperf, the metrics of a stored run (with the text-table fallback for
SPDK releases without JSON results, said once per campaign), and whether a stored report is
the run's own (its jobs' workload, size, depth and cores against the argv, and its jobs
against the bdevs of the run's ``bdev.json``: each once, or once per core with ``-C``). Every check raises
:class:`~iolab.errors.InputError` naming the key.
Not responsible for: binding devices to a user-space driver (``iolab.host.binding``),
reserving hugepages (the ``hugepages`` knob), telling whether a block device is in use
(:func:`iolab.host.binding.check_free`, which :meth:`Bdevperf.launch` asks for the block
devices of AIO and io_uring bdevs), choosing CPUs (:meth:`CpuRequest.resolve`), or parsing
bdevperf's output formats (:mod:`iolab.parsers.bdevperf`). Apart from the SPDK build's record
and that check, nothing here reads the host, and nothing changes it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from iolab.checks import positive_int
from iolab.errors import InputError, ParseError, ToolError, excerpt
from iolab.host.binding import check_free
from iolab.safefiles import NotOurs, TooLarge, read_regular
from iolab.parsers import CLOCK_NS_MOST, read_report, record_object
from iolab.parsers.bdevperf import (parse_bdevperf_json, parse_bdevperf_text, spdk_start,
                                   spdk_supports_json, table_disagrees)
from iolab.tools import builds
from iolab.tools.base import (CpuRequest, Invocation, Launch, Program, ToolAdapter, check_cpus,
                              cpu_mask)
from iolab.tools.marker import OutputMarker, read_marker

CONFIG = "bdev.json"
# the most of a run's bdev config read back: iolab's config of 64 devices is about 10 KiB
_CONFIG_MOST = 2**20
JSON_RESULTS = "bdevperf-results.json"
BUILD_RECORD = "spdk-build.json"
BDEVS = ("nvme", "aio", "uring", "malloc")
_FILE_METHODS = {"aio": "bdev_aio_create", "uring": "bdev_uring_create"}
OPTIONAL = {"bdev": "nvme", "block_size": 512, "all_cores": False, "memory_mib": None}
# bdevperf's announcement of its measurement: ASCII digits ([0-9]: \d and int() take any
# script's), at most 12 (a longer run of digits is no run time and int() refuses 4,300)
START = r"Running I/O for ([0-9]{1,12}) seconds"

# Domain, bus, device, function; SPDK's traddr wants the full form with the domain.
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$")
_BDF_ALLOWED = "DDDD:BB:DD.F, e.g. 0000:4a:00.0"

# bdevperf's -w values (examples/bdev/bdevperf/bdevperf.c, PATTERN_TYPES_STR).
WORKLOADS = ("read", "write", "randread", "randwrite", "rw", "randrw", "verify", "reset",
             "unmap", "flush", "write_zeroes")
_MIXED = ("rw", "randrw")


def controller_name(index: int) -> str:
    """SPDK controller name of the index-th device: nvme00, nvme01, …; its bdev adds 'n1'."""
    return f"nvme{index:02d}"


def _devices(value: Any, problem: str, allowed: str) -> list:
    """``value`` if it is a non-empty list, else InputError on ``devices``."""
    if not isinstance(value, list) or not value:
        raise InputError(None, "devices", f"{problem}, got {value!r}", allowed=allowed)
    return value


def bdev_config(pci_addrs: list[str]) -> dict[str, Any]:
    """The JSON subsystem config (bdevperf ``-c``) attaching one PCIe controller per address.

    The controllers are named in the order given, so the bdevs are nvme00n1, nvme01n1, ….
    Addresses must be full PCIe BDFs, each at most once.
    """
    _devices(pci_addrs, "need a non-empty list of PCIe addresses", _BDF_ALLOWED)
    seen: dict[str, int] = {}
    entries = []
    for i, addr in enumerate(pci_addrs):
        if not isinstance(addr, str) or not _BDF.match(addr):
            raise InputError(None, f"devices[{i}]", f"'{addr}' is not a PCIe address",
                             allowed=_BDF_ALLOWED)
        # 0000:4A:00.0 and 0000:4a:00.0 are the same function.
        key = addr.lower()
        if key in seen:
            raise InputError(None, f"devices[{i}]", f"'{addr}' is listed twice (also "
                             f"devices[{seen[key]}]); each controller can be attached once")
        seen[key] = i
        entries.append({"method": "bdev_nvme_attach_controller",
                        "params": {"name": controller_name(i), "trtype": "PCIe",
                                   "traddr": addr}})
    return {"subsystems": [{"subsystem": "bdev", "config": entries}]}


def file_bdev_config(kind: str, paths: list[str], block_size: int = 512) -> dict[str, Any]:
    """The JSON config of one AIO or io_uring bdev per file or block device: bdev names
    ``aio0``, ``aio1``, … (``uring0``, … for io_uring), each on one path given once."""
    if kind not in _FILE_METHODS:
        raise InputError(None, "bdev", f"'{kind}' is not a file-backed bdev",
                         allowed=", ".join(_FILE_METHODS))
    _devices(paths, "need a non-empty list of files or block devices",
             "absolute paths, e.g. /var/tmp/dev00.dat")
    size = _block_size(block_size)
    entries = []
    for i, path in enumerate(paths):
        if not isinstance(path, str) or not path.startswith("/"):
            raise InputError(None, f"devices[{i}]", f"{path!r} is not an absolute path",
                             allowed="an absolute path to a file or block device")
        if path in paths[:i]:
            raise InputError(None, f"devices[{i}]", f"'{path}' is listed twice")
        entries.append({"method": _FILE_METHODS[kind],
                        "params": {"name": f"{kind}{i}", "filename": path,
                                   "block_size": size}})
    return {"subsystems": [{"subsystem": "bdev", "config": entries}]}


def malloc_bdev_config(sizes_mib: list[int], block_size: int = 512) -> dict[str, Any]:
    """The JSON config of one RAM bdev (``Malloc0``, …) per size in MiB."""
    _devices(sizes_mib, "malloc bdevs need a list of sizes in MiB", "e.g. [256, 256]")
    size = _block_size(block_size)
    entries = []
    for i, mib in enumerate(sizes_mib):
        positive_int(mib, f"devices[{i}]")
        entries.append({"method": "bdev_malloc_create",
                        "params": {"name": f"Malloc{i}", "num_blocks": mib * 2**20 // size,
                                   "block_size": size}})
    return {"subsystems": [{"subsystem": "bdev", "config": entries}]}


def _block_size(value: Any) -> int:
    if value not in (512, 4096):
        raise InputError(None, "block_size", f"{value!r} is not a block size SPDK's file and "
                         "RAM bdevs take here", allowed="512, 4096")
    return value


def config_for(options: Mapping[str, Any]) -> dict[str, Any]:
    """The bdev config of a run's options (see the module's table)."""
    bdev = options.get("bdev", "nvme")
    if bdev not in BDEVS:
        raise InputError(None, "bdev", f"unknown bdev type {bdev!r}", allowed=", ".join(BDEVS))
    devices = list(options["devices"]) if isinstance(options["devices"], (list, tuple)) \
        else options["devices"]
    block = options.get("block_size", 512)
    if bdev == "nvme":
        return bdev_config(devices)
    if bdev == "malloc":
        return malloc_bdev_config(devices, block)
    return file_bdev_config(bdev, devices, block)


def check_devices(pci_addrs: list[str], available: list[str]) -> None:
    """Refuse a device list longer than the environment's, or naming a device it lacks."""
    if not available:
        raise InputError(None, "devices", "the environment lists no NVMe devices for SPDK",
                         allowed="PCIe addresses in the params file's devices list")
    if len(pci_addrs) > len(available):
        raise InputError(None, "ndevs", f"asked for {len(pci_addrs)} devices but the "
                         f"environment lists {len(available)}", allowed=f"1..{len(available)}")
    known = {addr.lower() for addr in available}
    for i, addr in enumerate(pci_addrs):
        if str(addr).lower() not in known:
            raise InputError(None, f"devices[{i}]", f"'{addr}' is not among the "
                             f"environment's devices", allowed=", ".join(available))


def bdevperf_argv(core_mask: str, queue_depth: int, io_size: int, seconds: int,
                  workload: str = "randread", rwmixread: int | None = None) -> list[str]:
    """bdevperf's options for one run: ``-m MASK -q QD -o BYTES -t S -w WORKLOAD [-M PCT]``.

    ``rwmixread`` (percent reads) is required for rw/randrw and refused for the others,
    because bdevperf only warns and ignores it there.
    """
    if not isinstance(core_mask, str) or not re.fullmatch(r"0x[0-9a-fA-F]+", core_mask) \
            or int(core_mask, 16) == 0:
        raise InputError(None, "core_mask", f"'{core_mask}' is not a non-zero hex core mask",
                         allowed="0x followed by hex digits, e.g. 0x3")
    if workload not in WORKLOADS:
        raise InputError(None, "workload", f"unknown bdevperf workload '{workload}'",
                         allowed=", ".join(WORKLOADS))
    argv = ["-m", core_mask,
            "-q", str(positive_int(queue_depth, "queue_depth")),
            "-o", str(positive_int(io_size, "io_size")),
            "-t", str(positive_int(seconds, "seconds")),
            "-w", workload]
    if workload in _MIXED:
        if isinstance(rwmixread, bool) or not isinstance(rwmixread, int) \
                or not 0 <= rwmixread <= 100:
            raise InputError(None, "rwmixread", f"{workload} needs the percentage of reads, "
                             f"got {rwmixread!r}", allowed="0..100")
        argv += ["-M", str(rwmixread)]
    elif rwmixread is not None:
        raise InputError(None, "rwmixread", f"only applies to rw and randrw, not {workload}")
    return argv


class Bdevperf(ToolAdapter):
    name = "bdevperf"
    driver = "bdevperf.sh"
    rates = {"iops": "op/s", "mibs": "MiB/s"}
    # SPDK's start-up (hugepages, probing, attaching controllers) and teardown; an estimate
    startup_s = 12.0

    def startup_seconds(self, options: Mapping[str, Any]) -> float:
        """Without NVMe controllers to probe and attach, SPDK starts in about a second."""
        return self.startup_s if options.get("bdev", "nvme") == "nvme" else 1.5

    def spdk_tree(self, options: Mapping[str, Any]) -> Path | None:
        """The params' ``spdk_dir``, else the tree ``make tools`` built (None: neither)."""
        if options.get("spdk_dir"):
            return Path(options["spdk_dir"])
        return builds.built_spdk()

    def program(self, options: Mapping[str, Any]) -> Program:
        """bdevperf, asked through the driver (which sets the library path it needs)."""
        tree = self.spdk_tree(options)
        named = f"at {tree}" if tree else f"(no spdk_dir in the params, none built in " \
                                          f"{builds.tools_dir()})"
        return Program("bdevperf", str(self.driver_path),
                       ("--spdk-dir", str(tree or "."), "--version"),
                       install=f"no SPDK build {named}; {builds.HOW}",
                       version_pattern=r"(SPDK v\S+(?: git sha1 \S+)?)",
                       needs=(str((tree or Path("/nonexistent-spdk")) / builds.BDEVPERF),),
                       build=builds.build_key(tree) if tree else None)

    def identity(self, invocation: Invocation) -> dict[str, Any]:
        """The base identity once the options make a valid bdev config and argv, so bad
        options fail when the plan is made, not mid-campaign."""
        o = invocation.options
        unknown = sorted(set(o) - {"spdk_dir", "devices", "json_results", "core_mask",
                                   "queue_depth", "io_size", "seconds", "workload"}
                         - set(OPTIONAL))
        if unknown:
            raise InputError(None, unknown[0], "not a bdevperf option this adapter takes",
                             allowed=", ".join(["spdk_dir", "devices", "json_results",
                                                "core_mask", "queue_depth", "io_size",
                                                "seconds", "workload", *OPTIONAL]))
        config_for(o)
        self._argv(o, "0x1")
        self._check_build(o)
        return super().identity(invocation)

    def _check_build(self, o: Mapping[str, Any]) -> None:
        tree = self.spdk_tree(o)
        if o.get("bdev", "nvme") == "nvme" and tree is not None and \
                builds.pci_guard_relaxed(tree):
            raise ToolError(f"bdevperf: the SPDK build in {tree} skips DPDK's PCI ABI check "
                            f"({builds.PCI_GUARD_PATCH}), so it must not drive NVMe "
                            "controllers; use aio, uring or malloc bdevs with it, or an SPDK "
                            "built against a DPDK it supports. Nothing was run.")

    def collectors(self, invocation: Invocation) -> list:
        return [OutputMarker(START)]

    @staticmethod
    def _argv(o: Mapping[str, Any], mask: str) -> list[str]:
        argv = bdevperf_argv(mask, o["queue_depth"], o["io_size"], o["seconds"], o["workload"])
        if o.get("all_cores", False) is not False:
            if o["all_cores"] is not True:
                raise InputError(None, "all_cores", f"{o['all_cores']!r} is not true or false",
                                 allowed="true, false")
            argv.append("-C")
        if o.get("bdev", "nvme") != "nvme":
            argv.append("-u")  # file and RAM bdevs need no PCI access: SPDK gets none
        memory = o.get("memory_mib")
        if memory is not None:
            argv += ["--no-huge", "-s", str(positive_int(memory, "memory_mib"))]
        return argv

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        o = invocation.options
        tree = self.spdk_tree(o)
        if tree is None:
            raise ToolError(f"bdevperf: no spdk_dir in the params and no SPDK built in "
                            f"{builds.tools_dir()}; {builds.HOW}")
        self._check_build(o)
        if o.get("bdev", "nvme") in _FILE_METHODS:
            check_free([str(d) for d in o["devices"]], key="devices")
        request = o["core_mask"]
        cpus = request.resolve(topology) if isinstance(request, CpuRequest) else None
        mask = cpu_mask(cpus) if cpus is not None else request
        if isinstance(mask, str) and re.fullmatch(r"0x[0-9a-fA-F]+", mask):
            bits = int(mask, 16)
            check_cpus("core_mask", [c for c in range(bits.bit_length()) if bits >> c & 1],
                       topology)
        extra = ["--json-results", JSON_RESULTS] if o["json_results"] else []
        argv = [str(self.driver_path), "--spdk-dir", str(tree), "--config", CONFIG, *extra,
                "--", *self._argv(o, mask)]
        inputs = {CONFIG: json.dumps(config_for(o), indent=2) + "\n"}
        built = builds.record(tree)
        if built is not None:
            inputs[BUILD_RECORD] = json.dumps(built, indent=2) + "\n"
        return Launch(argv, inputs=inputs, cpus=cpus)

    def parse(self, run_dir: Path) -> dict[str, Any]:
        stdout = Path(run_dir) / "stdout"
        text = parse_bdevperf_text(read_report(stdout, "bdevperf"), str(stdout))
        stderr = Path(run_dir) / "stderr"
        if text.get("spdk_version") is None and stderr.exists():
            # SPDK's log, with its "Starting SPDK vX" line, goes to stderr in some builds
            text = {**text, **(spdk_start(read_report(stderr, "bdevperf", "bdevperf's log")) or {})}
        res, source, note = text, "text table", None
        json_path = Path(run_dir) / JSON_RESULTS
        if json_path.exists():  # JSON results were asked for
            if not spdk_supports_json(text.get("spdk_version")):
                note = (f"SPDK {text.get('spdk_version')} predates JSON results (needs v24.09 or "
                        "later): results are read from bdevperf's text table")
            elif json_path.stat().st_size:
                try:
                    report = read_report(json_path, "bdevperf", errors="strict")
                    res = {**parse_bdevperf_json(report, str(json_path)),
                           "spdk_version": text.get("spdk_version")}
                    source = "perform_tests JSON"
                except ParseError as exc:
                    # SPDK answers perform_tests with a JSON-RPC error when a job fails; the
                    # text table on stdout still shows the failed job, so it decides. The note
                    # says why the JSON was not taken: an error, or a file it cannot read
                    note = (f"{JSON_RESULTS} was not taken ({exc.problem}): results are read "
                            "from bdevperf's text table")
        return {"iops": res["iops"], "mibs": res["mibs"], "lat_mean_us": res["avg_latency_us"],
                "fail_per_s": res["fail_per_s"], "timeout_per_s": res["timeout_per_s"],
                "version": res.get("spdk_version"), "results_from": source, "note": note,
                "problem": "; ".join(res["problems"]) if not res["ok"] else None}

    def foreign_report(self, run_dir: Path, argv: list[str]) -> str:
        """A job of the report (the ``perform_tests`` JSON, and the text table on stdout) whose
        workload, I/O size, queue depth or read share differ from bdevperf's ``-w``, ``-o``,
        ``-q`` and ``-M`` in the run's argv, or whose core mask has a core outside ``-m``, ran
        something else: a report another run left, or something that is not this run wrote."""
        given = _bdevperf_args(argv)
        reports = [("stdout", lambda: parse_bdevperf_text(
            read_report(Path(run_dir) / "stdout", "bdevperf"), "stdout"))]
        json_path = Path(run_dir) / JSON_RESULTS
        if json_path.exists() and json_path.stat().st_size:
            reports.append((JSON_RESULTS, lambda: parse_bdevperf_json(
                read_report(json_path, "bdevperf", errors="strict"), JSON_RESULTS)))
        bdevs = _run_bdevs(Path(run_dir))
        for name, read in reports:
            try:
                jobs = read()["jobs"]
            except (ParseError, OSError):
                continue  # parse took the other report, or said why it took none
            for i, job in enumerate(jobs):
                odd = _foreign_job(job, given)
                if odd:
                    return (f"{name} is not this run's report: its job {i} "
                            f"({excerpt(job['name'])}) {odd}")
            odd = _foreign_jobs([job["name"] for job in jobs], bdevs, _copies(argv))
            if odd:
                return f"{name} is not this run's report: {odd}"
        return _json_beside_table(reports)


    def window(self, run_dir: Path) -> tuple[int, int] | None:
        """From the marker's timestamp of bdevperf's "Running I/O for T seconds"."""
        marker = Path(run_dir) / OutputMarker.FILE
        if not marker.exists():
            return None
        line, start_ns = read_marker(run_dir)
        found = re.search(START, line)
        if found is None:
            raise ParseError(marker, f"line is {excerpt(line)} (allowed: bdevperf's "
                                     "'Running I/O for T seconds', T in digits 0-9)")
        end_ns = start_ns + int(found.group(1)) * 10**9
        if end_ns > CLOCK_NS_MOST:
            raise ParseError(marker, f"line is {excerpt(line)}: the window would end past any "
                                     f"clock's time ({CLOCK_NS_MOST} ns)")
        return start_ns, end_ns


# what a bdevperf job of the report echoes of the run's argv: flag -> the job's key
_ECHOED = {"-w": "workload", "-o": "io_size", "-q": "queue_depth", "-M": "percentage"}


def _bdevperf_args(argv: list[str]) -> dict[str, str]:
    """bdevperf's own ``-x value`` options in a run's argv (those after the driver's ``--``)."""
    args = argv[argv.index("--") + 1:] if "--" in argv else []
    return {flag: value for flag, value in zip(args, args[1:])
            if flag in (*_ECHOED, "-m")}


def _run_bdevs(run_dir: Path) -> tuple[set[str], set[str]] | None:
    """The bdevs the run's config (``bdev.json``, written by :meth:`Bdevperf.launch`) makes:
    the names of its file and RAM bdevs, and the controllers it attaches (each gives one bdev
    per namespace, ``<controller>n1``, …, how many the config cannot say). None without a
    config (a run imported from elsewhere); ParseError naming it for one iolab never writes."""
    path = run_dir / CONFIG
    source = str(path)
    try:
        data = read_regular(path, "a run's bdev config", _CONFIG_MOST)
    except (NotOurs, TooLarge) as exc:
        raise ParseError(source, exc.problem) from None
    if data is None:
        return None
    record = record_object(data.decode("utf-8", "replace"), source)
    names: set[str] = set()
    controllers: set[str] = set()
    subsystems = record.get("subsystems")
    for subsystem in subsystems if isinstance(subsystems, list) else [None]:
        entries = subsystem.get("config") if isinstance(subsystem, dict) else None
        for entry in entries if isinstance(entries, list) else [None]:
            params = entry.get("params") if isinstance(entry, dict) else None
            if not isinstance(params, dict) or not isinstance(params.get("name"), str):
                raise ParseError(source, f"holds {excerpt(entry)} (allowed: the bdev config "
                                         "iolab writes, each entry's params with a name)")
            is_controller = entry.get("method") == "bdev_nvme_attach_controller"
            (controllers if is_controller else names).add(params["name"])
    return names, controllers


def _copies(argv: list[str]) -> int | None:
    """How many jobs bdevperf makes of each bdev: one, or with ``-C`` one per core of ``-m``
    (None where the mask is not hex)."""
    args = argv[argv.index("--") + 1:] if "--" in argv else []
    if "-C" not in args:
        return 1
    mask = _bdevperf_args(argv).get("-m", "")
    return bin(int(mask, 16)).count("1") if re.fullmatch(r"0x[0-9a-fA-F]{1,256}", mask) \
        else None


def _json_beside_table(reports: list) -> str:
    """Why the run's ``perform_tests`` JSON is not the jobs of its own text table ("" when
    it is, or when one of the two is missing or unreadable: ``parse`` then takes the other,
    or says why it takes none). See :func:`iolab.parsers.bdevperf.table_disagrees`."""
    if len(reports) < 2:
        return ""
    try:
        table, results = (read() for _, read in reports)
    except (ParseError, OSError):
        return ""
    odd = table_disagrees(results, table)
    return f"{JSON_RESULTS} is not this run's report: {odd}" if odd else ""


def _foreign_jobs(names: list[str], bdevs: tuple[set[str], set[str]] | None,
                  copies: int | None) -> str:
    """Why a report's jobs are not those bdevperf makes of the run's bdevs ("" when they
    are): a job of a bdev the config never made, a bdev given more jobs than ``copies``, or
    one of its file or RAM bdevs with none. The totals are the jobs' sum, so a job given
    twice counts its I/O twice."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    for name, count in counts.items():
        if bdevs is not None and name not in bdevs[0] and not any(
                re.fullmatch(re.escape(c) + r"n[0-9]{1,5}", name) for c in bdevs[1]):
            made = sorted(bdevs[0] | {controller + "nN" for controller in bdevs[1]})
            return (f"it has a job of bdev {excerpt(name)}, which the run's {CONFIG} never "
                    f"made (allowed: {excerpt(', '.join(made))})")
        if copies is not None and count != copies:
            return (f"it has {count} jobs of bdev {excerpt(name)}, the run's argv makes "
                    f"bdevperf run {copies} (one per bdev, or with -C one per core of -m)")
    missing = sorted(bdevs[0] - set(counts)) if bdevs is not None else []
    if missing:
        return (f"it has no job of bdev {excerpt(missing[0])}, which the run's {CONFIG} "
                "made (bdevperf runs a job on every bdev)")
    return ""


def _foreign_job(job: dict[str, Any], given: dict[str, str]) -> str:
    """How one job of a report differs from the run's bdevperf options ("" where it does
    not): a workload, size, depth or read share other than given (a value the report leaves
    out, as the short pre-v24.01 Job line does, is not compared), or a core outside ``-m``."""
    for flag, key in _ECHOED.items():
        if flag in given and job.get(key) is not None and str(job[key]) != given[flag]:
            return (f"ran with {key} {excerpt(job[key])}, the run gave bdevperf {flag} "
                    f"{excerpt(given[flag])}")
    mask, allowed = job.get("core_mask"), given.get("-m")
    if mask is None or allowed is None or not re.fullmatch(r"0x[0-9a-fA-F]+", allowed):
        return ""
    if not re.fullmatch(r"0x[0-9a-fA-F]{1,256}", str(mask)) or int(mask, 16) == 0 \
            or int(mask, 16) & ~int(allowed, 16):
        return (f"ran on core mask {excerpt(mask)}, outside the run's -m {allowed} (allowed: "
                "a non-zero mask of those cores)")
    return ""
