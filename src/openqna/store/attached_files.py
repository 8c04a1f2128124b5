"""The files of OpenAI vector stores, one row each (``vector_store_files``, schema 12): the statements both stores share.

A vector store (``kinds/vector_stores.py``) kept every file's state in its project's settings, so each file's change
parsed and rewrote them all: attaching n files cost n².  A row per file makes a change read and write that file alone;
the store's own state (name, expiry, batches) stays in the settings.  A file's change is a compare-and-set of its row
(``swap_attached_file``), so a job worker and requests in other processes never overwrite each other's changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openqna.store.base import AttachedFile
from openqna.store.statements import ID_BATCH, Dialect

_COLS = "file_id, seq, state"


class AttachedFileStatements(Dialect):
    """``AttachedFileStore`` (``store/base.py``) in the SQL both engines accept."""

    def _attached(self, row: tuple[Any, ...]) -> AttachedFile:
        return AttachedFile(row[0], int(row[1]), self._from_json(row[2]))

    def list_attached_files(self, project: str, file_ids: Iterable[str] | None = None) -> list[AttachedFile]:
        sql = f"SELECT {_COLS} FROM vector_store_files WHERE project_id=?"
        with self._reading() as db:
            pid = self._project_id(db, project)
            if file_ids is None:
                rows = db.execute(self._sql(sql), (pid,)).fetchall()
            else:
                wanted = sorted(set(file_ids))
                rows = []
                for start in range(0, len(wanted), ID_BATCH):
                    batch = wanted[start : start + ID_BATCH]
                    rows += db.execute(self._sql(f"{sql} AND file_id IN ({','.join('?' * len(batch))})"),
                                       (pid, *batch)).fetchall()
        files = [self._attached(r) for r in rows]
        files.sort(key=lambda f: (f.seq, f.file_id))
        return files

    def get_attached_file(self, project: str, file_id: str) -> AttachedFile | None:
        with self._reading() as db:
            pid = self._project_id(db, project)
            row = db.execute(self._sql(f"SELECT {_COLS} FROM vector_store_files WHERE project_id=? AND file_id=?"),
                             (pid, file_id)).fetchone()
        return None if row is None else self._attached(row)

    def put_attached_files(self, project: str, files: list[AttachedFile]) -> None:
        with self._tx() as db:
            pid = self._writer(db, project)
            self._many(db, self._sql("INSERT INTO vector_store_files VALUES(?,?,?,?) ON CONFLICT (project_id, file_id)"
                                     " DO UPDATE SET seq=EXCLUDED.seq, state=EXCLUDED.state"),
                       [(pid, f.file_id, f.seq, self._json(f.state)) for f in files])

    def swap_attached_file(self, project: str, file_id: str, expected: dict[str, Any],
                           state: dict[str, Any] | None) -> bool:
        with self._tx() as db:
            pid = self._writer(db, project)  # no other writer of the project until this commits
            row = db.execute(self._sql("SELECT state FROM vector_store_files WHERE project_id=? AND file_id=?"),
                             (pid, file_id)).fetchone()
            if row is None or self._from_json(row[0]) != expected:
                return False
            if state is None:
                db.execute(self._sql("DELETE FROM vector_store_files WHERE project_id=? AND file_id=?"), (pid, file_id))
            else:
                db.execute(self._sql("UPDATE vector_store_files SET state=? WHERE project_id=? AND file_id=?"),
                           (self._json(state), pid, file_id))
        return True
