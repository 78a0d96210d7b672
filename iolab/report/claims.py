"""The claims of a chapter's source study, each quoted and confronted with the chapter's findings.

An experiment keeps its source's claims as data, ``claims.yaml`` beside its module::

    source: the course project on sync/async I/O, affinity, SMT and THP
    text: seeds/004_80f182803650a0ae.txt   # the source's text, in the project's shared folder
    claims:
      - id: thp-psync
        section: "3.4"                     # where the source says it
        quote: Enabling Transparent Huge Pages (THP) improves the performance of ...
        conditions: 128 KB buffered random reads at concurrency 16, ...   # as the source states them
        claim: THP raises the IOPS of synchronous buffered random reads   # what is tested here
        finding: thp_psync_iops      # the id of a finding of the experiment's analysis
        expect: increase             # increase | decrease | no change
        margin: 0.10                 # "no change" only: the relative change that still counts
        margin_why: the source's "largely unchanged", read as within 10 %    # as no change
        outside: turbo is as the host found it, not off   # optional: how the runs here depart
        lab: the thp grid on hpc-server   # where the claim is tested when not here (optional)

``quote`` is the source's own words (a test finds each in ``text``, where the shared folder is
present); ``claim`` is the quantity this package tests, in its words.

Each claim gets a verdict computed from its finding (:mod:`iolab.analysis.findings`):

- ``increase`` (``decrease``): *supported* when the finding's interval lies wholly above
  (below) "no effect", *contradicted* when it lies wholly on the other side, and *not
  distinguishable on this machine* when it contains "no effect";
- ``no change``: judged by its declared ``margin`` (from the source's words where it gives one,
  else a practical margin the file states with its reason, set from the claim and never from
  the runs) with two one-sided tests: *supported* (equivalent) when the whole interval lies
  inside ±margin, *contradicted* (different) when it lies wholly outside, and *not
  distinguishable on this machine* otherwise. The interval is the finding's own, so each
  one-sided test is at half its error rate. The campaign's noise floor judges nothing: it says
  how small a difference the machine can detect;
- *not comparable* when the claim is set against a value of the reference registry
  (``reference``, with ``measured``: the quantity, direction and path its finding measures)
  that measures something else (payload against total traffic, one way against both ways,
  another path): the reason says what differs, and nothing is judged;
- *outside its conditions* when the claim declares ``outside``: the runs here depart from the
  conditions the source states, so what was found is shown beside the claim and judges
  nothing (never *contradicted*);
- *not testable here* when the finding is undefined (this host cannot make the runs), with the
  reason and the lab point that would test it.

*One multiplicity policy:* the claims a chapter judges (neither not testable nor outside)
form one confirmatory family (:func:`family_size`), and their findings' intervals are
computed at the family's level, ``1 - alpha / m`` for ``m`` claims (Bonferroni; the chapter
makes them, :meth:`iolab.report.chapter.Chapter.claims_table`), so that the family-wise error
rate stays at the chapter's ``alpha``.

Responsible for: reading and validating the claims, the verdicts and their table.
Not responsible for: the findings (the experiments' analysis), the prose around the table, or
finding the quotes in their sources (``tests/test_claims.py`` does, where the texts are).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from iolab.analysis.findings import Finding, by_id, undefined
from iolab.errors import InputError, excerpt
from iolab.report.reference import like as reference_like
from iolab.yamlfile import read_file

EXPECT = ("increase", "decrease", "no change")
# the fields every claim has (in this order), then those it may have
REQUIRED = ("id", "section", "quote", "conditions", "claim", "finding", "expect")
FIELDS = REQUIRED + ("margin", "margin_why", "outside", "lab", "reference", "measured")
MEASURED = ("quantity", "direction", "path")  # the kind of what a claim's finding measures
SUPPORTED, CONTRADICTED = "supported", "contradicted"
CLAIMS_MOST = 1 << 20  # bytes of a claims.yaml: the largest holds 8 kB
UNDISTINGUISHABLE, UNTESTABLE = "not distinguishable on this machine", "not testable here"
OUTSIDE, NOT_COMPARABLE = "outside its conditions", "not comparable"
VERDICTS = (SUPPORTED, CONTRADICTED, UNDISTINGUISHABLE, OUTSIDE, NOT_COMPARABLE, UNTESTABLE)
SENSITIVITY = "without outlier runs"
COLUMNS = ["the source says", "at", "measured here", "verdict", SENSITIVITY]


@dataclass(frozen=True)
class Claim:
    id: str
    section: str
    claim: str
    finding: str
    expect: str
    lab: str = ""
    quote: str = ""
    conditions: str = ""
    outside: str = ""
    margin: float = float("nan")  # "no change" only: a relative change (0.1 for ±10 %)
    margin_why: str = ""
    reference: str = ""           # the registered reference value the finding is set against
    measured: tuple[tuple[str, str], ...] = ()  # what the finding measures: quantity, ...


@dataclass(frozen=True)
class Claims:
    source: str
    claims: tuple[Claim, ...]
    text: str = ""  # the source's text, relative to the project's shared folder


def load(path: Path) -> Claims:
    """``claims.yaml`` validated: a clear error naming the file, the key and what is allowed."""
    doc = read_file(path, "an experiment's claims", CLAIMS_MOST)
    if not isinstance(doc, dict) or not isinstance(doc.get("source"), str):
        raise InputError(path, "source", "missing: say which study the claims come from",
                         allowed="a mapping with 'source' (text), 'text' (text) and 'claims' "
                                 "(a list)")
    if not isinstance(doc.get("text"), str) or not doc["text"].strip():
        raise InputError(path, "text", "missing: say where the source's own text is",
                         allowed="a path relative to the project's shared folder, such as "
                                 "seeds/000_499c7f303a2c6475.txt")
    items = doc.get("claims")
    if not isinstance(items, list) or not items:
        raise InputError(path, "claims", "must be a non-empty list of claims")
    out, seen = [], set()
    for i, item in enumerate(items):
        key = f"claims[{i}]"
        if not isinstance(item, dict):
            raise InputError(path, key, "must be a mapping", allowed=", ".join(FIELDS))
        unknown = sorted(set(item) - set(FIELDS))
        if unknown:
            raise InputError(path, f"{key}.{unknown[0]}", "unknown field of a claim",
                             allowed=", ".join(FIELDS))
        for field in (f for f in FIELDS if f not in ("margin", "measured")):
            if field in REQUIRED or field in item:
                if not isinstance(item.get(field), str) or not item[field].strip():
                    raise InputError(path, f"{key}.{field}", "missing or not text",
                                     allowed=", ".join(EXPECT) if field == "expect" else "text")
        if item["expect"] not in EXPECT:
            raise InputError(path, f"{key}.expect", f"unknown expectation {excerpt(item['expect'])}",
                             allowed=", ".join(EXPECT))
        _check_margin(path, key, item)
        measured = _measured(path, key, item)
        if item["id"] in seen:
            raise InputError(path, f"{key}.id", f"{excerpt(item['id'])} is used twice")
        seen.add(item["id"])
        out.append(Claim(**{f: str(item.get(f, "")) for f in FIELDS
                            if f not in ("margin", "measured")},
                         margin=float(item.get("margin", float("nan"))), measured=measured))
    return Claims(doc["source"], tuple(out), doc["text"])


def _measured(path: Path, key: str, item: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """A claim set against a registered reference says what its finding measures, so that
    the two can be compared like with like (:func:`iolab.report.reference.like`)."""
    if "reference" not in item:
        if "measured" in item:
            raise InputError(path, f"{key}.measured", "only a claim with a reference says it",
                             allowed="a 'reference' beside it")
        return ()
    measured = item.get("measured")
    if not isinstance(measured, dict) or sorted(measured) != sorted(MEASURED) or \
            not all(isinstance(v, str) and v.strip() for v in measured.values()):
        raise InputError(path, f"{key}.measured", "what the finding measures, to set against "
                         "the reference", allowed="a mapping of " + ", ".join(MEASURED)
                         + " (text each, as the reference registry names them)")
    return tuple((k, measured[k]) for k in MEASURED)


def _check_margin(path: Path, key: str, item: dict[str, Any]) -> None:
    """A claim of no change declares its margin and why; no other claim has one."""
    wants = item["expect"] == "no change"
    margin = item.get("margin")
    if not wants:
        for field in ("margin", "margin_why"):
            if field in item:
                raise InputError(path, f"{key}.{field}", "only a claim of no change has a "
                                 "margin", allowed="no margin for increase or decrease")
        return
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < 1:
        raise InputError(path, f"{key}.margin", f"a claim of no change needs its margin, got "
                         f"{excerpt(margin)}", allowed="a relative change above 0 and below 1 "
                         "(0.1 for ±10 %), set from the claim before the runs are read")
    if not isinstance(item.get("margin_why"), str) or not item["margin_why"].strip():
        raise InputError(path, f"{key}.margin_why", "say where the margin comes from",
                         allowed="the source's own words, or a stated practical reading")


def verdict(claim: Claim, finding: Finding | None,
            references: dict[str, Any] | None = None) -> tuple[str, str]:
    """(verdict, why) of ``claim`` against its finding (see the module docstring);
    ``references``: the reference registry (:func:`iolab.report.reference.registry`), for a
    claim set against one of its values."""
    if finding is None or not finding.defined:
        why = (finding.undefined if finding is not None and finding.undefined
               else "this campaign has no such measurement")
        return UNTESTABLE, why + (f"; the lab run that would test it: {claim.lab}"
                                  if claim.lab else "")
    if claim.reference:
        entry = (references or {}).get(claim.reference)
        if entry is None:
            raise KeyError(f"claim {claim.id!r} names reference {claim.reference!r}, which the "
                           "reference registry does not list")
        apart = reference_like(dict(claim.measured), entry)
        if apart:
            return NOT_COMPARABLE, (f"the reference ({entry.source}) is {entry.quantity}, "
                                    f"{entry.direction}, {entry.path}; {apart}")
    if claim.outside:
        return OUTSIDE, claim.outside + (f"; the lab run that would test it: {claim.lab}"
                                         if claim.lab else "")
    if claim.expect == "no change":
        return _equivalence(claim, finding)
    direction = finding.direction
    wanted = "up" if claim.expect == "increase" else "down"
    if direction == wanted:
        return SUPPORTED, "the interval lies wholly on the claimed side"
    if direction == "none":
        return UNDISTINGUISHABLE, "the interval contains 'no effect'"
    return CONTRADICTED, "the interval lies wholly on the other side"


def _equivalence(claim: Claim, finding: Finding) -> tuple[str, str]:
    """A claim of no change against its declared margin, by two one-sided tests."""
    low, high = finding.relative_bounds
    m = claim.margin
    if math.isnan(low) or math.isnan(m):
        return UNDISTINGUISHABLE, ("a difference of counts has no relative scale for a margin"
                                   if finding.kind == "difference" else "no margin declared")
    said = f"the declared margin of ±{m * 100:g} % ({claim.margin_why})"
    if -m <= low and high <= m:
        return SUPPORTED, f"equivalent: the whole interval lies inside {said}"
    if high < -m or low > m:
        return CONTRADICTED, f"different: the whole interval lies outside {said}"
    return UNDISTINGUISHABLE, f"the interval reaches across {said}"


def table(claims: Claims, findings: dict[str, Finding], experiment: str = "",
          robust: dict[str, Finding] | None = None,
          references: dict[str, Any] | None = None) -> pd.DataFrame:
    """One row per claim: the source's words and where they are, the conditions it states,
    what was measured here (the claim as tested, and its finding), and the verdict with why
    (``_verdict`` holds the verdict alone and ``_id`` the claim's id; :func:`shown` drops them
    for the page), and the verdict's sensitivity: the verdict from ``robust``, the same
    findings without the runs that are outliers of their point ("the same" where it does not
    change; None when no run is an outlier). A claim naming a finding the analysis does not
    make is an error, not a verdict."""
    rows: list[dict[str, Any]] = []
    for c in claims.claims:
        if c.finding not in findings:
            raise KeyError(f"{experiment} claim {c.id!r} names finding {c.finding!r}, which "
                           f"its analysis does not make (it makes {', '.join(sorted(findings))})")
        f = findings[c.finding]
        said, why = verdict(c, f, references)
        measured = f"{f.statement}: {f.text()}" if f.defined else "not measured here"
        where = f"§{c.section}" if c.section[:1].isdigit() else c.section
        if robust is None:
            again = "the same (no run here is an outlier)"
        else:
            without = verdict(c, robust.get(c.finding), references)[0]
            again = "the same" if without == said else without
        rows.append({"the source says": f"“{c.quote}” ({where})", "at": c.conditions,
                     "measured here": f"tested as: {c.claim}. {measured}",
                     "verdict": f"{said}: {why}", SENSITIVITY: again, "_verdict": said,
                     "_id": c.id})
    return pd.DataFrame(rows, columns=[*COLUMNS, "_verdict", "_id"])


def shown(rows: pd.DataFrame) -> pd.DataFrame:
    """The claims table as a chapter shows it (without the bare verdict and id columns)."""
    return rows.drop(columns=["_verdict", "_id"])


def counts(rows: pd.DataFrame) -> dict[str, int]:
    """How many claims got each verdict (every verdict, zeros included)."""
    found = rows["_verdict"].value_counts() if not rows.empty else pd.Series(dtype=int)
    return {v: int(found.get(v, 0)) for v in VERDICTS}


def summary(rows: pd.DataFrame) -> str:
    """'Of the 12 claims, 3 are supported, ...' for the closing section."""
    n = counts(rows)
    if len(rows) == 1:  # "Of the source's 1 claims" would not read
        verdict = next(v for v, k in n.items() if k)
        return ("The source's one claim cannot be tested with the runs stored here; the table "
                "says which lab run would test it." if verdict == UNTESTABLE
                else f"The source's one claim is {verdict}.")
    if len(rows) and n[UNTESTABLE] == len(rows):
        return (f"None of the source's {len(rows)} claims can be tested with the runs stored "
                "here; the table says which lab run would test each.")
    given = [(verdict, k) for verdict, k in n.items() if k]
    parts = [f"{k} {verdict}" for verdict, k in given]
    if parts:  # "1 is supported, 2 contradicted": the verb once, in the first part
        verdict, k = given[0]
        parts[0] = f"{k} {'is' if k == 1 else 'are'} {verdict}"
    return (f"Of the source's {len(rows)} claims, " + ", ".join(parts[:-1])
            + (" and " if len(parts) > 1 else "") + parts[-1] + "." if parts else
            "The source makes no claim listed here.")


def family_size(claims: Claims, found: Sequence[Finding],
                references: dict[str, Any] | None = None) -> int:
    """How many of the claims the findings can judge: those whose verdict is none of *not
    testable here*, *outside its conditions* and *not comparable* (at least 1). They form the
    chapter's one confirmatory family."""
    by = by_id(found)
    judged = [c for c in claims.claims
              if verdict(c, by.get(c.finding), references)[0]
              not in (UNTESTABLE, OUTSIDE, NOT_COMPARABLE)]
    return max(1, len(judged))


def family_words(family: int, confidence: float) -> str:
    """The multiplicity policy as the claims summary states it."""
    if family <= 1:
        return "One claim is judged, so its interval is the chapter's own."
    level = 1 - (1 - confidence) / family
    return (f"The {family} claims judged here form one family: each interval is at "
            f"{level * 100:.2f} % (Bonferroni, the interval form of Holm's first step), so "
            f"that the chance of any false verdict among them stays at "
            f"{(1 - confidence) * 100:g} %.")


def unmeasured(claims_path: Path, why: str, confidence: float = 0.95) -> list[Finding]:
    """For a campaign with no runs: every finding its claims name, undefined with ``why``."""
    return [undefined(c.finding, c.claim, why, confidence=confidence)
            for c in load(claims_path).claims]


def path_of(experiment_module_file: str | Path) -> Path:
    """Where an experiment keeps its claims: ``claims.yaml`` beside its module."""
    return Path(experiment_module_file).parent / "claims.yaml"


def confront(claims_path: Path, found: Sequence[Finding], experiment: str = "",
             robust: Sequence[Finding] | None = None,
             references: dict[str, Any] | None = None) -> pd.DataFrame:
    """The claims table of an experiment's findings (:func:`table`)."""
    return table(load(claims_path), by_id(found), experiment,
                 None if robust is None else by_id(robust), references)
