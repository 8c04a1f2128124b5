"""PostgreSQL going away under a running store or `openqna serve`, and coming back.

While the server is gone every request is answered at once with a 503 in its caller's dialect (no 500, no traceback,
no 30 s wait for a pooled connection), and once it is back the same process answers again, without a restart.
Each test restarts a PostgreSQL of its own (``pg.RestartablePg``).
"""

from __future__ import annotations

import time

import httpx
import pytest

from conftest import ServeProcess, wait_for_job
from openqna.records import OpenQnAError, QnA
from openqna.store import Project, StoredQnA, Unit
from openqna.store.postgres import PostgresStore, StoreUnavailable
from pg import restartable_pg  # noqa: F401  (fixture)
from store_conformance import vec

AUTHORING = "/language/authoring/query-knowledgebases/projects"
PARAMS = {"api-version": "2023-04-01"}


def _qna(question: str, answer: str) -> StoredQnA:
    return StoredQnA(QnA([question], answer), [Unit("q", 0, question.lower().split(), vec(1, 0)),
                                               Unit("a", 0, answer.lower().split(), vec(0, 1))], question)


def test_a_store_says_unavailable_while_postgresql_is_gone_and_recovers(restartable_pg):  # noqa: F811
    """Reads and writes while the server is stopped raise ``StoreUnavailable`` (a 503), each within seconds; the
    pooled connections that died with the server are not handed out afterwards, so the first use after the restart
    succeeds, and nothing acknowledged before the restart is lost."""
    store = PostgresStore(restartable_pg.dsn, pool_size=3)
    try:
        store.create_project(Project("p"))
        store.put_qnas("p", [_qna("before", "kept")])
        for _ in range(3):  # every pooled connection in use once, so all of them die with the server
            store.count_qnas("p")
        restartable_pg.stop()
        for attempt in (lambda: store.count_qnas("p"), lambda: store.put_qnas("p", [_qna("during", "lost")]),
                        lambda: store.list_projects(), store.has_keys):
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="cannot connect to the PostgreSQL store"):
                attempt()
            assert time.monotonic() - started < 10
        restartable_pg.start()
        deadline = time.monotonic() + 20
        while True:  # the pool reconnects in the background; a use may find it still waiting for a moment
            try:
                assert [q.answer for q in store.list_qnas("p")] == ["kept"]
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "the store did not come back after PostgreSQL did"
                time.sleep(0.2)
        store.put_qnas("p", [_qna("after", "written")])
        assert sorted(q.answer for q in store.list_qnas("p")) == ["kept", "written"]
    finally:
        store.close()


@pytest.mark.multiprocess
def test_openqna_serve_answers_503_in_each_dialect_and_recovers(restartable_pg, tmp_path):  # noqa: F811
    """`openqna serve` on PostgreSQL, which is stopped and started again: meanwhile each surface answers 503 in its
    own envelope (Azure runtime and authoring, QnA Maker, OpenAI, the tools, MCP) within seconds; afterwards the same
    process answers, writes, and runs jobs again, and its log holds no traceback."""
    env = {"OPENQNA_STORE": restartable_pg.dsn, "OPENQNA_DATA": str(tmp_path), "OPENQNA_JOB_POLL_SECONDS": "0.2"}
    with ServeProcess(None, tmp_path / "serve.log", env=env, args=("--no-sample",), seconds=120) as server, \
            httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.patch(f"{AUTHORING}/kb", params=PARAMS, json={"language": "en"}).status_code == 201

        def add(question: str, answer: str) -> httpx.Response:
            return http.patch(f"{AUTHORING}/kb/qnas", params=PARAMS, json=[{"op": "add", "value": {
                "questions": [question], "answer": answer, "source": "editorial"}}])

        def ask(question: str) -> httpx.Response:
            return http.post("/language/:query-knowledgebases", params={
                "projectName": "kb", "deploymentName": "test", **PARAMS}, json={"question": question, "top": 1})

        written = add("Where is the office?", "On the third floor.")
        assert wait_for_job(written.headers["Operation-Location"])["status"] == "succeeded"
        assert ask("Where is the office?").json()["answers"][0]["answer"] == "On the third floor."

        restartable_pg.stop()
        calls = {
            "azure runtime": lambda: ask("Where is the office?"),
            "azure authoring": lambda: add("Is there parking?", "Behind the building."),
            "qnamaker": lambda: http.post("/qnamaker/knowledgebases/kb/generateAnswer",
                                          json={"question": "office", "isTest": True}),
            "openai": lambda: http.get("/v1/files"),
            "tools": lambda: http.get("/get_related_kb", params={"subject": "office"}),
            "mcp": lambda: http.post("/mcp", headers={"Accept": "application/json, text/event-stream"}, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-03-26", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}}),
        }
        for name, call in calls.items():
            started = time.monotonic()
            r = call()
            assert time.monotonic() - started < 10, name
            assert r.status_code == 503, (name, r.status_code, r.text)
            error = r.json()["error"]
            assert "cannot connect to the PostgreSQL store" in error["message"], (name, error)
            if name == "openai":
                assert error["type"] == "server_error"
            elif name == "mcp":  # the request's id: the official client matches the answer to its request by it
                assert (r.json()["jsonrpc"], r.json()["id"]) == ("2.0", 1)
            elif name == "tools":  # the tools' own snake_case codes
                assert error["code"] == "unavailable", error
            elif name == "qnamaker":  # QnA Maker's code for the server's trouble (its runtime has no x-ms-error-code)
                assert error["code"] == "ServiceError" and "x-ms-error-code" not in r.headers, (name, error)
            else:
                assert error["code"] == "ServiceUnavailable", (name, error)
        assert http.get("/healthz").status_code == 200  # the process itself is up
        unready = http.get("/readyz")  # but not ready: a balancer that checks it sends nobody here
        assert unready.status_code == 503 and unready.json()["status"] == "unavailable"
        assert "cannot connect to the PostgreSQL store" in unready.json()["reason"]

        restartable_pg.start()
        deadline = time.monotonic() + 30
        while (r := ask("Where is the office?")).status_code != 200:
            assert r.status_code == 503 and time.monotonic() < deadline, r.text
            time.sleep(0.2)
        assert r.json()["answers"][0]["answer"] == "On the third floor."  # nothing acknowledged was lost
        assert http.get("/readyz").json() == {"status": "ready", "version": http.get("/healthz").json()["version"]}
        written = add("Is there parking?", "Behind the building.")
        assert written.status_code == 202, written.text
        assert wait_for_job(written.headers["Operation-Location"])["status"] == "succeeded"
        assert ask("Is there parking?").json()["answers"][0]["answer"] == "Behind the building."
        assert server.proc.poll() is None
    log = " ".join((tmp_path / "serve.log").read_text().split())  # the console log wraps its lines
    assert "Traceback" not in log and "unhandled error" not in log, log[-4000:]
    assert "answering 503" in log and "the PostgreSQL store is reachable" in log  # when it went and came back
    # ... once each: not a line per refused request (300 for 200), nor the pool's at each reconnection attempt
    assert log.count("cannot connect to the PostgreSQL store") <= 2 and "error connecting" not in log, log[-4000:]


def test_a_dsn_libpq_cannot_read_is_refused_without_echoing_it():
    """A DSN with an unclosed bracket, or a password with a bad %-escape, was echoed in the error, password and all
    ("...qa:S3cretPw-xyz@[::1:55432/qa")."""
    for dsn in ("postgresql://qa:S3cretPw-xyz@[::1:55432/qa", "postgresql://qa:S3cret%zzPw@127.0.0.1:1/qa"):
        with pytest.raises(StoreUnavailable) as refused:
            PostgresStore(dsn)
        assert "S3cret" not in refused.value.message and "OPENQNA_STORE is not" in refused.value.message


def test_a_search_path_with_no_schema_is_one_line_not_a_traceback(restartable_pg):  # noqa: F811
    """``?options=-csearch_path=nosuch``: the tables cannot be made, and the store said so with a 47-line traceback
    (psycopg's InvalidSchemaName), or said to install pgvector; now it says what to fix, as every store error does."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    dsn = make_conninfo(**{**conninfo_to_dict(restartable_pg.dsn), "options": "-csearch_path=nosuch"})
    with pytest.raises(OpenQnAError, match="search_path .nosuch. names no schema that exists"):
        PostgresStore(dsn)
