"""The reference registry (data/reference/registry.yaml): every value is where it says it is
kept, a claim set against a reference of another kind is not comparable and says why, and a
claims file that names a reference without saying what its finding measures is refused."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest
import yaml

from iolab.analysis import findings as fd
from iolab.errors import InputError
from iolab.paths import REPO_ROOT
from iolab.report import claims as cl
from iolab.report import reference

from conftest import alias_bomb

DATA = REPO_ROOT / "data"


def test_every_registered_value_is_kept_where_the_registry_says():
    entries = reference.registry(DATA)
    assert {"aisio_p2p_bidirectional", "aisio_p2p_write", "aisio_line_rate",
            "aisio_total_rx_4k", "aisio_payload_4k"} <= set(entries)
    for entry in entries.values():
        assert reference.stored_value(DATA, entry) == pytest.approx(entry.value), entry.id


def test_like_with_like_compares_quantity_direction_and_path():
    p2p = reference.registry(DATA)["aisio_p2p_bidirectional"]
    assert reference.like({"quantity": "payload", "direction": "both ways",
                           "path": "GPU to GPU"}, p2p) == ""
    assert reference.like({"quantity": "payload", "direction": "one way",
                           "path": "host and GPU"}, p2p) == (
        "direction: one way here, both ways in the reference; path: host and GPU here, "
        "GPU to GPU in the reference")


def _claim(**extra):
    return cl.Claim("c", "1", "x", "f", "increase", **extra)


def test_a_claim_against_a_reference_of_another_kind_is_not_comparable():
    refs = reference.registry(DATA)
    found = fd.ratio("f", "x", [2.0, 2.1, 2.2], [1.0, 1.1, 1.0])
    unlike = _claim(reference="aisio_p2p_bidirectional",
                    measured=(("quantity", "payload"), ("direction", "one way"),
                              ("path", "host and GPU")))
    said, why = cl.verdict(unlike, found, refs)
    assert said == cl.NOT_COMPARABLE and "both ways in the reference" in why
    alike = _claim(reference="aisio_p2p_bidirectional",
                   measured=(("quantity", "payload"), ("direction", "both ways"),
                             ("path", "GPU to GPU")))
    assert cl.verdict(alike, found, refs)[0] == cl.SUPPORTED
    # not comparable claims are no part of the family the chapter judges
    claims = cl.Claims("s", (unlike,), "t")
    assert cl.family_size(claims, [found], refs) == 1
    with pytest.raises(KeyError, match="does not list"):
        cl.verdict(_claim(reference="nowhere", measured=unlike.measured), found, refs)


@pytest.mark.parametrize("extra, key", [
    ("    measured: {quantity: payload, direction: one way, path: GPU to GPU}\n",
     "claims[0].measured"),
    ("    reference: aisio_p2p_write\n", "claims[0].measured"),
    ("    reference: aisio_p2p_write\n    measured: {quantity: payload}\n", "claims[0].measured"),
])
def test_a_reference_needs_what_the_finding_measures(tmp_path, extra, key):
    path = tmp_path / "claims.yaml"
    path.write_text("source: s\ntext: t\nclaims:\n  - id: a\n    section: '1'\n    quote: q\n"
                    "    conditions: c\n    claim: x\n    finding: f\n    expect: increase\n"
                    + extra)
    with pytest.raises(InputError) as info:
        cl.load(path)
    assert info.value.key == key


@pytest.fixture
def folder(tmp_path):
    """A copy of the committed reference folder, in a data folder of its own."""
    shutil.copytree(DATA / "reference", tmp_path / "reference")
    return tmp_path / "reference"


def _planted(path, kind, victim):
    """A FIFO at ``path``, or a link there to a device or to ``victim`` (a good copy). The
    device is /dev/null, not /dev/zero: a link followed would read /dev/zero until memory ran
    out (the probe's case), and a test that failed so would take the machine with it."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/null" if kind == "link to a device" else victim)


@pytest.mark.parametrize("kind", ["fifo", "link to a device", "link to a good copy"])
@pytest.mark.parametrize("which", ["registry", "a reference's YAML", "a reference's table"])
def test_a_reference_file_that_is_not_a_regular_file_is_refused_in_one_line(folder, kind,
                                                                          which):
    """Never followed, never a read that blocks (a FIFO) or runs out of memory (a link to
    /dev/zero)."""
    from test_not_ours import ends

    from iolab.safefiles import NotOurs

    path = folder / {"registry": reference.REGISTRY, "a reference's YAML": "aisio_cpu_search.yaml",
                     "a reference's table": "aisio_cpu_search.csv"}[which]
    victim = folder.parent / "good-copy"
    shutil.copy(path, victim)
    _planted(path, kind, victim)
    read = (lambda: reference.registry(folder.parent)) if which == "registry" else \
        (lambda: reference.load(folder.parent, "aisio_cpu_search"))
    error = ends(read, path if kind == "fifo" else None).get("error")
    assert isinstance(error, NotOurs), error
    assert str(error).startswith(f"{path}: is ") and "never followed, opened" in str(error)
    assert "\n" not in str(error)


@pytest.mark.parametrize("name", ["/etc/passwd", "../reference/aisio_cpu_search.csv",
                                  "..", "sub/aisio_cpu_search.csv", "", 3])
def test_a_reference_table_outside_the_reference_folder_is_refused(folder, name):
    """``table: /etc/shadow`` was loaded into a chapter as a 27-row table."""
    path = folder / "aisio_cpu_search.yaml"
    meta = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**meta, "table": name}))
    with pytest.raises(InputError) as info:
        reference.load(folder.parent, "aisio_cpu_search")
    assert info.value.key == "table" and info.value.path == str(path)
    assert "a file beside it in the same folder" in str(info.value)


def test_a_registry_location_outside_the_reference_folder_is_refused(folder):
    entry = reference.registry(folder.parent)["aisio_p2p_bidirectional"]
    for location in ("/etc/passwd#x", "../reference/aisio_pcie_saturation.yaml#p2p_bidir_gbs"):
        planted = dataclasses.replace(entry, location=location)
        with pytest.raises(InputError, match="key 'values.aisio_p2p_bidirectional.location'"):
            reference.stored_value(folder.parent, planted)


@pytest.mark.parametrize("value", ["fast", "true", ".nan", "[1]", "1e999"])
def test_a_registry_value_that_is_not_a_number_names_its_key(folder, value):
    path = folder / reference.REGISTRY
    doc = yaml.safe_load(path.read_text())
    text = path.read_text().replace(f"value: {doc['values']['aisio_p2p_write']['value']}",
                                    f"value: {value}", 1)
    assert text != path.read_text()
    path.write_text(text)
    with pytest.raises(InputError) as info:
        reference.registry(folder.parent)
    assert info.value.key == "values.aisio_p2p_write.value" and info.value.path == str(path)
    assert "is not a number (allowed: a finite number" in str(info.value)


@pytest.mark.parametrize("text", ["'٥٦.١٣٥'", "'56_135'", "' 56.135 '", "'５６.１３５'"],
                         ids=["arabic-indic digits", "underscore", "blanks", "fullwidth digits"])
def test_a_value_written_as_text_is_read_only_in_ascii_decimals(folder, text):
    """Probe 12's RF1: a registry value (and the value it is kept at) given as the text
    '٥٦.١٣٥' was taken as 56.135 by both, silently, as '1_000' and ' 45 ' were."""
    registry, kept = folder / reference.REGISTRY, folder / "aisio_pcie_saturation.yaml"
    entry = reference.registry(folder.parent)["aisio_p2p_bidirectional"]
    assert reference.stored_value(folder.parent, entry) == entry.value == 56.135
    for path, old in ((kept, "p2p_bidir_gbs: 56.135"), (registry, "value: 56.135")):
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, old.replace("56.135", text), 1))
    with pytest.raises(InputError) as info:
        reference.stored_value(folder.parent, entry)
    assert info.value.key == "p2p_bidir_gbs" and "is not a number" in str(info.value)
    with pytest.raises(InputError) as info:
        reference.registry(folder.parent)
    assert info.value.key == "values.aisio_p2p_bidirectional.value"
    assert "is not a number (allowed: a finite number" in str(info.value)


def test_a_value_written_as_ascii_text_is_still_read(folder):
    path = folder / reference.REGISTRY
    path.write_text(path.read_text().replace("value: 56.135", "value: '56.135'", 1))
    assert reference.registry(folder.parent)["aisio_p2p_bidirectional"].value == 56.135


def test_a_link_to_nowhere_at_the_registry_is_refused_not_taken_for_none(folder):
    """A chapter asks for the registry "where there is one": a link to nowhere read as no
    registry, and every claim set against a reference quietly became not comparable."""
    from iolab.safefiles import NotOurs

    path = folder / reference.REGISTRY
    path.unlink()
    assert reference.registry(folder.parent, missing_ok=True) == {}
    path.symlink_to(folder / "gone.yaml")
    with pytest.raises(NotOurs, match="is a symbolic link"):
        reference.registry(folder.parent, missing_ok=True)


@pytest.mark.parametrize("location, problem", [
    ("aisio_pcie_saturation.yaml#no_such_key", "has no key 'no_such_key'"),
    ("aisio_pcie_saturation.yaml#p2p_bidir_gbs.deeper", "has no key 'p2p_bidir_gbs.deeper'"),
    ("aisio_cpu_search.csv#no_column@x=1", "has no column 'no_column'"),
])
def test_a_registry_location_that_names_no_value_says_so(folder, location, problem):
    """A location that names no key, column or row was a bare KeyError or IndexError."""
    entry = reference.registry(folder.parent)["aisio_p2p_bidirectional"]
    planted = dataclasses.replace(entry, location=location)
    with pytest.raises(InputError) as info:
        reference.stored_value(folder.parent, planted)
    assert info.value.key == "values.aisio_p2p_bidirectional.location"
    assert problem in str(info.value) and "allowed: file.yaml#key.subkey" in str(info.value)


def test_a_registry_location_whose_row_is_not_one_says_how_many(folder):
    table = (folder / "aisio_cpu_search.csv").read_text().splitlines()
    column = table[0].split(",")[0]
    entry = reference.registry(folder.parent)["aisio_p2p_bidirectional"]
    planted = dataclasses.replace(entry, location=f"aisio_cpu_search.csv#{column}@{column}=none")
    with pytest.raises(InputError, match="has 0 rows whose .* is 'none', not one"):
        reference.stored_value(folder.parent, planted)


ENTRY = ("    value: 45.0\n    unit: GB/s\n    quantity: payload\n    direction: one way\n"
         "    path: the link\n    source: s\n    location: a.yaml#k\n")


def _registry(tmp_path, text: str):
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / reference.REGISTRY).write_text(text)
    with pytest.raises(InputError) as info:
        reference.registry(tmp_path)
    return info.value


def test_a_registry_whose_aliases_stand_for_a_billion_values_is_refused_in_one_line(tmp_path):
    """Probe 7, B4: a 625-byte registry whose unit was a "billion laughs" took 1.2 GB and
    32 s before a MemoryError (str() of the expanded value); yaml.safe_load bounded nothing."""
    err = _registry(tmp_path, "values:\n  v1:\n" + ENTRY.replace("GB/s", alias_bomb(6)))
    assert err.path.endswith("reference/registry.yaml") and "\n" not in str(err)
    assert "malformed YAML: its aliases repeat 1,234,550 values" in str(err)


def test_a_registry_entry_of_another_shape_is_refused_naming_its_key(tmp_path):
    """A list where the registry holds text was taken as its str(), whatever its size."""
    err = _registry(tmp_path, "values:\n  v1:\n" + ENTRY.replace("GB/s", "[GB, s]"))
    assert err.key == "values.v1.unit" and "['GB', 's'] is not text" in str(err)


def test_a_reference_value_given_twice_is_refused_naming_both_lines(tmp_path):
    """Probe 7, B5: yaml.safe_load kept the later 'value' silently (4500.0 for 45.0); the
    registry is read as params files are."""
    err = _registry(tmp_path, "values:\n  v1:\n" + ENTRY + "    value: 4500.0\n")
    assert str(err) == (f"{tmp_path}/reference/registry.yaml: malformed YAML: key 'value' is "
                        "given twice, on line 3 and on line 10: keep one")


def test_a_claims_file_whose_aliases_stand_for_a_billion_values_is_refused(tmp_path):
    """claims.yaml, like every YAML iolab reads, bounds its aliases."""
    path = tmp_path / "claims.yaml"
    path.write_text("source: s\ntext: t\nclaims: " + alias_bomb(6) + "\n")
    with pytest.raises(InputError, match="claims.yaml: malformed YAML: its aliases repeat"):
        cl.load(path)
