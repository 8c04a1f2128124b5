"""The one structure every parser returns, so chunking and FAQ extraction never see a file format.

A document is a flat list of blocks in reading order.  Hierarchy is implied by heading
levels (see ``sections.py``), as it is in HTML and Markdown, because PDFs and Word files
only give us a stream of styled lines and paragraphs, not a tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from openqna.records import InvalidArgument

BlockKind = Literal["heading", "paragraph", "list_item", "table"]

MAX_PDF_BYTES = 25 * 1024 * 1024
MAX_OTHER_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class Block:
    """One unit of content.

    ``text`` is Markdown-ready: a list item carries its marker and indentation
    (``"1. Connect the cord"``, ``"  - nested"``) and a table is a Markdown table, so
    answers and chunks are rendered by joining blocks.  ``level`` is the heading level
    (1 = top) and 0 for other kinds.  ``page`` is 1-based for PDFs and None elsewhere.
    """

    kind: BlockKind
    text: str
    level: int = 0
    page: int | None = None


@dataclass
class ParsedDocument:
    source: str
    title: str | None
    blocks: list[Block] = field(default_factory=list)

    @property
    def text(self) -> str:
        """All block texts, for callers that want plain full text (search previews, tests)."""
        return "\n\n".join(block.text for block in self.blocks)


class DocumentError(InvalidArgument):
    """A document we cannot ingest: corrupt, encrypted, too large, undecodable or empty.

    The message always starts with the file name, because uploads come in batches and a
    bare "invalid PDF" does not say which one.  ``unsupported`` tells a file of a type we do not
    read (an image, a spreadsheet) from a broken file of a type we do (a damaged PDF): OpenAI's
    vector stores report the two with different codes.
    """

    def __init__(self, file: str, message: str, *, unsupported: bool = False):
        super().__init__(f"{file}: {message}", target=file)
        self.file = file
        self.unsupported = unsupported
