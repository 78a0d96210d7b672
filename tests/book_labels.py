"""Find a quantity that one built page states with two values: the check behind
tests/test_book.py's "one quantity, one value" test (issue 39), kept apart so that
tests/test_book_labels.py can plant contradictions in small pages and see them found.

A glued number's *label* is the last :data:`LABEL_WORDS` words of its sentence before it,
with the first word after it (its unit or noun): "the device capacity is 1,234 IOPS" has the
label ("capacity is", "iops"). One label carrying two values on one page (a page is one
environment's chapter or page) is a contradiction. A number whose label ends in a relation
("at", "of the"... see :data:`RELATIONS`) is a coordinate or a count of something named after
it ("at concurrency 16", "11 of the 34 points"), not a quantity, and is not compared.

Not a test module (no ``test_`` prefix): pytest does not collect it.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict

LABEL_WORDS = 2
RELATIONS = frozenset(
    "at for from to than between and or with by over under in on vs against per after before "
    "within across into as of".split())
PASTED = re.compile(r'(<span class="pasted-text">.*?</span>)', re.S)
NUMBER = re.compile(r"[-+−]?[\d.,]+\s*[A-Za-zµ%/]*")
WORD = re.compile(r"[A-Za-z][A-Za-z\-'/]*")
UNIT = re.compile(r"[A-Za-zµ%][A-Za-z\-'/]*")
SENTENCE_END = re.compile(r"[.;:!?()](?:\s|$)")


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def label_values(page: str) -> dict[tuple[str, str], set[str]]:
    """Per label of a glued number on *page* (HTML), the values it is shown with."""
    page = re.sub(r"<script.*?</script>|<style.*?</style>", "", page, flags=re.S)
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    before, pending = "", None
    for part in PASTED.split(page):
        pasted = re.fullmatch(r'<span class="pasted-text">(.*?)</span>', part, re.S)
        if not pasted:
            before = _text(part)
            if pending:
                after = UNIT.match(before.lstrip())
                found[(pending[0], after.group(0).lower() if after else "")].add(pending[1])
                pending = None
            continue
        value = html.unescape(re.sub(r"<[^>]+>", "", pasted.group(1))).strip()
        words = WORD.findall(SENTENCE_END.split(before)[-1])
        before = ""   # the next number's label starts after this one
        last = [w.lower() for w in words[-LABEL_WORDS:]]
        if len(last) == LABEL_WORDS and not RELATIONS & set(last) and NUMBER.fullmatch(value):
            pending = (" ".join(last), value)
    if pending:
        found[(pending[0], "")].add(pending[1])
    return found


def contradictions(page: str) -> list[str]:
    """Each label of *page* shown with more than one value, in words."""
    return [f"'{label} … {unit}' is shown as {' and as '.join(sorted(values))}"
            for (label, unit), values in sorted(label_values(page).items()) if len(values) > 1]
