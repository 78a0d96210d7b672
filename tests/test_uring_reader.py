"""The project's io_uring reader: its report parser (golden, malformed), its adapter's argv,
and (where a C compiler and liburing exist) the real build, runs and refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from iolab.errors import InputError, ParseError
from iolab.parsers.uring_reader import parse_uring_reader, parse_uring_reader_file
from iolab.paths import DRIVERS_DIR
from iolab.tools.base import Invocation, Program
from iolab.tools.uring_reader import UringReader

FIXTURE = Path(__file__).parent / "fixtures" / "uring_reader" / "coop-2cpus.json"
DRIVER = DRIVERS_DIR / "uring_reader.sh"
CAN_BUILD = shutil.which("cc") is not None and Path("/usr/include/liburing.h").exists()


def test_a_real_report_parses():
    """coop-2cpus.json: two pinned threads, COOP_TASKRUN, 4 KiB direct reads on this machine."""
    from iolab.tools.uring_reader import reader_version

    assert reader_version() == json.loads(FIXTURE.read_text())["version"], \
        "the golden report was made by another version of the reader"
    r = parse_uring_reader_file(FIXTURE)
    assert (r["iops"], r["ios"], r["threads"], r["cpus"]) == (56588.0, 56588, 2, [0, 1])
    assert r["setup_flags"] == ["COOP_TASKRUN"] and r["errors"] == 0
    assert (r["clat_p50_us"], r["clat_p99_us"]) == (557.055, 835.583)
    start, end = r["window_ns"]
    assert end - start == pytest.approx(1e9, abs=1e6)  # --runtime 1, no ramp
    assert r["liburing"] == "2.3" and r["direct"] is True


def _broken(**changes) -> str:
    doc = json.loads(FIXTURE.read_text())
    for key, value in changes.items():
        if value is None:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize("text, problem", [
    (FIXTURE.read_text()[:200], "not valid JSON (cut off?)"),
    ("[1, 2]", "not a JSON object"),
    (_broken(schema_version=2), "not a uring_reader report of schema version 1"),
    (_broken(iops=None), "key 'iops' is missing"),
    (_broken(ios="many"), "key 'ios': 'many' has the wrong type"),
    (_broken(lat_ns={"mean": 1}), "key 'lat_ns' needs numbers mean, p50, p90, p99, p999, max"),
    (_broken(threads=[]), "key 'threads': needs at least one {cpu, ios} object"),
    (_broken(ios=5), "the threads' I/Os add up to 56588, not to the total 5"),
    (_broken(window_ns=[2, 1]), "key 'window_ns': [2, 1] is not [start, end]"),
    # reports whose numbers contradict each other: the reader computes its rates from its
    # counts, over the runtime it was given (P10 of probe 6: mibs 100 times the reads)
    (_broken(mibs=22104.7), "key 'mibs': 22104.7, but 56588 reads of 4096 bytes over "
                            "runtime_s 1 make 221.047"),
    (_broken(iops=5658800.0), "key 'iops': 5658800.0, but 56588 reads over runtime_s 1 make"),
    (_broken(threads=[{"cpu": 0, "ios": 28268, "iops": 1.0}, {"cpu": 1, "ios": 28320,
                                                              "iops": 28320.0}]),
     "key 'threads[0].iops': 1.0, but 28268 reads over runtime_s 1 make 28268.000"),
    (_broken(short_reads=56589), "key 'short_reads': 56589 of 56588 reads"),
    (_broken(bytes=0), "key 'bytes': a file of 0 bytes holds no read of bs 4096 bytes"),
    (_broken(window_ns=[1795464072504435200, 1795464072504435201]),
     "key 'window_ns': [1795464072504435200, 1795464072504435201] is 1e-09 s long, shorter "
     "than runtime_s 1"),
])
def test_malformed_reports_are_refused(text, problem):
    with pytest.raises(ParseError) as info:
        parse_uring_reader(text, "r.json")
    assert str(info.value).startswith(f"r.json: {problem}")


def test_rates_within_the_rounding_of_the_printed_numbers_are_the_readers_own():
    """The reader prints iops with 1 decimal, mibs with 3 and runtime_s with 6 significant
    digits: a rate within half a last digit and 1e-5 of what the counts give is its own (56588
    reads in 1 s: 0.62 IOPS, 0.0027 MiB/s), a little more is not; a NaN or negative rate is
    left to the sample check, which names it as no measurement."""
    assert parse_uring_reader(_broken(iops=56588.6, mibs=221.0495), "r.json")["mibs"] == 221.0495
    for changes in ({"iops": 56588.7}, {"mibs": 221.0499}, {"iops": 56587.3}):
        with pytest.raises(ParseError, match="the report contradicts itself"):
            parse_uring_reader(_broken(**changes), "r.json")
    assert parse_uring_reader(_broken(mibs=-1.0), "r.json")["mibs"] == -1.0


def _stored(tmp_path: Path, **changes) -> Path:
    (tmp_path / "uring.json").write_text(_broken(**changes))
    return tmp_path


def test_short_reads_make_the_run_no_measurement(tmp_path):
    """The reader counts a short read as a read of bs bytes in mibs: 100,000 short reads of
    180,250 were stored as a sample, mibs unchanged (P11 of probe 6)."""
    reader = UringReader()
    assert reader.parse(_stored(tmp_path))["problem"] is None
    assert reader.parse(_stored(tmp_path, short_reads=1))["problem"] == (
        "1 of 56588 reads returned fewer than the 4096 bytes asked for (short reads), which "
        "mibs counts as whole blocks: the bandwidth is not what was read")
    assert reader.parse(_stored(tmp_path, short_reads=1, errors=3, first_error="EIO"))[
        "problem"] == "3 reads failed (EIO)"


GIVEN = ["scripts/drivers/uring_reader.sh", "--output", "uring.json", "--file",
         "/var/tmp/iolab/irq.dat", "--bs", "4096", "--qdepth", "16", "--runtime", "1",
         "--ramp", "0", "--cpus", "0,1", "--coop-taskrun", "--direct"]


@pytest.mark.parametrize("argv, reason", [
    (GIVEN, ""),
    ([a.replace("4096", "512") for a in GIVEN], "it read with bs 4096, the run gave the reader "
                                                 "--bs '512'"),
    ([a.replace("irq.dat", "other.dat") for a in GIVEN], "it read with file "
                                                         "'/var/tmp/iolab/irq.dat'"),
    ([a.replace("0,1", "2,3") for a in GIVEN], "it read with cpus [0, 1]"),
    ([a for a in GIVEN if a != "--direct"], "its direct is true, the run did not give the "
                                            "reader --direct"),
])
def test_a_report_of_another_run_is_not_this_runs(tmp_path, argv, reason):
    """A report left by a run of another block size, file, CPUs or buffered reads: its
    numbers are not this run's."""
    got = UringReader().foreign_report(_stored(tmp_path), argv)
    assert got == (f"uring.json is not this run's report: {reason}" if reason else "") or \
        got.startswith(f"uring.json is not this run's report: {reason}")


def test_the_argv_carries_flags_and_cpus():
    inv = Invocation("uring_reader", {"file": "/dev/nvme0n1", "bs": 512, "qdepth": 64,
                                      "runtime": 5, "cpus": [2, 3], "coop_taskrun": True,
                                      "iopoll": False, "direct": True})
    launch = UringReader().launch(inv, [])
    assert launch.argv[1:] == ["--output", "uring.json", "--file", "/dev/nvme0n1", "--bs", "512",
                               "--qdepth", "64", "--runtime", "5", "--cpus", "2,3",
                               "--coop-taskrun", "--direct"]
    assert launch.cpus == [2, 3]
    with pytest.raises(InputError, match="uring_reader option 'colour'.*unknown option"):
        UringReader().launch(Invocation("uring_reader", {"colour": 1}), [])
    with pytest.raises(InputError, match="'iopoll'.*'yes' is not true or false"):
        UringReader().launch(Invocation("uring_reader", {"iopoll": "yes"}), [])


def test_a_missing_build_dependency_makes_the_reader_missing():
    program = UringReader().program()
    assert program.needs == ("cc", "/usr/include/liburing.h")
    lacking = Program(program.name, program.executable, needs=("/nonexistent/liburing.h",),
                      install=program.install)
    status = lacking.status()
    assert not status["found"] and "apt-get install gcc liburing-dev" in status["install"]


@pytest.mark.slow
@pytest.mark.skipif(not CAN_BUILD, reason="needs a C compiler and liburing-dev")
class TestTheRealReader:
    @pytest.fixture(autouse=True)
    def target(self, tmp_path, monkeypatch):
        monkeypatch.setenv("IOLAB_BUILD_DIR", str(tmp_path / "build"))
        self.tmp = tmp_path
        self.file = tmp_path / "target.dat"
        self.file.write_bytes(b"\0" * (4 << 20))

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(DRIVER), *args], capture_output=True, text=True, timeout=120)

    def test_it_builds_once_and_measures(self):
        version = self.run("--version")
        assert version.returncode == 0 and version.stdout.startswith("uring_reader 2 (liburing ")
        stamp = (self.tmp / "build" / "uring_reader.stamp").stat().st_mtime_ns
        out = self.tmp / "r.json"
        done = self.run("--file", str(self.file), "--output", str(out), "--cpus", "0",
                        "--runtime", "1", "--qdepth", "8", "--coop-taskrun")
        assert done.returncode == 0, done.stderr
        assert (self.tmp / "build" / "uring_reader.stamp").stat().st_mtime_ns == stamp
        r = parse_uring_reader_file(out)
        assert r["ios"] > 0 and r["setup_flags"] == ["COOP_TASKRUN"] and r["cpus"] == [0]
        assert 0 < r["clat_p50_us"] <= r["clat_p99_us"] <= r["clat_max_us"]

    @pytest.mark.parametrize("args, message", [
        (["--qdepth", "0"], "--qdepth: '0' is not a whole number from 1 to 4096"),
        (["--bs", "3000"], "--bs must be a power of two"),
        (["--iopoll"], "--iopoll needs --direct"),
        (["--defer-taskrun"], "--defer-taskrun needs --single-issuer"),
        (["--colour"], "unknown option '--colour'"),
        (["--cpus", "0-3"], "--cpus: '0-3' is not a whole number"),
        (["--runtime", "-1"], "--runtime: '-1' is not a number of seconds from 0 to 86400"),
    ])
    def test_usage_errors_say_what_is_wrong(self, args, message):
        done = self.run("--file", str(self.file), "--output", str(self.tmp / "r.json"),
                        "--runtime", "1", *args, "--cpus", "0")
        assert done.returncode == 2 and f"uring_reader: {message}" in done.stderr, done.stderr
        assert not (self.tmp / "r.json").exists()

    def test_required_options(self):
        done = self.run("--cpus", "0")
        assert done.returncode == 2 and "--file, --output and --cpus are required" in done.stderr

    def test_a_missing_file_and_failing_reads_are_errors(self):
        missing = self.run("--file", str(self.tmp / "nope"), "--output", str(self.tmp / "r.json"),
                           "--cpus", "0", "--runtime", "1")
        assert missing.returncode == 1 and "cannot open" in missing.stderr
        # polled completions need a device with poll queues; a file on this disk has none
        polled = self.run("--file", str(self.file), "--output", str(self.tmp / "r.json"),
                          "--cpus", "0", "--runtime", "1", "--direct", "--iopoll")
        if polled.returncode == 0:
            pytest.skip("this file system completes polled reads")
        assert polled.returncode == 1 and "reads failed, the first with" in polled.stderr
        report = parse_uring_reader_file(self.tmp / "r.json")  # written, with the errors
        assert report["errors"] > 0 and report["first_error"]
