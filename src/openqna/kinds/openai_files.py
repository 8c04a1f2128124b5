"""OpenAI's Files API for purposes ``answers`` and ``search``: validated JSONL, searchable lines.

Each line must be a JSON object with a non-empty ``text`` and an optional ``metadata``
(stored, never searched).  A bad line is refused by number and nothing is stored.  An
``answers`` file's texts are split on newlines, as OpenAI did, so each line of text is its own
document.  The documents become a hidden knowledge base (one passage each, with its
document index and metadata as fields), so file-mode Search and Answers use the same
retrieval as everything else.  ``assistants`` and ``user_data`` files are stored as given, for
vector stores to parse.  Purposes openqna serves nothing for (``fine-tune``, ``batch``, ``vision``)
are refused: storing them unchecked would accept anything and promise a use that never comes.

A file may expire (OpenAI's ``expires_after``: ``created_at`` plus 3600 to 2592000 seconds): from its
``expires_at`` on it is gone, as if deleted: every read here answers "not found" at once, and ``purge_expired``
deletes its data and knowledge base (the surfaces call it, and detach the file from vector stores as a delete does).

A file keeps the scope it was uploaded in (the projects of the uploader's key, ``auth.keys.scope_of``).  Which
callers may see it is the surface's to say: every read here takes a ``visible`` test, and a file it fails is
"not found", as if it did not exist, so ids of other projects' files do not leak.
"""

from __future__ import annotations

import json
import secrets
import string
import time
from collections.abc import Callable

from openqna import strict_json
from openqna.kb.service import Service
from openqna.records import InvalidArgument, NotFound, QnA
from openqna.store import StoredFile

SEARCHABLE = ("answers", "search")
PURPOSES = ("answers", "search", "assistants", "user_data")
MAX_FILE_BYTES = 50 * 1024 * 1024
MAX_DOCUMENTS = 100_000
EXPIRY_SECONDS = (3600, 2_592_000)  # OpenAI's range for expires_after.seconds: one hour to 30 days

Visible = Callable[[StoredFile], bool]
"""Whether the caller at hand may see a file (the surface builds it from the caller's key)."""


_ID_CHARS = string.digits + string.ascii_uppercase + string.ascii_lowercase  # in byte order: ids sort as strings
_STAMP = 10  # an id's first characters: the microsecond it was made at, in base 62


def new_file_id(now_ns: int) -> str:
    """OpenAI's shape ("file-" and 24 letters and digits) whose first ten are the time it was made, to the
    microsecond: files listed newest first come in upload order within a second too (by id; ``created_at`` is whole
    seconds), and a cursor naming a file deleted since still says where in the list it stood (``cursor_key``)."""
    t, stamp = now_ns // 1000, ""
    for _ in range(_STAMP):
        t, digit = divmod(t, 62)
        stamp = _ID_CHARS[digit] + stamp
    return "file-" + stamp + "".join(secrets.choice(_ID_CHARS) for _ in range(24 - _STAMP))


def cursor_key(file_id: str) -> tuple[int, str] | None:
    """Where file ``file_id`` stands in a list ordered by ``(created_at, id)``, read from the id alone (a file of
    ``new_file_id``'s, of 2020-2100), else None (an id of an older version's, random)."""
    body = file_id[len("file-"):] if file_id.startswith("file-") else ""
    if len(body) != 24 or any(c not in _ID_CHARS for c in body):
        return None
    t = 0
    for c in body[:_STAMP]:
        t = t * 62 + _ID_CHARS.index(c)
    seconds = t // 1_000_000
    return (seconds, file_id) if 1_577_836_800 <= seconds < 4_102_444_800 else None

def anyone(_: StoredFile) -> bool:
    """Every file is visible: callers inside the server (a vector store's job) and an open server."""
    return True


def parse_jsonl(filename: str, data: bytes, purpose: str) -> list[tuple[int, str, object]]:
    """(document index, text, metadata) for every document of a search/answers file."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InvalidArgument(f"{filename}, line {line}: not valid UTF-8.", target="file") from None
    documents: list[tuple[int, str, object]] = []
    # Lines end at "\n" only (JSON Lines): str.splitlines would also cut at U+2028, U+2029 and U+0085, which JSON
    # allows raw inside a string (json.dumps(ensure_ascii=False) and JavaScript write them so).
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = strict_json.loads(line, unique_keys=True)
        except ValueError as exc:
            raise InvalidArgument(f"{filename}, line {number}: not valid JSON ({exc.msg}).", target="file") from None
        if not isinstance(row, dict):
            raise InvalidArgument(f"{filename}, line {number}: expected a JSON object with \"text\".", target="file")
        try:  # json.loads takes NaN and Infinity (json.dumps writes them); no JSON answer could carry them back
            json.dumps(row.get("metadata"), allow_nan=False)
        except ValueError:
            raise InvalidArgument(f"{filename}, line {number}: not valid JSON (\"metadata\" holds NaN or Infinity, "
                                  "which JSON has no numbers for; write null or a string).", target="file") from None
        extra = set(row) - {"text", "metadata"}
        if extra:
            raise InvalidArgument(f"{filename}, line {number}: unexpected field(s) {', '.join(sorted(extra))}; a line "
                                  "has \"text\" and an optional \"metadata\".", target="file")
        value = row.get("text")
        if not isinstance(value, str) or not value.strip():
            raise InvalidArgument(f"{filename}, line {number}: \"text\" must be a non-empty string.", target="file")
        pieces = [p for p in value.split("\n") if p.strip()] if purpose == "answers" else [value]
        for piece in pieces:
            documents.append((len(documents), piece, row.get("metadata")))
    if not documents:
        raise InvalidArgument(f"{filename}: the file has no documents.", target="file")
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidArgument(f"{filename}: {len(documents)} documents; the limit is {MAX_DOCUMENTS}.", target="file")
    return documents


def upload(service: Service, filename: str, data: bytes, purpose: str, scope: list[str] | None = None,
           expires_after: int | None = None) -> StoredFile:
    """Store a file under ``scope`` (None: every project's); a search/answers file becomes its own knowledge base.

    ``expires_after``: seconds after its creation when the file expires (None: never), within ``EXPIRY_SECONDS``.
    """
    lo, hi = EXPIRY_SECONDS
    if expires_after is not None and not lo <= expires_after <= hi:
        raise InvalidArgument(f"'expires_after[seconds]' must be between {lo} (1 hour) and {hi} (30 days); got "
                              f"{expires_after}.", target="expires_after.seconds")
    if purpose not in PURPOSES:
        raise InvalidArgument(f"'{purpose}' is not a purpose this server serves; use one of {', '.join(PURPOSES)} "
                              "(answers and search for /v1/answers and /v1/search, assistants or user_data for "
                              "vector stores).",
                              target="purpose")
    if len(data) > MAX_FILE_BYTES:
        raise InvalidArgument(f"The file is {len(data)} bytes; the limit is {MAX_FILE_BYTES}.", target="file")
    now_ns = time.time_ns()
    file_id, now = new_file_id(now_ns), now_ns // 1_000_000_000
    stored = StoredFile(file_id, filename, purpose, len(data), now, "processed", data, scope=scope,
                        expires_at=None if expires_after is None else now + expires_after)
    if purpose in SEARCHABLE:
        documents = parse_jsonl(filename, data, purpose)
        project = service.create_project(file_id, description=f"{purpose} file {filename}")
        project.settings["openai_file"] = file_id
        service.store.update_project(project)
        try:
            service.upsert(file_id, [QnA([text[:1000]], text, source=filename, kind="passage",
                                         fields={"document": i, "metadata": metadata})
                                     for i, text, metadata in documents])
        except Exception:
            service.delete_project(file_id)
            raise
        stored.project = file_id
    service.store.put_file(stored)
    return stored


def list_files(service: Service, purpose: str | None = None, visible: Visible = anyone) -> list[StoredFile]:
    """Every visible uploaded file (of ``purpose`` when given), newest first."""
    now = time.time()
    return [f for f in service.store.list_files(purpose) if visible(f) and not expired(f, now)]


def get(service: Service, file_id: str, *, with_data: bool = False, visible: Visible = anyone,
        target: str | None = None) -> StoredFile:
    """The file, or ``NotFound`` (naming the request's field ``target``) when there is none the caller may see."""
    f = service.store.get_file(file_id, with_data=with_data)
    if f is None or not visible(f) or expired(f):
        raise NotFound(f"No such File object: {file_id}", target=target)
    return f


def expired(f: StoredFile, now: float | None = None) -> bool:
    return f.expires_at is not None and (time.time() if now is None else now) >= f.expires_at


def purge_expired(service: Service) -> list[str]:
    """Delete every expired file (its data and knowledge base); the ids deleted, for the caller to detach."""
    now = time.time()
    gone = [f for f in service.store.list_files() if expired(f, now)]
    for f in gone:
        _remove(service, f)
    return [f.id for f in gone]


def delete(service: Service, file_id: str, visible: Visible = anyone) -> None:
    _remove(service, get(service, file_id, visible=visible))


def _remove(service: Service, f: StoredFile) -> None:
    if f.project:
        try:
            service.delete_project(f.project)
        except NotFound:
            pass
    service.store.delete_file(f.id)


def searchable(service: Service, file_id: str, purposes: tuple[str, ...], visible: Visible = anyone) -> StoredFile:
    """The file named in a request's ``file`` field, if it was uploaded for one of ``purposes``."""
    f = get(service, file_id, visible=visible, target="file")
    if f.purpose not in purposes or not f.project:
        raise InvalidArgument(f"File {file_id} has purpose '{f.purpose}'; this endpoint needs a file uploaded with "
                              f"purpose {' or '.join(repr(p) for p in purposes)}.", target="file")
    return f
