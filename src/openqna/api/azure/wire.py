"""Azure's wire conventions shared by the runtime and authoring routes.

Property names are read case-insensitively and numbers may arrive as strings, as
the service accepts (booleans may not); every refusal is Azure's error envelope with the field named
in ``target``.  Keys are checked here: a query key cannot author (403), and a key
scoped to other projects gets 404 so project names do not leak.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Callable

from starlette.requests import Request
from starlette.responses import Response

from openqna.api import json_body, numbers
from openqna.api.concurrency import run_store
from openqna.api.credentials import secret_from_headers
from openqna.api.errors import azure_error, unauthorized_message
from openqna.auth.keys import Authorizer, Caller, allows, lacks_role
from openqna.formats.limits import LANGUAGE_CODE, LIMITS
from openqna.records import InvalidArgument, OpenQnAError

# Every api-version whose specification has question answering (azure-rest-api-specs,
# specification/cognitiveservices/data-plane/Language): the two stable ones, then the previews.  SDK 1.1.0 sends
# 2021-10-01 by default, 2.0.0b1 and the authoring 1.0.0b1 package 2025-05-15-preview, Bot Framework 2021-10-01.
API_VERSIONS = ("2021-10-01", "2023-04-01", "2021-05-01-preview", "2021-07-15-preview", "2022-07-01-preview",
                "2022-10-01-preview", "2023-04-15-preview", "2023-11-15-preview", "2025-05-15-preview")
# A version of their form dated from the first one on is answered too (the specs have more previews, 2021-11-01-preview
# among them, and the next SDK's default must not break): what is refused is what no Azure client ever sends.
FIRST_API_VERSION = date(2021, 5, 1)
_VERSION_FORM = re.compile(r"(\d{4})-(\d{2})-(\d{2})(-preview)?", re.IGNORECASE)


def known_api_version(value: str) -> bool:
    """Whether ``value`` is one of ``API_VERSIONS`` or of their form, a real date from ``FIRST_API_VERSION`` to a year
    from today."""
    if value.lower() in API_VERSIONS:
        return True
    form = _VERSION_FORM.fullmatch(value)
    try:
        day = date(int(form[1]), int(form[2]), int(form[3])) if form else None
    except ValueError:  # 2024-13-01
        return False
    return day is not None and FIRST_API_VERSION <= day <= date.today() + timedelta(days=366)




class Body:
    """A JSON object read case-insensitively, with errors that name the field's path."""

    def __init__(self, raw: dict, path: str = ""):
        self.raw = {k.lower(): v for k, v in raw.items()} if isinstance(raw, dict) else {}
        self.path = path

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str) -> Any:
        return self.raw.get(key.lower())

    def string(self, key: str, *, max_len: int | None = None) -> str | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise InvalidArgument(f"'{self._name(key)}' must be a string.", target=self._name(key))
        if max_len is not None and len(value) > max_len:
            raise InvalidArgument(f"'{self._name(key)}' is {len(value)} characters long; the limit is {max_len}.",
                                  target=self._name(key))
        return value

    def language(self, key: str = "language") -> str | None:
        """A language code as Azure takes them (BCP 47: ``en``, ``de``, ``zh-Hans``, ``pt-BR``), or None; anything
        else (``klingon!!``, blank) is refused, where it was once stored as it came."""
        value = self.string(key, max_len=20)
        if value is not None and not LANGUAGE_CODE.fullmatch(value):
            raise InvalidArgument(f"'{self._name(key)}' must be a language code such as 'en', 'de' or 'zh-Hans'; got "
                                  f"'{value}'. Leave it out to keep the default.", target=self._name(key))
        return value

    def integer(self, key: str, *, lo: int | None = None, hi: int | None = None) -> int | None:
        value = self.get(key)
        if value is None:
            return None
        bounds = f"between {lo} and {hi}" if lo is not None and hi is not None else \
            f"at least {lo}" if lo is not None else f"at most {hi}"
        if isinstance(value, str):
            text, value = value.strip(), numbers.integer(value)
            if value is None and text.lstrip("+-").isascii() and text.lstrip("+-").isdigit():
                # digits past numbers.INTEGER's 18: an integer all the same, out of any range this API takes
                limit = bounds if lo is not None and hi is not None else "an integer of at most 18 digits"
                raise InvalidArgument(f"'{self._name(key)}' must be {limit}; got one of {len(text.lstrip('+-'))} "
                                      "digits.", target=self._name(key))
        if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
            raise InvalidArgument(f"'{self._name(key)}' must be an integer.", target=self._name(key))
        value = int(value)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise InvalidArgument(f"'{self._name(key)}' must be {bounds}; got {value}.", target=self._name(key))
        return value

    def number(self, key: str, *, lo: float = 0.0, hi: float = 1.0) -> float | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                value = None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgument(f"'{self._name(key)}' must be a number.", target=self._name(key))
        if not lo <= value <= hi:
            raise InvalidArgument(f"'{self._name(key)}' must be between {lo} and {hi}; got {value}.",
                                  target=self._name(key))
        return float(value)

    def boolean(self, key: str) -> bool | None:
        """A JSON true or false: the string "true" is refused, as the service refuses it (the SDKs and
        Bot Framework clients all send JSON booleans)."""
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise InvalidArgument(f"'{self._name(key)}' must be true or false.", target=self._name(key))
        return value

    def choice(self, key: str, options: tuple[str, ...]) -> str | None:
        value = self.string(key)
        if value is None:
            return None
        for option in options:
            if option.lower() == value.lower():
                return option
        raise InvalidArgument(f"'{self._name(key)}' must be one of {', '.join(options)}; got '{value}'.",
                              target=self._name(key))

    def obj(self, key: str) -> "Body | None":
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise InvalidArgument(f"'{self._name(key)}' must be an object.", target=self._name(key))
        return Body(value, self._name(key))

    def array(self, key: str) -> list | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise InvalidArgument(f"'{self._name(key)}' must be an array.", target=self._name(key))
        return value


class Refused(Exception):
    """Carries a ready error response out of a handler."""

    def __init__(self, response: Response):
        self.response = response


def authorize(authorizer: Authorizer, request: Request, *, role: str, project: str | None = None,
              api_version: bool = True) -> Caller | None:
    caller, denied = authorizer.check(secret_from_headers(request.headers))
    if denied:
        challenge = 'Bearer realm="openqna", error="invalid_token"' if denied.token \
            else 'AzureApiManagementKey realm="openqna"'
        raise Refused(azure_error(401, "401", unauthorized_message(denied), headers={"WWW-Authenticate": challenge}))
    if caller is not None and project is not None and not allows(caller, role="query", project=project):
        raise Refused(azure_error(404, "ProjectNotFound", f"The specified project was not found: {project}."))
    if not allows(caller, role=role, project=project):  # a token may grant author on one project, query on all
        assert caller is not None  # an open server (no caller) allows every role
        raise Refused(azure_error(403, "Forbidden", lacks_role(caller, role, project)))
    if api_version:
        check_api_version(request, required=True)
    return caller


def check_api_version(request: Request, *, required: bool) -> None:
    """Refuse an ``api-version`` the question answering API never had, and a missing one where it is ``required``.

    The codes and messages are the Azure REST API guidelines' (``MissingApiVersionParameter``,
    ``UnsupportedApiVersionValue``): the service's gateway answers an unknown version with a bare 404 "Resource not
    found", which names neither the parameter nor a version that works.  Versions compare case-insensitively.
    """
    value = request.query_params.get("api-version")
    if not value:
        if required:
            raise Refused(azure_error(400, "MissingApiVersionParameter", "The api-version query parameter "
                                      "(?api-version=) is required for all requests, e.g. api-version=2023-04-01.",
                                      target="api-version"))
        return
    if not known_api_version(value):
        raise Refused(azure_error(400, "UnsupportedApiVersionValue", f"Unsupported api-version '{value[:100]}'. The "
                                  f"supported api-versions are '{', '.join(API_VERSIONS)}'.", target="api-version"))


def authorized_project(authorizer: Authorizer, request: Request) -> str:
    """The ``{project}`` of an openqna route that needs the author role on it (no api-version), once authorized."""
    project: str = request.path_params["project"]
    authorize(authorizer, request, role="author", project=project, api_version=False)
    return project


async def _read_raw(request: Request) -> bytes:
    """The request's body, refused (413) past ``LIMITS.body_bytes``: declared so, or once read."""
    size = numbers.count(request.headers.get("content-length"))
    if size is not None and size > LIMITS.body_bytes:
        raise Refused(too_large())
    raw = await request.body()
    if len(raw) > LIMITS.body_bytes:
        raise Refused(too_large())
    return raw


def _multipart(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip().lower() == "multipart/form-data"


async def read_json(request: Request) -> Any:
    raw = await _read_raw(request)
    if _multipart(request):
        raise InvalidArgument(MULTIPART_REFUSED)
    try:
        return json_body.parse(raw or b"null")
    except json_body.BadBody as exc:
        raise InvalidArgument(f"The request body is not valid JSON: {exc}.") from None


# The first api-version whose spec has file uploads: the 2025-05-15-preview SDK's begin_import_from_files and
# begin_update_sources_from_files send multipart/form-data (parts "files", and "fileOperations" for sources)
FIRST_MULTIPART_VERSION = date(2025, 5, 15)
MULTIPART_REFUSED = (
    "openqna reads multipart/form-data file uploads on the Azure routes (the preview SDK's begin_import_from_files "
    "and begin_update_sources_from_files) with api-version=2025-05-15-preview or later, the versions that send "
    "them. With this api-version send JSON instead: :import takes "
    "{\"fileUri\": \"https://...\"} with format=json, tsv or excel, and PATCH .../sources takes "
    "[{\"op\": \"add\", \"value\": {\"sourceUri\": \"https://...\"}}]; or upload the file's bytes with "
    "POST /openqna/projects/{project}/files?name=FILE, which adds it to the project as `openqna import` does.")
MULTIPART_ELSEWHERE = (
    "multipart/form-data is read on :import and PATCH .../sources alone (the preview SDK's begin_import_from_files "
    "and begin_update_sources_from_files); this request takes a JSON body.")


def sends_files(api_version: str | None) -> bool:
    """Whether ``api_version`` is one whose spec sends files as multipart/form-data (2025-05-15-preview on)."""
    form = _VERSION_FORM.fullmatch(api_version or "")
    try:
        return form is not None and date(int(form[1]), int(form[2]), int(form[3])) >= FIRST_MULTIPART_VERSION
    except ValueError:
        return False


@dataclass
class FormBody:
    """A multipart/form-data body as read: its file parts (part name, filename, bytes) and its other fields (name,
    text), each in the order sent."""

    files: list[tuple[str, str, bytes]]
    fields: list[tuple[str, str]]


async def read_form(request: Request) -> FormBody:
    """A multipart/form-data body, within ``LIMITS.body_bytes`` as a JSON body is (a 413 past it); a body the
    multipart parser refuses is a 400 saying why."""
    await _read_raw(request)  # the parser then reads the body kept
    try:
        form = await request.form(max_part_size=LIMITS.body_bytes)
    except Exception as exc:  # malformed multipart from the client, whatever the parser says
        detail = getattr(exc, "detail", None) or getattr(exc, "message", None) or str(exc)
        raise InvalidArgument(f"The multipart/form-data body cannot be read: {detail}.") from None
    try:
        files, fields = [], []
        for name, value in form.multi_items():
            if isinstance(value, str):
                fields.append((name, value))
            else:
                files.append((name, value.filename or "", await value.read()))
        return FormBody(files, fields)
    finally:
        await form.close()


async def read_body(request: Request) -> Any:
    """``read_json``'s JSON, or the ``FormBody`` of a multipart/form-data body sent with an api-version that sends
    files (``sends_files``).  A form of no file is URL-encoded (the SDK's begin_update_sources_from_files of deletes
    alone, which sends ``fileOperations`` only), and is read as one too."""
    urlencoded = request.headers.get("content-type", "").split(";")[0].strip().lower() == \
        "application/x-www-form-urlencoded"
    if (_multipart(request) or urlencoded) and sends_files(request.query_params.get("api-version")):
        return await read_form(request)
    return await read_json(request)


def too_large() -> Response:
    return azure_error(413, "InvalidRequest", f"The request body is larger than {LIMITS.body_bytes} bytes.")


def error_response(exc: OpenQnAError) -> Response:
    if not isinstance(exc, InvalidArgument):
        return azure_error(exc.status, exc.code, exc.message, target=exc.target)
    return azure_error(exc.status, exc.code, exc.message, target=exc.target,
                       inner="InvalidParameterValue" if exc.target else "InvalidRequestBodyFormat")


def handle_errors(endpoint):
    """Turn refusals and caller errors raised in ``endpoint`` into Azure error responses."""

    @functools.wraps(endpoint)
    async def wrapper(*args, **kwargs) -> Response:
        try:
            return await endpoint(*args, **kwargs)
        except Refused as exc:
            return exc.response
        except OpenQnAError as exc:
            return error_response(exc)

    return wrapper


def handle_errors_off_loop(endpoint: Callable[[Any, Request], Response]):
    """``handle_errors`` for a handler that reads or writes the store: ``endpoint`` is a plain function, run on a
    worker thread once the request's body has been read on the event loop (``body_json`` hands it over).

    A store write waits for the database's lock (SQLite's writer lock, held by an ``openqna import`` in another
    process, up to its 30 s timeout), and every PostgreSQL read for the network; on the event loop either would
    stall every other request of the server, queries included.  The body is read first, but a refusal of it (too
    large, not JSON) is raised only where the handler asks for it, so a caller still learns of a missing key first.
    """

    @functools.wraps(endpoint)
    async def wrapper(self, request: Request) -> Response:
        try:
            request.state.body = (True, await read_body(request))
        except (Refused, OpenQnAError) as exc:
            request.state.body = (False, exc)
        try:
            return await run_store(endpoint, self, request)
        except Refused as exc:
            return exc.response
        except OpenQnAError as exc:
            return error_response(exc)

    return wrapper


def body_json(request: Request, *, files: bool = False) -> Any:
    """The JSON body that ``handle_errors_off_loop`` read (None when there was none), or its refusal raised; a
    ``FormBody`` only where the handler takes ``files``."""
    read, value = request.state.body
    if not read:
        raise value
    if isinstance(value, FormBody) and not files:
        raise InvalidArgument(MULTIPART_ELSEWHERE)
    return value
