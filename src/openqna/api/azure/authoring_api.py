"""Azure AI Language question answering: the authoring routes.

Served under both prefixes the SDKs use: ``/language/authoring/query-knowledgebases/projects``
(2023-04-01) and ``/language/query-knowledgebases/projects`` (2021-10-01, and what SDK 1.1.0
calls whatever api-version it is given).  Long operations answer 202 with an absolute
``Operation-Location`` and run as persisted jobs; collections page with ``top``, ``skip``,
``maxpagesize`` and an absolute ``nextLink``.
"""

from __future__ import annotations

import base64
import copy
import itertools
import secrets
from datetime import datetime
from urllib.parse import quote, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api import json_body, links
from openqna.api.azure.runtime import feedback_records
from openqna.api.azure.wire import (
    Body,
    FormBody,
    Refused,
    authorize,
    body_json,
    check_api_version,
    handle_errors_off_loop,
    sends_files,
)
from openqna.api.downloads import attachment
from openqna.api.errors import azure_error
from openqna.auth.keys import Authorizer, allows, who
from openqna.formats import QNA_SUFFIXES
from openqna.formats import read_json as read_assets
from openqna.formats.azure_json import hoist_prompt_qnas
from openqna.formats.limits import MAX_DEFAULT_ANSWER_CHARS, MAX_DESCRIPTION_CHARS
from openqna.ingest import fetch
from openqna.kb.authoring import Authoring, suggestion_clusters
from openqna.kb.catalog import Job, Project, Source, check_deployment_name, check_project_name
from openqna.kb.documents import DOCUMENT_SUFFIXES
from openqna.kb.jobs import JobRunner
from openqna.kb.service import Service
from openqna.records import MAX_QNA_ID, QNA_LIST_KINDS, FormatError, InvalidArgument, NotFound, QnA

PREFIXES = ("/language/authoring/query-knowledgebases/projects", "/language/query-knowledgebases/projects")
DEFAULT_PAGE = 50
MAX_PAGE = 1000
MAX_OPS = 1000
RETRY_AFTER = "1"  # on status polls while a job runs, as Azure sends it
FIRST_POLL_MS = "200"  # on the 202: azure-core honours retry-after-ms, so small jobs finish in one poll
# what a file sent to :import or PATCH .../sources may be (as POST /openqna/projects/{project}/files takes them)
FILE_SUFFIXES = tuple(dict.fromkeys((*QNA_SUFFIXES, *DOCUMENT_SUFFIXES)))
JOB_KINDS = {"deletion-jobs": "delete", "export": "export", "import": "import", "deployments": "deploy",
             "sources": "sources", "qnas": "qnas"}


def _prefix(request: Request) -> str:
    return next(p for p in PREFIXES if request.url.path.startswith(p))


def _base(request: Request) -> str:
    """The URL clients reach this server at (``api.links``: never the request's own ``Host``)."""
    return links.base_url(request)


def _url_path(path: str) -> str:
    """A path as it may appear in a URL or a header: percent-encoded, so any name stays ASCII."""
    return quote(path, safe="/:")


def _api_version(request: Request) -> str:
    return request.query_params.get("api-version") or "2023-04-01"


def _signature(job: Job) -> dict[str, str]:
    """The query parameter that lets an export's resultUrl be fetched without a key (empty for older jobs)."""
    token = job.params.get("token")
    return {"sig": token} if token else {}


def project_json(p: Project) -> dict:
    out = {"projectName": p.name, "description": p.description, "language": p.language,
           "multilingualResource": p.multilingual, "settings": {"defaultAnswer": p.default_answer},
           "createdDateTime": p.created, "lastModifiedDateTime": p.modified}
    if p.last_deployed:
        out["lastDeployedDateTime"] = p.last_deployed
    return out


def _hoist_import_prompts(raw: dict) -> None:
    """An import body's prompts that hold a whole ``qna`` record (the spec's "Either QnAId or QnA record", as the
    SDK's docstring shows it) as QnAs of their own, ids after the body's highest, the prompts pointed at them
    (in place), as PATCH .../qnas adds them; they were refused as unsupported."""
    assets = next((v for k, v in raw.items() if k.lower() == "assets"), None)
    qnas = next((v for k, v in assets.items() if k.lower() == "qnas"), None) if isinstance(assets, dict) else None
    if not isinstance(qnas, list):
        return
    ids = [v for q in qnas if isinstance(q, dict) for k, v in q.items()
           if k.lower() == "id" and isinstance(v, int) and not isinstance(v, bool)]
    counter = itertools.count(max(ids, default=0) + 1)
    for record in list(qnas):
        if isinstance(record, dict):
            qnas.extend(hoist_prompt_qnas(record, counter.__next__))


def qna_json(q: QnA, feedback: list[tuple[str, int]]) -> dict:
    return {"id": q.id, "answer": q.answer, "source": q.source, "questions": q.questions, "metadata": q.metadata,
            "dialog": {"isContextOnly": q.dialog.is_context_only,
                       "prompts": [{"displayOrder": p.display_order, "qnaId": p.qna_id, "displayText": p.display_text}
                                   for p in q.dialog.prompts]},
            "activeLearningSuggestions": suggestion_clusters(q, feedback), "lastUpdatedDateTime": q.last_updated}


def source_json(s: Source, records_url: str) -> dict:
    """A QnaSourceRecord as the spec has it: ``sourceUri`` is required and ``contentStructureKind`` is
    ``unstructured`` or absent (a semi-structured source, the default, has no value in the spec's enum).

    A source with no URL of its own (a file import, editorial QnAs) points at ``records_url``: its QnAs here.
    """
    out = {"displayName": s.display_name, "source": s.source, "sourceKind": s.source_kind,
           "sourceUri": s.source_uri or records_url}
    if s.content_structure_kind.lower() == "unstructured":
        out["contentStructureKind"] = "unstructured"
    if s.last_updated:
        out["lastUpdatedDateTime"] = s.last_updated
    return out


def _paged(request: Request, items: list, convert=None) -> dict:
    """One page of ``items``; ``convert`` (item -> JSON) runs on that page only."""
    return _paged_fetch(request, len(items), lambda skip, count: items[skip : skip + count], convert)


def _paged_fetch(request: Request, total: int, fetch, convert=None) -> dict:
    """One page of a collection of ``total`` items that ``fetch(skip, count)`` reads, so a large collection is
    read a page at a time (measured: fetching 10k QnAs in pages of 1,000 took 8.0 s when every page read and
    converted all of them, 1.7 s reading one page at a time; bench/console.py)."""
    q = request.query_params
    body = Body(dict(q))
    skip = body.integer("skip", lo=0) or 0
    top = body.integer("top", lo=0)
    size = body.integer("maxpagesize", lo=1, hi=MAX_PAGE) or DEFAULT_PAGE
    end = total if top is None else min(total, skip + top)
    left = max(0, end - skip)
    count = min(left, size)
    page = fetch(skip, count) if count else []
    out: dict = {"value": page if convert is None else [convert(x) for x in page]}
    if left > count:
        params = {k: v for k, v in q.items() if k not in ("skip", "top")}
        params["skip"] = str(skip + count)
        if top is not None:
            params["top"] = str(top - count)
        out["nextLink"] = f"{_base(request)}{_url_path(request.url.path)}?{urlencode(params)}"
    return out


def _if_last_updated(value: dict, i: int) -> str | None:
    """An op's ``ifLastUpdated``: the lastUpdatedDateTime the QnA was read with (ISO 8601), or None."""
    since = Body(value, f"[{i}].value").string("ifLastUpdated", max_len=40)
    if since:
        try:
            datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgument(f"[{i}].value.ifLastUpdated must be the lastUpdatedDateTime the QnA was read with, "
                                  f"such as 2026-12-06T20:15:57Z, not {since!r}.",
                                  target=f"[{i}].value.ifLastUpdated") from None
    return since

def _form_files(form: FormBody, fields: tuple[str, ...], call: str, *, required: bool = True) -> list[tuple[str, bytes]]:
    """The ``files`` parts of a multipart body, each a file with a name openqna reads, as (filename, bytes); a part of
    another name than ``files`` and ``fields``, a ``files`` part that is no file, or none at all when ``required``, is
    a 400."""
    for name, _ in form.fields:
        if name == "files":
            raise InvalidArgument("Each 'files' part must be a file sent with its filename (Content-Disposition: "
                                  "form-data; name=\"files\"; filename=\"faq.tsv\"): the name says what the file "
                                  "holds.", target="files")
    unknown = [n for n, _ in form.fields if n not in fields] + [n for n, _, _ in form.files if n != "files"]
    if unknown:
        takes = " and ".join(f"'{n}'" for n in ("files", *fields))
        raise InvalidArgument(f"Unrecognized form part '{unknown[0]}': {call} as multipart/form-data takes {takes}.",
                              target=unknown[0])
    files = [(filename, data) for _, filename, data in form.files]
    if not files and required:
        raise InvalidArgument(f"{call} as multipart/form-data needs the files: a part named 'files' for each, with "
                              "its filename (the preview SDK's files=[(\"faq.tsv\", data)]).", target="files")
    for filename, data in files:
        if not filename.lower().endswith(FILE_SUFFIXES):
            raise InvalidArgument(f"'{filename[:200]}' is not a file openqna reads: a file's name must end in one of "
                                  f"{', '.join(FILE_SUFFIXES)}, which says what it holds.", target="files")
        if not data:
            raise InvalidArgument(f"The file '{filename[:200]}' is empty.", target="files")
    return files


def _encoded(data: bytes) -> str:
    """A file's bytes as a job's parameters keep them (JSON)."""
    return base64.b64encode(data).decode()


def _project_settings(body: Body) -> tuple[str | None, str | None, bool | None, str | None]:
    """A project's settings as PATCH and an import's ``metadata`` give them: description, language,
    multilingualResource and settings.defaultAnswer, each of its own type."""
    settings = body.obj("settings")
    language = body.language()
    return (body.string("description", max_len=MAX_DESCRIPTION_CHARS), language, body.boolean("multilingualResource"),
            settings.string("defaultAnswer", max_len=MAX_DEFAULT_ANSWER_CHARS) if settings else None)


class AzureAuthoring:
    def __init__(self, service: Service, authorizer: Authorizer, jobs: JobRunner):
        self.service = service
        self.authoring = Authoring(service)
        self.authorizer = authorizer
        self.jobs = jobs

    def routes(self) -> list[Route]:
        table = [
            ("", self.list_projects, ["GET"]),
            ("/deletion-jobs/{jobId}", self.job_status, ["GET"]),
            ("/{project}", self.project, ["GET", "PATCH", "DELETE"]),
            ("/{project}/:export", self.export, ["POST"]),
            ("/{project}/export/jobs/{jobId}", self.job_status, ["GET"]),
            ("/{project}/export/jobs/{jobId}/result", self.export_result, ["GET"]),
            ("/{project}/:import", self.import_, ["POST"]),
            ("/{project}/import/jobs/{jobId}", self.job_status, ["GET"]),
            ("/{project}/deployments", self.list_deployments, ["GET"]),
            ("/{project}/deployments/{deployment}", self.deployment, ["GET", "PUT"]),
            ("/{project}/deployments/{deployment}/jobs/{jobId}", self.job_status, ["GET"]),
            ("/{project}/synonyms", self.synonyms, ["GET", "PUT"]),
            ("/{project}/sources", self.sources, ["GET", "PATCH"]),
            ("/{project}/sources/jobs/{jobId}", self.job_status, ["GET"]),
            ("/{project}/qnas", self.qnas, ["GET", "PATCH"]),
            ("/{project}/qnas/jobs/{jobId}", self.job_status, ["GET"]),
            ("/{project}/feedback", self.feedback, ["POST"]),
        ]
        return [Route(prefix + path, endpoint, methods=methods) for prefix in PREFIXES
                for path, endpoint, methods in table]

    # -- helpers ---------------------------------------------------------------------------------
    def _accepted(self, request: Request, job: Job, path: str) -> Response:
        location = (f"{_base(request)}{_url_path(_prefix(request) + path + '/' + job.id)}?"
                    f"{urlencode({'api-version': _api_version(request)})}")
        return Response(status_code=202, headers={"Operation-Location": location, "retry-after-ms": FIRST_POLL_MS})

    def _submit(self, request: Request, kind: str, project: str, path: str, **params) -> Response:
        params.update(base=_base(request), prefix=_prefix(request), apiVersion=_api_version(request))
        return self._accepted(request, self.jobs.submit(kind, project, params), path)

    def _existing(self, project: str) -> Project:
        return self.service.project(project)

    # -- projects ----------------------------------------------------------------------------------
    @handle_errors_off_loop
    def list_projects(self, request: Request) -> Response:
        caller = authorize(self.authorizer, request, role="author")
        projects = [p for p in self.service.projects() if not p.settings.get("openai_file")
                    and not p.settings.get("openai_vector_store") and allows(caller, role="author", project=p.name)]
        return JSONResponse(_paged(request, [project_json(p) for p in projects]))

    @handle_errors_off_loop
    def project(self, request: Request) -> Response:
        name = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=name)
        if request.method == "GET":
            return JSONResponse(project_json(self._existing(name)))
        if request.method == "DELETE":
            self._existing(name)
            return self._submit(request, "delete", name, "/deletion-jobs")
        raw = body_json(request)
        if not isinstance(raw, dict):
            raise InvalidArgument("The request body must be a JSON object with the project's settings.")
        description, language, multilingual, default_answer = _project_settings(Body(raw))
        try:
            project = self.service.project(name)
        except NotFound:
            check_project_name(name)
            project = self.service.create_project(name, description=description or "", language=language or "en",
                                                  default_answer=default_answer)
            if multilingual is not None:
                project.multilingual = multilingual
                self.service.update_project(project)
            return JSONResponse(project_json(project), status_code=201)
        if description is not None:
            project.description = description
        if language is not None:
            project.language = language
        if multilingual is not None:
            project.multilingual = multilingual
        if default_answer is not None:
            project.settings["defaultAnswer"] = default_answer
        return JSONResponse(project_json(self.service.update_project(project)), status_code=200)

    # -- jobs ----------------------------------------------------------------------------------------
    @handle_errors_off_loop
    def job_status(self, request: Request) -> Response:
        project = request.path_params.get("project")
        key = authorize(self.authorizer, request, role="author", project=project, api_version=False)
        check_api_version(request, required=False)  # polls may leave it out (reference/azure-qa.md, 2.3)
        job = self.jobs.get(request.path_params["jobId"])
        if job is not None and not allows(key, role="author", project=job.project):
            job = None  # a deletion job names no project in its URL: a key scoped elsewhere does not see it
        segment = request.url.path[len(_prefix(request)):].split("/")
        kind = JOB_KINDS.get(segment[1] if project is None else segment[2])
        if job is None or job.kind != kind or (project is not None and job.project.lower() != project.lower()) \
                or (kind == "deploy" and job.params.get("deployment") != request.path_params.get("deployment")):
            return azure_error(404, "OperationNotFound", f"There is no such job: {request.path_params['jobId']}.")
        body = {"createdDateTime": job.created, "expirationDateTime": job.expires, "jobId": job.id,
                "lastUpdatedDateTime": job.updated, "status": job.status}
        if job.errors:
            body["errors"] = job.errors
        if job.kind == "export" and job.status == "succeeded":
            path = _url_path(f"{job.params['prefix']}/{job.project}/export/jobs/{job.id}/result")
            body["resultUrl"] = (f"{job.params['base']}{path}"
                                 f"?{urlencode({'api-version': job.params['apiVersion'], **_signature(job)})}")
        headers = {} if job.status in ("succeeded", "failed") else {"Retry-After": RETRY_AFTER}
        return JSONResponse(body, headers=headers)

    @handle_errors_off_loop
    def export(self, request: Request) -> Response:
        name = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=name)
        body = Body(dict(request.query_params))
        fmt = body.choice("format", ("json", "tsv", "excel")) or "json"
        kind = body.choice("assetKind", ("qnas", "synonyms")) or "qnas"
        project = self._existing(name)
        return self._submit(request, "export", project.name, f"/{project.name}/export/jobs", format=fmt,
                            assetKind=kind, token=secrets.token_urlsafe(24),
                            instance=self.authoring.project_instance(project.name))

    @handle_errors_off_loop
    def export_result(self, request: Request) -> Response:
        """The exported file, for an author's key or for the signed URL the job reported until the job expires.

        The signature lets ``:import`` take an export's ``resultUrl`` as its ``fileUri`` (the server
        fetches it without a key), as Azure's export URLs are importable; it opens nothing else.
        """
        name = request.path_params["project"]
        check_api_version(request, required=False)
        job = self.authoring.signed_export(request.path_params["jobId"], request.query_params.get("sig", ""))
        if job is None:
            authorize(self.authorizer, request, role="author", project=name, api_version=False)
            job = self.jobs.get(request.path_params["jobId"])
        if job is None or job.kind != "export" or job.project.lower() != name.lower() or job.result is None \
                or not self.authoring.exported_from_live_project(job):
            return azure_error(404, "OperationNotFound", "There is no finished export job with this id (or its "
                                                          "project was deleted since).")
        return Response(job.result, media_type=job.result_media,
                        headers={"Content-Disposition": attachment(job.result_name or "export")})

    @handle_errors_off_loop
    def import_(self, request: Request) -> Response:
        name = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=name)
        params = Body(dict(request.query_params))
        fmt = params.choice("format", ("json", "tsv", "excel")) or "json"
        kind = params.choice("assetKind", ("qnas", "synonyms")) or "qnas"
        raw = body_json(request, files=True)
        if isinstance(raw, FormBody):  # the preview SDK's begin_import_from_files
            return self._import_files(request, name, kind, raw)
        if raw is not None and not isinstance(raw, dict):
            raise InvalidArgument("The request body must be a JSON object (ImportJobOptions).")
        if not raw or not {k.lower() for k in raw} & {"assets", "fileuri", "metadata"}:
            # an import replaces the project's QnAs: one of nothing used to succeed, and empty the project
            raise Refused(azure_error(
                400, "InvalidArgument", "The import has nothing to import: send {\"assets\": {\"qnas\": [...], "
                "\"synonyms\": [...]}} (and \"metadata\" if you like), or {\"fileUri\": \"https://...\"} with "
                "format=json, tsv or excel. To empty a project, import {\"assets\": {\"qnas\": []}}."
                + (" Or send the files themselves as multipart/form-data (begin_import_from_files): a part named "
                   "'files' for each, with its filename." if sends_files(request.query_params.get("api-version"))
                   else ""), inner="EmptyRequest"))
        try:
            self._existing(name)
        except NotFound:
            check_project_name(name)  # :import creates the project, under the same rule as PATCH
        _hoist_import_prompts(raw)
        body = Body(raw)
        file_uri = body.string("fileUri")
        if file_uri:  # refused here, as a source's URL is, not by a job that fails
            parts = urlsplit(file_uri)
            if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
                raise InvalidArgument(f"'fileUri' must be an http(s) URL of the file to import (an export's "
                                      f"resultUrl, say), not '{file_uri[:100]}'.", target="fileUri")
            if self.authoring.own_export(file_uri) is None:  # one of this server's signed exports is read, not fetched
                try:  # a host the fetcher would refuse (loopback, private, link-local) is a 400 now, as for sources
                    fetch.checked_address(file_uri, fetch.allowed_from_settings())
                except InvalidArgument as exc:
                    raise InvalidArgument(exc.message, target="fileUri") from None
        assets = body.obj("assets")
        if kind == "synonyms" and not body.string("fileUri") and (assets is None or assets.get("synonyms") is None):
            raise InvalidArgument("assetKind=synonyms imports 'assets.synonyms' (or a fileUri), and the body has "
                                  "none: an import of no synonyms would delete the project's.", target="assets.synonyms")
        metadata = body.obj("metadata")
        if metadata is not None:
            _project_settings(metadata)  # refused here, as PATCH refuses them, rather than stored as text
        if not body.string("fileUri"):  # a URL is a string: anything else was accepted and crashed the job
            try:
                content = read_assets(raw, "request body")
            except FormatError as exc:
                raise InvalidArgument(exc.message) from None
            # as PATCH .../qnas refuses one: a QnA no question reaches (a passage has none, by design)
            blank = next((i for i, q in enumerate(content.qnas)
                          if q.kind == "qna" and not any(x.strip() for x in q.questions)), None)
            if blank is not None:
                raise InvalidArgument(f"assets.qnas[{blank}] must hold at least one question that is not blank.",
                                      target=f"assets.qnas[{blank}].questions")
            if kind != "synonyms" and assets is not None and "qnas" in assets.raw:
                # a prompt to a QnA that does not exist is a 400 now, as for PATCH .../qnas (the job checks again)
                self.authoring.check_import_prompts(name, content.qnas, replacing=True)
        return self._submit(request, "import", name, f"/{name}/import/jobs", format=fmt, assetKind=kind, body=raw)

    def _import_files(self, request: Request, name: str, kind: str, form: FormBody) -> Response:
        """A multipart :import (2025-05-15-preview): its files replace the project's QnAs (or synonyms) as a
        ``fileUri`` import's file does, each read as its name and contents say (there is no ``format``); a document
        among them becomes a source of the project, as an uploaded one does."""
        files = _form_files(form, (), ":import")
        try:
            self._existing(name)
        except NotFound:
            check_project_name(name)  # :import creates the project, under the same rule as PATCH
        return self._submit(request, "import", name, f"/{name}/import/jobs", format=None, assetKind=kind,
                            files=[{"name": f, "data": _encoded(data)} for f, data in files])

    # -- deployments -----------------------------------------------------------------------------------
    @handle_errors_off_loop
    def list_deployments(self, request: Request) -> Response:
        name = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=name)
        items = [{"deploymentName": d.name, "lastDeployedDateTime": d.last_deployed}
                 for d in self.service.deployments(name)]
        return JSONResponse(_paged(request, items))

    @handle_errors_off_loop
    def deployment(self, request: Request) -> Response:
        name, deployment = request.path_params["project"], request.path_params["deployment"]
        caller = authorize(self.authorizer, request, role="author", project=name)
        if request.method == "PUT":
            check_deployment_name(deployment)
            self._existing(name)
            self.service.check_new_deployment(name, deployment)  # a 400 now, not a job that fails
            return self._submit(request, "deploy", name, f"/{name}/deployments/{deployment}/jobs",
                                deployment=deployment, by=who(caller))
        for d in self.service.deployments(name):
            if d.name == deployment:
                return JSONResponse({"deploymentName": d.name, "lastDeployedDateTime": d.last_deployed})
        raise self.service.deployment_not_found(name, deployment)

    # -- synonyms ----------------------------------------------------------------------------------------
    @handle_errors_off_loop
    def synonyms(self, request: Request) -> Response:
        name = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=name)
        if request.method == "GET":
            groups = self.service.synonyms(name)
            return JSONResponse(_paged(request, [{"alterations": g} for g in groups]))
        raw = body_json(request)
        body = Body(raw if isinstance(raw, dict) else {})
        value = body.array("value")
        if value is None:
            raise InvalidArgument("The body must be {\"value\": [{\"alterations\": [...]}, ...]}.", target="value")
        try:
            groups = read_assets({"assets": {"synonyms": value}}, "request body").synonyms
        except FormatError as exc:
            raise InvalidArgument(exc.message.replace("Assets.Synonyms", "value"), target="value") from None
        self._existing(name)
        self.authoring.set_synonyms(name, groups)
        return Response(status_code=204)

    # -- sources -------------------------------------------------------------------------------------------
    @handle_errors_off_loop
    def sources(self, request: Request) -> Response:
        name = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=name)
        if request.method == "GET":
            items = self.authoring.list_sources(name)
            qnas = f"{_base(request)}{_url_path(f'{_prefix(request)}/{name}/qnas')}"
            version = _api_version(request)
            return JSONResponse(_paged(request, [
                source_json(s, f"{qnas}?{urlencode({'api-version': version, 'source': s.source})}") for s in items]))
        ops = body_json(request, files=True)
        self._existing(name)
        if isinstance(ops, FormBody):  # the preview SDK's begin_update_sources_from_files
            return self._submit(request, "sources", name, f"/{name}/sources/jobs", ops=self._file_source_ops(ops))
        parsed = [self._source_op(i, op) for i, op in enumerate(self._ops(ops))]
        allowed = fetch.allowed_from_settings()
        for op in parsed:  # a URL the fetcher would refuse is a 400 now, not a job that fails (it checks again)
            if op["op"] != "delete":
                fetch.checked_address(op["source"]["source_uri"], allowed)
        return self._submit(request, "sources", name, f"/{name}/sources/jobs", ops=parsed)

    @staticmethod
    def _ops(ops) -> list:
        if not isinstance(ops, list) or not ops:
            raise InvalidArgument("The body must be a non-empty JSON array of {\"op\", \"value\"} operations.")
        if len(ops) > MAX_OPS:
            raise InvalidArgument(f"The body has {len(ops)} operations; the limit is {MAX_OPS} per call.")
        return ops

    @staticmethod
    def _file_source_ops(form: FormBody) -> list[dict]:
        """The operations of a multipart PATCH .../sources: each ``fileOperations`` field a JSON list of
        {operation, fileName, fileDisplayName, refresh} (as the SDK sends it) or one such object (as the spec's
        example has it, which names the file ``fileSource``); an add or replace reads the ``files`` part of that
        name, a source with no URL (as an uploaded file's: it has none to refresh from)."""
        files = _form_files(form, ("fileOperations",), "PATCH .../sources", required=False)  # deletes need none
        sent: dict[str, bytes] = {}
        for filename, data in files:
            if sent.setdefault(filename, data) is not data:
                raise InvalidArgument(f"Two 'files' parts are named '{filename[:200]}': each file needs a name of its "
                                      "own, which its operation names.", target="files")
        raw_ops: list = []
        for field, text in form.fields:
            try:
                value = json_body.parse(text.encode())
            except json_body.BadBody as exc:
                raise InvalidArgument(f"'fileOperations' is not valid JSON: {exc}. Send a JSON list of "
                                      "{\"operation\", \"fileName\", \"fileDisplayName\", \"refresh\"} objects.",
                                      target="fileOperations") from None
            raw_ops += value if isinstance(value, list) else [value]
        if not raw_ops:
            raise InvalidArgument("PATCH .../sources as multipart/form-data needs 'fileOperations': a JSON list of "
                                  "{\"operation\": \"add\", \"fileName\": \"faq.tsv\"} objects, one for each file.",
                                  target="fileOperations")
        if len(raw_ops) > MAX_OPS:
            raise InvalidArgument(f"'fileOperations' has {len(raw_ops)} operations; the limit is {MAX_OPS} per call.",
                                  target="fileOperations")
        out, named = [], set()
        for i, raw in enumerate(raw_ops):
            path = f"fileOperations[{i}]"
            if not isinstance(raw, dict):
                raise InvalidArgument(f"{path} must be an object with 'operation' and 'fileName'.", target=path)
            item = Body(raw, path)
            op = item.choice("operation", ("add", "replace", "delete"))
            file = item.string("fileName", max_len=300) or item.string("fileSource", max_len=300)
            if op is None or not file:
                raise InvalidArgument(f"{path} needs 'operation' (add, replace or delete) and 'fileName', the name "
                                      "of a file sent in a 'files' part.", target=path)
            source = {"source": file, "display_name": item.string("fileDisplayName", max_len=200) or file,
                      "source_uri": "", "source_kind": "file", "content_structure_kind": "semistructured"}
            parsed = {"op": op, "refresh": bool(item.boolean("refresh")), "source": source}
            if op != "delete":
                if file not in sent:
                    have = f"the files sent: {', '.join(sent)}" if sent else "the request has no 'files' part"
                    raise InvalidArgument(f"{path} {op}s '{file[:200]}', and no 'files' part has that name "
                                          f"({have}): send the file in a part named 'files' with that filename.",
                                          target=f"{path}.fileName")
                parsed["data"] = _encoded(sent[file])
                named.add(file)
            out.append(parsed)
        extra = [f for f in sent if f not in named]
        if extra:
            raise InvalidArgument(f"The file '{extra[0][:200]}' is named by no add or replace in 'fileOperations'.",
                                  target="files")
        return out

    @staticmethod
    def _source_op(i: int, raw) -> dict:
        if not isinstance(raw, dict):
            raise InvalidArgument(f"[{i}] must be an object with 'op' and 'value'.", target=f"[{i}]")
        item = Body(raw, f"[{i}]")
        op = item.choice("op", ("add", "replace", "delete"))
        value = item.obj("value")
        if op is None or value is None:
            raise InvalidArgument(f"[{i}] needs 'op' (add, replace or delete) and 'value'.", target=f"[{i}]")
        kind = value.choice("sourceKind", ("url", "file")) or "url"  # before the URL is read: say what is wrong first
        uri = value.string("sourceUri", max_len=2000) or ""
        source = value.string("source", max_len=300) or uri or value.string("displayName", max_len=200)
        if not source:
            raise InvalidArgument(f"[{i}].value needs 'source' or 'sourceUri'.", target=f"[{i}].value.source")
        if op != "delete" and not uri.lower().startswith(("http://", "https://")):
            raise InvalidArgument(f"[{i}].value.sourceUri must be an http(s) URL; got '{uri}'.",
                                  target=f"[{i}].value.sourceUri")
        structure = value.string("contentStructureKind") or value.string("sourceContentStructureKind")
        return {"op": op, "refresh": bool(value.boolean("refresh")),
                "source": {"source": source, "display_name": value.string("displayName", max_len=200) or source,
                           "source_uri": uri, "source_kind": kind,
                           "content_structure_kind": structure or "semistructured"}}

    # -- QnAs ---------------------------------------------------------------------------------------------
    @handle_errors_off_loop
    def qnas(self, request: Request) -> Response:
        name = request.path_params["project"]
        authorize(self.authorizer, request, role="author", project=name)
        if request.method == "GET":
            source = request.query_params.get("source")
            feedback = self.authoring.suggestions(name)
            convert = lambda q: qna_json(q, feedback.get(q.id, []))  # noqa: E731
            if not source:  # read one page of records, not all of them for every page
                return JSONResponse(_paged_fetch(
                    request, self.service.count(name, kinds=QNA_LIST_KINDS), lambda skip, count:
                    self.service.records(name, offset=skip, limit=count, kinds=QNA_LIST_KINDS), convert))
            items = [q for q in self.service.records(name, kinds=QNA_LIST_KINDS) if q.source.lower() == source.lower()]
            return JSONResponse(_paged(request, items, convert))
        ops = self._ops(body_json(request))
        self._existing(name)
        parsed = []
        writes: list[QnA] = []  # what add and replace would write, follow-ups written inline included
        preconditions: dict[int, str] = {}  # QnA id -> the ifLastUpdated its replace carries
        inline_ids = itertools.count(MAX_QNA_ID, -1)  # stand-ins for the ids the job assigns them
        for i, raw in enumerate(ops):
            if not isinstance(raw, dict):
                raise InvalidArgument(f"[{i}] must be an object with 'op' and 'value'.", target=f"[{i}]")
            item = Body(raw, f"[{i}]")
            op = item.choice("op", ("add", "replace", "delete"))
            value = item.get("value")
            if op is None or not isinstance(value, dict):
                raise InvalidArgument(f"[{i}] needs 'op' (add, replace or delete) and a 'value' object.",
                                      target=f"[{i}]")
            if op == "delete":
                qid = Body(value, f"[{i}].value").integer("id")
                if qid is None:
                    raise InvalidArgument(f"[{i}].value.id is required to delete a QnA.", target=f"[{i}].value.id")
                # openqna's precondition, as for a replace: deleting what was changed since it was read is a conflict
                since = _if_last_updated(value, i)
                value = {"id": qid}
                if since:
                    parsed.append({"op": op, "value": value, "ifLastUpdated": since})
                    continue
            else:
                # openqna's precondition: the lastUpdatedDateTime the edit started from (a conflict fails the job)
                since = _if_last_updated(value, i)
                if since and op == "add":
                    raise InvalidArgument(f"[{i}].value.ifLastUpdated is for 'replace': a QnA being added has no "
                                          "earlier version to compare it with.", target=f"[{i}].value.ifLastUpdated")
                value = {k: v for k, v in value.items() if k.lower() not in ("lastupdateddatetime", "iflastupdated")}
                if op == "add" and Body(value, f"[{i}].value").integer("id") == 0:
                    value = {k: v for k, v in value.items() if k.lower() != "id"}
                if op == "replace" and Body(value, f"[{i}].value").integer("id") is None:
                    # a 202 whose job then failed with "there is no QnA with id None"
                    raise InvalidArgument(f"[{i}].value.id is required to replace a QnA: the id of the QnA it "
                                          "replaces.", target=f"[{i}].value.id")
                # the REST spec makes 'questions' optional and never empty: a replace without them keeps them; an
                # empty list, or one of blanks, was stored as a QnA no question reaches (and exported so)
                questions = Body(value).get("questions")
                if (questions is not None or op == "add") and isinstance(questions, list | None) and not any(
                        isinstance(q, str) and q.strip() for q in questions or []):
                    raise InvalidArgument(f"[{i}].value.questions must hold at least one question that is not blank"
                                          + ("; leave it out of a replace to keep the stored ones." if op == "replace"
                                             else "."), target=f"[{i}].value.questions")
                keep = op == "replace" and questions is None
                check = copy.deepcopy(value)
                inline = hoist_prompt_qnas(check, inline_ids.__next__)
                try:
                    writes += read_assets({"assets": {"qnas": [check, *inline]}}, "request body").qnas
                except FormatError as exc:
                    raise InvalidArgument(f"[{i}].value: " + exc.message.split("Assets.Qnas[0].", 1)[-1],
                                          target=f"[{i}].value") from None
                if since and writes[-1 - len(inline)].id is not None:
                    preconditions[writes[-1 - len(inline)].id] = since
                if keep or since:
                    parsed.append({"op": op, "value": value, "keepQuestions": keep, "ifLastUpdated": since})
                    continue
            parsed.append({"op": op, "value": value})
        # a prompt to a QnA that does not exist is a 400 now, not a job that fails (the job checks again)
        self.authoring.check_prompts(name, writes, {o["value"]["id"] for o in parsed if o["op"] == "delete"},
                                     if_last_updated=preconditions)
        return self._submit(request, "qnas", name, f"/{name}/qnas/jobs", ops=parsed)

    # -- feedback ------------------------------------------------------------------------------------------
    @handle_errors_off_loop
    def feedback(self, request: Request) -> Response:
        name = request.path_params["project"]
        authorize(self.authorizer, request, role="query", project=name)
        raw = body_json(request)
        parsed = feedback_records(Body(raw if isinstance(raw, dict) else {}), "records")
        self._existing(name)
        self.authoring.add_feedback(name, parsed)
        return Response(status_code=204)
