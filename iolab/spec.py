"""Experiment specifications: the notebook's parameters cell plus a per-environment params file.

An experiment's defaults are the papermill ``parameters`` cell of ``notebooks/<exp>.ipynb``
(literal assignments only). ``notebooks/params/<environment>/<exp>.yaml`` overrides them for
one environment. This module reads both, merges them and validates the result, raising
:class:`~iolab.errors.InputError` that names the file, the key and what is allowed.

Responsible for: reading, merging and validating specs. Not responsible for: expanding them
into points (``planner``) or running anything.

Spec keys every experiment has:
    experiment, environment, mode, data_dir   run control (not part of a run's identity)
    tool, runtime_s, repetitions              what runs and how often
    base      {variable: value}               the base point: every variable's default
    choices   {variable: [values]}            allowed values for categorical variables
    grids     {name: {vary: {var: [values]}, set: {var: value}}}
    exclusions [{when: {var: value | [values]}, why: text}]
Experiment-specific scalar keys (e.g. ``ramp_s``, ``target_size``) are allowed too; their
types come from the defaults.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml

from .errors import InputError
from .paths import NOTEBOOKS_DIR, PARAMS_DIR

RUN_CONTROL_KEYS = ("experiment", "environment", "mode", "data_dir")
STRUCTURE_KEYS = ("base", "choices", "grids", "exclusions", "repetitions")
MODES = ("replay", "plan", "run")


@dataclass
class Spec:
    """A validated experiment specification for one environment."""

    experiment: str
    environment: str
    values: dict[str, Any]
    notebook: Path
    params_file: Path | None = None
    sources: list[str] = field(default_factory=list)

    @property
    def base(self) -> dict[str, Any]:
        return self.values["base"]

    @property
    def grids(self) -> dict[str, dict]:
        return self.values["grids"]

    @property
    def exclusions(self) -> list[dict]:
        return self.values["exclusions"]

    @property
    def repetitions(self) -> int:
        return self.values["repetitions"]

    @property
    def variables(self) -> list[str]:
        return list(self.base)

    def scalar_settings(self) -> dict[str, Any]:
        """Every setting that can change a result, apart from the point's variables."""
        skip = set(RUN_CONTROL_KEYS) | set(STRUCTURE_KEYS)
        return {k: v for k, v in sorted(self.values.items()) if k not in skip}


def notebook_path(experiment: str, notebooks_dir: Path = NOTEBOOKS_DIR) -> Path:
    path = notebooks_dir / f"{experiment}.ipynb"
    if not path.exists():
        known = sorted(p.stem for p in notebooks_dir.glob("*.ipynb"))
        raise InputError(path, None, f"no notebook for experiment '{experiment}'",
                         allowed=", ".join(known) or "none found")
    return path


def read_parameters_cell(path: Path) -> dict[str, Any]:
    """The literal assignments of the cell tagged ``parameters``, as a dict."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise InputError(path, None, f"expected exactly one cell tagged 'parameters', found {len(cells)}")
    source = cells[0].source
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InputError(path, None, f"parameters cell is not valid Python: {exc}") from exc
    values: dict[str, Any] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            raise InputError(path, None, "the parameters cell may only hold 'name = literal' lines")
        name = node.targets[0].id
        try:
            values[name] = ast.literal_eval(node.value)
        except ValueError as exc:
            raise InputError(path, name, "value is not a literal", allowed="numbers, strings, "
                             "booleans, None, lists and dicts of those") from exc
    return values


def params_file_path(experiment: str, environment: str, params_dir: Path = PARAMS_DIR) -> Path:
    return params_dir / environment / f"{experiment}.yaml"


def environments(experiment: str, params_dir: Path = PARAMS_DIR) -> list[str]:
    """Environments that have a params file for this experiment."""
    return sorted(p.parent.name for p in params_dir.glob(f"*/{experiment}.yaml"))


def load(experiment: str, environment: str, *, notebooks_dir: Path = NOTEBOOKS_DIR,
         params_dir: Path = PARAMS_DIR, require_params_file: bool = True) -> Spec:
    """Defaults from the notebook, overridden by the environment's params file, validated."""
    nb = notebook_path(experiment, notebooks_dir)
    defaults = read_parameters_cell(nb)
    _check_defaults(defaults, nb, experiment)
    values = copy.deepcopy(defaults)
    pfile = params_file_path(experiment, environment, params_dir)
    sources = [str(nb)]
    if pfile.exists():
        overrides = _read_yaml(pfile)
        _check_override_keys(overrides, defaults, pfile, experiment)
        values = _merge(values, overrides)
        sources.append(str(pfile))
        origin = pfile
    elif require_params_file:
        known = environments(experiment, params_dir)
        raise InputError(pfile, None, f"no params file for environment '{environment}'",
                         allowed=", ".join(known) or "none yet: create one")
    else:
        origin = nb
    values["environment"] = environment
    validate(values, origin)
    return Spec(experiment, environment, values, nb, pfile if pfile.exists() else None, sources)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(path, None, f"malformed YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(path, None, f"must be a mapping of parameter names to values, got {type(data).__name__}")
    return data


def _check_defaults(defaults: dict, nb: Path, experiment: str) -> None:
    missing = [k for k in ("experiment", "tool", "runtime_s") + STRUCTURE_KEYS if k not in defaults]
    if missing:
        raise InputError(nb, missing[0], "required in the parameters cell")
    if defaults["experiment"] != experiment:
        raise InputError(nb, "experiment", f"parameters cell says '{defaults['experiment']}' "
                         f"but the notebook is named '{experiment}'", allowed=experiment)


def _check_override_keys(overrides: dict, defaults: dict, path: Path, experiment: str) -> None:
    if "experiment" not in overrides:
        raise InputError(path, "experiment", "missing: every params file names the experiment it is for",
                         allowed=experiment)
    if overrides["experiment"] != experiment:
        raise InputError(path, "experiment", f"this file is for experiment '{overrides['experiment']}', "
                         f"not '{experiment}'", allowed=experiment)
    for key in overrides:
        if key in ("environment", "mode", "data_dir"):
            raise InputError(path, key, "is chosen when running (papermill -p or the CLI), not in a params file",
                             allowed=", ".join(sorted(k for k in defaults if k not in RUN_CONTROL_KEYS)))
        if key not in defaults:
            raise InputError(path, key, "unknown parameter",
                             allowed=", ".join(sorted(k for k in defaults if k not in RUN_CONTROL_KEYS)))
        if not _same_type(overrides[key], defaults[key]):
            raise InputError(path, key, f"{overrides[key]!r} is a {_type_name(overrides[key])}, "
                             f"expected a {_type_name(defaults[key])} like the default {defaults[key]!r}")


def _merge(values: dict, overrides: dict) -> dict:
    """Overrides replace top-level keys, except ``base`` (merged per variable) and ``grids``
    and ``choices`` (merged per name; a grid set to null is removed)."""
    out = copy.deepcopy(values)
    for key, val in overrides.items():
        if key in ("base", "grids", "choices") and isinstance(val, dict) and isinstance(out.get(key), dict):
            for name, item in val.items():
                if item is None and key == "grids":
                    out[key].pop(name, None)
                else:
                    out[key][name] = item
        else:
            out[key] = val
    return out


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "mapping", type(None): "null"}.get(type(value), type(value).__name__)


def _same_type(value: Any, default: Any) -> bool:
    if default is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def validate(values: dict, path: Path) -> None:
    """Check structure, types and value sets; raise InputError naming file, key, allowed."""
    if values.get("mode", "replay") not in MODES:
        raise InputError(path, "mode", f"unknown mode '{values.get('mode')}'", allowed=", ".join(MODES))
    reps = values["repetitions"]
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise InputError(path, "repetitions", f"must be a positive integer, got {reps!r}")
    runtime = values["runtime_s"]
    if isinstance(runtime, bool) or not isinstance(runtime, (int, float)) or runtime <= 0:
        raise InputError(path, "runtime_s", f"must be a positive number of seconds, got {runtime!r}")
    base = values["base"]
    if not isinstance(base, dict) or not base:
        raise InputError(path, "base", "must be a non-empty mapping of variable to value")
    variables = sorted(base)
    choices = values["choices"]
    if not isinstance(choices, dict):
        raise InputError(path, "choices", f"must be a mapping, got {_type_name(choices)}")
    for var, allowed in choices.items():
        if var not in base:
            raise InputError(path, f"choices.{var}", "names an unknown variable", allowed=", ".join(variables))
        if not isinstance(allowed, list) or not allowed:
            raise InputError(path, f"choices.{var}", "must be a non-empty list of values")

    def check_value(key: str, var: str, value: Any) -> None:
        if not _same_type(value, base[var]) and base[var] is not None:
            hint = ""
            if isinstance(value, bool) and isinstance(base[var], str):
                hint = " (YAML reads unquoted on/off/yes/no as booleans: write 'on' in quotes)"
            raise InputError(path, key, f"{value!r} is a {_type_name(value)}, "
                             f"but '{var}' takes a {_type_name(base[var])}{hint}")
        if var in choices and value not in choices[var]:
            raise InputError(path, key, f"{value!r} is not a value of '{var}'",
                             allowed=", ".join(map(str, choices[var])))

    for var, value in base.items():
        check_value(f"base.{var}", var, value)

    grids = values["grids"]
    if not isinstance(grids, dict) or not grids:
        raise InputError(path, "grids", "must be a non-empty mapping of grid name to {vary, set}")
    for name, grid in grids.items():
        key = f"grids.{name}"
        if not isinstance(grid, dict) or "vary" not in grid:
            raise InputError(path, key, "must be a mapping with 'vary' (and optionally 'set')")
        unknown = set(grid) - {"vary", "set"}
        if unknown:
            raise InputError(path, f"{key}.{sorted(unknown)[0]}", "unknown grid field", allowed="vary, set")
        vary = grid["vary"]
        if not isinstance(vary, dict) or not vary:
            raise InputError(path, f"{key}.vary", "must be a non-empty mapping of variable to value list")
        for var, vals in vary.items():
            vkey = f"{key}.vary.{var}"
            if var not in base:
                raise InputError(path, vkey, "names an unknown variable", allowed=", ".join(variables))
            if not isinstance(vals, list):
                raise InputError(path, vkey, f"must be a list of values, got {_type_name(vals)}")
            if not vals:
                raise InputError(path, vkey, "empty value list: give at least one value")
            for v in vals:
                check_value(vkey, var, v)
        fixed = grid.get("set", {}) or {}
        if not isinstance(fixed, dict):
            raise InputError(path, f"{key}.set", f"must be a mapping, got {_type_name(fixed)}")
        for var, v in fixed.items():
            if var not in base:
                raise InputError(path, f"{key}.set.{var}", "names an unknown variable", allowed=", ".join(variables))
            check_value(f"{key}.set.{var}", var, v)

    exclusions = values["exclusions"]
    if not isinstance(exclusions, list):
        raise InputError(path, "exclusions", f"must be a list, got {_type_name(exclusions)}")
    for i, rule in enumerate(exclusions):
        key = f"exclusions[{i}]"
        if not isinstance(rule, dict) or not isinstance(rule.get("when"), dict) or not rule["when"]:
            raise InputError(path, key, "must be a mapping with a non-empty 'when' and a 'why'")
        if not isinstance(rule.get("why"), str) or not rule["why"].strip():
            raise InputError(path, f"{key}.why", "say why the combination is excluded")
        for var, v in rule["when"].items():
            if var not in base:
                raise InputError(path, f"{key}.when.{var}", "names an unknown variable",
                                 allowed=", ".join(variables))
            for item in (v if isinstance(v, list) else [v]):
                check_value(f"{key}.when.{var}", var, item)
