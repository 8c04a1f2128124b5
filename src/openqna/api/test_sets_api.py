"""The test-set routes under ``/openqna`` (author role, Azure's error envelope; ``kb/test_sets.py`` runs the sets).

* ``GET /openqna/projects/{project}/test-sets`` — the sets: ``name``, ``questions``, ``created``, ``modified``;
* ``PUT /openqna/projects/{project}/test-sets/{name}?format=tsv|csv|xlsx`` — the body is a test-set file (or name
  it: ``?fileName=checks.csv``); replaces a set of that name; at most ``MAX_QUESTIONS`` (2,000) questions;
* ``GET``, ``DELETE /openqna/projects/{project}/test-sets/{name}`` — one set with its ``items``, or drop it;
* ``POST /openqna/projects/{project}/test-sets/{name}/:from-log`` — make (or replace) the set from the questions
  whose QnA someone confirmed (``kb/labelled_questions.py``): the set's figures with ``accepted``, ``feedback``
  and ``skipped`` counts; 400 when there is no such question;
* ``POST /openqna/projects/{project}/test-sets/{name}/:run?deploymentName=&threshold=`` — run it (synchronously)
  against a deployment or ``test`` (the default) and store the run: ``questions``, ``top1``, ``right_at_threshold``,
  ``no_answer_rejected``, ``wrong`` and ``run_id``;
* ``GET /openqna/projects/{project}/test-runs?testSet=`` — the runs, newest first (figures only);
* ``GET /openqna/projects/{project}/test-runs/{runId}`` — one run with each question's ``results``;
* ``GET /openqna/projects/{project}/test-runs/compare?old=&new=`` — two runs question by question: ``worse`` (right
  to wrong), ``better`` (wrong to right), each with what it got in either run.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api.azure.wire import (
    Body,
    Refused,
    authorized_project,
    handle_errors,
    handle_errors_off_loop,
    too_large,
)
from openqna.api.concurrency import run_query
from openqna.auth.keys import Authorizer
from openqna.formats.limits import LIMITS
from openqna.formats.test_set_files import FORMATS, MAX_QUESTIONS
from openqna.kb.catalog import LIVE
from openqna.kb.service import Service
from openqna.kb.test_sets import diff_runs, run_test_set, summary_json
from openqna.records import InvalidArgument, NotFound

PREFIX = "/openqna/projects/{project}"
_MEDIA = {"text/tab-separated-values": "tsv", "text/csv": "csv",
          "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx"}


class TestSetRoutes:
    __test__ = False  # not a pytest test class

    def __init__(self, service: Service, authorizer: Authorizer):
        self.service = service
        self.authorizer = authorizer

    def routes(self) -> list[Route]:
        return [
            Route(f"{PREFIX}/test-sets", self.list_sets, methods=["GET"]),
            Route(f"{PREFIX}/test-sets/{{name}}", self.upload, methods=["PUT"]),
            Route(f"{PREFIX}/test-sets/{{name}}", self.one_set, methods=["GET", "DELETE"]),
            Route(f"{PREFIX}/test-sets/{{name}}/:run", self.run, methods=["POST"]),
            Route(f"{PREFIX}/test-sets/{{name}}/:from-log", self.from_log, methods=["POST"]),
            Route(f"{PREFIX}/test-runs", self.list_runs, methods=["GET"]),
            Route(f"{PREFIX}/test-runs/compare", self.compare, methods=["GET"]),
            Route(f"{PREFIX}/test-runs/{{runId}}", self.one_run, methods=["GET"]),
        ]

    def _author(self, request: Request) -> str:
        return authorized_project(self.authorizer, request)

    @handle_errors_off_loop
    def list_sets(self, request: Request) -> Response:
        project = self._author(request)
        return JSONResponse({"value": [{"name": s.name, "questions": len(s.items), "created": s.created,
                                        "modified": s.modified} for s in self.service.test_sets(project)]})

    @handle_errors
    async def upload(self, request: Request) -> Response:
        project = self._author(request)
        name = request.path_params["name"]
        file_name = request.query_params.get("fileName") or ""
        fmt = request.query_params.get("format") or ""
        if not fmt and not file_name:
            fmt = _MEDIA.get(request.headers.get("content-type", "").split(";")[0].strip().lower(), "")
        if not fmt and not file_name:
            raise InvalidArgument(f"Say what the body is: ?format= one of {', '.join(FORMATS)}, or ?fileName= a name "
                                  "ending in .tsv, .csv or .xlsx.", target="format")
        data = await request.body()
        if len(data) > LIMITS.body_bytes:
            raise Refused(too_large())
        if not data:
            raise InvalidArgument("The request body must hold the test-set file (a header row with question and "
                                  "expected_qna_id or expected_answer, then one question a line).")
        stored = await run_in_threadpool(self.service.import_test_set, project, name, data,
                                         file_name or f"{name}.{fmt}", fmt or None)
        return JSONResponse({"name": stored.name, "questions": len(stored.items), "created": stored.created,
                             "modified": stored.modified})

    @handle_errors_off_loop
    def one_set(self, request: Request) -> Response:
        project = self._author(request)
        name = request.path_params["name"]
        if request.method == "DELETE":
            self.service.project(project)
            if not self.service.delete_test_set(project, name):
                raise NotFound(f"Test set '{name}' of project '{project}' was not found.")
            return Response(status_code=204)
        s = self.service.test_set(project, name)
        return JSONResponse({"name": s.name, "questions": len(s.items), "created": s.created, "modified": s.modified,
                             "items": s.items})

    @handle_errors_off_loop
    def from_log(self, request: Request) -> Response:
        project = self._author(request)
        stored, report = self.service.test_set_from_log(project, request.path_params["name"])
        return JSONResponse({"name": stored.name, "created": stored.created, "modified": stored.modified, **report})

    @handle_errors
    async def run(self, request: Request) -> Response:
        project = self._author(request)
        params = Body(dict(request.query_params))
        deployment = params.string("deploymentName", max_len=100) or LIVE
        threshold = params.number("threshold")
        test_set = await run_in_threadpool(self.service.test_set, project, request.path_params["name"])
        if len(test_set.items) > MAX_QUESTIONS:  # a set stored by other means than an upload
            raise InvalidArgument(f"The set has {len(test_set.items):,} questions; a run asks at most "
                                  f"{MAX_QUESTIONS:,}.")
        run = await run_query(run_test_set, self.service, project, test_set, deployment, threshold)
        return JSONResponse(summary_json(run))

    @handle_errors_off_loop
    def list_runs(self, request: Request) -> Response:
        project = self._author(request)
        runs = self.service.test_runs(project, request.query_params.get("testSet") or None)
        return JSONResponse({"value": [summary_json(r) for r in runs]})

    @handle_errors_off_loop
    def one_run(self, request: Request) -> Response:
        project = self._author(request)
        raw = request.path_params["runId"]
        if not (raw.isascii() and raw.isdigit()):
            raise InvalidArgument(f"A run id is a number (GET .../test-runs lists them), not '{raw}'.", target="runId")
        return JSONResponse(summary_json(self.service.test_run(project, int(raw)), with_results=True))

    @handle_errors_off_loop
    def compare(self, request: Request) -> Response:
        project = self._author(request)
        params = Body(dict(request.query_params))
        ids = []
        for key in ("old", "new"):
            raw = params.string(key, max_len=20)
            if raw is None or not (raw.strip().isascii() and raw.strip().isdigit()):
                raise InvalidArgument(f"Name the runs to compare by id: ?old=RUN_ID&new=RUN_ID (GET .../test-runs "
                                      f"lists them); '{key}' is missing or not a number.", target=key)
            ids.append(int(raw))
        return JSONResponse(diff_runs(self.service.test_run(project, ids[0]), self.service.test_run(project, ids[1])))
