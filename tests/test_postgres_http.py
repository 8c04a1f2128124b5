"""The server on PostgreSQL: a read the database holds up stalls only the request that made it."""

from __future__ import annotations

import threading
import time

import httpx
import psycopg

from conftest import LiveServer
from openqna.auth.keys import create_key
from openqna.kb.service import Service
from openqna.records import QnA
from openqna.store.postgres import PostgresStore
from pg import pg_dsn, pg_server  # noqa: F401  (fixtures)

QKB = "/language/:query-knowledgebases"
PARAMS = {"projectName": "faq", "deploymentName": "production", "api-version": "2023-04-01"}


def _waiting_on_a_lock(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as db:
        row = db.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
    return int(row[0]) if row else 0


def test_a_locked_key_table_stalls_no_other_request(pg_dsn, embedder):  # noqa: F811
    """While another session holds the key table locked (a migration, say), a request whose key must be looked up
    waits on a worker thread for the lock; /healthz sent meanwhile is answered at once (when the lookup ran on the
    event loop, it waited for the lock too), and the waiting request gets its answer once the lock is gone."""
    store = PostgresStore(pg_dsn, pool_size=4)
    service = Service(store, embedder)
    service.create_project("faq")
    service.upsert("faq", [QnA(["When are you open?"], "9 to 5, Monday to Friday.")])
    store.deploy("faq", "production")
    _, key = create_key(store, role="query")
    body = {"question": "when are you open?", "top": 1}
    try:
        with LiveServer(service) as server, httpx.Client(base_url=server.url, timeout=30) as http:
            http.post(QKB, params=PARAMS, json=body, headers={"api-key": key}).raise_for_status()  # warm
            with psycopg.connect(pg_dsn) as locker:
                locker.execute("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
                held: list[httpx.Response] = []
                waiting = threading.Thread(target=lambda: held.append(
                    httpx.post(server.url + QKB, params=PARAMS, json=body, headers={"api-key": key}, timeout=30)))
                waiting.start()
                deadline = time.monotonic() + 10
                while not _waiting_on_a_lock(pg_dsn):
                    assert time.monotonic() < deadline, "the request never reached the locked table"
                    time.sleep(0.02)
                t = time.perf_counter()
                try:
                    healthy = http.get("/healthz", timeout=5).status_code == 200
                except httpx.ReadTimeout:
                    healthy = False
                meanwhile = time.perf_counter() - t
                assert not held, "the request was answered while its key's table was locked"
                locker.rollback()  # releases the lock
            waiting.join(30)
    finally:
        store.close()
    assert healthy and meanwhile < 1.0, f"/healthz waited {meanwhile:.2f} s (5 s: for ever) for a locked table"
    assert held and held[0].status_code == 200
    assert held[0].json()["answers"][0]["answer"] == "9 to 5, Monday to Friday."
