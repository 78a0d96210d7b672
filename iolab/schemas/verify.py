"""Validate stored files against the published JSON Schemas, with the file, key and what is allowed.

Under ``<data>/raw/<experiment>/<environment>/``: ``host.json``, every line of
``campaign-log.jsonl``, and ``run.json`` of every run under ``runs/`` and ``failed/``; and each
experiment's params files. Each is checked with ``jsonschema`` against the schema committed in
this folder (the published one, not one made again from the code), so what passes here is
what a reader with nothing but the schema files would accept.

A link, a FIFO or a device in a stored file's place is a problem of that file, never
followed or opened (:mod:`iolab.safefiles`); so is a file larger than iolab writes at its
name (the store's bounds), never read whole, and JSON nested deeper than iolab writes.

Responsible for: finding the files, validating them, and phrasing each problem as an
:class:`~iolab.errors.InputError`. Not responsible for: what iolab itself checks when it reads
them (sha256 sums of raw files, keys that depend on each other: ``iolab.core``), or printing
(the CLI).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from iolab.core import manifest, store
from iolab.core import registry
from iolab.core import spec as specmod
from iolab.errors import InputError, IolabError, ParseError, excerpt
from iolab.host.record import HOST_MOST
from iolab.parsers import load_json
from iolab.paths import shown
from iolab.safefiles import read_regular
from iolab.schemas import SCHEMA_DIR
from iolab.schemas.generate import REGENERATE, experiment_schema
from iolab.schemas.params import ALLOWED
from iolab.yamlfile import read_file

_LONGEST = 200  # characters of a message that quotes a value: a whole document is too long


@dataclass
class Verification:
    """What :func:`verify` checked, and every problem it found."""

    files: int = 0
    problems: list[InputError] = field(default_factory=list)

    def lines(self) -> list[str]:
        """What ``iolab verify`` prints: one line per problem, then the count."""
        bad = len({p.path for p in self.problems})
        summary = (f"{self.files} files checked against the published schemas "
                   f"({shown(SCHEMA_DIR)}): "
                   + (f"{len(self.problems)} problems in {bad} files" if self.problems
                      else "no problems"))
        return [str(p) for p in self.problems] + [summary]


@lru_cache(maxsize=None)
def validator(name: str) -> Draft202012Validator:
    """The validator of published schema ``name`` (e.g. ``run.schema.json``)."""
    path = SCHEMA_DIR / name
    try:
        schema = json.loads(path.read_text())
    except OSError:
        raise InputError(path, None, f"missing; regenerate the schemas with '{REGENERATE}'") \
            from None
    return Draft202012Validator(schema)


def _allowed(error: ValidationError) -> str | None:
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties":
        return ", ".join(schema.get("properties", {})) or None
    if error.validator in ("enum", "const"):
        values = error.validator_value if error.validator == "enum" else [error.validator_value]
        return ", ".join(json.dumps(v) for v in values)
    description = schema.get("description")
    # a field's description ends with what it allows; a problem quotes only that
    return description.partition(ALLOWED)[2] or description if description else None


def _problem(error: ValidationError) -> str:
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "not" and "description" in schema:
        return schema["description"]  # a 'not' quotes the whole document; its schema says why
    text = error.message
    if len(text) > _LONGEST:
        # the value quoted short, so that what is wrong with it still shows (a number of
        # 400 digits filled the whole message, and "is greater than the maximum" was cut)
        text = text.replace(repr(error.instance), excerpt(error.instance), 1)
    return text if len(text) <= _LONGEST else text[:_LONGEST] + "…"


def problems(doc: Any, checker: Draft202012Validator, path: Path | str,
             where: str = "") -> list[InputError]:
    """One InputError per way ``doc`` fails ``checker``: the file, the key as a JSON path
    (``$.files.stdout.sha256``; ``where`` goes in front, e.g. a line number), what is wrong
    and what is allowed."""
    errors = sorted(checker.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    return [InputError(path, f"{where}{e.json_path}", _problem(e), _allowed(e)) for e in errors]


def _read(path: Path) -> bytes:
    """A stored file's bytes; NotOurs (an InputError) for a link, a FIFO or a device in its
    place, never followed or opened (a read of a FIFO would block for ever); TooLarge (an
    InputError) for one larger than iolab writes at its name."""
    raw = read_regular(path, "a stored file", _MOST.get(path.name, manifest.MANIFEST_MOST))
    if raw is None:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    return raw


# bytes of each stored file at most (the store reads them with the same bounds)
_MOST = {"host.json": HOST_MOST, store.LOG: store.LOG_MOST,
         manifest.FILE: manifest.MANIFEST_MOST}


def _loads(text: str | bytes, path: Path) -> Any:
    """The JSON of ``text``; ValueError for text that is not JSON, or nested deeper than
    iolab writes (the message then says so)."""
    try:
        return load_json(text.decode("utf-8") if isinstance(text, bytes) else text, str(path))
    except ParseError as exc:
        raise ValueError(exc.problem) from None


def _json(path: Path) -> Any:
    try:
        return _loads(_read(path), path)
    except (OSError, ValueError) as exc:
        raise InputError(path, None, f"cannot be read as JSON: {exc}") from None


def _host_problems(path: Path, schema: str) -> list[InputError]:
    """A host record against its schema, and its fingerprint against its own fields (an
    edited record describes another host than its runs vouch for)."""
    from iolab.host.inventory import fingerprint_problem

    doc = _json(path)
    found = problems(doc, validator(schema), path)
    problem = fingerprint_problem(doc) if not found and isinstance(doc, dict) else ""
    return found + ([InputError(path, "fingerprint", problem, allowed="the record as iolab "
                                "wrote it; restore the file from git")] if problem else [])


def _log_problems(path: Path) -> list[InputError]:
    """Every line of a campaign log against the schema of one line."""
    try:
        lines = _read(path).decode().splitlines()
    except (OSError, ValueError) as exc:
        return [InputError(path, None, f"cannot be read: {exc}")]
    out = []
    for number, line in enumerate(lines, 1):
        try:
            doc = _loads(line, path)
        except ValueError as exc:
            out.append(InputError(path, f"line {number}", f"not valid JSON: {exc}"))
            continue
        out += problems(doc, validator("campaign-log.schema.json"), path, f"line {number} ")
    return out


def _folders(parent: Path, name: str | None, links: bool = True) -> list[Path]:
    """The folders in ``parent`` (named ``name``); ``links``: also links to folders."""
    if not parent.is_dir():
        return []
    return sorted(p for p in parent.iterdir() if p.is_dir() and (links or not p.is_symlink())
                  and not p.name.startswith(".") and (name is None or p.name == name))


def _host_schema(path: Path) -> str:
    """The schema of a host record: an imported campaign's says where it comes from."""
    from iolab.importers.cijoe.host_extras import SOURCE

    try:
        raw = read_regular(path, "the campaign's host record", HOST_MOST)
        doc = _loads(raw, path) if raw else None
    except (OSError, ValueError, IolabError):
        doc = None  # the check reads it again and says what is wrong
    imported = isinstance(doc, dict) and doc.get("source") == SOURCE
    return "host-imported.schema.json" if imported else "host.schema.json"


def raw_files(data_dir: Path, experiment: str | None = None,
              env: str | None = None) -> Iterator[tuple[Path, str]]:
    """(file, the schema it follows) of every stored file that has one, in a fixed order."""
    for exp_dir in _folders(Path(data_dir) / "raw", experiment):
        for env_dir in _folders(exp_dir, env):
            # lexists: a link there (to nowhere too) is checked, and refused, not skipped
            if os.path.lexists(env_dir / "host.json"):
                yield env_dir / "host.json", _host_schema(env_dir / "host.json")
            if os.path.lexists(env_dir / store.LOG):
                yield env_dir / store.LOG, "campaign-log.schema.json"
            for kind in ("runs", "failed"):
                # a run folder that is a link is never followed: the store calls it corrupt
                for run_dir in _folders(env_dir / kind, None, links=False):
                    if os.path.lexists(run_dir / manifest.FILE):
                        yield run_dir / manifest.FILE, "run.schema.json"


def _params_problems(path: Path, checker: Draft202012Validator) -> list[InputError]:
    try:
        doc = read_file(path, "an experiment's params file", specmod.PARAMS_MOST)
    except InputError as exc:
        return [exc]
    return problems(doc, checker, path)


def _params_checker(experiment: Any) -> Draft202012Validator:
    """The published schema of an experiment's params; an experiment registered from outside
    the package (``$IOLAB_EXPERIMENTS``) has none, and is checked against one made now."""
    name = f"params.{experiment.name}.schema.json"
    if (SCHEMA_DIR / name).exists():
        return validator(name)
    return Draft202012Validator(experiment_schema(experiment))


def verify(data_dir: Path, experiment: str | None = None,
           env: str | None = None) -> Verification:
    """Every stored file of ``data_dir`` (of one experiment and/or environment when named) and
    every params file, validated against the published schemas."""
    result = Verification()
    for path, schema in raw_files(Path(data_dir), experiment, env):
        result.files += 1
        try:
            result.problems += (_log_problems(path) if schema == "campaign-log.schema.json"
                                else _host_problems(path, schema)
                                if schema.startswith("host")
                                else problems(_json(path), validator(schema), path))
        except InputError as exc:
            result.problems.append(exc)
    for exp in registry.all_experiments():
        if experiment not in (None, exp.name):
            continue
        checker = _params_checker(exp)
        for environment in specmod.environments(exp.name, exp.params_dir):
            if env in (None, environment):
                result.files += 1
                path = specmod.params_path(exp.name, environment, exp.params_dir)
                result.problems += _params_problems(path, checker)
    return result

