"""FAQ pairs written with "Q:" and "A:" markers, turned into a heading and its text so each becomes a QnA.

FAQ pages, Word files and text files often write a pair as marked paragraphs instead of a
heading and its text::

    Q: How long does shipping take?
    A: Three to five working days.

in one paragraph (a line break, or just a space after the "?" in a PDF) or in two, with
"Question:"/"Answer:", numbered ("Q1."), bold ("**Q:**") or full-width and Chinese or
Japanese markers ("Q："/"A：", "問："/"答：", "问："/"答：").  Left as paragraphs, a page of
them was one QnA under the page's title.  Each question becomes a heading one level below
the heading it stands under, and its answer (the "A:" text and the blocks after it, up to
the next question or heading) the section's text, so QnAs, follow-up prompts and passages
all come from the one section tree (``sections.py``) whatever the file format.

A "Q:" paragraph counts only when an "A:" follows it, so a lone "Q: ..." in prose stays
prose.  A heading that carries a marker ("Q: Can I pay by card?") loses it, and so does
the "A:" paragraph under it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from openqna.ingest.parsed import Block, ParsedDocument

_EMPHASIS = r"(\*\*|__)?"
_QUESTION = re.compile(rf"^{_EMPHASIS}[ \t]*(?:Q|[Qq]uestion|QUESTION|問題|问题|質問|問|问)[ \t]*\d{{0,3}}[ \t]*"
                       rf"(?:[:：.．)）][ \t]*|[ \t]+-[ \t]+){_EMPHASIS}[ \t]*")
_ANSWER = re.compile(rf"^{_EMPHASIS}[ \t]*(?:A|[Aa]nswer|ANSWER|回答|答え|答)[ \t]*\d{{0,3}}[ \t]*"
                     rf"(?:[:：.．)）][ \t]*|[ \t]+-[ \t]+){_EMPHASIS}[ \t]*")
# An answer marker after the question on the same line: "Q: Can I pay by card? A: Yes."
_INLINE_ANSWER = re.compile(r"(?<=[?？])[ \t]+(?=(?:\*\*|__)?(?:A|Answer|答)[ \t]*[:：])")


def split_marked_pairs(document: ParsedDocument) -> ParsedDocument:
    """``document`` with each marked question as a heading and each answer marker dropped."""
    blocks = document.blocks
    if not any(block.kind in ("paragraph", "heading") and _QUESTION.match(block.text) for block in blocks):
        return document
    out: list[Block] = []
    level = 1  # the level of a question's heading: one below the last real heading
    strip_answer = False  # the next block is the answer under a marked heading
    for index, block in enumerate(blocks):
        if block.kind == "heading":
            found = _QUESTION.match(block.text)
            text = _unmarked(block.text, found) if found else block.text
            out.append(replace(block, text=text or block.text))
            level = block.level + 1
            strip_answer = found is not None
            continue
        answer_marker = _ANSWER.match(block.text) if strip_answer and block.kind == "paragraph" else None
        strip_answer = False
        if answer_marker:
            text = _unmarked(block.text, answer_marker)
            if text:
                out.append(replace(block, text=text))
            continue
        pair = _pair(block, blocks[index + 1] if index + 1 < len(blocks) else None)
        if pair is None:
            out.append(block)
            continue
        question, answer = pair
        out.append(Block("heading", question, level=level, page=block.page))
        if answer is None:
            strip_answer = True  # the answer is the next block
        elif answer:
            out.append(replace(block, text=answer))
    return replace(document, blocks=out)


def _pair(block: Block, following: Block | None) -> tuple[str, str | None] | None:
    """(question, the answer's text in this block) when ``block`` opens a marked pair; None for the answer when
    it is the next block, which starts with its marker."""
    if block.kind != "paragraph":
        return None
    found = _QUESTION.match(block.text)
    if found is None:
        return None
    lines = _INLINE_ANSWER.sub("\n", block.text).split("\n")
    for number, line in enumerate(lines[1:], start=1):
        answer = _ANSWER.match(line)
        if answer:
            question = _unmarked(" ".join(lines[:number]), found)
            rest = "\n".join([_unmarked(line, answer), *lines[number + 1 :]]).strip()
            return (question, rest) if question else None
    if following is not None and following.kind == "paragraph" and _ANSWER.match(following.text):
        question = _unmarked(" ".join(lines), found)
        return (question, None) if question else None
    return None


def _unmarked(text: str, marker: re.Match[str]) -> str:
    """``text`` without its marker; emphasis opened before the marker and closed at the end goes too."""
    rest = text[marker.end() :].strip()
    opened = marker.group(1)
    if opened and not marker.group(2) and rest.endswith(opened):
        rest = rest[: -len(opened)].rstrip()
    return " ".join(rest.split()) if "\n" not in rest else rest
