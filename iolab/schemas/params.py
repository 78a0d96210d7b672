"""The JSON Schema of one experiment's params files, made from its typed fields.

``notebooks/params/<environment>/<experiment>.yaml`` is checked by :mod:`iolab.core.spec`
against the experiment's :class:`~iolab.core.schema.Schema` and the common keys
(``repetitions``, ``order``, ``seed``, ``base``, ``grids``, ``exclusions``, ``search``,
``confirm``, ``analysis``). This module turns the same definitions into JSON Schema: each
:class:`~iolab.core.schema.Field` becomes a typed property with its range, choices, default
and help, and a setting with a condition (``when``) is allowed only where the condition holds.

Responsible for: the shape of a params file as JSON Schema. Not responsible for: rules that
relate keys to each other (a grid named by ``search.grid`` exists, ``repetitions.min`` is at
most ``max``, an experiment's ``check_settings``): :mod:`iolab.core.spec` alone checks those.
"""

from __future__ import annotations

from typing import Any, Sequence

from iolab.core import confirm, repetitions
from iolab.core import spec as specmod
from iolab.core.schema import REQUIRED, SIZE_PATTERN, Field, Schema
from iolab.core.search import params as search

# how a field's description says what it allows (iolab.schemas.verify quotes that part)
ALLOWED = "allowed: "


def field_schema(fld: Field) -> dict[str, Any]:
    """A Field as JSON Schema, its help and what it allows as the description."""
    kind = fld.kind
    if kind in ("int", "number"):
        out: dict[str, Any] = {"type": "integer" if kind == "int" else "number"}
        if fld.minimum is not None:
            out["minimum"] = fld.minimum
        if fld.positive and fld.minimum is None:
            out["exclusiveMinimum"] = 0
        if fld.maximum is not None:
            out["maximum"] = fld.maximum
    elif kind == "text":
        # "\S": not blank, as Field.check asks; a pattern must match the whole text
        out = {"type": "string", "pattern": f"^(?:{fld.pattern})$" if fld.pattern else r"\S"}
    elif kind == "choice":
        out = {"enum": list(fld.choices)}
    elif kind == "flag":
        out = {"type": "boolean"}
    elif kind == "size":
        out = {"anyOf": [{"type": "integer", "exclusiveMinimum": 0},
                         {"type": "string", "pattern": f"^(?:{SIZE_PATTERN})$"}]}
    else:  # a list
        out = {"type": "array", "minItems": fld.min_items, "items": field_schema(fld.item)}
    if fld.default is not REQUIRED:
        out["default"] = fld.default
    out["description"] = "; ".join(p for p in (fld.help, f"{ALLOWED}{fld.allowed()}") if p)
    return out


def _object(properties: dict[str, Any], required: Sequence[str] = (),
            description: str = "", **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties,
                           "additionalProperties": False, **more}
    if required:
        out["required"] = list(required)
    if description:
        out["description"] = description
    return out


def _one_or_list(fld: Field) -> dict[str, Any]:
    """A filter's value: one value of a variable, or a non-empty list of them."""
    one = field_schema(fld)
    return {"anyOf": [one, {"type": "array", "minItems": 1, "items": one}]}


def _metric(metrics: Sequence[str] | None) -> dict[str, Any]:
    return {"enum": list(metrics)} if metrics else {"type": "string"}


def _repetitions(metrics: Sequence[str] | None) -> dict[str, Any]:
    rule = {key: field_schema(fld) for key, fld in repetitions.FIELDS.items()}
    rule["metric"] = _metric(metrics)
    required = [k for k in repetitions.RULE_KEYS if k != "confidence"]
    return {"anyOf": [field_schema(repetitions.COUNT), _object(rule, required)],
            "description": "a fixed count of repetitions of every point, or a stopping rule"}


def _grids(variables: dict[str, Field]) -> dict[str, Any]:
    vary = _object({v: {"type": "array", "minItems": 1, "items": field_schema(f)}
                    for v, f in variables.items()}, minProperties=1)
    fixed = _object({v: field_schema(f) for v, f in variables.items()})
    return {"type": "object", "minProperties": 1,
            "additionalProperties": _object({"vary": vary, "set": fixed}, ["vary"]),
            "description": "named grids: the Cartesian product of 'vary', with 'set'"}


def _exclusions(variables: dict[str, Field]) -> dict[str, Any]:
    when = _object({v: _one_or_list(f) for v, f in variables.items()}, minProperties=1)
    rule = _object({"when": when, "why": {"type": "string", "pattern": r"\S"}}, ["when", "why"])
    return {"type": "array", "items": rule,
            "description": "combinations of variables that are not run, and why"}


def _search(variables: dict[str, Field], metrics: Sequence[str] | None) -> dict[str, Any]:
    objective = _object({"maximize": _metric(metrics),
                         "ties": {"type": "array", "items": {"enum": list(variables)}}},
                        ["maximize"])
    budget = field_schema(search.BUDGET)
    body = _object({"grid": {"type": "string"}, "strategy": field_schema(search.STRATEGY),
                    "budget": {"anyOf": [budget, {"type": "null"}]},
                    "seed": field_schema(search.SEED), "objective": objective,
                    "version": {"enum": sorted({*search.VERSIONS.values(), search.RECORDED}),
                                "description": "the strategy's version (default: its current "
                                "one; an older one re-plans a search made with it from its "
                                "record)"}},
                   ["grid", "objective"], "a searched grid (iolab.core.search.params)")
    # any strategy but 'grid' (the default) needs a budget
    body["if"] = {"required": ["strategy"],
                  "properties": {"strategy": {"not": {"const": "grid"}}}}
    body["then"] = {"required": ["budget"], "properties": {"budget": budget}}
    return {"anyOf": [body, {"type": "null"}]}


def _confirm(variables: dict[str, Field], metrics: Sequence[str] | None) -> dict[str, Any]:
    group = _object({v: _one_or_list(f) for v, f in variables.items()})
    body = _object({"top": field_schema(confirm.TOP), "confidence": field_schema(confirm.CONFIDENCE),
                    "aa": field_schema(confirm.AA), "metric": _metric(metrics),
                    "groups": {"type": "array", "minItems": 1, "items": group}},
                   description="the confirmation step (iolab.core.confirm)")
    return {"anyOf": [body, {"type": "null"}]}


def _condition(key: str, fld: Field, settings: dict[str, Field]) -> dict[str, Any]:
    """A conditional setting: required (or allowed) where its condition holds, else refused."""
    holds: dict[str, Any] = {"properties": {k: {"const": v} for k, v in fld.when}}
    # a setting left out has its default, which may be what the condition asks for
    absent_holds = [k for k, v in fld.when if k in settings and settings[k].default == v]
    needed = [k for k, _ in fld.when if k not in absent_holds]
    if needed:
        holds["required"] = needed
    out: dict[str, Any] = {"if": holds, "else": {
        "not": {"required": [key]},
        "description": f"{key} only applies when {fld.when_text()}; remove it"}}
    if fld.required:
        out["then"] = {"required": [key]}
    return out


def params_schema(name: str, schema: Schema, metrics: Sequence[str] | None) -> dict[str, Any]:
    """The body of the JSON Schema of experiment ``name``'s params files."""
    variables = schema.variables
    analysis = _object({k: field_schema(f) for k, f in schema.analysis.items()},
                       [k for k, f in schema.analysis.items() if f.required],
                       "presentation and statistics; never part of a run's identity")
    properties: dict[str, Any] = {
        "experiment": {"const": name, "description": "the experiment the file is for"},
        "repetitions": _repetitions(metrics),
        "order": {"enum": list(specmod.ORDERS), "description": "the order of the runs"},
        "seed": {"anyOf": [field_schema(specmod.SEED), {"type": "null"}]},
        "base": _object({v: field_schema(f) for v, f in variables.items()}, list(variables),
                        "every variable's value at the base point"),
        "grids": _grids(variables),
        "exclusions": _exclusions(variables),
        "search": _search(variables, metrics),
        "confirm": _confirm(variables, metrics),
        "analysis": {"anyOf": [analysis, {"type": "null"}]},
        "replicate": _object({"grids": _grids(variables), "repetitions": _repetitions(metrics)},
                             list(specmod.PACK_KEYS), "the replication pack: the points behind "
                             "the chapter's findings and their repetitions, which 'iolab "
                             "replicate' runs on another host instead of the file's grids"),
    }
    assert set(properties) == set(specmod.STRUCTURE_KEYS), \
        "iolab.core.spec has a top-level key this module does not describe"
    for key, fld in schema.settings.items():
        # a setting named like a key of every file (gpu_pcie's seed) is checked as both
        properties[key] = ({"allOf": [properties[key], field_schema(fld)]}
                           if key in properties else field_schema(fld))
    required = ["experiment", "repetitions", "base", "grids"]
    required += [k for k, f in schema.settings.items() if f.required and not f.when]
    required += ["analysis"] if analysis.get("required") else []
    out = _object(properties, required)
    conditions = [_condition(k, f, schema.settings) for k, f in schema.settings.items() if f.when]
    if conditions:
        out["allOf"] = conditions
    return out
