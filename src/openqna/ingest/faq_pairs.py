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
from openqna.ingest.parsed import ParsedDocument
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


@dataclass
class ExtractedQnA:
    qna: QnA  # id None and no prompts yet
    children: list[int]  # indices (in the list extract_qnas returns) of its follow-up QnAs


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
        qna = QnA(
            questions=[question],
            answer=_answer(section, question),
            source=document.source,
            metadata=_metadata(section),
        )
        position[index] = len(extracted)
        extracted.append(ExtractedQnA(qna, []))
    for index, at in position.items():
        # Azure allows 20 prompts; a longer menu keeps the first 20 in document order.
        extracted[at].children = _followups(sections, index, position)[:MAX_PROMPTS]
    return extracted


def link_prompts(extracted: Sequence[ExtractedQnA], ids: Sequence[int]) -> list[QnA]:
    """Copies of the QnAs with ``id = ids[i]`` and prompts to their children's ids."""
    if len(ids) != len(extracted):
        raise ValueError(f"{len(ids)} ids for {len(extracted)} QnAs")
    linked = []
    for item, qna_id in zip(extracted, ids):
        prompts = [
            Prompt(display_order=order, qna_id=ids[child], display_text=_prompt_text(extracted[child].qna))
            for order, child in enumerate(item.children)
        ]
        linked.append(replace(item.qna, id=qna_id, dialog=Dialog(prompts=prompts)))
    return linked


def _question(heading: str) -> str:
    text = _SECTION_NUMBER.sub("", " ".join(heading.split()))
    if not text.endswith(_QUESTION_MARKS):
        text = text.rstrip(_TRAILING_PUNCTUATION)
    return text[:MAX_QUESTION_CHARS]


def _answer(section: Section, question: str) -> str:
    lead = "" if _is_question(question) else f"**{question}**\n\n"
    blocks = list(section.blocks)
    answer = lead + join_blocks(blocks)
    while len(answer) > MAX_ANSWER_CHARS and len(blocks) > 1:
        blocks.pop()  # the chunks keep the full text; the answer keeps what fits
        answer = lead + join_blocks(blocks)
    return answer[:MAX_ANSWER_CHARS]


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


def _prompt_text(qna: QnA) -> str:
    return textwrap.shorten(qna.questions[0], width=MAX_PROMPT_TEXT_CHARS, placeholder="…")
