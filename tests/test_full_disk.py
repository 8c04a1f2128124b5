"""The embedded store on a disk that fills up (a real tmpfs of 8 MB, ``conftest.tiny_disk``).

SQLite rolls a transaction back itself when the disk is full (SQLITE_FULL); the store's own ROLLBACK then raised
"cannot rollback - no transaction is active" in place of the real error, and a server answered every write 500
"see its log".  Now every surface answers 507 in its own dialect, naming the store's folder and the full disk; reads
go on, and writes succeed again once space is freed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from starlette.testclient import TestClient

from conftest import TinyDisk
from openqna.kb.query_log import QueryLog
from openqna.kb.service import Service
from openqna.models.embedder import HashEmbedder
from openqna.records import KnowledgeBaseContent, QnA, StoreFull
from openqna.server import create_app
from openqna.store import LoggedQuery
from openqna.store.postgres import PostgresStore
from openqna.store.sqlite import SQLiteStore
from pg import pg_dsn, pg_server  # noqa: F401  (fixtures)
from test_error_envelopes import azure, openai, qnamaker

AUTHORING = "/language/authoring/query-knowledgebases/projects"
PARAMS = {"api-version": "2023-04-01"}


@pytest.fixture
def full_server(tiny_disk):
    store = SQLiteStore(tiny_disk.path / "data")
    service = Service(store, HashEmbedder())
    service.import_content("kb", KnowledgeBaseContent(qnas=[QnA(["How do I charge the battery?"], "With its cable.")]))
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # so that the next write needs a new block
        tiny_disk.fill()
        yield client, tiny_disk
    store.close()


def test_every_surface_answers_a_full_disk_507_in_its_dialect(full_server):
    client, disk = full_server
    writes = [("PATCH", f"{AUTHORING}/new", {"language": "en"}, azure),
              ("POST", "/qnamaker/knowledgebases/kb/train",
               {"feedbackRecords": [{"userId": "u", "userQuestion": "charging?", "qnaId": 1}]}, azure),  # its shape
              ("POST", "/v1/vector_stores", {"name": "docs"}, openai),
              ("PUT", "/openqna/projects/kb/near-topic", {"nearTopic": 0.1}, azure)]
    for method, path, body, envelope in writes:
        r = client.request(method, path, params=PARAMS, json=body)
        assert r.status_code == 507, (path, r.status_code, r.text)
        assert envelope(r.json()), (path, r.text)
        assert "the disk is full" in r.text and str(disk.path / "data") in r.text, (path, r.text)
    # questions are still answered: reads need no space
    r = client.post("/language/:query-knowledgebases", params={**PARAMS, "projectName": "kb", "deploymentName": "test"},
                    json={"question": "charge the battery"})
    assert r.status_code == 200 and r.json()["answers"][0]["answer"] == "With its cable.", r.text
    r = client.get("/tools/kb/search", params={"subject": "charge the battery"})
    assert r.status_code == 200 and "With its cable." in r.text, r.text
    disk.free()
    assert client.patch(f"{AUTHORING}/new", params=PARAMS, json={"language": "en"}).status_code in (200, 201)


def test_a_store_that_cannot_be_written_answers_503_with_each_dialects_own_code(tiny_disk):
    """A 503 (here a read-only mount: the store is read, its writes refused) said "BadArgument" on QnA Maker's routes,
    which blames the bot's request; QnA Maker's code for the server's own trouble is ServiceError, and Azure's is
    ServiceUnavailable, in its header too."""
    store = SQLiteStore(tiny_disk.path / "data")
    Service(store, HashEmbedder()).import_content(
        "kb", KnowledgeBaseContent(qnas=[QnA(["How do I charge the battery?"], "With its cable.")]))
    store.close()
    tiny_disk.read_only()  # a mount with files open for writing cannot be made read-only
    store = SQLiteStore(tiny_disk.path / "data")
    feedback = {"userId": "u", "userQuestion": "charging?", "qnaId": 1}
    try:
        with TestClient(create_app(Service(store, HashEmbedder())), raise_server_exceptions=False) as client:
            r = client.post("/qnamaker/knowledgebases/kb/train", json={"feedbackRecords": [feedback]})
            assert r.status_code == 503 and qnamaker(r.json()), r.text
            assert r.json()["error"]["code"] == "ServiceError" and "is read-only here" in r.text, r.text
            r = client.post(f"{AUTHORING}/kb/feedback", params=PARAMS, json={"records": [feedback]})
            assert r.status_code == 503 and azure(r.json()), r.text
            assert r.json()["error"]["code"] == r.headers["x-ms-error-code"] == "ServiceUnavailable", r.text
            r = client.post("/qnamaker/knowledgebases/kb/generateAnswer",
                            json={"question": "charge the battery", "isTest": True})
            assert r.status_code == 200 and r.json()["answers"][0]["answer"] == "With its cable.", r.text
    finally:
        store.close()


def test_questions_are_answered_on_a_full_disk_their_log_entries_dropped_with_one_warning(tiny_disk, caplog,
                                                                                        monkeypatch):
    """Questions are reads: a project that keeps a query log answered each one 507 on a full disk, because its log
    entry could not be stored, and so did a vector store's search when it recorded the store's last use.  The
    entries are dropped, and the log says so once, not once a question."""
    monkeypatch.setattr("openqna.kinds.vector_stores.ACTIVE_EVERY", 0)  # every search records the store's last use
    store = SQLiteStore(tiny_disk.path / "data")
    service = Service(store, HashEmbedder())
    service.import_content("kb", KnowledgeBaseContent(qnas=[QnA(["How do I charge the battery?"], "With its cable.")]))
    service.deploy("kb", "production")
    QueryLog(store).configure("kb", enabled=True, retention_days=30)
    runtime = ("/language/:query-knowledgebases", {**PARAMS, "projectName": "kb", "deploymentName": "production"})
    try:
        with TestClient(create_app(service), raise_server_exceptions=False) as client:
            docs = client.post("/v1/vector_stores", json={"name": "docs"}).json()["id"]
            assert client.post(runtime[0], params=runtime[1], json={"question": "charge it?"}).status_code == 200
            time.sleep(1.1)  # a use in the second the store was made changes nothing to record
            store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            tiny_disk.fill()
            caplog.set_level("WARNING", logger="openqna")
            for _ in range(3):
                r = client.post(runtime[0], params=runtime[1], json={"question": "charge the battery"})
                assert r.status_code == 200 and r.json()["answers"][0]["answer"] == "With its cable.", r.text
                r = client.post("/qnamaker/knowledgebases/kb/generateAnswer", json={"question": "charge the battery"})
                assert r.status_code == 200 and r.json()["answers"][0]["answer"] == "With its cable.", r.text
                r = client.post(f"/v1/vector_stores/{docs}/search", json={"query": "battery"})
                assert r.status_code == 200 and r.json()["data"] == [], r.text
            warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
            logged = [w for w in warnings if "not logged in a query log" in w]
            touched = [w for w in warnings if "not recorded as the store's last use" in w]
            assert len(logged) == 1 and len(touched) == 1, warnings
            assert logged[0].startswith("1 question(s)") and "the disk is full" in logged[0], logged
            tiny_disk.free()
            r = client.post(runtime[0], params=runtime[1], json={"question": "charge the battery again"})
            assert r.status_code == 200
        assert [q.question for q in store.list_queries("kb", "2000-01-01")] == ["charge it?", "charge the battery again"]
    finally:
        store.close()


def test_a_postgresql_store_on_a_full_disk_answers_questions_and_refuses_writes_507(pg_server, pg_dsn, caplog):  # noqa: F811
    """PostgreSQL's "could not extend file ...: No space left on device" (53100) reached callers as a 500, a
    question's query-log entry with it.  It is ``StoreFull`` now, as on SQLite: writes 507, questions answered.  The
    full disk is a tablespace on an 8 MB tmpfs that holds the query log's table."""
    if os.environ.get("OPENQNA_TEST_PG_DSN") or subprocess.run(["id", "pgserver"], capture_output=True).returncode:
        pytest.skip("needs the tests' own PostgreSQL (pgserver), run as root, to give it a tablespace on a tmpfs")
    folder = Path(tempfile.mkdtemp(prefix="openqna-tiny-pg-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    shutil.chown(folder, "pgserver", "pgserver")
    space = f"tiny_{folder.name.rsplit('-', 1)[-1].lower()}"
    store = PostgresStore(pg_dsn)
    service = Service(store, HashEmbedder())
    service.import_content("kb", KnowledgeBaseContent(qnas=[QnA(["How do I charge the battery?"], "With its cable.")]))
    service.deploy("kb", "production")
    QueryLog(store).configure("kb", enabled=True, retention_days=30)
    pg_server.execute(f"CREATE TABLESPACE {space} LOCATION '{folder}'")
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE queries SET TABLESPACE {space}")
        TinyDisk(folder).fill()
        caplog.set_level("WARNING", logger="openqna")
        with TestClient(create_app(service), raise_server_exceptions=False) as client:
            for _ in range(2):
                r = client.post("/qnamaker/knowledgebases/kb/generateAnswer", json={"question": "charge the battery"})
                assert r.status_code == 200 and r.json()["answers"][0]["answer"] == "With its cable.", r.text
            logged = [r.getMessage() for r in caplog.records if "not logged in a query log" in r.getMessage()]
            assert len(logged) == 1 and "the disk of the PostgreSQL store is full" in logged[0], logged
        with pytest.raises(StoreFull):
            store.log_queries("kb", [LoggedQuery("2030-01-01T00:00:00Z", "production", "q", "", -1, 0.0)])
    finally:
        TinyDisk(folder).free()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("ALTER TABLE queries SET TABLESPACE pg_default")
        pg_server.execute(f"DROP TABLESPACE {space}")
        store.close()
        subprocess.run(["umount", "-l", str(folder)], check=True)
        folder.rmdir()
