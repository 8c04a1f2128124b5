"""The one record model every surface shares (DESIGN decision 1).

A knowledge base holds QnA records: questions (the first is the primary one,
the rest are alternates), an answer, lower-cased metadata, a source and a dialog
with follow-up prompts.  Passages from unstructured sources are QnAs of kind
``passage`` whose single "question" is their title.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import regex

# What a reader cannot see: white space, control and format characters (zero-width spaces, byte order marks,
# direction marks)
_INVISIBLE = regex.compile(r"[\s\p{Cc}\p{Cf}]+")


def blank(text: str) -> bool:
    """Whether ``text`` holds nothing a reader can see (spaces, control and format characters only): such a question
    or subject is refused as empty on every surface."""
    return not _INVISIBLE.sub("", text)

DEFAULT_SOURCE = "Editorial"
RecordKind = Literal["qna", "passage", "row"]
# What a list of QnAs holds (Azure's GET .../qnas, the suggestions to accept): every kind but passages, which are
# unstructured content, never a QnA to Azure or to the person who owns the knowledge base
QNA_LIST_KINDS: tuple[RecordKind, ...] = ("qna", "row")


# QnA ids are int32 in the spec (QnaRecord.id, QnaPrompt.qnaId, the runtime's qnaId); a larger one could not be
# asked for by id, and one past 2**63 does not fit a database integer.  Here, not in formats.limits, as the stores
# that give ids out keep to it too.
MAX_QNA_ID = 2**31 - 1


@dataclass
class Prompt:
    """A follow-up prompt: a button labelled ``display_text`` that leads to QnA ``qna_id``."""

    display_order: int
    qna_id: int
    display_text: str


@dataclass
class Dialog:
    is_context_only: bool = False
    prompts: list[Prompt] = field(default_factory=list)


@dataclass
class QnA:
    """One question-answer pair.  ``id`` is None until the store assigns one."""

    questions: list[str]
    answer: str
    id: int | None = None
    source: str = DEFAULT_SOURCE
    metadata: dict[str, str] = field(default_factory=dict)
    dialog: Dialog = field(default_factory=Dialog)
    kind: RecordKind = "qna"
    # Active-learning clusters, kept verbatim as QnA Maker exports them.
    suggested_questions: list[dict] = field(default_factory=list)
    # Typed column values of a knowledge base with a schema (DateTime as ISO 8601 text).
    fields: dict[str, Any] = field(default_factory=dict)
    # When the store last wrote this record (ISO 8601); not part of its content.
    last_updated: str | None = field(default=None, compare=False)

    def normalised(self) -> "QnA":
        """Metadata is stored lower-cased, as Azure does; questions are trimmed."""
        self.metadata = {k.strip().lower(): v.strip().lower() for k, v in self.metadata.items()}
        self.questions = [q.strip() for q in self.questions if q and q.strip()]
        self.answer = self.answer.strip()
        self.source = (self.source or DEFAULT_SOURCE).strip() or DEFAULT_SOURCE
        return self


def authored_digest(q: QnA) -> str:
    """A digest of what an author edits in a record: its kind, questions, answer, metadata and dialog (prompts, and
    whether it is context-only), not its suggestions, typed fields or time.  A source keeps the digest of each record
    as its file wrote it (``Source.file_records``): a record whose digest differs was edited since, by whatever API
    or console, and a refresh leaves it as the author left it (``kb/source_edits.py``).  Ids, store and embedder do
    not enter it, so a reembed or a migration edits nothing."""
    payload = [q.kind, q.questions, q.answer, sorted(q.metadata.items()), q.dialog.is_context_only,
               [[p.display_order, p.qna_id, p.display_text] for p in q.dialog.prompts]]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()[:32]


@dataclass
class ProjectSettings:
    """A project's settings as an import file carries them: the ``Metadata`` of Azure's JSON export, the
    ``Settings.tsv`` (or sheet) of QnA Maker's KB replica.  None is "the file does not say", so an import
    changes only what its file gives; a description may be empty (an export of a project without one)."""

    description: str | None = None
    language: str | None = None
    default_answer: str | None = None
    multilingual: bool | None = None
    kb_id: str | None = None  # openqna's export of a project that kept its QnA Maker kbId


@dataclass
class UnstructuredFile:
    """A document an archive carries besides its QnAs (a KB replica's ``UnstructuredContent/``): its text is
    imported as passages of ``source``, as a document added as an unstructured source is."""

    name: str
    data: bytes
    source: str


@dataclass
class KnowledgeBaseContent:
    """What an import file carries: QnAs and synonym groups (word alterations); a file that has them also carries
    project settings, unstructured documents, and ``notes``: what it holds that no import keeps, which the
    importer tells the user rather than drop it unsaid."""

    qnas: list[QnA] = field(default_factory=list)
    synonyms: list[list[str]] = field(default_factory=list)
    settings: ProjectSettings | None = None
    documents: list[UnstructuredFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class OpenQnAError(Exception):
    """Base for errors a caller caused; surfaces map them to their own dialect."""

    code = "InvalidArgument"
    status = 400

    def __init__(self, message: str, *, target: str | None = None):
        super().__init__(message)
        self.message = message
        self.target = target


class StoreUnavailable(OpenQnAError):
    """The PostgreSQL server cannot be reached or refuses the connection (a command says so in one line); the store
    logs the outage once, and once that it is over."""

    code = "ServiceUnavailable"
    status = 503


class StoreFull(OpenQnAError):
    """The disk under the embedded store is full: SQLite stored nothing of the write.  A 507 that names the folder,
    on every surface, rather than a 500 that says "see its log"; writes succeed again once space is freed."""

    code = "InsufficientStorage"
    status = 507


class StoreReadOnly(OpenQnAError):
    """The embedded store is on a read-only mount, or this user may not write its folder or file: it is read, and each
    write is refused naming the folder (a 503, as a store that cannot take writes just now)."""

    code = "ServiceUnavailable"
    status = 503


class InvalidArgument(OpenQnAError):
    pass


def utf8_text(name: str, data: bytes) -> str:
    """``data`` as UTF-8 text (a BOM allowed), or ``InvalidArgument`` naming the file and the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"{name}: not UTF-8 text (byte {exc.start + 1} is {data[exc.start]:#04x}); "
                              "save it as UTF-8") from None


class NotFound(OpenQnAError):
    code = "NotFound"
    status = 404


class ProjectNotFound(NotFound):
    code = "ProjectNotFound"


class Conflict(OpenQnAError):
    code = "Conflict"
    status = 409


class FormatError(InvalidArgument):
    """A malformed import file; names the file, line and column of the problem."""

    def __init__(self, message: str, *, file: str, line: int | None = None, column: int | None = None):
        where = file
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {column}"
        super().__init__(f"{where}: {message}")
        self.file = file
        self.line = line
        self.column = column
