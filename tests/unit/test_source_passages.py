"""How a source is split into passages: along its headings, paragraphs, pages or table rows."""

from typing import Any
from uuid import uuid4

from domain.ids import ThreadId
from domain.sources import PAGE_BREAK, PASSAGE_CHARS, Source, SourceKind, TableData, passages_of
from tests import builders


def source(**fields: Any) -> Source:
    return builders.source(builders.organization().id, thread_id=ThreadId(uuid4()), **fields)


def test_headings_nest_and_a_passage_never_crosses_one() -> None:
    text = "Intro.\n\n# Guide\n\nTop.\n\n## Setup\n\nStep one.\n\n### Cables\n\nRed wire.\n\n## Care\n\nDust it."
    made = source(text=text, kind=SourceKind.TEXT)
    assert [(p.position, p.heading, p.text) for p in passages_of(made)] == [
        (0, None, "Intro."),
        (1, "Guide", "Top."),
        (2, "Guide > Setup", "Step one."),
        (3, "Guide > Setup > Cables", "Red wire."),
        (4, "Guide > Care", "Dust it."),
    ]


def test_short_paragraphs_are_gathered_and_long_ones_cut_between_sentences() -> None:
    sentence = "The quick brown fox jumps over the lazy dog. "
    text = "a\n\nb\n\n" + sentence * 60
    made = source(text=text, kind=SourceKind.TEXT)
    passages = passages_of(made)
    assert passages[0].text.startswith("a\n\nb\n\nThe quick") and len(passages) > 2
    assert all(len(p.text) <= PASSAGE_CHARS and p.text.endswith("dog.") for p in passages)
    words = " ".join(p.text for p in passages).split()
    assert words[2:] == (sentence * 60).split()


def test_pages_keep_their_numbers() -> None:
    text = PAGE_BREAK.join(["First page.", "", "Third page."])
    made = source(text=text, kind=SourceKind.TEXT, mime_type="application/pdf")
    assert [(p.page, p.location, p.text) for p in passages_of(made)] == [
        (1, "page 1", "First page."),
        (3, "page 3", "Third page."),
    ]


def test_tables_are_split_by_rows_with_their_headers() -> None:
    table = TableData(headers=("sku", "name"), rows=tuple((f"P{n}", f"Item {n}" if n != 3 else "") for n in range(25)))
    made = source(data=table, text=None, kind=SourceKind.DATA)
    passages = passages_of(made)
    assert [(p.row, p.location) for p in passages] == [(1, "row 1"), (11, "row 11"), (21, "row 21")]
    assert passages[0].text.splitlines()[:4] == [
        "sku: P0; name: Item 0",
        "sku: P1; name: Item 1",
        "sku: P2; name: Item 2",
        "sku: P3",
    ]


def test_a_blob_has_no_passages() -> None:
    made = source(kind=SourceKind.BLOB, text=None, blob=b"\x00")
    assert passages_of(made) == []
