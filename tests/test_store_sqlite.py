"""The SQLite store against the conformance suite, plus what is SQLite-specific."""

import functools
import sqlite3

import pytest

from openqna.store import Project
from openqna.store.sqlite import SCHEMA_VERSION, SQLiteStore
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
    assert b.search_index("shared").n == 0
    a.put_qnas("shared", [item(["hello"], "world", vectors=[vec(1, 0)], answer_vector=vec(0, 1))])
    assert b.search_index("shared").n == 1
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
    assert s.search_index("p").n == 0


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
