"""``parse_document``: pick the parser from the file's content and name, enforce the limits.

Content wins over the name for binary formats: a PDF is a PDF whatever it is called,
and a ".pdf" that is not one is reported as such instead of failing deep in PDFium.
A file of any other name is read as text, so a file of another name that is not text
(an image, an archive) is of a type we do not read.  Every failure, including an unexpected
exception from a parsing library, reaches the caller as ``DocumentError`` naming the file, and
marked ``unsupported`` when the file's type, not its content, is what we cannot read.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from io import BytesIO
from pathlib import PurePath
from typing import Literal

from openqna.formats import zip_limits
from openqna.ingest.markdown import parse_markdown
from openqna.ingest.marked_pairs import split_marked_pairs
from openqna.ingest.parsed import MAX_OTHER_BYTES, MAX_PDF_BYTES, DocumentError, ParsedDocument
from openqna.ingest.pdf import parse_pdf
from openqna.ingest.plaintext import parse_text
from openqna.ingest.textcodec import bom_encoding
from openqna.ingest.webpage import parse_html
from openqna.ingest.word import parse_docx

DocumentKind = Literal["pdf", "docx", "html", "markdown", "text"]

# What a .docx may unpack to, and the XML elements it may hold: python-docx reads whole parts into memory and builds
# every element, so a small "zip bomb" upload (or 8 million empty paragraphs in 62 KB) would otherwise take the
# server down.  Tags are counted as ``<`` bytes (an element with content has two): real Word files hold about 28 a
# paragraph, so a 300-page manual a few hundred thousand.  The costliest file under the limit found so far, 100,000
# one-letter paragraphs (each read in full), takes about 170 MB and 17 s of CPU here (bench/bombs.py); at 1,000,000
# tags it took 26 s, too close to the 30 s any accepted upload may cost.
MAX_UNPACKED_BYTES = 200 * 1024 * 1024
MAX_XML_TAGS = 750_000

_BY_SUFFIX: dict[str, DocumentKind] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
}
_UNSUPPORTED = {
    ".doc": "legacy Word .doc files are not supported; save it as .docx",
    ".rtf": "RTF files are not supported; save it as .docx",
    ".pptx": "PowerPoint files are not supported; save it as PDF",
    ".xlsx": "spreadsheets are QnA files, not documents; import them as a knowledge base",
    ".tsv": "TSV files are QnA files, not documents; import them as a knowledge base",
}
_LABELS: dict[DocumentKind, str] = {
    "pdf": "a PDF",
    "docx": "a Word document",
    "html": "an HTML page",
    "markdown": "a Markdown file",
    "text": "a text file",
}
_PARSERS: dict[DocumentKind, Callable[[str, bytes], ParsedDocument]] = {
    "pdf": parse_pdf,
    "docx": parse_docx,
    "html": parse_html,
    "markdown": parse_markdown,
    "text": parse_text,
}
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # legacy Office, and encrypted .docx
SUPPORTED_TYPES = f"the supported types are {', '.join(_BY_SUFFIX)}, and UTF-8 text under any other name"


def parse_document(name: str, data: bytes, *, max_bytes: int | None = None) -> ParsedDocument:
    """Parse an uploaded document.  ``max_bytes`` defaults to 25 MB for PDFs, 10 MB otherwise."""
    kind = _detect_kind(name, data)
    limit = max_bytes if max_bytes is not None else (MAX_PDF_BYTES if kind == "pdf" else MAX_OTHER_BYTES)
    if len(data) > limit:
        raise DocumentError(name, f"is {len(data):,} bytes; the limit for {_LABELS[kind]} is {limit:,} bytes")
    try:
        if kind == "docx":
            _check_unpacked_size(name, data)
        document = split_marked_pairs(_PARSERS[kind](name, data))
    except DocumentError:
        if kind == "text" and PurePath(name).suffix.lower() not in _BY_SUFFIX:  # read as text for want of a type
            raise _unsupported(name, "is not UTF-8 text, a PDF or a Word document") from None
        raise
    except Exception as err:  # a library's own exception must not reach API callers raw
        raise DocumentError(name, f"could not be read as {_LABELS[kind]} ({type(err).__name__}: {err})") from err
    if not any(block.text.strip() for block in document.blocks):
        raise DocumentError(name, "contains no text")
    return document


def _detect_kind(name: str, data: bytes) -> DocumentKind:
    suffix = PurePath(name).suffix.lower()
    if b"%PDF-" in data[:1024]:  # the header may follow some junk bytes
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        names = _zip_names(data)
        if names is not None and "word/document.xml" in names:
            return "docx"
        if suffix == ".docx":
            if names is None:
                return "docx"  # a damaged container: the unpacking check names it
            raise _not_word(name, names)
    if data.startswith(_OLE_MAGIC) and suffix == ".docx":
        raise DocumentError(name, "is password-protected or in the legacy .doc format; save it as a .docx without a password")
    if suffix in _UNSUPPORTED:
        raise _unsupported(name, _UNSUPPORTED[suffix])
    kind = _BY_SUFFIX.get(suffix)
    if kind in ("pdf", "docx"):
        raise DocumentError(name, f"is not {_LABELS[kind]}: its content does not look like one (damaged or renamed?)")
    if kind is not None:
        return kind
    found = bom_encoding(data)
    start = data[found[1] if found else 0 : 1024].lstrip().lower()
    return "html" if start.startswith((b"<!doctype html", b"<html")) else "text"


def _zip_names(data: bytes) -> set[str] | None:
    """The names in a ZIP archive, or None when it cannot be read as one."""
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            return set(archive.namelist())
    except zipfile.BadZipFile:
        return None


def _not_word(name: str, names: set[str]) -> DocumentError:
    """What a ZIP named .docx that holds no Word document is, said so its owner can fix it."""
    if "xl/workbook.xml" in names:
        return _unsupported(name, "is an Excel workbook, not a Word document: name it .xlsx to import its QnAs")
    if "ppt/presentation.xml" in names:
        return _unsupported(name, "is a PowerPoint file, not a Word document: save it as PDF")
    if "content.xml" in names:
        return _unsupported(name, "is an OpenDocument file, not a Word document: save it as .docx")
    return DocumentError(name, "is a ZIP archive without word/document.xml, not a Word document (damaged or renamed?)")


def _unsupported(name: str, message: str) -> DocumentError:
    """A file of a type we do not read, told which types we do."""
    return DocumentError(name, f"{message}; {SUPPORTED_TYPES}", unsupported=True)


def _check_unpacked_size(name: str, data: bytes) -> None:
    """The Word file's ZIP container within ``MAX_UNPACKED_BYTES`` and ``MAX_XML_TAGS``, counted while it unpacks
    (``formats.zip_limits``), before python-docx builds its elements."""
    zip_limits.check(data, lambda message: DocumentError(name, message), max_unpacked=MAX_UNPACKED_BYTES,
                     max_tags=MAX_XML_TAGS, unreadable="is not a valid Word document (the ZIP container is damaged)")
