"""The rule of the glued-values snapshot (``iolab.report.book.compare_glue``), without a book.

tests/test_book.py compares the built book's glued values with tests/fixtures/glued_values.json
by this rule: every value of a page the snapshot names must be as committed; a page it does
not name (a new experiment's chapter) is reported, not failed.
"""

from __future__ import annotations

import copy
import json
import re

from iolab.paths import REPO_ROOT
from iolab.report.book import compare_glue

SNAPSHOT = json.loads((REPO_ROOT / "tests" / "fixtures" / "glued_values.json").read_text())
PAGE = "experiments/smt_thp.ipynb"


def test_the_committed_values_compare_equal():
    assert compare_glue(SNAPSHOT, copy.deepcopy(SNAPSHOT)) == ([], [])


def test_a_new_experiments_chapter_is_reported_not_failed():
    now = {**copy.deepcopy(SNAPSHOT),
           "experiments/disk_probe.ipynb": {"n_runs": "'8'", "saturation_bs": "'16384'"}}
    assert compare_glue(SNAPSHOT, now) == ([], ["experiments/disk_probe.ipynb (2 values)"])


def test_a_committed_value_that_changes_fails():
    now = copy.deepcopy(SNAPSHOT)
    key = sorted(now[PAGE])[0]
    now[PAGE][key] = "'something else'"
    differ, _ = compare_glue(SNAPSHOT, now)
    assert differ == [f"{PAGE} {key}: {SNAPSHOT[PAGE][key]!r} -> \"'something else'\""]


def test_a_value_gone_or_new_on_a_committed_page_fails():
    now = copy.deepcopy(SNAPSHOT)
    key = sorted(now[PAGE])[0]
    del now[PAGE][key]
    now[PAGE]["a_new_key"] = "'1'"
    differ, _ = compare_glue(SNAPSHOT, now)
    assert differ == [f"{PAGE} a_new_key: None -> \"'1'\"",
                      f"{PAGE} {key}: {SNAPSHOT[PAGE][key]!r} -> None"]


def test_a_committed_page_that_is_gone_fails():
    now = {page: values for page, values in SNAPSHOT.items() if page != PAGE}
    differ, _ = compare_glue(SNAPSHOT, now)
    assert len(differ) == len(SNAPSHOT[PAGE]) and all(d.endswith("-> None") for d in differ)


def test_no_glued_text_is_empty():
    """An empty glued text is an empty element in the built page, which the browser test
    reports as unfilled glue: a sentence that has nothing to say here glues its alternative."""
    empty = [f"{page} {key}" for page, values in SNAPSHOT.items()
             for key, value in values.items() if value in ("''", '""')]
    assert not empty, empty


def test_no_page_quotes_n_a():
    """A value that cannot be computed on an environment's page (a grid it did not measure,
    a sweep of one point) says why in words; "n/a" in a sentence tells the reader nothing."""
    quoted = [f"{page} {key}" for page, values in SNAPSHOT.items()
              for key, value in values.items() if re.search(r"(?<![\w/])n/a(?![\w/])", value)]
    assert not quoted, quoted
