"""Ids for the QnAs of a QnA file read as a source (Azure's sources "add", "replace" and a refresh).

QnA Maker and Azure exports number their QnAs from 1, so a file's ids are the file's own: written as they are, a
source's QnA 1 replaced the editorial QnA 1, or a document's, and the job said it succeeded.  A source's QnAs may take
only their own records' ids, or ids no record holds; the ids a source's records got stay theirs across refreshes, so
prompts, feedback and links from elsewhere keep pointing at the same QnA.  ``Writing.own_ids`` does the same for
``openqna import``, which merges files rather than keeping a source's records.
"""

from __future__ import annotations

from openqna.records import QnA, authored_digest
from openqna.store import Store


def source_ids(store: Store, project: str, source: str, qnas: list[QnA],
               recorded: dict[int, str] | None = None) -> dict[int, int]:
    """Give ``qnas``, the records of ``source`` read from its file, the ids they will be written with; returns the
    moves (file id -> id), which the file's prompts follow.

    A QnA takes, in this order: the id of the source's record whose ``recorded`` digest (``Source.file_records``: the
    record as the file last wrote it) is the QnA's (its row unchanged, even if the author edited the record since:
    ``kb/source_edits.py``); the id of the source's record with the same questions and answer (unchanged, it
    keeps its id even if the file renumbered it); the file's id, when that is the source's record (updated in place);
    the id of the source's record with the same first question, else with the same answer (a QnA edited in the file
    keeps the id it moved to when it was added); the file's id when no record holds it; else a fresh one.  A QnA
    without an id keeps none unless it matches one of the source's records (``Writing.upsert`` numbers it)."""
    for q in qnas:
        q.normalised()
    own = {r.id: r for r in store.list_qnas(project) if r.source.lower() == source.lower() and r.id is not None}
    named = {q.id for q in qnas if q.id is not None}
    held = set(store.content_hashes(project, list(named))) if named else set()
    given: dict[int, int] = {}  # position in ``qnas`` -> id
    free = set(own)  # the source's records no QnA of the file has taken yet

    def take(i: int, rid: int) -> None:
        given[i] = rid
        free.discard(rid)

    def match(key, row_key=None) -> None:  # the QnAs not yet given an id take the free record with their key, first
        by_key: dict[object, list[int]] = {}  # come first (``row_key``: a QnA's key, when not the record's ``key``)
        for rid in sorted(free):
            by_key.setdefault(key(own[rid]), []).append(rid)
        for i, q in enumerate(qnas):
            if i not in given and (ids := [r for r in by_key.get((row_key or key)(q), []) if r in free]):
                take(i, ids[0])

    if recorded:
        match(lambda r: recorded.get(r.id), authored_digest)
    match(lambda r: (r.kind, r.answer, tuple(r.questions)))
    for i, q in enumerate(qnas):
        if i not in given and q.id in free and own[q.id].kind == q.kind:
            take(i, q.id)
    match(lambda r: (r.kind, r.questions[0].casefold() if r.questions else None))
    match(lambda r: (r.kind, r.answer))
    used = set(given.values())
    for i, q in enumerate(qnas):
        if i not in given and q.id is not None and q.id not in held and q.id not in used:
            take(i, q.id)
            used.add(q.id)
    rest = [i for i, q in enumerate(qnas) if i not in given and q.id is not None]
    fresh: list[int] = []
    while len(fresh) < len(rest):  # ids no record has; a reserved id the file keeps for a QnA of its own is skipped
        fresh += [rid for rid in store.reserve_ids(project, len(rest) - len(fresh)) if rid not in used | named]
    for i, rid in zip(rest, fresh):
        take(i, rid)
    moves = {q.id: given[i] for i, q in enumerate(qnas) if q.id is not None and given[i] != q.id}
    for i, rid in given.items():
        qnas[i].id = rid
    for q in qnas:
        for prompt in q.dialog.prompts:
            if prompt.qna_id in named:
                prompt.qna_id = moves.get(prompt.qna_id, prompt.qna_id)
    return moves
