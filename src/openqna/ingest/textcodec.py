"""Bytes to text for plain-text, Markdown and HTML uploads.

Policy: a byte-order mark decides (UTF-8, UTF-16, UTF-32); otherwise the text must be
UTF-8, or, for HTML only, the charset the page declares.  We do not guess (e.g. with
charset-normalizer): on the short files people upload a guess between cp1252, cp1250
and latin-1 is often wrong, and a wrong guess silently puts mojibake into answers that
are then served with confidence.  A clear error naming the line is fixed in seconds by
re-saving as UTF-8, and it is the same policy as QnA file import (formats/qna_table.py).
"""

from __future__ import annotations

import codecs

from openqna.ingest.parsed import DocumentError

# UTF-32 first: its little-endian BOM starts with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def bom_encoding(data: bytes) -> tuple[str, int] | None:
    """(encoding, BOM length) when ``data`` starts with a byte-order mark."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding, len(bom)
    return None


def decode_text(data: bytes, name: str, declared: str | None = None) -> str:
    """Decode by BOM, else by ``declared`` (an HTML page's charset), else as strict UTF-8."""
    found = bom_encoding(data)
    if found:
        encoding, skip = found
        data = data[skip:]
    else:
        encoding = _known_codec(declared) or "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        before = data[: err.start].decode(encoding, errors="replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        raise DocumentError(
            name,
            f"is not valid {encoding.upper()} text (byte 0x{data[err.start]:02x} at line {line}, column {column}); "
            "save it as UTF-8",
        ) from None
    if "\x00" in text:
        raise DocumentError(name, "looks like a binary file, not text")
    return text


def _known_codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        return codecs.lookup(label.strip()).name
    except LookupError:
        return None
