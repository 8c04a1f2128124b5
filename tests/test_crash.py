"""kill -9 of `openqna serve` in the middle of an import (with a deploy queued behind it), a deploy, a
vector-store file batch and a SQLite checkpoint (issue 24).

After a restart on the same data directory: every acknowledged write is there, the import that was cut
off is not half-applied (the project holds the old QnAs or the new ones, never a mix), and every job
ends in a final state (the one that was running fails once its lease runs out; the queued deploy runs).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx

from conftest import ServeProcess, wait_for_job

A = "/language/authoring/query-knowledgebases/projects"
V = {"api-version": "2023-04-01"}
OLD = 20
NEW = 600  # enough QnAs that embedding them keeps the import running for a few seconds


class Server(ServeProcess):
    """``openqna serve`` on ``data`` with short job leases, so a killed worker's job is soon taken back."""

    def __init__(self, data: Path, log: Path):
        super().__init__(data, log, env={"OPENQNA_SAMPLE": "0", "OPENQNA_JOB_LEASE_SECONDS": "2"}, args=("--no-sample",))

    def wait(self, location: str, states: tuple[str, ...], seconds: float = 120) -> dict:
        return wait_for_job(self.url + location[location.index("/language"):], states=states, seconds=seconds,
                            every=0.05)


def qnas(prefix: str, n: int) -> dict:
    return {"assets": {"qnas": [{"id": i + 1, "answer": f"{prefix} answer {i}.", "questions": [f"{prefix} question {i}?"]}
                                for i in range(n)]}}


def accepted(response: httpx.Response) -> str:
    assert response.status_code == 202, response.text
    return response.headers["operation-location"]


def test_kill_during_an_import_loses_nothing_acknowledged_and_applies_no_half(tmp_path):
    log = tmp_path / "server.log"
    server = Server(tmp_path, log)
    try:
        assert httpx.patch(f"{server.url}{A}/kb", params=V, json={"language": "en"}).status_code == 201
        first = accepted(httpx.post(f"{server.url}{A}/kb/:import", params=V, json=qnas("old", OLD)))
        assert server.wait(first, ("succeeded", "failed"))["status"] == "succeeded"
        added = accepted(httpx.patch(f"{server.url}{A}/kb/qnas", params=V, json=[
            {"op": "add", "value": {"answer": "Acknowledged.", "questions": ["Was this kept?"]}}]))
        assert server.wait(added, ("succeeded", "failed"))["status"] == "succeeded"
        synonyms = httpx.put(f"{server.url}{A}/kb/synonyms", params=V, json={"value": [{"alterations": ["a", "b"]}]})
        assert synonyms.status_code == 204

        cut = accepted(httpx.post(f"{server.url}{A}/kb/:import", params=V, json=qnas("new", NEW)))
        deploy = accepted(httpx.put(f"{server.url}{A}/kb/deployments/production", params=V))
        assert server.wait(cut, ("running", "succeeded", "failed"))["status"] == "running"
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(30)
    finally:
        server.stop()

    server = Server(tmp_path, log)  # the same data directory, as after a crash
    try:
        assert server.wait(deploy, ("succeeded", "failed"))["status"] == "succeeded"
        cut_job = server.wait(cut, ("succeeded", "failed"), seconds=60)
        assert cut_job["status"] == "failed"  # its worker died; the lease ran out
        answers = [q["answer"] for q in httpx.get(f"{server.url}{A}/kb/qnas", params={**V, "maxpagesize": 1000}).json()["value"]]
        old = [a for a in answers if a.startswith("old ")]
        new = [a for a in answers if a.startswith("new ")]
        assert (len(old), len(new)) == (OLD, 0), "the import that was cut off is half-applied"
        assert "Acknowledged." in answers
        groups = httpx.get(f"{server.url}{A}/kb/synonyms", params=V).json()["value"]
        assert groups == [{"alterations": ["a", "b"]}]
        deployed = httpx.post(f"{server.url}/language/:query-knowledgebases", json={"question": "Was this kept?"},
                              params={**V, "projectName": "kb", "deploymentName": "production"}).json()
        assert deployed["answers"][0]["answer"] == "Acknowledged."
    finally:
        server.stop()


def test_kill_during_a_vector_store_file_batch_leaves_every_file_final(tmp_path):
    log = tmp_path / "server.log"
    server = Server(tmp_path, log)
    try:
        ids = []
        for n in range(12):
            text = "\n\n".join(f"Paragraph {i} of document {n} about shipping, returns and warranty." for i in range(60))
            r = httpx.post(f"{server.url}/v1/files", data={"purpose": "assistants"},
                           files={"file": (f"doc{n}.txt", text.encode())})
            assert r.status_code == 200, r.text
            ids.append(r.json()["id"])
        store = httpx.post(f"{server.url}/v1/vector_stores", json={"name": "docs"}).json()["id"]
        batch = httpx.post(f"{server.url}/v1/vector_stores/{store}/file_batches", json={"file_ids": ids}).json()
        assert batch["status"] == "in_progress"
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(30)
    finally:
        server.stop()

    server = Server(tmp_path, log)
    try:
        deadline = time.monotonic() + 120
        while (got := httpx.get(f"{server.url}/v1/vector_stores/{store}/file_batches/{batch['id']}").json())[
                "status"] == "in_progress":
            assert time.monotonic() < deadline, got
            time.sleep(0.2)
        assert got["file_counts"]["in_progress"] == 0
        files = httpx.get(f"{server.url}/v1/vector_stores/{store}/files", params={"limit": 100}).json()["data"]
        assert len(files) == len(ids) and all(f["status"] in ("completed", "failed", "cancelled") for f in files)
    finally:
        server.stop()


class Fixed:
    """Random unit vectors: the deploy test needs many records on disk, not meaning (a deploy embeds nothing)."""

    name = "crash-test/384"
    dim = 384

    def embed(self, texts):
        import numpy as np

        rng = np.random.default_rng(len(texts))
        v = rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_kill_during_a_deploy_leaves_the_old_deployment_or_the_new_one_whole(tmp_path):
    from openqna.kb.service import Service
    from openqna.records import QnA
    from openqna.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path)  # written directly: thousands of records without embedding them
    service = Service(store, Fixed())
    service.create_project("kb")
    service.upsert("kb", [QnA([f"old question {i}?"], f"old answer {i}.") for i in range(OLD)])
    store.deploy("kb", "production")
    big = 8000  # about a second of copying: a deploy is one transaction of INSERT ... SELECT
    service.upsert("kb", [QnA([f"new question {i}?"], f"new answer {i}. " + "filler " * 400) for i in range(big)])
    store.close()

    log = tmp_path / "server.log"
    server = Server(tmp_path, log)
    try:
        deploy = accepted(httpx.put(f"{server.url}{A}/kb/deployments/production", params=V))
        assert server.wait(deploy, ("running", "succeeded", "failed"), seconds=60)["status"] == "running"
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(30)
    finally:
        server.stop()

    server = Server(tmp_path, log)
    try:
        final = server.wait(deploy, ("succeeded", "failed"), seconds=60)["status"]
    finally:
        server.stop()
    store = SQLiteStore(tmp_path)
    try:
        answers = [q.answer.split(".")[0] for q in store.list_qnas("kb", "production")]
        kinds = {a.split()[0] for a in answers}
        assert kinds in ({"old"}, {"new"}), f"a half-applied deploy: {len(answers)} records of kinds {kinds}"
        assert len(answers) == (OLD if kinds == {"old"} else big)
        assert final == "failed" or kinds == {"new"}, "a job that succeeded left the old deployment"
        assert store.count_qnas("kb") == OLD + big  # the live state is untouched
        assert store._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        store.close()


def test_kill_during_a_sqlite_checkpoint_loses_no_acknowledged_upload(tmp_path):
    """In WAL mode the database file itself is written only by checkpoints: the server is killed the moment it
    changes, while 2 MB uploads keep the write-ahead log filling (a checkpoint every 16 MB)."""
    import hashlib
    import threading

    database = tmp_path / "openqna.sqlite3"
    log = tmp_path / "server.log"
    acknowledged: dict[str, str] = {}
    for round_ in range(2):
        server = Server(tmp_path, log)
        stop = threading.Event()

        def upload(url: str = server.url, r: int = round_) -> None:
            n = 0
            with httpx.Client(timeout=30) as client:
                while not stop.is_set():
                    body = os.urandom(2 << 20)
                    try:
                        got = client.post(f"{url}/v1/files", data={"purpose": "user_data"},
                                          files={"file": (f"blob-{r}-{n}.bin", body)})
                    except httpx.TransportError:
                        return  # the server was killed mid-request: not acknowledged
                    if got.status_code == 200:
                        acknowledged[got.json()["id"]] = hashlib.sha256(body).hexdigest()
                    n += 1

        writer = threading.Thread(target=upload)
        before = len(acknowledged)
        try:
            last = database.stat().st_mtime_ns, database.stat().st_size
            writer.start()
            deadline = time.monotonic() + 120
            while True:
                now = database.stat().st_mtime_ns, database.stat().st_size
                if now != last and len(acknowledged) > before:
                    break  # a checkpoint is writing the database file
                last = now
                assert time.monotonic() < deadline, "no checkpoint within 2 minutes"
                time.sleep(0.0005)
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(30)
        finally:
            stop.set()
            writer.join(60)
            server.stop()
        assert len(acknowledged) > before

    server = Server(tmp_path, log)
    try:
        for file_id, digest in acknowledged.items():
            got = httpx.get(f"{server.url}/v1/files/{file_id}/content", timeout=30)
            assert got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == digest, file_id
    finally:
        server.stop()
    import sqlite3

    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
