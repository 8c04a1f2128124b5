"""Plain text: paragraphs are separated by blank lines; there are no headings to find.

Line breaks inside a paragraph are kept, because hand-written lists and addresses
depend on them and Markdown renders them as spaces anyway.
"""

from __future__ import annotations

import re

from openqna.ingest.parsed import Block, ParsedDocument
from openqna.ingest.textcodec import decode_text

_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def parse_text(name: str, data: bytes) -> ParsedDocument:
    text = decode_text(data, name).replace("\r\n", "\n").replace("\r", "\n")
    blocks = [
        Block("paragraph", para.strip())
        for para in _BLANK_LINE.split(text)
        if para.strip()
    ]
    return ParsedDocument(source=name, title=None, blocks=blocks)
