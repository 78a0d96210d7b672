"""Findings across environments (iolab.report.compare): the rule, the table, and which
environments have runs to compare."""

from __future__ import annotations

import io

import pytest
from matplotlib.patches import Polygon

from iolab.analysis import findings as fd
from iolab.report import compare

A = [100, 102, 98, 101]


def test_equal_effects_replicate_and_distinct_effects_differ():
    a = fd.change("x", "IOPS with THP", [116, 117, 115], [100, 101, 99])
    same = fd.change("x", "IOPS with THP", [232, 233, 231], [200, 202, 198])
    said, why = compare.verdict(a, same)
    assert said == compare.REPLICATES and why.startswith("ratio 1.00 (95 % CI 0.9")
    none = fd.change("x", "IOPS with THP", [100, 99, 101], [100, 101, 99])
    said, why = compare.verdict(a, none)
    # +16 % against +0 %: the ratio 1.00 / 1.16 and its interval exclude 1
    assert said == compare.DIFFERS and why.startswith("ratio 0.86")


def test_a_ratio_and_a_difference_follow_the_same_rule():
    r1 = fd.ratio("r", "io_uring / psync", [129, 130, 128], [100, 100, 100])
    r2 = fd.ratio("r", "io_uring / psync", [99, 100, 98], [100, 101, 99])
    assert compare.verdict(r1, r2)[0] == compare.DIFFERS
    d1 = fd.difference("d", "IPIs per read", [0.016, 0.017, 0.015], [0, 0, 0])
    d2 = fd.difference("d", "IPIs per read", [0.015, 0.018, 0.016], [0, 0, 0])
    said, why = compare.verdict(d1, d2)
    assert said == compare.REPLICATES and why.startswith("difference +0.000")
    d3 = fd.difference("d", "IPIs per read", [0.0, 0.0, 0.001], [0, 0, 0])
    assert compare.verdict(d1, d3)[0] == compare.DIFFERS


def test_what_cannot_be_compared_says_why():
    a = fd.change("x", "depth 128 against the best other (64)", A, [90, 91, 89])
    other_design = fd.change("x", "depth 128 against the best other (512)", A, [90, 91, 89])
    said, why = compare.verdict(a, other_design)
    assert said == compare.INCOMPARABLE and "different references" in why
    blocked = fd.undefined("x", "depth 128 against the best other (64)", "needs knob smt=off")
    assert compare.verdict(a, blocked) == (compare.INCOMPARABLE, "needs knob smt=off")
    assert compare.verdict(blocked, blocked) == (compare.INCOMPARABLE, "needs knob smt=off")
    ratio = fd.ratio("x", "depth 128 against the best other (64)", A, [90, 91, 89])
    assert "different kinds" in compare.verdict(a, ratio)[1]


def test_the_table_has_a_row_per_finding_and_a_summary():
    first = [fd.change("a", "one", [110, 111, 109], A), fd.undefined("b", "two", "no runs")]
    second = [fd.change("a", "one", [110, 112, 108], A), fd.change("b", "two", A, A)]
    shown = compare.table({"amd": first, "intel": second})
    assert list(shown.columns) == ["finding", "amd", "intel", "across the environments",
                                   "across the machines"]
    assert shown.loc[0, "across the machines"].startswith("holds on every machine: up on both")
    assert shown.loc[1, "across the machines"] == "fewer than two machines estimate it"
    assert shown.loc[0, "across the environments"].startswith("replicates: ratio")
    assert shown.loc[1, "amd"] == "not measured"
    assert compare.summary(shown) == ("Of 2 comparisons of a finding (exploratory), 1 "
                                      "replicates and 1 cannot be compared.")
    three = compare.table({"amd": first, "intel": second, "arm": second})
    assert "intel against amd" in three.columns and "arm against amd" in three.columns


def test_the_text_table_keeps_each_recorded_string_on_its_line():
    """An exclusion's ``why`` (a params file's string) is quoted in a finding's reason: its
    line breaks and escape sequences are escaped, never a line (a verdict) of their own."""
    why = "X\x1b]0;pwn\x07\x1b[2J\nverdict: replicates FAKE LINE"
    first = [fd.undefined("a", "one\nverdict: replicates", why)]
    second = [fd.change("a", "one\nverdict: replicates", A, A)]
    text = compare.as_text(compare.table({"amd": first, "intel": second}))
    assert "\x1b" not in text and "\x07" not in text
    assert not any(line.startswith("verdict") for line in text.splitlines())
    assert r"verdict: cannot be compared: X\x1b]0;pwn\x07\x1b[2J\nverdict: replicates FAKE LINE" \
        in text
    assert text.splitlines()[0] == r"one\nverdict: replicates"



def test_two_findings_of_one_id_are_refused_not_one_compared_in_place_of_the_other():
    twice = [fd.change("a", "one", [110, 111, 109], A), fd.change("a", "one", A, A)]
    with pytest.raises(ValueError, match="two findings named 'a'"):
        compare.table({"amd": twice, "intel": twice[:1]})

def test_environments_are_those_with_runs_and_params(tmp_path):
    for env, runs in (("kvm-2vcpu", True), ("epyc-2vcpu-v782", False), ("nowhere", True)):
        folder = tmp_path / "raw" / "cpu_search" / env / "runs"
        folder.mkdir(parents=True)
        if runs:
            (folder / "r0").mkdir()
    # 'nowhere' has runs but no params file; epyc has params but no runs
    assert compare.environments("cpu_search", tmp_path) == ["kvm-2vcpu"]


def test_the_committed_cpu_searches_are_compared():
    from iolab.experiments.cpu_search import page
    from iolab.report.chapter import Chapter

    ch = Chapter("cpu_search", "epyc-2vcpu-v782")
    if not ch.have:
        pytest.skip("no committed cpu_search/epyc-2vcpu-v782 campaign")
    shown = compare.across(ch, page.findings)
    verdicts = dict(zip(shown["finding"], shown["kvm-2vcpu against epyc-2vcpu-v782"]))
    # the two AMD hosts' stress effect (D against C): -28.4 % and -6.6 %
    stress = next(v for k, v in verdicts.items() if k.startswith("mean IOPS at the optimum with "
                                                                "stress-ng"))
    assert stress.startswith("differs: ratio 1.31")
    assert "environments kvm-2vcpu, xeon-v657 have" in ch.text["across"]
    # the answer names the finding machine-specific, and the claim resting on it
    answer = ch.text["across_answer"]
    assert "1 is machine-specific (mean IOPS at the optimum with stress-ng" in answer
    assert "on which claim stress-hurts-without-siblings rests)" in answer
    assert answer.startswith("Of the 3 findings that two machines or more estimate, 2 hold")
    # the table gives each finding's reading across the machines, and why
    reading = dict(zip(shown["finding"], shown["across the machines"]))
    assert reading["mean IOPS at 4096-byte against 512-byte reads"].startswith(
        "holds on every machine: down on all 3 machines, by different amounts")


def test_iolab_compare_prints_the_table_and_refuses_what_it_cannot_compare():
    from test_cli import run

    code, out, err = run(["compare", "cpu_search", "--env", "epyc-2vcpu-v782",
                          "--env", "kvm-2vcpu"])
    assert code == 0, err
    assert "  epyc-2vcpu-v782: -28.4 %" in out and "verdict: differs: ratio 1.31" in out
    assert compare.RULE in out and "3 differ" in out
    code, out, err = run(["compare", "cpu_search", "--env", "kvm-2vcpu"])
    assert code == 2 and "--env" in err and "two or more" in err
    code, out, err = run(["compare", "cuda_iosize", "--env", "hpc-server", "--env", "kvm-2vcpu"])
    assert code == 2 and "computes no findings" in err


def test_a_replication_with_a_very_wide_interval_says_how_little_it_shows():
    a = fd.change("x", "p99", [300, 30, 900], [1, 1.2, 0.8])
    b = fd.change("x", "p99", [200, 20, 800], [1, 1.3, 0.7])
    said, why = compare.verdict(a, b)
    assert said == compare.REPLICATES and why.endswith("says little (more repetitions would)")
    tight = fd.change("x", "p99", [116, 117, 115], [100, 101, 99])
    assert "says little" not in compare.verdict(tight, tight)[1]


def test_three_environments_give_a_pooled_estimate_and_two_do_not():
    """Constructed findings (not measurements): with three machines or more, each finding's
    row gives its random-effects pooled estimate (iolab.analysis.pooling)."""
    one = [fd.change("a", "one", [110, 111, 109], A), fd.undefined("b", "two", "no runs")]
    two = [fd.change("a", "one", [104, 106, 105], A), fd.change("b", "two", A, A)]
    three = [fd.change("a", "one", [112, 113, 111], A), fd.change("b", "two", A, A)]
    assert "pooled across the machines" not in compare.table({"x": one, "y": two}).columns
    shown = compare.table({"x": one, "y": two, "z": three})
    assert shown.loc[0, "pooled across the machines"].startswith("+")
    assert " over 3 machines; tau² " in shown.loc[0, "pooled across the machines"]
    assert shown.loc[1, "pooled across the machines"] == (
        "not pooled: 2 machines estimate it, and pooling needs 3")


def test_three_machines_stating_a_finding_against_different_references_are_not_pooled():
    """Three machines estimate it, but the best other depth differs between them: the row
    said "not pooled: 3 machines estimate it, and pooling needs 3"."""
    found = {env: [fd.change("a", f"IOPS at 128 against the best other depth ({ref})",
                             [110 + k, 111 + k, 109 + k], A)]
             for k, (env, ref) in enumerate((("x", 512), ("y", 64), ("z", 512)))}
    assert compare.table(found).loc[0, "pooled across the machines"] == (
        "not pooled: the machines state it against different references, so it is not one "
        "quantity")


def test_the_forest_plot_draws_what_two_machines_share_and_pools_three():

    from iolab.report import forest

    one = [fd.change("a", "one", [110, 111, 109], A), fd.undefined("b", "two", "no runs")]
    two = [fd.change("a", "one", [104, 106, 105], A), fd.change("b", "two", A, A)]
    assert forest.figure({"x": one}) is None
    assert [id_ for id_, _ in forest.shared({"x": one, "y": two})] == ["a"]
    fig = forest.figure({"x$1$": one, "y": two, "z": two})
    a, b = fig.axes
    fig.savefig(io.BytesIO(), format="png")  # math would be parsed when a text is drawn
    assert [t.get_text() for t in a.get_yticklabels()][:3] == ["x$1$", "y", "z"]
    assert any(isinstance(p, Polygon) for p in a.patches), "three machines: a pooled diamond"
    assert not any(isinstance(p, Polygon) for p in b.patches), "two machines: none"


def test_two_environments_of_one_machine_are_one_machine_in_the_pool_and_the_plot():
    """Constructed findings (not measurements): a campaign and a replication pack measured on
    one host are a repeat on that machine, drawn hollow and never pooled as a second one."""
    from iolab.report import forest

    one = [fd.change("a", "one", [110, 111, 109], A)]
    two = [fd.change("a", "one", [104, 106, 105], A)]
    found = {"amd": one, "intel": two, "intel-pack": two}
    machine_of = {"amd": "AMD EPYC", "intel": "Intel Xeon", "intel-pack": "Intel Xeon"}
    assert "pooled across the machines" in compare.table(found).columns
    assert "pooled across the machines" not in compare.table(found, machine_of).columns
    fig = forest.figure(found, 0.95, machine_of)
    [ax] = fig.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["amd", "intel", "intel-pack (a repeat, not pooled)"]
    assert not any(isinstance(p, Polygon) for p in ax.patches), "two machines: no diamond"
    said = compare._same_machine(machine_of)
    assert "intel and intel-pack (Intel Xeon)" in said and "counts the machine once" in said
    assert compare._same_machine({"amd": "AMD EPYC", "intel": "Intel Xeon"}) == ""
