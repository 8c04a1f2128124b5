"""Documents as sources: a manual, FAQ page or article becomes QnAs and passages.

QnA pairs are extracted from headings the way QnA Maker did (with sub-headings as
follow-up prompts), and every section is also kept as passages of ``kind="passage"``
that cite their source, page and heading path.  Re-ingesting a changed document updates
only what changed: records keep their ids, unchanged text keeps its vectors, and records
whose section disappeared are deleted.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import PurePosixPath

from openqna.formats.limits import MAX_METADATA_VALUE_CHARS
from openqna.ingest import Chunk, ParsedDocument, chunk_document, extract_qnas, link_prompts
from openqna.kb.service import Service
from openqna.kb.source_edits import SourceEdits
from openqna.records import QnA

DOCUMENT_SUFFIXES = (".pdf", ".docx", ".html", ".htm", ".md", ".markdown", ".txt")


@dataclass
class IngestReport:
    qnas: int
    passages: int
    added: int
    updated: int
    unchanged: int
    deleted: int
    embedded: int
    pages: int
    notes: list[str] = field(default_factory=list)  # sections split to fit Azure's limits, and how
    written: list[int] = field(default_factory=list)  # the ids of the records written (added, updated, unchanged)


def suffix_from_content(data: bytes) -> str:
    """The suffix a URL's bytes show when its name shows none the importer reads (``/download/7``, a short
    link): ``.html`` for a web page, ``.pdf``, ``.docx`` and ``.xlsx`` by their signatures, else ``""``."""
    if data.lstrip()[:1] == b"<":
        return ".html"
    if data[:5] == b"%PDF-":
        return ".pdf"
    if data[:4] == b"PK\x03\x04":
        try:
            names = set(zipfile.ZipFile(BytesIO(data)).namelist())
        except zipfile.BadZipFile:
            return ""
        return ".docx" if "word/document.xml" in names else ".xlsx" if "xl/workbook.xml" in names else ""
    return ""


def is_document(name: str, data: bytes) -> bool:
    """True for a document; a .txt or .tsv that starts with a QnA header is a QnA file."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix != ".txt":
        return suffix in DOCUMENT_SUFFIXES
    first = data[:4096].decode("utf-8", "ignore").lstrip("\ufeff").split("\n", 1)[0].lower()
    return not ("\t" in first and "question" in first and "answer" in first)


def _passage(chunk: Chunk) -> QnA:
    metadata = {}
    if chunk.page_start is not None:
        metadata["page"] = str(chunk.page_start)
    if chunk.heading_path:
        heading = " > ".join(chunk.heading_path).replace(":", " ").replace("|", " ")
        metadata["section"] = " ".join(heading.split())[:MAX_METADATA_VALUE_CHARS]
    title = chunk.heading_path[-1] if chunk.heading_path else chunk.source
    return QnA([title[:1000]], chunk.text, source=chunk.source, metadata=metadata, kind="passage")


def ingest_document(service: Service, project: str, doc: ParsedDocument, *, source: str | None = None,
                    progress: bool = False, unstructured: bool = False, edits: SourceEdits | None = None
                    ) -> IngestReport:
    """Make a parsed document's QnAs and passages the records of ``source`` (default: its file name).

    ``unstructured`` (Azure's ``contentStructureKind: unstructured``) keeps passages only: the
    author declared the document is not a set of questions and answers.  ``edits``: a registered source's records
    and what its author edited, which stay as the author left them (``kb/source_edits.py``).
    """
    source = source or doc.source
    doc.source = source
    extracted = [] if unstructured else extract_qnas(doc)
    passages = [_passage(c) for c in chunk_document(doc)]
    service.ensure_project(project)
    existing = (list(edits.own.values()) if edits is not None else
                [q for q in service.store.list_qnas(project) if q.source.lower() == source.lower()])
    # Extracted QnAs keep the id of the record with the same question (the n-th of a repeated
    # heading takes the n-th such id), so prompts and links from outside stay stable.
    old_ids: dict[str, list[int]] = {}
    for q in sorted(existing, key=lambda q: q.id):
        if q.kind == "qna" and q.questions:
            old_ids.setdefault(q.questions[0], []).append(q.id)
    wanted = [old_ids[e.qna.questions[0]].pop(0) if old_ids.get(e.qna.questions[0]) else None for e in extracted]
    fresh = iter(service.store.reserve_ids(project, sum(1 for w in wanted if w is None)))
    ids = [w if w is not None else next(fresh) for w in wanted]
    qnas = link_prompts(extracted, ids)
    if edits is not None:
        qnas, _ = edits.split(qnas)
        passages, _ = edits.split(passages)
    report_qnas = service.upsert(project, qnas, progress=progress, match_content=False)
    report_passages = service.upsert(project, passages, progress=progress)
    keep = set(report_qnas.ids) | set(report_passages.ids)
    stale = edits.stale(keep) if edits is not None else [q.id for q in existing if q.id not in keep]
    if stale:
        service.store.delete_qnas(project, stale)
    pages = max((b.page or 0 for b in doc.blocks), default=0)
    return IngestReport(
        qnas=len(qnas), passages=len(passages),
        added=report_qnas.added + report_passages.added, updated=report_qnas.updated + report_passages.updated,
        unchanged=report_qnas.unchanged + report_passages.unchanged, deleted=len(stale),
        embedded=report_qnas.embedded + report_passages.embedded, pages=pages,
        notes=[f"{source}: {e.note}" for e in extracted if e.note], written=sorted(keep),
    )
