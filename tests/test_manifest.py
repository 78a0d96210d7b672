"""The run manifest: one typed record, written and read in one place, its version checked."""

from __future__ import annotations

import json

import pytest

from iolab.core import manifest as mf
from iolab.core.manifest import RunManifest
from iolab.errors import InputError


def sample(**fields) -> RunManifest:
    return RunManifest(run_id="0123456789ab-r0", identity={"point": {"x": 1}}, experiment="demo",
                       environment="here", rep=0, point={"x": 1}, **fields)


def test_round_trip(tmp_path):
    path = tmp_path / "run.json"
    m = sample(argv=["fio", "--bs=4096"], knobs={"thp": {"after": "never"}}, cpus=[0, 1])
    mf.write(path, m)
    doc = mf.load_json(path)
    assert doc["schema_version"] == mf.SCHEMA_VERSION == 2
    assert mf.from_json(doc, path) == m


@pytest.mark.parametrize("version", [999, 0, "2", None, True])
def test_other_versions_are_refused_naming_the_file(tmp_path, version):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**sample().to_json(), "schema_version": version}))
    with pytest.raises(InputError) as info:
        mf.from_json(mf.load_json(path), path)
    assert info.value.path == str(path) and info.value.key == "schema_version"
    assert info.value.allowed == "1, 2"


def test_unknown_and_missing_fields_are_named(tmp_path):
    path = tmp_path / "run.json"
    with pytest.raises(InputError) as info:
        mf.from_json({**sample().to_json(), "error": "old key"}, path)
    assert info.value.key == "error"
    doc = sample().to_json()
    del doc["identity"]
    with pytest.raises(InputError) as info:
        mf.from_json(doc, path)
    assert info.value.key == "identity"


def test_an_unknown_field_makes_a_damaged_manifest(tmp_path):
    """Probe 10, C1: an unknown field was a plain InputError, which ended every verb on the
    campaign; damaged, the store names that one run corrupt and reads the others."""
    with pytest.raises(mf.DamagedManifest) as info:
        mf.from_json({**sample().to_json(), "note": "x"}, tmp_path / "run.json")
    assert info.value.key == "note" and info.value.problem == "unknown manifest field"


V1 = {"schema_version": 1, "run_id": "old-id", "experiment": "smt_thp",
      "environment": "kvm-2vcpu", "rep": 0, "params": {"bs": 4096},
      "config": {"settings": {}}, "argv": ["fio"]}


@pytest.mark.parametrize("key, value", [("params", "bs=4096"), ("config", 5), ("rep", True),
                                        ("config", {"settings": [1]}), ("run_id", 7)])
def test_a_version_1_field_of_another_kind_makes_a_damaged_manifest(tmp_path, key, value):
    """A version-1 manifest's field the upgrade reads, of another kind, stopped the listing
    of the whole campaign (a TypeError in the upgrade)."""
    mf.check_v1(V1, tmp_path / "run.json")
    with pytest.raises(mf.DamagedManifest) as info:
        mf.check_v1({**V1, key: value}, tmp_path / "run.json")
    assert info.value.key.startswith(key)


@pytest.mark.parametrize("text", ["", "{\"run_id\": ", "[1, 2]"])
def test_a_truncated_manifest_is_unreadable_not_an_error(tmp_path, text):
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(mf.UnreadableManifest):
        mf.load_json(path)
    with pytest.raises(mf.UnreadableManifest):
        mf.load_json(tmp_path / "missing.json")
