"""The published JSON Schemas: made from the code, committed as made, and every committed file
follows them; a malformed file gives a problem naming the file, the key and what is allowed."""

from __future__ import annotations

import json
import shutil
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from conftest import committed_environments
from jsonschema import Draft202012Validator

from iolab import paths
from iolab.core import manifest, spec, store
from iolab.core import registry
from iolab.core.manifest import RunManifest
from iolab.errors import InputError
from iolab.host import inventory
from iolab.paths import PARAMS_DIR, REPO_ROOT, default_data_dir
from iolab.report import freshness
from iolab.schemas import SCHEMA_DIR, generate
from iolab.schemas.verify import problems, validator, verify

DATA = default_data_dir()   # the committed data (tests/conftest.py)
A_RUN = next((DATA / "raw" / "smt_thp" / "kvm-2vcpu" / "runs").iterdir()) / "run.json"


def test_the_committed_schemas_are_what_the_code_makes():
    stale = generate.differences()
    assert not stale, (f"the schemas in {SCHEMA_DIR} differ from the code's definitions: "
                       f"{'; '.join(stale)}. Regenerate them with '{generate.REGENERATE}' "
                       "and commit them.")


def test_every_schema_is_draft_2020_12_and_says_what_it_is():
    for name, schema in generate.all_schemas().items():
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == generate.DRAFT
        assert schema["$id"].startswith("urn:iolab:schema:"), name
        assert schema["title"] and schema["description"], name
        assert isinstance(schema["x-iolab-version"], int), name
    assert generate.run_schema()["x-iolab-version"] == manifest.SCHEMA_VERSION
    names = set(generate.all_schemas())
    assert {f"params.{e.name}.schema.json" for e in registry.all_experiments()} <= names


def test_the_schema_files_are_package_data():
    patterns = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["package-data"]["iolab"]
    for path in SCHEMA_DIR.glob("*.schema.json"):
        rel = path.relative_to(REPO_ROOT / "iolab").as_posix()
        assert any(fnmatch(rel, p) for p in patterns), f"{rel} is not in package-data"


def test_every_committed_file_follows_the_published_schemas():
    """What 'iolab verify' checks: every run.json, host.json and campaign log under data/raw,
    and every params file."""
    result = verify(DATA)
    found = committed_only(result.problems)
    assert not found, "\n".join(str(p) for p in found)
    raw = DATA / "raw"
    expected = (len(list(raw.glob("*/*/runs/*/run.json")))
                + len(list(raw.glob("*/*/failed/*/run.json")))
                + len(list(raw.glob("*/*/host.json"))) + len(list(raw.glob(f"*/*/{store.LOG}")))
                + sum(len(spec.environments(e.name, e.params_dir))
                      for e in registry.all_experiments()))
    assert result.files == expected > 0


def test_verify_narrows_to_an_experiment_and_environment():
    one = verify(DATA, "irq_affinity", "kvm-2vcpu")
    runs = len(list((DATA / "raw" / "irq_affinity" / "kvm-2vcpu" / "runs").iterdir()))
    assert one.files == runs + 3  # host.json, the campaign log, the params file
    assert verify(DATA, "irq_affinity", "kvm-2vcpu").problems == []


def _store(tmp_path: Path) -> Path:
    """A data folder with one committed run, its host.json and campaign log."""
    env = tmp_path / "raw" / "smt_thp" / "kvm-2vcpu"
    (env / "runs" / A_RUN.parent.name).mkdir(parents=True)
    shutil.copy(A_RUN, env / "runs" / A_RUN.parent.name / "run.json")
    for name in ("host.json", store.LOG):
        shutil.copy(A_RUN.parent.parent.parent / name, env / name)
    return env


def committed_only(found: list[InputError]) -> list[InputError]:
    """The problems of committed files: 'iolab verify' checks a user's own params files too
    (iolab env new), but whether they are valid is not this suite's business."""
    users = [PARAMS_DIR / env for env in spec.environments()
             if env not in committed_environments()]
    return [p for p in found if not any(Path(p.path).is_relative_to(u) for u in users)]


def _only(found: list[InputError]) -> InputError:
    found = committed_only(found)
    assert len(found) == 1, [str(p) for p in found]
    return found[0]


def _edit_run(env: Path, change) -> Path:
    path = next((env / "runs").iterdir()) / "run.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return path


def test_a_copy_of_committed_files_is_clean(tmp_path):
    _store(tmp_path)
    assert committed_only(verify(tmp_path, "smt_thp").problems) == []


@pytest.mark.parametrize("change, key, problem, allowed", [
    (lambda d: d.update(rep="3"), "$.rep", "'3' is not of type 'integer'", "repetition"),
    (lambda d: d.update(status="done"), "$.status", "is not one of", '"ok", "failed"'),
    (lambda d: d.update(schema_version=3), "$.schema_version", "is not one of", "1, 2"),
    (lambda d: d.update(bogus=1), "$", "'bogus' was unexpected", "run_id, identity"),
    (lambda d: d.pop("point"), "$", "'point' is a required property", None),
    (lambda d: next(iter(d["files"].values())).update(sha256="xyz"), "$.files[", "does not match",
     "64 lowercase hex digits"),
])
def test_a_malformed_run_json_names_the_file_the_key_and_what_is_allowed(
        tmp_path, change, key, problem, allowed):
    path = _edit_run(_store(tmp_path), change)
    found = _only(verify(tmp_path).problems)
    assert found.path == str(path) and found.key.startswith(key) and problem in found.problem
    assert allowed is None or allowed in found.allowed
    assert str(path) in str(found) and f"key '{key}" in str(found)


def test_a_version_1_manifest_is_read_as_version_1(tmp_path):
    v1 = {"schema_version": 1, "run_id": "old-id", "experiment": "smt_thp",
          "environment": "kvm-2vcpu", "rep": 0, "params": {"bs": 4096},
          "config": {"settings": {}}, "argv": ["fio"]}
    assert problems(v1, validator("run.schema.json"), "run.json") == []
    found = _only(problems({k: v for k, v in v1.items() if k != "config"},
                           validator("run.schema.json"), "run.json"))
    assert "'config' is a required property" in found.problem
    # the reader refuses it alike, naming the key, before an upgrade would fail on it
    with pytest.raises(manifest.DamagedManifest, match="config"):
        manifest.check_v1({k: v for k, v in v1.items() if k != "config"}, Path("run.json"))


def test_a_malformed_host_json_and_campaign_log(tmp_path):
    env = _store(tmp_path)
    host = json.loads((env / "host.json").read_text())
    host["mem_total_kib"] = "16 GiB"
    (env / "host.json").write_text(json.dumps(host))
    (env / store.LOG).write_text(json.dumps({"event": "start", "at": "now"}) + "\n"
                                 + json.dumps({"event": "restart", "at": "now"}) + "\n{\n")
    found: dict[tuple[str, str], list[InputError]] = {}
    for p in committed_only(verify(tmp_path).problems):
        found.setdefault((Path(p.path).name, p.key), []).append(p)
    assert "integer" in found["host.json", "$.mem_total_kib"][0].problem
    # each field a start line lacks is a problem of its own
    assert "'pid' is a required property" in [p.problem for p in found[store.LOG, "line 1 $"]]
    assert "start, round" in found[store.LOG, "line 2 $.event"][0].allowed.replace('"', "")
    assert "not valid JSON" in found[store.LOG, "line 3"][0].problem


@pytest.mark.parametrize("path, value, problem", [
    (("mem_total_kib",), 10**400, "is greater than the maximum"),
    (("mem_total_kib",), -4096, "is less than the minimum of 1"),
    (("cpu", "logical_cpus"), 0, "is less than the minimum of 1"),
    (("cpu", "model_name"), ["<b>x</b>"], "is not of type 'string', 'null'"),
])
def test_a_host_record_value_no_host_has_is_named_by_verify(tmp_path, path, value, problem):
    """Probe 10, Q17/Q18: these passed 'iolab verify' (the schema checked types only)."""
    env = _store(tmp_path)
    host = json.loads((env / "host.json").read_text())
    inner = host
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    (env / "host.json").write_text(json.dumps(host))
    found = [p for p in committed_only(verify(tmp_path).problems) if Path(p.path).name == "host.json"]
    assert [p.key for p in found] == ["$." + ".".join(path)] and problem in found[0].problem


def _params(experiment: str = "smt_thp") -> dict:
    return spec.load_yaml(spec.params_path(experiment, "kvm-2vcpu").read_text())


@pytest.mark.parametrize("override, key, allowed", [
    ({"base.concurrency": 0}, "$.base.concurrency", "whole number"),
    ({"runtime_s": -1}, "$.runtime_s", "a whole number >=1"),
    ({"order": "random"}, "$.order", "interleaved"),
    ({"repetitions": 0}, "$.repetitions", "fixed count"),
    ({"environment": "x"}, "$", "base, grids"),
    ({"target_size": "lots"}, "$.target_size", "a size such as 1G"),
])
def test_the_params_schema_refuses_what_iolab_refuses(override, key, allowed):
    """The schema and iolab's own reader agree on a malformed params file."""
    doc = _params()
    for dotted, value in override.items():
        spec._assign(doc, dotted, value)
    found = problems(doc, validator("params.smt_thp.schema.json"), "smt_thp.yaml")
    assert found and found[0].key == key and allowed in (found[0].allowed or ""), \
        [str(p) for p in found]
    with pytest.raises(InputError):
        spec.load(registry.get("smt_thp"), "kvm-2vcpu", overrides=[
            f"{k}={json.dumps(v)}" for k, v in override.items()])


@pytest.mark.parametrize("override, problem", [
    # cpu_search's kvm-2vcpu file runs bdevperf on the aio bdev
    ({"fio_ioengine": "io_uring"}, "fio_ioengine only applies when tool is fio; remove it"),
    ({"bdev": "nvme"}, "'devices' is a required property"),
])
def test_a_setting_that_applies_only_under_a_condition(override, problem):
    doc = {**_params("cpu_search"), **override}
    found = problems(doc, validator("params.cpu_search.schema.json"), "cpu_search.yaml")
    assert [p.problem for p in found] == [problem]
    with pytest.raises(InputError):
        spec.load(registry.get("cpu_search"), "kvm-2vcpu",
                  overrides=[f"{k}={v}" for k, v in override.items()])


def test_what_the_writers_write_follows_the_schemas(tmp_path, monkeypatch):
    host = {**inventory.collect_inventory({}), "fingerprint": "0" * 16}
    assert set(host) == set(inventory.FIELDS)
    assert problems(host, validator("host.schema.json"), "host.json") == []

    run = RunManifest(run_id="abc-r0", identity={}, experiment="e", environment="v", rep=0,
                      point={"x": 1}, files={"stdout": {"sha256": "a" * 64, "bytes": 3}})
    manifest.write_plain(tmp_path / "run.json", run)
    assert problems(json.loads((tmp_path / "run.json").read_text()),
                    validator("run.schema.json"), "run.json") == []

    monkeypatch.setattr(paths, "BOOK_BUILD_RECORD", tmp_path / "fresh.json")
    freshness.remember("book/x.ipynb", "f" * 64, reads=["smt_thp", "*"])
    freshness.remember("html", "e" * 64)
    assert problems(json.loads((tmp_path / "fresh.json").read_text()),
                    validator("build-record.schema.json"), "fresh.json") == []


def test_the_campaign_log_refuses_a_field_it_does_not_declare(tmp_path):
    log = store.Store(tmp_path, "smt_thp", "kvm-2vcpu")
    log.log({"event": "round", "round": 1, "seed": 2, "runs": []})
    with pytest.raises(ValueError, match="LOG_EVENTS"):
        log.log({"event": "round", "round": 1, "seed": 2, "runs": [], "new": 1})
    line = json.loads((log.root / store.LOG).read_text())
    assert problems(line, validator("campaign-log.schema.json"), store.LOG) == []


def test_iolab_verify_reports_a_file_that_breaks_its_schema_and_exits_1(tmp_path, capsys):
    from iolab.cli import main

    env = _store(tmp_path)
    run = env / "runs" / A_RUN.parent.name
    shutil.rmtree(run)
    shutil.copytree(A_RUN.parent, run)  # the whole run, so its raw files are intact too
    narrow = ["--env", "kvm-2vcpu"]   # the committed params file alone, not a user's own
    assert main(["verify", "smt_thp", "--data", str(tmp_path), "--fast", *narrow]) == 0
    assert "no problems" in capsys.readouterr().out
    path = _edit_run(env, lambda d: d.update(rep="3"))
    assert main(["verify", "smt_thp", "--data", str(tmp_path), "--fast", *narrow]) == 1
    out = capsys.readouterr().out
    assert f"{path}: key '$.rep'" in out and "1 problems in 1 files" in out
