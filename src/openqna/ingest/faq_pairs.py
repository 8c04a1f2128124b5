"""QnA pairs from a document's headings, as QnA Maker extracted them from FAQs and manuals.

Every heading with text under it becomes a QnA: the heading is the question and the
text up to the next heading is the answer.  A heading phrased as a question ("How do I
charge it?") is kept as is and answered with the text alone; a topic heading from a
manual ("Power and charging") is answered with the heading in bold above the text, as
QnA Maker rendered them, so the answer reads well on its own.  Headings with no text
of their own are skipped.

Multi-turn: a heading's sub-headings become its follow-up prompts.  Ids do not exist
until the store assigns them, so extraction returns ``ExtractedQnA(qna, children)``,
``children`` being indices into the returned list; once each QnA has an id,
``link_prompts`` fills in ``dialog.prompts``.  When a sub-heading was skipped for
having no text, its own sub-headings take its place, so no branch is cut off.

Azure's limits are kept without losing anything silently.  A heading with more
follow-ups than a QnA may have (20) shows the first 19 and a "More" prompt to a
context-only QnA that lists and prompts the rest.  A section longer than an answer may
be (25,000 characters) keeps its first blocks (or sentences of one huge paragraph) that
fit; the passages hold all of it.  Splitting it into consecutive QnAs instead ("Warranty",
"Warranty (2)") was measured: on the TeX paper, whose whole body sits under an author's
name, the extra 25,000-character QnAs took the top answer from the right passages
(15 of 18 questions right fell to 9).  Either way the QnA carries a ``note`` saying so,
for the import to print.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace

from openqna.formats.limits import (
    MAX_ANSWER_CHARS,
    MAX_METADATA_VALUE_CHARS,
    MAX_PROMPT_TEXT_CHARS,
    MAX_PROMPTS,
    MAX_QUESTION_CHARS,
)
from openqna.ingest.parsed import Block, ParsedDocument
from openqna.ingest.sections import Section, join_blocks, split_sections
from openqna.records import Dialog, Prompt, QnA

_QUESTION_WORDS = frozenset({
    "how", "what", "why", "when", "where", "who", "whom", "whose", "which",
    "can", "could", "do", "does", "did", "is", "are", "was", "were", "am",
    "should", "shall", "will", "would", "may", "might", "must", "has", "have", "had",
})  # fmt: skip
_SECTION_NUMBER = re.compile(r"^\d+(\.\d+)*\.?\s+")
# Chinese and Japanese write no spaces between words and end a question with a full-width "？" or a particle.
_CJK_QUESTION_STARTS = ("如何", "怎么", "怎样", "怎麼", "怎樣", "为什么", "為什麼", "什么", "什麼", "是否", "能否", "可否")
_CJK_QUESTION_ENDS = ("吗", "嗎", "呢", "か")
_QUESTION_MARKS = ("?", "？")
_TRAILING_PUNCTUATION = " .:;,。：；，、"
MORE = "More"  # the display text of the prompt to the follow-ups past the first MAX_PROMPTS - 1


@dataclass
class ExtractedQnA:
    qna: QnA  # id None and no prompts yet
    children: list[int]  # indices (in the list extract_qnas returns) of its follow-up QnAs
    note: str = ""  # what the import should tell: a section split into parts, prompts moved under "More"
    prompt: str = ""  # the display text of prompts to it, when not its question
    context_only: bool = False  # reached only through a prompt (a "More" list)


def _is_question(text: str) -> bool:
    """Ends with "?" (or "？") or starts with a question word ("How to ...", "Can I ...", "如何...")."""
    words = text.split()
    text = text.rstrip()
    return (text.endswith(_QUESTION_MARKS) or text.startswith(_CJK_QUESTION_STARTS) or text.endswith(_CJK_QUESTION_ENDS)
            or bool(words) and words[0].lower().strip("¿¡\"'“") in _QUESTION_WORDS)


def extract_qnas(document: ParsedDocument) -> list[ExtractedQnA]:
    sections = split_sections(document)
    position: dict[int, int] = {}  # section index -> index in the result
    extracted: list[ExtractedQnA] = []
    for index, section in enumerate(sections):
        if section.heading is None or not section.blocks:
            continue
        question = _question(section.heading.text)
        if not question:
            continue
        answer, note = _answer(section.blocks, question)
        qna = QnA(questions=[question], answer=answer, source=document.source, metadata=_metadata(section))
        position[index] = len(extracted)
        extracted.append(ExtractedQnA(qna, [], note=note))
    for index, at in position.items():
        children = extracted[at].children + _followups(sections, index, position)
        if len(children) > MAX_PROMPTS:
            extracted[at].note = "; ".join(filter(None, [extracted[at].note, (
                f"“{extracted[at].qna.questions[0]}” has {len(children)} follow-ups, more than a QnA's "
                f"{MAX_PROMPTS} prompts: prompts {MAX_PROMPTS} to {len(children)} are under “{MORE}”")]))
        extracted[at].children = _menu(extracted, at, children)
    return extracted


def _menu(extracted: list[ExtractedQnA], at: int, children: list[int]) -> list[int]:
    """``children`` as prompts of ``extracted[at]``: all of them when they fit, else the first MAX_PROMPTS - 1 and
    a "More" QnA (appended to ``extracted``) that lists the rest and prompts them, in turn the same way."""
    if len(children) <= MAX_PROMPTS:
        return children
    shown, rest = children[: MAX_PROMPTS - 1], children[MAX_PROMPTS - 1 :]
    parent = extracted[at].qna
    question = f"{parent.questions[0][: MAX_QUESTION_CHARS - 20]}: more topics"
    answer = f"**{question}**\n\n" + "\n".join(f"- {_prompt_text(extracted[c])}" for c in rest)
    more = ExtractedQnA(QnA(questions=[question], answer=answer[:MAX_ANSWER_CHARS], source=parent.source,
                            metadata=dict(parent.metadata)), [], prompt=MORE, context_only=True)
    extracted.append(more)
    more.children = _menu(extracted, len(extracted) - 1, rest)
    return [*shown, len(extracted) - 1]


def link_prompts(extracted: Sequence[ExtractedQnA], ids: Sequence[int]) -> list[QnA]:
    """Copies of the QnAs with ``id = ids[i]`` and prompts to their children's ids."""
    if len(ids) != len(extracted):
        raise ValueError(f"{len(ids)} ids for {len(extracted)} QnAs")
    linked = []
    for item, qna_id in zip(extracted, ids):
        prompts = [
            Prompt(display_order=order, qna_id=ids[child], display_text=_prompt_text(extracted[child]))
            for order, child in enumerate(item.children)
        ]
        linked.append(replace(item.qna, id=qna_id, dialog=Dialog(is_context_only=item.context_only, prompts=prompts)))
    return linked


def _question(heading: str) -> str:
    text = _SECTION_NUMBER.sub("", " ".join(heading.split()))
    if not text.endswith(_QUESTION_MARKS):
        text = text.rstrip(_TRAILING_PUNCTUATION)
    return text[:MAX_QUESTION_CHARS]


def _answer(blocks: list[Block], question: str) -> tuple[str, str]:
    """The answer (the heading in bold above a topic's text) and, when the section is longer than an answer may
    be, a note on what it keeps: its first blocks that fit (the first one alone cut between lines, sentences or
    words when it is longer than an answer)."""
    lead = "" if _is_question(question) else f"**{question}**\n\n"
    answer = lead + join_blocks(blocks)
    if len(answer) <= MAX_ANSWER_CHARS:
        return answer, ""
    kept: list[Block] = []
    for block in blocks:
        room = MAX_ANSWER_CHARS - len(lead + join_blocks([*kept, replace(block, text="")]))
        if len(block.text) > room:
            if not kept:  # one paragraph longer than an answer
                kept.append(replace(block, text=_cut(block.text, room)))
            break
        kept.append(block)
    shortened = lead + join_blocks(kept)
    last = " ".join(shortened[-60:].split()[1:])
    return shortened, (f"“{question}” has {len(join_blocks(blocks)):,} characters, more than an answer's "
                       f"{MAX_ANSWER_CHARS:,}: its QnA keeps the first {len(shortened) - len(lead):,} characters, up to "
                       f"“…{last}”; its passages hold all of it (--unstructured, includeUnstructuredSources)")


def _cut(text: str, room: int) -> str:
    """The start of ``text`` that fits ``room`` characters, cut at the last line break, sentence end or space that
    keeps at least half of it."""
    window = text[:room]
    cut = next((at + len(mark) for mark in ("\n", ". ", "? ", "! ", "。", " ") if (at := window.rfind(mark)) >= room // 2),
               room)
    return text[:cut].rstrip()


def _metadata(section: Section) -> dict[str, str]:
    """The page (PDFs) and the parent headings, for filtering and for citing where an answer came from."""
    metadata = {}
    if section.heading is not None and section.heading.page is not None:
        metadata["page"] = str(section.heading.page)
    if len(section.path) > 1:
        # Azure metadata values may not contain ":" or "|".
        parents = " > ".join(section.path[:-1]).replace(":", " ").replace("|", " ")
        metadata["section"] = " ".join(parents.split())[:MAX_METADATA_VALUE_CHARS]
    return metadata


def _followups(sections: list[Section], index: int, position: dict[int, int]) -> list[int]:
    found = []
    for child in sections[index].children:
        if child in position:
            found.append(position[child])
        else:
            found.extend(_followups(sections, child, position))
    return found


def _prompt_text(item: ExtractedQnA) -> str:
    return item.prompt or textwrap.shorten(item.qna.questions[0], width=MAX_PROMPT_TEXT_CHARS, placeholder="…")
