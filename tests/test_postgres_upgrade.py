"""An operator's PostgreSQL deployment across an upgrade, served by two `openqna serve` processes at once.

A database written at schema version 9 (before files could expire), with projects, QnAs, deployments and their
versions, files and keys in it, is upgraded by two new servers that start against it together (one migrates under
the advisory lock, the other waits and finds it done), with nothing lost; then what one process is told is what the
other answers: a file that expires is gone from both, a revoked key is refused by both, a rollback is answered by
both.
"""

from __future__ import annotations

import threading
import time

import httpx
import psycopg
import pytest

from conftest import ServeProcess, wait_for_job
from openqna.auth.keys import create_key
from openqna.kb.service import Service
from openqna.kinds import openai_files
from openqna.records import QnA
from openqna.store.postgres import SCHEMA_VERSION, PostgresStore
from pg import pg_dsn, pg_server  # noqa: F401  (fixtures)
from test_service import surface_kb

QUESTION = "Where is the office?"
PARAMS = {"api-version": "2023-04-01"}


def _schema_9(dsn: str, embedder) -> dict[str, str]:
    """Fill a database and take it back to schema 9; returns the keys' secrets."""
    store = PostgresStore(dsn, pool_size=2)
    try:
        service = Service(store, embedder)
        service.import_content("surface", surface_kb())
        service.upsert("surface", [QnA([QUESTION], "On the second floor.", id=8, source="editorial")])
        store.deploy("surface", "production", by="first")  # version 1
        service.upsert("surface", [QnA([QUESTION], "On the third floor.", id=8, source="editorial")])
        store.deploy("surface", "production", by="second")  # version 2
        openai_files.upload(service, "old.jsonl", b'{"text": "Uploaded before files could expire."}\n',
                            "assistants")
        secrets = {"admin": create_key(store, name="owner", role="admin")[1],
                   "reader": create_key(store, name="reader", role="query", projects=["surface"])[1]}
    finally:
        store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:  # what schema 9 was: files had no expiry
        conn.execute("ALTER TABLE files DROP COLUMN expires_at")
        conn.execute("UPDATE meta SET value='9' WHERE key='schema_version'")
    return secrets


@pytest.mark.multiprocess
def test_two_servers_upgrade_a_schema_9_database_and_agree(pg_dsn, tmp_path, embedder):  # noqa: F811
    secrets = _schema_9(pg_dsn, embedder)
    env = {"OPENQNA_STORE": pg_dsn, "OPENQNA_DATA": str(tmp_path), "OPENQNA_JOB_POLL_SECONDS": "0.2"}
    started: dict[int, ServeProcess] = {}
    failed: list[BaseException] = []

    def start(n: int) -> None:
        try:
            started[n] = ServeProcess(None, tmp_path / f"server-{n}.log", env=env, args=("--no-sample",), seconds=120)
        except BaseException as exc:  # noqa: BLE001  (reported below)
            failed.append(exc)

    threads = [threading.Thread(target=start, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    try:
        assert not failed, failed
        a, b = started[0].url, started[1].url
        with psycopg.connect(pg_dsn) as conn:
            assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        admin = {"api-key": secrets["admin"]}
        reader = {"api-key": secrets["reader"]}

        def ask(url: str, headers: dict, deployment: str = "production") -> httpx.Response:
            return httpx.post(f"{url}/language/:query-knowledgebases", headers=headers, timeout=30, params={
                "projectName": "surface", "deploymentName": deployment, **PARAMS}, json={"question": QUESTION, "top": 1})

        # nothing lost: records, deployments and their versions, files and keys, through either process
        for url in (a, b):
            assert ask(url, reader).json()["answers"][0]["answer"] == "On the third floor."
            r = httpx.get(f"{url}/language/authoring/query-knowledgebases/projects/surface/qnas", headers=admin,
                          params=PARAMS, timeout=30)
            assert len(r.json()["value"]) == 8, r.text
            versions = httpx.get(f"{url}/openqna/projects/surface/versions", headers=admin, timeout=30).json()
            assert [(v["version"], v["deployedBy"]) for v in versions["value"]] == [(1, "first"), (2, "second")], versions
            files = httpx.get(f"{url}/v1/files", headers=admin, timeout=30).json()["data"]
            assert [(f["filename"], f.get("expires_at")) for f in files] == [("old.jsonl", None)]  # never expires: no field

        # a file uploaded through A with an expiry, in a vector store: B sees it, then neither once it expires
        r = httpx.post(f"{a}/v1/files", headers=admin, timeout=30, data={
            "purpose": "assistants", "expires_after[anchor]": "created_at", "expires_after[seconds]": "3600"},
            files={"file": ("soon.jsonl", b'{"text": "Parking is behind the building."}\n')})
        assert r.status_code == 200, r.text
        soon = r.json()["id"]
        vs = httpx.post(f"{a}/v1/vector_stores", headers=admin, timeout=30,
                        json={"name": "docs", "file_ids": [soon]}).json()["id"]
        deadline = time.monotonic() + 60
        while httpx.get(f"{b}/v1/vector_stores/{vs}", headers=admin).json()["file_counts"]["completed"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert httpx.get(f"{b}/v1/files/{soon}", headers=admin).status_code == 200

        def found(url: str) -> list[str]:
            r = httpx.post(f"{url}/v1/vector_stores/{vs}/search", headers=admin, timeout=30,
                           json={"query": "where can I park?"})
            assert r.status_code == 200, r.text
            return [hit["file_id"] for hit in r.json()["data"]]

        assert found(b) == [soon]
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # an hour passes
            conn.execute("UPDATE files SET expires_at=extract(epoch FROM now())::bigint - 1 WHERE id=%s", (soon,))
        # B searched a moment ago, so it purges no expired file before this search (at most once a second): the
        # search itself must leave the expired file out
        assert found(b) == []
        for url in (b, a):
            assert httpx.get(f"{url}/v1/files/{soon}", headers=admin).status_code == 404
            assert soon not in [f["id"] for f in httpx.get(f"{url}/v1/files", headers=admin).json()["data"]]
            assert found(url) == []

        # a key revoked through A is refused by B at once; a rollback through A is what B answers
        reader_id = next(k["id"] for k in httpx.get(f"{a}/openqna/keys", headers=admin).json()["value"]
                         if k["name"] == "reader")
        assert httpx.delete(f"{a}/openqna/keys/{reader_id}", headers=admin).status_code in (200, 204)
        assert ask(b, reader).status_code == 401
        r = httpx.post(f"{a}/openqna/projects/surface/deployments/production/:rollback", headers=admin,
                       params={"version": "1"}, timeout=30)
        assert r.status_code == 200 and r.json()["version"] == 1, r.text
        assert ask(b, admin).json()["answers"][0]["answer"] == "On the second floor."
        # and a write through B is deployed and answered through A
        r = httpx.patch(f"{b}/language/authoring/query-knowledgebases/projects/surface/qnas", headers=admin,
                        params=PARAMS, json=[{"op": "replace", "value": {
                            "id": 8, "questions": [QUESTION], "answer": "On the fourth floor.", "source": "editorial"}}])
        assert wait_for_job(r.headers["Operation-Location"], headers=admin)["status"] == "succeeded"
        assert ask(a, admin, "test").json()["answers"][0]["answer"] == "On the fourth floor."
    finally:
        for server in started.values():
            server.stop()
    for n in range(2):
        log = (tmp_path / f"server-{n}.log").read_text()
        assert "Traceback" not in log, log[-3000:]
