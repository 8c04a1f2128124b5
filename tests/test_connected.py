"""Connected tables: MyScale's ArXiv example in a real ClickHouse (chdb) and a real PostgreSQL (pgserver).

2,000 SciFact abstracts with seeded dates, categories and authors (``test_tools.arxiv_rows``), embedded
once by the bundled model, go into ``default.ChatArXiv`` in chdb and into a pgvector table; both are
connected (never copied) and searched over HTTP as a GPT would, and every answer is checked against
openqna's in-memory evaluator of the same where_str on the same rows, ordered by the same vectors.
"""

from __future__ import annotations

import json
import logging
import threading
from urllib.parse import quote

import anyio
import httpx
import httpx2
import numpy as np
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from openapi_spec_validator import validate

from conftest import LiveServer, free_port
from openqna.connected.clickhouse import ChdbClient, chdb_session, close_chdb
from openqna.connected.pgvector import PostgresTable
from openqna.filters.evaluate import evaluate
from openqna.filters.where_str import parse_where
from openqna.kb.service import Service
from openqna.kinds.connected_tables import connect_table
from openqna.kinds.tables import TableSchema, parse_column
from openqna.records import InvalidArgument
from openqna.store.sqlite import SQLiteStore
from openqna.turns import Turns
from pg import DATABASE, pg_server  # noqa: F401  (fixture)
from test_cli import run
from test_tools import ARXIV_COLUMNS, REFUSALS, arxiv_rows

N_ROWS = 2000
PASSWORD = "pw-Zq7#not-in-any-output"
SCHEMA = TableSchema([parse_column(c) for c in ARXIV_COLUMNS], ["title", "abstract"], "title").columns
SEARCHES = [
    ("language models for text", "has(categories, 'cs.CL') AND pubdate > parseDateTime32BestEffort('2023-01-01')"),
    ("cancer cells and tumour growth", None),
    ("bacterial infection", "hasAny(authors, ['B. Chen', 'D. Müller']) AND NOT has(categories, 'stat.ML')"),
    ("protein structure", "title ILIKE '%protein%' OR toDate(pubdate) BETWEEN '2020-01-01' AND '2020-03-31'"),
]


@pytest.fixture(scope="module")
def arxiv(embedder):
    rows = arxiv_rows(N_ROWS)
    texts = [f"{r['title']}\n\n{r['abstract'][:160]}" for r in rows]  # the vectors' text: short, to embed fast
    vectors = np.vstack([embedder.embed(texts[i:i + 16]) for i in range(0, len(texts), 16)]).astype(np.float32)
    return rows, vectors


@pytest.fixture(scope="module")
def clickhouse(tmp_path_factory, arxiv):
    rows, vectors = arxiv
    path = str(tmp_path_factory.mktemp("clickhouse") / "db")
    session = chdb_session(path)
    session.query("CREATE TABLE default.ChatArXiv (id String COMMENT 'arXiv id', title String, abstract String, "
                  "pubdate DateTime, categories Array(String) COMMENT 'arXiv categories such as cs.CL', "
                  "authors Array(String), vector Array(Float32)) ENGINE = MergeTree ORDER BY id")
    lines = [json.dumps({**r, "vector": v.tolist()}) for r, v in zip(rows, vectors)]
    for i in range(0, len(lines), 500):
        session.query("INSERT INTO default.ChatArXiv FORMAT JSONEachRow\n" + "\n".join(lines[i:i + 500]))
    session.query("CREATE TABLE default.Tiny (id String, title String, tag String, vector Array(Float32)) "
                  "ENGINE = MergeTree ORDER BY id")
    session.query("INSERT INTO default.Tiny FORMAT JSONEachRow\n" + json.dumps(
        {"id": "1", "title": "a tiny row", "tag": "x", "vector": vectors[0].tolist()}))
    yield f"chdb://{path}"
    close_chdb()


@pytest.fixture(scope="module")
def postgres(pg_server, arxiv):  # noqa: F811
    """The rows in a pgvector table with an HNSW index, readable by a role that may only SELECT."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    rows, vectors = arxiv
    schema = pg_server.create_schema()
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {schema}.chat_arxiv (id text PRIMARY KEY, title text, abstract text, "
                     "pubdate timestamptz, categories text[], authors text[], vector vector(384))")
        conn.execute(f"COMMENT ON COLUMN {schema}.chat_arxiv.categories IS 'arXiv categories such as cs.CL'")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {schema}.chat_arxiv VALUES (%s, %s, %s, %s, %s, %s, %s::vector)",
                            [(r["id"], r["title"], r["abstract"], r["pubdate"] + "+00", r["categories"],
                              r["authors"], "[" + ",".join(map(str, v.tolist())) + "]")
                             for r, v in zip(rows, vectors)])
        conn.execute(f"CREATE INDEX ON {schema}.chat_arxiv USING hnsw (vector vector_cosine_ops)")
        conn.execute("DROP ROLE IF EXISTS gpt_reader")
        conn.execute(f"CREATE ROLE gpt_reader LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO gpt_reader")
        conn.execute(f"GRANT SELECT ON {schema}.chat_arxiv TO gpt_reader")
    params = conninfo_to_dict(pg_server.dsn())
    url = (f"postgresql://gpt_reader:{quote(PASSWORD, safe='')}@/{DATABASE}?host={quote(str(params['host']))}"
           + (f"&port={params['port']}" if params.get("port") else ""))
    yield url, f"{schema}.chat_arxiv"
    pg_server.drop_schema(schema)
    pg_server.execute("DROP OWNED BY gpt_reader", DATABASE)
    pg_server.execute("DROP ROLE gpt_reader")


@pytest.fixture(scope="module")
def live(tmp_path_factory, embedder, clickhouse, postgres):
    service = Service(SQLiteStore(tmp_path_factory.mktemp("openqna")), embedder)
    connect_table(service, "arxiv", clickhouse, "default.ChatArXiv", vector="vector", text=["title", "abstract"],
                  title="title", description="arXiv abstracts with categories, authors and dates")
    connect_table(service, "arxiv_pg", postgres[0], postgres[1], vector="vector", text=["title", "abstract"],
                  title="title")
    with LiveServer(service) as served:
        yield served
    service.connected.close()


def expected(arxiv, embedder, subject: str, where: str | None, limit: int) -> list[tuple[str, float]]:
    """(id, score) of the rows the in-memory evaluator keeps, nearest first: the oracle."""
    rows, vectors = arxiv
    keep = np.ones(len(rows), bool)
    if where:
        f = parse_where(where, {c.name: c for c in SCHEMA})
        keep = np.array([evaluate(f, r) for r in rows])
    distance = 1.0 - vectors @ embedder.embed([subject])[0]
    order = [i for i in np.argsort(distance, kind="stable") if keep[i]][:limit]
    return [(rows[i]["id"], 1.0 - float(distance[i]) / 2) for i in order]


def get(live, path, **params):
    return httpx.get(live.url + path, params={k: v for k, v in params.items() if v is not None}, timeout=60)


@pytest.mark.parametrize("kb", ["arxiv", "arxiv_pg"])
@pytest.mark.parametrize(("subject", "where"), SEARCHES, ids=[w or "no filter" for _, w in SEARCHES])
def test_a_gpt_style_search_returns_the_evaluators_rows_in_order(live, arxiv, embedder, kb, subject, where):
    want = expected(arxiv, embedder, subject, where, 10)
    assert len(want) == 10  # every filter here keeps more than a page of rows
    body = get(live, f"/tools/{kb}/search", subject=subject, where_str=where, limit=10).json()
    got = [(h["fields"]["id"], h["score"]) for h in body["hits"]]
    assert [i for i, _ in got] == [i for i, _ in want]
    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-3)
    related = get(live, f"/get_related_{kb}", subject=subject, where_str=where).json()
    lines = [json.loads(line) for line in related["documents"].split("\n")]
    assert related["num_retrieved"] == 4 and [line["id"] for line in lines] == [i for i, _ in want[:4]]
    if where and "cs.CL" in where:
        assert all("cs.CL" in line["categories"] and line["pubdate"] > "2023-01-01" for line in lines)


@pytest.mark.parametrize("kb", ["arxiv", "arxiv_pg"])
@pytest.mark.parametrize(("params", "code", "fragment"), REFUSALS)
def test_hostile_requests_get_the_same_400s_as_a_loaded_table(live, kb, params, code, fragment):
    r = get(live, f"/get_related_{kb}", **params)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == code and fragment.lower() in r.json()["error"]["message"].lower()


def test_the_tool_description_shows_the_table_as_create_table(live):
    doc = httpx.get(live.url + "/tools/openapi.json", timeout=30).json()
    validate(doc)
    where = {p["name"]: p for p in doc["paths"]["/get_related_arxiv"]["get"]["parameters"]}["where_str"]
    sketch = where["description"]
    assert "CREATE TABLE default.ChatArXiv (" in sketch and "pubdate DateTime," in sketch
    assert "categories Array(String), -- arXiv categories such as cs.CL" in sketch and "vector" not in sketch
    pg = {p["name"]: p for p in doc["paths"]["/get_related_arxiv_pg"]["get"]["parameters"]}["where_str"]
    assert "pubdate timestamp with time zone," in pg["description"] and "categories text[]" in pg["description"]
    assert PASSWORD not in json.dumps(doc) and "gpt_reader" not in json.dumps(doc)


def test_only_select_and_describe_statements_reach_the_engines(tmp_path, embedder, clickhouse, postgres,
                                                               monkeypatch):
    sent: list[str] = []
    ch_query, pg_select = ChdbClient.query, PostgresTable.select
    monkeypatch.setattr(ChdbClient, "query", lambda self, sql, params: sent.append(sql) or ch_query(self, sql, params))
    monkeypatch.setattr(PostgresTable, "select", lambda self, sql, params: sent.append(sql) or pg_select(self, sql,
                                                                                                         params))
    service = Service(SQLiteStore(tmp_path), embedder)
    connect_table(service, "ch", clickhouse, "default.ChatArXiv", vector="vector", text=["abstract"])
    connect_table(service, "pg", postgres[0], postgres[1], vector="vector", text=["abstract"])
    for kb in ("ch", "pg"):
        assert len(service.search(kb, "gene expression", where="has(categories, 'q-bio.GN')", limit=3)) == 3
    assert sent and all(s.startswith(("SELECT ", "DESCRIBE TABLE ")) for s in sent), sent
    assert not any("q-bio.GN" in s for s in sent)  # the filter's values went as parameters
    with pytest.raises(InvalidArgument, match="rows live in its own database"):
        from openqna.kinds.tables import load_rows
        load_rows(service, "ch", "more.jsonl", b'{"id": "x"}')
    engine = service.connected.engines["pg"][1]  # and PostgreSQL sessions are read-only besides
    with pytest.raises(Exception, match="25006"):
        engine.select(f"DELETE FROM {postgres[1]}", [])
    service.connected.close()


def test_a_search_gives_its_turn_up_while_the_engine_answers(tmp_path, embedder, postgres, monkeypatch):
    """A connected table's round trip is no Python work of the asking thread (``openqna.turns``): while
    the engine answers, another thread takes the turn, instead of waiting for the search or its patience."""
    service = Service(SQLiteStore(tmp_path), embedder)
    connect_table(service, "pg", postgres[0], postgres[1], vector="vector", text=["abstract"])
    service.turns = Turns(1, patience=30)
    at_engine, other_had_the_turn = threading.Event(), threading.Event()
    select, meanwhile = PostgresTable.select, []

    def slow_select(self, sql, params):
        at_engine.set()
        meanwhile.append(other_had_the_turn.wait(5))
        return select(self, sql, params)

    def other():
        at_engine.wait(10)
        with service.turns.held():
            other_had_the_turn.set()

    monkeypatch.setattr(PostgresTable, "select", slow_select)
    waiting = threading.Thread(target=other)
    waiting.start()
    assert len(service.search("pg", "gene expression", limit=3)) == 3
    waiting.join(10)
    assert meanwhile and all(meanwhile) and service.turns.late == 0  # each of the engine's round trips
    service.connected.close()


def test_the_password_is_stored_encrypted_and_never_shown_or_logged(live, tmp_path, caplog, postgres):
    caplog.set_level(logging.DEBUG)
    data = tmp_path / "data"
    out = run("table", "connect", "papers", "--url", postgres[0].replace(quote(PASSWORD, safe=""), ""),
              "--password-env", "PAPERS_PW", "--table", postgres[1], "--vector", "vector", "--text", "abstract",
              data=data, env={"PAPERS_PW": PASSWORD})
    assert "connected table papers" in out.stdout and "gpt_reader:***@" in out.stdout
    service = Service(SQLiteStore(data), live.service.embedder)
    assert len(service.search("papers", "vaccines", limit=2)) == 2  # the stored secret still opens the table
    service.connected.close()
    stored = b"".join(p.read_bytes() for p in data.glob("openqna.sqlite3*"))
    assert b"gpt_reader" in stored and PASSWORD.encode() not in stored and quote(PASSWORD).encode() not in stored
    assert (data / "secret.key").stat().st_mode & 0o077 == 0
    assert PASSWORD not in out.stdout + out.stderr + caplog.text
    assert PASSWORD not in json.dumps([k.__dict__ for k in live.service.knowledge_bases()], default=str)


def test_an_embedder_of_another_dimension_is_refused(tmp_path, embedder, clickhouse):
    service = Service(SQLiteStore(tmp_path), embedder)
    with pytest.raises(InvalidArgument, match="must match") as refused:
        connect_table(service, "x", clickhouse, "default.ChatArXiv", vector="vector", text=["title"],
                      embedder="hash")
    assert "384" in refused.value.message
    with pytest.raises(InvalidArgument, match="vector columns: vector"):
        connect_table(service, "x", clickhouse, "default.ChatArXiv", vector="title", text=["title"])
    assert service.knowledge_bases() == []


def test_engine_failures_are_tools_errors_that_name_no_host_or_secret(live, tmp_path, embedder, clickhouse,
                                                                      postgres, monkeypatch):
    service = Service(SQLiteStore(tmp_path), embedder)
    connect_table(service, "tiny", clickhouse, "default.Tiny", vector="vector", text=["title"])
    connect_table(service, "gone", clickhouse, "default.Tiny", vector="vector", text=["title"])
    connect_table(service, "slow", postgres[0], postgres[1], vector="vector", text=["abstract"])
    monkeypatch.setenv("OPENQNA_CONNECTED_TIMEOUT", "0.001")  # read when a search opens the engine
    project = service.store.get_project("gone")  # its server goes away
    port = free_port()
    project.settings["connected"].update(engine="clickhouse", url=f"clickhouse://reader:***@127.0.0.1:{port}/db")
    service.store.update_project(project)
    chdb_session(clickhouse.removeprefix("chdb://")).query("ALTER TABLE default.Tiny RENAME COLUMN tag TO label")
    with LiveServer(service) as served:
        rejected = get(served, "/get_related_tiny", subject="tiny", where_str="tag = 'x'")
        gone = get(served, "/tools/gone/search", subject="tiny")
        slow = get(served, "/get_related_slow", subject="vaccines", where_str="title ILIKE '%a%e%i%o%'", limit=20)
    assert (rejected.status_code, rejected.json()["error"]["code"]) == (400, "engine_rejected")
    assert "UNKNOWN_IDENTIFIER" in rejected.json()["error"]["message"]
    assert (gone.status_code, gone.json()["error"]["code"]) == (503, "engine_unavailable")
    assert (slow.status_code, slow.json()["error"]["code"]) == (504, "engine_timeout")
    for r in (rejected, gone, slow):
        message = r.json()["error"]["message"]
        assert all(s not in message for s in ("127.0.0.1", str(port), "reader", "chdb", "/tmp", PASSWORD, "SELECT"))
    service.connected.close()


def test_mcp_search_reads_a_connected_table(live, arxiv, embedder):
    subject, where = SEARCHES[0]

    async def main():
        async with (httpx2.AsyncClient(timeout=60) as http_client,
                    Client(streamable_http_client(live.url + "/mcp", http_client=http_client)) as client):
            return await client.call_tool("search", {"kb": "arxiv", "subject": subject, "where": where, "limit": 5})

    result = anyio.run(main)
    text = " ".join(c.text for c in result.content if c.type == "text")
    want = [i for i, _ in expected(arxiv, embedder, subject, where, 5)]
    positions = [text.find(json.dumps(i)) for i in want]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), text[:500]


def test_the_readme_examples_connect(tmp_path, clickhouse, postgres):
    """The docs' `openqna table connect` examples, run as written but for the servers they name."""
    from conftest import REPO
    from test_readme import doc_blocks, run_block

    (tmp_path / "src").symlink_to(REPO / "src")
    [block] = [b.code for b in doc_blocks() if b.lang == "sh" and "openqna table connect arxiv" in b.code]
    block = (block.replace("clickhouse://gpt_reader@msc-example.myscale.com:8123/default", clickhouse)
             .replace("'postgresql://gpt_reader:PASSWORD@db.example.org:5432/library'", f"'{postgres[0]}'")
             .replace("public.chat_arxiv", postgres[1]))
    close_chdb()  # the CLI's process opens the chdb directory; this one reopens it on its next query
    out = run_block(block, tmp_path, tmp_path / "data")
    assert "connected table arxiv: default.ChatArXiv" in out and "connected table papers_pg" in out
    assert PASSWORD not in out
