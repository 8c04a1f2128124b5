"""Long work is a job (DESIGN decision 8): persisted, claimed by exactly one worker, never lost silently.

A job is written to the store, with everything needed to run it, before its 202 is
sent.  Every server process runs a worker thread per *lane* that claims jobs from the store's
queue: atomically (``Store.claim_job``), only the kinds of its lane it has a handler for, projects
taking turns (a project's n-th unfinished job waits for every project's earlier turns, so one that
queued 200 edits holds another's edit for one of them, not all) and each project's jobs oldest first.

A lane is a set of kinds with a worker of its own, so that a long job of one project holds up no short one of
another's: the server gives ``train`` (a minute of CPU) one, a vector store's files (minutes of embedding for a large
one) another, and the bulk kinds that embed a whole file or source (``upload``, ``import``, ``sources``, ``refresh``:
a 1,200-QnA import ran 15 minutes, and another project's one-QnA edit waited 154 s behind it) a third.  The other
kinds (QnA edits, deploys, project deletions, exports) share one.  The bulk lane keeps each project's order with the
shared one (``in_order``): a project's edit queued after its import waits for the import to finish, and an import
queued after an edit for the edit, since the second job reads what the first writes.  The train and vector store
lanes keep no such order, as before.  So a job accepted by any process on a shared store is run by exactly one of
them, and any process answers its status from the store.  A local submit wakes the
local worker at once; other processes' jobs are picked up within
``OPENQNA_JOB_POLL_SECONDS``.

A running job is held under a lease of ``OPENQNA_JOB_LEASE_SECONDS`` that its worker
renews every third of that.  When the worker dies (a crash, ``kill -9``, a lost
machine), the lease runs out and the next worker to look marks the job ``failed``
with ``InternalServerError``; a poller sees ``running`` until then and ``failed``
after, never a job that vanishes or runs forever.  Failed, not re-queued: handlers
such as "add these QnAs" are not idempotent and the worker may have died after its
write committed, so running them again could apply them twice; the client starts the
operation again, as it would after any Azure failure.  A job that was never claimed
is never lost: whichever worker is alive runs it, even if the process that accepted
it has gone.

A shutdown lets the job in hand finish, but a handler that has written nothing yet may
stop early instead (``stopping``, then ``Requeue``): the job goes back to the queue, to
be run by another process or after the next start.  The train job does so, since it
writes its model only at the end and takes a minute of CPU that a restart should not
wait for.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
import uuid
from contextvars import ContextVar
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from openqna import settings
from openqna.kb.progress import SINK, Progress
from openqna.records import Conflict, OpenQnAError
from openqna.store import Job
from openqna.store.base import RUNNING_JOB, JobLease, JobStore

log = logging.getLogger("openqna.kb.jobs")
JOB_TTL = timedelta(hours=6)  # Azure's job expiry
FINISHED = ("succeeded", "failed")
LOST = [{"code": "InternalServerError",
         "message": "The server running this job stopped, or lost its database, before it finished, and its lease ran "
                    "out; its changes may be partly or not at all applied (none after the lease ran out). Start the "
                    "operation again."}]
Handler = Callable[[Job], None]
_STOPPING: ContextVar[threading.Event | None] = ContextVar("openqna_job_stopping", default=None)


class Requeue(Exception):
    """Raised by a handler that stopped early, having written nothing, because its process is shutting down
    (``stopping``): the job is queued again instead of finished."""


class AlreadyQueued(Conflict):
    """``submit(alone=True)`` or ``run_here`` found the project's unfinished job of the kind (``job``)."""

    def __init__(self, job: Job):
        super().__init__(f"Project '{job.project}' has a {job.kind} job {job.status} already (job {job.id}).")
        self.job = job


def stopping() -> bool:
    """Whether the runner of the job this thread is running is shutting down (False outside a job)."""
    event = _STOPPING.get()
    return event is not None and event.is_set()


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class JobRunner:
    """Submits jobs to the store and runs a worker per lane that claims them (from any process)."""

    def __init__(self, store: JobStore, handlers: dict[str, Handler], *, poll_seconds: float | None = None,
                 lease_seconds: float | None = None, lanes: tuple[frozenset[str], ...] = (),
                 in_order: tuple[frozenset[str], ...] = ()):
        """``lanes``: kinds with a worker of their own, run whatever a project's other jobs are doing; ``in_order``:
        kinds with a worker of their own that keep each project's order with the shared worker's kinds (and with
        each other): a project's job waits for its earlier jobs of all of them to finish."""
        self.store = store
        self.handlers = handlers
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"  # this worker, in logs and jobs
        self.poll_seconds = settings.job_poll_seconds() if poll_seconds is None else poll_seconds
        self.lease_seconds = settings.job_lease_seconds() if lease_seconds is None else lease_seconds
        if self.poll_seconds <= 0 or self.lease_seconds <= 0:
            raise ValueError("OPENQNA_JOB_POLL_SECONDS and OPENQNA_JOB_LEASE_SECONDS must be positive")
        # each worker's kinds: those of a lane of its own, then (the last worker) every other kind; read from
        # ``handlers`` at each claim, since a part of the server may add its handler later (``VectorStores``)
        self._lanes = [frozenset(lane) for lane in (*lanes, *in_order)]
        self._ordered = set(range(len(lanes), len(self._lanes))) | {len(self._lanes)}  # the shared worker is last
        self._wakes = [threading.Event() for _ in range(len(self._lanes) + 1)]
        self._stop = threading.Event()
        self._finished = threading.Condition()
        self._workers: list[threading.Thread | None] = [None] * len(self._wakes)
        self._start_lock = threading.Lock()
        self._progress: dict[str, Progress] = {}  # the running jobs' last reports (``kb.progress``), by job id

    # -- submitting ------------------------------------------------------------------------------
    @staticmethod
    def _new(kind: str, project: str, params: dict[str, Any] | None, job_id: str | None = None) -> Job:
        now = datetime.now(timezone.utc)
        return Job(job_id or str(uuid.uuid4()), kind, project, "notStarted", _iso(now), _iso(now),
                   _iso(now + JOB_TTL), params=params or {})

    def submit(self, kind: str, project: str, params: dict[str, Any] | None = None, *, job_id: str | None = None,
               alone: bool = False) -> Job:
        """Queue a job (``job_id`` if the caller needed to know it first) and wake the local worker.  ``alone``:
        only if the project has no unfinished job of ``kind`` in any process, else ``AlreadyQueued`` naming it (the
        look and the insert are one step of the store's: ``put_job_alone``)."""
        job = self._new(kind, project, params, job_id)
        if alone:
            if (earlier := self.store.put_job_alone(job)) is not None:
                raise AlreadyQueued(earlier)
        else:
            self.store.put_job(job)
        self.start()
        for wake in self._wakes:
            wake.set()
        return job

    def run_here(self, kind: str, project: str, params: dict[str, Any] | None = None) -> Job:
        """Run a job of ``kind`` for ``project`` in this thread, as a worker would (under a lease it renews, its
        outcome recorded), unless the project has one queued or running in any process: ``AlreadyQueued``.  For a
        command that does the work itself (``openqna train``), so that a server's submit sees it running."""
        self.recover()  # a job left running by a command that died (its lease ran out) holds nothing up
        job = self._new(kind, project, params)
        job.status, job.owner, job.lease_until = "running", self.owner, time.time() + self.lease_seconds
        if (earlier := self.store.put_job_alone(job)) is not None:
            raise AlreadyQueued(earlier)
        self._run(job)
        return job

    def get(self, job_id: str) -> Job | None:
        """The job ``job_id``, whichever process accepted it (None when there is none, or it expired)."""
        return self.store.get_job(job_id)

    def progress(self, job_id: str) -> Progress | None:
        """How far job ``job_id`` has got, when this process runs it and its handler reports (``kb.progress``).

        Kept in memory, not in the store: a poll another process answers (servers sharing a PostgreSQL store) sees
        none, only the job's status."""
        return self._progress.get(job_id)

    def recover(self) -> int:
        """Fail the running jobs whose worker stopped renewing their lease; returns how many."""
        lost = self.store.fail_expired_jobs(LOST)
        for job_id in lost:
            log.warning("job %s failed: its worker stopped before finishing it", job_id)
        # Finished jobs are kept until they expire (JOB_TTL after submission, as Azure does), then
        # deleted with their results (an export's file), which a poller can no longer ask for.
        self.store.delete_finished_jobs(_iso(datetime.now(timezone.utc)))
        return len(lost)

    # -- the worker ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker threads, one per lane (idempotent); the server does so on start-up."""
        with self._start_lock:
            dead = [i for i, worker in enumerate(self._workers) if worker is None or not worker.is_alive()]
            if dead:  # only then: a shutdown under way (its workers still finishing) must not be undone
                self._stop.clear()
            for i in dead:
                name = "openqna-job-worker" + (f"-{'-'.join(sorted(self._lanes[i]))}" if i < len(self._lanes) else "")
                thread = threading.Thread(target=self._loop, args=(i,), name=name, daemon=True)
                self._workers[i] = thread
                thread.start()

    def _kinds(self, lane: int) -> list[str]:
        """The kinds worker ``lane`` claims: its lane's, or (the last worker) those of no lane."""
        if lane < len(self._lanes):
            return sorted(k for k in self.handlers if k in self._lanes[lane])
        return sorted(k for k in self.handlers if not any(k in own for own in self._lanes))

    def _after(self, lane: int) -> list[str]:
        """The kinds whose earlier unfinished jobs of a project hold up worker ``lane``'s next job of that project:
        those of the other workers that keep one order with it (none, for a lane of its own)."""
        if lane not in self._ordered:
            return []
        return sorted({k for other in self._ordered if other != lane
                       for k in (self._lanes[other] if other < len(self._lanes) else self._kinds(other))})

    def _loop(self, lane: int) -> None:
        wake = self._wakes[lane]
        while not self._stop.is_set():
            wake.clear()  # before claiming: a submit from now on is either claimed below or wakes the wait
            try:
                self.recover()
                kinds = self._kinds(lane)
                job = self.store.claim_job(self.owner, kinds, self.lease_seconds, self._after(lane)) if kinds else None
            except OpenQnAError as exc:  # the store is unreachable for a moment (it logs so): try at the next poll
                log.debug("claiming a job failed: %s", exc.message)
                job = None
            except Exception:
                log.exception("claiming a job failed")
                job = None
            if job is not None:
                self._run(job)
                continue  # there may be more queued
            wake.wait(self.poll_seconds)

    def _run(self, job: Job) -> None:
        done = threading.Event()
        heartbeat = threading.Thread(target=self._renew, args=(job.id, done), name=f"openqna-job-lease-{job.id}",
                                     daemon=True)
        heartbeat.start()
        token = _STOPPING.set(self._stop)
        # the handler's writes commit only while the job is still this worker's (``store.base.RUNNING_JOB``)
        leased = RUNNING_JOB.set(JobLease(job.id, self.owner, self.lease_seconds))
        reports = SINK.set(lambda progress: self._progress.__setitem__(job.id, progress))
        try:
            self.handlers[job.kind](job)
            job.status = "succeeded"
        except Requeue:
            log.warning("job %s (%s) stopped for the shutdown; queued again for the next start", job.id, job.kind)
            job.status, job.errors = "notStarted", []
        except OpenQnAError as exc:
            job.status = "failed"
            job.errors = [{"code": exc.code, "message": exc.message}]
        except Exception as exc:  # a bug must still end the job, or pollers wait forever
            log.exception("job %s (%s) crashed", job.id, job.kind)
            job.status = "failed"
            job.errors = [{"code": "InternalServerError", "message": f"The job failed unexpectedly: {exc!r}"}]
        finally:
            SINK.reset(reports)
            self._progress.pop(job.id, None)
            RUNNING_JOB.reset(leased)
            _STOPPING.reset(token)
            done.set()
            heartbeat.join()
        try:
            if not self.store.finish_job(job):
                log.warning("job %s (%s) ran out of its lease before it finished; it stays failed", job.id, job.kind)
        except Exception:
            log.exception("job %s (%s): recording its outcome failed; its lease will run out", job.id, job.kind)
        with self._finished:
            self._finished.notify_all()

    def _renew(self, job_id: str, done: threading.Event) -> None:
        while not done.wait(self.lease_seconds / 3):
            try:
                if not self.store.renew_job(job_id, self.owner, self.lease_seconds):
                    log.warning("job %s: lease lost while running", job_id)
                    return
            except OpenQnAError as exc:  # the store unreachable for a moment: one line, and the next beat
                log.warning("job %s: renewing its lease failed: %s", job_id, exc.message)
            except Exception:  # try again at the next beat; the lease has two more in hand
                log.exception("job %s: renewing its lease failed", job_id)

    # -- waiting and stopping -------------------------------------------------------------------------
    def wait(self) -> None:
        """Block until no job this runner could run is queued or running, in any process (tests and tools)."""
        for job in self.store.unfinished_jobs():
            if job.kind not in self.handlers:
                continue  # no worker here would run it; waiting could be forever
            with self._finished:  # held while reading, so the worker's notify cannot slip in before the wait
                while (now := self.store.get_job(job.id)) is not None and now.status not in FINISHED:
                    self._finished.wait(self.poll_seconds)

    def shutdown(self) -> None:
        """Finish the job in hand (or queue it again, if its handler stops for it: ``Requeue``) and stop; queued jobs
        stay queued for another worker or the next start."""
        self._stop.set()
        for wake in self._wakes:
            wake.set()
        for worker in self._workers:
            if worker is not None:
                worker.join()
