"""Experiment specs: one params file per experiment and environment, validated against a schema.

``notebooks/params/<environment>/<experiment>.yaml`` holds the whole design of an experiment
in one environment::

    experiment: smt_thp          # which experiment the file is for
    tool: fio                    # settings: what is executed (the experiment's schema)
    runtime_s: 3
    repetitions: 3               # or a rule: {min: 3, max: 8, metric: iops, target_ci_pct: 5}
    order: sequential            # or interleaved: rounds of one run per point, shuffled
    base: {engine: psync, ...}   # every variable's value at the base point
    grids:                       # named grids: the Cartesian product of 'vary', with 'set'
      concurrency: {vary: {engine: [psync, io_uring], concurrency: [1, 2, 4]}}
    exclusions: [{when: {smt: 'off', thr_sib: true}, why: ...}]
    search: {grid: ..., strategy: adaptive, budget: 90, ...}  # iolab.core.search.params
    confirm: {top: 2, aa: true}  # after the search, its best points again (iolab.core.confirm)
    analysis: {confidence: 0.95} # presentation and statistics: never part of a run's identity
    replicate:                   # the replication pack: the few points behind the chapter's
      grids: {...}               # findings, and their repetitions, that 'iolab replicate'
      repetitions: {min: 3, max: 5, metric: iops}   # runs on another host

``--set KEY=VALUE`` overrides (dotted keys reach into mappings: ``base.qdepth=64``,
``analysis.confidence=0.9``; values are read as YAML) are applied on top and validated the
same way. Every problem raises :class:`~iolab.errors.InputError` naming the file (or the
``--set``), the key, and what is allowed; nothing is run before a spec validates. Files and
values are read as all of iolab's YAML is (:mod:`iolab.yamlfile`): a params file of at most
:data:`PARAMS_MOST` bytes, never through a link, no key twice, aliases bounded; at most
:data:`EXCLUSIONS_MOST` exclusions naming :data:`EXCLUSION_COMBOS_MOST` combinations of values.

Responsible for: reading, overriding and validating specs, listing environments, and reading
``--where`` filters. Not responsible for: expanding specs into points (``iolab.core.planner``)
or what the settings mean (the experiments).
"""

from __future__ import annotations

import copy
import math
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from iolab.core import confirm as confirm_step
from iolab.core import repetitions as reps
from iolab.core.search import params as search_params
from iolab.core.schema import Choice, Field, Int, Schema, in_order, type_name
from iolab.errors import InputError, excerpt, shell_word
from iolab.paths import PARAMS_DIR, check_name, usable_name
from iolab.yamlfile import load_yaml, read_file, yaml_problem

RUN_CONTROL_KEYS = ("environment", "mode", "data_dir")
STRUCTURE_KEYS = ("experiment", "repetitions", "order", "seed", "base", "grids", "exclusions",
                  "search", "confirm", "analysis", "replicate")
# what a replication pack (``replicate:``) holds: the grids and the repetitions it runs instead
# of the file's own (``iolab.execution.replicate``)
PACK_KEYS = ("grids", "repetitions")
ORDERS = ("interleaved", "sequential")
# bytes of a params file: the largest committed holds 4 KB; one of gigabytes (a sparse file)
# would otherwise be read whole before YAML saw a line of it
PARAMS_MOST = 1 << 20
# The exclusions a params file may hold, and the combinations of values they name together
# (a rule {a: [1, 2], b: [3, 4]} names 4): the planner indexes each combination
# (iolab.core.planner.Exclusions), so a plan's time and memory stay bounded by these.
EXCLUSIONS_MOST = 10_000
EXCLUSION_COMBOS_MOST = 100_000
SEED = Int(0, 2**63 - 1, help="the seed of the interleaved order's shuffles (drawn and recorded "
           "in the campaign log when absent)")


class HasSchema(Protocol):
    name: str

    def schema(self) -> Schema: ...


@dataclass
class Spec:
    """A validated experiment specification for one environment."""

    experiment: str
    environment: str
    settings: dict[str, Any]        # execution settings that apply, defaults filled in
    rule: reps.Rule                 # how many repetitions each point gets
    base: dict[str, Any]
    grids: dict[str, dict[str, Any]]
    exclusions: list[dict[str, Any]]
    analysis: dict[str, Any]
    params_file: Path
    overrides: dict[str, Any] = field(default_factory=dict)  # --set KEY: value, as given
    order: str = "sequential"       # of the runs: ORDERS
    seed: int | None = None         # of the interleaved order; None: drawn per campaign
    confirm: confirm_step.Step | None = None  # the confirmation step, if the params ask for one
    search: search_params.SearchSpec | None = None  # a searched grid, if the params name one
    replicate: dict[str, Any] | None = None  # the replication pack, as written (PACK_KEYS)

    @property
    def searched(self) -> search_params.SearchSpec | None:
        """The search, when a grid is searched rather than swept (None for a sweep)."""
        return self.search if self.search is not None and self.search.adaptive else None

    @property
    def repetitions(self) -> int:
        """The most repetitions a point can have (the count itself, for a fixed count)."""
        return self.rule.max

    @property
    def repetitions_text(self) -> str:
        """How many repetitions a point gets, for prose: '5', or '3 to 8' under a rule."""
        return str(self.rule.max) if self.rule.fixed else f"{self.rule.min} to {self.rule.max}"

    @property
    def ranking_metric(self) -> str | None:
        """The metric the plan reads from stored runs: the rule's, else the confirmation
        step's, else the search's objective (None for a fixed count without either)."""
        return (self.rule.metric or (self.confirm.metric if self.confirm else None)
                or (self.search.objective.metric if self.search else None))

    @property
    def variables(self) -> list[str]:
        return list(self.base)

    @property
    def sources(self) -> list[str]:
        return [str(self.params_file)] + [f"--set {k}={v!r}" for k, v in self.overrides.items()]


def params_path(experiment: str, environment: str, params_dir: Path = PARAMS_DIR) -> Path:
    return Path(params_dir) / environment / f"{experiment}.yaml"


def environments(experiment: str | None = None, params_dir: Path = PARAMS_DIR) -> list[str]:
    """Environments with a params file for ``experiment`` (or with any params file). A
    folder whose name is no environment's (:func:`~iolab.paths.check_name` refuses it: an
    escape sequence, a line break, a space) is none: no verb can use it, and a help text or
    a list that names it would hand its name to the terminal."""
    pattern = f"*/{experiment}.yaml" if experiment else "*/*.yaml"
    return sorted({p.parent.name for p in Path(params_dir).glob(pattern)
                   if usable_name(p.parent.name)})


def check_environment_name(name: str) -> str:
    return check_name("environment", name)


EXAMPLES = {"--set": "e.g. runtime_s=1", "--where": "e.g. engine=io_uring"}


def parse_assignment(text: str, flag: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as YAML (``3`` a number, ``[1, 2]`` a list, ``'on'`` text)."""
    key, eq, raw = text.partition("=")
    if not eq or not key.strip():
        raise InputError(flag, None, f"{excerpt(text)} is not KEY=VALUE",
                         allowed=EXAMPLES.get(flag, "KEY=VALUE"))
    try:
        value = load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise InputError(f"{flag} {key}", None, f"value {excerpt(raw)} is not valid YAML "
                         f"({yaml_problem(exc)})") from None
    except RecursionError:
        raise InputError(f"{flag} {key}", None, "value is nested too deeply") from None
    return key.strip(), value


def parse_assignments(items: list[str], flag: str) -> dict[str, Any]:
    """Every ``KEY=VALUE`` of a repeated flag. A ``--set`` key given again overrides the
    earlier one (a script appends what it changes); a ``--where`` variable given twice is
    refused, as the two filters could not both hold."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = parse_assignment(item, flag)
        if key in out and flag == "--where":
            raise InputError(flag, key, f"is given twice ({excerpt(out[key])} and "
                             f"{excerpt(value)}); give it once, with a list for several values")
        out.pop(key, None)  # in the order last given
        out[key] = value
    return out


def load(experiment: HasSchema, environment: str, *, params_dir: Path = PARAMS_DIR,
         overrides: list[str] | dict[str, Any] | None = None) -> Spec:
    """The experiment's spec for an environment, with ``--set`` overrides, validated."""
    check_environment_name(environment)
    path = params_path(experiment.name, environment, params_dir)
    if not path.exists():
        known = environments(experiment.name, params_dir)
        if path.parent.is_dir():  # the environment is there, without this experiment
            how = (f"copy one from an environment that has it (cp "
                   f"{shell_word(params_path(experiment.name, known[0], params_dir))} "
                   f"{shell_word(path)}) and edit it"
                   if known else "write one")
            raise InputError(path, None, f"environment '{environment}' has no params file for "
                             f"{experiment.name}; {how}", allowed=", ".join(known) or "none yet")
        raise InputError(path, None, f"no params file for environment '{environment}'; create "
                         f"one with 'iolab env new {environment}'",
                         allowed=", ".join(known) or "none yet")
    doc = read_params_doc(path)
    schema = experiment.schema()
    metrics = list(getattr(experiment, "metrics", None) or []) or None
    spec = validate(experiment, environment, doc, path)
    label: str | Path = path
    if overrides:
        pairs = (parse_assignments(overrides, "--set")
                 if isinstance(overrides, list) else dict(overrides))
        if "experiment" in pairs:
            raise InputError("--set", "experiment", "names what the params file is for; the "
                             "command line chooses the experiment", allowed="any other key")
        merged = copy.deepcopy(doc)
        for key, value in pairs.items():
            _assign(merged, key, value)
        label = "--set " + ", ".join(pairs)
        spec = _validate(merged, label, experiment.name, environment, schema, metrics)
        spec.params_file, spec.overrides = path, pairs
    check = getattr(experiment, "check_settings", None)
    if check is not None:
        try:  # what depends on several settings at once, said with the file that set them
            check(spec.settings)
        except InputError as exc:
            raise InputError(label if label == path else f"{path} + {label}", exc.key,
                             exc.problem, exc.allowed) from None
    return spec


def validate(experiment: HasSchema, environment: str, doc: dict[str, Any],
             label: str | Path) -> Spec:
    """The spec of a params document, validated as :func:`load` validates a file, errors
    naming ``label``: for a document made from another (a replication pack drafted from its
    source's ``replicate:``), before it is written anywhere."""
    metrics = list(getattr(experiment, "metrics", None) or []) or None
    return _validate(doc, label, experiment.name, environment, experiment.schema(), metrics)


def parse_where(spec: Spec, schema: Schema, items: list[str] | dict[str, Any] | None
                ) -> dict[str, list[Any]]:
    """``--where KEY=VALUE`` filters as {variable: [allowed values]}, each value checked."""
    pairs = (parse_assignments(items, "--where") if isinstance(items, list)
             else dict(items or {}))
    out: dict[str, list[Any]] = {}
    for key, value in pairs.items():
        if key not in spec.base:
            raise InputError("--where", key, "is not a variable of this experiment",
                             allowed=", ".join(spec.variables))
        if value is None:
            raise InputError("--where", key, "has no value",
                             allowed=f"{key}=VALUE, or {key}=[VALUE, VALUE] for several")
        values = value if isinstance(value, list) else [value]
        if not values:
            raise InputError("--where", key, "an empty list matches no point",
                             allowed="a value, or a YAML list of values such as [1, 2]")
        out[key] = [schema.variables[key].check(v, "--where", key) for v in values]
    return out


def read_params_doc(path: Path) -> dict[str, Any]:
    """A params file as its raw mapping, before validation; InputError naming the file if it
    is not a mapping."""
    data = read_file(path, "an experiment's params file", PARAMS_MOST)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(path, None, f"must be a mapping of keys to values, got {type_name(data)}")
    return data


def _assign(doc: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    target = doc
    for i, part in enumerate(parts[:-1]):
        nxt = target.get(part)
        if nxt is None:
            nxt = target[part] = {}
        if not isinstance(nxt, dict):
            raise InputError("--set", dotted, f"'{'.'.join(parts[:i + 1])}' is a "
                             f"{type_name(nxt)}, not a mapping one can set keys in",
                             allowed=f"{'.'.join(parts[:i + 1])}=VALUE, or a dotted key into a "
                             "mapping such as base.qdepth or repetitions.max")
        target = nxt
    target[parts[-1]] = value


def _unknown(label, key: str, known: list[str], what: str) -> InputError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return InputError(label, key, f"unknown {what}{hint}", allowed=", ".join(sorted(known)))


def _validate(doc: dict[str, Any], label, name: str, environment: str, schema: Schema,
              metrics: list[str] | None = None) -> Spec:
    if "experiment" not in doc:
        raise InputError(label, "experiment", "missing: every params file names the experiment "
                         "it is for", allowed=name)
    if doc["experiment"] != name:
        raise InputError(label, "experiment", f"this file is for experiment "
                         f"'{doc['experiment']}', not '{name}'", allowed=name)
    top = list(STRUCTURE_KEYS) + list(schema.settings)
    for key in doc:
        if key in RUN_CONTROL_KEYS:
            raise InputError(label, key, "is chosen when running (the CLI or papermill's -p), "
                             "not in a params file", allowed=", ".join(sorted(top)))
        if key not in top:
            raise _unknown(label, key, top, "top-level key")

    settings = _settings(doc, label, schema.settings)
    rule = reps.parse(doc["repetitions"], label, metrics) if "repetitions" in doc \
        else _missing(label, "repetitions", reps.COUNT)
    # interleaving is a rule's default; a fixed count keeps the order it always had
    order = Choice(*ORDERS, default="sequential" if rule.fixed else "interleaved")
    order = order.check(doc["order"], label, "order") if "order" in doc else order.default
    seed = SEED.check(doc["seed"], label, "seed") if doc.get("seed") is not None else None
    base = _base(doc, label, schema.variables)
    grids = _grids(doc, label, schema.variables)
    exclusions = _exclusions(doc, label, schema.variables)
    analysis = _analysis(doc, label, schema.analysis)
    confirm = (confirm_step.parse(doc["confirm"], label, schema.variables, metrics)
               if doc.get("confirm") is not None else None)
    if confirm is not None and rule.fixed and confirm.metric is None:
        # the step ranks the points by a metric; a fixed count names none
        raise InputError(label, "confirm.metric", "missing: with a fixed count of "
                         "repetitions, say which metric the points are ranked by",
                         allowed=", ".join(metrics or []) or "a metric name")
    if confirm is not None and not rule.fixed and confirm.metric not in (None, rule.metric):
        raise InputError(label, "confirm.metric", f"{excerpt(confirm.metric)} differs from the "
                         f"repetition rule's metric; under a rule the points are ranked by it",
                         allowed=f"{rule.metric}, or leave it out")
    search = (search_params.parse(doc["search"], label, grids, schema.variables, rule.metric,
                                  metrics) if doc.get("search") is not None else None)
    pack = _pack(doc, label, schema.variables, metrics) if "replicate" in doc else None
    return Spec(name, environment, settings, rule, base, grids, exclusions, analysis,
                Path(str(label)), order=order, seed=seed, confirm=confirm, search=search,
                replicate=pack)


def _pack(doc: dict[str, Any], label, variables: dict[str, Field],
          metrics: list[str] | None) -> dict[str, Any]:
    """The replication pack of ``replicate:``, checked as the file's own grids and
    repetitions are (every error names its key under ``replicate.``); returned as written,
    for the pack's environment's params file."""
    pack = doc["replicate"]
    if not isinstance(pack, dict):
        raise InputError(label, "replicate", f"must be a mapping, got {type_name(pack)}",
                         allowed="grids (the pack's points) and repetitions (its rule)")
    for key in pack:
        if key not in PACK_KEYS:
            raise _unknown(label, f"replicate.{key}", [f"replicate.{k}" for k in PACK_KEYS],
                           "key of the replication pack")
    for key in PACK_KEYS:
        if key not in pack:
            raise InputError(label, f"replicate.{key}", "missing: a pack says which points "
                             "it runs (grids) and how often (repetitions)",
                             allowed="grids as the file's own, repetitions as the file's own")
    try:
        _grids({"grids": pack["grids"]}, label, variables)
        reps.parse(pack["repetitions"], label, metrics)
    except InputError as exc:
        raise InputError(exc.path, f"replicate.{exc.key}" if exc.key else "replicate",
                         exc.problem, exc.allowed) from None
    return copy.deepcopy(pack)


def _missing(label, key: str, fld: Field) -> Any:
    raise InputError(label, key, "missing" + (f" ({fld.help})" if fld.help else ""),
                     allowed=fld.allowed())


def _settings(doc: dict[str, Any], label, fields: dict[str, Field]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, fld in in_order(fields):
        if not fld.applies(out):
            if key in doc:
                raise InputError(label, key, f"only applies when {fld.when_text()}; remove it "
                                 "from this file")
            continue
        if key in doc:
            out[key] = fld.check(doc[key], label, key)
        elif fld.required:
            _missing(label, key, fld)
        else:
            out[key] = copy.deepcopy(fld.default)
    return {key: out[key] for key in fields if key in out}


def _base(doc: dict[str, Any], label, variables: dict[str, Field]) -> dict[str, Any]:
    base = doc.get("base")
    if not isinstance(base, dict):
        raise InputError(label, "base", "must be a mapping of every variable to its value at the "
                         "base point", allowed=", ".join(variables))
    for var in base:
        if var not in variables:
            raise _unknown(label, f"base.{var}", [f"base.{v}" for v in variables], "variable")
    missing = [v for v in variables if v not in base]
    if missing:
        raise InputError(label, f"base.{missing[0]}", "missing: the base point gives every "
                         "variable a value", allowed=variables[missing[0]].allowed())
    return {var: fld.check(base[var], label, f"base.{var}") for var, fld in variables.items()}


def _grids(doc: dict[str, Any], label, variables: dict[str, Field]) -> dict[str, dict]:
    grids = doc.get("grids")
    if not isinstance(grids, dict) or not grids:
        raise InputError(label, "grids", "must be a non-empty mapping of grid names to "
                         "{vary: {variable: [values]}, set: {variable: value}}")
    out = {}
    for name, grid in grids.items():
        key = f"grids.{name}"
        if not isinstance(grid, dict) or "vary" not in grid:
            raise InputError(label, key, "must be a mapping with 'vary' (and optionally 'set')")
        unknown = sorted(set(grid) - {"vary", "set"})
        if unknown:
            raise InputError(label, f"{key}.{unknown[0]}", "unknown grid field", allowed="vary, set")
        vary = grid["vary"]
        if not isinstance(vary, dict) or not vary:
            raise InputError(label, f"{key}.vary", "must be a non-empty mapping of variable to "
                             "value list")
        checked: dict[str, Any] = {"vary": {}, "set": {}}
        for var, values in vary.items():
            vkey = f"{key}.vary.{var}"
            if var not in variables:
                raise InputError(label, vkey, "names an unknown variable", allowed=", ".join(variables))
            if not isinstance(values, list):
                raise InputError(label, vkey, f"must be a list of values, got {type_name(values)}")
            if not values:
                raise InputError(label, vkey, "empty value list: give at least one value")
            checked["vary"][var] = [variables[var].check(v, label, vkey) for v in values]
        fixed = grid.get("set") or {}
        if not isinstance(fixed, dict):
            raise InputError(label, f"{key}.set", f"must be a mapping, got {type_name(fixed)}")
        for var, value in fixed.items():
            if var not in variables:
                raise InputError(label, f"{key}.set.{var}", "names an unknown variable",
                                 allowed=", ".join(variables))
            if var in vary:
                raise InputError(label, f"{key}.set.{var}", "is varied by the same grid; "
                                 "set it or vary it, not both")
            checked["set"][var] = variables[var].check(value, label, f"{key}.set.{var}")
        out[name] = checked
    return out


def _exclusions(doc: dict[str, Any], label, variables: dict[str, Field]) -> list[dict]:
    rules = doc.get("exclusions", [])
    if not isinstance(rules, list):
        raise InputError(label, "exclusions", f"must be a list, got {type_name(rules)}")
    if len(rules) > EXCLUSIONS_MOST:
        raise InputError(label, "exclusions", f"{len(rules):,} exclusions; merge rules that "
                         "name the same variables (a value may be a list)",
                         allowed=f"at most {EXCLUSIONS_MOST:,} exclusions")
    out = []
    combos = 0
    for i, rule in enumerate(rules):
        key = f"exclusions[{i}]"
        if not isinstance(rule, dict) or not isinstance(rule.get("when"), dict) or not rule["when"]:
            raise InputError(label, key, "must be a mapping with a non-empty 'when' and a 'why'")
        if not isinstance(rule.get("why"), str) or not rule["why"].strip():
            raise InputError(label, f"{key}.why", "say why the combination is excluded")
        unknown = sorted(set(rule) - {"when", "why"})
        if unknown:
            raise InputError(label, f"{key}.{unknown[0]}", "unknown field of an exclusion",
                             allowed="when, why")
        when = {}
        for var, want in rule["when"].items():
            if var not in variables:
                raise InputError(label, f"{key}.when.{var}", "names an unknown variable",
                                 allowed=", ".join(variables))
            items = want if isinstance(want, list) else [want]
            when[var] = [variables[var].check(v, label, f"{key}.when.{var}") for v in items]
        combos += math.prod(len(values) for values in when.values())
        if combos > EXCLUSION_COMBOS_MOST:
            raise InputError(label, f"{key}.when", f"the exclusions up to this one name "
                             f"{combos:,} combinations of values (the product of each rule's "
                             "lists, summed)",
                             allowed=f"at most {EXCLUSION_COMBOS_MOST:,} combinations in all")
        out.append({"when": when, "why": rule["why"]})
    return out


def _analysis(doc: dict[str, Any], label, fields: dict[str, Field]) -> dict[str, Any]:
    given = doc.get("analysis", {}) or {}
    if not isinstance(given, dict):
        raise InputError(label, "analysis", f"must be a mapping, got {type_name(given)}",
                         allowed=", ".join(fields))
    for key in given:
        if key not in fields:
            raise _unknown(label, f"analysis.{key}", [f"analysis.{k}" for k in fields],
                           "analysis key")
    out = {}
    for key, fld in fields.items():
        if key in given:
            out[key] = fld.check(given[key], label, f"analysis.{key}")
        elif fld.required:
            _missing(label, f"analysis.{key}", fld)
        else:
            out[key] = copy.deepcopy(fld.default)
    return out
