"""The dcgmi dmon collector (iolab.collectors.dcgmi): argv, reading dmon command lines and
captures, starting and stopping a fake dcgmi, and the window statistics.

No GPU and no DCGM are needed: a shell script named ``dcgmi`` on PATH answers ``discovery``
and prints dmon-shaped rows until it is stopped; captures come from the synthesised fixture
in tests/fixtures/aisio_formats/ or are written here.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from pathlib import Path

import pytest

from iolab.collectors import dcgmi
from iolab.collectors.dcgmi import DcgmDmon, read_argv, read_capture
from iolab.core.tool_registry import collector
from iolab.errors import InputError, IolabError, ParseError, ToolError

FIX = Path(__file__).parent / "fixtures" / "aisio_formats"
AISIO_LINE = 'screen -dm bash -c "dcgmi dmon -d 100 -i 0 -e 1009,1010 > /tmp/dcgm_monitor.txt"'

HEADER = ['echo "#Entity   PCITX                       PCIRX"', 'echo "ID"']
DMON_ROWS = ["i=1", "while :; do",
             '  echo "GPU 0     $((i * 10))                          $((i * 100))"',
             "  i=$((i + 1))", "  sleep 0.02", "done"]


def fake_dcgmi(folder: Path, monkeypatch, *, discovery: list[str] | None = None,
               dmon: list[str] | None = None) -> Path:
    """A ``dcgmi`` on PATH: ``discovery -l`` and ``dmon`` run the given shell lines."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "dcgmi"
    found = ['echo "1 GPU found."']
    path.write_text("\n".join(
        ["#!/bin/sh", 'case "$1" in', "discovery)", *(discovery or found), "  exit 0 ;;",
         "dmon)", *(dmon if dmon is not None else HEADER + DMON_ROWS), "  ;;", "esac", ""]))
    path.chmod(0o755)
    # first on PATH, and the rest of PATH kept for the shell's own tools (sleep)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return path


def wait_for_lines(path: Path, n: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} did not reach {n} lines")


# --- argv and command lines -------------------------------------------------------------------

def test_argv():
    assert DcgmDmon(1, 250).argv() == ["dcgmi", "dmon", "-e", "1009,1010", "-d", "250", "-i", "1"]
    assert DcgmDmon(0).argv("/usr/bin/dcgmi")[-2:] == ["-i", "0"]


@pytest.mark.parametrize("args, key", [((-1,), "gpu_id"), ((True,), "gpu_id"),
                                       ((0, 0), "interval_ms"), ((0, 0.5), "interval_ms")])
def test_bad_settings_name_the_key(args, key):
    with pytest.raises(InputError) as caught:
        DcgmDmon(*args)
    assert caught.value.key == key


@pytest.mark.parametrize("cmd", [AISIO_LINE, DcgmDmon(0, 100).argv("/usr/bin/dcgmi"),
                                 "dcgmi dmon -e 1009,1010 -i 0 -d 100 2>/dev/null; sleep 1",
                                 "sudo /usr/bin/dcgmi dmon -i 0 -d 100 -e 1009,1010 | tee x"])
def test_read_argv(cmd):
    assert read_argv(cmd) == {"field_ids": [1009, 1010], "gpu_ids": [0], "interval_ms": 100}


def test_read_argv_round_trip_and_defaults():
    assert read_argv(DcgmDmon(3, 20).argv()) == {"field_ids": [1009, 1010], "gpu_ids": [3],
                                                  "interval_ms": 20}
    assert read_argv("dcgmi dmon -e 1010") == {"field_ids": [1010], "gpu_ids": [],
                                               "interval_ms": None}


@pytest.mark.parametrize("cmd, key, message", [
    ("nvidia-smi dmon -s p", "argv", "no 'dcgmi dmon' command"),
    ('bash -c "dcgmi dmon -e 1010', "argv", "cannot split"),
    ("dcgmi dmon -e 1009,1010 -c 10", "-c", "not a dcgmi dmon option"),
    ("dcgmi dmon -e PCIRX", "-e", "not a comma list of ids"),
    ("dcgmi dmon -i gpu:0", "-i", "not a comma list of ids"),
    ("dcgmi dmon -d 0", "-d", "not a delay in whole ms.*1 to 999999999"),
    # an archive's recorded line: int() refuses 4,300 digits with a ValueError naming no option
    ("dcgmi dmon -e 1009,1010 -i 0 -d 9" + "9" * 5000, "-d", "not a delay in whole ms"),
    ("dcgmi dmon -e 1009,1010 -i 0" + "0" * 5000, "-i", "not a comma list of ids"),
    ("dcgmi dmon -e 1010 -d", "-d", "has no value"),
])
def test_read_argv_refuses_what_it_cannot_read(cmd, key, message):
    with pytest.raises(InputError, match=message) as caught:
        read_argv(cmd)
    assert caught.value.key == key


# --- reading a capture ------------------------------------------------------------------------

def _only(text: str, entity: str) -> str:
    """The capture with the rows of every GPU but ``entity`` left out (what dmon -i prints)."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith("GPU ") or line.startswith(entity + " "))


def test_read_capture_of_one_gpu():
    text = (FIX / "dcgm_dmon.txt").read_text()
    capture = read_capture(_only(text, "GPU 1"), "d.txt",
                           read_argv("dcgmi dmon -e 1009,1010 -i 1"))
    assert capture["rx"] == [7, None, 21, 35] and capture["tx"] == [5, None, 15, 25]
    assert capture["rows"] == [2, 3, 6, 7]
    gpu0 = read_capture(_only(text, "GPU 0"), "d.txt", read_argv("dcgmi dmon -e 1009,1010 -i 0"))
    assert gpu0["rx"] == [0, 1000, 3000, 2000]  # the cut-off last row is dropped
    assert gpu0["notes"] and "partial last row" in gpu0["notes"][0]


@pytest.mark.parametrize("watched, other", [(0, 1), (1, 0)])
def test_read_capture_of_a_gpu_the_command_did_not_watch_is_refused(watched, other):
    """Probe 12 D2: a row of another GPU than the command's -i was dropped silently (the
    mean of the watched GPU moved with it): such a capture is not that command's."""
    with pytest.raises(ParseError, match=f"^d.txt: has rows of 'GPU {other}', which the "
                                         f"command did not watch \\(it watched GPU {watched}; "
                                         "allowed: rows of "):
        read_capture((FIX / "dcgm_dmon.txt").read_text(), "d.txt",
                     read_argv(f"dcgmi dmon -e 1009,1010 -i {watched}"))


def test_read_capture_without_tx():
    text = "#Entity   PCIRX\nID\nGPU 0     5\nGPU 0     7\n"
    capture = read_capture(text, "d.txt", read_argv("dcgmi dmon -e 1010 -i 0"))
    assert capture["rx"] == [5, 7] and capture["tx"] is None


@pytest.mark.parametrize("cmd, message", [
    ("dcgmi dmon -e 1009,1010 -i 0,1", "needs one GPU"),
    ("dcgmi dmon -e 1009,1010", "needs one GPU"),
    ("dcgmi dmon -e 1009,1011 -i 0", "field 1010 \\(PCIe RX\\) was not sampled"),
    ("dcgmi dmon -e 1009,1010 -i 3", "no rows for GPU 3"),
    ("dcgmi dmon -e 1010 -i 0", "the header has 2 fields"),
])
def test_read_capture_refuses_what_it_cannot_use(cmd, message):
    with pytest.raises(ParseError, match=f"d.txt: .*{message}"):
        read_capture((FIX / "dcgm_dmon.txt").read_text(), "d.txt", read_argv(cmd))


@pytest.mark.parametrize("row, problem", [
    ("GPU 0     nan       5", "line 4: value 'nan' is not a finite number"),
    ("GPU 0     5         inf", "line 4: value 'inf' is not a finite number"),
    ("GPU 0     5         1e999", "line 4: value '1e999' is not a finite number"),
    ("GPU 0     5         -5", "line 4: PCIe RX is -5 bytes/s \\(allowed: 0 or more, or N/A\\)"),
    ("GPU 0     -5.5      5", "line 4: PCIe TX is -5.5 bytes/s"),
])
def test_read_capture_refuses_byte_rates_no_link_has(row, problem):
    """dmon prints N/A for a missing value; a negative rate among normal rows still gave a
    positive mean that passed as a sample."""
    text = f"#Entity   PCITX     PCIRX\nID\nGPU 0     10        10\n{row}\nGPU 0     10        10\n"
    with pytest.raises(ParseError, match=f"^d.txt: {problem}"):
        read_capture(text, "d.txt", read_argv("dcgmi dmon -e 1009,1010 -i 0"))


# --- window statistics from stored files ------------------------------------------------------

def stored_capture(folder: Path, rx: list[int], stamps: list[int]) -> Path:
    lines = ["#Entity   PCITX                       PCIRX", "ID"]
    lines += [f"GPU 0     {v // 10:<28}{v}" for v in rx]
    (folder / dcgmi.CAPTURE).write_text("\n".join(lines) + "\n")
    (folder / dcgmi.TIMES).write_text("".join(f"{s}\n" for s in [stamps[0]] * 2 + stamps))
    (folder / dcgmi.RECORD).write_text(json.dumps({
        "argv": DcgmDmon(0, 100).argv(), "pid": 1, "started_ns": 0, "stopped_ns": 1,
        "exit_status": None, "signal": 15, "ended_before_stop": False, "killed": False}))
    return folder


def test_parse_cuts_the_samples_to_the_window(tmp_path):
    rx = [0, 100, 9000, 9100, 9050, 200]
    folder = stored_capture(tmp_path, rx, [1000 + 100 * i for i in range(len(rx))])
    inside = DcgmDmon.parse(folder, (1200, 1400))
    assert inside["samples"] == 3
    assert inside["rx_mean_bytes_per_s"] == statistics.mean([9000, 9100, 9050])
    assert inside["rx_p50_bytes_per_s"] == 9050
    assert inside["tx_mean_bytes_per_s"] == statistics.mean([900, 910, 905])
    assert inside["rx_aisio_p95_bytes_per_s"] == statistics.quantiles(rx, n=100,
                                                                      method="inclusive")[94]
    assert (inside["ended_before_stop"], inside["killed"]) == (False, False)
    whole = DcgmDmon.parse(folder, None)
    assert whole["samples"] == 6 and whole["rx_mean_bytes_per_s"] == statistics.mean(rx)
    empty = DcgmDmon.parse(folder, (5000, 6000))
    assert empty["samples"] == 0 and empty["rx_mean_bytes_per_s"] is None


def test_parse_refuses_stamps_that_do_not_match_the_lines(tmp_path):
    folder = stored_capture(tmp_path, [1, 2, 3], [10, 20, 30])
    (folder / dcgmi.TIMES).write_text("10\n20\n")
    with pytest.raises(ParseError, match="2 stamps for the 6 lines"):
        DcgmDmon.parse(folder, None)


@pytest.mark.parametrize("change, problem", [
    ("{}", "has no argv (allowed: the dcgmi dmon command line, a list of texts)"),
    ("[" * 100_000, "line 1: arrays or objects nested more than 100 levels deep"),
    ({"argv": "dcgmi dmon -i 0"}, "argv is 'dcgmi dmon -i 0' (allowed: the dcgmi dmon command "
     "line, a list of texts)"),
    ({"argv": ["dcgmi", "dmon", "-d", "\u0661\u0660\u0660"]}, "argv is not the dmon command "
     "this collector runs: "),
    ({"argv": ["sleep", "1"]}, "argv is not the dmon command this collector runs: "),
    ({"killed": "no"}, "killed is 'no' (allowed: true or false)"),
    ({"ended_before_stop": ...}, "has no ended_before_stop (allowed: true or false)"),
    ({"gpu_pci": 7}, "gpu_pci is 7 (allowed: null or the GPU's PCI address"),
])
def test_parse_refuses_a_record_the_collector_did_not_write(tmp_path, change, problem):
    """dcgm.json is read back as any output is: a missing key was a KeyError, and an argv
    read_argv refuses an InputError, each of which ended the campaign. (``...`` leaves the key
    out; a str replaces the whole file.)"""
    folder = stored_capture(tmp_path, [1, 2, 3], [10, 20, 30])
    if isinstance(change, str):
        (folder / dcgmi.RECORD).write_text(change)
    else:
        record = json.loads((folder / dcgmi.RECORD).read_text())
        record = {k: v for k, v in {**record, **change}.items() if v is not ...}
        (folder / dcgmi.RECORD).write_text(json.dumps(record))
    with pytest.raises(ParseError) as info:
        DcgmDmon.parse(folder, None)
    assert str(info.value).startswith(f"{folder}/{dcgmi.RECORD}: {problem}")


@pytest.mark.parametrize("stamp", ["\u0661\u0662", "1_000", "+5", "-5", "9" * 5000,
                                   str(2**63)])
def test_parse_refuses_a_stamp_no_clock_gives(tmp_path, stamp):
    """int() took '١٢', '1_000' and '+5' as stamps, and a 5,000-digit one raised a ValueError
    naming no file; a stamp beyond any clock put its sample outside every window."""
    folder = stored_capture(tmp_path, [1, 2, 3], [10, 20, 30])
    (folder / dcgmi.TIMES).write_text(f"10\n10\n10\n{stamp}\n30\n")
    with pytest.raises(ParseError, match=r"dcgm-times.txt: stamp 4 is .* \(allowed: whole "
                                         r"nanoseconds 0 to 9223372036854775807, in digits"):
        DcgmDmon.parse(folder, None)


def test_parse_refuses_stamps_out_of_time_order(tmp_path):
    folder = stored_capture(tmp_path, [1, 2, 3], [10, 30, 20])
    with pytest.raises(ParseError, match=r"dcgm-times.txt: stamp 5 \(20\) is before stamp 4 "
                                         r"\(30\) \(allowed: stamps in time order\)"):
        DcgmDmon.parse(folder, None)


def test_parse_refuses_a_sample_far_outside_the_runs_window(tmp_path):
    # the driver's window (driver-window.json): dmon ran from just before it to just after
    start = 10**18
    folder = stored_capture(tmp_path, [1, 2, 3], [start + k * 10**8 for k in range(3)])
    (folder / "driver-window.json").write_text(json.dumps(
        {"start_ns": start, "end_ns": start + 10**9}))
    assert DcgmDmon.parse(folder, None)["samples"] == 3
    stored_capture(tmp_path, [1, 2, 3], [start, start + 10**8, start + 3600 * 10**9])
    with pytest.raises(ParseError, match=r"dcgm-times.txt: line 5 of dcgm.txt is stamped .* "
                                         r"outside the run's window"):
        DcgmDmon.parse(folder, None)


# --- starting and stopping a fake dcgmi --------------------------------------------------------

def test_start_and_stop_a_fake_dmon(tmp_path, monkeypatch):
    exe = fake_dcgmi(tmp_path / "bin", monkeypatch)
    run = tmp_path / "run"
    run.mkdir()
    dmon = DcgmDmon(0, 100)
    dmon.start(run)
    wait_for_lines(run / dcgmi.CAPTURE, 6)
    dmon.stop(run)
    record = json.loads((run / dcgmi.RECORD).read_text())
    assert record["argv"] == [str(exe), "dmon", "-e", "1009,1010", "-d", "100", "-i", "0"]
    assert record["signal"] == 15 and record["exit_status"] is None
    assert record["ended_before_stop"] is False and record["killed"] is False
    lines = (run / dcgmi.CAPTURE).read_text().splitlines()
    stamps = [int(s) for s in (run / dcgmi.TIMES).read_text().split()]
    assert len(stamps) == len(lines) and stamps == sorted(stamps)
    parsed = DcgmDmon.parse(run, None)
    rx = [100 * i for i in range(1, len(lines) - 1)]
    assert parsed["samples"] == len(rx) and parsed["rx_mean_bytes_per_s"] == statistics.mean(rx)
    # the process group is gone: nothing is left writing to the capture
    assert (run / dcgmi.CAPTURE).read_text().splitlines() == lines


def test_stop_kills_a_dmon_that_ignores_sigterm(tmp_path, monkeypatch):
    fake_dcgmi(tmp_path / "bin", monkeypatch, dmon=["  trap '' TERM", *HEADER, *DMON_ROWS])
    monkeypatch.setattr(dcgmi, "GRACE_S", 0.2)
    run = tmp_path / "run"
    run.mkdir()
    dmon = DcgmDmon(0)
    dmon.start(run)
    wait_for_lines(run / dcgmi.CAPTURE, 3)
    dmon.stop(run)
    record = json.loads((run / dcgmi.RECORD).read_text())
    assert record["killed"] is True and record["signal"] == 9


def test_a_dmon_that_fails_is_recorded_and_its_capture_refused(tmp_path, monkeypatch):
    fake_dcgmi(tmp_path / "bin", monkeypatch, dmon=[
        '  echo "Error setting watches. Result: -33: Profiling is not supported for this group '
        'of GPUs or GPU."', "  exit 1"])
    run = tmp_path / "run"
    run.mkdir()
    dmon = DcgmDmon(0)
    dmon.start(run)
    deadline = time.monotonic() + 20
    while dmon._proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    dmon.stop(run)
    record = json.loads((run / dcgmi.RECORD).read_text())
    assert record["ended_before_stop"] is True and record["exit_status"] == 1
    with pytest.raises(ParseError, match=f"{run / dcgmi.CAPTURE}: line 1: data before"):
        DcgmDmon.parse(run, None)


def test_without_a_host_engine_nothing_starts(tmp_path, monkeypatch):
    fake_dcgmi(tmp_path / "bin", monkeypatch, discovery=[
        '  echo "Error: unable to establish a connection to the specified host: localhost"',
        '  echo "Error: Unable to connect to host engine. Host engine connection invalid/'
        'disconnected."', "  exit 1"])
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(ToolError, match="unable to establish a connection.*is nv-hostengine "
                                        "running"):
        DcgmDmon(0).start(run)
    assert list(run.iterdir()) == []


def test_without_dcgmi_it_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolError, match="DCGM"):
        DcgmDmon.check()
    status = DcgmDmon(0).programs()[0].status()
    assert status["found"] is False and "nv-hostengine" in status["install"]


def test_stop_without_start():
    with pytest.raises(IolabError, match="without a start"):
        DcgmDmon(0).stop(Path("."))


def test_registered():
    assert collector("dcgmi") is DcgmDmon


# --- the PCI address of the GPU watched --------------------------------------------------------

def fake_nvidia_smi(folder: Path, script: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nvidia-smi"
    path.write_text("\n".join(["#!/bin/sh", *script, ""]))
    path.chmod(0o755)


# answers only the query the collector should make, for GPU 1 (NVML's index)
ANSWERS_GPU_1 = ['if [ "$*" != "--query-gpu=pci.bus_id --format=csv,noheader -i 1" ]; then',
                 '  echo "unexpected arguments: $*"; exit 9', "fi", 'echo "00000000:CA:00.0"']


def only_on_path(monkeypatch, *folders: Path) -> None:
    """PATH holds only ``folders`` (and sleep for the fake dmon's loop), so a real nvidia-smi
    on the test host cannot answer."""
    system = folders[0].parent / "system"
    system.mkdir(exist_ok=True)
    if not (system / "sleep").exists():
        (system / "sleep").symlink_to(shutil.which("sleep"))
    monkeypatch.setenv("PATH", os.pathsep.join(map(str, [*folders, system])))


@pytest.mark.parametrize("script, pci, problem", [
    (ANSWERS_GPU_1, "0000:ca:00.0", None),
    (['echo "No devices were found"', "exit 6"], None,
     "failed with status 6: No devices were found"),
    (['echo "[N/A]"'], None, "printed '[N/A]', not a PCI address"),
    ([], None, "printed nothing, not a PCI address"),
])
def test_gpu_pci_asks_nvidia_smi(tmp_path, monkeypatch, script, pci, problem):
    fake_nvidia_smi(tmp_path / "bin", script)
    only_on_path(monkeypatch, tmp_path / "bin")
    found = dcgmi.gpu_pci(1)
    assert found["gpu_pci"] == pci
    if problem is None:
        assert found["gpu_pci_problem"] is None
    else:
        assert problem in found["gpu_pci_problem"]


def test_gpu_pci_without_nvidia_smi(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    only_on_path(monkeypatch, tmp_path / "bin")
    assert dcgmi.gpu_pci(0) == {"gpu_pci": None, "gpu_pci_problem": "nvidia-smi not found on PATH"}


@pytest.mark.parametrize("with_nvidia_smi", [True, False])
def test_a_run_records_the_gpu_it_watched(tmp_path, monkeypatch, with_nvidia_smi):
    fake_dcgmi(tmp_path / "bin", monkeypatch)
    if with_nvidia_smi:
        fake_nvidia_smi(tmp_path / "bin", ANSWERS_GPU_1)
    only_on_path(monkeypatch, tmp_path / "bin")
    run = tmp_path / "run"
    run.mkdir()
    dmon = DcgmDmon(1, 100)
    dmon.start(run)
    wait_for_lines(run / dcgmi.CAPTURE, 3)
    dmon.stop(run)
    record = json.loads((run / dcgmi.RECORD).read_text())
    if with_nvidia_smi:
        assert (record["gpu_pci"], record["gpu_pci_problem"]) == ("0000:ca:00.0", None)
    else:  # the run went ahead all the same
        assert record["gpu_pci"] is None
        assert record["gpu_pci_problem"] == "nvidia-smi not found on PATH"
    assert record["ended_before_stop"] is False


def test_parse_gives_the_gpu_watched(tmp_path):
    folder = stored_capture(tmp_path, [1, 2, 3], [10, 20, 30])
    assert DcgmDmon.parse(folder, None)["gpu_pci"] is None  # a record made before it was kept
    record = json.loads((folder / dcgmi.RECORD).read_text())
    record.update(gpu_pci="0000:ca:00.0", gpu_pci_problem=None)
    (folder / dcgmi.RECORD).write_text(json.dumps(record))
    assert DcgmDmon.parse(folder, None)["gpu_pci"] == "0000:ca:00.0"
