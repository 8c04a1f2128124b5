"""Bytes to text for plain-text, Markdown and HTML uploads.

Policy: a byte-order mark decides (UTF-8, UTF-16, UTF-32); otherwise the text must be
UTF-8, or, for HTML only, the charset the page declares.  We do not guess (e.g. with
charset-normalizer): on the short files people upload a guess between cp1252, cp1250
and latin-1 is often wrong, and a wrong guess silently puts mojibake into answers that
are then served with confidence.  A clear error naming the line is fixed in seconds by
re-saving as UTF-8, and it is the same policy as QnA file import (formats/qna_table.py).

A page's declared charset is read as browsers read it (the WHATWG Encoding Standard), not by
Python's codec of the same name: pages labelled Shift_JIS are written in Windows' superset
(cp932: "①", "～"), GB2312 and GBK pages in GB18030's, and ISO-8859-1 pages in
windows-1252 (curly quotes and "€" in 0x80-0x9F, which Latin-1 silently turns into control
characters).
"""

from __future__ import annotations

import codecs

from openqna.ingest.parsed import DocumentError

# WHATWG's label -> decoder table where it differs from Python's codec of that name (lower-cased labels).
_BROWSER_CODECS = {
    **dict.fromkeys(("shift_jis", "shift-jis", "sjis", "x-sjis", "ms_kanji", "csshiftjis", "windows-31j", "ms932"),
                    "cp932"),
    **dict.fromkeys(("gb2312", "gbk", "x-gbk", "gb_2312", "gb_2312-80", "chinese", "csgb2312", "iso-ir-58",
                     "csiso58gb231280", "cp936"), "gb18030"),
    **dict.fromkeys(("iso-8859-1", "iso8859-1", "iso_8859-1", "iso88591", "latin1", "l1", "cp819", "ibm819",
                     "ascii", "us-ascii", "ansi_x3.4-1968", "x-cp1252"), "cp1252"),
    **dict.fromkeys(("euc-kr", "ks_c_5601-1987", "ks_c_5601-1989", "korean", "windows-949", "csksc56011987"), "cp949"),
    **dict.fromkeys(("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"), "big5hkscs"),
    **dict.fromkeys(("iso-8859-9", "iso8859-9", "latin5", "l5"), "cp1254"),
    **dict.fromkeys(("iso-8859-11", "tis-620", "windows-874"), "cp874"),
}

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
    """The codec a browser decodes a page declaring ``label`` with; None for an unknown label."""
    if not label:
        return None
    label = label.strip().lower()
    try:
        name = _BROWSER_CODECS.get(label) or codecs.lookup(label).name
    except LookupError:
        return None
    # A declaration read as ASCII cannot be UTF-16 or UTF-32 (those announce themselves with a BOM).
    return "utf-8" if name.startswith(("utf-16", "utf-32")) else name
