"""The SQLite store against the conformance suite, plus what is SQLite-specific."""

import functools
import shutil
import sqlite3

import numpy as np
import pytest

from index_cache_conformance import *  # noqa: F403  (the index cache over this store)
from openqna.index import index_cache
from openqna.index.index_cache import IndexCache
from openqna.records import QnA, StoreFull
from openqna.store import Project, StoredQnA
from openqna.store.sqlite import SQLiteStore
from openqna.store.sqlite_schema import SCHEMA_VERSION
from store_conformance import *  # noqa: F401,F403  (the shared suite)
from store_conformance import item, vec


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "data")
    yield s
    s.close()


@pytest.fixture
def reopen(tmp_path):
    return functools.partial(SQLiteStore, tmp_path / "data")  # picklable: worker processes open it too


def test_second_process_sees_writes(tmp_path):
    """Two store objects on one file behave like two processes: the index catches up."""
    a, b = SQLiteStore(tmp_path), SQLiteStore(tmp_path)
    a.create_project(Project("shared"))
    assert IndexCache(b).get("shared").n == 0
    a.put_qnas("shared", [item(["hello"], "world", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
    assert IndexCache(b).get("shared").n == 1
    assert b.get_qnas("shared", [1])[1].answer == "world"


def test_failed_write_leaves_nothing(tmp_path):
    s = SQLiteStore(tmp_path)
    s.create_project(Project("p"))
    good = item(["q1"], "a1", vectors=[vec(1, 0)], answer_vector=vec(0, 1))
    bad = item(["q2"], "a2", vectors=[vec(1, 0)], answer_vector=vec(0, 1))
    bad.units.append(bad.units[0])  # duplicate unit key: the insert fails mid-batch
    with pytest.raises(sqlite3.IntegrityError):
        s.put_qnas("p", [good, bad])
    assert s.count_qnas("p") == 0
    assert IndexCache(s).get("p").n == 0


def test_a_full_disk_is_said_and_the_store_writes_again_once_there_is_room(tmp_path):
    """SQLite rolls a transaction back itself on a full disk (SQLITE_FULL, here from ``max_page_count``); the
    store's own ROLLBACK then raised "cannot rollback - no transaction is active", hiding why the write failed."""
    s = SQLiteStore(tmp_path)
    s.create_project(Project("p"))
    pages = s._db.execute("PRAGMA page_count").fetchone()[0]
    s._db.execute(f"PRAGMA max_page_count={pages + 2}")
    big = [item([f"question {n}"], "answer " * 500, vectors=[vec(1, 0)], answer_vector=vec(0, 1)) for n in range(50)]
    with pytest.raises(StoreFull, match=f"the disk is full: nothing more can be written to the store in {tmp_path} "):
        s.put_qnas("p", big)
    assert s.count_qnas("p") == 0 and not s._db.in_transaction
    s._db.execute("PRAGMA max_page_count=1073741823")
    s.put_qnas("p", big)
    assert s.count_qnas("p") == 50


def test_schema_1_databases_are_migrated(tmp_path):
    """A database written before typed fields existed opens, gains the column, and keeps its records."""
    old = SQLiteStore(tmp_path)
    old.create_project(Project("p"))
    old.put_qnas("p", [item(["q"], "a", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
    db = old._db
    db.execute("CREATE TABLE r AS SELECT project_id, deployment, id, kind, questions, answer, source, metadata,"
               " dialog, suggestions, content_hash, modified FROM records")
    db.execute("DROP TABLE records")
    db.execute("ALTER TABLE r RENAME TO records")
    db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    old.close()
    new = SQLiteStore(tmp_path)
    assert new.get_qnas("p", [1])[1].fields == {}
    assert new._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_a_database_upgraded_by_a_newer_openqna_is_refused_untouched(tmp_path):
    """An older openqna facing a newer schema refuses to open it and writes nothing (it used to record its own,
    older version over the newer one, so the newer openqna would migrate again, and to write files without the
    columns it did not know); the command line says what to do in one line, without a traceback."""
    import subprocess
    import sys

    from openqna.store.base import SchemaTooNew

    newer = SQLiteStore(tmp_path)
    newer.create_project(Project("p"))
    newer._db.execute("ALTER TABLE files ADD COLUMN newer_column TEXT")  # what the newer version added
    newer._db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    newer.close()
    before = (tmp_path / "openqna.sqlite3").read_bytes()
    with pytest.raises(SchemaTooNew, match=f"schema version {SCHEMA_VERSION + 1}, newer than this openqna"):
        SQLiteStore(tmp_path)
    out = subprocess.run([sys.executable, "-m", "openqna.cli", "projects", "--data", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "a newer openqna upgraded it. Run that version of openqna or a newer one" in out.stderr
    assert (tmp_path / "openqna.sqlite3").read_bytes() == before
    db = sqlite3.connect(tmp_path / "openqna.sqlite3")
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION + 1)
    db.close()


def test_schema_9_files_gain_an_expiry_and_keep_everything(tmp_path):
    """A schema-9 store (before files could expire) with a project, a deployment, a file and a key opens at the
    current schema with all of them, the old file never expiring, and a new file may expire."""
    from openqna.store import ApiKey, StoredFile

    old = SQLiteStore(tmp_path)
    old.create_project(Project("p"))
    old.put_qnas("p", [item(["q"], "a", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
    old.deploy("p", "production")
    old.put_file(StoredFile("file-old", "a.txt", "assistants", 1, 1, data=b"a", scope=["p"]))
    old.add_key(ApiKey("k1", "reader", "query", ["p"], "2026-01-01T00:00:00Z"), "hash-1")
    old._db.execute("ALTER TABLE files DROP COLUMN expires_at")
    old._db.execute("UPDATE meta SET value='9' WHERE key='schema_version'")
    old.close()
    new = SQLiteStore(tmp_path)
    assert new._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert new.get_file("file-old", with_data=True) == StoredFile("file-old", "a.txt", "assistants", 1, 1, data=b"a",
                                                                  scope=["p"])
    assert new.list_qnas("p", "production")[0].answer == "a" and new.find_key("hash-1").name == "reader"
    new.put_file(StoredFile("file-new", "b.txt", "assistants", 1, 2, expires_at=3602))
    assert new.get_file("file-new").expires_at == 3602


def test_schema_2_jobs_are_migrated_to_a_queue(tmp_path):
    """Jobs written before claims and leases existed: queued ones stay queued in order, running ones fail."""
    from openqna.store import Job

    old = SQLiteStore(tmp_path)
    db = old._db
    db.execute("DROP TABLE jobs")
    db.execute("CREATE TABLE jobs(id TEXT PRIMARY KEY, kind TEXT NOT NULL, project TEXT NOT NULL, status TEXT NOT NULL,"
               " created TEXT NOT NULL, updated TEXT NOT NULL, expires TEXT NOT NULL, errors TEXT NOT NULL,"
               " params TEXT NOT NULL, owner TEXT NOT NULL, result BLOB, result_name TEXT, result_media TEXT)")
    for jid, status in (("b", "notStarted"), ("a", "notStarted"), ("r", "running")):
        db.execute("INSERT INTO jobs VALUES(?, 'deploy', 'p', ?, 't', 't', 't', '[]', '{}', 'h:1', NULL, NULL, NULL)",
                   (jid, status))
    db.execute("DROP INDEX IF EXISTS jobs_queue")
    db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    old.close()
    new = SQLiteStore(tmp_path)
    assert [j.id for j in new.unfinished_jobs()] == ["b", "a", "r"]
    assert new.fail_expired_jobs([{"code": "x", "message": "y"}]) == ["r"]
    assert [new.claim_job("me", ["deploy"], 30).id for _ in range(2)] == ["b", "a"]
    new.put_job(Job("c", "deploy", "p"))
    assert new.claim_job("me", ["deploy"], 30).id == "c"  # queued after the migrated ones


def test_schema_3_files_gain_a_scope(tmp_path):
    """Files uploaded before they kept the uploader's projects open with no scope (every project's)."""
    from openqna.store import StoredFile

    old = SQLiteStore(tmp_path)
    db = old._db
    db.execute("DROP TABLE files")
    db.execute("CREATE TABLE files(id TEXT PRIMARY KEY, filename TEXT NOT NULL, purpose TEXT NOT NULL,"
               " bytes INTEGER NOT NULL, created_at INTEGER NOT NULL, status TEXT NOT NULL, data BLOB NOT NULL,"
               " project TEXT)")
    db.execute("INSERT INTO files VALUES('file-old', 'a.txt', 'assistants', 1, 1, 'processed', x'61', NULL)")
    db.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    old.close()
    new = SQLiteStore(tmp_path)
    assert new.get_file("file-old", with_data=True) == StoredFile("file-old", "a.txt", "assistants", 1, 1, data=b"a")
    new.put_file(StoredFile("file-new", "b.txt", "assistants", 1, 2, scope=["alpha"]))
    assert new.get_file("file-new").scope == ["alpha"]


def test_schema_8_databases_gain_accepted_questions(tmp_path):
    """A schema-8 database (before acceptances were recorded) opens at schema 9 with its projects, none accepted."""
    from openqna.store.base import AcceptedQuestion

    old = SQLiteStore(tmp_path)
    old.create_project(Project("p"))
    old._db.execute("DROP TABLE accepted_questions")
    old._db.execute("UPDATE meta SET value='8' WHERE key='schema_version'")
    old.close()
    new = SQLiteStore(tmp_path)
    assert new.list_accepted("p") == []
    new.add_accepted("p", [AcceptedQuestion(1, "q", "suggestion")])
    assert [a.question for a in new.list_accepted("p")] == ["q"]
    assert new._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


# -- saved indexes -------------------------------------------------------------------------------
def _large_kb(store, n=80, seed=3):
    rng = np.random.default_rng(seed)
    words = "battery charge pen screen cable reset password monitor stylus power dock update".split()
    items = []
    for i in range(n):
        qs = [" ".join(rng.choice(words, 3)) + f" {i}" for _ in range(int(rng.integers(1, 4)))]
        items.append(item(qs, " ".join(rng.choice(words, 6)), vectors=[vec(*rng.standard_normal(8)) for _ in qs],
                          answer_vector=vec(*rng.standard_normal(8)), metadata={"group": str(i % 4)},
                          source=f"s{i % 3}", kind="passage" if i % 9 == 0 else "qna", context_only=i % 11 == 0))
    store.create_project(Project("snap"))
    return store.put_qnas("snap", items), rng, words


def _same_index(a, b, rng, words, monkeypatch):
    """Every score, mask and ranking of ``a`` equals ``b``'s (ids compared, not rows)."""
    from openqna.filters.nodes import And, KindIn, MetaEq, Not, SourceIn
    from openqna.ranking import ranker

    def by_id(index, values):
        return dict(zip(index.ids.tolist(), np.round(np.asarray(values, dtype=float), 5).tolist()))

    assert a.version == b.version and a.n == b.n
    for name in ("context_only", "passage"):
        assert by_id(a, getattr(a, name)) == by_id(b, getattr(b, name))
    assert {k: sorted(a.ids[r].tolist()) for k, r in a.exact.items()} == \
        {k: sorted(b.ids[r].tolist()) for k, r in b.exact.items()}
    from openqna.filters.nodes import Column
    from openqna.filters.where_str import parse_where

    schema = {"group": Column("group", "String"), "source": Column("source", "String"),
              "missing": Column("missing", "String")}
    wheres = [parse_where(w, schema) for w in (
        "group = '2'", "group IN ('1', '3') AND source != 's0'", "lower(source) LIKE 'S%' OR group > '2'",
        "missing IS NULL AND NOT (group = '0')", "length(group) = 1", "missing = 'x' OR source = 's2'")]
    for flt in (MetaEq("group", "2"), SourceIn(("S1",)), KindIn(("passage",)), Not(MetaEq("group", "0")),
                *wheres, And((wheres[0], Not(KindIn(("passage",)))))):
        assert by_id(a, a.mask(flt)) == by_id(b, b.mask(flt))
    assert a.metadata_keys() == b.metadata_keys() and a.hashes == b.hashes
    everything = np.ones(a.n, dtype=bool)
    for _ in range(5):
        query, terms = vec(*rng.standard_normal(8)), list(rng.choice(words, 2))
        for field in ("q", "a"):
            for fn in ("dense", "bm25", "coverage"):
                arg = query if fn == "dense" else terms
                assert by_id(a, getattr(a, fn)(arg, field, everything)) == by_id(b, getattr(b, fn)(arg, field, everything))
        for exact_max in ("0", "100000"):  # candidates (from the IVF index), then every record
            monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", exact_max)
            ranked = [(r.record_id, round(r.confidence, 5)) for r in ranker.rank(a, " ".join(terms), query, everything, top=5)]
            assert ranked == [(r.record_id, round(r.confidence, 5))
                              for r in ranker.rank(b, " ".join(terms), query, everything, top=5)]
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "0")


def mapped(array: np.ndarray) -> bool:
    """Whether ``array`` is a view of a memory-mapped file (read from disk, not copied into memory)."""
    while isinstance(array, np.ndarray):
        if isinstance(array, np.memmap):
            return True
        array = array.base
    return False


def test_a_restart_loads_the_saved_index_instead_of_building_it(tmp_path, monkeypatch):
    from openqna.index import field, memindex, saved_index

    monkeypatch.setattr(saved_index, "MIN_VECTORS", 1)
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "0")  # large enough for an IVF index: it is saved too
    first = SQLiteStore(tmp_path)
    _, rng, words = _large_kb(first)
    built = IndexCache(first).get("snap")
    assert list((tmp_path / "indexes").iterdir()) and built.q.shared_ann is not None

    builds = []
    monkeypatch.setattr(memindex.MemIndex, "__init__", lambda *a, **k: builds.append(1) or pytest.fail("rebuilt"))
    monkeypatch.setattr(field.FieldAnn, "__init__", lambda *a, **k: pytest.fail("IVF retrained"))
    loaded = IndexCache(SQLiteStore(tmp_path)).get("snap")
    assert not builds and mapped(loaded.q.matrix)
    _same_index(loaded, built, rng, words, monkeypatch)
    assert loaded._where_columns.rows is None  # where_str read the saved columns, not per-record rows
    assert loaded.q.nearest_units(vec(1, 0, 0, 0, 0, 0, 0, 0), 5, None).tolist() == \
        built.q.nearest_units(vec(1, 0, 0, 0, 0, 0, 0, 0), 5, None).tolist()


def test_a_saved_index_catches_up_with_later_writes_in_place(tmp_path, monkeypatch):
    from openqna.index import memindex, saved_index

    monkeypatch.setattr(saved_index, "MIN_VECTORS", 1)
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "0")
    writer = SQLiteStore(tmp_path)
    ids, rng, words = _large_kb(writer)
    saved = IndexCache(writer).get("snap").version
    writer.put_qnas("snap", [item(["reset the dock"], "hold the button", vectors=[vec(1, 2, 0, 0, 0, 0, 0, 0)],
                                  answer_vector=vec(0, 1, 0, 0, 0, 0, 0, 0), id=ids[3])])
    writer.delete_qnas("snap", ids[10:14])
    assert saved_index.version(saved_index.SavedIndexes(writer.index_dir, writer.instance).folder(1, "test"), writer.instance) == saved  # in-place: not re-saved

    updates = []
    real = memindex.MemIndex.updated
    monkeypatch.setattr(memindex.MemIndex, "updated", lambda self, *a: updates.append(1) or real(self, *a))
    caught_up = IndexCache(SQLiteStore(tmp_path)).get("snap")
    assert updates == [1] and caught_up.version > saved and caught_up.n == 76
    monkeypatch.setattr(memindex.MemIndex, "updated", real)
    shutil.rmtree(tmp_path / "indexes")
    _same_index(caught_up, IndexCache(SQLiteStore(tmp_path)).get("snap"), rng, words, monkeypatch)


def test_a_damaged_saved_index_is_rebuilt_from_the_database(tmp_path, monkeypatch, caplog):
    from openqna.index import saved_index

    monkeypatch.setattr(saved_index, "MIN_VECTORS", 1)
    store = SQLiteStore(tmp_path)
    _large_kb(store)
    built = IndexCache(store).get("snap")
    folder = saved_index.SavedIndexes(store.index_dir, store.instance).folder(1, "test")
    (folder / "q.matrix.npy").write_bytes(b"not an array")
    again = IndexCache(SQLiteStore(tmp_path)).get("snap")
    assert "unreadable saved index" in caplog.text
    assert again.version == built.version and np.array_equal(again.q.matrix, built.q.matrix)
    assert saved_index.load(folder, store.instance).q.matrix.shape == built.q.matrix.shape  # and saved afresh


def test_saved_indexes_are_for_large_indexes_and_go_with_their_project(tmp_path, monkeypatch):
    from openqna.index import saved_index
    from openqna.kb.service import Service
    from openqna.models.embedder import HashEmbedder

    store = SQLiteStore(tmp_path)
    _large_kb(store)
    IndexCache(store).get("snap")
    assert not (tmp_path / "indexes").exists()  # 80 records: rebuilding is cheaper than loading
    monkeypatch.setattr(saved_index, "MIN_VECTORS", 1)
    IndexCache(SQLiteStore(tmp_path)).get("snap")
    assert len(list((tmp_path / "indexes").iterdir())) == 1
    Service(store, HashEmbedder()).delete_project("snap")
    assert not list((tmp_path / "indexes").iterdir())


def test_serve_loads_saved_indexes_before_it_listens(tmp_path, monkeypatch):
    """Service.warm (run by `openqna serve` before it listens) loads every saved index and only those."""
    from openqna.index import saved_index
    from openqna.kb.service import Service
    from openqna.models.embedder import HashEmbedder

    monkeypatch.setattr(saved_index, "MIN_VECTORS", 1)
    store = SQLiteStore(tmp_path)
    _large_kb(store)
    store.deploy("snap", "production")
    IndexCache(store).get("snap", "production")  # saved; the live index ("test") never searched
    store.create_project(Project("small"))
    restarted = SQLiteStore(tmp_path)
    service = Service(restarted, HashEmbedder())
    assert service.warm() == [("snap", "production")]
    assert [k[1] for k in service.indexes._indexes] == ["production"]


def test_an_index_saved_from_another_database_file_is_ignored(tmp_path, monkeypatch):
    """Versions restart in a new database file: an index saved from the old one must not pass for current."""
    from openqna.index import saved_index

    monkeypatch.setattr(saved_index, "MIN_VECTORS", 1)
    old = SQLiteStore(tmp_path)
    _large_kb(old, seed=3)
    saved = IndexCache(old).get("snap")
    old.close()
    for f in tmp_path.glob("openqna.sqlite3*"):
        f.unlink()
    new = SQLiteStore(tmp_path)
    _large_kb(new, seed=4)  # same project id, same version numbers, other content
    assert new.version("snap") == saved.version
    index = IndexCache(new).get("snap")
    assert not np.array_equal(index.a.matrix, saved.a.matrix)
    shutil.rmtree(tmp_path / "indexes")
    assert np.array_equal(index.a.matrix, IndexCache(SQLiteStore(tmp_path)).get("snap").a.matrix)


def test_new_databases_keep_unit_rows_in_their_pages(tmp_path, monkeypatch):
    """16 KiB pages: a unit row (vector and terms) stays in its page instead of spilling into an overflow page."""
    from openqna.store import sqlite as sqlite_store

    def size(folder):
        store = SQLiteStore(folder)
        store.create_project(Project("p"))
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        empty = store._db.execute("PRAGMA page_count").fetchone()[0]  # a page per table and index, whatever the data
        rng = np.random.default_rng(0)
        store.put_qnas("p", [item([f"question {i}"], "answer " * 50, vectors=[rng.standard_normal(384).astype(np.float32)],
                                  answer_vector=rng.standard_normal(384).astype(np.float32)) for i in range(300)])
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = store._db.execute("PRAGMA page_size").fetchone()[0]
        return page, page * (store._db.execute("PRAGMA page_count").fetchone()[0] - empty)

    page, new = size(tmp_path / "new")
    monkeypatch.setattr(sqlite_store, "PAGE_SIZE", 4096)  # SQLite's default, before this setting
    old_page, old = size(tmp_path / "old")
    assert (page, old_page) == (16384, 4096)
    assert new < old / 1.5


def test_an_index_built_in_batches_is_the_index_built_at_once(tmp_path, monkeypatch):
    """Large KBs are read and indexed BUILD_BATCH records at a time (memory): the index must not differ."""
    store = SQLiteStore(tmp_path)
    ids, rng, words = _large_kb(store, n=95)
    store.delete_qnas("snap", ids[30:33])  # gaps in the ids
    monkeypatch.setattr(index_cache, "BUILD_BATCH", 10**6)
    whole = IndexCache(SQLiteStore(tmp_path)).get("snap")
    monkeypatch.setattr(index_cache, "BUILD_BATCH", 7)
    batched = IndexCache(SQLiteStore(tmp_path)).get("snap")
    assert batched.ids.tolist() == whole.ids.tolist() and batched.hashes == whole.hashes
    assert batched.rows == whole.rows and batched.exact == whole.exact
    for name in ("q", "a"):
        a, b = getattr(batched, name), getattr(whole, name)
        for attr in ("rows", "matrix", "lengths", "keys", "sum_norms", "lo", "hi"):
            assert np.array_equal(getattr(a, attr), getattr(b, attr)), (name, attr)
        assert a.postings.vocab == b.postings.vocab
        for attr in ("tids", "units", "tfs", "start"):
            assert np.array_equal(getattr(a.postings, attr), getattr(b.postings, attr)), (name, attr)
    _same_index(batched, whole, rng, words, monkeypatch)


def test_a_deployment_made_before_versions_becomes_one_when_deployed_over(tmp_path):
    """A schema-5 store (deployments without versions) is migrated; the first deploy over its deployment keeps the old
    content as a version first, so that deploy can be rolled back."""
    store = SQLiteStore(tmp_path / "data")
    store.create_project(Project("kb1"))
    store.put_qnas("kb1", [item(["Where is the pen?"], "In the box.", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
    old = store.deploy("kb1", "production")
    db = store._db
    for table in ("deploy_versions", "deploy_events"):
        db.execute(f"DROP TABLE {table}")
    db.execute("DELETE FROM records WHERE deployment LIKE '~%'")
    db.execute("DELETE FROM units WHERE deployment LIKE '~%'")
    db.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    db.commit()
    store.close()

    store = SQLiteStore(tmp_path / "data")
    assert store.list_versions("kb1") == [] and [d.version for d in store.list_deployments("kb1")] == [None]
    store.put_qnas("kb1", [item(["Where is the pen?"], "On the desk.", id=1, vectors=[vec(1, 0)],
                                answer_vector=vec(0, 1))])
    store.put_qnas("kb1", [item(["Is there a pen?"], "Yes.", vectors=[vec(1, 1)], answer_vector=vec(0, 1))])
    assert store.deploy("kb1", "production").version == 2
    versions = store.list_versions("kb1")
    assert [(v.version, v.deployed_at, v.deployed_by, v.qnas, v.current) for v in versions] == [
        (1, old.last_deployed, "", 1, False), (2, versions[1].deployed_at, "", 2, True)]
    store.deploy("kb1", "production", version=1)
    assert store.get_qnas("kb1", [1], "production")[1].answer == "In the box."
    assert store.count_qnas("kb1", "production") == 1
    store.close()


def test_schema_12_versions_keep_the_default_answer_their_deployments_answered(tmp_path):
    """Schema 13 keeps each version's default answer; a schema-12 database opens with its versions given their
    project's default answer now, the one their deployments answered until then, so a deploy of the same content
    and default answer is still the same version."""
    old = SQLiteStore(tmp_path)
    old.create_project(Project("kb1", settings={"defaultAnswer": "Ask the help desk."}))
    old.put_qnas("kb1", [StoredQnA(QnA(["Where is the pen?"], "In the box.", id=1), [], "h1")])
    old.deploy("kb1", "production")
    old._db.execute("ALTER TABLE deploy_versions DROP COLUMN default_answer")
    old._db.execute("UPDATE meta SET value='12' WHERE key='schema_version'")
    old.close()
    new = SQLiteStore(tmp_path)
    assert [(d.name, d.version, d.default_answer) for d in new.list_deployments("kb1")] == [
        ("production", 1, "Ask the help desk.")]
    assert new.deploy("kb1", "production").version == 1
    assert new._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    new.close()


def test_schema_13_sources_record_their_records_as_the_file_wrote_them(tmp_path):
    """A schema-13 database opens at schema 14 with each registered source's ``file_records``: the digest of each of
    its live records as it is (kb/source_edits.py tells the author's edits from them); other sources' records and a
    deployment's are not its."""
    from openqna.records import Prompt, QnA, authored_digest
    from openqna.store import Source

    old = SQLiteStore(tmp_path)
    old.create_project(Project("kb1"))
    url = "http://x/faq.tsv"
    old.put_qnas("kb1", [item(["Reset?"], "Hold it.", vectors=[vec(1, 0)], answer_vector=vec(0, 1), id=1, source=url,
                              metadata={"team": "ops"}, prompts=[Prompt(0, 2, "Colour")]),
                         item(["Colour?"], "Blue.", vectors=[vec(1, 0)], answer_vector=vec(0, 1), id=2, source=url),
                         item(["Office?"], "Leeds.", vectors=[vec(1, 0)], answer_vector=vec(0, 1), id=3)])
    old.put_source("kb1", Source(url, "FAQ", url, content_hash="h"))
    old._db.execute("ALTER TABLE sources DROP COLUMN file_records")
    old._db.execute("UPDATE meta SET value='13' WHERE key='schema_version'")
    old.close()
    new = SQLiteStore(tmp_path)
    stored = new.get_qnas("kb1", [1, 2])
    [src] = new.list_sources("kb1")
    assert src.file_records == {1: authored_digest(stored[1]), 2: authored_digest(stored[2])}
    assert authored_digest(stored[1]) != authored_digest(QnA(["Reset?"], "Hold it.", source=url))
    assert new._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    new.close()
