"""Session 28: `ragmeter review` on inputs a real user meets."""
from __future__ import annotations

import re


def test_the_review_sheet_shows_control_characters_as_escapes_and_keeps_the_ids_it_reads_back() -> None:
    # before: the sheet escaped markup but wrote ESC / BEL / C1 characters of a question, answer, passage or id
    # into the page raw (the report's own rule, ragmeter._text.markup, shows them as \x1b escapes)
    from ragmeter.review.export import KeyPoint
    from ragmeter.review.sheet import render_sheet

    card = {"id": "q\x1b1", "question": "why\x07?", "answer": "<b>no</b>\x9b", "points": [KeyPoint("p\x1b<1>", True)],
            "passages": [{"file": "f\x00.md", "text": "text\x1b[2J"}]}
    page = render_sheet([card], title="run\x1b")
    visible = re.sub(r'data-(id|text)="[^"]*"', "", re.sub(r"<script>.*?</script>", "", page, flags=re.S))
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", visible)
    for shown in ("q\\x1b1", "why\\x07?", "&lt;b&gt;no&lt;/b&gt;\\x9b", "p\\x1b&lt;1&gt;", "f\\x00.md", "text\\x1b[2J",
                  "run\\x1b"):
        assert shown in visible, shown
    # what the sheet's script copies into the CSV is the exact text, so that import finds the id and the point
    assert 'data-id="q\x1b1"' in page and 'data-text="p\x1b&lt;1&gt;"' in page
