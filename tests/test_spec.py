"""Spec loading: one params file per environment, validated against the experiment's schema,
with --set overrides and --where filters; every error names the file, the key and what is
allowed."""

from __future__ import annotations

import pytest

from iolab.core import spec as specmod
from iolab.core.registry import all_experiments
from iolab.errors import InputError
from iolab.paths import PARAMS_DIR
from iolab.safefiles import TooLarge

from conftest import DEMO_PARAMS, alias_bomb, committed_environments


def load(demo, params_dir, text: str = DEMO_PARAMS, overrides=None):
    root = params_dir({"here": text})
    return specmod.load(demo, "here", params_dir=root, overrides=overrides)


def error_for(demo, params_dir, text: str, overrides=None) -> InputError:
    with pytest.raises(InputError) as info:
        load(demo, params_dir, text, overrides)
    return info.value


def test_a_complete_file_with_defaults_filled_in(demo, params_dir):
    spec = load(demo, params_dir)
    assert spec.settings == {"tool": "fio", "runtime_s": 30, "ramp_s": 2, "target": "/tmp/demo.dat"}
    assert spec.repetitions == 5 and spec.variables == ["engine", "concurrency", "thp", "pinned"]
    assert spec.analysis == {"confidence": 0.95, "palette": "colorblind", "figure_width": 11,
                             "cell_timeout_s": 900, "kernel_start_timeout_s": 120,
                             "part_of": None}
    assert spec.exclusions == [{"when": {"engine": ["io_uring"], "concurrency": [1]},
                                "why": "not interesting"}]


def test_set_overrides_are_validated_and_recorded(demo, params_dir):
    spec = load(demo, params_dir, overrides=["runtime_s=1", "base.concurrency=4",
                                             "analysis.confidence=0.9"])
    assert spec.settings["runtime_s"] == 1 and spec.base["concurrency"] == 4
    assert spec.analysis["confidence"] == 0.9
    assert spec.overrides == {"runtime_s": 1, "base.concurrency": 4, "analysis.confidence": 0.9}
    assert spec.params_file.name == "demo.yaml" and "--set runtime_s=1" in spec.sources
    err = error_for(demo, params_dir, DEMO_PARAMS, overrides=["ramp_s=-3"])
    assert err.path.startswith("--set") and err.key == "ramp_s" and ">=0" in err.allowed


def test_set_needs_key_equals_value(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS, overrides=["runtime_s"])
    assert err.path == "--set" and "KEY=VALUE" in str(err)


def test_a_misspelt_top_level_key_is_named_with_a_suggestion(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS + "runtime: 3\n")
    assert err.key == "runtime" and "did you mean 'runtime_s'" in str(err)
    assert "runtime_s" in err.allowed and "repetitions" in err.allowed
    assert err.path.endswith("here/demo.yaml")


def test_malformed_yaml_names_the_file(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS + "runtime_s: [3\n")
    assert "malformed YAML" in str(err) and err.path.endswith("here/demo.yaml")


def test_wrong_type(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("runtime_s: 30", "runtime_s: fast"))
    assert err.key == "runtime_s" and "string" in str(err) and "whole number" in err.allowed


@pytest.mark.parametrize("bad, key", [("repetitions: 5", "repetitions: 1000000000"),
                                      ("ramp_s: 2", "ramp_s: -3"),
                                      ("runtime_s: 30", "runtime_s: 0")])
def test_out_of_range_values_are_refused_before_anything_runs(demo, params_dir, bad, key):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace(bad, key))
    assert err.key == key.split(":")[0] and "out of range" in str(err)


def test_wrong_type_inside_a_grid(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("concurrency: [1, 4, 16]",
                                                          "concurrency: [1, two]"))
    assert err.key == "grids.conc.vary.concurrency" and "'two'" in str(err)


def test_empty_value_list(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("concurrency: [1, 4, 16]", "concurrency: []"))
    assert err.key == "grids.conc.vary.concurrency" and "empty value list" in str(err)


def test_value_outside_choices(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("engine: psync,", "engine: libaio,"))
    assert err.key == "base.engine" and err.allowed == "psync, io_uring"


def test_unquoted_on_off_gets_a_hint(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("thp: asis,", "thp: off,"))
    assert err.key == "base.thp" and "quotes" in str(err)


def test_the_base_point_names_every_variable(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace(", pinned: false", ""))
    assert err.key == "base.pinned" and "missing" in str(err)
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("pinned: false", "pinned: false, smt: 'on'"))
    assert err.key == "base.smt" and "unknown variable" in str(err)


def test_exclusion_of_an_unknown_variable(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("when: {engine: io_uring, concurrency: 1}",
                                                          "when: {smt: 'off'}"))
    assert err.key == "exclusions[0].when.smt" and "unknown variable" in str(err)
    assert "concurrency" in err.allowed


def test_exclusion_needs_a_reason(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace(", why: not interesting", ""))
    assert err.key == "exclusions[0].why"


def test_params_file_for_another_experiment(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("experiment: demo", "experiment: cpu_search"))
    assert err.key == "experiment" and "cpu_search" in str(err) and err.allowed == "demo"


def test_params_file_must_name_its_experiment(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("experiment: demo\n", ""))
    assert err.key == "experiment" and "missing" in str(err)


def test_run_control_keys_are_not_params(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS + "mode: run\n")
    assert err.key == "mode" and "chosen when running" in str(err)


def test_unknown_analysis_key(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS + "analysis: {confidnce: 0.9}\n")
    assert err.key == "analysis.confidnce" and "did you mean 'analysis.confidence'" in str(err)


def test_missing_params_file_lists_known_environments_and_says_how_to_make_one(demo, params_dir):
    root = params_dir({"lab": DEMO_PARAMS})
    with pytest.raises(InputError) as info:
        specmod.load(demo, "elsewhere", params_dir=root)
    assert info.value.allowed == "lab" and "iolab env new elsewhere" in str(info.value)


def test_environment_names_are_folder_names(demo, params_dir):
    with pytest.raises(InputError) as info:
        specmod.load(demo, "../../somewhere", params_dir=params_dir({"lab": DEMO_PARAMS}))
    assert info.value.key == "environment"


def test_where_filters_are_checked(demo, params_dir):
    spec = load(demo, params_dir)
    schema = demo.schema()
    assert specmod.parse_where(spec, schema, ["engine=io_uring", "concurrency=[1, 4]"]) == \
        {"engine": ["io_uring"], "concurrency": [1, 4]}
    with pytest.raises(InputError) as info:
        specmod.parse_where(spec, schema, ["qdepth=4"])
    assert info.value.key == "qdepth" and "concurrency" in info.value.allowed
    with pytest.raises(InputError):
        specmod.parse_where(spec, schema, ["engine=libaio"])


def test_settings_that_apply_only_with_another_value():
    from iolab.core.registry import get
    cpu = get("cpu_search")
    spec = specmod.load(cpu, "hpc-server")
    assert "spdk_dir" in spec.settings and "fio_ioengine" not in spec.settings
    with pytest.raises(InputError) as info:
        specmod.load(cpu, "hpc-server", overrides=["fio_ioengine=libaio"])
    assert info.value.key == "fio_ioengine" and "only applies when tool is fio" in str(info.value)
    # two conditions: the user-space driver binds NVMe devices, not the files of aio bdevs
    assert "user_space_driver" not in specmod.load(cpu, "kvm-2vcpu").settings
    with pytest.raises(InputError) as info:
        specmod.load(cpu, "kvm-2vcpu", overrides=["user_space_driver=vfio-pci"])
    assert info.value.key == "user_space_driver"
    assert "only applies when bdev is nvme and tool is bdevperf" in str(info.value)


@pytest.mark.parametrize("experiment, env", [
    (e, env) for e in all_experiments() for env in specmod.environments(e.name, e.params_dir)
    if e.params_dir != PARAMS_DIR or env in committed_environments()],
    ids=lambda v: getattr(v, "name", v))
def test_repository_params_files_validate(experiment, env):
    spec = specmod.load(experiment, env)
    assert spec.experiment == experiment.name and spec.repetitions > 0


def test_a_grid_cannot_both_set_and_vary_a_variable(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace(
        "thp: {vary: {thp: [always, never]}}", "thp: {vary: {thp: [always]}, set: {thp: never}}"))
    assert err.key == "grids.thp.set.thp" and "not both" in str(err)


def test_an_exclusion_with_an_unknown_field(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("why: not interesting",
                                                          "why: not interesting, whn: {}"))
    assert err.key == "exclusions[0].whn"


RULE = "repetitions: {min: 3, max: 8, metric: iops, target_ci_pct: 5}"


def test_a_repetition_rule_interleaves_by_default_and_a_count_does_not(demo, params_dir):
    spec = load(demo, params_dir, DEMO_PARAMS.replace("repetitions: 5", RULE))
    assert not spec.rule.fixed and spec.rule.max == spec.repetitions == 8
    assert spec.order == "interleaved" and spec.seed is None
    fixed = load(demo, params_dir)
    assert fixed.rule.fixed and fixed.order == "sequential"
    chosen = load(demo, params_dir, DEMO_PARAMS.replace("repetitions: 5", RULE)
                  + "order: sequential\nseed: 12\n")
    assert chosen.order == "sequential" and chosen.seed == 12


def test_dotted_set_reaches_into_the_rule(demo, params_dir):
    spec = load(demo, params_dir, DEMO_PARAMS.replace("repetitions: 5", RULE),
                overrides=["repetitions.max=12", "repetitions.target_ci_pct=2.5"])
    assert (spec.rule.min, spec.rule.max, spec.rule.target_ci_pct) == (3, 12, 2.5)
    assert spec.overrides == {"repetitions.max": 12, "repetitions.target_ci_pct": 2.5}
    # a whole rule in place of a count
    spec = load(demo, params_dir, overrides=["repetitions={min: 2, max: 4, metric: iops, "
                                             "target_ci_pct: 10}"])
    assert spec.rule.max == 4 and spec.order == "interleaved"


@pytest.mark.parametrize("text, overrides, key, says", [
    (RULE, ["repetitions.max=abc"], "repetitions.max", "'abc' is a string"),
    (RULE, ["repetitions.min=9"], "repetitions.min", "min 9 is larger than max 8"),
    (RULE, ["repetitions.metric=latency"], "repetitions.metric", "not a metric this experiment"),
    (RULE, ["repetitions.confidence=1.5"], "repetitions.confidence", "out of range"),
    ("repetitions: 5", ["repetitions.max=8"], "repetitions.max",
     "'repetitions' is a whole number, not a mapping"),
    (RULE, ["order=random"], "order", "not one of the allowed values"),
    (RULE, ["seed=-1"], "seed", "out of range"),
])
def test_bad_rule_overrides_are_refused_naming_the_option(demo, params_dir, text, overrides,
                                                         key, says):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("repetitions: 5", text), overrides)
    assert err.path.startswith("--set") and err.key == key and says in err.problem


def test_a_rule_in_the_file_is_checked_against_the_experiments_metrics(demo, params_dir):
    err = error_for(demo, params_dir, DEMO_PARAMS.replace(
        "repetitions: 5", RULE.replace("iops", "iopz")))
    assert err.path.endswith("here/demo.yaml") and err.key == "repetitions.metric"
    assert err.allowed == "iops"


def test_a_later_set_of_the_same_key_wins_and_a_where_twice_is_refused():
    from iolab.core.spec import parse_assignments
    from iolab.errors import InputError

    assert parse_assignments(["runtime_s=1", "ramp_s=0", "runtime_s=30"], "--set") == {
        "ramp_s": 0, "runtime_s": 30}
    with pytest.raises(InputError, match="is given twice"):
        parse_assignments(["engine=psync", "engine=io_uring"], "--where")


def test_a_number_python_will_not_read_is_a_yaml_error_not_a_crash():
    """An integer of more than 4,300 digits in a params file, --set or --where raised
    ValueError, an internal error with exit 70."""
    import yaml

    from iolab.core.spec import load_yaml

    with pytest.raises(yaml.YAMLError, match="a number that cannot be read"):
        load_yaml("runtime_s: " + "9" * 5000)
    assert load_yaml("runtime_s: " + "9" * 4000)["runtime_s"] == int("9" * 4000)


def test_a_folder_with_no_environments_name_is_no_environment(demo, params_dir, monkeypatch,
                                                               capsys):
    """A params folder whose name check_name refuses (escape sequences, a line break) is
    not listed: not by environments(), nor by the help that lists them, nor by 'iolab
    experiments'; no verb could use it, and its name would reach the terminal raw."""
    from iolab.cli import common, info

    evil = "evil\x1b]0;PWNED\x07\x1b[2Jx"
    root = params_dir({"lab": DEMO_PARAMS, evil: DEMO_PARAMS, "a\nb": DEMO_PARAMS})
    assert specmod.environments("demo", root) == specmod.environments(params_dir=root) == ["lab"]
    monkeypatch.setattr(specmod.environments, "__defaults__", (None, root))
    assert "PWNED" not in common.envs_help() and "one of lab (" in common.envs_help()
    monkeypatch.setattr(demo, "params_dir", root, raising=False)
    monkeypatch.setattr(info.registry, "all_experiments", lambda: [demo])
    info.cmd_experiments(type("Args", (), {"format": "text"})())
    out = capsys.readouterr().out
    assert "environments with params: lab" in out and "PWNED" not in out


@pytest.mark.parametrize("value, problem", [
    ("99999999999999999999999T", "'99999999999999999999999T' is out of range"),
    ("9" * 5000 + "G", "'" + "9" * 15),
    ("8192P", "'8192P' is out of range"),
    (2**63, "a whole number of about 20 digits is out of range"),
    (10**5000, "a whole number of about 5001 digits is out of range"),
], ids=["23 digits T", "5,000 digits G", "8192P", "2**63", "5,001 digits"])
def test_a_size_beyond_any_file_is_out_of_range(value, problem):
    """A target_size of 1.1e35 bytes was planned (and would have been written until the disk
    was full); 5,000 digits with a unit were an internal error (int() refuses 4,300)."""
    from iolab.core.schema import MAX_SIZE, Size

    field = Size()
    with pytest.raises(InputError) as info:
        field.check(value, "p.yaml", "target_size")
    message = str(info.value)
    assert message.startswith(f"p.yaml: key 'target_size': {problem}"), message
    assert message.endswith(f"at most {MAX_SIZE} bytes)") and len(message) < 500
    assert field.check("8191P", "p.yaml", "target_size") == "8191P"
    assert field.check(MAX_SIZE, "p.yaml", "target_size") == MAX_SIZE


def test_a_params_file_whose_aliases_stand_for_a_billion_values_is_refused_in_one_line(
        demo, params_dir):
    """Probe 7, B1: a 4 KB params file of anchors (runtime_s: a "billion laughs") took 1.6 GB
    and 40 s before it ended as an internal error (MemoryError): the schema's message quoted
    the expanded value whole. Now the loader refuses it before anything walks it."""
    err = error_for(demo, params_dir, DEMO_PARAMS.replace("runtime_s: 30",
                                                          "runtime_s: " + alias_bomb(6)))
    assert err.path.endswith("here/demo.yaml") and "\n" not in str(err)
    assert "malformed YAML: its aliases repeat 1,234,550 values, more than the 10,000" in str(err)


def test_a_set_value_whose_aliases_stand_for_a_billion_values_is_refused_in_one_line(
        demo, params_dir):
    """Probe 7, B1b: the same value through --set ramp_s=... ended as an internal error."""
    err = error_for(demo, params_dir, DEMO_PARAMS, overrides=["ramp_s=" + alias_bomb(6)])
    assert err.path == "--set ramp_s" and "its aliases repeat 1,234,550 values" in str(err)
    assert "\n" not in str(err) and len(str(err)) < 600


def test_a_long_value_of_the_wrong_type_is_quoted_as_an_excerpt(demo, params_dir):
    """A message quotes a bounded excerpt of a value, never its whole repr (B1's repr of
    10^9 items; a list of 5,000 numbers written out is 15 kB of message)."""
    err = error_for(demo, params_dir, DEMO_PARAMS.replace(
        "runtime_s: 30", "runtime_s: [" + ", ".join(["1"] * 5000) + "]"))
    assert err.key == "runtime_s" and "is a list" in str(err) and len(str(err)) < 400


def test_a_params_file_larger_than_any_is_refused_unread_in_one_line(demo, params_dir):
    """Probe 7, B2: a params file was read whole whatever its size (a 3 GB sparse file: an
    internal error, MemoryError). Now it is read through read_regular, bounded."""
    padded = DEMO_PARAMS + "# " + "x" * specmod.PARAMS_MOST + "\n"
    with pytest.raises(TooLarge) as info:
        load(demo, params_dir, padded)
    assert str(info.value).endswith(f"holds {len(padded):,} bytes (or more), more than iolab "
                                    "ever writes in an experiment's params file; it is not read "
                                    "(allowed: at most 1,048,576 bytes; move the file away if it "
                                    "is not iolab's)")


def test_the_exclusions_of_a_params_file_are_bounded(demo, params_dir, monkeypatch):
    """A plan indexes every exclusion and combination of values it names: a params file
    holds at most EXCLUSIONS_MOST rules naming EXCLUSION_COMBOS_MOST combinations."""
    monkeypatch.setattr(specmod, "EXCLUSIONS_MOST", 3)
    rule = "{when: {engine: io_uring, concurrency: 1}, why: not interesting}"
    err = error_for(demo, params_dir, DEMO_PARAMS.replace(f"exclusions: [{rule}]",
                                                          f"exclusions: [{', '.join([rule] * 4)}]"))
    assert err.key == "exclusions" and "4 exclusions" in str(err)
    assert err.allowed == "at most 3 exclusions"
    load(demo, params_dir, DEMO_PARAMS.replace(f"exclusions: [{rule}]",
                                               f"exclusions: [{', '.join([rule] * 3)}]"))
    monkeypatch.setattr(specmod, "EXCLUSION_COMBOS_MOST", 5)
    err = error_for(demo, params_dir, DEMO_PARAMS.replace(
        "when: {engine: io_uring, concurrency: 1}",
        "when: {engine: [psync, io_uring], concurrency: [1, 4, 16]}"))
    assert err.key == "exclusions[0].when" and "6 combinations" in str(err)
    assert err.allowed == "at most 5 combinations in all"


def test_the_cp_command_an_error_suggests_quotes_its_paths(demo, tmp_path):
    """The params folder's path is pasted as one word each, never split or expanded."""
    import shlex

    root = tmp_path / "my `x` $HOME; params"
    (root / "here").mkdir(parents=True)
    (root / "here" / "demo.yaml").write_text(DEMO_PARAMS)
    (root / "there").mkdir()
    with pytest.raises(InputError) as err:
        specmod.load(demo, "there", params_dir=root)
    command = err.value.problem.split("(cp ", 1)[1].rsplit(") and edit it", 1)[0]
    assert shlex.split(command) == [str(root / "here" / "demo.yaml"),
                                    str(root / "there" / "demo.yaml")]
