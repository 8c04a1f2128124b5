"""The embedded store on a disk that fills up (a real tmpfs of 8 MB, ``conftest.tiny_disk``).

SQLite rolls a transaction back itself when the disk is full (SQLITE_FULL); the store's own ROLLBACK then raised
"cannot rollback - no transaction is active" in place of the real error, and a server answered every write 500
"see its log".  Now every surface answers 507 in its own dialect, naming the store's folder and the full disk; reads
go on, and writes succeed again once space is freed.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from openqna.kb.service import Service
from openqna.models.embedder import HashEmbedder
from openqna.records import KnowledgeBaseContent, QnA
from openqna.server import create_app
from openqna.store.sqlite import SQLiteStore
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
