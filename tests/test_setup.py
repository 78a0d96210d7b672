"""scripts/setup.py, the set-up `make test` runs: the package list, what dpkg says is missing,
and what a user without root is told."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("setup_script", ROOT / "scripts" / "setup.py")
setup = importlib.util.module_from_spec(spec)
spec.loader.exec_module(setup)


def test_the_project_list_names_what_the_tests_need():
    names = setup.read_packages(setup.PACKAGES)
    for needed in ("fio", "stress-ng", "time", "gcc", "liburing-dev", "python3-venv",
                   "meson", "libdpdk-dev", "libisal-dev", "python3-tabulate"):
        assert needed in names
    assert len(names) == len(set(names))


def test_a_malformed_line_names_the_file_and_line(tmp_path):
    bad = tmp_path / "p.txt"
    bad.write_text("# comment\nfio   the tool\n\nfi;o  oops\n")
    with pytest.raises(SystemExit, match=r"p.txt line 4: 'fi;o' is not a package name"):
        setup.read_packages(bad)


def _fake_dpkg(tmp_path: Path, installed: set[str], monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "dpkg-query"
    lines = "\n".join(f'    {name}) echo "{name} installed" ;;' for name in sorted(installed))
    script.write_text("#!/bin/bash\nshift 2\nfor p in \"$@\"; do\n  case $p in\n" + lines
                      + "\n    *) echo \"dpkg-query: no packages found matching $p\" >&2 ;;\n"
                      "  esac\ndone\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_missing_packages_come_from_dpkg(tmp_path, monkeypatch):
    _fake_dpkg(tmp_path, {"fio", "gcc"}, monkeypatch)
    assert setup.missing_packages(["fio", "stress-ng", "gcc", "meson"]) == ["stress-ng", "meson"]


def test_without_root_the_missing_are_named_with_the_command(tmp_path, monkeypatch, capsys):
    _fake_dpkg(tmp_path, {"fio"}, monkeypatch)
    listing = tmp_path / "p.txt"
    listing.write_text("fio  x\nstress-ng  y\n")
    monkeypatch.setattr(setup.os, "geteuid", lambda: 1000)
    assert setup.packages(listing) == 0
    out = capsys.readouterr().out
    assert "missing stress-ng; install them with: sudo apt-get install stress-ng" in out
    assert "skip" in out


def test_no_tool_sources_is_said_not_failed(tmp_path, capsys):
    setup.tools(tmp_path / "none")
    assert "bdevperf and xnvmeperf are not built" in capsys.readouterr().out
