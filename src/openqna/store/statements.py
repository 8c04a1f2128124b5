"""The statements both stores write alike: the write transactions of records, their counts, deployments' list,
sources, feedback, the query log, the job queue's reads, files and keys.

Each is written once, with ``?`` placeholders, in the SQL that SQLite and PostgreSQL both accept (``ON CONFLICT ...
DO UPDATE`` upserts, ``CAST(? AS TEXT)``); a store says how it differs in a few hooks (``Dialect``): its placeholder,
how it opens a read and a write, how it encodes and decodes a JSON column, and how it looks a project up inside a
transaction.  What the engines do differently stays in ``sqlite.py`` and ``postgres.py``: ids and versions (locks,
sequences), records and units (``COPY``, arrays), the deployment copy, and the job queue's claims and leases.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from functools import cache
from typing import Any

from openqna import settings
from openqna.clock import now_iso
from openqna.records import Conflict, Dialog, InvalidArgument, NotFound, ProjectNotFound, QnA
from openqna.store.base import (
    LIVE,
    AcceptedQuestion,
    ApiKey,
    Deployment,
    Job,
    LoggedQuery,
    QuerySummary,
    QuestionCount,
    Source,
    SourceRefresh,
    StoredFile,
    StoredQnA,
    TestRun,
    TestSet,
    Trained,
    Version,
    default_answer_of,
    file_records,
    file_records_json,
)

# A kept version's content is stored as a deployment of this name (records, units and synonyms, as a deployment's):
# deploying or rolling back copies it, and no user-made deployment can be named so (names starting with "~" are
# refused; Azure's are letters, digits, '-' and '_').
VERSION_PREFIX = "~v"


def version_name(version: int) -> str:
    return f"{VERSION_PREFIX}{version}"


# Ids per statement when a read names records: SQLite allows 999 variables in a statement before 3.32.
ID_BATCH = 500


def record_ids(ids: Iterable[int]) -> list[int]:
    """``ids`` that can name a record, each once, ascending, as ints (numpy's too): an id past SQL's 64-bit integers
    names none (a client may send one; the engines would refuse it as a parameter)."""
    return sorted({n for n in map(int, ids) if -(2**63) <= n < 2**63})


def dialog_key(dialog: Dialog) -> str:
    """``dialog`` as one string, the same on every store (part of a content hash)."""
    return json.dumps([dialog.is_context_only, [[p.display_order, p.qna_id, p.display_text] for p in dialog.prompts]],
                      ensure_ascii=False)


def id_batches(ids: Iterable[int]) -> Iterator[list[int]]:
    """``record_ids(ids)`` in lists of at most ``ID_BATCH``, one per statement."""
    unique = record_ids(ids)
    for start in range(0, len(unique), ID_BATCH):
        yield unique[start : start + ID_BATCH]


@cache
def percent_marks(sql: str) -> str:
    """``sql`` with psycopg's ``%s`` placeholders for ``?`` (a statement here never holds ``%`` or a literal ``?``)."""
    if "%" in sql:
        raise ValueError(f"a shared statement holds '%', which psycopg would read as a placeholder: {sql}")
    return sql.replace("?", "%s")


class Dialect:
    """What a store supplies so that ``SharedStatements`` can run its SQL."""

    _EMPTY_BLOB = "x''"  # an empty binary value, selected in place of a file's data

    def _sql(self, sql: str) -> str:
        """``sql`` in the store's placeholders."""
        return sql

    def _reading(self) -> AbstractContextManager[Any]:
        """A connection for reads outside a transaction."""
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[Any]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        raise NotImplementedError

    def _project_id(self, db: Any, name: str) -> int:
        raise NotImplementedError

    def _deployment_pid(self, db: Any, project: str, deployment: str) -> int:
        """The project's id once its deployment is known to exist; raises ``ProjectNotFound`` or ``NotFound``."""
        raise NotImplementedError

    def _writer(self, db: Any, project: str) -> int:
        """The project's id, with the project held against other writers until the transaction ends."""
        return self._project_id(db, project)

    def _bump(self, db: Any, project_id: int, deployment: str) -> None:
        """Move the deployment's version to a new value of the store's change sequence."""
        raise NotImplementedError

    def _write_qnas(self, db: Any, pid: int, items: list[StoredQnA]) -> list[int]:
        raise NotImplementedError

    def _delete_records(self, db: Any, pid: int, ids: list[int]) -> int:
        raise NotImplementedError

    def _write_synonyms(self, db: Any, pid: int, groups: list[list[str]]) -> None:
        raise NotImplementedError

    # The FROM item and the target of one prompt of ``r.dialog`` (stored as ``[order, qnaId, text]``), for a query
    # that finds the records with a prompt to given ids in the engine rather than in Python.
    _PROMPT_TARGETS = ""

    @staticmethod
    def _dialog_param(dialog: Dialog) -> Any:
        """``dialog`` as a parameter of the dialog column."""
        raise NotImplementedError

    @staticmethod
    def _dialog_of(value: Any) -> Dialog:
        """The dialog column's value as a ``Dialog``."""
        raise NotImplementedError

    def _many(self, db: Any, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """``sql`` once per row, in the transaction of ``db``."""
        raise NotImplementedError

    def _copy_deployment(self, db: Any, pid: int, source: str, target: str) -> None:
        """Replace ``target``'s records, units and synonyms with a copy of ``source``'s (a deploy, or a version)."""
        raise NotImplementedError

    def _qna_row(self, row: tuple[Any, ...]) -> Any:
        """A ``QnA`` of a row of ``_QNA_COLS``."""
        raise NotImplementedError

    # the columns of a record ``_qna_row`` reads, in its order (each dialect reads their values its own way)
    _QNA_COLS = "id, kind, questions, answer, source, metadata, dialog, suggestions, fields, modified"

    @staticmethod
    def _json(value: Any) -> Any:
        """``value`` as a parameter of a JSON column."""
        raise NotImplementedError

    @staticmethod
    def _from_json(value: Any) -> Any:
        """A JSON column's value as Python."""
        raise NotImplementedError


_FILE_COLS = "id, filename, purpose, bytes, created_at, status, {data}, project, scope, expires_at"


class SharedStatements(Dialect):
    """The Store methods whose SQL the two engines share (``Store`` in ``store/base.py`` says what each does)."""

    # -- records: the transactions (what is written in them is each engine's own) -----------------------------------
    def put_qnas(self, project: str, items: list[StoredQnA]) -> list[int]:
        """Insert or replace records; records without an id get the next free one."""
        with self._tx() as db:
            pid = self._writer(db, project)
            ids = self._write_qnas(db, pid, items)
            if items:
                self._bump(db, pid, LIVE)
        return ids

    def replace_qnas(self, project: str, items: list[StoredQnA], delete: list[int],
                     synonyms: list[list[str]] | None = None) -> list[int]:
        """``put_qnas``, ``delete_qnas`` and ``set_synonyms`` (when given) in one transaction: an import."""
        with self._tx() as db:
            pid = self._writer(db, project)
            ids = self._write_qnas(db, pid, items) if items else []
            deleted = self._delete_records(db, pid, delete)
            if deleted:
                self._unlink_prompts(db, pid, delete)
            if synonyms is not None:
                self._write_synonyms(db, pid, synonyms)
            if items or deleted or synonyms is not None:
                db.execute(self._sql("UPDATE projects SET modified=? WHERE id=?"), (now_iso(), pid))
                self._bump(db, pid, LIVE)
        return ids

    def delete_qnas(self, project: str, ids: list[int]) -> int:
        with self._tx() as db:
            pid = self._writer(db, project)
            deleted = self._delete_records(db, pid, ids)
            if deleted:
                self._unlink_prompts(db, pid, ids)
                self._bump(db, pid, LIVE)
        return deleted

    def _prompting_rows(self, db: Any, pid: int, cols: str, ids: list[int]) -> list[tuple[Any, ...]]:
        """``cols`` of the live records with a follow-up prompt to one of ``ids``: one query per ``ID_BATCH`` ids,
        the prompts read by the engine (10,000 QnAs are not sent to Python to find the few that point at one)."""
        rows: list[tuple[Any, ...]] = []
        for batch in id_batches(ids):
            rows += db.execute(self._sql(
                f"SELECT {cols} FROM records r WHERE r.project_id=? AND r.deployment=? AND EXISTS(SELECT 1 FROM"
                f" {self._PROMPT_TARGETS} IN ({','.join('?' * len(batch))})) ORDER BY r.id"),
                (pid, LIVE, *batch)).fetchall()
        return list({row[0]: row for row in rows}.values())  # a record pointing at two batches: once

    def records_prompting(self, project: str, ids: Iterable[int]) -> dict[int, QnA]:
        """The live records with a follow-up prompt to one of ``ids``, by id."""
        with self._reading() as db:
            pid = self._project_id(db, project)
            rows = self._prompting_rows(db, pid, ", ".join(f"r.{c}" for c in self._QNA_COLS.split(", ")),
                                        list(ids))
        return {row[0]: self._qna_row(row) for row in rows}

    def _unlink_prompts(self, db: Any, pid: int, ids: list[int]) -> int:
        """Take the prompts to ``ids`` (just deleted) out of the live records that hold them, in the deleting
        transaction: the live state never offers a button to nothing.  Each record changed gets a new ``modified``
        (an editor holding the old copy is told of the change) and a new content hash (derived from the old one and
        the new dialog: a deploy of the new content is a new version, the index reloads the record, and the next
        write of it is never taken for unchanged).  Returns how many records changed."""
        gone = set(record_ids(ids))
        stamp = now_iso()
        changed = []
        for rid, raw, old_hash in self._prompting_rows(db, pid, "r.id, r.dialog, r.content_hash", ids):
            dialog = self._dialog_of(raw)
            dialog.prompts = [p for p in dialog.prompts if p.qna_id not in gone]
            new_hash = hashlib.sha256(f"{old_hash}|{dialog_key(dialog)}".encode()).hexdigest()
            changed.append((self._dialog_param(dialog), new_hash, stamp, pid, LIVE, rid))
        if changed:
            self._many(db, self._sql("UPDATE records SET dialog=?, content_hash=?, modified=? WHERE project_id=?"
                                     " AND deployment=? AND id=?"), changed)
        return len(changed)

    def set_synonyms(self, project: str, groups: list[list[str]]) -> None:
        with self._tx() as db:
            pid = self._writer(db, project)
            self._write_synonyms(db, pid, groups)
            self._bump(db, pid, LIVE)

    # -- records' counts and deployments ----------------------------------------------------------------------------
    def content_hashes(self, project: str, ids: Iterable[int] | None = None) -> dict[int, str]:
        """Every live record's content hash, by id; or, given ``ids``, those of ``ids`` that are records (an edit
        reads the hashes of what it writes, not every record of the project)."""
        sql = "SELECT id, content_hash FROM records WHERE project_id=? AND deployment=?"
        with self._reading() as db:
            pid = self._project_id(db, project)
            if ids is None:
                return dict(db.execute(self._sql(sql), (pid, LIVE)).fetchall())
            out: dict[int, str] = {}
            for batch in id_batches(ids):
                out.update(db.execute(self._sql(f"{sql} AND id IN ({','.join('?' * len(batch))})"),
                                      (pid, LIVE, *batch)).fetchall())
        return out

    def source_records(self, project: str, source: str) -> list[Any]:
        """The live records of ``source`` (exactly that string), by id: found through an index, however many records
        the project holds (a vector store's job reads one file's chunks as it indexes the file)."""
        with self._reading() as db:
            pid = self._project_id(db, project)
            rows = db.execute(self._sql(f"SELECT {self._QNA_COLS} FROM records WHERE project_id=? AND deployment=?"
                                        " AND source=? ORDER BY id"), (pid, LIVE, source)).fetchall()
        return [self._qna_row(r) for r in rows]

    def count_qnas(self, project: str, deployment: str = LIVE) -> int:
        with self._reading() as db:
            pid = self._deployment_pid(db, project, deployment)
            row = db.execute(self._sql("SELECT count(*) FROM records WHERE project_id=? AND deployment=?"),
                             (pid, deployment)).fetchone()
        count: int = row[0]  # an aggregate without GROUP BY returns one row
        return count

    def count_kinds(self, project: str, deployment: str = LIVE) -> dict[str, int]:
        with self._reading() as db:
            pid = self._deployment_pid(db, project, deployment)
            rows = db.execute(self._sql("SELECT kind, count(*) FROM records WHERE project_id=? AND deployment=?"
                                        " GROUP BY kind"), (pid, deployment)).fetchall()
        return {kind: count for kind, count in rows}

    def list_deployments(self, project: str) -> list[Deployment]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            rows = db.execute(self._sql(
                "SELECT d.name, d.last_deployed, (SELECT e.version FROM deploy_events e WHERE e.project_id=d.project_id"
                " AND e.deployment=d.name ORDER BY e.seq DESC LIMIT 1) FROM deployments d WHERE d.project_id=?"
                " ORDER BY d.name"), (pid,)).fetchall()
            answers = dict(db.execute(self._sql("SELECT version, default_answer FROM deploy_versions WHERE"
                                                " project_id=?"), (pid,)).fetchall())
        return [Deployment(name, when, version, answers.get(version)) for name, when, version in rows]

    # -- deploys and versions --------------------------------------------------------------------------------------
    def deploy(self, project: str, deployment: str, *, version: int | None = None, by: str = "") -> Deployment:
        """Copy the live state of ``project`` to ``deployment`` (DESIGN decision 2), or, with ``version``, the content
        a kept version holds (a rollback), in one transaction, and record the deploy (``list_versions``).

        The live state's content is kept as a version of its own (``version_name``) unless a kept version already
        holds the same content (its hash); a deployment made before versions were kept first becomes a version
        itself, so that the first deploy over it can be rolled back.  Past ``OPENQNA_VERSIONS_KEPT`` versions, the
        oldest that no deployment holds lose their content (they stay listed)."""
        if deployment == LIVE:
            raise ValueError("'test' is the live state and cannot be a deployment target")
        if deployment.startswith("~"):
            raise InvalidArgument(f"Deployment name '{deployment}' may not start with '~'.", target="deploymentName")
        stamp = now_iso()
        with self._tx() as db:
            pid = self._writer(db, project)
            held = db.execute(self._sql("SELECT last_deployed FROM deployments WHERE project_id=? AND name=?"),
                              (pid, deployment)).fetchone()
            if held is not None and self._held_version(db, pid, deployment) is None:
                self._keep_version(db, pid, deployment, held[0], "", deployment)  # deployed before versions
            if version is None:
                version = self._keep_version(db, pid, LIVE, stamp, by, deployment)
            else:
                row = db.execute(self._sql("SELECT kept FROM deploy_versions WHERE project_id=? AND version=?"),
                                 (pid, version)).fetchone()
                if row is None or not row[0]:
                    raise NotFound(f"Version {version} of project '{project}' is not kept: "
                                   + ("it was never deployed." if row is None else
                                      f"only the latest {settings.versions_kept()} versions keep their content."))
            self._copy_deployment(db, pid, version_name(version), deployment)
            db.execute(self._sql("INSERT INTO deployments VALUES(?,?,?) ON CONFLICT (project_id, name)"
                                 " DO UPDATE SET last_deployed=excluded.last_deployed"), (pid, deployment, stamp))
            self._record_deploy(db, pid, deployment, version, stamp, by)
            db.execute(self._sql("UPDATE projects SET last_deployed=? WHERE id=?"), (stamp, pid))
            self._drop_old_versions(db, pid)
            self._bump(db, pid, deployment)
        return Deployment(deployment, stamp, version)

    def record_version(self, project: str, version: Version) -> None:
        if version.kept:
            raise ValueError("record_version records versions whose content is gone; deploy kept ones")
        with self._tx() as db:
            pid = self._writer(db, project)
            row = db.execute(self._sql("SELECT kept FROM deploy_versions WHERE project_id=? AND version=?"),
                             (pid, version.version)).fetchone()
            if row is None:
                db.execute(self._sql("INSERT INTO deploy_versions VALUES(?,?,?,?,?,?,?,0,?)"),
                           (pid, version.version, version.deployed_at, version.deployed_by, version.qnas,
                            version.passages, version.hash, version.default_answer))
            elif row[0]:
                raise Conflict(f"Version {version.version} of project '{project}' is kept here: it cannot be recorded"
                               " as one whose content is gone.")
            self._record_deploy(db, pid, version.deployment, version.version, version.deployed_at,
                                version.deployed_by)

    def _held_version(self, db: Any, pid: int, deployment: str) -> int | None:
        row = db.execute(self._sql("SELECT version FROM deploy_events WHERE project_id=? AND deployment=?"
                                   " ORDER BY seq DESC LIMIT 1"), (pid, deployment)).fetchone()
        return None if row is None else int(row[0])

    def _content_hash(self, db: Any, pid: int, deployment: str) -> str:
        """One hash of a deployment's content: its records' ids and content hashes, and its synonyms."""
        digest = hashlib.sha256()
        for rid, chash in db.execute(self._sql("SELECT id, content_hash FROM records WHERE project_id=? AND"
                                               " deployment=? ORDER BY id"), (pid, deployment)):
            digest.update(f"{rid}:{chash};".encode())
        row = db.execute(self._sql("SELECT groups FROM synonyms WHERE project_id=? AND deployment=?"),
                         (pid, deployment)).fetchone()
        groups = self._from_json(row[0]) if row is not None and row[0] is not None else []
        digest.update(json.dumps(groups or [], ensure_ascii=False, sort_keys=True).encode())
        row = db.execute(self._sql("SELECT hash FROM trained WHERE project_id=? AND deployment=?"),
                         (pid, deployment)).fetchone()
        if row is not None:  # only then: the hashes of versions made before training stay what they were
            digest.update(f"trained:{row[0]};".encode())
        return digest.hexdigest()

    def _default_answer(self, db: Any, pid: int) -> str:
        """The project's default answer now (``Project.default_answer``), which a version deployed now keeps."""
        row = db.execute(self._sql("SELECT settings FROM projects WHERE id=?"), (pid,)).fetchone()
        return default_answer_of(self._from_json(row[0]) if row is not None else None)

    def _keep_version(self, db: Any, pid: int, source: str, stamp: str, by: str, deployment: str) -> int:
        """The number of a kept version holding ``source``'s content and the project's default answer now: an existing
        one with the same hash and default answer, else a new one (its content copied from ``source``), recorded with
        the counts."""
        content = self._content_hash(db, pid, source)
        default_answer = self._default_answer(db, pid)
        row = db.execute(self._sql("SELECT version FROM deploy_versions WHERE project_id=? AND hash=? AND kept=1"
                                   " AND default_answer=? ORDER BY version DESC LIMIT 1"),
                         (pid, content, default_answer)).fetchone()
        if row is not None:
            return int(row[0])
        last = db.execute(self._sql("SELECT max(version) FROM deploy_versions WHERE project_id=?"), (pid,)).fetchone()
        version = int(last[0] or 0) + 1
        kinds = dict(db.execute(self._sql("SELECT kind, count(*) FROM records WHERE project_id=? AND deployment=?"
                                          " GROUP BY kind"), (pid, source)).fetchall())
        passages = int(kinds.pop("passage", 0))
        db.execute(self._sql("INSERT INTO deploy_versions VALUES(?,?,?,?,?,?,?,1,?)"),
                   (pid, version, stamp, by, sum(int(n) for n in kinds.values()), passages, content, default_answer))
        self._copy_deployment(db, pid, source, version_name(version))
        if source != LIVE:  # a deployment made before versions: its deploy is the version's first
            self._record_deploy(db, pid, deployment, version, stamp, by)
        return version

    def _record_deploy(self, db: Any, pid: int, deployment: str, version: int, stamp: str, by: str) -> None:
        last = db.execute(self._sql("SELECT max(seq) FROM deploy_events WHERE project_id=?"), (pid,)).fetchone()
        db.execute(self._sql("INSERT INTO deploy_events VALUES(?,?,?,?,?,?)"),
                   (pid, int(last[0] or 0) + 1, deployment, version, stamp, by))

    def _drop_old_versions(self, db: Any, pid: int) -> None:
        """Drop the content of kept versions past the newest ``OPENQNA_VERSIONS_KEPT``, but for those a deployment
        holds now."""
        kept = [int(r[0]) for r in db.execute(self._sql("SELECT version FROM deploy_versions WHERE project_id=? AND"
                                                        " kept=1 ORDER BY version DESC"), (pid,)).fetchall()]
        names = [r[0] for r in db.execute(self._sql("SELECT name FROM deployments WHERE project_id=?"),
                                          (pid,)).fetchall()]
        held = {self._held_version(db, pid, name) for name in names}
        for version in kept[settings.versions_kept():]:
            if version in held:
                continue
            for table in ("records", "units", "synonyms", "trained"):
                db.execute(self._sql(f"DELETE FROM {table} WHERE project_id=? AND deployment=?"),
                           (pid, version_name(version)))
            db.execute(self._sql("UPDATE deploy_versions SET kept=0 WHERE project_id=? AND version=?"), (pid, version))

    def list_versions(self, project: str) -> list[Version]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            rows = db.execute(self._sql(
                "SELECT e.deployment, e.version, e.deployed_at, e.deployed_by, v.qnas, v.passages, v.hash, v.kept,"
                " v.default_answer,"
                " e.seq = (SELECT max(l.seq) FROM deploy_events l WHERE l.project_id=e.project_id"
                " AND l.deployment=e.deployment) AND EXISTS (SELECT 1 FROM deployments d WHERE d.project_id="
                "e.project_id AND d.name=e.deployment) FROM deploy_events e JOIN deploy_versions v ON"
                " v.project_id=e.project_id AND v.version=e.version WHERE e.project_id=? ORDER BY e.seq"),
                (pid,)).fetchall()
        return [Version(r[0], int(r[1]), r[2], r[3], int(r[4]), int(r[5]), r[6], bool(r[7]), bool(r[9]), r[8])
                for r in rows]

    def version_records(self, project: str, version: int) -> list[Any]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            row = db.execute(self._sql("SELECT kept FROM deploy_versions WHERE project_id=? AND version=?"),
                             (pid, version)).fetchone()
            if row is None or not row[0]:
                raise NotFound(f"Version {version} of project '{project}' is "
                               + ("not a version: none was deployed with that number." if row is None else
                                  "no longer kept (OPENQNA_VERSIONS_KEPT)."))
            rows = db.execute(self._sql(f"SELECT {self._QNA_COLS} FROM records WHERE project_id=? AND deployment=?"
                                        " ORDER BY id"), (pid, version_name(version))).fetchall()
        return [self._qna_row(r) for r in rows]

    def version_synonyms(self, project: str, version: int) -> list[list[str]]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            row = db.execute(self._sql("SELECT groups FROM synonyms WHERE project_id=? AND deployment=?"),
                             (pid, version_name(version))).fetchone()
        groups = self._from_json(row[0]) if row is not None and row[0] is not None else []
        return list(groups or [])

    # -- sources and feedback --------------------------------------------------------------------------------------
    def list_sources(self, project: str) -> list[Source]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            rows = db.execute(self._sql(
                "SELECT source, display_name, source_uri, source_kind, content_structure_kind, content_hash,"
                " last_updated, file_records FROM sources WHERE project_id=? ORDER BY source"), (pid,)).fetchall()
        return [Source(r[0], r[1], r[2], r[3], r[4], r[5], r[6], file_records(r[7])) for r in rows]

    def put_source(self, project: str, source: Source) -> None:
        source.last_updated = now_iso()
        with self._tx() as db:
            pid = self._project_id(db, project)
            db.execute(self._sql(
                "INSERT INTO sources VALUES(?,?,?,?,?,?,?,?,?) ON CONFLICT (project_id, source) DO UPDATE"
                " SET display_name=EXCLUDED.display_name, source_uri=EXCLUDED.source_uri,"
                " source_kind=EXCLUDED.source_kind, content_structure_kind=EXCLUDED.content_structure_kind,"
                " content_hash=EXCLUDED.content_hash, last_updated=EXCLUDED.last_updated,"
                " file_records=EXCLUDED.file_records"),
                (pid, source.source, source.display_name, source.source_uri, source.source_kind,
                 source.content_structure_kind, source.content_hash, source.last_updated,
                 file_records_json(source.file_records)))

    def delete_source(self, project: str, source: str) -> bool:
        with self._tx() as db:
            pid = self._project_id(db, project)
            deleted: bool = db.execute(self._sql("DELETE FROM sources WHERE project_id=? AND source=?"),
                                       (pid, source)).rowcount > 0
            db.execute(self._sql("DELETE FROM source_refresh WHERE project_id=? AND source=?"), (pid, source))
        return deleted

    _REFRESH_COLS = "source, every_seconds, next_due, checked, changed, etag, last_modified, outcome"

    @staticmethod
    def _refresh_row(row: Any) -> SourceRefresh:
        return SourceRefresh(row[0], int(row[1]), row[2], row[3], row[4], row[5], row[6], json.loads(row[7] or "{}"))

    def list_source_refreshes(self, project: str) -> dict[str, SourceRefresh]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            rows = db.execute(self._sql(f"SELECT {self._REFRESH_COLS} FROM source_refresh WHERE project_id=?"
                                        " ORDER BY source"), (pid,)).fetchall()
        return {r[0]: self._refresh_row(r) for r in rows}

    def put_source_refresh(self, project: str, refresh: SourceRefresh) -> None:
        with self._tx() as db:
            pid = self._project_id(db, project)
            db.execute(self._sql(
                "INSERT INTO source_refresh VALUES(?,?,?,?,?,?,?,?,?) ON CONFLICT (project_id, source) DO UPDATE"
                " SET every_seconds=EXCLUDED.every_seconds, next_due=EXCLUDED.next_due, checked=EXCLUDED.checked,"
                " changed=EXCLUDED.changed, etag=EXCLUDED.etag, last_modified=EXCLUDED.last_modified,"
                " outcome=EXCLUDED.outcome"),
                (pid, refresh.source, refresh.every, refresh.next_due, refresh.checked, refresh.changed, refresh.etag,
                 refresh.last_modified, json.dumps(refresh.outcome, ensure_ascii=False)))

    def due_source_refreshes(self, now: str) -> list[tuple[str, SourceRefresh]]:
        cols = ", ".join(f"r.{c.strip()}" for c in self._REFRESH_COLS.split(","))
        with self._reading() as db:
            rows = db.execute(self._sql(
                f"SELECT p.name, {cols} FROM source_refresh r JOIN projects p ON p.id=r.project_id"
                " WHERE r.every_seconds > 0 AND r.next_due <> '' AND r.next_due <= ? ORDER BY r.next_due"),
                (now,)).fetchall()
        return [(r[0], self._refresh_row(r[1:])) for r in rows]

    def claim_source_refresh(self, project: str, source: str, due: str, next_due: str) -> bool:
        with self._tx() as db:
            pid = self._project_id(db, project)
            claimed: bool = db.execute(self._sql(
                "UPDATE source_refresh SET next_due=? WHERE project_id=? AND source=? AND next_due=?"),
                (next_due, pid, source, due)).rowcount == 1
        return claimed

    def add_feedback(self, project: str, records: list[tuple[int, str, str]]) -> None:
        stamp = now_iso()
        with self._tx() as db:
            pid = self._project_id(db, project)
            self._many(db, self._sql("INSERT INTO feedback VALUES(?,?,?,?,?)"),
                       [(pid, qna_id, question, user_id, stamp) for qna_id, question, user_id in records])

    def list_feedback(self, project: str, ids: Iterable[int] | None = None) -> dict[int, list[tuple[str, int]]]:
        """Per QnA (every one, or those of ``ids``), each distinct user question and how often it was sent, most
        frequent first."""
        group = " GROUP BY qna_id, question ORDER BY qna_id, count(*) DESC, question"
        sql = "SELECT qna_id, question, count(*) FROM feedback WHERE project_id=?"
        with self._reading() as db:
            pid = self._project_id(db, project)
            if ids is None:
                rows = db.execute(self._sql(sql + group), (pid,)).fetchall()
            else:
                rows = []
                for batch in id_batches(ids):
                    rows += db.execute(self._sql(f"{sql} AND qna_id IN ({','.join('?' * len(batch))}){group}"),
                                       (pid, *batch)).fetchall()
        out: dict[int, list[tuple[str, int]]] = {}
        for qna_id, question, count in rows:
            out.setdefault(qna_id, []).append((question, count))
        return out

    def delete_feedback(self, project: str, qna_id: int, question: str | None = None) -> int:
        with self._tx() as db:
            pid = self._project_id(db, project)
            if question is None:
                cursor = db.execute(self._sql("DELETE FROM feedback WHERE project_id=? AND qna_id=?"), (pid, qna_id))
            else:
                cursor = db.execute(self._sql("DELETE FROM feedback WHERE project_id=? AND qna_id=? AND question=?"),
                                    (pid, qna_id, question))
            deleted: int = cursor.rowcount
        return deleted

    def add_accepted(self, project: str, accepted: list[AcceptedQuestion]) -> None:
        stamp = now_iso()
        with self._tx() as db:
            pid = self._project_id(db, project)
            self._many(db, self._sql("INSERT INTO accepted_questions VALUES(?,?,?,?,?)"),
                       [(pid, a.qna_id, a.question, a.via, a.accepted or stamp) for a in accepted])

    def list_accepted(self, project: str) -> list[AcceptedQuestion]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            rows = db.execute(self._sql("SELECT qna_id, question, via, created FROM accepted_questions"
                                        " WHERE project_id=? ORDER BY created, qna_id, question"), (pid,)).fetchall()
        return [AcceptedQuestion(int(r[0]), r[1], r[2], r[3]) for r in rows]

    # -- query log --------------------------------------------------------------------------------------------------
    def log_queries(self, project: str, queries: list[LoggedQuery]) -> None:
        with self._tx() as db:
            pid = self._project_id(db, project)
            self._many(db, self._sql("INSERT INTO queries VALUES(?,?,?,?,?,?,?)"),
                       [(pid, q.created, q.deployment, q.question, q.user_hash, q.qna_id, q.confidence)
                        for q in queries])

    def list_queries(self, project: str, since: str, newest: int | None = None) -> list[LoggedQuery]:
        columns = "SELECT created, deployment, question, user_hash, qna_id, confidence FROM queries"
        with self._reading() as db:
            pid = self._project_id(db, project)
            if newest is None:
                rows = db.execute(self._sql(f"{columns} WHERE project_id=? AND created>=? ORDER BY created"),
                                  (pid, since)).fetchall()
            else:
                rows = db.execute(self._sql(f"{columns} WHERE project_id=? AND created>=? ORDER BY created DESC"
                                            " LIMIT ?"), (pid, since, max(newest, 0))).fetchall()[::-1]
        return [LoggedQuery(*r) for r in rows]

    def count_queries(self, project: str, since: str) -> int:
        with self._reading() as db:
            pid = self._project_id(db, project)
            return int(db.execute(self._sql("SELECT count(*) FROM queries WHERE project_id=? AND created>=?"),
                                  (pid, since)).fetchone()[0])

    def summarize_queries(self, project: str, since: str, low_confidence: float) -> QuerySummary:
        low = "CASE WHEN qna_id<>-1 AND confidence<? THEN"
        with self._reading() as db:
            pid = self._project_id(db, project)
            groups = db.execute(self._sql(
                f"SELECT question, qna_id, count(*), min(created), max(created), sum({low} 1 ELSE 0 END),"
                f" sum({low} confidence ELSE 0 END) FROM queries WHERE project_id=? AND created>=?"
                " GROUP BY question, qna_id"), (low_confidence, low_confidence, pid, since)).fetchall()
            daily = db.execute(self._sql(
                "SELECT substr(created, 1, 10), count(*), sum(CASE WHEN qna_id=-1 THEN 1 ELSE 0 END) FROM queries"
                " WHERE project_id=? AND created>=? GROUP BY substr(created, 1, 10)"), (pid, since)).fetchall()
            users = db.execute(self._sql(
                "SELECT count(DISTINCT user_hash) FROM queries WHERE project_id=? AND created>=? AND user_hash<>''"),
                (pid, since)).fetchone()[0]
        return QuerySummary([QuestionCount(r[0], int(r[1]), int(r[2]), r[3], r[4], int(r[5]), float(r[6]))
                             for r in groups], {r[0]: (int(r[1]), int(r[2])) for r in daily}, int(users))

    def queried_questions(self, project: str) -> set[str]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            return {r[0] for r in db.execute(self._sql("SELECT DISTINCT question FROM queries WHERE project_id=?"),
                                             (pid,)).fetchall()}

    def delete_queries(self, project: str, before: str | None = None) -> int:
        with self._tx() as db:
            pid = self._project_id(db, project)
            if before is None:
                cursor = db.execute(self._sql("DELETE FROM queries WHERE project_id=?"), (pid,))
            else:
                cursor = db.execute(self._sql("DELETE FROM queries WHERE project_id=? AND created<?"), (pid, before))
            deleted: int = cursor.rowcount
        return deleted

    # -- test sets and their runs ---------------------------------------------------------------------------------
    def put_test_set(self, project: str, test_set: TestSet) -> TestSet:
        stamp = now_iso()
        with self._tx() as db:
            pid = self._project_id(db, project)
            row = db.execute(self._sql("SELECT created FROM test_sets WHERE project_id=? AND name=?"),
                             (pid, test_set.name)).fetchone()
            created = stamp if row is None else row[0]
            db.execute(self._sql("INSERT INTO test_sets VALUES(?,?,?,?,?) ON CONFLICT (project_id, name)"
                                 " DO UPDATE SET modified=EXCLUDED.modified, items=EXCLUDED.items"),
                       (pid, test_set.name, created, stamp, self._json(test_set.items)))
        return TestSet(test_set.name, test_set.items, created, stamp)

    def get_test_set(self, project: str, name: str) -> TestSet:
        with self._reading() as db:
            pid = self._project_id(db, project)
            row = db.execute(self._sql("SELECT name, items, created, modified FROM test_sets WHERE project_id=?"
                                       " AND name=?"), (pid, name)).fetchone()
        if row is None:
            raise NotFound(f"Test set '{name}' of project '{project}' was not found.")
        return TestSet(row[0], self._from_json(row[1]), row[2], row[3])

    def list_test_sets(self, project: str) -> list[TestSet]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            rows = db.execute(self._sql("SELECT name, items, created, modified FROM test_sets WHERE project_id=?"
                                        " ORDER BY name"), (pid,)).fetchall()
        return [TestSet(r[0], self._from_json(r[1]), r[2], r[3]) for r in rows]

    def delete_test_set(self, project: str, name: str) -> bool:
        with self._tx() as db:
            pid = self._project_id(db, project)
            deleted: bool = db.execute(self._sql("DELETE FROM test_sets WHERE project_id=? AND name=?"),
                                       (pid, name)).rowcount > 0
        return deleted

    # -- the trained model ------------------------------------------------------------------------------------------
    def set_trained(self, project: str, data: bytes | None, meta: dict[str, Any] | None = None, *,
                    project_id: int | None = None) -> None:
        with self._tx() as db:
            pid = self._writer(db, project)
            if project_id is not None and pid != project_id:  # deleted, and another project made under its name
                raise ProjectNotFound(f"The specified project was not found: {project}.")
            db.execute(self._sql("DELETE FROM trained WHERE project_id=? AND deployment=?"), (pid, LIVE))
            if data is not None:
                db.execute(self._sql("INSERT INTO trained VALUES(?,?,?,?,?,?)"),
                           (pid, LIVE, now_iso(), self._json(meta or {}), hashlib.sha256(data).hexdigest(), data))
            self._bump(db, pid, LIVE)

    def get_trained(self, project: str, deployment: str = LIVE) -> Trained | None:
        with self._reading() as db:
            pid = self._project_id(db, project)
            row = db.execute(self._sql("SELECT data, meta, created, hash FROM trained WHERE project_id=? AND"
                                       " deployment=?"), (pid, deployment)).fetchone()
        return None if row is None else Trained(bytes(row[0]), self._from_json(row[1]), row[2], row[3])

    def add_test_run(self, project: str, run: TestRun) -> TestRun:
        with self._tx() as db:
            pid = self._writer(db, project)
            last = db.execute(self._sql("SELECT max(id) FROM test_runs WHERE project_id=?"), (pid,)).fetchone()
            number = int(last[0] or 0) + 1
            db.execute(self._sql("INSERT INTO test_runs VALUES(?,?,?,?,?,?,?,?)"),
                       (pid, number, run.test_set, run.deployment, run.created, float(run.threshold),
                        self._json(run.summary), self._json(run.results)))
        return TestRun(number, run.test_set, run.deployment, run.created, run.threshold, run.summary, run.results)

    def list_test_runs(self, project: str, test_set: str | None = None) -> list[TestRun]:
        with self._reading() as db:
            pid = self._project_id(db, project)
            rows = db.execute(self._sql(
                "SELECT id, test_set, deployment, created, threshold, summary FROM test_runs WHERE project_id=?"
                " AND (CAST(? AS TEXT) IS NULL OR test_set=?) ORDER BY id DESC"), (pid, test_set, test_set)).fetchall()
        return [TestRun(int(r[0]), r[1], r[2], r[3], float(r[4]), self._from_json(r[5])) for r in rows]

    def get_test_run(self, project: str, run_id: int) -> TestRun:
        with self._reading() as db:
            pid = self._project_id(db, project)
            r = None if not 0 <= run_id < 2**63 else db.execute(self._sql(  # no column holds a larger one
                "SELECT id, test_set, deployment, created, threshold, summary, results FROM test_runs WHERE"
                " project_id=? AND id=?"), (pid, run_id)).fetchone()
        if r is None:
            raise NotFound(f"Test run {run_id} of project '{project}' was not found.")
        return TestRun(int(r[0]), r[1], r[2], r[3], float(r[4]), self._from_json(r[5]), self._from_json(r[6]))

    # -- the job queue's reads (claims and leases are each engine's own) ----------------------------------------------
    # The queue's turns: a project's n-th unfinished job of the kinds a worker claims (running ones counted) takes turn
    # n, and a claim takes a job of the lowest turn: of the project that has had fewest jobs of these kinds claimed
    # (``served``: running and finished ones the queue still holds), the oldest first.  Projects so take turns
    # instead of queueing behind one that submitted many jobs (a script of 200 edits held every other project's edit
    # until its last), and a project's own jobs still start in the order they came.  Without ``served`` the turns
    # held only while the busy project's job still ran when the next was claimed: a worker that finishes each job
    # before it claims the next saw a's second job and b's first both at turn 1 and took the older, a's, so b still
    # waited for all of a's.  A job also waits (``behind``) while its project has an earlier unfinished job of the
    # kinds ``{after}`` names, those of the other lanes that keep one order with this one's: an edit queued after an
    # import to its project waits for the import to end, though another worker runs imports.  ``{mine}`` and
    # ``{after}`` are the engine's "kind is one of" tests (parameters: mine's, mine's, after's, mine's).
    FAIR_TURNS = ("SELECT id AS job, status = 'notStarted' AND mine = 1 AS waiting, sum(mine) OVER queue AS turn,"
                  " sum(1 - mine) OVER queue AS behind, coalesce(served, 0) AS served"
                  " FROM (SELECT id, project, seq, status, CASE WHEN {mine} THEN 1 ELSE 0 END AS mine FROM jobs"
                  "       WHERE status IN ('notStarted', 'running') AND ({mine} OR {after})) AS unfinished"
                  " LEFT JOIN (SELECT project AS served_project, count(*) AS served FROM jobs"
                  "            WHERE status <> 'notStarted' AND {mine} GROUP BY project) AS claimed"
                  "   ON claimed.served_project = unfinished.project"
                  " WINDOW queue AS (PARTITION BY project ORDER BY seq)")
    _JOB_COLS = ("id, kind, project, status, created, updated, expires, errors, params, owner, result, result_name,"
                 " result_media, lease_until")

    def _job_row(self, row: tuple[Any, ...]) -> Job:
        jid, kind, project, status, created, updated, expires, errors, params, owner, result, name, media, lease = row
        return Job(jid, kind, project, status, created, updated, expires, self._from_json(errors),
                   self._from_json(params), owner, None if result is None else bytes(result), name, media, lease)

    def get_job(self, job_id: str) -> Job | None:
        with self._reading() as db:
            row = db.execute(self._sql(f"SELECT {self._JOB_COLS} FROM jobs WHERE id=?"), (job_id,)).fetchone()
        return None if row is None else self._job_row(row)

    def unfinished_jobs(self) -> list[Job]:
        with self._reading() as db:
            rows = db.execute(self._sql(f"SELECT {self._JOB_COLS} FROM jobs WHERE status IN ('notStarted', 'running')"
                                        " ORDER BY seq")).fetchall()
        return [self._job_row(r) for r in rows]

    # -- files --------------------------------------------------------------------------------------------------------
    def put_file(self, f: StoredFile) -> None:
        with self._tx() as db:
            db.execute(self._sql(
                f"INSERT INTO files({_FILE_COLS.format(data='data')}) VALUES(?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE"
                " SET filename=EXCLUDED.filename, purpose=EXCLUDED.purpose, bytes=EXCLUDED.bytes,"
                " created_at=EXCLUDED.created_at, status=EXCLUDED.status, data=EXCLUDED.data, project=EXCLUDED.project,"
                " scope=EXCLUDED.scope, expires_at=EXCLUDED.expires_at"),
                (f.id, f.filename, f.purpose, f.bytes, f.created_at, f.status, bytes(f.data), f.project,
                 None if f.scope is None else self._json(f.scope), f.expires_at))

    def _file_row(self, row: tuple[Any, ...]) -> StoredFile:
        fid, filename, purpose, size, created_at, status, data, project, scope, expires_at = row
        return StoredFile(fid, filename, purpose, size, created_at, status, bytes(data), project,
                          None if scope is None else self._from_json(scope), expires_at)

    def get_file(self, file_id: str, *, with_data: bool = False) -> StoredFile | None:
        cols = _FILE_COLS.format(data="data" if with_data else self._EMPTY_BLOB)
        with self._reading() as db:
            row = db.execute(self._sql(f"SELECT {cols} FROM files WHERE id=?"), (file_id,)).fetchone()
        return None if row is None else self._file_row(row)

    def list_files(self, purpose: str | None = None) -> list[StoredFile]:
        cols = _FILE_COLS.format(data=self._EMPTY_BLOB)
        with self._reading() as db:
            rows = db.execute(self._sql(f"SELECT {cols} FROM files WHERE CAST(? AS TEXT) IS NULL OR purpose=?"
                                        " ORDER BY created_at DESC, id DESC"), (purpose, purpose)).fetchall()
        return [self._file_row(r) for r in rows]

    def delete_file(self, file_id: str) -> bool:
        with self._tx() as db:
            deleted: bool = db.execute(self._sql("DELETE FROM files WHERE id=?"), (file_id,)).rowcount > 0
        return deleted

    # -- keys ---------------------------------------------------------------------------------------------------------
    def add_key(self, key: ApiKey, key_hash: str) -> None:
        with self._tx() as db:
            db.execute(self._sql("INSERT INTO api_keys VALUES(?,?,?,?,?,?)"),
                       (key.id, key_hash, key.name, key.role,
                        None if key.projects is None else self._json(key.projects), key.created))

    def _key_row(self, row: tuple[Any, ...]) -> ApiKey:
        kid, name, role, projects, created = row
        return ApiKey(kid, name, role, None if projects is None else self._from_json(projects), created)

    def find_key(self, key_hash: str) -> ApiKey | None:
        with self._reading() as db:
            row = db.execute(self._sql("SELECT id, name, role, projects, created FROM api_keys WHERE hash=?"),
                             (key_hash,)).fetchone()
        return None if row is None else self._key_row(row)

    def key_hash(self, key_id: str) -> str | None:
        with self._reading() as db:
            row = db.execute(self._sql("SELECT hash FROM api_keys WHERE id=?"), (key_id,)).fetchone()
        return None if row is None else str(row[0])

    def list_keys(self) -> list[ApiKey]:
        with self._reading() as db:
            rows = db.execute("SELECT id, name, role, projects, created FROM api_keys ORDER BY created, id").fetchall()
        return [self._key_row(r) for r in rows]

    def has_keys(self) -> bool:
        with self._reading() as db:
            row = db.execute("SELECT EXISTS(SELECT 1 FROM api_keys)").fetchone()
        return row is not None and bool(row[0])

    def delete_key(self, key_id: str) -> bool:
        with self._tx() as db:
            deleted: bool = db.execute(self._sql("DELETE FROM api_keys WHERE id=?"), (key_id,)).rowcount > 0
        return deleted
