"""Findings as records (iolab.analysis.findings) and the claims of a chapter's source study
confronted with them (iolab.report.claims): validation, each verdict rule, and the SMT/THP
chapter's verdicts computed from the committed runs, so that a changed value changes them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from iolab.analysis import findings as fd
from iolab.errors import InputError
from iolab.report import claims as cl

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
    ("no change", -1.0, 1.0, cl.SUPPORTED),          # the whole interval inside a 5 % floor
    ("no change", -9.0, 12.0, cl.UNDISTINGUISHABLE),  # contains 0, reaches beyond the floor
    ("no change", 1.0, 9.0, cl.CONTRADICTED),
    ("no change", 1.0, 2.0, cl.SUPPORTED),            # significant, but inside the floor
])
def test_each_expectation_gets_the_verdict_of_its_rule(expect, low, high, verdict):
    claim = cl.Claim("c", "1", "x", "f", expect)
    assert cl.verdict(claim, finding(low, high), floor=0.05)[0] == verdict


def test_a_claim_without_a_measurement_is_not_testable_and_names_the_lab_run():
    said, why = cl.verdict(CLAIM, fd.undefined("f", "x", "needs knob smt=on"))
    assert said == cl.UNTESTABLE and "needs knob smt=on" in why and "the lab grid" in why


def test_no_change_without_a_floor_is_never_supported():
    claim = cl.Claim("c", "1", "x", "f", "no change")
    assert cl.verdict(claim, finding(-1.0, 1.0, 0.0))[0] == cl.UNDISTINGUISHABLE


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


@pytest.mark.parametrize("text, key", [
    ("claims: []\n", "source"),
    ("source: s\nclaims: []\n", "claims"),
    ("source: s\nclaims: [{id: a, section: '1', claim: c, finding: f}]\n", "claims[0].expect"),
    ("source: s\nclaims: [{id: a, section: '1', claim: c, finding: f, expect: rises}]\n",
     "claims[0].expect"),
    ("source: s\nclaims: [{id: a, section: '1', claim: c, finding: f, expect: increase, "
     "labs: x}]\n", "claims[0].labs"),
])
def test_a_bad_claims_file_is_refused_naming_the_key(tmp_path, text, key):
    path = tmp_path / "claims.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        cl.load(path)
    assert err.value.key == key and "claims.yaml" in str(err.value)


def test_a_claim_naming_an_unknown_finding_is_an_error(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text("source: s\nclaims: [{id: a, section: '1', claim: c, finding: nope, "
                    "expect: increase}]\n")
    with pytest.raises(KeyError, match="nope"):
        cl.confront(path, [finding(1, 2)], 0.05, "demo")


# -- the SMT/THP chapter on its committed runs -----------------------------------------------

def verdicts_of(rows) -> dict[str, str]:
    """{claim's words, without its section: bare verdict}."""
    return {c.rsplit(" (", 1)[0]: v for c, v in zip(rows["claim"], rows["_verdict"])}


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
    # +16.3 % (+2.3 to +32.3): significant on its own runs, but inside the 20.9 % floor
    assert verdicts["io_uring's throughput is largely unchanged by THP"] == cl.UNDISTINGUISHABLE
    assert verdicts["psync is near its peak throughput at concurrency 16; more processes add "
                    "little"] == cl.CONTRADICTED  # +26.1 % (+15.6 to +37.5), beyond the floor
    assert verdicts["THP raises the throughput of synchronous buffered random reads"] \
        == cl.UNDISTINGUISHABLE
    assert verdicts["enabling SMT raises psync's throughput substantially"] == cl.UNTESTABLE
    assert "supported" in smt_thp.text["claims"] or "contradicted" in smt_thp.text["claims"]
    # the same table after io_uring's THP-always runs lose the 16 %: the interval shrinks
    # around zero into the floor, and the claim is supported
    df = smt_thp.df.copy()
    thp = (df["thp"] == "always") & (df["engine"] == "io_uring") & (df["direct"] == 0)
    df.loc[thp, "iops"] = df.loc[thp, "iops"] / 1.163
    changed = smt_thp.claims_rows(findings_of(smt_thp, df))
    after = verdicts_of(changed)
    assert after["io_uring's throughput is largely unchanged by THP"] == cl.SUPPORTED


def test_a_difference_reads_against_zero_and_takes_counts_that_are_zero():
    f = fd.difference("d", "ipis", [0.016, 0.018, 0.014], [0.0, 0.0, 0.0])
    assert f.estimate == pytest.approx(0.016) and f.direction == "up"
    assert math.isnan(f.relative) and "+0.016" in f.text()
    claim = cl.Claim("c", "1", "x", "d", "no change")
    assert cl.verdict(claim, fd.difference("d", "x", [0.0, 0.1], [0.1, 0.0]), 0.05)[0] \
        == cl.UNDISTINGUISHABLE  # a difference has no relative floor to be inside
    assert not fd.difference("d", "x", [1.0], [1.0, 2.0]).defined


@pytest.mark.parametrize("experiment, expected", [
    ("irq_affinity", {"the COOP_TASKRUN flag prevents the reschedule IPIs": cl.SUPPORTED}),
    ("tool_comparison", {"xNVMe's uPCIe driver gives about 2.5 times the rate of SPDK's driver "
                         "under xnvmeperf": cl.UNTESTABLE}),
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
    found = (an.findings(ch.df, ch.confidence) if experiment == "irq_affinity"
             else an.findings(ch.df, ch.spec.base, ch.confidence))
    rows = ch.claims_rows(found)
    got = verdicts_of(rows)
    for claim, verdict in expected.items():
        assert got[claim] == verdict
    assert set(rows["_verdict"]) <= set(cl.VERDICTS)
    shown = ch.claims_table(found)
    assert list(shown.columns) == ["claim", "measured here", "verdict"]


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
    assert got["4096-byte reads give fewer IOPS than 512-byte reads"] == cl.SUPPORTED
    assert got["the powersave governor lowers IOPS sharply (about 64 %, AiSIO's average "
               "over A–C)"] == cl.UNTESTABLE
    assert got["without thread siblings, stressing the unused CPUs lowers IOPS (D against C)"] \
        == cl.SUPPORTED


def test_a_chapter_without_runs_lists_its_claims_as_not_testable_with_the_lab_run():
    from iolab.report.chapter import Chapter

    ch = Chapter("cuda_qdepth", "hpc-server", mode="replay")
    assert not ch.have
    rows = ch.claims_table(why="no run is stored in environment hpc-server")
    assert len(rows) == 4 and all(v.startswith(cl.UNTESTABLE) for v in rows["verdict"])
    assert all("the lab run that would test it: the cuda_qdepth grid" in v
               for v in rows["verdict"])
    assert ch.text["claims"].startswith("None of the source's 4 claims can be tested")


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
