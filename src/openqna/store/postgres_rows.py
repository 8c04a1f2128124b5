"""How the server store writes a record's columns and reads them back (vectors straight into numpy), and its
reader of index rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo
from psycopg.types.json import Json

from openqna import strict_json
from openqna.records import Dialog, Prompt
from openqna.store.base import IndexRow


def json_value(value: Any) -> Json:
    """``value`` as a json column, its text unescaped (``ensure_ascii=False``) as SQLite's."""
    return Json(value, dumps=strict_json.dumps)


class _VectorLoader(Loader):
    """pgvector's binary ``vector`` straight into a float32 numpy array."""

    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        dim = int.from_bytes(bytes(data[:2]), "big")
        return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


class _VectorTextLoader(Loader):
    format = Format.TEXT

    def load(self, data: Buffer) -> np.ndarray:
        text = bytes(data).decode()[1:-1]
        return np.asarray([float(x) for x in text.split(",")] if text else [], dtype=np.float32)


def register_vector_types(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)  # dumpers for numpy arrays and pgvector.Vector
    info = TypeInfo.fetch(conn, "vector")
    assert info is not None  # register_vector above raises ProgrammingError when the type is missing
    conn.adapters.register_loader(info.oid, _VectorTextLoader)
    conn.adapters.register_loader(info.oid, _VectorLoader)


def dialog_json(d: Dialog) -> dict[str, Any]:
    return {"isContextOnly": d.is_context_only, "prompts": [[p.display_order, p.qna_id, p.display_text] for p in d.prompts]}


def dialog_from_json(raw: dict[str, Any]) -> Dialog:
    return Dialog(raw["isContextOnly"], [Prompt(o, q, t) for o, q, t in raw["prompts"]])


class PostgresIndexRows:
    """The index rows of one deployment, read in the transaction ``PostgresStore.read_index_rows`` holds open."""

    def __init__(self, db: psycopg.Connection, project_id: int, deployment: str):
        self._db, self._where = db, (project_id, deployment)
        row = db.execute("SELECT seq FROM versions WHERE project_id=%s AND deployment=%s", self._where).fetchone()
        self.version: int = row[0] if row else 0

    def settings(self) -> dict[str, Any]:
        row = self._db.execute("SELECT settings FROM projects WHERE id=%s", self._where[:1]).fetchone()
        return row[0] if row else {}

    def content_hashes(self) -> dict[int, str]:
        return dict(self._db.execute("SELECT id, content_hash FROM records WHERE project_id=%s AND deployment=%s",
                                     self._where).fetchall())

    def record_ids(self) -> list[int]:
        return [r[0] for r in self._db.execute("SELECT id FROM records WHERE project_id=%s AND deployment=%s"
                                               " ORDER BY id", self._where)]

    def dim(self) -> int:
        row = self._db.execute("SELECT vector_dims(embedding) FROM units WHERE project_id=%s AND deployment=%s"
                               " AND field IN ('q', 'a') LIMIT 1", self._where).fetchone()
        return row[0] if row else 1

    def rows(self, ids: list[int] | None = None, id_range: tuple[int, int] | None = None) -> list[IndexRow]:
        only, args = "", list(self._where)
        if ids is not None:
            only = " AND {}=ANY(%s)"
            args.append(list(ids))
        elif id_range is not None:
            only = " AND {} BETWEEN %s AND %s"
            args.extend(id_range)
        rows: dict[int, IndexRow] = {}
        for rid, kind, questions, source, metadata, context_only, fields, content_hash in self._db.execute(
            "SELECT id, kind, questions, source, metadata, (dialog->>'isContextOnly')::boolean, fields, content_hash"
            " FROM records WHERE project_id=%s AND deployment=%s" + only.format("id"), args):
            rows[rid] = IndexRow(rid, kind, source, metadata, context_only, questions, fields, content_hash)
        with self._db.cursor(binary=True) as cur:
            cur.execute("SELECT record_id, field, terms, embedding FROM units WHERE project_id=%s AND deployment=%s"
                        + only.format("record_id") + " ORDER BY record_id, field, ord", args)
            for rid, field, terms, vec in cur:
                row = rows.get(rid)
                if row is not None:
                    row.add_unit(field, terms, vec)
        return list(rows.values())

