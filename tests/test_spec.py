"""Spec loading: defaults from the parameters cell, per-environment overrides, validation."""

from __future__ import annotations

import pytest

from iolab import spec as specmod
from iolab.errors import InputError

PARAMS = '''experiment = "demo"
environment = "here"
mode = "replay"
data_dir = None
tool = "fio"
runtime_s = 30
ramp_s = 2
repetitions = 5
base = {"engine": "psync", "concurrency": 16, "thp": "asis"}
choices = {"engine": ["psync", "io_uring"], "thp": ["asis", "always", "never"]}
grids = {"conc": {"vary": {"engine": ["psync", "io_uring"], "concurrency": [1, 4, 16]}},
         "thp": {"vary": {"thp": ["always", "never"]}}}
exclusions = [{"when": {"engine": "io_uring", "concurrency": 1}, "why": "not interesting"}]
'''


def load(make_experiment, yaml_text: str, env: str = "here"):
    notebooks, params = make_experiment("demo", PARAMS, {env: yaml_text})
    return specmod.load("demo", env, notebooks_dir=notebooks, params_dir=params)


def error_for(make_experiment, yaml_text: str) -> InputError:
    with pytest.raises(InputError) as info:
        load(make_experiment, yaml_text)
    return info.value


def test_overrides_replace_scalars_and_merge_base(make_experiment):
    spec = load(make_experiment, "experiment: demo\nruntime_s: 3\nbase: {concurrency: 4}\n")
    assert spec.values["runtime_s"] == 3
    assert spec.values["ramp_s"] == 2
    assert spec.base == {"engine": "psync", "concurrency": 4, "thp": "asis"}
    assert spec.environment == "here"
    assert spec.scalar_settings() == {"ramp_s": 2, "runtime_s": 3, "tool": "fio"}


def test_a_grid_set_to_null_is_removed(make_experiment):
    spec = load(make_experiment, "experiment: demo\ngrids: {thp: null}\n")
    assert list(spec.grids) == ["conc"]


def test_malformed_yaml_names_the_file(make_experiment):
    err = error_for(make_experiment, "experiment: demo\nruntime_s: [3\n")
    assert "malformed YAML" in str(err) and err.path.endswith("here/demo.yaml")


def test_unknown_key_lists_the_allowed_ones(make_experiment):
    err = error_for(make_experiment, "experiment: demo\nruntime: 3\n")
    assert err.key == "runtime" and "unknown parameter" in str(err)
    assert "runtime_s" in err.allowed and "repetitions" in err.allowed


def test_wrong_type(make_experiment):
    err = error_for(make_experiment, "experiment: demo\nruntime_s: fast\n")
    assert err.key == "runtime_s" and "string" in str(err) and "integer" in str(err)


def test_wrong_type_inside_a_grid(make_experiment):
    err = error_for(make_experiment, "experiment: demo\ngrids: {conc: {vary: {concurrency: [1, two]}}}\n")
    assert err.key == "grids.conc.vary.concurrency" and "'two'" in str(err)


def test_empty_value_list(make_experiment):
    err = error_for(make_experiment, "experiment: demo\ngrids: {conc: {vary: {concurrency: []}}}\n")
    assert err.key == "grids.conc.vary.concurrency" and "empty value list" in str(err)


def test_value_outside_choices(make_experiment):
    err = error_for(make_experiment, "experiment: demo\nbase: {engine: libaio}\n")
    assert err.key == "base.engine" and err.allowed == "psync, io_uring"


def test_exclusion_of_an_unknown_variable(make_experiment):
    err = error_for(make_experiment, "experiment: demo\nexclusions: [{when: {smt: off}, why: x}]\n")
    assert err.key == "exclusions[0].when.smt" and "unknown variable" in str(err)
    assert "concurrency" in err.allowed


def test_exclusion_needs_a_reason(make_experiment):
    err = error_for(make_experiment, "experiment: demo\nexclusions: [{when: {engine: psync}}]\n")
    assert err.key == "exclusions[0].why"


def test_params_file_for_another_experiment(make_experiment):
    err = error_for(make_experiment, "experiment: cpu_search\nruntime_s: 3\n")
    assert err.key == "experiment" and "cpu_search" in str(err) and err.allowed == "demo"


def test_params_file_must_name_its_experiment(make_experiment):
    err = error_for(make_experiment, "runtime_s: 3\n")
    assert err.key == "experiment" and "missing" in str(err)


def test_run_control_keys_are_not_params(make_experiment):
    err = error_for(make_experiment, "experiment: demo\nmode: run\n")
    assert err.key == "mode"


def test_missing_params_file_lists_known_environments(make_experiment):
    notebooks, params = make_experiment("demo", PARAMS, {"lab": "experiment: demo\n"})
    with pytest.raises(InputError) as info:
        specmod.load("demo", "elsewhere", notebooks_dir=notebooks, params_dir=params)
    assert info.value.allowed == "lab"


def test_unknown_experiment(make_experiment):
    notebooks, params = make_experiment("demo", PARAMS)
    with pytest.raises(InputError) as info:
        specmod.load("nope", "here", notebooks_dir=notebooks, params_dir=params)
    assert "no notebook" in str(info.value) and info.value.allowed == "demo"


def test_parameters_cell_must_be_literal(make_experiment):
    notebooks, params = make_experiment("demo", PARAMS + "extra = list(range(3))\n",
                                        {"here": "experiment: demo\n"})
    with pytest.raises(InputError) as info:
        specmod.load("demo", "here", notebooks_dir=notebooks, params_dir=params)
    assert info.value.key == "extra"


@pytest.mark.parametrize("env", ["kvm-2vcpu", "hpc-server"])
def test_repository_params_files_validate(env):
    spec = specmod.load("smt_thp", env)
    assert spec.experiment == "smt_thp" and spec.values["runtime_s"] > 0
