"""One experiment's findings across environments: which replicate, which differ, which
cannot be compared.

The rule, applied to each finding (:mod:`iolab.analysis.findings`) that two environments
share by id:

- *cannot be compared* when either environment has no estimate of it (its runs are missing
  or its host could not make them), or when the two statements differ: a finding's statement
  names the reference it was set against ("... against the best other depth (64)"), so a
  different statement is a different quantity;
- otherwise the two estimates are set against each other. A change (+x %) is read as the
  factor 1 + x/100 and a ratio as itself; their quotient B/A gets an interval on the log
  scale from the two findings' own intervals, each taken as a normal interval
  (se = half-width of ln bounds / z), combined as sqrt(se_A^2 + se_B^2). A difference of
  counts gets B - A, its interval combined the same way on the linear scale;
- *replicates* when that interval contains "no difference" (a quotient of 1, a difference of
  0): no difference between the environments is detected at this confidence; *differs* when
  it excludes it, with the quotient (or difference) and its interval. A quotient's interval
  wider than a factor of :data:`WIDE` (0.5 to 2, say) is said to say little.

A finding that replicates this way may still be significant in one environment and not in
the other; the table shows both values so the reader sees that too.

With three machines or more, each finding's row also gives its random-effects pooled
estimate across them (:mod:`iolab.analysis.pooling`), and the chapter gets a forest plot
(:mod:`iolab.report.forest`) of every finding two or more environments estimate. A machine is
what its host record says of it (``iolab.report.machines.machine_words``): two environments
measured on one machine count as one machine in a pooled estimate. The chapter's answer says,
per finding two machines or more estimate, whether it holds on every machine, is
machine-specific, is not settled or is found on none (``pooling.generality``), and which of
the source's claims rest on each.

Responsible for: the rule, the table, and finding the environments with stored runs of an
experiment. Not responsible for: computing the findings (each experiment's ``page.findings``),
the pooling, or where the table and the plot are shown.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from scipy import stats as sps

from iolab.analysis import pooling
from iolab.analysis.findings import Finding, by_id
from iolab.core import spec as specmod
from iolab.core.store import note_read
from iolab.errors import printable
from iolab.report import figures, forest  # noqa: F401  (figures: plain text, see there)

REPLICATES, DIFFERS, INCOMPARABLE = "replicates", "differs", "cannot be compared"
WIDE = 4.0  # a ratio's interval wider than this factor (say 0.5 to 2) is called too wide
RULE = ("A finding replicates when the interval of its value in one environment against the "
        "other (a ratio of the two factors for a change or a ratio, a difference for a "
        "difference, each interval combined from the two findings' own intervals on the log "
        "or linear scale) contains no difference; it differs when that interval excludes it; "
        "it cannot be compared when an environment has no estimate or the two were computed "
        "against different references (designs, or points the data chose). These comparisons "
        "are exploratory: each is at the chapter's level on its own, outside the chapter's "
        "confirmatory family of claims, so among many one may differ by chance.")


def environments(experiment: str, data_dir: Path, params_dir: Path | None = None) -> list[str]:
    """The environments with stored runs of ``experiment`` in ``data_dir`` that have its
    params file (a campaign folder without one cannot be planned, so not shown)."""
    known = set(specmod.environments(experiment, **({"params_dir": params_dir}
                                                   if params_dir else {})))
    note_read(experiment)  # this experiment's folder only: a chapter depends on no other
    folder = Path(data_dir) / "raw" / experiment
    envs = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return [env for env in envs if env in known and (folder / env / "runs").is_dir()
            and any((folder / env / "runs").iterdir())
            and not part_of(experiment, env, params_dir)]


def part_of(experiment: str, environment: str, params_dir: Path | None = None) -> str | None:
    """The environment whose chapter shows this campaign (``analysis.part_of``), if any."""
    from iolab.core.registry import get

    exp = get(experiment)
    spec = specmod.load(exp, environment, params_dir=params_dir or exp.params_dir)
    return spec.analysis.get("part_of")


def _log_se(f: Finding, z: float) -> tuple[float, float]:
    """(ln of the finding as a factor, its standard error from its interval)."""
    to = (lambda x: 1 + x / 100) if f.kind == "change" else (lambda x: x)
    est, lo, hi = to(f.estimate), to(f.ci_low), to(f.ci_high)
    if min(est, lo, hi) <= 0:
        return math.nan, math.nan
    return math.log(est), (math.log(hi) - math.log(lo)) / (2 * z)


def verdict(a: Finding, b: Finding) -> tuple[str, str]:
    """(verdict, why) of finding ``b`` (one environment) against ``a`` (another)."""
    if not a.defined or not b.defined:
        missing = [f for f in (a, b) if not f.defined]
        # both may be missing for one reason (a knob neither host has): said once
        return INCOMPARABLE, "; ".join(dict.fromkeys(f.undefined or "no interval"
                                                     for f in missing))
    if a.statement != b.statement:
        return INCOMPARABLE, (f"set against different references: {a.statement} in one, "
                              f"{b.statement} in the other")
    if a.kind != b.kind:
        return INCOMPARABLE, f"different kinds of finding ({a.kind}, {b.kind})"
    z = float(sps.norm.ppf(0.5 + min(a.confidence, b.confidence) / 2))
    level = f"{min(a.confidence, b.confidence) * 100:g} % CI"
    if a.kind == "difference":
        se = math.hypot((a.ci_high - a.ci_low) / (2 * z), (b.ci_high - b.ci_low) / (2 * z))
        d = b.estimate - a.estimate
        lo, hi = d - z * se, d + z * se
        text = f"difference {d:+.3g} ({level} {lo:+.3g} to {hi:+.3g})"
        return (REPLICATES if lo <= 0 <= hi else DIFFERS), text
    (la, sa), (lb, sb) = _log_se(a, z), _log_se(b, z)
    if math.isnan(la) or math.isnan(lb):
        return INCOMPARABLE, "an interval reaches zero or below, so no ratio can be formed"
    se = math.hypot(sa, sb)
    ratio, lo, hi = (math.exp(lb - la + k * z * se) for k in (0, -1, 1))
    text = f"ratio {ratio:.2f} ({level} {lo:.2f} to {hi:.2f})"
    if lo <= 1 <= hi and hi / lo > WIDE:
        # no difference detected, but an interval this wide would hide a large one too
        text += "; so wide an interval says little (more repetitions would)"
    return (REPLICATES if lo <= 1 <= hi else DIFFERS), text


def table(found: dict[str, list[Finding]],
          machine_of: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per finding of the first environment: its value in each environment and,
    for each other environment, the verdict against the first with why; with three machines
    or more (``machine_of``: environment -> its machine), the pooled estimate."""
    envs = list(found)
    first, others = envs[0], envs[1:]
    by_env = {env: by_id(fs) for env, fs in found.items()}
    # the machines the table spans: a pooled column exists when three or more do
    machines = len({(machine_of or {}).get(env, f"environment {env}") for env in envs})
    rows = []
    for f in found[first]:
        row = {"finding": f.statement, first: f.text() if f.defined else "not measured"}
        for env in others:
            g = by_env[env].get(f.id)
            row[env] = (g.text() if g is not None and g.defined else "not measured")
            said, why = verdict(f, g) if g is not None else (INCOMPARABLE, "no such finding")
            row[f"{env} against {first}" if len(others) > 1 else "across the environments"] = \
                f"{said}: {why}"
        per = pooling.one_per_machine({env: by_env[env][f.id] for env in envs
                                       if f.id in by_env[env]}, machine_of)
        pooled = (pooling.pool(per, f.confidence) if len(per) >= pooling.PREDICTION_LEAST
                  else None)
        if pooled is not None and pooled.k >= pooling.PREDICTION_LEAST:
            row["pooled across the machines"] = pooling.text(pooled)
        elif machines >= pooling.PREDICTION_LEAST:  # the column exists: say why not here
            row["pooled across the machines"] = f"not pooled: {pooling.why_not_pooled(per)}"
        said = _generality(f, by_env, machine_of)
        row["across the machines"] = (f"{said[0]}: {said[1]}" if said is not None else
                                      "fewer than two machines estimate it")
        rows.append(row)
    return pd.DataFrame(rows)


def summary(shown: pd.DataFrame) -> str:
    """'Of 9 findings, 3 replicate, 1 differs and 5 cannot be compared.'"""
    verdicts = [v.split(":", 1)[0] for c in shown.columns if " against " in c
                or c == "across the environments" for v in shown[c]]
    counts = [(sum(v == k for v in verdicts), k) for k in (REPLICATES, DIFFERS, INCOMPARABLE)]
    words = {REPLICATES: ("replicates", "replicate"), DIFFERS: ("differs", "differ"),
             INCOMPARABLE: ("cannot be compared", "cannot be compared")}
    parts = [f"{n} {words[k][n != 1]}" for n, k in counts if n]
    if not parts:
        return "No finding to compare."
    said = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"Of {len(verdicts)} comparisons of a finding (exploratory), {said}."


def as_text(shown: pd.DataFrame) -> str:
    """The table for a terminal: each finding, its value per environment, the verdict. Each
    cell and label is one line, its control characters escaped (:func:`printable`): a
    finding's statement and a verdict's why quote recorded strings (a params file's ``why``
    of an exclusion), which must not start a line of their own or drive the terminal."""
    lines = []
    verdicts = [c for c in shown.columns if " against " in c or c == "across the environments"]
    envs = [c for c in shown.columns if c != "finding" and c not in verdicts]
    for _, row in shown.iterrows():
        lines.append(_line(row["finding"]))
        lines += [f"  {_line(env)}: {_line(row[env])}" for env in envs]
        lines += [f"  {_line(c) if c != 'across the environments' else 'verdict'}: "
                  f"{_line(row[c])}" for c in verdicts]
    return "\n".join(lines + ["", summary(shown), RULE])


def _line(value: object) -> str:
    return printable(str(value))


def machines_of(experiment: str, envs: list[str], data_dir: Path) -> dict[str, str]:
    """Each environment's machine as its host record describes it (``machine_words``); an
    environment without a host record is left out (a machine of its own)."""
    from iolab.core.store import Store
    from iolab.report.machines import machine_words

    out = {}
    for env in envs:
        host = Store(data_dir, experiment, env).read_host()
        if host:
            out[env] = machine_words(host)
    return out


def across(ch, findings_of) -> pd.DataFrame | None:
    """The chapter's findings beside those of every other environment with stored runs of
    its experiment (``findings_of``: the experiment's ``page.findings``); the text
    ``across`` says what the table shows, or why there is none, and ``across_answer`` which
    findings hold across machines (:func:`generality_text`)."""
    from iolab.report.chapter import Chapter

    name = ch.experiment.name
    others = [e for e in environments(name, ch.data_dir, ch.experiment.params_dir)
              if e != ch.environment]
    if not others:
        ch.text["across"] = (f"Only environment {ch.environment} has stored runs of this "
                             "experiment, so there is no other machine to compare its findings "
                             "with. Runs of another environment (iolab env new NAME, then "
                             "iolab run) appear here at the next make book.")
        ch.text["across_answer"] = ("No other machine has measured this experiment yet, so "
                                    "whether its findings hold across machines is open.")
        return None
    found = {ch.environment: findings_of(ch)}
    for env in others:
        found[env] = findings_of(Chapter(name, env, mode="replay", data_dir=ch.data_dir))
    if not found[ch.environment]:
        ch.text["across"] = (f"Environment {ch.environment} has no findings of its own yet, so "
                             f"nothing is compared with {', '.join(others)}.")
        ch.text["across_answer"] = ch.text["across"]
        return None
    machine_of = machines_of(name, list(found), ch.data_dir)
    shown = table(found, machine_of)
    who = (f"environment {others[0]} has" if len(others) == 1
           else f"environments {', '.join(others)} have")
    ch.text["across"] = (f"Besides {ch.environment}, {who} stored runs of this experiment "
                         f"(each environment has its own page under the chapter); the table "
                         f"sets each finding of {ch.environment} against theirs. "
                         f"{summary(shown)}" + _same_machine(machine_of)
                         + _forest(ch, found, machine_of))
    ch.text["across_answer"] = generality_text(found, machine_of, ch.confidence,
                                               _claims_by_finding(ch))
    return shown


def _same_machine(machine_of: dict[str, str]) -> str:
    """The sentence naming environments measured on one machine ("" when none are)."""
    groups: dict[str, list[str]] = {}
    for env, machine in machine_of.items():
        groups.setdefault(machine, []).append(env)
    repeats = [envs for envs in groups.values() if len(envs) > 1]
    if not repeats:
        return ""
    said = "; ".join(f"{' and '.join(envs)} ({machine})" for machine, envs in groups.items()
                     if len(envs) > 1)
    return (f" Environments measured on one machine, as their host records describe it: "
            f"{said}. Such environments are a repeat on that machine, not another machine: "
            "a pooled estimate counts the machine once, by the first of them in the table.")


def _claims_by_finding(ch) -> dict[str, list[str]]:
    """finding id -> the ids of the source's claims that rest on it (none without claims)."""
    import sys

    from iolab.report import claims

    path = claims.path_of(sys.modules[type(ch.experiment).__module__].__file__)
    out: dict[str, list[str]] = {}
    if path.is_file():
        for c in claims.load(path).claims:
            out.setdefault(c.finding, []).append(c.id)
    return out


def _generality(f: Finding, by_env: dict[str, dict[str, Finding]],
                machine_of: dict[str, str] | None) -> tuple[str, str] | None:
    """``pooling.generality`` of finding ``f`` over one estimate per machine of the same
    quantity (same statement and kind); None where fewer than two machines estimate it."""
    same = {env: fs[f.id] for env, fs in by_env.items() if f.id in fs
            and fs[f.id].statement == f.statement and fs[f.id].kind == f.kind}
    per = pooling.one_per_machine(same, machine_of)
    return pooling.generality(per, f.confidence) if len(per) >= 2 else None


def generality_text(found: dict[str, list[Finding]], machine_of: dict[str, str],
                    confidence: float, claims_of: dict[str, list[str]]) -> str:
    """The answer's sentence on which findings of the first environment hold across
    machines (``pooling.generality``, the table's "across the machines" column): how many
    fall under each reading, the machine-specific ones named with the claims resting on
    them."""
    first = next(iter(found))
    by_env = {env: by_id(fs) for env, fs in found.items()}
    groups: dict[str, list[Finding]] = {}
    for f in found[first]:
        said = _generality(f, by_env, machine_of)
        if said is not None:
            groups.setdefault(said[0], []).append(f)
    if not groups:
        return ("No finding of this environment is estimated on a second machine yet, so "
                "none can be said to hold across machines.")

    def named(f: Finding) -> str:
        rest = claims_of.get(f.id)
        return f.statement + (f", on which claim {', '.join(rest)} rests" if rest else "")

    counted = sum(len(fs) for fs in groups.values())
    parts = []
    for said in pooling.GENERALITY:
        if said in groups:
            n = len(groups[said])
            part = pooling.GENERALITY_WORDS[said][n != 1].format(n)
            if said == pooling.SPECIFIC:
                part += " (" + "; ".join(named(f) for f in groups[said]) + ")"
            parts.append(part)
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return (f"Of the {counted} findings that two machines or more estimate, {listed} "
            f"(exploratory, each at the chapter's {confidence * 100:g} % level over one "
            "estimate per machine; the table under Across environments gives each finding's "
            "reading and why).")


def _forest(ch, found: dict[str, list[Finding]], machine_of: dict[str, str]) -> str:
    """The forest plot of the findings two or more environments estimate, into the chapter's
    figures (``fig_forest``), and the sentences that say what it shows."""
    fig = forest.figure(found, ch.confidence, machine_of)
    if fig is None:
        return ""
    plt.close(fig)  # shown where the notebook asks for it (iolab.api.forest), not here
    ch.figures["fig_forest"] = fig
    machines = max(len(pooling.one_per_machine(per, machine_of))
                   for _, per in forest.shared(found))
    pooled = (" With three machines or more, the orange diamond is the pooled estimate ("
              f"{pooling.METHOD}), its label gives I², the share of the spread between "
              "machines beyond what their own intervals explain, and the grey line is where "
              "a new machine's effect would fall.")
    if machines >= pooling.PREDICTION_LEAST:
        said = pooled
    elif machines == 2:
        said = (" With two machines no pooled estimate is shown: how much an effect varies "
                "from machine to machine needs a third one to be estimated.")
    else:
        said = (" All of them were measured on one machine, so the plot shows repeats on it, "
                "and how much an effect varies from machine to machine is not estimated here.")
    return (" The forest plot below draws each finding that two or more environments "
            "estimate, each machine's value with its interval." + said)
