"""YAML as iolab reads it: safe, no key twice, aliases bounded, files read bounded."""

from __future__ import annotations

import pytest
import yaml

from iolab import yamlfile
from iolab.errors import InputError
from iolab.safefiles import NotOurs, TooLarge

from conftest import alias_bomb


def test_a_billion_laughs_is_refused_before_anything_walks_it():
    """Probe 7, B1/B4: nine anchors, each listing the one before ten times, stand for 10^9
    values; PyYAML shares them, so the load took no time, and the first walk over the value
    (a copy, a check, the repr of an error message) took gigabytes and minutes."""
    with pytest.raises(yamlfile.AliasBound, match="its aliases repeat 1,234,567,880 values, "
                                                  "more than the 10,000 iolab reads"):
        yamlfile.load_yaml("runtime_s: " + alias_bomb(9))


def test_aliases_within_the_bound_are_read_as_yaml_reads_them():
    text = "base: &b {engine: psync, qdepth: 1}\ngrids:\n  a: {set: *b}\n  b: {set: *b}\n"
    assert yamlfile.load_yaml(text)["grids"]["b"]["set"] == {"engine": "psync", "qdepth": 1}
    assert yamlfile.load_yaml("v: " + alias_bomb(3))["v"][2][9][9] == ["x"] * 10  # 1,200 more
    with pytest.raises(yamlfile.AliasBound, match="repeat 12,330 values"):
        yamlfile.load_yaml("v: " + alias_bomb(4))


def test_an_alias_inside_its_own_anchor_is_refused():
    """PyYAML builds a list that holds itself: any walk over it never ends."""
    with pytest.raises(yamlfile.AliasBound, match="an alias inside its own anchor .line 1"):
        yamlfile.load_yaml("&a [1, *a]")


def test_a_key_given_twice_is_refused_naming_both_lines():
    with pytest.raises(yamlfile.DuplicateKey, match="key 'value' is given twice, on line 1 "
                                                    "and on line 3"):
        yamlfile.load_yaml("value: 45.0\nunit: GB/s\nvalue: 4500.0\n")


def test_a_file_is_read_bounded_and_refused_in_one_line(tmp_path):
    path = tmp_path / "doc.yaml"
    path.write_text("a: 1\n" + "# padding\n" * 20)
    with pytest.raises(TooLarge, match=r"holds 205 bytes .*: at most 100 bytes"):
        yamlfile.read_file(path, "a test's document", most=100)
    assert yamlfile.read_file(path, "a test's document", most=205) == {"a": 1}
    path.write_text("a: [1, 2\n")
    with pytest.raises(InputError, match=r"doc.yaml: malformed YAML: .*\(line 2, column 1\)$"):
        yamlfile.read_file(path, "a test's document", most=100)
    link = tmp_path / "link.yaml"
    link.symlink_to(path)
    with pytest.raises(NotOurs, match="is a symbolic link"):
        yamlfile.read_file(link, "a test's document", most=100)


def test_a_yaml_error_is_one_line():
    with pytest.raises(yaml.YAMLError) as info:
        yamlfile.load_yaml("a: 1\n  b: [\n")
    assert "\n" not in yamlfile.yaml_problem(info.value)
