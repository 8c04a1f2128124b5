"""The job runner on the real SQLite store: two runners on one database are two server processes' workers.

The PostgreSQL side, with two real `openqna serve` processes and a kill -9, is in test_store_postgres.py.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from openqna.kb.authoring import BULK_KINDS
from openqna.kb.jobs import LOST, JobRunner, Requeue, stopping
from openqna.store import Job
from openqna.store.sqlite import SQLiteStore
from pg import pg_dsn, pg_server  # noqa: F401  (fixtures)


@pytest.fixture
def runners(tmp_path):
    made = []

    def make(handlers, **timing) -> JobRunner:
        made.append(JobRunner(SQLiteStore(tmp_path), handlers, poll_seconds=timing.get("poll", 0.05),
                              lease_seconds=timing.get("lease", 30), lanes=timing.get("lanes", ())))
        return made[-1]

    yield make
    for runner in made:
        runner.shutdown()


def _until(condition, what: str) -> None:
    deadline = time.time() + 60
    while not condition():
        assert time.time() < deadline, what
        time.sleep(0.02)


def test_the_idle_worker_runs_what_the_busy_one_accepted(runners):
    gate, ran = threading.Event(), []
    a = runners({"slow": lambda job: gate.wait(60), "quick": lambda job: ran.append(("a", job.id))})
    b = runners({"quick": lambda job: ran.append(("b", job.id))})
    b.start()
    slow = a.submit("slow", "p")
    _until(lambda: a.store.get_job(slow.id).status == "running", "a claims its own job at once")
    quick = [a.submit("quick", "p", {"n": n}).id for n in range(5)]
    _until(lambda: len(ran) == 5, "b runs the jobs a accepted while a is busy")
    assert sorted(ran) == sorted(("b", jid) for jid in quick)  # each once, all by b
    assert {a.store.get_job(jid).owner for jid in quick} == {b.owner} and a.owner != b.owner
    gate.set()
    a.wait()
    assert a.store.get_job(slow.id).status == "succeeded" and len(ran) == 5


def test_a_dead_workers_jobs(runners, tmp_path):
    """Claimed by a worker that died: failed when its lease runs out.  Accepted by it but not claimed: run."""
    store = SQLiteStore(tmp_path)
    store.put_job(Job("claimed", "deploy", "p", params={"deployment": "production"}))
    store.put_job(Job("queued", "deploy", "p", params={"deployment": "production"}))
    store.claim_job("dead-host:1:0", ["deploy"], 0.5)  # ... and then its process was killed
    ran = []
    survivor = runners({"deploy": lambda job: ran.append(job.id)})
    survivor.start()
    _until(lambda: store.get_job("claimed").status == "failed", "the lease runs out")
    survivor.wait()
    lost, queued = store.get_job("claimed"), store.get_job("queued")
    assert (lost.errors, lost.owner) == (LOST, "dead-host:1:0")
    assert (queued.status, queued.owner, ran) == ("succeeded", survivor.owner, ["queued"])


def test_a_live_worker_keeps_its_job_past_the_first_lease(runners):
    """The worker renews its lease while the handler runs, so a long job is not taken for a dead one."""
    first_lease = {}

    def long_job(job):
        first_lease["until"] = job.lease_until
        _until(lambda: time.time() > job.lease_until + 1, "the first lease is long over")

    a = runners({"long": long_job}, lease=1.5)
    runners({}, lease=1.5).start()  # another process's worker reaping expired leases meanwhile
    job = a.submit("long", "p")
    a.wait()
    got = a.store.get_job(job.id)
    assert (got.status, got.errors) == ("succeeded", []) and first_lease["until"] is not None


def test_settings_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="OPENQNA_JOB_LEASE_SECONDS"):
        JobRunner(SQLiteStore(tmp_path), {}, lease_seconds=0)


def test_the_worker_deletes_finished_jobs_once_they_expire(runners, tmp_path):
    store = SQLiteStore(tmp_path)
    store.put_job(Job("expired", "export", "p", "succeeded", expires="2020-01-01T00:00:00Z", result=b"old file"))
    runner = runners({"deploy": lambda job: None})
    kept = runner.submit("deploy", "p").id  # expires JOB_TTL from now
    runner.start()
    _until(lambda: store.get_job("expired") is None, "the worker's poll deletes the expired job")
    runner.wait()
    assert store.get_job(kept).status == "succeeded"


def test_a_kind_with_a_lane_of_its_own_holds_up_no_other_kind(runners):
    gate, ran = threading.Event(), []
    one = runners({"slow": lambda job: gate.wait(60), "quick": lambda job: ran.append(job.id)})
    slow = one.submit("slow", "p")
    _until(lambda: one.store.get_job(slow.id).status == "running", "the slow job is claimed")
    queued = one.submit("quick", "p")
    time.sleep(0.5)
    assert ran == [] and one.store.get_job(queued.id).status == "notStarted"  # one lane: it waits
    gate.set()
    one.wait()
    gate.clear()
    laned = runners({"slow": lambda job: gate.wait(60), "quick": lambda job: ran.append(job.id)},
                    lanes=(frozenset({"slow"}),))
    one.shutdown()
    slow = laned.submit("slow", "p")
    _until(lambda: laned.store.get_job(slow.id).status == "running", "the slow job is claimed")
    quick = [laned.submit("quick", "p").id for _ in range(3)]
    _until(lambda: len(ran) == 4, "the quick jobs run beside the slow one")
    assert ran[1:] == quick and laned.store.get_job(slow.id).status == "running"
    gate.set()
    laned.wait()
    assert laned.store.get_job(slow.id).status == "succeeded"


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request, tmp_path):
    """One store that two runners (two server processes) share, of each engine."""
    if request.param == "sqlite":
        store = SQLiteStore(tmp_path)
    else:
        from openqna.store.postgres import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_dsn"), pool_size=4)
    yield store
    store.close()


def test_an_import_holds_up_no_other_projects_edit_and_its_own_projects_edits_wait_for_it(shared_store):
    """A 1,200-QnA import ran 15 minutes on the worker the edits and deploys share, and another project's one-QnA
    edit waited 154 s behind it.  Bulk kinds now have a worker of their own, which keeps each project's order with the
    shared worker's kinds: the other project's edit and deploy run at once, while an edit of the importing project,
    queued after the import, waits for it to finish, in either of two processes, and an import queued after that edit
    waits for the edit."""
    gate, ran = threading.Event(), []

    def importing(job):
        ran.append(("start", job.id))
        gate.wait(60)
        ran.append(("end", job.id))

    handlers = {"upload": importing, "import": importing, "qnas": lambda job: ran.append(("ran", job.id)),
                "deploy": lambda job: ran.append(("ran", job.id))}
    made = [JobRunner(shared_store, dict(handlers), poll_seconds=0.05, lease_seconds=30,
                      lanes=(frozenset({"train"}),), in_order=(BULK_KINDS,)) for _ in range(2)]
    try:
        one, two = made
        two.start()
        big = one.submit("upload", "big")
        _until(lambda: ("start", big.id) in ran, "the import starts")
        own_edit = one.submit("qnas", "big")
        own_import = one.submit("import", "big")
        others = [one.submit("qnas", "other").id, one.submit("deploy", "other").id]
        _until(lambda: all(shared_store.get_job(j).status == "succeeded" for j in others),
               "the other project's edit and deploy run while the import does")
        time.sleep(0.5)  # ten polls of both processes' workers
        assert [shared_store.get_job(j).status for j in (big.id, own_edit.id, own_import.id)] == [
            "running", "notStarted", "notStarted"]
        gate.set()
        _until(lambda: shared_store.get_job(own_import.id).status == "succeeded", "the project's queue runs")
        mine = [step for step in ran if step[1] in (big.id, own_edit.id, own_import.id)]
        assert mine == [("start", big.id), ("end", big.id), ("ran", own_edit.id), ("start", own_import.id),
                        ("end", own_import.id)]
    finally:
        gate.set()  # a failed assertion leaves no worker waiting on it
        for runner in made:
            runner.shutdown()


def test_a_handler_added_after_the_runner_is_made_is_run(runners):
    """VectorStores adds its handler to the server's runner after it is made: the runner's lanes once read the kinds
    when it was made, and its vector store files waited for ever."""
    ran = []
    laned = runners({"train": lambda job: None}, lanes=(frozenset({"train"}),))
    laned.handlers["vector_store_file"] = lambda job: ran.append(job.id)
    job = laned.submit("vector_store_file", "p")
    _until(lambda: ran == [job.id], "the late kind runs on the shared worker")


def test_a_handler_that_stops_for_the_shutdown_leaves_its_job_queued_for_the_next_start(runners):
    """A train (a minute of CPU) held up a shutdown until it ended; a handler that has written nothing may stop when
    its runner shuts down, and its job goes back to the queue instead of failing or finishing."""
    entered, ran = threading.Event(), []

    def patient(job):
        entered.set()
        while not stopping():
            time.sleep(0.01)
        raise Requeue

    first = runners({"train": patient})
    job = first.submit("train", "p")
    assert entered.wait(60)
    assert stopping() is False  # outside a job
    first.shutdown()  # returns: the handler saw the shutdown
    queued = first.store.get_job(job.id)
    assert (queued.status, queued.errors, queued.result) == ("notStarted", [], None)
    later = runners({"train": lambda job: ran.append(job.id)})
    later.start()
    _until(lambda: later.store.get_job(job.id).status == "succeeded", "the next start runs it")
    assert ran == [job.id]



def test_a_job_failed_for_its_lost_lease_writes_nothing_afterwards(runners, tmp_path, monkeypatch):
    """A worker that stalls (no lease renewed, as a process stopped or cut from its database is) until another worker
    has failed its job, then writes: the write came minutes late and was applied all the same, though the client had
    been told to start the operation again.  Now it is refused and nothing of it is written."""
    from openqna.records import QnA
    from openqna.store import Project, StoredQnA, Unit
    from openqna.store.base import LeaseLost

    store = SQLiteStore(tmp_path)
    store.create_project(Project("late"))
    refused: list[BaseException] = []

    def late(job):
        _until(lambda: store.get_job(job.id).status == "failed", "the other worker fails the job")
        try:
            store.put_qnas("late", [StoredQnA(QnA(["q"], "a"), [Unit("q", 0, ["q"], np.ones(4, np.float32))], "q")])
        except LeaseLost as exc:
            refused.append(exc)
            raise

    stalled = runners({"late": late}, lease=1)
    monkeypatch.setattr(stalled, "_renew", lambda job_id, done: None)
    stalled.start()
    runners({}, lease=1).start()  # another process's worker, which fails jobs whose lease ran out
    job = stalled.submit("late", "p")
    _until(lambda: refused, "the late write is refused")
    stalled.wait()
    assert store.count_qnas("late") == 0
    assert (store.get_job(job.id).status, store.get_job(job.id).errors) == ("failed", LOST)
