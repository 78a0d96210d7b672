"""The suite is hermetic against the shell and the checkout it runs in: a user's IOLAB_*
variables are put aside for the session, the committed data are read from a copy, and locks,
state and scratch files live in the session's own folders. Checked by running a probe test of
this file in a child pytest whose environment sets the variables that had changed outcomes
(IOLAB_SKIP_CORRUPT, IOLAB_EXPERIMENTS, IOLAB_READS_LOG) and points the data, lock and state
folders at the checkout's own and the system's. A suite started with SIGINT ignored (in the
background of a shell without job control) still starts its children answering Ctrl-C."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import scratch_dir

from iolab.paths import REPO_ROOT

FOREIGN = {"IOLAB_SKIP_CORRUPT": "1", "IOLAB_EXPERIMENTS": "/nonexistent",
           "IOLAB_READS_LOG": "/nonexistent/log", "IOLAB_DATA": str(REPO_ROOT / "data"),
           "IOLAB_LOCK_DIR": "/run/lock/iolab", "IOLAB_STATE_DIR": "/var/lib/iolab"}


def test_the_session_sees_none_of_the_users_iolab_variables():
    """Also the probe the child runs: whatever the shell set, a test sees the suite's own."""
    for var in ("IOLAB_SKIP_CORRUPT", "IOLAB_EXPERIMENTS", "IOLAB_READS_LOG"):
        assert var not in os.environ, var
    data = Path(os.environ["IOLAB_DATA"])
    assert data.resolve() != (REPO_ROOT / "data").resolve() and (data / "raw").is_dir()
    for var in ("IOLAB_LOCK_DIR", "IOLAB_STATE_DIR"):
        assert Path(os.environ[var]).parent == data.parent, var
    assert scratch_dir().parent == data.parent
    assert not str(scratch_dir()).startswith("/var/tmp/iolab")


def test_a_shell_with_iolab_variables_set_changes_no_outcome(tmp_path):
    env = {**os.environ, **FOREIGN}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
         str(tmp_path / "t"), f"{__file__}::test_the_session_sees_none_of_the_users_iolab_"
         "variables"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


def test_a_suite_started_with_ctrl_c_ignored_starts_children_that_answer_it(tmp_path):
    """A child pytest started with SIGINT ignored (as 'make test &' starts it) runs a probe
    whose own child must see SIGINT's default action: the Ctrl-C tests depend on it."""
    import signal

    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import signal, subprocess, sys\n"
        "def test_child_answers_ctrl_c():\n"
        "    seen = subprocess.run([sys.executable, '-c', 'import signal; "
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)'],\n"
        "                          capture_output=True, text=True).stdout\n"
        "    assert seen == 'True\\n', seen\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), "-c", str(REPO_ROOT / "pyproject.toml"), "--confcutdir",
         str(REPO_ROOT / "tests"), "-p", "conftest", str(probe)],
        cwd=REPO_ROOT / "tests", capture_output=True, text=True, timeout=600,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
