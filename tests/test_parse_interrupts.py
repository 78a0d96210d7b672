"""The /proc/interrupts parser: a real snapshot (golden), deltas, and malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iolab.errors import ParseError
from iolab.parsers.interrupts import delta, parse_interrupts

FIXTURES = Path(__file__).parent / "fixtures" / "interrupts"


def test_a_real_snapshot_matches_its_golden_file():
    """kvm-2vcpu.txt: this machine class's /proc/interrupts (virtio1-req.0 is the disk)."""
    parsed = parse_interrupts((FIXTURES / "kvm-2vcpu.txt").read_text())
    assert parsed == json.loads((FIXTURES / "kvm-2vcpu.json").read_text())
    assert parsed["cpus"] == [0, 1]
    assert parsed["rows"]["36"]["description"] == "PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0"
    assert parsed["rows"]["ERR"] == {"counts": [0], "description": "", "per_cpu": False}
    assert parsed["rows"]["RES"]["description"] == "Rescheduling interrupts"


def test_offline_cpus_leave_gaps_in_the_header():
    text = "   CPU0  CPU2\n 40:  5  7  PCI-MSIX nvme0q1\nRES:  1  2  Rescheduling interrupts\n"
    assert parse_interrupts(text) == {"cpus": [0, 2], "rows": {
        "40": {"counts": [5, 7], "description": "PCI-MSIX nvme0q1", "per_cpu": True},
        "RES": {"counts": [1, 2], "description": "Rescheduling interrupts", "per_cpu": True}}}


def test_delta_per_row_and_cpu():
    before = parse_interrupts("   CPU0 CPU1\n 40: 5 7 nvme0q1\nERR: 3\n 41: 1 1 gone\n")
    after = parse_interrupts("   CPU0 CPU1\n 40: 15 7 nvme0q1\nERR: 4\n 42: 9 9 new\n")
    assert delta(before, after) == {"40": {0: 10, 1: 0}, "ERR": {-1: 1}}


@pytest.mark.parametrize("text, problem", [
    ("", "empty: no CPU header line"),
    ("hello world\n 40: 1 nvme\n", "first line is not a CPU header: 'hello world'"),
    ("   CPU0 CPU1\n 40 1 2 nvme0q1\n", "line 2: no '<row>:' at its start"),
    ("   CPU0 CPU1\n 40: nvme0q1\n", "line 2 (40): no count"),
    ("   CPU0 CPU1\n 40: 1\n", "line 2 (40): 1 counts for 2 CPUs (cut off?)"),
    ("   CPU0 CPU1\n 40: 1 2 a\n 40: 1 2 b\n", "line 3: row 40 appears twice"),
    # the counts are keyed by CPU: the last of the two columns was taken
    ("   CPU0 CPU0\n 40: 1 2 a\n", "the CPU header names CPU0 twice (allowed: each CPU once)"),
    # str.isdigit takes '²', which int() refuses with a ValueError naming no file
    ("   CPU0\n 40: ² nvme0q1\n", "line 2 (40): no count (allowed: whole numbers"),
    ("   CPU²\n 40: 5 nvme0q1\n", "first line is not a CPU header: 'CPU²'"),
])
def test_malformed_input_is_refused_with_the_line(text, problem):
    with pytest.raises(ParseError) as info:
        parse_interrupts(text, "snap")
    assert str(info.value).startswith(f"snap: {problem}")


def test_delta_refuses_changed_cpus_and_counts_that_went_down():
    a = parse_interrupts("   CPU0 CPU1\n 40: 5 7 x\n")
    with pytest.raises(ParseError, match="the CPUs changed"):
        delta(a, parse_interrupts("   CPU0\n 40: 5 x\n"))
    with pytest.raises(ParseError, match="row 40: a count went down"):
        delta(a, parse_interrupts("   CPU0 CPU1\n 40: 4 7 x\n"))


def test_delta_refuses_a_row_of_another_number_of_counts():
    """A row of one count in one snapshot and one per CPU in the other counted nothing."""
    before = parse_interrupts("   CPU0 CPU1\nERR: 3\nMIS: 0\n")
    before["rows"]["MIS"]["counts"] = [0, 0]
    with pytest.raises(ParseError, match=r"^snap: row MIS has 2 counts in snap.before and 1 in "
                                         r"snap.after \(allowed: the same number in both\)"):
        delta(before, parse_interrupts("   CPU0 CPU1\nERR: 4\nMIS: 0\n"), "snap")
