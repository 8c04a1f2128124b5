"""Long work is a job (DESIGN decision 8): persisted, run in the background, never lost silently.

A job is written to the store before its 202 is sent, runs on one worker thread,
and ends ``succeeded`` or ``failed`` with errors in Azure's shape.  A job that was
running in a process that no longer exists (a crash or a kill) is marked
``failed`` when the next server starts, so a poller never waits forever.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Callable

from .records import OpenQnAError
from .store import Job, Store

log = logging.getLogger("openqna.jobs")
JOB_TTL = timedelta(hours=6)  # Azure's job expiry
Handler = Callable[[Job], None]


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _process_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's job: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class JobRunner:
    def __init__(self, store: Store, handlers: dict[str, Handler]):
        self.store = store
        self.handlers = handlers
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openqna-job")

    def recover(self) -> int:
        """Fail the jobs whose process died; returns how many."""
        failed = 0
        for job in self.store.unfinished_jobs():
            if job.owner != self.owner and not _process_alive(job.owner):
                job.status = "failed"
                job.errors = [{"code": "InternalServerError",
                               "message": "The server stopped while this job was running; nothing of it was "
                                          "applied. Start the operation again."}]
                self.store.put_job(job)
                failed += 1
        return failed

    def submit(self, kind: str, project: str, params: dict | None = None) -> Job:
        now = datetime.now(timezone.utc)
        job = Job(str(uuid.uuid4()), kind, project, "notStarted", _iso(now), _iso(now), _iso(now + JOB_TTL),
                  params=params or {}, owner=self.owner)
        self.store.put_job(job)
        self._executor.submit(self._run, job.id)
        return job

    def _run(self, job_id: str) -> None:
        job = self.store.get_job(job_id)
        if job is None:
            return
        job.status = "running"
        self.store.put_job(job)
        try:
            self.handlers[job.kind](job)
            job.status = "succeeded"
        except OpenQnAError as exc:
            job.status = "failed"
            job.errors = [{"code": exc.code, "message": exc.message}]
        except Exception as exc:  # a bug must still end the job, or pollers wait forever
            log.exception("job %s (%s) crashed", job.id, job.kind)
            job.status = "failed"
            job.errors = [{"code": "InternalServerError", "message": f"The job failed unexpectedly: {exc!r}"}]
        self.store.put_job(job)

    def wait(self) -> None:
        """Block until every submitted job has run (tests and shutdown)."""
        done: Future = self._executor.submit(lambda: None)
        done.result()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)
