"""What an author changed in a source's records, which writing the source's file again leaves as the author left it.

Azure's "smart URL refresh" updates a source's QnAs "while retaining any manual edits made previously".  A source
keeps, per record, the digest of the record as its file last wrote it (``Source.file_records``,
``records.authored_digest``: kind, questions, answer, metadata, dialog).  When the file is written again (a refresh,
a ``replace`` with ``refresh``, the scheduled check of ``kb/refresh.py``):

- a record whose digest is still the recorded one was not edited: it follows the file (updated when its row changed,
  deleted when its row left the file);
- a record whose digest differs was edited, by whatever surface (the Azure or QnA Maker authoring APIs, the console,
  openqna's own API, an accepted suggestion): it stays as the author left it, when its row changed in the file too
  (the author's edit wins) and when its row left the file (as Azure keeps it).  So does a record of the source that
  the author added (its id has no digest).  An edit made back to the file's text is no edit;
- a record the author deleted stays deleted while its row is unchanged in the file; a row that changed comes back.

The file's rows are matched to records as before (``source_ids`` for a QnA file, first by the digest recorded for
each record; a document's QnAs by their first question, its passages by their text).  A source registered before
schema 14 got its digests from its records as they were then (the store's migration): edits made before cannot be
told from the file's text.  Deleting a source deletes all its records, edited or not, as Azure does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from openqna.records import QnA, authored_digest
from openqna.store import Store


@dataclass
class SourceEdits:
    """A source's records (``own``, by id) and its recorded digests (``recorded``; None: none recorded yet, so no
    record counts as edited): which records the author edited, and which the author deleted."""

    own: dict[int, QnA]
    recorded: dict[int, str] | None
    # the digests of the records written this time, and of the file's rows an edited or deleted record stands for
    written: dict[int, str] = field(default_factory=dict)

    @cached_property
    def edited(self) -> set[int]:
        if self.recorded is None:
            return set()
        return {rid for rid, r in self.own.items() if authored_digest(r) != self.recorded.get(rid)}

    def split(self, rows: list[QnA]) -> tuple[list[QnA], set[int]]:
        """The file's ``rows`` (ids given, or None for ones the write numbers) to write, and the ids of the rows left
        out: those whose record the author edited (matched by id, or an id-less row by the digest recorded for the
        record) or deleted (matched by digest).  Prompts to a row left out for a deletion are taken out of the others
        (they led to the deleted QnA)."""
        if self.recorded is None:
            return rows, set()
        edited = self.edited
        by_digest = {digest: rid for rid, digest in self.recorded.items() if rid in edited or rid not in self.own}
        keep, left_out, deleted = [], set(), set()
        for q in rows:
            digest = authored_digest(q.normalised())  # as it would be stored (metadata lower-cased)
            rid = q.id if q.id in edited else by_digest.get(digest) if q.id is None or q.id not in self.own else None
            if rid is None or rid in left_out:
                keep.append(q)
                continue
            left_out.add(rid)
            self.written[rid] = digest  # the file's text now: the author's record still differs from it
            if rid not in self.own and q.id is not None:
                deleted.add(q.id)
        for q in keep:
            q.dialog.prompts = [p for p in q.dialog.prompts if p.qna_id not in deleted]
        return keep, left_out

    def stale(self, written: Iterable[int]) -> list[int]:
        """The source's records to delete after the file's rows were written as ``written``: those no row wrote, but
        the edited ones and those a row left out of the write stands for."""
        keep = set(written) | self.edited | set(self.written)
        return sorted(rid for rid in self.own if rid not in keep)

    def record(self, store: Store, project: str, written: list[int]) -> dict[int, str]:
        """The digests to keep after the write: those of the records ``written`` (read back, as stored) and of the
        rows that stand for a record left as the author left it."""
        stored = store.get_qnas(project, written)
        return {**self.written, **{rid: authored_digest(q) for rid, q in stored.items()}}
