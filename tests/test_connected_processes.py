"""Connected tables served by more than one process: the key that opens a stored password, and chdb's lock.

Each process that finds no ``OPENQNA_SECRET_KEY`` keeps a key of its own beside its data, so a CLI and a server run
from different folders on one PostgreSQL store cannot read each other's passwords; and chdb opens a directory in one
process at a time.  Both failed every search with a 500 and a traceback (a ``cryptography`` ``InvalidToken``, even
for a chdb table, which has no password) or a 400 that blamed ``where_str``.  Here a real helpdesk table lives in
chdb and in PostgreSQL (pgserver), is connected, and is searched by a real server while another key, another store
folder or another process holding the chdb directory is in the way.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from urllib.parse import quote

import anyio
import httpx
import httpx2
import pytest
from cryptography.fernet import Fernet
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import LiveServer
from openqna.connected.clickhouse import CHDB_LOCK, ChdbClient, chdb_session, close_chdb, engine_error
from openqna.connected.engine import EngineRejected, EngineUnavailable
from openqna.kb.connected_search import SECRET
from openqna.kb.service import Service
from openqna.kinds.connected_tables import connect_table
from openqna.store.postgres import PostgresStore
from openqna.store.sqlite import SQLiteStore
from pg import DATABASE, pg_dsn, pg_server  # noqa: F401  (fixtures)
from test_cli import run

PASSWORD = "helpdesk-pw-8#Lk"
ROWS = [{"id": "1", "title": "Returns", "text": "Returns are accepted within 30 days of purchase with the receipt."},
        {"id": "2", "title": "Shipping", "text": "Orders ship within two business days; delivery takes a week."},
        {"id": "3", "title": "Warranty", "text": "The warranty covers manufacturing defects for one year."}]
SUBJECT = "can I send it back?"
# another server's chdb: it opens the directory, says so, and holds it until its stdin closes
HOLD = "import sys, chdb.session; s = chdb.session.Session(sys.argv[1]); print('open', flush=True); sys.stdin.read()"


def vectors(embedder) -> list[list[float]]:
    return embedder.embed([f"{r['title']}\n\n{r['text']}" for r in ROWS]).tolist()


def chdb_helpdesk(path: str, embedder, title_suffix: str = "") -> str:
    """docs/tools.md's helpdesk table in a chdb directory (each title ending in ``title_suffix``): its chdb:// URL."""
    session = chdb_session(path)
    session.query("CREATE TABLE default.helpdesk (id String, title String, text String, vector Array(Float32)) "
                  "ENGINE = MergeTree ORDER BY id")
    session.query("INSERT INTO default.helpdesk FORMAT JSONEachRow\n" + "\n".join(
        json.dumps({**r, "title": r["title"] + title_suffix, "vector": v}) for r, v in zip(ROWS, vectors(embedder))))
    return f"chdb://{path}"


@pytest.fixture
def helpdesk_chdb(tmp_path, embedder):
    """docs/tools.md's helpdesk table in chdb: its chdb:// URL."""
    yield chdb_helpdesk(str(tmp_path / "helpdesk-chdb"), embedder)
    close_chdb()


@pytest.fixture
def helpdesk_pg(pg_server, embedder):  # noqa: F811
    """The helpdesk table in pgvector, read by a role with a password: its URL (with the password) and table."""
    import psycopg

    schema = pg_server.create_schema()
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {schema}.helpdesk (id text PRIMARY KEY, title text, text text, vector vector(384))")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {schema}.helpdesk VALUES (%s, %s, %s, %s::vector)",
                            [(r["id"], r["title"], r["text"], "[" + ",".join(map(str, v)) + "]")
                             for r, v in zip(ROWS, vectors(embedder))])
        conn.execute("DROP ROLE IF EXISTS helpdesk_reader")
        conn.execute(f"CREATE ROLE helpdesk_reader LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO helpdesk_reader")
        conn.execute(f"GRANT SELECT ON {schema}.helpdesk TO helpdesk_reader")
    yield pg_server.role_url("helpdesk_reader", PASSWORD), f"{schema}.helpdesk"
    pg_server.drop_reader(schema, "helpdesk_reader")


def search(served, kb: str) -> httpx.Response:
    return httpx.get(f"{served.url}/tools/{kb}/search", params={"subject": SUBJECT, "limit": 1}, timeout=60)


def mcp_search(served, kb: str):
    async def main():
        async with (httpx2.AsyncClient(timeout=60) as http_client,
                    Client(streamable_http_client(served.url + "/mcp", http_client=http_client)) as client):
            return await client.call_tool("search", {"kb": kb, "subject": SUBJECT, "limit": 1})

    return anyio.run(main)


def test_a_password_the_servers_key_cannot_decrypt_is_a_503_that_names_the_key(tmp_path, embedder, helpdesk_pg,
                                                                               monkeypatch, caplog):
    first = Fernet.generate_key().decode()
    monkeypatch.setenv("OPENQNA_SECRET_KEY", first)
    connect_table(Service(SQLiteStore(tmp_path), embedder), "helpdesk_pg", *helpdesk_pg, vector="vector",
                  text=["text"], title="title")
    monkeypatch.setenv("OPENQNA_SECRET_KEY", Fernet.generate_key().decode())  # the server's own key: another one
    caplog.set_level(logging.WARNING)
    service = Service(SQLiteStore(tmp_path), embedder)
    with LiveServer(service) as served:
        searched = search(served, "helpdesk_pg")
        related = httpx.get(f"{served.url}/get_related_helpdesk_pg", params={"subject": SUBJECT}, timeout=60)
        tool = mcp_search(served, "helpdesk_pg")
        monkeypatch.setenv("OPENQNA_SECRET_KEY", first)  # the operator gives every process the same key
        fixed = search(served, "helpdesk_pg")
    service.connected.close()
    for r in (searched, related):
        assert (r.status_code, r.json()["error"]["code"]) == (503, "engine_unavailable"), r.text
        message = r.json()["error"]["message"]
        assert "'helpdesk_pg' cannot be decrypted with this server's secret key" in message
        assert "the same OPENQNA_SECRET_KEY (docs/settings.md)" in message
    text = " ".join(c.text for c in tool.content if c.type == "text")
    assert tool.is_error and "'helpdesk_pg' cannot be decrypted" in text and "OPENQNA_SECRET_KEY" in text
    said = [r for r in caplog.records if "cannot be decrypted" in r.getMessage()]
    assert len(said) == 3 and all(r.levelno == logging.WARNING for r in said)  # one line a request
    assert not any(r.exc_info for r in caplog.records) and "Traceback" not in caplog.text
    assert PASSWORD not in caplog.text + searched.text + text
    assert fixed.status_code == 200 and fixed.json()["hits"][0]["title"] == "Returns"


def test_a_chdb_table_has_no_password_to_decrypt(tmp_path, embedder, helpdesk_chdb, monkeypatch):
    """chdb takes no password, yet an encrypted empty one was kept and decrypted on every search: under another key
    (another process's secret.key) a chdb table failed too.  None is kept now, and none made before is read."""
    monkeypatch.delenv("OPENQNA_SECRET_KEY", raising=False)
    data = tmp_path / "data"
    service = Service(SQLiteStore(data), embedder)
    connect_table(service, "helpdesk", helpdesk_chdb, "default.helpdesk", vector="vector", text=["text"],
                  title="title")
    assert SECRET not in service.store.get_project("helpdesk").settings and not (data / "secret.key").exists()
    project = service.store.get_project("helpdesk")  # as a table connected before this kept it, under another key
    project.settings[SECRET] = Fernet(Fernet.generate_key()).encrypt(b"").decode()
    service.store.update_project(project)
    with LiveServer(service) as served:
        found = search(served, "helpdesk")
    assert found.status_code == 200, found.text
    assert found.json()["hits"][0]["title"] == "Returns"


def test_a_key_made_for_a_postgresql_store_is_announced_and_another_folders_server_says_why_it_fails(
        tmp_path, embedder, helpdesk_pg, pg_dsn, monkeypatch, caplog):  # noqa: F811
    """The QA report's steps: `table connect` from one folder and `serve` from another on one PostgreSQL store,
    without OPENQNA_SECRET_KEY.  Each made a key of its own without a word, and every search was a 500."""
    url, table = helpdesk_pg
    out = run("table", "connect", "covid_pg", "--url", url.replace(f":{quote(PASSWORD, safe='')}", ""),
              "--password-env", "PGPW", "--table", table, "--vector", "vector", "--text", "text",
              data=tmp_path / "a", env={"PGPW": PASSWORD, "OPENQNA_STORE": pg_dsn, "OPENQNA_SECRET_KEY": ""})
    key = tmp_path / "a" / "secret.key"
    assert key.exists()
    [warning] = [line for line in out.stderr.splitlines() if "secret key" in line]
    assert f"created a new secret key for connected tables' passwords at {key}" in warning
    assert "every process sharing this PostgreSQL store needs the same key: set OPENQNA_SECRET_KEY" in warning

    monkeypatch.delenv("OPENQNA_SECRET_KEY", raising=False)
    monkeypatch.setenv("OPENQNA_DATA", str(tmp_path / "b"))
    caplog.set_level(logging.WARNING)
    service = Service(PostgresStore(pg_dsn, pool_size=2), embedder)
    with LiveServer(service) as served:
        searched = search(served, "covid_pg")
    service.connected.close()
    service.store.close()
    assert (searched.status_code, searched.json()["error"]["code"]) == (503, "engine_unavailable"), searched.text
    assert "'covid_pg' cannot be decrypted" in searched.json()["error"]["message"]
    assert f"created a new secret key for connected tables' passwords at {tmp_path / 'b' / 'secret.key'}" in caplog.text

    caplog.clear()  # an embedded store keeps its key beside itself, for its own processes: nothing to announce
    connect_table(Service(SQLiteStore(tmp_path / "c"), embedder), "covid", url, table, vector="vector", text=["text"])
    assert (tmp_path / "c" / "secret.key").exists() and "secret key" not in caplog.text


def test_a_chdb_directory_open_in_another_process_is_a_503_that_says_so(tmp_path, embedder, helpdesk_chdb):
    """Two servers of one store and docs/tools.md's helpdesk table: the second answered 400 engine_rejected, "error
    36 (BAD_ARGUMENTS). Check where_str", with no where_str, because chdb could not lock the directory."""
    service = Service(SQLiteStore(tmp_path / "data"), embedder)
    connect_table(service, "helpdesk", helpdesk_chdb, "default.helpdesk", vector="vector", text=["text"],
                  title="title")
    close_chdb()  # the first server is another process now
    holder = subprocess.Popen([sys.executable, "-c", HOLD, helpdesk_chdb.removeprefix("chdb://")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with LiveServer(service) as served:
            held = search(served, "helpdesk")
            related = httpx.get(f"{served.url}/get_related_helpdesk", params={"subject": SUBJECT}, timeout=60)
            tool = mcp_search(served, "helpdesk")
            assert holder.stdin is not None
            holder.stdin.close()  # the other process lets the directory go
            holder.wait(30)
            freed = search(served, "helpdesk")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    for r in (held, related):
        assert (r.status_code, r.json()["error"]["code"]) == (503, "engine_unavailable"), r.text
        message = r.json()["error"]["message"]
        assert "chdb directory is open in another process" in message and "connect a ClickHouse server" in message
        assert "where_str" not in message and str(tmp_path) not in message
    text = " ".join(c.text for c in tool.content if c.type == "text")
    assert tool.is_error and "open in another process" in text
    assert freed.status_code == 200 and freed.json()["hits"][0]["title"] == "Returns"


def test_only_a_directory_chdb_cannot_open_is_unavailable(tmp_path, helpdesk_chdb):
    """chdb reports any directory it cannot open as error 36 (BAD_ARGUMENTS), as it does some queries' own errors:
    the first is the engine being unavailable, and error 36 from a query stays a 400 that points at where_str."""
    client = ChdbClient(helpdesk_chdb.removeprefix("chdb://"))
    with pytest.raises(EngineRejected, match="error 36 \\(BAD_ARGUMENTS\\). Check where_str") as rejected:
        client.query("SELECT toDateTime('2020-01-01', 'Nowhere/Zone')", {})
    assert rejected.value.engine_code == 36
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(EngineUnavailable, match="chdb could not open the table's directory"):
        ChdbClient(str(tmp_path / "a-file")).query("SELECT 1", {})


def test_chdb_tables_in_two_directories_searched_at_once_take_turns(tmp_path, embedder, helpdesk_chdb, monkeypatch):
    """QA: two chdb tables, each in its own directory, searched by two clients at once. After a few calls every search
    of one answered 400 engine_rejected, "error 236 (ABORTED) ... Check where_str" with no where_str, and every search
    of the other hung for good (8 clients killed the server): chdb has one session per process, and opening one
    directory's session closed the other's under its running query.  Now they take turns, and a search that waits
    for its turn longer than OPENQNA_CONNECTED_TIMEOUT is a 504."""
    other = chdb_helpdesk(str(tmp_path / "other-chdb"), embedder, title_suffix=" (B)")
    service = Service(SQLiteStore(tmp_path / "data"), embedder)
    for kb, url in (("desk_a", helpdesk_chdb), ("desk_b", other)):
        connect_table(service, kb, url, "default.helpdesk", vector="vector", text=["text"], title="title")
    answers: dict[str, list[object]] = {"desk_a": [], "desk_b": []}

    def client(served, kb):
        for _ in range(10):
            try:
                r = httpx.get(f"{served.url}/tools/{kb}/search", params={"subject": SUBJECT, "limit": 1}, timeout=20)
            except httpx.TimeoutException:
                answers[kb].append("no answer in 20 s")
                return
            answers[kb].append(r.json()["hits"][0]["title"] if r.status_code == 200 else r.text)
            if r.status_code != 200:
                return

    with LiveServer(service) as served:
        clients = [threading.Thread(target=client, args=(served, kb)) for kb in answers for _ in range(2)]
        for t in clients:
            t.start()
        for t in clients:
            t.join(120)
    assert answers == {"desk_a": ["Returns"] * 20, "desk_b": ["Returns (B)"] * 20}  # each from its own directory

    monkeypatch.setenv("OPENQNA_CONNECTED_TIMEOUT", "0.5")  # read when a search opens the engine
    service = Service(SQLiteStore(tmp_path / "data"), embedder)
    with LiveServer(service) as served, CHDB_LOCK:  # another table's query holds chdb
        busy = search(served, "desk_a")
    assert (busy.status_code, busy.json()["error"]["code"]) == (504, "engine_timeout"), busy.text
    assert "where_str" not in busy.json()["error"]["message"]


@pytest.mark.parametrize(("message", "status", "code"), [
    ("Code: 236. DB::Exception: Query was aborted. (ABORTED)", 503, "EngineUnavailable"),
    ("Code: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_EXCEEDED)", 503, "EngineUnavailable"),
    ("Code: 394. DB::Exception: Query was cancelled. (QUERY_WAS_CANCELLED)", 504, "EngineTimeout"),
    ("Code: 43. DB::Exception: Illegal type String of argument. (ILLEGAL_TYPE_OF_ARGUMENT)", 400, "EngineRejected"),
])
def test_only_errors_of_the_query_itself_point_at_where_str(message, status, code):
    error = engine_error(RuntimeError(message))
    assert (error.status, error.code) == (status, code)
    assert ("Check where_str" in error.message) == (status == 400) and "DB::Exception" not in error.message
