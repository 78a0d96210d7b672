"""Faults during real campaigns: kills at random moments, stop signals, a full disk, a hung
notebook cell, two campaigns at once.

The kill-and-resume trials run ``iolab run`` as a child, stop it with SIGKILL, SIGTERM or
SIGINT after a random delay (seeded, so a failure can be replayed), and then run the same
command again. They assert what a user relies on:

* no run is lost (every run complete before the kill is still there, unchanged),
  duplicated (one folder per run id, one run id per point and repetition) or half-written
  (every stored run verifies against its manifest; no temporary folder remains);
* no tool process of the stopped campaign outlives the next command, and that command ends
  them before it measures anything (it names each one it ended);
* a stop signal ends the whole process tree, fio's setsid workers included, before
  ``iolab`` exits.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from iolab import procs
from iolab.cli import main
from iolab.core.store import Store
from iolab.execution.signals import STOP_NOW, answered, signal_name

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")]

IOLAB = [sys.executable, "-m", "iolab"]
TRIALS = 10
_STARTED: list[subprocess.Popen] = []


def spawn(argv: list[str], **kwargs) -> subprocess.Popen:
    """An iolab child that is killed at the end of its test if it is still there, so that
    one hung child (holding the host lock) cannot fail every later test."""
    proc = subprocess.Popen(argv, **kwargs)
    _STARTED.append(proc)
    return proc


@pytest.fixture(autouse=True)
def _no_child_outlives_its_test():
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def campaign_argv(tmp: Path, data: Path) -> list[str]:
    """Runs of about 1 s with 2 and 4 fio worker processes (psync: one per job)."""
    return ["run", "smt_thp", "--env", "kvm-2vcpu", "--data", str(data), "--no-progress",
            "--set", "runtime_s=1", "--set", "ramp_s=0", "--set", "repetitions=20",
            "--set", "target_size=8M", "--set", f"target_path={tmp / 'target.dat'}",
            "--set", "grids={c: {vary: {concurrency: [2, 4]}}}", "--set", "base.engine=psync"]


def _state(pid: int) -> str | None:
    """A process's state letter (T: stopped, Z: zombie), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return None


def snapshot(store: Store) -> dict[str, str]:
    """Run id -> its manifest's text, for every complete run."""
    return {r.run_id: (r.path / "run.json").read_text() for r in store.complete_runs()}


def wait_until(predicate, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_kill_and_resume_trials(tmp_path):
    data = tmp_path / "data"
    store = Store(data, "smt_thp", "kvm-2vcpu")
    argv = campaign_argv(tmp_path, data)
    rng = random.Random(20261123)
    for trial in range(TRIALS):
        how = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT][trial % 3]
        delay = rng.uniform(0.2, 4.0)
        context = f"trial {trial}: {how.name} after {delay:.2f} s"
        before = snapshot(store) if store.root.exists() else {}
        proc = spawn([*IOLAB, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        time.sleep(delay)
        proc.send_signal(how)
        out, _ = proc.communicate(timeout=120)
        left = procs.find(data_dir=data)
        for p in left:  # frozen, so that none can end by itself before the next command
            os.kill(p.pid, signal.SIGSTOP)
        # one that was already exiting when it was frozen ends anyway: only the frozen count
        time.sleep(0.2)
        left = [p for p in left if _state(p.pid) == "T"]
        if how != signal.SIGKILL:
            assert proc.returncode in (128 + how, 1, 2, -how), \
                f"{context}: exit {proc.returncode}\n{out}"
            assert left == [], f"{context}: a stopped campaign left {left}\n{out}"
        assert "Traceback" not in out, f"{context}\n{out}"

        # the next command: resume two runs
        resumed = subprocess.run([*IOLAB, *argv, "--limit", "2"], capture_output=True, text=True,
                                 timeout=180)
        assert resumed.returncode == 0, f"{context}\n{resumed.stdout}{resumed.stderr}"
        for p in left:  # named as ended (before the first run, which the order guarantees)
            assert f"ended leftover process pid {p.pid} ({p.command})" in resumed.stdout, context
        assert procs.find(data_dir=data) == [], context
        after = snapshot(store)
        assert {k: after.get(k) for k in before} == before, f"{context}: a stored run was lost or changed"
        assert len(after) >= len(before) + 2 or "to run 0" in resumed.stdout, context
        folders = [d.name for d in store.runs_dir.iterdir()]
        assert not [f for f in folders if f.startswith(".")], f"{context}: a temporary run remains"
        assert sorted(folders) == sorted(after), f"{context}: a folder that is not a complete run"
        assert store.scan()[1] == [], context
    # one run per (point, repetition): run ids are that identity, so no id may repeat
    identities = [(json.loads(t)["point"]["concurrency"], json.loads(t)["rep"])
                  for t in snapshot(store).values()]
    assert len(identities) == len(set(identities))


def test_sigterm_ends_the_whole_tree_before_iolab_exits(tmp_path):
    data = tmp_path / "data"
    proc = spawn([*IOLAB, *campaign_argv(tmp_path, data), "--set",
                             "runtime_s=30", "--limit", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert wait_until(lambda: len([p for p in procs.find(data_dir=data)
                                   if p.command == "fio"]) >= 3), "fio and its workers started"
    workers = [p for p in procs.find(data_dir=data) if p.command == "fio"]
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    # "within a few seconds"; the margin is for a loaded machine, where it takes about one
    assert time.monotonic() - started < 30, "stopping took too long"
    assert proc.returncode == 128 + signal.SIGTERM and "interrupted by SIGTERM" in out
    assert [p for p in workers if not procs._zombie_or_gone(p.pid)] == []
    assert not list((data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs").glob(".tmp-*"))


def test_status_and_restore_find_what_a_killed_campaign_left(tmp_path):
    data = tmp_path / "data"
    proc = spawn([*IOLAB, *campaign_argv(tmp_path, data), "--set", "runtime_s=30",
                             "--limit", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_until(lambda: len(procs.find(data_dir=data)) >= 3)
    proc.kill()
    proc.wait()
    left = procs.find(data_dir=data)
    assert left and all(p.command == "fio" for p in left), "fio's workers outlive a SIGKILL"
    status = subprocess.run([*IOLAB, "status", "--data", str(data)], capture_output=True,
                            text=True)
    for p in left:
        assert f"leftover process of a killed campaign: pid {p.pid} (fio)" in status.stdout
    restore = subprocess.run([*IOLAB, "restore", "--data", str(data)], capture_output=True,
                             text=True)
    assert restore.returncode == 0, restore.stderr
    for p in left:
        assert f"ended leftover process pid {p.pid} (fio)" in restore.stdout
    assert procs.find(data_dir=data) == []


def test_a_second_campaign_on_another_data_directory_is_refused_by_the_host_lock(tmp_path):
    first = spawn([*IOLAB, *campaign_argv(tmp_path, tmp_path / "a"), "--set",
                              "runtime_s=30", "--limit", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: procs.find(data_dir=tmp_path / "a") != [])
        second = subprocess.run([*IOLAB, *campaign_argv(tmp_path, tmp_path / "b"), "--limit", "1"],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert (f"this host's system settings (knobs) and measurements is held by pid "
                f"{first.pid} ('") in second.stderr
        assert f"data {tmp_path / 'a'}" in second.stderr
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)
    assert procs.find(data_dir=tmp_path / "a") == []


def test_a_full_disk_during_a_run_is_one_line_and_leaves_no_half_run(tmp_path):
    """The data directory on a 1 MiB tmpfs: host.json and a first run fit, later fio reports
    do not."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    data = tmp_path / "small"
    data.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(data)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        argv = [*campaign_argv(tmp_path, data), "--limit", "40"]
        proc = subprocess.run([*IOLAB, *argv], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "the disk is full; free space and run the same command again" in proc.stderr
        assert "Traceback" not in proc.stderr
        store = Store(data, "smt_thp", "kvm-2vcpu")
        assert store.scan()[1] == [] and not list(store.runs_dir.glob(".tmp-*"))
        assert not (data / ".knob-journal.json").exists()
        assert procs.find(data_dir=data) == []
    finally:
        subprocess.run(["umount", str(data)])


def test_a_hung_notebook_cell_ends_with_the_notebook_and_cell_named(tmp_path, monkeypatch):
    import nbformat

    from iolab.errors import IolabError
    from iolab.report import book

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("import time\ntime.sleep(600)")]
    src = tmp_path / "hangs.ipynb"
    nbformat.write(nb, src)
    monkeypatch.setattr(book, "CELL_TIMEOUT_S", 3)
    with pytest.raises(IolabError) as info:
        book.execute(src, tmp_path / "out.ipynb", {})
    assert str(info.value).startswith(f"{src}: cell 2 ('import time') did not finish within 3 s "
                                      "(analysis key cell_timeout_s)")


def test_ctrl_c_in_process_returns_130_and_leaves_nothing_running(tmp_path):
    data = tmp_path / "data"
    argv = [*campaign_argv(tmp_path, data), "--set", "runtime_s=30", "--limit", "1"]

    # what a terminal does: SIGINT to the process (from a thread: a timer's SIGALRM would
    # stop the campaign itself, as every signal whose default action ends the process does)
    ctrl_c = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT))
    ctrl_c.start()
    try:
        code = main(argv)
    finally:
        ctrl_c.cancel()
    assert code == 130
    assert procs.find(data_dir=data) == []
    assert os.environ.get(procs.OWNER_VAR) is None, "the owner's name is not left in this process"


# -- every way a campaign can be told to end, with a knob changed ---------------------------

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
needs_thp = pytest.mark.skipif(not (os.geteuid() == 0 and os.access(THP, os.W_OK)),
                               reason="needs root and a writable THP knob")


def thp_now() -> str:
    return THP.read_text().split("[")[1].split("]")[0]


def thp_campaign(tmp: Path, data: Path, *extra: str) -> list[str]:
    """One run of 30 s (stopped long before its end) that sets THP to a value it does not
    have now."""
    other = "never" if thp_now() != "never" else "always"
    return [*IOLAB, *campaign_argv(tmp, data), "--set", "runtime_s=30", "--set",
            f"base.thp={other}", "--limit", "1", *extra]


def measuring(data: Path) -> bool:
    return len([p for p in procs.find(data_dir=data) if p.command == "fio"]) >= 2


def assert_put_back(data: Path, before: str, context: str) -> None:
    assert thp_now() == before, f"{context}: THP left at {thp_now()}"
    assert not (data / ".knob-journal.json").exists(), f"{context}: a journal is left"
    runs = data / "raw" / "smt_thp" / "kvm-2vcpu" / "runs"
    assert not list(runs.glob(".tmp-*")), f"{context}: the unfinished run is left"
    assert not list(runs.glob("[!.]*")), f"{context}: the unfinished run was stored"
    assert procs.find(data_dir=data) == [], f"{context}: a process of the campaign outlived it"
    log = [json.loads(line) for line in
           (data / "raw" / "smt_thp" / "kvm-2vcpu" / "campaign-log.jsonl").read_text().splitlines()]
    assert log[-1]["event"] == "end" and log[-1]["interrupted"], context


# every signal the table says stops a campaign now: the real-time ones share one handler,
# so their first, second and last stand for the rest (tests/test_signals.py tries them all)
REAL_TIME = {signal.SIGRTMIN, signal.SIGRTMIN + 1, signal.SIGRTMAX}
STOPS = [sig for sig in answered(STOP_NOW) if sig < signal.SIGRTMIN or sig in REAL_TIME]


@needs_thp
@pytest.mark.parametrize("how", STOPS, ids=signal_name)
def test_every_stop_signal_ends_the_tree_restores_the_knob_and_sets_the_run_aside(tmp_path, how):
    data = tmp_path / "data"
    before = thp_now()
    proc = spawn(thp_campaign(tmp_path, data), stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, text=True)
    assert wait_until(lambda: measuring(data)), "fio started"
    assert thp_now() != before, "the campaign changed THP"
    proc.send_signal(how)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + how, out
    assert f"interrupted by {signal_name(how)}" in out and "Traceback" not in out
    assert_put_back(data, before, signal_name(how))


@needs_thp
def test_a_campaign_of_another_lock_folder_is_refused_while_one_has_thp_changed(tmp_path):
    """The host lock lives in $IOLAB_LOCK_DIR, so two campaigns given two folders both get
    one; THP's own lock does not move with the variable, and the second is refused, naming
    the first, before it touches anything."""
    data = tmp_path / "a"
    before = thp_now()
    first = spawn(thp_campaign(tmp_path, data), stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL,
                  env={**os.environ, "IOLAB_LOCK_DIR": str(tmp_path / "locks-a")})
    assert wait_until(lambda: measuring(data)), "fio started"
    changed = thp_now()
    assert changed != before, "the first campaign changed THP"
    second = subprocess.run(thp_campaign(tmp_path, tmp_path / "b"), capture_output=True,
                            text=True, timeout=60,
                            env={**os.environ, "IOLAB_LOCK_DIR": str(tmp_path / "locks-b")})
    assert second.returncode == 2, second.stdout + second.stderr
    assert (f"the knob 'thp' of /sys is held by pid {first.pid} (" in second.stderr
            and f"data {data}" in second.stderr), second.stderr
    assert thp_now() == changed and not (tmp_path / "b" / ".knob-journal.json").exists()
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=60) == 128 + signal.SIGINT
    assert_put_back(data, before, "the first campaign")


@needs_thp
def test_a_lost_terminal_ends_the_tree_and_restores_the_knob(tmp_path):
    """The terminal (or SSH session) goes away: the kernel hangs up the campaign, whose writes
    to the terminal then fail; it ends as for SIGHUP, saying so in its log."""
    import fcntl
    import select
    import termios

    data = tmp_path / "data"
    before = thp_now()
    master, slave = os.openpty()
    proc = spawn(thp_campaign(tmp_path, data), stdin=slave, stdout=slave, stderr=slave,
                 start_new_session=True,
                 preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while not measuring(data) and time.monotonic() < deadline:
        # what a terminal shows (read without blocking, so that closing it below is final)
        if select.select([master], [], [], 0.05)[0]:
            seen += os.read(master, 4096)
    assert measuring(data), seen.decode(errors="replace")
    os.close(master)  # the terminal is gone
    assert proc.wait(timeout=60) == 128 + signal.SIGHUP
    assert_put_back(data, before, "lost terminal")
    log = (data / "raw" / "smt_thp" / "kvm-2vcpu" / "campaign-log.jsonl").read_text()
    assert '"signal": "SIGHUP"' in log.splitlines()[-1]


def test_closed_or_full_output_never_aborts_a_campaign_and_the_status_says_so(tmp_path):
    data = tmp_path / "data"
    argv = [*IOLAB, *campaign_argv(tmp_path, data), "--set", "repetitions=2"]
    argv.remove("--no-progress")  # the bar writes to standard error all along
    # buffered as in a terminal session (a test runner may set PYTHONUNBUFFERED): output lost
    # in a buffer must be seen before exit too
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    closed = subprocess.run([*argv, "--limit", "2"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=lambda: os.close(2),
                            timeout=120, env=env)
    assert closed.returncode == 74, "the bar's output was lost, and the status says so"
    store = Store(data, "smt_thp", "kvm-2vcpu")
    assert len(store.complete_runs()) == 2
    with open("/dev/full", "w") as full:
        filled = subprocess.run([*argv, "--limit", "2"], stdout=full, stderr=subprocess.PIPE,
                                text=True, timeout=120, env=env)
    assert filled.returncode == 74 and "Traceback" not in filled.stderr
    assert len(store.complete_runs()) == 4
    quiet = subprocess.run([*argv, "--no-progress", "--limit", "0"], stdout=subprocess.DEVNULL,
                           preexec_fn=lambda: os.close(2), timeout=120, env=env)
    assert quiet.returncode == 0, "nothing was written to the closed stream: nothing lost"
    with open("/dev/full", "w") as full:
        small = subprocess.run([*IOLAB, "experiments"], stdout=full, timeout=60, env=env)
    assert small.returncode == 74, "a short output, lost in the buffer, is seen too"


# -- disturbed runs are failed runs ---------------------------------------------------------


def failures(data: Path) -> list[str]:
    folders = sorted((data / "raw" / "smt_thp" / "kvm-2vcpu" / "failed").iterdir())
    return [json.loads((f / "run.json").read_text())["failure"] for f in folders]


def test_a_run_whose_processes_were_stopped_is_stored_as_failed(tmp_path):
    data = tmp_path / "data"
    proc = spawn([*IOLAB, *campaign_argv(tmp_path, data), "--set", "runtime_s=3", "--limit", "1",
                  "--keep-going"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert wait_until(lambda: measuring(data))
    workers = [p for p in procs.find(data_dir=data) if p.command == "fio"]
    for p in workers:  # a debugger, a suspended job: the tool stops, the clock does not
        os.kill(p.pid, signal.SIGSTOP)
    time.sleep(2.5)
    for p in workers:
        os.kill(p.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    [reason] = failures(data)
    assert reason.startswith("disturbed: process ") and "(fio) was stopped during the run" \
        in reason, reason
    assert Store(data, "smt_thp", "kvm-2vcpu").complete_runs() == []


def test_a_campaign_held_for_a_while_fails_its_run(tmp_path):
    """The whole job suspended (Slurm's scontrol suspend stops every process of it)."""
    data = tmp_path / "data"
    proc = spawn([*IOLAB, *campaign_argv(tmp_path, data), "--set", "runtime_s=2", "--limit", "1",
                  "--keep-going"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert wait_until(lambda: measuring(data))
    held = [proc.pid] + [p.pid for p in procs.find(data_dir=data)]
    for pid in held:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(8)
    for pid in held:
        os.kill(pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    [reason] = failures(data)
    assert "the campaign did not run for" in reason, reason


@needs_thp
def test_a_knob_changed_by_hand_during_a_run_fails_the_run(tmp_path):
    data = tmp_path / "data"
    before = thp_now()
    argv = thp_campaign(tmp_path, data, "--set", "runtime_s=3", "--keep-going")
    proc = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert wait_until(lambda: measuring(data))
    THP.write_text(before)  # someone sets it back by hand while the run measures
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    [reason] = failures(data)
    assert reason.startswith("disturbed: knob thp changed during the run"), reason
    assert thp_now() == before and not (data / ".knob-journal.json").exists()


# -- a knob that cannot be put back ---------------------------------------------------------


@pytest.mark.parametrize("then", ["the next run", "a stop signal"])
def test_a_knob_made_unwritable_mid_campaign_is_named_with_its_state_and_the_fix(
        tmp_path, monkeypatch, capsys, fake_sysroot, refuse_writes, then):
    """THP (of a fake tree) refuses writes once the first run has set it: the campaign ends,
    on the next run's write or on a stop signal, and says on standard error and in its log
    what THP reads now, what it should be, and the commands that put it back; the journal
    stays for ``iolab restore``, which finishes once the file takes writes again."""
    from iolab.execution import runner
    from iolab.host import knobset
    from iolab.host.knobs import ThpKnob

    root = fake_sysroot()
    fake = knobset.make_knobs(root)
    for module in (runner, knobset):  # the campaign's knobs and 'iolab restore's
        monkeypatch.setattr(module, "make_knobs", lambda: fake)
    path = ThpKnob(root).path
    undo = []
    apply = ThpKnob.apply

    def apply_then_refuse(self, value):
        apply(self, value)
        if not undo:
            undo.append(refuse_writes(path))
            if then == "a stop signal":
                os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(ThpKnob, "apply", apply_then_refuse)
    data = tmp_path / "data"
    code = main([*campaign_argv(tmp_path, data), "--set", "base.thp=never", "--limit", "2"])
    err = capsys.readouterr().err
    assert code == (2 if then == "the next run" else 128 + signal.SIGTERM), err
    left = (f'it reads "never" now and should be "madvise"; by hand: `echo madvise > {path}`. '
            f"The journal {data / '.knob-journal.json'} is kept; once the cause is fixed, "
            f"`iolab restore --data {data}` puts every knob back.")
    assert f"iolab: error: could not restore knob(s): thp: knob 'thp' cannot be set" in err
    assert left in err and "Traceback" not in err
    end = json.loads((data / "raw" / "smt_thp" / "kvm-2vcpu" / "campaign-log.jsonl")
                     .read_text().splitlines()[-1])
    assert end["event"] == "end" and end["restore"] == f"iolab restore --data {data}"
    [line] = end["knobs_not_restored"]
    assert line.startswith("thp: knob 'thp' cannot be set") and left.split(". The")[0] in line
    undo[0]()
    assert main(["restore", "--data", str(data)]) == 0
    assert ThpKnob(root).read() == "madvise" and not (data / ".knob-journal.json").exists()


# -- the same campaign inside a notebook's kernel ('iolab notebook --mode run') --------------

def notebook_campaign(tmp: Path, data: Path) -> list[str]:
    """:func:`thp_campaign`'s run, made by the notebook's kernel: a process in a session of
    its own, which no signal sent to ``iolab`` reaches by itself."""
    argv = thp_campaign(tmp, data)
    argv[len(IOLAB)] = "notebook"
    argv.remove("--no-progress")
    return [*argv, "--mode", "run", "-o", str(tmp / "out.ipynb")]


@needs_thp
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGHUP, signal.SIGUSR2,
                                 signal.SIGRTMIN + 1], ids=signal_name)
def test_a_stop_signal_to_iolab_notebook_stops_the_campaign_in_its_kernel(tmp_path, how):
    data = tmp_path / "data"
    before = thp_now()
    proc = spawn(notebook_campaign(tmp_path, data), stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, text=True)
    assert wait_until(lambda: measuring(data)), "fio started"
    assert thp_now() != before, "the campaign changed THP"
    proc.send_signal(how)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + how, out
    assert f"interrupted by {signal_name(how)}: passed on to the campaign" in out
    assert_put_back(data, before, signal_name(how))


def _kernel_of(pid: int) -> int:
    """The notebook's kernel: the child of ``pid`` that runs ipykernel."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return next(int(c) for c in children
                if b"ipykernel" in Path(f"/proc/{c}/cmdline").read_bytes())


@needs_thp
def test_a_kernel_killed_mid_campaign_has_its_knobs_restored_by_iolab_notebook(tmp_path):
    """SIGKILL (or ipykernel's os._exit) ends the kernel before its campaign restores
    anything: ``iolab notebook`` restores the journal itself, as 'iolab restore' does, ends
    the fio the kernel left running, and says so."""
    data = tmp_path / "data"
    before = thp_now()
    proc = spawn(notebook_campaign(tmp_path, data), stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, text=True)
    assert wait_until(lambda: measuring(data)), "fio started"
    assert thp_now() != before, "the campaign changed THP"
    os.kill(_kernel_of(proc.pid), signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    assert "iolab: error: " in out and "the notebook's kernel died" in out
    assert "restoring them from its journal, as 'iolab restore' does" in out
    assert f'thp: restored to "{before}"' in out, out
    assert thp_now() == before
    assert not (data / ".knob-journal.json").exists()
    assert procs.find(data_dir=data) == [], "the fio the kernel left is ended"
