"""What every adapter shares: finding a program and its version, CPU requests, core masks,
PCI addresses."""

from __future__ import annotations

import pytest

from iolab.errors import InputError, ToolError
from iolab.tools.base import (CpuCount, CpuRequest, Program, canonical_options, cpu_mask,
                              pci_address)

SMT = [{"cpu": c, "core": c % 2, "package": 0, "siblings": [c % 2, c % 2 + 2]} for c in range(4)]


def fake(tmp_path, text: str, name: str = "tool"):
    exe = tmp_path / name
    exe.write_text(f"#!/bin/sh\necho '{text}'\n")
    exe.chmod(0o755)
    return str(exe)


def test_version_is_the_first_line_or_what_the_pattern_finds(tmp_path):
    exe = fake(tmp_path, "tool 1.2\nmore")
    assert Program("tool", exe).version() == "tool 1.2"
    exe2 = fake(tmp_path, "usage ... ver: 3.4.5", "other")
    assert Program("t2", exe2, version_pattern=r"ver: (\d+)\.(\d+)\.(\d+)").version() == "3.4.5"
    assert Program("t3", exe, reports_version=False).status()["version"] is None


def test_a_missing_program_says_where_it_looked_and_how_to_install(tmp_path):
    program = Program("tool", str(tmp_path / "nope"), install="build it")
    status = program.status()
    assert not status["found"] and status["install"] == "build it" and status["version"] is None
    with pytest.raises(ToolError, match=r"tool not found at .*nope; build it"):
        program.require()


def test_cpu_requests_resolve_on_the_topology_and_name_cores_in_the_identity():
    assert CpuRequest(1).resolve(SMT) == [0, 2]
    assert CpuRequest(2, siblings=False).resolve(SMT) == [0, 1]
    assert CpuRequest(None).resolve(SMT) == [0, 1, 2, 3]
    assert CpuCount(CpuRequest(1)).resolve(SMT) == 2
    assert canonical_options({"a": 1, "cpus": CpuRequest(1)}) == \
        {"a": 1, "cpus": {"cores": 1, "siblings": True}}


def test_cpu_mask():
    assert cpu_mask([0, 1, 4, 5]) == "0x33"
    for bad in ([], [1, 1], [-1]):
        with pytest.raises(InputError):
            cpu_mask(bad)


@pytest.mark.parametrize("text, address", [
    ("00000000:4B:00.0", "0000:4b:00.0"),   # NVML, nvidia-smi
    ("00000000:ca:00.0", "0000:ca:00.0"),
    ("0000:4a:00.0", "0000:4a:00.0"),       # sysfs, lspci -D
    ("0000:4A:1F.7", "0000:4a:1f.7"),
    (" 0001:00:06.1\n", "0001:00:06.1"),
    ("10000:e1:00.0", "10000:e1:00.0"),     # a VMD domain keeps its fifth digit
])
def test_pci_address_has_one_spelling(text, address):
    assert pci_address(text) == address


@pytest.mark.parametrize("text", ["4a:00.0", "0000:4a:00", "0000:4a:00.8", "0000:4a:20.0",
                                  "0000:4g:00.0", "000000000:4a:00.0", "0000:4a:00.0 x", "",
                                  "[N/A]", None, 0x4a])
def test_what_is_not_a_pci_address_names_the_key(text):
    with pytest.raises(InputError, match="is not a PCI address") as caught:
        pci_address(text)
    assert caught.value.key == "pci address" and "0000:4a:00.0" in caught.value.allowed


def test_a_program_missing_what_it_needs_says_what(tmp_path):
    exe = tmp_path / "tool"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    program = Program("tool", str(exe), needs=(str(tmp_path / "nvcc"), "sh"))
    assert program.missing_needs() == [str(tmp_path / "nvcc")]
    assert program.find() is None
    assert program.status()["missing_needs"] == [str(tmp_path / "nvcc")]
    (tmp_path / "nvcc").write_text("")
    assert program.missing_needs() == [] and program.find() == str(exe)


def test_a_build_key_is_part_of_the_version(tmp_path):
    exe = tmp_path / "tool"
    exe.write_text("#!/bin/sh\necho 'tool 1.2'\n")
    exe.chmod(0o755)
    assert Program("tool", str(exe)).version() == "tool 1.2"
    assert Program("tool", str(exe), build="abc123").version() == "tool 1.2 (build abc123)"
    assert Program("tool", str(tmp_path / "missing"), build="abc123").version() is None
