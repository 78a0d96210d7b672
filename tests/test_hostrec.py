"""The host record as collectors read it (iolab.collectors.hostrec): one reading of host.json
for every command, as the store's (a key given twice, or nesting too deep, is refused)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iolab.collectors.hostrec import host_cpus
from iolab.errors import ParseError
from test_reliability import cli, copy_committed

NESTED = '"zz": ' + "[" * 100_000 + "]" * 100_000
TWICE = '"cpu": {"logical_cpus": 2, "logical_cpus": 4000}'


def _run_dir(tmp_path: Path, host: str | bytes) -> Path:
    run = tmp_path / "env" / "runs" / "r1"
    run.mkdir(parents=True)
    (tmp_path / "env" / "host.json").write_bytes(host if isinstance(host, bytes)
                                                 else host.encode())
    return run


@pytest.mark.parametrize("host, reason", [
    ('{"cpu": {"logical_cpus": 2}, ' + NESTED + "}", "nested more than 100 levels deep"),
    ("{" + TWICE + "}", "key 'logical_cpus' is given twice in one object"),
    ('{"cpu": {"logical_cpus": 2}', "not valid JSON"),
    (b'{"cpu": {"logical_cpus": 2}, "x": "\xff"}', "not valid JSON"),
], ids=["nested", "key-twice", "cut-off", "not-utf8"])
def test_a_host_record_the_store_refuses_is_refused_by_the_collectors(tmp_path, host, reason):
    """hostrec read host.json with a bare json.loads: 100,000 nested brackets raised
    RecursionError (an internal error), and a key given twice was taken as its last value
    (4,000 CPUs), while verify and status refused the same file."""
    run = _run_dir(tmp_path, host)
    with pytest.raises(ParseError) as caught:
        host_cpus(run)
    assert reason in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / "env" / "host.json"))


def test_a_host_record_read_well_gives_its_cpus(tmp_path):
    assert host_cpus(_run_dir(tmp_path, '{"cpu": {"logical_cpus": 2}}')) == 2


@pytest.mark.parametrize("extra, reason", [
    (NESTED, "nested more than 100 levels deep"),
    ('"cpu": {"logical_cpus": 2}', "key 'cpu' is given twice in one object"),
], ids=["nested", "key-twice"])
def test_tidy_refuses_a_host_record_verify_refuses_in_one_line(tmp_path, extra, reason):
    """tidy ended in an internal error (rc 70) on a nested host record, and tabled a campaign
    whose host record gives a key twice (verify: rc 1, status: cannot be read)."""
    data = copy_committed(tmp_path / "data", 2)
    path = data / "raw" / "smt_thp" / "kvm-2vcpu" / "host.json"
    doc = json.dumps(json.loads(path.read_text()))
    path.write_text(doc[:-1] + ", " + extra + "}")
    code, out, err = cli(["tidy", "smt_thp", "--env", "kvm-2vcpu", "--data", str(data),
                          "-o", str(tmp_path / "t.csv")])
    assert code == 2, (out, err)
    assert f"{path}: " in err and reason in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "t.csv").exists()


def test_a_host_record_changed_after_it_was_made_is_refused_by_the_collectors(tmp_path):
    """hostrec read host.json without the fingerprint check every other reader makes
    (Store.read_host): a record whose logical_cpus was raised to 4,000 after it was made
    (its stored fingerprint no longer its fields') bounded a run's counts by 4,000 CPUs.
    Now it is refused, naming the file and the fingerprint, as the store refuses it."""
    committed = Path(__file__).parent.parent / "data" / "raw" / "smt_thp" / "kvm-2vcpu"
    doc = json.loads((committed / "host.json").read_text())
    assert host_cpus(_run_dir(tmp_path / "as-made", json.dumps(doc))) == 2
    doc["cpu"]["logical_cpus"] = 4000
    with pytest.raises(ParseError) as caught:
        host_cpus(_run_dir(tmp_path, json.dumps(doc)))
    assert str(caught.value).startswith(f"{tmp_path / 'env' / 'host.json'}: fingerprint: "
                                        f"fingerprint '{doc['fingerprint']}' is not the "
                                        "fingerprint of the record's own fields")
    assert str(caught.value).endswith("the record was changed after it was made (allowed: the "
                                      "record as iolab wrote it; restore the file from git or "
                                      "move the campaign away)")
