"""Save and train under ``/openqna`` (author role, Azure's error envelope; ``kb/train_job.py`` does the work).

* ``POST /openqna/projects/{project}:train`` — start a train job: 202 with ``Operation-Location``, the job at
  ``GET /openqna/jobs/{jobId}``, whose ``result`` is the training report when it has succeeded (per vector space:
  the held-out questions' top-1 and right at the threshold before and after, whether the model was kept and why);
  409 while a train job of the project is queued or running (in any process): it names that job.  Train jobs run
  on a worker of their own (``kb.jobs``'s lanes), so edits and deploys are not held up behind one;
* ``GET /openqna/projects/{project}/training`` — the trained model of ``test`` and of each deployment (when it was
  trained, its hash, the report it was kept on, whether it is ``applied``: not after a re-embed with another
  embedder, ``notApplied`` says to retrain), null where there is none;
* ``DELETE /openqna/projects/{project}/training`` — remove the test state's model (deployments keep theirs until
  the next deploy).
"""

from __future__ import annotations

import functools
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api import links
from openqna.api.azure.wire import authorized_project, handle_errors, handle_errors_off_loop
from openqna.auth.keys import Authorizer
from openqna.kb.jobs import AlreadyQueued, JobRunner
from openqna.kb.service import Service
from openqna.kb.train_job import Trainer
from openqna.records import Conflict


class TrainRoutes:
    def __init__(self, service: Service, authorizer: Authorizer, jobs: JobRunner):
        self.service = service
        self.authorizer = authorizer
        self.jobs = jobs
        self.trainer = Trainer(service)

    def routes(self) -> list[Route]:
        return [
            Route("/openqna/projects/{project}:train", self.train, methods=["POST"]),
            Route("/openqna/projects/{project}/training", self.status, methods=["GET"]),
            Route("/openqna/projects/{project}/training", self.forget, methods=["DELETE"]),
        ]

    def _author(self, request: Request) -> str:
        return authorized_project(self.authorizer, request)

    @handle_errors
    async def train(self, request: Request) -> Response:
        project = self._author(request)
        await run_in_threadpool(self.service.project, project)  # 404 now, not a failed job later
        try:  # two trains of one project would each undo the other's model: the look and the submit are one step
            job = await run_in_threadpool(functools.partial(self.jobs.submit, "train", project, alone=True))
        except AlreadyQueued as exc:
            running = exc.job
            raise Conflict(f"Project '{project}' is being trained already (job {running.id}, {running.status}); "
                           f"wait for it to finish: GET {links.base_url(request)}/openqna/jobs/{quote(running.id)}"
                           ) from None
        location = f"{links.base_url(request)}/openqna/jobs/{quote(job.id)}"
        return Response(status_code=202, headers={"Operation-Location": location, "retry-after-ms": "500"})

    @handle_errors_off_loop
    def status(self, request: Request) -> Response:
        return JSONResponse(self.trainer.status(self._author(request)))

    @handle_errors_off_loop
    def forget(self, request: Request) -> Response:
        project = self._author(request)
        return JSONResponse({"project": project, "removed": self.trainer.forget(project)})
