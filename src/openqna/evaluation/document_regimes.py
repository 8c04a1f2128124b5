"""The document regime: manuals, papers and DOCX files imported as a user imports them.

Each document of ``qna-sample-docs/data-source-formats`` named in ``questions/documents.tsv`` becomes a
project of its own through the code path of ``openqna import PROJECT FILE``
(``ingest.parse_document`` then ``documents.ingest_document``): section QnAs whose question is the
heading, and passages.  It is asked the hand-written questions of that file (see its README) with
``includeUnstructuredSources``, as Azure's documented sample request on the Surface manual is.

A question's label is a short verbatim snippet of the right answer (alternatives joined by
``" || "``) or ``none``; a record is right when its text (a QnA's answer, a passage's text) contains
a snippet once both are ``normalise``d, so the labels survive re-chunking and any record saying the
right thing counts.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from openqna.evaluation.regimes import SPLITS, Question, RegimeKB, assign_splits
from openqna.index.markdown_text import without_urls
from openqna.ingest import parse_document
from openqna.kb.documents import ingest_document
from openqna.kb.service import Service

DOCUMENTS = "documents"
FOLDER = "qna-sample-docs/data-source-formats"
QUESTIONS = Path(__file__).parent / "questions"
NONE = "none"
ALTERNATIVES = " || "
_MARKS = re.compile(r"[*`]")  # Markdown's emphasis and code marks; no label has one
_PUNCTUATION = {0x2018: "'", 0x2019: "'", 0x201C: '"', 0x201D: '"', 0x2010: "-", 0x2011: "-"}


def normalise(text: str) -> str:
    """NFKC, lower case, curly quotes and Unicode hyphens made ASCII, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().translate(_PUNCTUATION).split())


def snippets(label: str) -> list[str]:
    return [normalise(s) for s in label.split(ALTERNATIVES) if s.strip()]


def contains(text: str, label: str) -> bool:
    """Whether ``text`` says the answer a label names (``text`` already normalised)."""
    return any(s in text for s in snippets(label))


@dataclass
class LabelledQuestion:
    document: str
    question: str
    answer: str | None  # the snippet label; None for ``none``
    section: str


def read_questions(path: Path) -> list[LabelledQuestion]:
    """A question file of ``questions/`` (TSV with a header; ``document`` and ``section`` optional)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [LabelledQuestion(r.get("document") or "", r["question"].strip(),
                             None if r["answer"].strip() == NONE else r["answer"].strip(),
                             (r.get("section") or "").strip()) for r in rows]


def project_name(document: str) -> str:
    return "doc-" + re.sub(r"[^a-z0-9]+", "-", Path(document).stem.lower()).strip("-")


def record_texts(service: Service, project: str) -> dict[int, str]:
    """Every record's normalised text (a QnA's answer, a passage's text) by id, as a reader sees it: links' text,
    not their URLs, and no emphasis or code marks ("select **Delete**" says "select Delete")."""
    return {q.id: normalise(_MARKS.sub("", without_urls(q.answer))) for q in service.store.list_qnas(project)}


def import_document(service: Service, data_dir: Path, document: str) -> str:
    """``openqna import`` of one document into a project of its own; returns the project."""
    project = project_name(document)
    path = data_dir / FOLDER / document
    ingest_document(service, project, parse_document(path.name, path.read_bytes()))
    return project


def document_kb(service: Service, data_dir: Path, document: str, questions: list[Question]) -> RegimeKB:
    project = import_document(service, data_dir, document)
    texts = record_texts(service, project)
    return RegimeKB(project, DOCUMENTS, len(texts), questions,
                    lambda record_id, gold: contains(texts.get(record_id, ""), gold), include_unstructured=True,
                    notes=document, offtopic_source="hand-written none")


def split_questions(labelled: list[LabelledQuestion], seed: int) -> dict[str, list[Question]]:
    """Each document's questions with their split, by document (stratified per document and per
    ``none``/answerable, by a hash of the question)."""
    out: dict[str, list[Question]] = {}
    for q in labelled:
        out.setdefault(q.document, []).append(Question(q.question, q.answer))
    for document, questions in out.items():
        assign_splits(questions, seed, document, by_gold=False)
    return out


def document_kbs(service: Service, data_dir: Path, *, seed: int, documents: tuple[str, ...] | None = None,
                 per_document: int | None = None) -> list[RegimeKB]:
    """A KB per document of ``questions/documents.tsv`` (``documents``: only those), asked its questions
    (``per_document``: in each split the first that many answerable and one ``none``; the splits are
    those of the whole file either way)."""
    out = []
    for name, questions in split_questions(read_questions(QUESTIONS / "documents.tsv"), seed).items():
        if documents is not None and name not in documents:
            continue
        if per_document is not None:
            questions = [q for split in SPLITS for answerable, n in ((True, per_document), (False, 1))
                         for q in [q for q in questions if q.split == split and (q.gold is not None) == answerable][:n]]
        out.append(document_kb(service, data_dir, name, questions))
    return out
