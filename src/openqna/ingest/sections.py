"""The section tree implied by heading levels, shared by chunking and FAQ extraction.

A section is a heading plus the blocks up to the next heading of any level; its
sub-sections are the later headings of a deeper level until one of the same or a
higher level.  Skipped levels (an H2 straight under an H4-only manual page) nest by
comparison, not by number, as browsers' outline views do.  Text before the first
heading forms a section without a heading.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openqna.ingest.parsed import Block, BlockKind, ParsedDocument


@dataclass
class Section:
    heading: Block | None
    path: list[str]  # heading texts from the top-level ancestor down to this heading
    blocks: list[Block] = field(default_factory=list)
    parent: int | None = None  # index in the list ``split_sections`` returns
    children: list[int] = field(default_factory=list)


def split_sections(document: ParsedDocument) -> list[Section]:
    """Sections in document order; index 0 is the (possibly empty) text before the first heading."""
    sections = [Section(heading=None, path=[])]
    open_sections: list[int] = []  # the current heading chain, outermost first
    for block in document.blocks:
        if block.kind != "heading":
            sections[open_sections[-1] if open_sections else 0].blocks.append(block)
            continue
        while open_sections and sections[open_sections[-1]].heading.level >= block.level:
            open_sections.pop()
        parent = open_sections[-1] if open_sections else None
        path = (sections[parent].path if parent is not None else []) + [block.text]
        sections.append(Section(heading=block, path=path, parent=parent))
        if parent is not None:
            sections[parent].children.append(len(sections) - 1)
        open_sections.append(len(sections) - 1)
    return sections


def separator(previous: BlockKind | None, kind: BlockKind) -> str:
    """How two blocks are joined in Markdown: list items of one list by a newline, others by a blank line."""
    return "\n" if previous == "list_item" and kind == "list_item" else "\n\n"


def join_blocks(blocks: list[Block]) -> str:
    parts: list[str] = []
    previous: BlockKind | None = None
    for block in blocks:
        if parts:
            parts.append(separator(previous, block.kind))
        parts.append(block.text)
        previous = block.kind
    return "".join(parts)
