"""The rule of the glued-values snapshot (:func:`compare_glue`, kept here: only the suite
compares a book with the snapshot), without a book.

tests/test_book.py compares the built book's glued values with tests/fixtures/glued_values.json
by this rule: every value of a page the snapshot names must be as committed; a page it does
not name (a new experiment's chapter) is reported, not failed.
"""

from __future__ import annotations

import copy
import json
import re

from iolab.paths import REPO_ROOT

SNAPSHOT = json.loads((REPO_ROOT / "tests" / "fixtures" / "glued_values.json").read_text())
PAGE = "experiments/smt_thp.ipynb"


def compare_glue(snapshot: dict[str, dict[str, str]],
                 now: dict[str, dict[str, str]]) -> tuple[list[str], list[str]]:
    """What differs from a snapshot of glued values, and the pages it does not cover.

    The snapshot covers the pages it names: any value of one of them that changed, appeared
    or is gone (a whole page gone included) differs. A page it does not name, a new
    experiment's chapter or a new environment's page, has no committed values to differ
    from: it is listed apart until the snapshot is renewed to take it in.
    """
    differ = []
    for page, values in snapshot.items():
        current = now.get(page, {})
        differ += [f"{page} {key}: {values.get(key)!r} -> {current.get(key)!r}"
                   for key in sorted(set(values) | set(current))
                   if values.get(key) != current.get(key)]
    uncovered = [f"{page} ({len(values)} values)" for page, values in sorted(now.items())
                 if page not in snapshot]
    return differ, uncovered


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
