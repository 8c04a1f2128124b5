"""How the embedded store writes a record's columns as text and reads them back, and its reader of index rows."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import numpy as np

from openqna.records import Dialog, Prompt
from openqna.store.base import MULTILINGUAL_FIELDS, IndexRow

TERM_SEP = "\t"  # analysed terms never contain whitespace other than the bigram space


def vector_blob(field: str, vector: np.ndarray) -> bytes:
    """A unit's vector as stored: float32, or float16 in the multilingual space (half the bytes; its cosines move
    by about 1e-3, far below what ranks or calibrates anything: tests/test_multilingual.py)."""
    return np.asarray(vector, dtype=np.float16 if field in MULTILINGUAL_FIELDS else np.float32).tobytes()


def blob_vector(field: str, blob: bytes) -> np.ndarray:
    """``vector_blob``'s inverse: a float32 vector (a read-only view of ``blob`` when stored as float32)."""
    if field in MULTILINGUAL_FIELDS:
        return np.frombuffer(blob, dtype=np.float16).astype(np.float32)
    return np.frombuffer(blob, dtype=np.float32)


def dialog_json(d: Dialog) -> str:
    return json.dumps({"isContextOnly": d.is_context_only,
                       "prompts": [[p.display_order, p.qna_id, p.display_text] for p in d.prompts]})


_NO_DIALOG = dialog_json(Dialog())


def dialog_from_json(s: str) -> Dialog:
    if s == _NO_DIALOG:  # most records: skip the parser (a search reads each answer's columns)
        return Dialog()
    raw = json.loads(s)
    return Dialog(raw["isContextOnly"], [Prompt(o, q, t) for o, q, t in raw["prompts"]])


def json_object(s: str) -> dict[str, Any]:
    return {} if s == "{}" else json.loads(s)


def json_list(s: str) -> list[Any]:
    return [] if s == "[]" else json.loads(s)


class SQLiteIndexRows:
    """The index rows of one deployment, read in the transaction ``SQLiteStore.read_index_rows`` holds open."""

    def __init__(self, db: sqlite3.Connection, project_id: int, deployment: str):
        self._db, self._where = db, (project_id, deployment)
        row = db.execute("SELECT seq FROM versions WHERE project_id=? AND deployment=?", self._where).fetchone()
        self.version: int = row[0] if row else 0

    def settings(self) -> dict[str, Any]:
        row = self._db.execute("SELECT settings FROM projects WHERE id=?", self._where[:1]).fetchone()
        return json.loads(row[0]) if row else {}

    def content_hashes(self) -> dict[int, str]:
        return dict(self._db.execute("SELECT id, content_hash FROM records WHERE project_id=? AND deployment=?",
                                     self._where).fetchall())

    def record_ids(self) -> list[int]:
        return [r[0] for r in self._db.execute("SELECT id FROM records WHERE project_id=? AND deployment=? ORDER BY id",
                                               self._where)]

    def dim(self) -> int:
        row = self._db.execute("SELECT length(vector) / 4 FROM units WHERE project_id=? AND deployment=?"
                               " AND field IN ('q', 'a') LIMIT 1", self._where).fetchone()
        return row[0] if row else 1

    def rows(self, ids: list[int] | None = None, id_range: tuple[int, int] | None = None) -> list[IndexRow]:
        only, args = "", list(self._where)
        if ids is not None:
            only = " AND record_id IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(ids))
        elif id_range is not None:
            only = " AND record_id BETWEEN ? AND ?"
            args.extend(id_range)
        rows: dict[int, IndexRow] = {}
        for rid, kind, questions, source, metadata, dialog, fields, content_hash in self._db.execute(
            "SELECT id, kind, questions, source, metadata, dialog, fields, content_hash FROM records"
            " WHERE project_id=? AND deployment=?" + only.replace("record_id", "id"), args,
        ):
            rows[rid] = IndexRow(rid, kind, source, json.loads(metadata), json.loads(dialog)["isContextOnly"],
                                 json.loads(questions), json.loads(fields), content_hash)
        for rid, field, terms, blob in self._db.execute(
            "SELECT record_id, field, terms, vector FROM units WHERE project_id=? AND deployment=?" + only +
            " ORDER BY record_id, field, ord", args,
        ):
            row = rows.get(rid)
            if row is None:  # written between the two reads: the next version picks it up
                continue
            row.add_unit(field, terms.split(TERM_SEP) if terms else [], blob_vector(field, blob))
        return list(rows.values())
