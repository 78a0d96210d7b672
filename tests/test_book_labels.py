"""The "one quantity, one value" check of the built book (tests/book_labels.py) on small
pages with a contradiction planted, and without one."""

from __future__ import annotations

from book_labels import contradictions


def glued(value: str) -> str:
    return f'<span class="pasted-text">{value}</span>'


def test_a_quantity_shown_with_two_values_on_one_page_is_found():
    page = (f"<p>The device capacity is {glued('1,234')} IOPS here.</p>"
            f"<p>Later: the device capacity is {glued('987')} IOPS.</p>")
    assert contradictions(page) == ["'capacity is … iops' is shown as 1,234 and as 987"]


def test_the_same_value_twice_and_two_quantities_are_no_contradiction():
    page = (f"<p>The device capacity is {glued('1,234')} IOPS. The device capacity is "
            f"{glued('1,234')} IOPS again; the roofline is {glued('19,744')} IOPS.</p>")
    assert contradictions(page) == []


def test_coordinates_and_counts_named_after_the_number_are_not_quantities():
    page = (f"<p>IOPS at concurrency {glued('16')} and at concurrency {glued('64')}; "
            f"{glued('11')} of the {glued('34')} points, {glued('0')} of the {glued('12')} "
            "effects.</p>")
    assert contradictions(page) == []


def test_the_word_after_the_number_tells_two_quantities_apart():
    page = f"<p>Its median is {glued('40')} µs and its median is {glued('3')} runs.</p>"
    assert contradictions(page) == []
    page = f"<p>Its median is {glued('40')} µs and its median is {glued('41')} µs.</p>"
    assert contradictions(page) == ["'median is … µs' is shown as 40 and as 41"]


def test_a_label_does_not_reach_across_a_sentence_or_another_number():
    page = (f"<p>The cap is {glued('10')} GB/s. Then {glued('12')} GB/s. "
            f"The cap is {glued('10')} GB/s and {glued('12')} GB/s.</p>")
    assert contradictions(page) == []
