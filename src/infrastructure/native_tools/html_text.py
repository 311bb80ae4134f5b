"""Readable text from an HTML page with the standard library's parser: what a reader sees, without
scripts, styles, navigation and other chrome; headings, paragraphs, list items and preformatted
blocks keep their shape (headings as `#` lines, list items as `- ` lines)."""

import re
from dataclasses import dataclass
from html.parser import HTMLParser

_SKIPPED = frozenset(
    {
        "script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object",
        "embed", "nav", "footer", "button", "select", "textarea", "dialog",
    }
)  # fmt: skip
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)
_PARAGRAPHS = frozenset(
    {
        "p", "blockquote", "pre", "table", "dl", "section", "article", "main", "header",
        "aside", "figure", "details", "address", "fieldset", "hr",
    }
)  # fmt: skip
_LINES = frozenset({"div", "li", "tr", "dt", "dd", "figcaption", "summary", "caption", "br", "legend"})
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_LISTS = frozenset({"ul", "ol"})
_CELLS = frozenset({"td", "th"})
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, kw_only=True)
class ReadableText:
    title: str | None
    text: str


def html_to_text(markup: str) -> ReadableText:
    parser = _ReadableTextParser()
    parser.feed(markup)
    parser.close()
    return ReadableText(title=parser.title, text=parser.writer.result())


class _Writer:
    """Collects inline text with collapsed spaces and at most one blank line between blocks."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._breaks = 0
        self._line_start = True
        self._space = False
        self._prefix = ""

    def block(self, newlines: int, prefix: str = "") -> None:
        self._breaks = max(self._breaks, newlines)
        self._line_start = True
        self._prefix = prefix

    def inline(self, data: str) -> None:
        collapsed = _SPACES.sub(" ", data)
        if collapsed.startswith(" "):
            self._space = True
        if collapsed.strip():
            self._emit(collapsed.strip())
            self._space = collapsed.endswith(" ")

    def verbatim(self, data: str) -> None:
        if data:
            self._emit(data)

    def cell(self) -> None:
        if not self._line_start:
            self._parts.append(" |")
            self._space = True

    def _emit(self, text: str) -> None:
        if self._line_start:
            if self._parts:
                self._parts.append("\n" * self._breaks)
            self._parts.append(self._prefix)
            self._breaks, self._line_start, self._prefix = 0, False, ""
        elif self._space:
            self._parts.append(" ")
        self._parts.append(text)
        self._space = False

    def result(self) -> str:
        return "\n".join(line.rstrip() for line in "".join(self._parts).split("\n")).strip()


class _ReadableTextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.writer = _Writer()
        self.title: str | None = None
        self._title_parts: list[str] | None = None
        self._skip_tag: str | None = None
        self._skip_depth = 0
        self._pre = 0
        self._lists = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip_tag is not None:
            self._skip_depth += tag == self._skip_tag
            return
        if tag not in _VOID and (tag in _SKIPPED or any(name == "hidden" for name, _ in attrs)):
            self._skip_tag, self._skip_depth = tag, 1
            return
        if tag == "title" and self.title is None:
            self._title_parts = []
        elif tag in _HEADINGS:
            self.writer.block(2, "#" * _HEADINGS[tag] + " ")
        elif tag == "li":
            self.writer.block(1, "  " * max(self._lists - 1, 0) + "- ")
        elif tag in _CELLS:
            self.writer.cell()
        elif tag in _LISTS:
            self.writer.block(1 if self._lists else 2)
        elif tag in _PARAGRAPHS:
            self.writer.block(2)
        elif tag in _LINES:
            self.writer.block(1)
        self._pre += tag == "pre"
        self._lists += tag in _LISTS

    def handle_endtag(self, tag: str) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag:
                self._skip_depth -= 1
                if self._skip_depth == 0:
                    self._skip_tag = None
            return
        if tag == "title" and self._title_parts is not None:
            self.title = _SPACES.sub(" ", "".join(self._title_parts)).strip() or None
            self._title_parts = None
        elif tag in _HEADINGS or tag in _PARAGRAPHS:
            self.writer.block(2)
        elif tag in _LISTS:
            self.writer.block(1 if self._lists > 1 else 2)
        elif tag in _LINES:
            self.writer.block(1)
        if tag == "pre" and self._pre:
            self._pre -= 1
        if tag in _LISTS and self._lists:
            self._lists -= 1

    def handle_data(self, data: str) -> None:
        if self._skip_tag is not None:
            return
        if self._title_parts is not None:
            self._title_parts.append(data)
        elif self._pre:
            self.writer.verbatim(data)
        else:
            self.writer.inline(data)
