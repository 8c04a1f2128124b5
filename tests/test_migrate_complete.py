"""`openqna migrate` carries everything an owner has, SQLite -> PostgreSQL -> SQLite.

One store is filled through the real services and HTTP routes with one of each thing a store keeps: QnAs with
prompts and metadata, synonyms, deployments and their history of versions (a rollback included), a trained model,
URL sources and how they refresh, feedback, accepted suggestions, test sets and runs, the query log, OpenAI files
(one that expires), a vector store with a file in it, and keys; then it is migrated both ways and everything read
back through the store protocol must be equal.
"""

from __future__ import annotations

import dataclasses
import time

import httpx
import numpy as np
import pytest

from conftest import LiveServer, wait_for_job
from openqna.auth.keys import create_key
from openqna.evaluation.env import setting
from openqna.kb.migrate import MARKER, migrate
from openqna.kb.query_log import QueryLog
from openqna.kb.service import AskRequest, Service
from openqna.kb.test_sets import run_test_set
from openqna.records import Conflict, QnA
from openqna.store import Source
from openqna.store.base import AcceptedQuestion, SourceRefresh, TestSet
from openqna.store.postgres import PostgresStore, StoreUnavailable
from openqna.store.sqlite import SQLiteStore
from pg import pg_dsn, pg_server, restartable_pg  # noqa: F401  (fixtures)
from test_service import surface_kb

AUTHORING = "/language/authoring/query-knowledgebases/projects"
PARAMS = {"api-version": "2023-04-01"}


def everything(store) -> dict:
    """All a store holds that an owner could miss, as plain values (what differs between stores left out: the
    database's instance id, and jobs, which are not migrated)."""
    out: dict = {"files": [], "keys": [], "projects": {}}
    for f in sorted(store.list_files(), key=lambda f: f.id):
        out["files"].append(dataclasses.asdict(store.get_file(f.id, with_data=True)))
    for key in sorted(store.list_keys(), key=lambda k: k.id):
        out["keys"].append((dataclasses.asdict(key), store.key_hash(key.id)))
    for project in store.list_projects():
        name = project.name
        deployments = ["test", *(d.name for d in store.list_deployments(name))]
        versions = store.list_versions(name)
        states: dict = {}
        for deployment in deployments:
            qnas = store.list_qnas(name, deployment)
            vectors = store.get_vectors(name, [q.id for q in qnas], deployment)
            trained = store.get_trained(name, deployment)
            states[deployment] = {
                "qnas": [dataclasses.asdict(q) for q in qnas],
                "vectors": {qid: {unit: v.tobytes() for unit, v in units.items()} for qid, units in vectors.items()},
                "synonyms": store.get_synonyms(name, deployment),
                "trained": None if trained is None else (trained.data, trained.meta, trained.hash)}
        out["projects"][name] = {
            "project": dataclasses.asdict(project) | {"modified": None},
            "deployments": [dataclasses.asdict(d) for d in store.list_deployments(name)],
            "versions": [dataclasses.asdict(v) | {"deployed_at": None} for v in versions],
            "kept": {v.version: [dataclasses.asdict(q) for q in store.version_records(name, v.version)]
                     for v in versions if v.kept},
            "states": states,
            "sources": [dataclasses.asdict(s) for s in store.list_sources(name)],
            "refreshes": {k: dataclasses.asdict(v) for k, v in store.list_source_refreshes(name).items()},
            "feedback": store.list_feedback(name),
            "accepted": [dataclasses.asdict(a) for a in store.list_accepted(name)],
            "test_sets": [dataclasses.asdict(t) for t in store.list_test_sets(name)],
            "test_runs": [dataclasses.asdict(store.get_test_run(name, r.id)) for r in store.list_test_runs(name)],
            "queries": [dataclasses.asdict(q) for q in store.list_queries(name, "")],
            "attached files": [dataclasses.asdict(f) for f in store.list_attached_files(name)],
        }
    return out


def fill(service: Service, tmp_path) -> None:
    """One of everything, made as an owner makes it."""
    from openqna.training.adapter import QueryAdapter
    from openqna.training.model import TrainedModel

    store, embedder = service.store, service.embedder
    with LiveServer(service) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.patch(f"{AUTHORING}/surface", params=PARAMS, json={"language": "en"}).status_code == 201
        service.import_content("surface", surface_kb())  # prompts, metadata, several sources, synonyms
        for deployment in ("production", "staging"):  # version 1, deployed twice
            r = http.put(f"{AUTHORING}/surface/deployments/{deployment}", params=PARAMS)
            assert wait_for_job(r.headers["Operation-Location"])["status"] == "succeeded"
        service.upsert("surface", [QnA(["Where is the office?"], "On the third floor.", id=8, source="editorial",
                                       metadata={"site": "hq"})])
        model = TrainedModel({embedder.name: QueryAdapter(np.zeros((embedder.dim, embedder.dim), np.float32),
                                                          embedder.name)}).to_bytes()
        store.set_trained("surface", model, {"kept": True})
        r = http.put(f"{AUTHORING}/surface/deployments/production", params=PARAMS)  # version 2
        assert wait_for_job(r.headers["Operation-Location"])["status"] == "succeeded"
        store.deploy("surface", "production", version=1, by="rollback")  # and back to version 1
        service.upsert("surface", [QnA(["Is there parking?"], "Behind the building.", id=9, source="editorial")])
        store.delete_qnas("surface", [9])

        store.put_source("surface", Source("https://example.com/faq", "FAQ page", "https://example.com/faq"))
        store.put_source_refresh("surface", SourceRefresh("https://example.com/faq", 86400, "2030-01-01T00:00:00Z",
                                                          "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", '"etag"',
                                                          "Thu, 01 Jan 2026 00:00:00 GMT", {"status": "unchanged"}))
        store.add_feedback("surface", [(1, "battery dies", "u1")] * 2 + [(2, "screen", "u2")])
        store.add_accepted("surface", [AcceptedQuestion(1, "battery dies", "suggestion", "2026-01-01T00:00:00Z")])
        checks = TestSet("checks", [{"question": "battery dies", "expected_qna_id": 1, "expected_answer": None,
                                     "metadata": {}}])
        store.put_test_set("surface", checks)
        run_test_set(service, "surface", checks)
        run_test_set(service, "surface", checks, "production")

        QueryLog(store).configure("surface", enabled=True, retention_days=30)
        for question in ("how long to charge?", "where is the office?"):
            r = http.post("/language/:query-knowledgebases", params={
                "projectName": "surface", "deploymentName": "production", **PARAMS},
                json={"question": question, "userId": "someone"})
            assert r.status_code == 200, r.text

        uploaded = {}
        for name, expires in (("kept.jsonl", None), ("expiring.jsonl", 86400)):
            form = {"purpose": "assistants"} | ({} if expires is None else {
                "expires_after[anchor]": "created_at", "expires_after[seconds]": str(expires)})
            r = http.post("/v1/files", data=form, files={"file": (name, b'{"text": "Refunds take five days."}\n')})
            assert r.status_code == 200, r.text
            uploaded[name] = r.json()
        assert uploaded["expiring.jsonl"]["expires_at"] is not None
        vs = http.post("/v1/vector_stores", json={"name": "docs", "metadata": {"team": "support"},
                                                  "file_ids": [uploaded["kept.jsonl"]["id"]]}).json()
        deadline = time.monotonic() + 60
        while http.get(f"/v1/vector_stores/{vs['id']}").json()["file_counts"]["completed"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        create_key(store, name="reader", role="query", projects=["surface"])
        create_key(store, name="owner", role="admin")


def assert_holds(target, want: dict) -> None:
    """``target`` holds exactly ``want`` (an ``everything``), or the assertion names the parts that differ."""
    got = everything(target)
    assert got["projects"].keys() == want["projects"].keys()
    lost = [part for part in ("files", "keys") if got[part] != want[part]]
    lost += [f"{name}: {part}" for name, project in want["projects"].items() for part, value in project.items()
             if got["projects"][name][part] != value]
    assert not lost, (type(target).__name__, lost)


def test_migrate_keeps_everything_an_owner_has(tmp_path, pg_dsn, embedder):  # noqa: F811
    source = Service(SQLiteStore(tmp_path / "a"), embedder)
    fill(source, tmp_path)
    with setting("OPENQNA_VERSIONS_KEPT", "2"):  # versions 1 and 2 of "history" lose their content
        source.create_project("history")
        for n in range(1, 5):
            source.upsert("history", [QnA([f"What is fact {n}?"], f"Fact number {n}.")])
            source.store.deploy("history", "production", by="owner")
    want = everything(source.store)
    assert want["projects"]["surface"]["versions"][-1]["version"] == 1 and want["projects"]["surface"]["queries"]
    assert [(v["version"], v["kept"]) for v in want["projects"]["history"]["versions"]] == \
        [(1, False), (2, False), (3, True), (4, True)]
    pg = PostgresStore(pg_dsn, pool_size=2)
    back = SQLiteStore(tmp_path / "b")
    try:
        migrate(source.store, pg, progress=lambda line: None)
        migrate(pg, back, progress=lambda line: None)
        for target in (pg, back):
            assert_holds(target, want)
            asked = Service(target, embedder)
            for deployment in ("production", "staging", "test"):
                for question in ("where is the office?", "how long to charge the battery?"):
                    request = AskRequest(question=question, top=2)
                    assert [(a.qna.id, a.confidence) for a in asked.ask("surface", deployment, request)] \
                        == [(a.qna.id, a.confidence) for a in source.ask("surface", deployment, request)]
    finally:
        pg.close()
        back.close()


def written(store) -> list:
    """What tells that a store was written to: each project's change sequence and modification time, and its files
    and keys."""
    return [[(p.name, p.modified, store.version(p.name)) for p in store.list_projects()],
            [f.id for f in store.list_files()], [k.id for k in store.list_keys()]]


def test_a_migration_stopped_partway_is_finished_by_running_it_again(tmp_path, restartable_pg, embedder):  # noqa: F811
    """The target PostgreSQL stops in the middle of a project's copy (its deploys replayed, its live state not yet):
    the migration fails with the store's error, a rerun copies that project again and skips the finished one, and
    the target then holds what the source holds; a further rerun writes nothing; and a target whose project or file
    of the same name differs from the source's, or is another store's unfinished copy, is refused, naming each."""
    source = Service(SQLiteStore(tmp_path / "a"), embedder)
    fill(source, tmp_path)
    source.ensure_project("second")
    source.upsert("second", [QnA(["What are the opening hours?"], "Nine to five.", source="editorial")])
    want = everything(source.store)
    pg = PostgresStore(restartable_pg.dsn, pool_size=2)
    lines: list[str] = []

    def stop_midway(line: str) -> None:
        lines.append(line)
        if line.startswith("surface:") and line.endswith("deployments copied"):
            restartable_pg.stop()

    try:
        with pytest.raises(StoreUnavailable):
            migrate(source.store, pg, progress=stop_midway)
        assert lines[0].startswith("second:")  # "second" was finished before the stop, the vector store not begun
        restartable_pg.start()
        deadline = time.monotonic() + 20
        while True:  # the pool reconnects in the background
            try:
                partial = pg.get_project("surface")
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert partial.settings[MARKER] == source.store.instance and pg.list_files() == []
        assert MARKER not in pg.get_project("second").settings
        assert [p.name for p in pg.list_projects()] == ["second", "surface"] and len(want["projects"]) == 3

        report = migrate(source.store, pg, progress=lambda line: None)
        assert report.recopied == ["surface"] and report.already == {"projects": 1, "files": 0, "keys": 0}
        assert report.copied["projects"] == 2 and report.copied["files"] == 2 and report.copied["keys"] == 2
        assert_holds(pg, want)

        before = written(pg)
        again = migrate(source.store, pg, progress=lambda line: None)
        assert not any(again.copied.values()) and not again.recopied
        assert again.already == {"projects": 3, "files": 2, "keys": 2}
        assert written(pg) == before
        assert_holds(pg, want)

        # the target changed since: one more QnA in "second", other bytes under a file's id, and "surface" marked
        # as another store's unfinished copy
        Service(pg, embedder).upsert("second", [QnA(["Is it open on Sunday?"], "No.", source="editorial")])
        file_id = want["files"][0]["id"]
        pg.put_file(dataclasses.replace(pg.get_file(file_id, with_data=True), data=b"other bytes"))
        surface = pg.get_project("surface")
        surface.settings[MARKER] = "another-store"
        pg.update_project(surface)
        before = written(pg)
        with pytest.raises(Conflict) as refused:
            migrate(source.store, pg, progress=lambda line: None)
        message = refused.value.message
        assert "project second (its records of test differ)" in message, message
        assert "project surface (an unfinished copy from another store)" in message, message
        assert f"file {file_id}" in message and "nothing was copied" in message, message
        assert written(pg) == before
    finally:
        pg.close()
