"""Save and train on PostgreSQL: two servers on one database start one train of a project, however many ask at once."""

from __future__ import annotations

import threading

import httpx
import pytest

from conftest import REPO, ServeProcess, wait_for_job
from openqna.auth.keys import create_key
from openqna.evaluation import datasets
from openqna.kb.service import Service
from openqna.models.embedder import get_embedder
from openqna.records import QnA
from openqna.store.postgres import PostgresStore
from pg import pg_dsn, pg_server  # noqa: F401  (fixtures)


@pytest.mark.multiprocess
def test_two_servers_start_one_train_of_a_project_asked_at_once(pg_dsn, tmp_path):  # noqa: F811
    """Two serve processes on one database accepted 3 of 8 :train requests sent at once, two of them running at once
    on different servers ("two trains of one project would each undo the other's model").  The hash embedder
    stands in for the model: banking77's 10,003 questions train for seconds with it, long enough for all 8."""
    data = datasets.banking77(REPO.parent / "shared" / "data")
    store = PostgresStore(pg_dsn, pool_size=2)
    try:
        service = Service(store, get_embedder("hash"))
        service.create_project("bank")
        service.upsert("bank", [QnA(qs, datasets.humanise(label)) for label, qs in data.train.items()])
        _, admin = create_key(store, name="admin", role="admin")
    finally:
        store.close()
    env = {"OPENQNA_STORE": pg_dsn, "OPENQNA_DATA": str(tmp_path), "OPENQNA_EMBEDDER": "hash",
           "OPENQNA_JOB_POLL_SECONDS": "0.2"}
    key = {"api-key": admin}
    with ServeProcess(None, tmp_path / "a.log", env=env, args=("--no-sample",)) as a, \
            ServeProcess(None, tmp_path / "b.log", env=env, args=("--no-sample",)) as b:
        barrier, answers = threading.Barrier(8), []

        def post(url: str) -> None:
            barrier.wait()
            answers.append(httpx.post(f"{url}/openqna/projects/bank:train", headers=key, timeout=60))

        threads = [threading.Thread(target=post, args=((a.url, b.url)[i % 2],)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        started = [r for r in answers if r.status_code == 202]
        assert sorted(r.status_code for r in answers) == [202] + [409] * 7, [r.text for r in answers]
        job = wait_for_job(started[0].headers["Operation-Location"], headers=key, seconds=300)
        assert job["status"] == "succeeded", job
        assert all(started[0].headers["Operation-Location"].rsplit("/", 1)[1] in r.json()["error"]["message"]
                   for r in answers if r.status_code == 409)
