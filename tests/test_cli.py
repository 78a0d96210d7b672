"""The CLI: verbs print what the library computes and turn bad input into exit code 2."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pandas as pd
import pytest

from iolab.cli import main
from iolab.paths import default_data_dir
from iolab.store import Store


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_plan_shows_counts_eta_tool_and_blocked_knobs(tmp_path):
    code, out, _ = run(["plan", "smt_thp", "--env", "hpc-server", "--data", str(tmp_path)])
    assert code == 0
    assert "28 points (0 excluded) x 5 repetitions" in out
    assert "estimated time" in out and "tool fio:" in out
    assert "hpc-server/smt_thp.yaml" in out


def test_plan_table_has_one_line_per_run(tmp_path):
    code, out, _ = run(["plan", "smt_thp", "--env", "kvm-2vcpu", "--data", str(tmp_path), "--table"])
    lines = [line for line in out.splitlines() if "\t" in line]
    assert code == 0 and len(lines) == 1 + 28 * 3
    assert lines[0].startswith("engine\tconcurrency")


def test_unknown_environment_is_a_clear_error(tmp_path):
    code, _, err = run(["plan", "smt_thp", "--env", "nowhere", "--data", str(tmp_path)])
    assert code == 2 and "nowhere/smt_thp.yaml" in err and "allowed:" in err and "kvm-2vcpu" in err


def test_unknown_experiment_is_a_clear_error(tmp_path):
    code, _, err = run(["plan", "nope", "--env", "kvm-2vcpu", "--data", str(tmp_path)])
    assert code == 2 and "nope" in err and "smt_thp" in err


def test_status_and_restore_on_an_empty_data_folder(tmp_path):
    code, out, _ = run(["status", "--data", str(tmp_path)])
    assert code == 0 and "no campaigns" in out
    code, out, _ = run(["restore", "--data", str(tmp_path)])
    assert code == 0 and "nothing to restore" in out


STORED = Store(default_data_dir(), "smt_thp", "kvm-2vcpu")


@pytest.mark.skipif(not STORED.root.exists(), reason="no stored smt_thp/kvm-2vcpu campaign in data/")
def test_tidy_of_the_committed_campaign(tmp_path):
    out_csv = tmp_path / "t.csv"
    code, _, err = run(["tidy", "smt_thp", "--env", "kvm-2vcpu", "-o", str(out_csv)])
    assert code == 0 and "rows" in err
    df = pd.read_csv(out_csv)
    assert len(df) >= 20 and df["run_id"].is_unique
    for column in ("engine", "concurrency", "iops", "clat_p99_us", "host_fingerprint", "run_id"):
        assert column in df
    host = json.loads(STORED.host_path.read_text())
    assert set(df["host_fingerprint"]) == {host["fingerprint"]}
    code, _, err = run(["tidy", "smt_thp", "--env", "kvm-2vcpu", "--format", "parquet"])
    assert code == 2 and "needs -o" in err
