"""The published points a GPU chapter quotes (``iolab.shared.quoted``): read from the
reference's ``quoted:`` and ``compared:``, checked against its table, never named in a page."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from iolab.errors import InputError
from iolab.report.reference import Reference
from iolab.shared import quoted

TABLE = pd.DataFrame({"kind": ["payload_gbs", "payload_gbs", "min_qdepth"],
                      "iosize": [512, 65536, 512], "qdepth": [128, 1, 128],
                      "value": [21.6, 41.7, None]})


def ref(**meta) -> Reference:
    return Reference({"table": "t.csv", **meta}, TABLE, Path("/refs/t.yaml"))


def test_each_quoted_point_comes_from_its_row_of_the_table():
    r = ref(quoted={"small": {"iosize": 512, "qdepth": 128},
                    "large": {"qdepth": 1, "iosize": 65536}}, compared="large")
    points = quoted.points(r, "payload_gbs", ("iosize", "qdepth"))
    assert list(points) == ["small", "large"]
    assert points["small"].value == 21.6 and points["large"].at == {"iosize": 65536, "qdepth": 1}
    assert quoted.named(r, "compared", points) is points["large"]
    assert quoted.value_at(r, "payload_gbs", {"iosize": 65536, "qdepth": 1}) == 41.7
    assert quoted.value_at(r, "payload_gbs", {"iosize": 4096, "qdepth": 1}) is None


@pytest.mark.parametrize("at, said", [
    ({"iosize": 1024, "qdepth": 128}, "names 0 rows of kind payload_gbs"),
    ({"iosize": 512}, "is {'iosize': 512}"),
    ({"iosize": 512, "qdepth": True}, "is {'iosize': 512, 'qdepth': True}"),
    ([512, 128], "is [512, 128]"),
])
def test_a_quoted_point_the_table_lacks_names_the_file_and_the_key(at, said):
    with pytest.raises(InputError) as err:
        quoted.points(ref(quoted={"p": at}), "payload_gbs", ("iosize", "qdepth"))
    assert err.value.path == "/refs/t.yaml" and err.value.key == "quoted.p"
    assert said in str(err.value)


def test_a_role_naming_no_quoted_point_is_refused():
    r = ref(quoted={"small": {"iosize": 512, "qdepth": 128}}, compared="big")
    points = quoted.points(r, "payload_gbs", ("iosize", "qdepth"))
    with pytest.raises(InputError, match="key 'compared'.*allowed: one of the names under "
                                         "'quoted': small"):
        quoted.named(r, "compared", points)
    with pytest.raises(InputError, match="key 'quoted'"):
        quoted.points(ref(quoted=["small"]), "payload_gbs", ("iosize", "qdepth"))
