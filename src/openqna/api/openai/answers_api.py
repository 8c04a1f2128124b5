"""OpenAI-compatible Files, Answers and Search (the retired endpoints, kept alive).

Code written for ``openai.Answer`` / ``openai.Search`` / ``openai.File`` (0.x) and for the
modern clients' Files API runs against openqna by changing only the base URL.  Requests are
validated as OpenAI's schema did (``additionalProperties: false`` included) and refused in
OpenAI's error envelope: ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api import json_body, numbers
from openqna.api.concurrency import run_query
from openqna.api.credentials import secret_from_headers
from openqna.auth.keys import Authorizer, Caller, Denied, Principal, allows, lacks_role, reaches, scope_of, who
from openqna.formats.limits import LIMITS
from openqna.kb.answers_search import Answering, AnswersRequest
from openqna.kb.catalog import StoredFile
from openqna.kb.searching import Hit
from openqna.kb.service import Service
from openqna.kinds import openai_files
from openqna.models.completer import Completer, logit_bias_refusal
from openqna.records import InvalidArgument, NotFound, OpenQnAError

ANSWERS_FIELDS = {"model", "question", "examples", "examples_context", "documents", "file", "search_model",
                  "max_rerank", "temperature", "logprobs", "max_tokens", "stop", "n", "logit_bias",
                  "return_metadata", "return_prompt", "expand", "user", "experimental_alternative_question"}
SEARCH_FIELDS = {"model", "query", "documents", "file", "max_rerank", "return_metadata", "user", "version"}


def openai_error(status: int, message: str, *, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}},
                        status_code=status)


def unauthorized(denied: Denied) -> JSONResponse:
    """OpenAI's 401: its own words for a wrong key, the reason for a refused bearer token."""
    if denied.token:
        return openai_error(401, f"Invalid bearer token: {denied.reason}.", code="invalid_token")
    return openai_error(401, "Incorrect API key provided. Send an openqna key as 'Authorization: Bearer <key>'.",
                        code="invalid_api_key")


def visible_to(caller: Caller | None) -> openai_files.Visible:
    """The files ``caller`` may see: those of its projects and those its list names (``auth.keys.reaches``).

    Every other file answers 404 "No such File object", as at OpenAI, where a file of another project does not
    exist for the key at hand; so no route tells a key which ids other projects use.
    """
    return lambda f: reaches(caller, "query", f.id, f.scope)


def may_not(caller: Caller | None, what: str) -> JSONResponse:
    """The 403 of a caller that sees ``what`` but may not change it (its role on the thing's projects is too low)."""
    noun = "token" if isinstance(caller, Principal) else "key"
    return openai_error(403, f"This {noun} may read {what} but not change it: that needs the role 'author' on one of "
                             "its projects.", kind="permission_error")


class Refused(Exception):
    def __init__(self, response: Response):
        self.response = response


async def read_json(request: Request, *, empty: Any = None) -> Any:
    """The request's JSON body (``empty`` when there is none), refused in OpenAI's dialect."""
    raw = await request.body()
    if len(raw) > LIMITS.body_bytes:
        raise Refused(openai_error(413, f"The request body is larger than {LIMITS.body_bytes} bytes."))
    if not raw.strip():
        return empty
    try:
        return json_body.parse(raw)
    except json_body.BadBody as exc:
        raise InvalidArgument(f"We could not parse the JSON body of your request ({exc}).") from None


class Invalid(InvalidArgument):
    """A refusal in OpenAI's own validation words, with its ``code`` (``empty_array``, ``invalid_type``, ...)."""

    def __init__(self, message: str, param: str, openai_code: str):
        super().__init__(message, target=param)
        self.openai_code = openai_code


def error_response(exc: OpenQnAError) -> Response:
    """A caller's error in OpenAI's envelope: 404 for what does not exist, else its status."""
    if isinstance(exc, NotFound):
        return openai_error(404, exc.message, param=exc.target)
    return openai_error(max(exc.status, 400), exc.message, param=exc.target,
                        code=exc.openai_code if isinstance(exc, Invalid) else None,
                        kind="server_error" if exc.status >= 500 else "invalid_request_error")


def file_json(f: StoredFile) -> dict:
    """OpenAI's file object; ``expires_at`` (an integer in its spec, never null) only on a file that expires."""
    out = {"id": f.id, "object": "file", "bytes": f.bytes, "created_at": f.created_at, "expires_at": f.expires_at,
           "filename": f.filename, "purpose": f.purpose, "status": f.status, "status_details": None}
    if f.expires_at is None:
        del out["expires_at"]
    return out


# and ``model``: the search engine openai 0.x sends with purpose "search" (``File.create(..., model="ada")``); every
# file is indexed by the server's own embedder, so it is read and ignored
UPLOAD_FIELDS = ("file", "purpose", "expires_after[anchor]", "expires_after[seconds]", "model")


def check_upload_fields(form: Any) -> None:
    """Refuse a form field ``POST /v1/files`` does not read, and one sent more than once (which would otherwise be
    read as its last value, silently), naming it; ``expires_after`` sent as one JSON field is told the SDK's form."""
    counts: dict[str, int] = {}
    for name, _ in form.multi_items():
        counts[name] = counts.get(name, 0) + 1
    if "expires_after" in counts:
        raise InvalidArgument("'expires_after' is sent as two form fields, as OpenAI's SDK sends it: "
                              "expires_after[anchor]=created_at and expires_after[seconds]=N.", target="expires_after")
    unknown = [name for name in counts if name not in UPLOAD_FIELDS and not name.startswith("expires_after[")]
    if unknown:
        raise InvalidArgument(f"Unrecognized form field{'s' if len(unknown) > 1 else ''} "
                              f"{', '.join(repr(n) for n in unknown)}; a file upload takes 'file', 'purpose' and "
                              f"'expires_after[anchor]' with 'expires_after[seconds]'.", target=unknown[0])
    repeated = [name for name, n in counts.items() if n > 1]
    if repeated:
        raise InvalidArgument(f"Form field {repeated[0]!r} was sent {counts[repeated[0]]} times; send it once.",
                              target=repeated[0])


# What httpx (under the `openai` client) escapes in a part's filename, which the multipart parser leaves as sent: '"'
# and every character from 0x00 to 0x1F but ESC (0x1B), as "%" and two upper-case hex digits
# (httpx/_multipart.py, _HTML5_FORM_ENCODING_REPLACEMENTS).  A browser escapes three of them, '"', LF and CR, and "must
# not perform any other escapes" (WHATWG's multipart/form-data encoding).  Neither escapes "%": any other "%" sequence
# ("%41", "%1B", "%0a") is the name's own.
_FORM_ESCAPES = {f"%{c:02X}": chr(c) for c in (*range(0x20), 0x22) if c != 0x1B}
_FORM_ESCAPE = re.compile("|".join(_FORM_ESCAPES))


def form_filename(sent: str) -> str:
    """The name the user gave the file, from the ``filename`` of its multipart Content-Disposition, in one pass (a
    sequence an escape leaves behind is not read again).  A NUL is refused: no file system keeps one in a name, nor
    PostgreSQL in text; every other character is kept as sent, tabs and line breaks included."""
    name = _FORM_ESCAPE.sub(lambda m: _FORM_ESCAPES[m.group()], sent)
    if "\x00" in name:
        raise InvalidArgument("The file's name holds a NUL (U+0000), which a file name may not hold; rename the "
                              "file.", target="file")
    return name


def expires_after_form(form: Any) -> int | None:
    """The seconds of ``expires_after[anchor]=created_at&expires_after[seconds]=N`` (None: the file never expires), as
    OpenAI's SDK sends the form; the range is checked where the file is stored."""
    fields = {k[len("expires_after["):-1]: v for k, v in form.multi_items()
              if k.startswith("expires_after[") and k.endswith("]")}
    if not fields:
        return None
    unknown = sorted(set(fields) - {"anchor", "seconds"})
    if unknown:
        raise InvalidArgument(f"Unrecognized form field 'expires_after[{unknown[0]}]'; expires_after takes 'anchor' "
                              "(created_at) and 'seconds'.", target=f"expires_after.{unknown[0]}")
    if fields.get("anchor") != "created_at":
        raise InvalidArgument(f"'expires_after[anchor]' must be 'created_at'; got {fields.get('anchor')!r}.",
                              target="expires_after.anchor")
    raw = fields.get("seconds")
    seconds = numbers.count(raw) if isinstance(raw, str) else None
    if seconds is None:
        raise InvalidArgument(f"'expires_after[seconds]' must be an integer number of seconds; got {raw!r}.",
                              target="expires_after.seconds")
    return seconds


def file_documents(hits: list[Hit]) -> list[Hit]:
    """The hits that are documents of the file (each has its index in the file).

    A file's knowledge base is reached as a project on the Azure surface too (docs/security.md), so a record added
    there has no index: it is not one of the file's documents, and /v1/answers and /v1/search leave it out.
    """
    return [h for h in hits if type(h.record.fields.get("document")) is int]


class Body:
    """A JSON object checked field by field against OpenAI's schema."""

    def __init__(self, raw: Any, allowed: set[str]):
        if not isinstance(raw, dict):
            raise InvalidArgument("The request body must be a JSON object.")
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise InvalidArgument(f"Unrecognized request argument supplied: {', '.join(unknown)}", target=unknown[0])
        self.raw = raw

    def present(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def string(self, key: str, *, required: bool = False, default: str | None = None) -> str | None:
        value = self.raw.get(key)
        if value is None:
            if required:
                raise InvalidArgument(f"'{key}' is a required property", target=key)
            return default
        if not isinstance(value, str) or (required and not value):
            raise InvalidArgument(f"'{key}' must be a non-empty string", target=key)
        return value

    def integer(self, key: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
            raise InvalidArgument(f"'{key}' must be an integer {bound}; got {value!r}", target=key)
        return value

    def number(self, key: str, default: float, lo: float, hi: float) -> float:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise InvalidArgument(f"'{key}' must be a number between {lo} and {hi}; got {value!r}", target=key)
        return float(value)

    def boolean(self, key: str) -> bool:
        value = self.raw.get(key)
        if value is not None and not isinstance(value, bool):
            raise InvalidArgument(f"'{key}' must be true or false", target=key)
        return bool(value)

    def strings(self, key: str, *, max_items: int, min_items: int = 0) -> list[str] | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidArgument(f"'{key}' must be an array of strings", target=key)
        if not min_items <= len(value) <= max_items:
            raise InvalidArgument(f"'{key}' must have {min_items} to {max_items} items; got {len(value)}", target=key)
        return value


RETRY_WINDOW = 900.0  # seconds an upload is remembered for a retry of it (the client times out after 600)

class OpenAIRoutes:
    def __init__(self, service: Service, authorizer: Authorizer, completer: Completer,
                 on_file_deleted=lambda file_id: None):
        self.service = service
        self.authorizer = authorizer
        self.answering = Answering(service, completer)
        self.on_file_deleted = on_file_deleted  # e.g. detach the file from every vector store
        self.purged_at = 0.0
        # uploads of this process by what they uploaded, for the client's retries of them (``_upload``)
        self._uploads: dict[tuple[str, ...], tuple[float, asyncio.Future[StoredFile]]] = {}

    def routes(self) -> list[Route]:
        return [
            Route("/v1/files", self.files, methods=["GET", "POST"]),
            Route("/v1/files/{file_id}", self.file, methods=["GET", "DELETE"]),
            Route("/v1/files/{file_id}/content", self.file_content, methods=["GET"]),
            Route("/v1/answers", self.answers, methods=["POST"]),
            Route("/v1/search", self.search, methods=["POST"]),
            Route("/v1/engines/{engine}/search", self.search, methods=["POST"]),
        ]

    # -- plumbing ------------------------------------------------------------------------------
    def _auth(self, request: Request, role: str) -> None:
        caller, denied = self.authorizer.check(secret_from_headers(request.headers))
        if denied:
            raise Refused(unauthorized(denied))
        if not allows(caller, role=role):
            assert caller is not None  # an open server (no caller) allows every role
            raise Refused(openai_error(403, lacks_role(caller, role), kind="permission_error"))
        request.state.key = caller

    def _purge(self) -> None:
        """Delete the files that expired (at most once a second; reads already treat them as gone) and detach them,
        as a delete does."""
        if time.monotonic() - self.purged_at < 1.0:
            return
        self.purged_at = time.monotonic()
        for file_id in openai_files.purge_expired(self.service):
            self.on_file_deleted(file_id)

    async def _guard(self, request: Request, role: str, work) -> Response:
        try:
            self._auth(request, role)
            await run_in_threadpool(self._purge)
            return await work()
        except Refused as exc:
            return exc.response
        except OpenQnAError as exc:
            return error_response(exc)

    # -- files ------------------------------------------------------------------------------------
    async def files(self, request: Request) -> Response:
        if request.method == "GET":
            return await self._guard(request, "query", lambda: self._list_files(request))
        return await self._guard(request, "author", lambda: self._upload(request))

    async def _list_files(self, request: Request) -> Response:
        q = request.query_params
        files = await run_in_threadpool(openai_files.list_files, self.service, q.get("purpose"),
                                        visible_to(request.state.key))
        if q.get("order", "desc") not in ("asc", "desc"):
            return openai_error(400, f"'order' must be 'asc' or 'desc'; got {q['order']!r}.", param="order")
        if q.get("order") == "asc":
            files.reverse()
        # A cursor is a place in the list: a file deleted since (deleting files while iterating them) still names
        # one, read from its id (``openai_files.cursor_key``).  A cursor that says no place is refused, as the
        # vector-store lists refuse it: an empty last page would end the SDK's iteration as if the list were done.
        # ``before`` pages backwards, as the vector-store lists do (it was ignored: the first page came back).
        ids = [f.id for f in files]
        keys = [(f.created_at, f.id) for f in files]
        ascending = q.get("order") == "asc"
        places: dict[str, int] = {}
        for param in ("after", "before"):
            cursor = q.get(param)
            if cursor is None:
                continue
            if cursor in ids:
                places[param] = ids.index(cursor) + (param == "after")
            elif (key := openai_files.cursor_key(cursor)) is not None:  # gone: the files on its side of it
                places[param] = sum(1 for k in keys if (k < key if ascending else k > key))
            else:
                return openai_error(400, f"'{param}' names no object of this list: {cursor!r}.", param=param)
        start, end = places.get("after", 0), places.get("before", len(files))
        files = files[start:end]
        limit = numbers.count(q.get("limit", "10000"))
        if limit is None or not 1 <= limit <= 10000:
            return openai_error(400, f"'limit' must be an integer between 1 and 10000; got {q['limit']!r}.",
                                param="limit")
        page = files[-limit:] if q.get("before") is not None and q.get("after") is None else files[:limit]
        return JSONResponse({"object": "list", "data": [file_json(f) for f in page], "has_more": len(files) > limit,
                             "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None})

    async def _upload(self, request: Request) -> Response:
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "multipart/form-data":
            raise InvalidArgument(f"Upload a file as multipart/form-data: a part 'file' holding the file (with its "
                                  f"filename) and a field 'purpose'; this request's Content-Type is "
                                  f"{content_type or 'missing'!r}.", target="file")
        try:
            form = await request.form(max_part_size=openai_files.MAX_FILE_BYTES + 1)
        except Exception as exc:  # malformed multipart from the client, whatever the parser says
            raise InvalidArgument(f"Send the file as multipart/form-data with fields 'purpose' and 'file' ({exc}).")
        check_upload_fields(form)
        purpose, upload, expires_after = form.get("purpose"), form.get("file"), expires_after_form(form)
        if not isinstance(purpose, str) or not purpose:
            raise InvalidArgument("'purpose' is a required form field.", target="purpose")
        if upload is None:
            raise InvalidArgument("'file' is a required form part holding the file.", target="file")
        if isinstance(upload, str) or not upload.filename:
            raise InvalidArgument("The 'file' part needs a filename, as a file is sent (Content-Disposition: "
                                  "form-data; name=\"file\"; filename=\"notes.jsonl\"; curl: -F file=@notes.jsonl).",
                                  target="file")
        data = await upload.read()
        filename = form_filename(upload.filename)
        # The openai client retries a request that timed out (twice, by default), saying so in
        # x-stainless-retry-count, while the server still indexes the first: a large file was stored three times
        # (and indexed three times over, for half an hour of CPU).  A retry of an upload this process received in
        # the last RETRY_WINDOW seconds, by the same caller with the same bytes, name and purpose, gets that upload's
        # file (waiting for it) instead of a copy.
        key = (who(request.state.key), hashlib.sha256(data).hexdigest(), filename, purpose, str(expires_after))
        now = time.monotonic()
        for old in [k for k, (at, _) in self._uploads.items() if now - at > RETRY_WINDOW]:
            del self._uploads[old]
        earlier = self._uploads.get(key)
        if earlier is not None and request.headers.get("x-stainless-retry-count", "0") not in ("", "0"):
            try:
                stored = await asyncio.shield(earlier[1])
                await run_in_threadpool(openai_files.get, self.service, stored.id)  # not deleted meanwhile
                return JSONResponse(file_json(stored))
            except Exception:
                pass  # the first failed, or its file is gone: this one is an upload of its own
        # a task of its own: the file is stored even when this request is cancelled, and a retry waits for it
        def upload_it() -> StoredFile:  # remembered without its bytes: a retry needs the file object alone
            stored = openai_files.upload(self.service, filename, data, purpose, scope_of(request.state.key, "author"),
                                         expires_after)
            return dataclasses.replace(stored, data=b"")

        task = asyncio.ensure_future(run_in_threadpool(upload_it))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # a failure is this request's to report
        self._uploads[key] = (now, task)
        return JSONResponse(file_json(await asyncio.shield(task)))

    async def file(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]

        async def work() -> Response:
            caller = request.state.key
            f = await run_in_threadpool(lambda: openai_files.get(self.service, file_id, visible=visible_to(caller)))
            if request.method == "GET":
                return JSONResponse(file_json(f))
            if not reaches(caller, "author", f.id, f.scope):
                return may_not(caller, f"file '{file_id}'")
            await run_in_threadpool(openai_files.delete, self.service, file_id)
            await run_in_threadpool(self.on_file_deleted, file_id)
            return JSONResponse({"id": file_id, "object": "file", "deleted": True})

        return await self._guard(request, "author" if request.method == "DELETE" else "query", work)

    async def file_content(self, request: Request) -> Response:
        async def work() -> Response:
            f = await run_in_threadpool(lambda: openai_files.get(self.service, request.path_params["file_id"],
                                                                 with_data=True, visible=visible_to(request.state.key)))
            return Response(f.data, media_type="application/octet-stream")

        return await self._guard(request, "query", work)

    # -- answers and search ---------------------------------------------------------------------
    async def _file_hits(self, f: StoredFile, query: str, limit: int) -> list[Hit]:
        """The file's best ``limit`` documents for ``query``; none for a blank one.

        OpenAI's file mode first asked Elasticsearch for ``max_rerank`` documents, which a blank query matches
        none of (the knowledge-base search refuses one, naming its own parameter).
        """
        if not query.strip():
            return []
        return file_documents(await run_query(self.service.search, f.project, query, limit=limit))

    async def answers(self, request: Request) -> Response:
        async def work() -> Response:
            body = Body(await read_json(request), ANSWERS_FIELDS)
            req, file_id, expand = self._answers_request(body)
            if file_id:
                f = await run_in_threadpool(openai_files.searchable, self.service, file_id, ("answers",),
                                            visible_to(request.state.key))
                hits = await self._file_hits(f, req.alternative_question or req.question, req.max_rerank)
                req.file_texts = [(h.record.fields["document"], h.record.answer, h.record.fields.get("metadata"),
                                   h.score) for h in hits]
            result = await run_in_threadpool(self.answering.answers, req)
            completion: Any = result.completion_id
            if "completion" in expand or req.logprobs is not None:
                completion = {"id": result.completion_id, "object": "text_completion", "model": result.model,
                              "choices": [{"text": t, "index": i, "finish_reason": "stop",
                                           "logprobs": result.logprobs[i] if i < len(result.logprobs) else None}
                                          for i, t in enumerate(result.completions)]}
            out: dict[str, Any] = {
                "object": "answer", "model": result.model, "search_model": req.search_model,
                "completion": completion, "answers": result.answers,
                "selected_documents": [{k: v for k, v in s.items() if k in ("document", "text", "metadata")}
                                       for s in result.selected]}
            if req.return_prompt:
                out["prompt"] = result.prompt
            if file_id:
                out["file"] = file_json(f) if "file" in expand else file_id
            return JSONResponse(out)

        return await self._guard(request, "query", work)

    @staticmethod
    def _answers_request(body: Body) -> tuple[AnswersRequest, str | None, list[str]]:
        model = body.string("model", required=True)
        question = body.string("question", required=True)
        if len(question) > LIMITS.question_chars:
            raise InvalidArgument(f"'question' is {len(question)} characters; the limit is {LIMITS.question_chars}.",
                                  target="question")
        examples_raw = body.raw.get("examples")
        if not isinstance(examples_raw, list) or not 1 <= len(examples_raw) <= 200 or not all(
                isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) and x for x in e)
                for e in examples_raw):
            raise InvalidArgument("'examples' must be 1 to 200 [question, answer] pairs of non-empty strings.",
                                  target="examples")
        if not isinstance(body.raw.get("examples_context"), str):
            raise InvalidArgument("'examples_context' is a required property", target="examples_context")
        documents = body.strings("documents", max_items=200)
        file_id = body.string("file")
        if (documents is None) == (file_id is None):
            raise InvalidArgument("Please submit exactly one of `documents` or `file`.", target="documents")
        stop = body.raw.get("stop")
        if isinstance(stop, str):
            stop = [stop]
        if stop is not None and (not isinstance(stop, list) or not 1 <= len(stop) <= 4
                                 or not all(isinstance(s, str) for s in stop)):
            raise InvalidArgument("'stop' must be a string or 1 to 4 strings.", target="stop")
        bias = body.raw.get("logit_bias")
        if bias is not None and (not isinstance(bias, dict) or not all(
                numbers.count(k) is not None and isinstance(v, (int, float)) and -100 <= v <= 100
                for k, v in bias.items())):
            raise InvalidArgument("'logit_bias' maps token ids to numbers from -100 to 100.", target="logit_bias")
        if bias and (refusal := logit_bias_refusal(bias)) is not None:  # else dropped: it asks nothing a model reads
            raise InvalidArgument(refusal, target="logit_bias")
        expand = body.strings("expand", max_items=2) or []
        if set(expand) - {"completion", "file"}:
            raise InvalidArgument("'expand' may hold 'completion' and 'file'.", target="expand")
        req = AnswersRequest(
            model=model, question=question, examples=[(q, a) for q, a in examples_raw],
            examples_context=body.raw["examples_context"], documents=documents,
            search_model=body.string("search_model", default="ada") or "ada",
            max_rerank=body.integer("max_rerank", 200, 1), temperature=body.number("temperature", 0.0, 0.0, 2.0),
            logprobs=body.integer("logprobs", None, 0, 5), max_tokens=body.integer("max_tokens", 16, 1, 4096),
            stop=stop, n=body.integer("n", 1, 1, 10),
            return_metadata=body.boolean("return_metadata"), return_prompt=body.boolean("return_prompt"),
            user=body.string("user"), alternative_question=body.string("experimental_alternative_question"))
        return req, file_id, expand

    async def search(self, request: Request) -> Response:
        async def work() -> Response:
            body = Body(await read_json(request), SEARCH_FIELDS)
            model = request.path_params.get("engine") or body.string("model", default="ada")
            query = body.string("query", required=True)
            if len(query) > LIMITS.question_chars:  # as the Answers endpoint's question
                raise InvalidArgument(f"'query' is {len(query)} characters; the limit is {LIMITS.question_chars}.",
                                      target="query")
            documents = body.strings("documents", max_items=200, min_items=1)
            file_id = body.string("file")
            if (documents is None) == (file_id is None):
                raise InvalidArgument("Please submit exactly one of `documents` or `file`.", target="documents")
            max_rerank = body.integer("max_rerank", 200, 1)
            metadata = body.boolean("return_metadata")  # read (and so checked) whichever the source
            if documents is not None:
                scores = await run_in_threadpool(self.answering.search_scores, query, documents)
                data = [{"object": "search_result", "document": i, "score": s} for i, s in enumerate(scores)]
            else:
                f = await run_in_threadpool(openai_files.searchable, self.service, file_id, ("search", "answers"),
                                            visible_to(request.state.key))
                hits = await self._file_hits(f, query, max_rerank)
                data = sorted(({"object": "search_result", "document": h.record.fields["document"],
                                "score": round(300 * h.score, 3), "text": h.record.answer,
                                **({"metadata": h.record.fields.get("metadata")} if metadata else {})}
                               for h in hits), key=lambda d: d["document"])
            return JSONResponse({"object": "list", "model": model, "data": data})

        return await self._guard(request, "query", work)
