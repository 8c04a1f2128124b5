"""openqna's own HTTP routes, under ``/openqna``: what the Azure API has no call for.

The web console is a client of these and of the Azure routes, with no other door, so whatever it
does an API user can do too.  They read keys the way every surface does and answer in Azure's
error envelope (the console's other half speaks Azure):

* ``GET /openqna/whoami`` — the caller's grants (role and projects), whether the server is open, or why the key
  was refused (always 200: a page asks before it has a key);
* ``GET|POST /openqna/keys``, ``DELETE /openqna/keys/{keyId}`` — API keys (admin), a new key's secret shown once;
* ``POST /openqna/projects/{project}/files?name=FILE`` — import one uploaded file (any format ``openqna
  import`` reads) as a job, creating the project; ``GET /openqna/jobs/{jobId}`` polls any job (a running import's
  ``progress`` too: texts embedded of the total, for how many QnAs and passages, when this process runs it; an
  upload's ``result`` says what it added, synonym groups included);
* ``GET /openqna/projects`` — the projects the caller may query, with QnAs and passages counted apart;
* ``GET /openqna/projects/{project}/passages`` — a project's passages, apart from its QnAs;
* ``GET /openqna/projects/{project}/deployments/{deployment}/diff`` — what deploying would change;
* ``GET /openqna/projects/{project}/versions`` — every deploy (deployment, version, when, by whom, counts, content
  hash, whether its content is kept and whether the deployment holds it now);
* ``POST /openqna/projects/{project}/deployments/{deployment}/:rollback?version=N`` — deploy kept version N again;
* ``GET /openqna/projects/{project}/compare?old=&new=`` — what changed between two states (``test``, a deployment,
  or a version ``v3``), QnAs and passages apart, and for a changed QnA which parts, old and new; the synonym groups
  added and removed; the trained model each holds and whether it changed;
* ``POST /openqna/projects/{project}/:inspect?deploymentName=`` — a ``:query-knowledgebases`` body
  answered with what each confidence is made of, and why the default answer was given when it was;
* ``POST|DELETE /openqna/projects/{project}/calibration`` — ``openqna calibrate`` on an uploaded development
  file: accuracy and rejection against the threshold before and after the fit (saved with ``save=true``);
* ``POST /openqna/projects/{project}/suggestions/:reject`` — drop an active-learning suggestion;
* ``GET /openqna/projects/{project}/duplicates?deploymentName=`` — QnAs that ask the same with the same answer
  (``duplicate``) or another (``conflict``), and questions another QnA wins (``misplaced``), best first
  (``openqna.kb.duplicates``); ``POST .../qnas/:merge`` (``{"keep", "drop"}``) folds one QnA into another and
  ``POST .../qnas/:move-question`` (``{"question", "from", "to"}``) moves a question, each one write of ``test``;
* ``GET /openqna/projects/{project}/analytics?days=&lowConfidence=&top=`` — the opt-in query log's figures
  (``openqna.kb.query_log``), ``GET .../analytics/queries?days=&format=json|csv`` every logged query of the period
  (a download for review), and ``GET|PUT .../analytics/settings`` to turn it on and set its retention;
* ``GET /openqna/projects/{project}/test-sets``, ``PUT|GET|DELETE .../test-sets/{name}`` (PUT: the body is a TSV, CSV
  or XLSX test-set file, ``?format=`` or ``?fileName=``; at most 2,000 questions) — a project's test sets;
* ``POST /openqna/projects/{project}/test-sets/{name}/:run?deploymentName=&threshold=`` — run a set against a
  deployment or ``test`` and store the run (``top1``, ``right_at_threshold``, ``no_answer_rejected``, ``wrong``);
* ``GET /openqna/projects/{project}/test-runs``, ``.../test-runs/{runId}``, ``.../test-runs/compare?old=&new=`` — the
  runs newest first, one run with each question's result, and two runs question by question
  (``api/test_sets_api.py`` has these routes);
* ``GET /openqna/projects/{project}/sources`` — the sources with each URL source's refresh state;
  ``PUT .../sources/{source}/refresh`` (``{"every": "6h"}``) sets its interval and ``POST .../sources/{source}/:refresh``
  checks it now, returning what changed (``api/sources_api.py`` has these routes);
* ``POST /openqna/projects/{project}:train``, ``GET|DELETE .../training`` — Save and train: a train job, the trained
  model of each deployment, removing the test state's (``api/train_api.py``);
* ``GET|PUT /openqna/projects/{project}/near-topic`` — the project's near-topic share and what it does on the KB
  (``api/near_topic_api.py``).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import math
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api import links
from openqna.api.azure.runtime import answer_json, parse_ask
from openqna.api.azure.wire import (
    Body,
    Refused,
    authorize,
    body_json,
    handle_errors,
    handle_errors_off_loop,
    read_json,
    too_large,
)
from openqna.api.concurrency import run_query
from openqna.api.credentials import secret_from_headers
from openqna.api.downloads import attachment
from openqna.api.errors import azure_error
from openqna.api.near_topic_api import NearTopicRoutes
from openqna.api.sources_api import SourceRoutes
from openqna.api.test_sets_api import TestSetRoutes
from openqna.api.train_api import TrainRoutes
from openqna.auth import keys as key_store
from openqna.auth.keys import ApiKey, Authorizer, Caller, allows
from openqna.formats.csv_file import FORMULA_STARTS
from openqna.formats.limits import LIMITS
from openqna.kb.catalog import LIVE, check_project_name, kind_of, version_number
from openqna.kb.jobs import JobRunner
from openqna.kb.query_log import MAX_PERIOD_DAYS, MAX_RETENTION_DAYS, QueryLog
from openqna.kb.service import Answer, Service

QUERY_COLUMNS = ("createdDateTime", "deployment", "question", "user", "qnaId", "confidence")  # a log download's


def inert(value: Any) -> Any:
    """A cell a spreadsheet will not run: the questions are what anyone typed to a bot, and Excel and LibreOffice read
    a cell starting with = + - @ (or a tab or return before one) as a formula (OWASP's "CSV injection"), so such a
    text gets a leading apostrophe, which they show as text."""
    return "'" + value if isinstance(value, str) and value[:1] in FORMULA_STARTS else value
from openqna.records import InvalidArgument, NotFound

PREFIX = "/openqna"
UPLOAD_SUFFIXES = (".tsv", ".txt", ".csv", ".xlsx", ".json", ".zip", ".pdf", ".docx", ".html", ".htm", ".md", ".markdown")


def grants_json(caller: Caller | None) -> list[dict[str, Any]]:
    """A key's one grant, or a token's several; an open server grants admin everywhere."""
    if caller is None:
        return [{"role": "admin", "projects": None}]
    if isinstance(caller, ApiKey):
        return [{"role": caller.role, "projects": caller.projects}]
    return [{"role": g.role, "projects": list(g.projects) if g.projects is not None else None} for g in caller.grants]


def key_json(key: ApiKey) -> dict[str, Any]:
    return {"id": key.id, "name": key.name, "role": key.role, "projects": key.projects, "created": key.created}


def _share(x: float) -> float | None:
    """A share for JSON: None when there were no questions of its kind (NaN is not JSON)."""
    return None if math.isnan(x) else round(x, 4)


def _why_default(answers: list[Answer], threshold: float, best: float | None) -> str | None:
    if answers and answers[0].qna is not None:
        return None
    if best is None:
        return "No QnA could answer: the knowledge base is empty, or the filters left nothing eligible."
    return (f"The best answer's confidence {best:.2f} is below the threshold {threshold:.2f}, "
            "so the project's default answer was given.")


class NativeRoutes:
    def __init__(self, service: Service, authorizer: Authorizer, jobs: JobRunner, query_log: QueryLog):
        self.service = service
        self.authorizer = authorizer
        self.jobs = jobs
        self.query_log = query_log

    def routes(self) -> list[Route]:
        return [
            Route(f"{PREFIX}/whoami", self.whoami, methods=["GET"]),
            Route(f"{PREFIX}/projects", self.projects, methods=["GET"]),
            Route(f"{PREFIX}/keys", self.keys, methods=["GET", "POST"]),
            Route(f"{PREFIX}/keys/{{keyId}}", self.revoke, methods=["DELETE"]),
            Route(f"{PREFIX}/jobs/{{jobId}}", self.job, methods=["GET"]),
            Route(f"{PREFIX}/projects/{{project}}/files", self.upload, methods=["POST"]),
            Route(f"{PREFIX}/projects/{{project}}/passages", self.passages, methods=["GET"]),
            Route(f"{PREFIX}/projects/{{project}}/deployments/{{deployment}}/diff", self.diff, methods=["GET"]),
            Route(f"{PREFIX}/projects/{{project}}/deployments/{{deployment}}/:rollback", self.rollback,
                  methods=["POST"]),
            Route(f"{PREFIX}/projects/{{project}}/versions", self.versions, methods=["GET"]),
            Route(f"{PREFIX}/projects/{{project}}/compare", self.compare, methods=["GET"]),
            Route(f"{PREFIX}/projects/{{project}}/:inspect", self.inspect, methods=["POST"]),
            Route(f"{PREFIX}/projects/{{project}}/calibration", self.calibration, methods=["POST", "DELETE"]),
            Route(f"{PREFIX}/projects/{{project}}/suggestions/:reject", self.reject, methods=["POST"]),
            Route(f"{PREFIX}/projects/{{project}}/analytics", self.analytics, methods=["GET"]),
            Route(f"{PREFIX}/projects/{{project}}/analytics/settings", self.analytics_settings, methods=["GET", "PUT"]),
            Route(f"{PREFIX}/projects/{{project}}/analytics/queries", self.analytics_queries, methods=["GET"]),
            *self.duplicates_routes(),
            *TestSetRoutes(self.service, self.authorizer).routes(),
            *SourceRoutes(self.service, self.authorizer).routes(),
            *TrainRoutes(self.service, self.authorizer, self.jobs).routes(),
            *NearTopicRoutes(self.service, self.authorizer).routes(),
        ]

    async def whoami(self, request: Request) -> Response:
        """Always 200, so a page can ask before it has a key: ``signedIn`` false (and why) when the key is
        missing or refused, else the caller's grants; an open server signs everyone in as admin."""
        caller, denied = self.authorizer.check(secret_from_headers(request.headers))
        if denied:
            return JSONResponse({"open": False, "signedIn": False, "reason": denied.reason, "grants": []})
        name = caller.name if isinstance(caller, ApiKey) else getattr(caller, "subject", "")
        key_id = caller.id if isinstance(caller, ApiKey) else None  # the console warns before it revokes its own
        return JSONResponse({"open": caller is None, "signedIn": True, "name": name, "keyId": key_id,
                             "grants": grants_json(caller)})

    @handle_errors_off_loop
    def projects(self, request: Request) -> Response:
        """The Azure projects the caller may query, with what a listing shows: QnAs and passages counted
        apart, deployments, and the last deploy and edit."""
        caller = authorize(self.authorizer, request, role="query", api_version=False)
        out = []
        for p in self.service.projects():
            if kind_of(p) != "project" or not allows(caller, role="query", project=p.name):
                continue
            counts = self.service.counts(p.name)
            out.append({"projectName": p.name, "language": p.language, "qnas": counts.get("qna", 0),
                        "passages": counts.get("passage", 0), "lastModifiedDateTime": p.modified,
                        "lastDeployedDateTime": p.last_deployed or None,
                        "deployments": [d.name for d in self.service.deployments(p.name)],
                        "embedder": p.embedder,  # the model whose vectors its live state holds
                        "canAuthor": allows(caller, role="author", project=p.name)})
        return JSONResponse({"value": out})

    def _key_admin(self, request: Request) -> None:
        """Keys are managed by an admin of every project: a key limited to some could otherwise mint wider ones."""
        caller = authorize(self.authorizer, request, role="admin", api_version=False)
        if caller is not None and not any(g["role"] == "admin" and g["projects"] is None for g in grants_json(caller)):
            raise Refused(azure_error(403, "Forbidden", "Keys are managed by an admin key (or token) for every "
                                      "project; this one is limited to some projects."))

    # -- keys ------------------------------------------------------------------------------------------
    @handle_errors_off_loop
    def keys(self, request: Request) -> Response:
        self._key_admin(request)
        if request.method == "GET":
            return JSONResponse({"value": [key_json(k) for k in key_store.list_keys(self.service.store)]})
        raw = body_json(request)
        body = Body(raw if isinstance(raw, dict) else {})
        role = body.choice("role", key_store.ROLES)
        if role is None:
            raise InvalidArgument("'role' is required: admin, author or query.", target="role")
        projects = body.array("projects")
        if projects is not None and not (projects and all(isinstance(p, str) and p for p in projects)):
            raise InvalidArgument("'projects' must be a non-empty array of project names, or absent for all.",
                                  target="projects")
        key, secret = key_store.create_key(self.service.store, name=body.string("name", max_len=200) or "",
                                           role=role, projects=projects)
        return JSONResponse({**key_json(key), "secret": secret}, status_code=201)

    @handle_errors_off_loop
    def revoke(self, request: Request) -> Response:
        self._key_admin(request)
        key_id = request.path_params["keyId"]
        if not key_store.revoke_key(self.service.store, key_id):
            raise NotFound(f"There is no key with id '{key_id}'.")
        return Response(status_code=204)

    # -- jobs and uploads ------------------------------------------------------------------------------
    @handle_errors_off_loop
    def job(self, request: Request) -> Response:
        caller = authorize(self.authorizer, request, role="author", api_version=False)
        job = self.jobs.get(request.path_params["jobId"])
        if job is None or not allows(caller, role="author", project=job.project):
            return azure_error(404, "OperationNotFound", f"There is no such job: {request.path_params['jobId']}.")
        body: dict[str, object] = {"jobId": job.id, "kind": job.kind, "project": job.project, "status": job.status,
                "createdDateTime": job.created, "lastUpdatedDateTime": job.updated,
                "expirationDateTime": job.expires}
        if job.errors:
            body["errors"] = job.errors
        progress = self.jobs.progress(job.id) if job.status == "running" else None
        if progress is not None:  # how far an import's embedding has got, when this process runs it (``kb.progress``)
            body["progress"] = {"stage": progress.stage, "done": progress.done, "total": progress.total,
                                "qnas": progress.qnas, "passages": progress.passages}
        if job.kind in ("train", "upload") and job.status == "succeeded" and job.result is not None:
            # the training report (``api/train_api.py``), or what an upload added (``Authoring.import_file``)
            body["result"] = json.loads(job.result)
        return JSONResponse(body, headers={} if job.status in ("succeeded", "failed") else {"Retry-After": "1"})

    @handle_errors
    async def upload(self, request: Request) -> Response:
        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        name = (request.query_params.get("name") or "").strip()
        if not name.lower().endswith(UPLOAD_SUFFIXES):
            raise InvalidArgument(f"'name' must be the file's name, ending in one of {', '.join(UPLOAD_SUFFIXES)}; "
                                  f"got '{name}'.", target="name")
        check_project_name(project)
        data = await request.body()
        if len(data) > LIMITS.body_bytes:
            raise Refused(too_large())
        if not data:
            raise InvalidArgument("The request body must hold the file's bytes.")
        job = await run_in_threadpool(self.jobs.submit, "upload", project,
                                      {"name": name, "data": base64.b64encode(data).decode()})
        location = f"{links.base_url(request)}{PREFIX}/jobs/{quote(job.id)}"
        return Response(status_code=202, headers={"Operation-Location": location, "retry-after-ms": "200"})

    @handle_errors_off_loop
    def passages(self, request: Request) -> Response:
        """The passages of the live state, which Azure's QnA listing leaves out (they are not QnAs)."""
        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        self.service.project(project)
        return JSONResponse({"value": [{"id": q.id, "title": q.questions[0] if q.questions else "", "text": q.answer,
                                        "source": q.source, "metadata": q.metadata}
                                       for q in self.service.records(project, kinds=("passage",))]})

    # -- deploy and test -------------------------------------------------------------------------------
    @handle_errors_off_loop
    def diff(self, request: Request) -> Response:
        project, deployment = request.path_params["project"], request.path_params["deployment"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        self.service.project(project)
        if deployment.lower() == LIVE:
            raise InvalidArgument("'test' is the live state itself; name a deployment such as 'production'.",
                                  target="deployment")
        return JSONResponse({"deploymentName": deployment, **self.service.diff(project, deployment)})

    @handle_errors_off_loop
    def versions(self, request: Request) -> Response:
        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        return JSONResponse({"value": [
            {"deploymentName": v.deployment, "version": v.version, "deployedDateTime": v.deployed_at,
             "deployedBy": v.deployed_by, "qnas": v.qnas, "passages": v.passages, "hash": v.hash, "kept": v.kept,
             "current": v.current} for v in self.service.versions(project)]})

    @handle_errors_off_loop
    def rollback(self, request: Request) -> Response:
        project, deployment = request.path_params["project"], request.path_params["deployment"]
        caller = authorize(self.authorizer, request, role="author", project=project, api_version=False)
        raw = request.query_params.get("version", "")
        number = version_number(raw) if raw else None
        if number is None:
            raise InvalidArgument("Name the version to deploy again: ?version=N (GET .../versions lists them).",
                                  target="version")
        if deployment.lower() == LIVE:
            raise InvalidArgument("'test' is the live state itself; name a deployment such as 'production'.",
                                  target="deployment")
        if not self.service.has_deployment(project, deployment):
            raise NotFound(f"Deployment '{deployment}' of project '{project}' was not found: a rollback moves an "
                           "existing deployment to an earlier version.")
        d = self.service.deploy(project, deployment, version=number, by=key_store.who(caller))
        return JSONResponse({"deploymentName": d.name, "version": d.version, "lastDeployedDateTime": d.last_deployed})

    @handle_errors_off_loop
    def compare(self, request: Request) -> Response:
        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        old, new = request.query_params.get("old", ""), request.query_params.get("new", LIVE)
        if not old:
            raise InvalidArgument("Name the state to compare from: ?old= a deployment, a version such as v3, or "
                                  "test (and ?new=, test by default).", target="old")
        return JSONResponse({"old": old, "new": new, **self.service.compare(project, old, new)})

    @handle_errors
    async def inspect(self, request: Request) -> Response:
        project = request.path_params["project"]
        deployment = request.query_params.get("deploymentName") or LIVE
        authorize(self.authorizer, request, role="query", project=project, api_version=False)
        req = parse_ask(await read_json(request))
        req.explain = True
        threshold, top = req.threshold, req.top
        req.threshold = 0.0  # the answers under the threshold are what Inspect explains
        ranked = await run_query(self.service.ask, project, deployment, req)
        best = ranked[0].confidence if ranked and ranked[0].qna is not None else None
        given = [a for a in ranked if a.qna is None or a.confidence >= threshold][:top]
        if not given or given[0].qna is None:
            proj = await run_query(self.service.project, project)  # a store read: off the event loop
            default = await run_query(self.service.default_answer, proj, deployment)
            given = [Answer(None, 0.0, default_text=default)]
        out = []
        for a in ranked:
            item = answer_json(a)
            parts = dict(a.parts)
            at = parts.pop("qsim_question", None)  # a position: not a part of the confidence, but which question
            item["parts"] = parts
            questions = a.qna.questions if a.qna is not None else []
            # the question the meaning matched best (the console said "such as" its first one, whichever matched)
            item["matchedQuestion"] = questions[int(at)] if at is not None and 0 <= at < len(questions) else None
            item["kind"] = a.qna.kind if a.qna is not None else None  # "qna" or "passage": the console says which
            item["belowThreshold"] = a.qna is not None and a.confidence < threshold
            out.append(item)
        read_as = await run_query(self.service.read_as, project, deployment, req.question) if req.question else None
        return JSONResponse({"answers": [answer_json(a) for a in given], "candidates": out, "threshold": threshold,
                             # the question as the ranker read it (typos corrected, synonyms expanded), when that
                             # differs from the question asked
                             "readAs": read_as if read_as and read_as != req.question else None,
                             "defaultAnswerUsed": given[0].qna is None,
                             "defaultAnswerReason": _why_default(given, threshold, best)})

    @handle_errors
    async def calibration(self, request: Request) -> Response:
        """``openqna calibrate`` over HTTP: the body is a development file (question, QnA id or ``none`` per
        line); the answer is the accuracy/rejection curve before and after the fit, saved when ``save=true``.
        DELETE goes back to the shipped calibration."""
        from openqna.kb import calibrate as cal

        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        proj = await run_in_threadpool(self.service.project, project)
        if request.method == "DELETE":
            await run_in_threadpool(cal.save, self.service, project, None)
            return Response(status_code=204)
        params = Body(dict(request.query_params))
        deployment = params.string("deploymentName", max_len=100) or LIVE
        threshold = params.number("threshold")
        save = (request.query_params.get("save") or "false").lower() == "true"
        raw = await request.body()
        if len(raw) > LIMITS.body_bytes:
            raise Refused(too_large())
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgument("The development file must be UTF-8 text.") from None
        pairs = cal.parse_pairs(text, params.string("name", max_len=200) or "the development file")
        points = await run_query(cal.collect, self.service, project, pairs, deployment)
        cal.check(points)
        before, shipped = self.service.calibration(proj), self.service.shipped_calibration
        served = await run_query(cal.collect, self.service, project, pairs, deployment, before)  # as answered now
        at = 0.5 if threshold is None else threshold

        def fit() -> tuple[Any, Any]:  # fitting, and saving the fit, off the event loop
            fitted = cal.fit(points, shipped)
            held = cal.cross_validated(points, at, shipped)
            if save:
                cal.save(self.service, project, fitted)
            return fitted, held

        fitted, held = await run_in_threadpool(fit)
        in_scope = sum(not p.off_topic for p in points)
        return JSONResponse({
            "questions": len(points), "inScope": in_scope, "offTopic": len(points) - in_scope, "threshold": at,
            "before": {"scale": before.scale, "shift": before.shift, "curve": cal.curve(served, cal.AS_SERVED)},
            "fitted": {"scale": fitted.scale, "shift": fitted.shift, "curve": cal.curve(points, fitted)},
            "crossValidated": {"answered": _share(held.in_scope), "rejected": _share(held.off_topic)}, "saved": save})

    @handle_errors_off_loop
    def reject(self, request: Request) -> Response:
        """Reject an active-learning suggestion: ``{"qnaId", "question"}``; accepting one is a QnA update."""
        from openqna.kb.authoring import Authoring

        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        raw = body_json(request)
        body = Body(raw if isinstance(raw, dict) else {})
        qna_id, question = body.integer("qnaId", lo=1), body.string("question", max_len=1000)
        if qna_id is None or not question:
            raise InvalidArgument("The body must be {\"qnaId\": id, \"question\": \"the suggested question\"}.")
        self.service.project(project)
        if not Authoring(self.service).reject_suggestion(project, qna_id, question):
            raise NotFound(f"QnA {qna_id} has no suggestion '{question}'.")
        return Response(status_code=204)

    # -- analytics -------------------------------------------------------------------------------------
    def _period(self, request: Request) -> tuple[str, Body, int]:
        """An analytics route's project (its author authorized), query parameters and ``days`` (7 unless given)."""
        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        params = Body(dict(request.query_params))
        return project, params, params.integer("days", lo=1, hi=MAX_PERIOD_DAYS) or 7

    @handle_errors_off_loop
    def analytics(self, request: Request) -> Response:
        project, params, days = self._period(request)
        low = params.number("lowConfidence")
        limit = params.integer("top", lo=1, hi=100) or 20
        report = self.query_log.report(project, days=days,
                                       low_confidence=0.5 if low is None else low, limit=limit)
        return JSONResponse(report)

    @handle_errors_off_loop
    def analytics_queries(self, request: Request) -> Response:
        """Every logged query of the period, for review in a spreadsheet (``format=csv``) or as JSON."""
        project, params, days = self._period(request)
        fmt = params.choice("format", ("json", "csv")) or "json"
        self.service.project(project)
        log = self.query_log.queries(project, days=days)
        if fmt == "json":
            return JSONResponse(log)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(QUERY_COLUMNS)
        writer.writerows([inert(row[c]) for c in QUERY_COLUMNS] for row in log["value"])
        name = f"{project}-queries-{log['since'][:10]}-{log['until'][:10]}.csv"
        return Response(out.getvalue().encode("utf-8-sig"), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": attachment(name),
                                 "X-Total-Count": str(log["total"]), "X-Truncated": str(log["truncated"]).lower()})

    @handle_errors_off_loop
    def analytics_settings(self, request: Request) -> Response:
        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        if request.method == "PUT":
            raw = body_json(request)
            if not isinstance(raw, dict):
                raise InvalidArgument("The body must be {\"enabled\": true|false, \"retentionDays\": 1-365}.")
            body = Body(raw)
            enabled = body.boolean("enabled")
            if enabled is None:
                raise InvalidArgument("'enabled' is required: true or false.", target="enabled")
            retention = body.integer("retentionDays", lo=1, hi=MAX_RETENTION_DAYS)
            current = self.query_log.settings(project)
            self.query_log.configure(project, enabled=enabled,
                                     retention_days=current.retention_days if retention is None else retention)
        settings = self.query_log.settings(project)
        return JSONResponse({"enabled": settings.enabled, "retentionDays": settings.retention_days})

    # -- duplicates and conflicts (issue 41, item 3) ----------------------------------------------------------------
    def duplicates_routes(self) -> list[Route]:
        return [
            Route(f"{PREFIX}/projects/{{project}}/duplicates", self.duplicates, methods=["GET"]),
            Route(f"{PREFIX}/projects/{{project}}/qnas/:merge", self.merge, methods=["POST"]),
            Route(f"{PREFIX}/projects/{{project}}/qnas/:move-question", self.move_question, methods=["POST"]),
        ]

    @handle_errors_off_loop
    def duplicates(self, request: Request) -> Response:
        from openqna.kb import duplicates as dup

        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        deployment = request.query_params.get("deploymentName") or LIVE
        self.service.project(project)
        if deployment.lower() != LIVE and not self.service.has_deployment(project, deployment):
            raise NotFound(f"Deployment '{deployment}' of project '{project}' was not found: leave deploymentName out "
                           "to check the test state.")
        return JSONResponse({"deploymentName": deployment,
                             "value": [f.to_json() for f in dup.find(self.service, project, deployment)]})

    def _ids(self, request: Request, names: tuple[str, str], usage: str) -> tuple[Body, int, int]:
        raw = body_json(request)
        body = Body(raw if isinstance(raw, dict) else {})
        ids = [body.integer(name, lo=1) for name in names]
        for name, value in zip(names, ids):
            if value is None:
                raise InvalidArgument(f"'{name}' is required: a QnA id. The body must be {usage}.", target=name)
        return body, int(ids[0] or 0), int(ids[1] or 0)

    @handle_errors_off_loop
    def merge(self, request: Request) -> Response:
        from openqna.kb import duplicates as dup

        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        _, keep, drop = self._ids(request, ("keep", "drop"), '{"keep": id, "drop": id}')
        kept = dup.merge(self.service, project, keep, drop)
        return JSONResponse({"id": kept.id, "questions": kept.questions, "answer": kept.answer,
                             "metadata": kept.metadata, "deleted": drop})

    @handle_errors_off_loop
    def move_question(self, request: Request) -> Response:
        from openqna.kb import duplicates as dup

        project = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=project, api_version=False)
        usage = '{"question": "the question", "from": id, "to": id}'
        body, source, target = self._ids(request, ("from", "to"), usage)
        question = body.string("question", max_len=1000)
        if not question:
            raise InvalidArgument(f"'question' is required. The body must be {usage}.", target="question")
        old, new = dup.move_question(self.service, project, question, source, target)
        return JSONResponse({"from": {"id": old.id, "questions": old.questions},
                             "to": {"id": new.id, "questions": new.questions}})
