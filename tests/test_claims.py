"""Findings as records (iolab.analysis.findings) and the claims of a chapter's source study
confronted with them (iolab.report.claims): validation, each verdict rule, every quote found in
its source's text, and the chapters' verdicts computed from the committed runs, so that a
changed value changes them."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iolab.analysis import findings as fd
from iolab.errors import InputError
from iolab.paths import REPO_ROOT
from iolab.report import claims as cl

# the sources' own texts (the seed documents, the AiSIO reference notes): beside the checkout,
# never committed
SHARED = Path(os.environ.get("IOLAB_SHARED_DIR", REPO_ROOT.parent / "shared"))
CLAIMS_FILES = sorted((REPO_ROOT / "iolab" / "experiments").glob("*/claims.yaml"))

CLAIM = cl.Claim("c", "1", "x goes up", "f", "increase", "the lab grid")


def finding(low: float, high: float, estimate: float | None = None) -> fd.Finding:
    est = (low + high) / 2 if estimate is None else estimate
    return fd.Finding("f", "x", "change", est, low, high, "5 / 5", 0.95, "m")


@pytest.mark.parametrize("expect, low, high, verdict", [
    ("increase", 2.0, 9.0, cl.SUPPORTED),
    ("increase", -9.0, -2.0, cl.CONTRADICTED),
    ("increase", -2.0, 9.0, cl.UNDISTINGUISHABLE),
    ("decrease", -9.0, -2.0, cl.SUPPORTED),
    ("decrease", 2.0, 9.0, cl.CONTRADICTED),
    ("no change", -1.0, 1.0, cl.SUPPORTED),           # the whole interval inside ±5 %
    ("no change", -9.0, 12.0, cl.UNDISTINGUISHABLE),  # contains 0, reaches across the margin
    ("no change", 1.0, 9.0, cl.UNDISTINGUISHABLE),    # excludes 0, but reaches into the margin
    ("no change", 6.0, 9.0, cl.CONTRADICTED),         # wholly beyond the margin: different
    ("no change", -9.0, -5.5, cl.CONTRADICTED),
    ("no change", 1.0, 2.0, cl.SUPPORTED),            # significant, but inside the margin
    ("no change", -5.0, 5.0, cl.SUPPORTED),           # the margin's edges count as inside
])
def test_each_expectation_gets_the_verdict_of_its_rule(expect, low, high, verdict):
    claim = cl.Claim("c", "1", "x", "f", expect, margin=0.05, margin_why="stated")
    assert cl.verdict(claim, finding(low, high))[0] == verdict


def test_a_claim_without_a_measurement_is_not_testable_and_names_the_lab_run():
    said, why = cl.verdict(CLAIM, fd.undefined("f", "x", "needs knob smt=on"))
    assert said == cl.UNTESTABLE and "needs knob smt=on" in why and "the lab grid" in why


def test_no_change_without_a_margin_is_never_supported():
    claim = cl.Claim("c", "1", "x", "f", "no change")
    assert cl.verdict(claim, finding(-1.0, 1.0, 0.0)) == (cl.UNDISTINGUISHABLE,
                                                          "no margin declared")


def test_the_margin_judges_a_ratio_on_its_relative_scale_and_names_its_reason():
    claim = cl.Claim("c", "1", "x", "r", "no change", margin=0.1, margin_why="'near' read so")
    said, why = cl.verdict(claim, fd.Finding("r", "x", "ratio", 1.0, 0.95, 1.08, "5 / 5",
                                             0.95, "m"))
    assert said == cl.SUPPORTED and "±10 %" in why and "'near' read so" in why
    said, why = cl.verdict(claim, fd.Finding("r", "x", "ratio", 0.5, 0.4, 0.6, "5", 0.95, "m"))
    assert said == cl.CONTRADICTED and why.startswith("different")


def test_ratio_findings_read_against_one():
    r = fd.ratio("r", "a / b", [2.0, 2.1, 1.9], [1.0, 1.1, 0.9])
    assert r.direction == "up" and r.relative == pytest.approx(1.0)
    assert "2.00 (95 % CI" in r.text() and "n = 3 / 3" in r.text()


def test_the_interaction_is_the_ratio_of_ratios_with_a_positive_interval():
    a_new, a_base = [90.0, 92.0, 88.0], [100.0, 101.0, 99.0]
    b_new, b_base = [50.0, 52.0, 48.0], [100.0, 102.0, 98.0]
    f = fd.interaction("i", "gap", a_new, a_base, b_new, b_base)
    assert f.estimate == pytest.approx((90 / 100) / (50 / 100))
    assert 0 < f.ci_low < f.estimate < f.ci_high and f.direction == "up"
    # the log-scale standard error is the root of the four samples' squared relative errors
    se = math.sqrt(sum(np.var(x, ddof=1) / (len(x) * np.mean(x) ** 2)
                       for x in (a_new, a_base, b_new, b_base)))
    assert math.log(f.ci_high / f.estimate) == pytest.approx(math.log(f.estimate / f.ci_low))
    assert math.log(f.ci_high / f.estimate) > 2 * se  # t quantile above 2 at these dfs
    bad = fd.interaction("i", "gap", [1.0], a_base, b_new, b_base)
    assert not bad.defined and "two values" in bad.undefined


HEAD = "source: s\ntext: t.txt\n"
ONE = "id: a, section: '1', quote: q, conditions: k, claim: c, finding: f"


@pytest.mark.parametrize("text, key", [
    ("claims: []\n", "source"),
    ("source: s\nclaims: [{" + ONE + ", expect: increase}]\n", "text"),
    (HEAD + "claims: []\n", "claims"),
    (HEAD + "claims: [{" + ONE + "}]\n", "claims[0].expect"),
    (HEAD + "claims: [{" + ONE + ", expect: rises}]\n", "claims[0].expect"),
    (HEAD + "claims: [{" + ONE + ", expect: increase, labs: x}]\n", "claims[0].labs"),
    (HEAD + "claims: [{id: a, section: '1', conditions: k, claim: c, finding: f, "
     "expect: increase}]\n", "claims[0].quote"),
    (HEAD + "claims: [{id: a, section: '1', quote: q, claim: c, finding: f, "
     "expect: increase}]\n", "claims[0].conditions"),
    (HEAD + "claims: [{" + ONE + ", expect: increase, outside: ''}]\n", "claims[0].outside"),
    (HEAD + "claims: [{" + ONE + ", expect: no change}]\n", "claims[0].margin"),
    (HEAD + "claims: [{" + ONE + ", expect: no change, margin: 5}]\n", "claims[0].margin"),
    (HEAD + "claims: [{" + ONE + ", expect: no change, margin: '5 %'}]\n", "claims[0].margin"),
    (HEAD + "claims: [{" + ONE + ", expect: no change, margin: 0.05}]\n",
     "claims[0].margin_why"),
    (HEAD + "claims: [{" + ONE + ", expect: increase, margin: 0.05}]\n", "claims[0].margin"),
])
def test_a_bad_claims_file_is_refused_naming_the_key(tmp_path, text, key):
    path = tmp_path / "claims.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        cl.load(path)
    assert err.value.key == key and "claims.yaml" in str(err.value)


def test_a_claim_naming_an_unknown_finding_is_an_error(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(HEAD + "claims: [{id: a, section: '1', quote: q, conditions: k, claim: c, "
                    "finding: nope, expect: increase}]\n")
    with pytest.raises(KeyError, match="nope"):
        cl.confront(path, [finding(1, 2)], "demo")


# -- the SMT/THP chapter on its committed runs -----------------------------------------------

def verdicts_of(rows) -> dict[str, str]:
    """{claim's id: bare verdict}."""
    return dict(zip(rows["_id"], rows["_verdict"]))


@pytest.fixture(scope="module")
def smt_thp():
    from iolab.report.chapter import Chapter

    ch = Chapter("smt_thp", "kvm-2vcpu", mode="replay")
    if not ch.have:
        pytest.skip("no committed smt_thp/kvm-2vcpu campaign")
    return ch


def findings_of(ch, df):
    from iolab.experiments.smt_thp import analysis as an

    return an.findings(df, ch.spec.base, ch.spec.grids["thp"]["set"], ch.blocked_by_grid(),
                       ch.confidence)


def test_the_smt_thp_findings_are_pinned_on_the_committed_runs(smt_thp):
    found = fd.by_id(findings_of(smt_thp, smt_thp.df))
    # the chapter's glued thp_io_uring_pct and thp_io_uring_ci
    assert found["thp_io_uring_iops"].text().startswith("+16.3 % (95 % CI +2.3 to +32.3")
    assert found["thp_psync_iops"].text().startswith("-2.1 %")
    assert found["thp_psync_iops"].direction == "none"
    smt = found["smt_psync_iops"]
    assert not smt.defined and "smt" in smt.undefined.lower()


def test_the_smt_thp_verdicts_follow_the_data(smt_thp):
    rows = smt_thp.claims_rows(findings_of(smt_thp, smt_thp.df))
    verdicts = verdicts_of(rows)
    # +16.3 % (+2.3 to +32.3) against the declared ±10 %: it reaches across the margin (the
    # noise floor of 20.9 % had called it inside)
    assert verdicts["thp-neutral-for-io-uring"] == cl.UNDISTINGUISHABLE
    # +26.1 % (+15.6 to +37.5), wholly beyond ±10 %
    assert verdicts["psync-near-peak-at-16"] == cl.CONTRADICTED
    assert verdicts["thp-helps-psync"] == cl.UNDISTINGUISHABLE
    assert verdicts["smt-helps-psync"] == cl.UNTESTABLE
    assert "supported" in smt_thp.text["claims"] or "contradicted" in smt_thp.text["claims"]
    # the same table after io_uring's THP-always runs lose the 16 %: the interval is centred
    # on zero but still as wide as the runs' noise, wider than the margin, so no change is
    # not shown: noise never makes "no change" easier to support
    df = smt_thp.df.copy()
    thp = (df["thp"] == "always") & (df["engine"] == "io_uring") & (df["direct"] == 0)
    df.loc[thp, "iops"] = df.loc[thp, "iops"] / 1.163
    assert verdicts_of(smt_thp.claims_rows(findings_of(smt_thp, df)))[
        "thp-neutral-for-io-uring"] == cl.UNDISTINGUISHABLE
    # and with quiet runs of equal means on both sides, it is equivalent
    both = (df["engine"] == "io_uring") & (df["direct"] == 0)
    df.loc[both, "iops"] = 100_000.0 + (np.arange(both.sum()) % 3 - 1) * 100.0
    assert verdicts_of(smt_thp.claims_rows(findings_of(smt_thp, df)))[
        "thp-neutral-for-io-uring"] == cl.SUPPORTED


def test_a_difference_reads_against_zero_and_takes_counts_that_are_zero():
    f = fd.difference("d", "ipis", [0.016, 0.018, 0.014], [0.0, 0.0, 0.0])
    assert f.estimate == pytest.approx(0.016) and f.direction == "up"
    assert math.isnan(f.relative) and "+0.016" in f.text()
    claim = cl.Claim("c", "1", "x", "d", "no change", margin=0.05, margin_why="stated")
    assert cl.verdict(claim, fd.difference("d", "x", [0.0, 0.1], [0.1, 0.0]))[0] \
        == cl.UNDISTINGUISHABLE  # a difference has no relative scale for a margin
    assert not fd.difference("d", "x", [1.0], [1.0, 2.0]).defined


@pytest.mark.parametrize("experiment, expected", [
    # the notes' "an IPI is sent for each IO" against 0.016 per read measured beside
    ("irq_affinity", {"coop-prevents-ipis": cl.SUPPORTED,
                      "one-ipi-per-io-beside": cl.CONTRADICTED}),
    # AiSIO's second thread is an SMT sibling, the runs here add a core
    ("tool_comparison", {"upcie-ahead-of-spdk": cl.UNTESTABLE,
                         "second-thread-helps-bdevperf": cl.OUTSIDE}),
])
def test_the_committed_chapters_claims_get_their_verdicts(experiment, expected):
    """Every claim of the experiment's claims.yaml names a finding its analysis makes, and the
    committed runs give the verdicts pinned here."""
    import importlib

    from iolab.report.chapter import Chapter

    ch = Chapter(experiment, "kvm-2vcpu", mode="replay")
    if not ch.have:
        pytest.skip(f"no committed {experiment}/kvm-2vcpu campaign")
    an = importlib.import_module(f"iolab.experiments.{experiment}.analysis")
    def make(chapter):
        return (an.findings(chapter.df, chapter.confidence) if experiment == "irq_affinity"
                else an.findings(chapter.df, chapter.spec.base, chapter.confidence))

    rows = ch.claims_rows(make(ch))
    got = verdicts_of(rows)
    for claim, verdict in expected.items():
        assert got[claim] == verdict
    assert set(rows["_verdict"]) <= set(cl.VERDICTS)
    shown = ch.claims_table(make)
    assert list(shown.columns) == cl.COLUMNS


def test_the_cpu_search_chapter_confronts_aisio_on_its_confirmed_campaign():
    from iolab.experiments.cpu_search import analysis as ca
    from iolab.report.chapter import Chapter

    ch = Chapter("cpu_search", "epyc-2vcpu-v782", mode="replay")
    if not ch.have:
        pytest.skip("no committed cpu_search/epyc-2vcpu-v782 campaign")
    df = ca.normalize(ch.df)
    rows = ch.claims_rows(ca.findings(df, ch.spec.base, ca.optimum(df), ch.blocked_by_grid(),
                                      ch.confidence))
    got = verdicts_of(rows)
    assert got["larger-io-fewer-iops"] == cl.SUPPORTED
    assert got["powersave-lowers-iops"] == cl.UNTESTABLE
    assert got["stress-hurts-without-siblings"] == cl.SUPPORTED
    # the peak at 128 is stated with turbo off, which no VM here can switch: never contradicted
    assert got["qdepth-peaks-at-128"] == cl.OUTSIDE


def test_a_chapter_without_runs_lists_its_claims_as_not_testable_with_the_lab_run():
    from iolab.report.chapter import Chapter

    ch = Chapter("cuda_qdepth", "hpc-server", mode="replay")
    assert not ch.have
    rows = ch.claims_table(why="no run is stored in environment hpc-server")
    assert len(rows) == 5 and all(v.startswith(cl.UNTESTABLE) for v in rows["verdict"])
    assert all("the lab run that would test it: the cuda_qdepth grid" in v
               for v in rows["verdict"])
    assert ch.text["claims"].startswith("None of the source's 5 claims can be tested")


def test_every_experiment_keeps_its_sources_claims_beside_it():
    import sys

    from iolab.core import registry

    for exp in registry.all_experiments():
        path = cl.path_of(sys.modules[type(exp).__module__].__file__)
        assert path.exists(), f"{exp.name}: no claims.yaml beside its module"
        assert cl.load(path).claims


def test_the_frequency_turbo_reaches_is_judged_where_a_host_samples_it():
    """The clock claim of AiSIO's turbo section reads the runs' sampled CPU frequency: a host
    without cpufreq leaves it not testable, saying why; sampled frequencies decide it."""
    from iolab.experiments.cpu_search import analysis as ca
    from iolab.report.chapter import Chapter

    ch = Chapter("cpu_search", "epyc-2vcpu-v782", mode="replay")
    if not ch.have:
        pytest.skip("no committed cpu_search/epyc-2vcpu-v782 campaign")
    df = ca.normalize(ch.df)
    ref = {k: v for k, v in ch.spec.base.items() if k in ca.VARIABLES}
    base = ca.select(df, ref).copy()
    # the base point's runs as if the host could switch turbo, without frequency samples
    off = base.assign(turbo="off")
    both = pd.concat([df, off], ignore_index=True)

    def frequency(rows):
        found = fd.by_id(ca.findings(rows, ch.spec.base, ca.optimum(df), {}, ch.confidence))
        return found["turbo_off_frequency"]

    unsampled = frequency(both)
    assert not unsampled.defined and "no cpufreq_mean_khz" in unsampled.undefined
    both.loc[both.index[: len(df)], "cpufreq_mean_khz"] = 3.3e6
    both.loc[both.index[len(df):], "cpufreq_mean_khz"] = 2.6e6 * (1 + 0.001 * np.arange(len(off)))
    sampled = frequency(both)
    assert sampled.direction == "down" and sampled.estimate == pytest.approx(-20.9, abs=0.2)


@pytest.mark.parametrize("verdicts, text", [
    ([cl.SUPPORTED], "The source's one claim is supported."),
    ([cl.UNTESTABLE], "The source's one claim cannot be tested with the runs stored here"),
    ([cl.SUPPORTED, cl.CONTRADICTED], "Of the source's 2 claims, 1 is supported and 1 "
                                      "contradicted."),
    ([cl.UNTESTABLE] * 3, "None of the source's 3 claims can be tested"),
])
def test_the_summary_reads_for_one_claim_and_for_several(verdicts, text):
    assert cl.summary(pd.DataFrame({"_verdict": verdicts})).startswith(text)


# -- quotes found in their sources ------------------------------------------------------------

def _words(text: str) -> str:
    """Text as a quote is matched: Markdown's emphasis and code marks dropped, whitespace
    collapsed (a quote runs across the source's line breaks)."""
    return re.sub(r"\s+", " ", re.sub(r"[`*]", "", text)).strip()


@pytest.mark.parametrize("path", CLAIMS_FILES, ids=lambda p: p.parent.name)
def test_every_quote_is_found_in_its_sources_text(path):
    claims = cl.load(path)
    source = SHARED / claims.text
    if not SHARED.is_dir():
        pytest.skip(f"the sources' texts are not in {SHARED} (the project's shared folder, "
                    "never committed; set IOLAB_SHARED_DIR to point at it)")
    assert source.is_file(), f"{path}: text {claims.text!r} is not in {SHARED}"
    text = _words(source.read_text())
    missing = [c.id for c in claims.claims if _words(c.quote) not in text]
    assert not missing, f"{path}: quotes not found in {claims.text}: {missing}"


def test_a_misquote_is_not_found():
    """The matcher is not lenient: one word changed and the quote is not in its source."""
    assert _words("a *b*\n  `c` d") == "a b c d"
    assert _words("a b c e") not in _words("x a *b*\n `c` d y")


def test_a_claim_outside_its_conditions_shows_what_was_found_and_is_never_contradicted():
    claim = cl.Claim("c", "1", "x", "f", "increase", "the lab grid", quote="q", conditions="k",
                     outside="turbo cannot be switched here")
    for low, high in ((-9.0, -2.0), (2.0, 9.0), (-2.0, 9.0)):
        said, why = cl.verdict(claim, finding(low, high))
        assert said == cl.OUTSIDE and "turbo cannot be switched here" in why
    said, _ = cl.verdict(claim, fd.undefined("f", "x", "needs knob turbo=off"))
    assert said == cl.UNTESTABLE
    rows = cl.table(cl.Claims("s", (claim,), "t"), {"f": finding(-9.0, -2.0)})
    assert "-5.5 %" in rows["measured here"][0] and rows["at"][0] == "k"
    assert rows["the source says"][0] == "“q” (§1)"
    assert cl.summary(rows) == f"The source's one claim is {cl.OUTSIDE}."


def test_a_level_reads_one_mean_against_a_stated_value():
    f = fd.level("l", "ipis per read", [0.016, 0.018, 0.014], 1.0)
    assert f.kind == "ratio" and f.estimate == pytest.approx(0.016)
    half = 2.0 * 0.002 * 4.302653 / (2 * math.sqrt(3))  # t(0.975, 2) sd / sqrt(n)
    assert f.ci_low == pytest.approx(0.016 - half) and f.direction == "down"
    assert fd.level("l", "x", [2.0, 2.2], 2.0).direction == "none"
    assert not fd.level("l", "x", [1.0], 1.0).defined


def test_the_sensitivity_column_gives_the_verdict_without_outlier_runs():
    claim = cl.Claim("c", "1", "x", "f", "no change", quote="q", conditions="k", margin=0.05,
                     margin_why="stated")
    claims = cl.Claims("s", (claim,), "t")
    rows = cl.table(claims, {"f": finding(-1.0, 1.0)}, robust={"f": finding(6.0, 9.0)})
    assert rows["_verdict"][0] == cl.SUPPORTED and rows[cl.SENSITIVITY][0] == cl.CONTRADICTED
    rows = cl.table(claims, {"f": finding(-1.0, 1.0)}, robust={"f": finding(-2.0, 2.0)})
    assert rows[cl.SENSITIVITY][0] == "the same"
    rows = cl.table(claims, {"f": finding(-1.0, 1.0)})
    assert rows[cl.SENSITIVITY][0].startswith("the same (no run here is an outlier")


def test_a_chapter_without_its_outlier_runs_drops_exactly_them(smt_thp):
    """The SMT/THP campaign has outlier runs (two stalls among them): the copy leaves them out
    and glues nothing; the chapter itself keeps every run."""
    from iolab.analysis import outliers

    other = smt_thp.without_outliers()
    assert other is not None and other is not smt_thp
    metric = smt_thp.spec.rule.metric
    rows = smt_thp.df.dropna(subset=[metric])
    far = outliers.flag(rows, [v for v in smt_thp.spec.variables if v in rows], metric)
    assert len(other.df) == len(smt_thp.df) - int(far.sum()) and far.sum() > 0
    assert other.text == {} and other.figures == {}
    rows = smt_thp.claims_rows(findings_of(smt_thp, smt_thp.df),
                               robust=findings_of(other, other.df))
    assert set(rows[cl.SENSITIVITY]) <= {"the same", *cl.VERDICTS}


def test_the_judged_claims_form_one_family_whose_intervals_are_at_its_level(smt_thp):
    """Every finding behind the claims judged is computed again at 1 - 0.05 / m: the intervals
    the table shows are at that level, and the summary names m and the level."""
    levels = []

    def make(chapter):
        levels.append(chapter.confidence)
        return findings_of(chapter, chapter.df)

    shown = smt_thp.claims_table(make)
    found = findings_of(smt_thp, smt_thp.df)
    family = cl.family_size(cl.load(cl.path_of(
        REPO_ROOT / "iolab" / "experiments" / "smt_thp" / "__init__.py")), found)
    assert family == 10, "13 claims, 3 of them not testable here"
    assert levels[0] == 0.95 and levels[1] == pytest.approx(1 - 0.05 / 10)
    assert all("99.5 % CI" in m for m in shown["measured here"] if "CI" in m)
    assert "The 10 claims judged here form one family: each interval is at 99.50 %" \
        in smt_thp.text["claims"]
    # the chapter's own level is untouched: the family's copy has its own texts
    assert smt_thp.confidence == 0.95


def test_a_family_counts_only_the_claims_it_can_judge():
    claims = cl.Claims("s", (
        cl.Claim("a", "1", "x", "fa", "increase"),
        cl.Claim("b", "1", "x", "fb", "increase", outside="another machine"),
        cl.Claim("c", "1", "x", "fc", "increase")), "t")
    found = [fd.ratio("fa", "x", [2.0, 2.1], [1.0, 1.1]), fd.ratio("fb", "x", [2.0, 2.1], [1.0, 1.1]),
             fd.undefined("fc", "x", "no such host")]
    assert cl.family_size(claims, found) == 1
    assert cl.family_words(1, 0.95).startswith("One claim is judged")
    assert "2 claims judged here form one family: each interval is at 97.50 %" \
        in cl.family_words(2, 0.95)


def test_a_ratio_far_below_one_reads_in_significant_digits_not_as_zero():
    r = fd.ratio("r", "a / b", [2.0, 2.2, 1.8], [1000.0, 1100.0, 900.0])
    assert r.text() == "0.002 (95 % CI 0.0016 to 0.0025; n = 3 / 3)"
    assert fd.ratio("r", "a / b", [1.0, 1.1, 0.9], [10.0, 11.0, 9.0]).text().startswith("0.10 (")
