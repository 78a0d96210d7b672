"""The reference registry (data/reference/registry.yaml): every value is where it says it is
kept, a claim set against a reference of another kind is not comparable and says why, and a
claims file that names a reference without saying what its finding measures is refused."""

from __future__ import annotations

import pytest

from iolab.analysis import findings as fd
from iolab.errors import InputError
from iolab.paths import REPO_ROOT
from iolab.report import claims as cl
from iolab.report import reference

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
