"""Generate the JSON Schemas of iolab's stored files from the definitions the code uses.

One schema per document kind, each made from what the writer or reader of the file uses:

- ``run.schema.json``: ``runs/<run id>/run.json``, from ``iolab.core.manifest``
- ``host.schema.json``: ``host.json``, from ``iolab.host.inventory.FIELDS``; and
  ``host-imported.schema.json``: the ``host.json`` of a campaign imported from a CIJOE archive
- ``campaign-log.schema.json``: one line of ``campaign-log.jsonl``, from
  ``iolab.core.store.LOG_EVENTS``
- ``build-record.schema.json``: the book's ``_build/.iolab-fresh.json``, from
  ``iolab.report.freshness``
- ``params.<experiment>.schema.json``: ``notebooks/params/<env>/<experiment>.yaml``, from the
  experiment's fields and ``iolab.core.spec`` (``iolab.schemas.params``)

Each carries ``$id`` (``urn:iolab:schema:<kind>``, for params
``urn:iolab:schema:params:<experiment>``), ``title``, ``description`` and
``x-iolab-version``: the format's own version where the file records one (``schema_version``
of run.json and host.json), else the version below, raised when a change makes files that
were valid invalid. A run.json of every version iolab reads validates, against the
definition of its version.

Responsible for: building the schemas, writing them, and telling which committed files differ
from what the code makes. Not responsible for: validating data files (``iolab.schemas.verify``).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

from iolab.core import manifest, store
from iolab.core import registry
from iolab.host import inventory
from iolab.report import freshness
from iolab.schemas import SCHEMA_DIR
from iolab.schemas.params import params_schema

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# the versions of formats that record none themselves
UNVERSIONED = {"campaign-log": 1, "build-record": 1, "params": 1}
REGENERATE = "python -m iolab.schemas"
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean",
               dict: "object", list: "array", type(None): "null"}


def document(kind: str, title: str, description: str, version: int,
             body: dict[str, Any], ident: str | None = None) -> dict[str, Any]:
    """A schema with its identification in front of ``body``."""
    return {"$schema": DRAFT, "$id": f"urn:iolab:schema:{ident or kind}", "title": title,
            "description": description, "x-iolab-version": version, **body}


def hint_schema(hint: Any) -> dict[str, Any]:
    """A Python type hint of a manifest field (str, int | None, list[int], dict[str, Any])
    as JSON Schema."""
    if hint is Any:
        return {}
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        kinds = [hint_schema(a).get("type") for a in args]
        inner = next(hint_schema(a) for a in args if a is not type(None))
        return {**inner, "type": [k for k in kinds if k]}
    origin = typing.get_origin(hint) or hint
    out: dict[str, Any] = {"type": _JSON_TYPES[origin]}
    if origin is list and args and args[0] is not Any:
        out["items"] = hint_schema(args[0])
    return out


def _manifest_v2() -> dict[str, Any]:
    hints = typing.get_type_hints(manifest.RunManifest)
    fields = dataclasses.fields(manifest.RunManifest)
    props = {f.name: {**hint_schema(hints[f.name]), "description": manifest.HELP[f.name]}
             for f in fields}
    props["schema_version"] = {"const": manifest.SCHEMA_VERSION,
                               "description": manifest.HELP["schema_version"]}
    props["status"]["enum"] = list(manifest.STATUSES)
    props["files"]["additionalProperties"] = {
        "type": "object", "required": ["sha256", "bytes"],
        "properties": {"sha256": {"type": "string", "pattern": f"^{manifest.SHA256}$",
                                  "description": "the file's sha256: 64 lowercase hex digits"},
                       "bytes": {"type": "integer", "minimum": 0,
                                 "description": "the file's size in bytes"}}}
    required = sorted(f.name for f in fields if f.default is dataclasses.MISSING
                      and f.default_factory is dataclasses.MISSING)
    return {"type": "object", "description": "run.json version 2 (written today)",
            "properties": props, "required": required, "additionalProperties": False}


def _manifest_v1() -> dict[str, Any]:
    return {"type": "object", "required": list(manifest.V1_REQUIRED),
            "description": "run.json version 1 (iolab before the experiment interface), read "
                           "through its experiment's upgrade; 'iolab migrate' rewrites it",
            "properties": {"schema_version": {"const": 1}, "run_id": {"type": "string"},
                           "experiment": {"type": "string"}, "environment": {"type": "string"},
                           "rep": {"type": "integer"}, "params": {"type": "object"},
                           "config": {"type": "object", "required": ["settings"]}}}


def run_schema() -> dict[str, Any]:
    """run.json: version 2 as RunManifest defines it, or version 1 as it is upgraded."""
    versions = {1: "v1", manifest.SCHEMA_VERSION: f"v{manifest.SCHEMA_VERSION}"}
    assert set(versions) == set(manifest.READABLE), "a readable manifest version has no schema"
    body = {"type": "object", "required": ["schema_version"],
            "properties": {"schema_version": {"enum": list(manifest.READABLE),
                                              "description": manifest.HELP["schema_version"]}},
            "allOf": [{"if": {"required": ["schema_version"],
                              "properties": {"schema_version": {"const": v}}},
                       "then": {"$ref": f"#/$defs/{name}"}} for v, name in versions.items()],
            "$defs": {"v1": _manifest_v1(), "v2": _manifest_v2()}}
    return document("run", "iolab run manifest (run.json)",
                    "One record per run: its identity, what ran, when, the knob states and "
                    "the sha256 of every raw file. Versions: "
                    + ", ".join(map(str, manifest.READABLE)) + " (schema_version).",
                    manifest.SCHEMA_VERSION, body)


def host_schema() -> dict[str, Any]:
    props = {name: {"type": list(kinds) if len(kinds) > 1 else kinds[0], "description": text,
                    **inventory.VALUES.get(name, {})}
             for name, (kinds, text) in inventory.FIELDS.items()}
    props["schema_version"]["const"] = inventory.SCHEMA_VERSION
    body = {"type": "object", "properties": props, "required": list(inventory.FIELDS),
            "additionalProperties": False}
    return document("host", "iolab host inventory (host.json)",
                    "The host a campaign ran on: CPU, topology, memory, kernel, block devices, "
                    "knob states and tool versions, with its fingerprint.",
                    inventory.SCHEMA_VERSION, body)


# host.json of a campaign imported from a CIJOE archive (iolab.importers.cijoe.host_extras):
# what the archive says of its host, which is less than a live inventory
IMPORTED_HOST = {
    "schema_version": (("integer",), "the record's version"),
    "source": (("string",), "where the record comes from: an imported archive"),
    "hostname": (("string", "null"), "the host's name (CIJOE does not record it)"),
    "archive": (("string",), "the archive's file name"),
    "archive_sha256": (("string",), "the archive's sha256"),
    "imported_at": (("string",), "when it was imported (UTC)"),
    "cpu": (("object", "null"), "model, logical CPUs and threads per core, where lscpu says"),
    "topology": (("array", "null"), "lscpu -e's rows: CPU, core, socket, node"),
    "lscpu_e": (("string", "null"), "lscpu -e's text as the archive holds it"),
    "os": (("object", "string", "null"), "the OS the archive's config names"),
    "devices": (("array", "object", "null"), "the devices the archive's config names"),
    "software": (("object", "null"), "software versions the archive's config names"),
    "fingerprint": (("string",), "the sha256 (16 hex digits) of its source, CPU and topology"),
}


def imported_host_schema() -> dict[str, Any]:
    from iolab.importers.cijoe.host_extras import SOURCE

    # the CPU summary is the live inventory's, and bounded alike
    props = {name: {**_types(kinds), "description": text,
                    **(inventory.VALUES["cpu"] if name == "cpu" else {})}
             for name, (kinds, text) in IMPORTED_HOST.items()}
    props["source"]["const"] = SOURCE
    body = {"type": "object", "properties": props, "required": list(IMPORTED_HOST),
            "additionalProperties": False}
    return document("host-imported", "iolab host record of an imported campaign (host.json)",
                    "The host of a campaign imported from a CIJOE archive, as far as the "
                    "archive says: its CPU topology, OS, devices and software.", 1, body)


def _types(kinds: tuple[str, ...]) -> dict[str, Any]:
    return {"type": list(kinds) if len(kinds) > 1 else kinds[0]}


def log_schema() -> dict[str, Any]:
    """One line of campaign-log.jsonl: its event and that event's fields."""
    cases = []
    for event, fields in store.LOG_EVENTS.items():
        optional = store.LOG_OPTIONAL.get(event, ())
        then = {"properties": {"event": {}, "at": {},
                               **{k: _types(v) for k, v in fields.items()}},
                "required": [k for k in fields if k not in optional],
                "additionalProperties": False}
        cases.append({"if": {"required": ["event"], "properties": {"event": {"const": event}}},
                      "then": then})
    body = {"type": "object", "required": ["event", "at"],
            "properties": {"event": {"enum": list(store.LOG_EVENTS)},
                           "at": {"type": "string", "description": "when (UTC)"}},
            "allOf": cases}
    return document("campaign-log", "iolab campaign log (one line of campaign-log.jsonl)",
                    "A JSON object per line: when a campaign started and ended, each round of "
                    "an interleaved order, the search's and the confirmation's decisions, "
                    "and runs moved aside as corrupt.", UNVERSIONED["campaign-log"], body)


def build_record_schema() -> dict[str, Any]:
    body = {"type": "object", "patternProperties": {
        f"^{freshness.READS}": {"type": "array", "items": {"type": "string"},
                                "description": "the raw/ folders the output read"},
        f"^(?!{freshness.READS})": {"type": "string", "pattern": f"^{freshness.KEY}$",
                                    "description": "the key the output was made from"}}}
    return document("build-record", "iolab book build record (_build/.iolab-fresh.json)",
                    "The key each rendered chapter and the built HTML were last made from, "
                    "and what of raw/ each chapter read.", UNVERSIONED["build-record"], body)


def experiment_schema(experiment: Any) -> dict[str, Any]:
    metrics = list(getattr(experiment, "metrics", None) or []) or None
    body = params_schema(experiment.name, experiment.schema(), metrics)
    return document("params", f"iolab params file of experiment {experiment.name}",
                    f"notebooks/params/<environment>/{experiment.name}.yaml: the design of "
                    f"{experiment.name} in one environment (YAML, validated as JSON).",
                    UNVERSIONED["params"], body, ident=f"params:{experiment.name}")


def all_schemas() -> dict[str, dict[str, Any]]:
    """{file name: schema} of every published schema."""
    out = {"run.schema.json": run_schema(), "host.schema.json": host_schema(),
           "host-imported.schema.json": imported_host_schema(),
           "campaign-log.schema.json": log_schema(),
           "build-record.schema.json": build_record_schema()}
    for experiment in registry.all_experiments():
        out[f"params.{experiment.name}.schema.json"] = experiment_schema(experiment)
    return out


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def differences(folder: Path = SCHEMA_DIR) -> list[str]:
    """The schema files in ``folder`` that differ from what the code makes, are missing, or
    are left over; one line each."""
    made = {name: text(schema) for name, schema in all_schemas().items()}
    there = {p.name for p in Path(folder).glob("*.schema.json")}
    out = [f"{name}: missing" for name in sorted(set(made) - there)]
    out += [f"{name}: no definition makes it any more" for name in sorted(there - set(made))]
    out += [f"{name}: differs from the code's definitions" for name in sorted(set(made) & there)
            if (Path(folder) / name).read_text() != made[name]]
    return out


def write(folder: Path = SCHEMA_DIR) -> list[str]:
    """Write every schema into ``folder``, removing those no definition makes; the names."""
    made = all_schemas()
    for stale in Path(folder).glob("*.schema.json"):
        if stale.name not in made:
            stale.unlink()
    for name, schema in made.items():
        (Path(folder) / name).write_text(text(schema))
    return sorted(made)
