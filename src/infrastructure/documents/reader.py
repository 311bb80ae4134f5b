"""Reads uploaded files into source content: plain text, Markdown, CSV (a table), HTML (its readable
text, headings kept as `#` lines) and PDF (text per page, with pypdf)."""

import asyncio
import csv
import io
import logging
from collections.abc import Callable

from application.errors import UnreadableSource, UnsupportedSourceType
from application.ports.documents import Document
from domain.errors import InvalidValue
from domain.sources import PAGE_BREAK, PDF_MIME_TYPE, table_from_rows
from infrastructure.native_tools.html_text import html_to_text

logger = logging.getLogger(__name__)

TEXT, MARKDOWN, CSV, HTML = "text/plain", "text/markdown", "text/csv", "text/html"
_BY_EXTENSION = {
    "txt": TEXT,
    "text": TEXT,
    "md": MARKDOWN,
    "markdown": MARKDOWN,
    "csv": CSV,
    "html": HTML,
    "htm": HTML,
    "pdf": PDF_MIME_TYPE,
}
_ALIASES = {
    "text/x-markdown": MARKDOWN,
    "application/csv": CSV,
    "text/comma-separated-values": CSV,
    "application/xhtml+xml": HTML,
    "application/x-pdf": PDF_MIME_TYPE,
}
_UNSPECIFIC = frozenset({"", "application/octet-stream", "binary/octet-stream"})
SUPPORTED = "plain text, Markdown, CSV, HTML and PDF"


def kind_of(name: str, mime_type: str | None, content: bytes) -> str:
    """The file's type: its declared type when that is specific, else its name's extension, else its
    first bytes."""
    declared = (mime_type or "").split(";")[0].strip().lower()
    declared = _ALIASES.get(declared, declared)
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if declared in _UNSPECIFIC or (declared == TEXT and extension in ("md", "markdown", "csv")):
        declared = _BY_EXTENSION.get(extension, "")
    if not declared:
        if content.startswith(b"%PDF-"):
            return PDF_MIME_TYPE
        raise UnsupportedSourceType(f"cannot tell what kind of file {name!r} is; sources read {SUPPORTED}")
    if declared not in (TEXT, MARKDOWN, CSV, HTML, PDF_MIME_TYPE):
        raise UnsupportedSourceType(f"{name!r} is {declared}; sources read {SUPPORTED}")
    return declared


class FileDocumentReader:
    async def read(self, name: str, mime_type: str | None, content: bytes) -> Document:
        kind = kind_of(name, mime_type, content)
        read: Callable[[bytes], Document] = {
            TEXT: _plain,
            MARKDOWN: _markdown,
            CSV: _table,
            HTML: _html,
            PDF_MIME_TYPE: _pdf,
        }[kind]
        return await asyncio.to_thread(read, content)  # PDFs and large pages take CPU time


def _decoded(content: bytes) -> str:
    if b"\x00" in content[:8192]:
        raise UnreadableSource("the file is binary, not text")
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UnreadableSource(f"the file is not UTF-8 text (byte {error.start})") from None


def _non_empty(text: str) -> str:
    if not text.strip():
        raise UnreadableSource("the file holds no text")
    return text


def _plain(content: bytes) -> Document:
    return Document(mime_type=TEXT, text=_non_empty(_decoded(content).replace(PAGE_BREAK, "\n")))


def _markdown(content: bytes) -> Document:
    return Document(mime_type=MARKDOWN, text=_non_empty(_decoded(content).replace(PAGE_BREAK, "\n")))


def _table(content: bytes) -> Document:
    text = _decoded(content)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    try:
        rows = [row for row in csv.reader(io.StringIO(text), dialect) if any(cell.strip() for cell in row)]
        return Document(mime_type=CSV, table=table_from_rows(rows))
    except csv.Error as error:
        raise UnreadableSource(f"the file is not valid CSV: {error}") from None
    except InvalidValue:
        raise UnreadableSource("the CSV file has no rows") from None


def _html(content: bytes) -> Document:
    readable = html_to_text(_decoded(content))
    text = f"# {readable.title}\n\n{readable.text}" if readable.title and readable.text else readable.text
    return Document(mime_type=HTML, text=_non_empty(text.replace(PAGE_BREAK, "\n")))


def _pdf(content: bytes) -> Document:
    """(pypdf is imported by the first PDF read: 7 MB of a server's memory that most never need.)"""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted:
            raise UnreadableSource("the PDF is encrypted")
        pages = [(page.extract_text() or "").replace(PAGE_BREAK, "\n") for page in reader.pages]
    except UnreadableSource:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as error:
        logger.info("unreadable PDF", extra={"error": str(error)})
        raise UnreadableSource(f"the file is not a readable PDF ({type(error).__name__})") from None
    if not any(page.strip() for page in pages):
        raise UnreadableSource("the PDF has no text layer (a scan?); sources hold text")
    return Document(mime_type=PDF_MIME_TYPE, text=PAGE_BREAK.join(pages))
