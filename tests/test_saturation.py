"""The saturation criterion on constructed curves."""

from __future__ import annotations

import pandas as pd
import pytest

from iolab.analysis.saturation import describe, saturation_points
from iolab.errors import InputError


def curve(size, means, depths=(1, 2, 4, 8, 16, 32, 64, 128)):
    return pd.DataFrame({"iosize": size, "qdepth": list(depths), "mean": means})


def test_smallest_load_within_the_tolerance_of_the_plateau():
    summary = pd.concat([
        curve(4096, [5, 10, 20, 40, 43, 44, 45, 45]),     # within 5 % of 45 from qdepth 16
        curve(512, [1, 2, 4, 8, 12, 16, 19, 21.6]),       # still rising at the largest depth
        curve(65536, [41.7, 45, 45, 44.9, 45, 45, 45, 45]),
    ])
    sat = saturation_points(summary, ["iosize"], "qdepth", 0.05).set_index("iosize")
    assert sat.loc[4096, "saturation_load"] == 16 and sat.loc[4096, "reached"]
    assert sat.loc[4096, "plateau"] == 45
    assert sat.loc[512, "saturation_load"] == 128 and not sat.loc[512, "reached"]
    assert sat.loc[65536, "saturation_load"] == 2
    assert describe(sat.loc[4096]) == "16"
    assert describe(sat.loc[512]) == "> 128 (not reached)"


def test_the_tolerance_moves_the_point():
    summary = curve(4096, [5, 10, 20, 40, 43, 44, 45, 45])
    assert saturation_points(summary, ["iosize"], "qdepth", 0.01).iloc[0]["saturation_load"] == 64
    assert saturation_points(summary, ["iosize"], "qdepth", 0.2).iloc[0]["saturation_load"] == 8


def test_unsorted_rows_and_missing_means():
    summary = curve(4096, [45, 44, 40, None, 20, 10, 5, 45], depths=(64, 32, 8, 16, 4, 2, 1, 128))
    sat = saturation_points(summary, ["iosize"], "qdepth", 0.05).iloc[0]
    assert sat["saturation_load"] == 32 and sat["points"] == 7


@pytest.mark.parametrize("tolerance", [0, 1, -0.1, 5])
def test_tolerance_must_be_a_fraction(tolerance):
    with pytest.raises(InputError, match="saturation_tolerance"):
        saturation_points(curve(512, [1] * 8), ["iosize"], "qdepth", tolerance)


def test_unknown_column_is_named():
    with pytest.raises(InputError, match="nqueues"):
        saturation_points(curve(512, [1] * 8), ["nqueues"], "qdepth", 0.05)
