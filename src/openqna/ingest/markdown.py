"""Markdown (CommonMark plus GitHub tables) via markdown-it-py.

Paragraphs and list items keep their inline Markdown (links, emphasis), because answers
are Markdown; headings are reduced to plain text because they become questions and
prompt labels.  Raw HTML blocks are dropped: in READMEs and help pages they are badges,
comments and layout, rarely content.  A paragraph that is one bold question
(``**Can I pay by card?**``) is a heading one level below the heading it stands under, as
FAQ pages written without headings for their questions mean it.  A leading YAML front-matter block is skipped and
its ``title:`` used as the document title.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from openqna.ingest.markdown_tables import markdown_table
from openqna.ingest.parsed import Block, ParsedDocument
from openqna.ingest.textcodec import decode_text
from openqna.ingest.typography import MAX_HEADING_CHARS

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_PARSER = MarkdownIt("commonmark").enable("table")


def parse_markdown(name: str, data: bytes) -> ParsedDocument:
    text = decode_text(data, name).replace("\r\n", "\n")
    title = None
    front = _FRONT_MATTER.match(text)
    if front:
        found = _FRONT_TITLE.search(front.group(1))
        title = found.group(1).strip("'\"") if found else None
        text = text[front.end() :]
    blocks = _blocks(_PARSER.parse(text))
    if title is None:
        title = next((b.text for b in blocks if b.kind == "heading" and b.level == 1), None)
    return ParsedDocument(source=name, title=title, blocks=blocks)


def _plain(inline: Token) -> str:
    parts = []
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts).strip()


def _is_bold_question(inline: Token) -> bool:
    """A paragraph that is nothing but one bold run whose text asks a question."""
    children = [child for child in inline.children or [] if child.type != "text" or child.content.strip()]
    if len(children) < 3 or children[0].type != "strong_open" or children[-1].type != "strong_close":
        return False
    if any(child.type in ("strong_open", "strong_close") for child in children[1:-1]):
        return False
    text = _plain(inline)
    return text.endswith(("?", "？")) and len(text) <= MAX_HEADING_CHARS


def _blocks(tokens: list[Token]) -> list[Block]:
    blocks: list[Block] = []
    # One entry per open list: [ordered?, next number]; the depth gives the indentation.
    lists: list[list] = []
    marker: str | None = None  # set by list_item_open, used by the item's first paragraph
    level = 0  # the last heading's level
    table: list[list[str]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "heading_open":
            level = int(tok.tag[1])
            blocks.append(Block("heading", _plain(tokens[i + 1]), level=level))
            i += 2
        elif tok.type in ("bullet_list_open", "ordered_list_open"):
            lists.append([tok.type == "ordered_list_open", int(tok.attrGet("start") or 1)])
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif tok.type == "list_item_open":
            ordered, number = lists[-1]
            marker = f"{number}." if ordered else "-"
            lists[-1][1] += 1
        elif tok.type == "inline" and tokens[i - 1].type == "paragraph_open":
            content = tok.content.strip()
            if lists:
                indent = "  " * (len(lists) - 1)
                lead = f"{marker} " if marker else "  "
                blocks.append(Block("list_item", indent + lead + content.replace("\n", "\n" + indent + "  ")))
                marker = None
            elif _is_bold_question(tok):
                blocks.append(Block("heading", _plain(tok), level=level + 1))
            elif content:
                blocks.append(Block("paragraph", content))
        elif tok.type == "tr_open":
            table.append([])
        elif tok.type == "inline" and tokens[i - 1].type in ("th_open", "td_open"):
            table[-1].append(tok.content)
        elif tok.type == "table_close":
            rendered = markdown_table(table, header=True)
            if rendered:
                blocks.append(Block("table", rendered))
            table = []
        elif tok.type in ("fence", "code_block") and tok.content.strip():
            blocks.append(Block("paragraph", f"```{tok.info}\n{tok.content.rstrip()}\n```"))
        i += 1
    return blocks
