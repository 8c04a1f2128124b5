"""ZIP containers (XLSX workbooks, DOCX documents, QnA Maker's replica archives) read within bounds that follow the
content, not what the archive's headers say (issue 40).

An upload's own size says little about what it unpacks to: a 124 KB workbook unpacked to 889 MB in openpyxl, and
a 62 KB Word file of empty paragraphs (``<w:p/>``, five bytes each) made python-docx build 877 MB of elements.  So
before a parser sees an archive, ``check`` decompresses every member once, as a stream, counting the bytes that
really come out (a header that claims less fails its CRC check: a format error, not a crash) and the XML tags of
the XML parts (the ``<`` bytes: every element, empty or not, costs one), and refuses the archive past
``max_unpacked`` bytes or ``max_tags`` tags.  The parsers then build at most that many elements: on this 2-core
machine an accepted workbook or document costs at most a few hundred MB and a few seconds (``tests/test_bombs.py``
prints the figures).
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable, Iterator
from io import BytesIO

MB = 1024 * 1024
XML_SUFFIXES = (".xml", ".rels", ".vml")


def check(data: bytes, error: Callable[[str], Exception], *, max_unpacked: int, max_tags: int,
          unreadable: str = "is not a readable ZIP container") -> None:
    """Raise ``error(message)`` unless ``data`` is a readable ZIP archive that unpacks to at most ``max_unpacked``
    bytes and whose XML parts hold at most ``max_tags`` tags (``message`` completes "the file ...";
    ``unreadable`` is its message when ``data`` is no ZIP archive at all)."""
    try:
        archive = zipfile.ZipFile(BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError):
        raise error(unreadable) from None
    unpacked = tags = 0
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            xml = info.filename.lower().endswith(XML_SUFFIXES)
            for chunk in _chunks(archive, info, error):
                unpacked += len(chunk)
                if unpacked > max_unpacked:
                    raise error(f"unpacks to more than {max_unpacked:,} bytes; the limit is {max_unpacked:,}")
                if xml:
                    tags += chunk.count(b"<")
                    if tags > max_tags:
                        raise error(f"holds more than {max_tags:,} XML elements; the limit is {max_tags:,}")


def _chunks(archive: zipfile.ZipFile, info: zipfile.ZipInfo, error: Callable[[str], Exception]) -> Iterator[bytes]:
    """The member's bytes as they decompress, a megabyte at a time; a damaged member is ``error``."""
    try:
        with archive.open(info) as member:
            while chunk := member.read(MB):
                yield chunk
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError) as err:
        raise error(f"is a damaged ZIP container ({info.filename}: {err})") from None
