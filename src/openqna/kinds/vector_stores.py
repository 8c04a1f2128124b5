"""OpenAI vector stores as knowledge bases: the core (``api/openai/vector_stores_api.py`` is the wire).

A vector store is an openqna project named by its id (``vs_…``) whose
``settings["openai_vector_store"]`` holds what OpenAI reports about it: name, metadata, expiry,
timestamps and the file batches.  Each attached file's status, attributes, chunking, usage and last
error are a row of their own (``Store.get_attached_file``), kept once the file is detached (marked so) for the
place it stood in the list, which a list's cursor naming it still pages from.  Its records are passages (kind ``passage``, ``source`` = the file id):

* Chunks are cut by ``ingest.chunk_document`` with the file's ``max_chunk_size_tokens`` and
  ``chunk_overlap_tokens``, counted with the GPT-2 BPE of ``models.gpt2`` (r50k_base) standing in
  for OpenAI's tokenizer.  A chunk follows its section and never spans two, so a short section is
  a short chunk where OpenAI would cut flat windows.
* Each chunk becomes one passage record (``vector_store_records.chunk_record``: windows the embedder
  reads whole as its questions, attributes as typed columns).  OpenAI filters become the typed
  filter IR over those columns, so a comparison only meets values of its own type:
  ``{"type": "gt", "key": "year", "value": 2020}`` never compares a number with a string, and, as
  in SQL, a file without the attribute (or with another type) matches no comparison, ``ne`` and
  ``nin`` included.
* Search is ``Service.rank_queries``, the pipeline behind every search, with the passage
  calibrations of ``ranking/calibrations.py``.

Files are processed in the background as persisted jobs, claimed by one worker of any server
process (``kb/jobs.py``), on a lane of their own: a large file holds up no import or deploy.  A file's status is truthful: ``in_progress`` until its records are written, and a file
whose job ended without finishing it (a crash, a restart) reads as ``failed``.  Only completed
files are searched.  Cancelling a batch cancels its files that are not finished; one being
processed at that moment is discarded when it finishes.

A vector store keeps the scope it was created in (``scope``: the projects of the creator's key, None for every
project); the surface decides from it who reaches the store.  Files are attached only when the caller may see them
(``visible``, as in ``openai_files``): attaching shares a file's text with everyone who reaches the store, which is
the author's to decide only for files it can read itself.

The store's state lives in its project's settings and each file's in its own row: a file's
change reads and writes that file alone, so attaching the 1,000th file costs what the first did
(in the settings, every change parsed and rewrote every file's state).  Each change is a
compare-and-set, of the settings (``VectorStores._update``) or of the file's row
(``VectorStores._update_file``), so a job worker and requests in other processes never overwrite
each other's changes.

Why this file is over 500 lines: every operation reads and writes that state through the same
compare-and-sets, so the operations stay together; processing a file (the job) is the next cut.
"""

from __future__ import annotations

import logging
import marshal
import secrets
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, TypeVar

from openqna.filters.match import Filter, SourceIn, all_of
from openqna.ingest import DocumentError, chunk_document, parse_document
from openqna.kb.attribute_columns import attribute_fields, without_attribute_columns
from openqna.kb.jobs import JobRunner
from openqna.kb.service import Service
from openqna.kb.side_writes import SideWrites
from openqna.kinds import openai_files
from openqna.kinds.vector_store_records import chunk_record
from openqna.models import gpt2
from openqna.ranking.calibrations import passage_calibration
from openqna.records import Conflict, InvalidArgument, NotFound, QnA
from openqna.store import Job, Project
from openqna.store.base import AttachedFile

log = logging.getLogger("openqna.kinds.vector_stores")

SETTINGS_KEY = "openai_vector_store"
JOB_KIND = "openai_vector_store_files"
ACTIVE_EVERY = 3600  # last_active_at moves at most hourly: each move rewrites the settings
DAY = 86400


@dataclass(frozen=True)
class Chunking:
    max_tokens: int = 800
    overlap_tokens: int = 400


@dataclass
class FileCounts:
    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    total: int = 0


@dataclass
class VectorStore:
    id: str
    name: str
    created_at: int
    last_active_at: int
    metadata: dict[str, str]
    expires_after: dict | None
    expires_at: int | None
    status: str  # in_progress | completed | expired
    usage_bytes: int
    file_counts: FileCounts
    seq: int  # the list's order (creation, in ns), as ``(seq, id)``


@dataclass
class VectorStoreFile:
    id: str
    vector_store_id: str
    filename: str
    created_at: int
    status: str  # in_progress | completed | failed | cancelled
    last_error: dict | None
    usage_bytes: int
    chunking: Chunking
    attributes: dict | None
    seq: int  # the list's order (attachment, in ns), as ``(seq, id)``


@dataclass
class FileBatch:
    id: str
    vector_store_id: str
    created_at: int
    status: str  # in_progress | completed | failed | cancelled
    file_counts: FileCounts


@dataclass
class Attach:
    """One file to attach, with its attributes (validated) and chunking."""

    file_id: str
    attributes: dict | None = None
    chunking: Chunking = Chunking()


@dataclass
class SearchResult:
    file_id: str
    filename: str
    score: float
    attributes: dict | None
    text: str


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


_STORE_ID = len("vs_") + 32
_SEQS = (1_577_836_800 * 10**9, 4_102_444_800 * 10**9)  # 2020-2100, in ns


def new_store_id(seq: int) -> str:
    """``vs_`` and 32 hex digits (as OpenAI's newer ids), the first 16 the store's ``seq``: a cursor naming a store
    deleted since still says where in the list it stood (``store_place``)."""
    return f"vs_{seq:016x}{secrets.token_hex(8)}"


def store_place(store_id: str) -> tuple[int, str] | None:
    """Where store ``store_id`` stands (or stood) in a list ordered by ``(seq, id)``, read from the id alone; None
    for an id of ``new_store_id``'s shape from no time a store was made, or of the older, random kind (24 digits)."""
    digits = store_id[3:19]
    if len(store_id) != _STORE_ID or not store_id.startswith("vs_") or any(c not in "0123456789abcdef"
                                                                             for c in store_id[3:]):
        return None
    seq = int(digits, 16)
    return (seq, store_id) if _SEQS[0] <= seq < _SEQS[1] else None


_DETACHED = "detached"
"""A detached file's row keeps its ``seq`` as ``{"id": ..., "detached": True}``: a cursor naming it still says where in
the list it stood (``file_place``); every other read takes the row for a file the store lacks."""


def _attached(row: AttachedFile | None) -> AttachedFile | None:
    return None if row is None or row.state.get(_DETACHED) else row


T = TypeVar("T")
_CAS_ATTEMPTS = 100  # compare-and-set rounds before a state update gives up (each loses only to a write that landed)


class VectorStores:
    """Vector stores over ``service``; registers its job handler with ``jobs``."""

    def __init__(self, service: Service, jobs: JobRunner):
        self.service = service
        self.store = service.store
        self.jobs = jobs
        jobs.handlers[JOB_KIND] = self._run
        # Settings are read-modified-written by request threads and the job worker.
        self._lock = threading.RLock()
        self._touches = SideWrites("vector store search(es) not recorded as the store's last use")

    # -- state --------------------------------------------------------------------------------------
    def _project(self, store_id: str) -> tuple[Project, dict]:
        try:
            project = self.store.get_project(store_id)
        except NotFound:
            project = None
        if project is None or SETTINGS_KEY not in project.settings:
            raise NotFound(f"No vector store found with id '{store_id}'.")
        return project, project.settings[SETTINGS_KEY]

    def _update(self, store_id: str, change: Callable[[dict], T], seen: tuple[Project, dict] | None = None) -> T:
        """Apply ``change`` to the vector store's state and save it, atomically across processes.

        Another process (a job worker, a second server) may save the state between this read and
        this write: the store's compare-and-set then refuses it, and ``change`` runs again on the
        state that process saved, so no update is lost.  Work ``change`` does in the store itself
        must be idempotent.  Nothing is written when ``change`` leaves the state as it was.
        ``seen``: the store as the caller has just read it (``_project``), tried first.
        """
        for _ in range(_CAS_ATTEMPTS):
            project, vs = seen or self._project(store_id)
            seen = None
            # the copy to compare with, made by marshal (the settings are JSON values, which it copies exactly): a
            # fifth of copy.deepcopy's time
            before = marshal.loads(marshal.dumps(project.settings))
            result = change(vs)
            if project.settings == before or self.store.update_settings(store_id, before, project.settings):
                return result
        raise Conflict(f"Vector store '{store_id}' is being changed by many requests at once; try again.")

    def _missing(self, store_id: str, file_id: str) -> NotFound:
        """What a caller is told of a file the store lacks (or of the store, when that is what is missing)."""
        self._project(store_id)
        return NotFound(f"No file found with id '{file_id}' in vector store '{store_id}'.")

    def _file(self, store_id: str, file_id: str) -> dict:
        """The file's state (``NotFound`` naming the store or the file when either is missing)."""
        try:
            row = _attached(self.store.get_attached_file(store_id, file_id))
        except NotFound:  # the project is gone: the store says so
            row = None
        if row is None:
            raise self._missing(store_id, file_id)
        return row.state

    def _files(self, store_id: str, file_ids: list[str] | None = None) -> list[dict]:
        """The states of the store's files (or of those of ``file_ids`` it has), oldest first."""
        return [f.state for f in self.store.list_attached_files(store_id, file_ids) if _attached(f)]

    def _update_file(self, store_id: str, file_id: str, change: Callable[[dict | None], dict | None]) -> dict | None:
        """Apply ``change`` to the file's state and save what it returns (None: the file leaves the store), atomically
        across processes, as ``_update`` does for the store's state: a compare-and-set of the file's row, so that only
        this file is read and written.  ``change`` gets None when the file is not in the store (it may raise; its
        work in the store, which must be idempotent, is done and nothing is written).  A file that leaves keeps its
        row, marked detached (``_DETACHED``)."""
        for _ in range(_CAS_ATTEMPTS):
            try:
                row = _attached(self.store.get_attached_file(store_id, file_id))
            except NotFound:  # the project is gone: ``change`` says what that means
                row = None
            if row is None:
                change(None)
                return None
            # the copy ``change`` edits, made by marshal (the state is JSON values, which it copies exactly)
            after = change(marshal.loads(marshal.dumps(row.state)))
            kept = {"id": file_id, _DETACHED: True} if after is None else after
            if after == row.state or self.store.swap_attached_file(store_id, file_id, row.state, kept):
                return after
        raise Conflict(f"File '{file_id}' of vector store '{store_id}' is being changed by many requests at once; "
                       "try again.")

    def _job_finished(self, job_id: str | None, cache: dict[str, bool]) -> bool:
        if job_id is None:
            return False
        if job_id not in cache:
            job = self.store.get_job(job_id)
            cache[job_id] = job is None or job.status in ("succeeded", "failed")
        return cache[job_id]

    def _file_view(self, store_id: str, state: dict, cache: dict[str, bool]) -> VectorStoreFile:
        status, error = state["status"], state.get("last_error")
        if status == "in_progress" and self._job_finished(state.get("job"), cache):
            status, error = "failed", {"code": "server_error",
                                       "message": "Processing stopped before this file was indexed (the server "
                                                  "restarted or failed); attach the file again."}
        return VectorStoreFile(state["id"], store_id, state["filename"], state["created_at"], status, error,
                               state.get("usage_bytes", 0), Chunking(*state["chunking"]), state.get("attributes"),
                               state.get("seq", 0))

    def _counts(self, store_id: str, states: list[dict], cache: dict[str, bool]) -> FileCounts:
        counts = FileCounts(total=len(states))
        for state in states:
            status = self._file_view(store_id, state, cache).status
            setattr(counts, status, getattr(counts, status) + 1)
        return counts

    @staticmethod
    def _expires_at(vs: dict) -> int | None:
        return vs["last_active_at"] + vs["expires_after"]["days"] * DAY if vs.get("expires_after") else None

    def _refuse_expired(self, vs: dict) -> None:
        """An expired store is used again only once its expiry is changed: a search or an attach must not revive it
        (an attach moves ``last_active_at``, which made the store ``completed`` again)."""
        expires_at = self._expires_at(vs)
        if expires_at is not None and time.time() >= expires_at:
            raise InvalidArgument(f"Vector store '{vs['id']}' expired; set a new 'expires_after' to use it again.")

    def _view(self, vs: dict, files: list[dict]) -> VectorStore:
        cache: dict[str, bool] = {}
        counts = self._counts(vs["id"], files, cache)
        expires_at = self._expires_at(vs)
        status = ("expired" if expires_at is not None and time.time() >= expires_at
                  else "in_progress" if counts.in_progress else "completed")
        return VectorStore(vs["id"], vs["name"], vs["created_at"], vs["last_active_at"], vs["metadata"],
                           vs.get("expires_after"), expires_at, status,
                           sum(f.get("usage_bytes", 0) for f in files), counts, vs["seq"])

    # -- stores --------------------------------------------------------------------------------------
    def create(self, *, name: str = "", description: str = "", metadata: dict[str, str] | None = None,
               expires_after: dict | None = None, files: list[Attach] = (), scope: list[str] | None = None,
               visible: openai_files.Visible = openai_files.anyone) -> VectorStore:
        for f in files:  # refuse unknown files before creating anything
            openai_files.get(self.service, f.file_id, visible=visible, target="file_ids")
        seq = time.time_ns()
        store_id, now = new_store_id(seq), seq // 10**9
        with self._lock:
            state = {"id": store_id, "name": name, "metadata": metadata or {}, "expires_after": expires_after,
                     "created_at": now, "seq": seq, "last_active_at": now, "batches": {},
                     "scope": scope}
            self.store.create_project(Project(store_id, description, settings={SETTINGS_KEY: state},
                                              embedder=self.service.embedder.name))
            if files:
                self._attach(store_id, list(files))
        return self.get(store_id)

    def get(self, store_id: str) -> VectorStore:
        return self._view(self._project(store_id)[1], self._files(store_id))

    def scope(self, store_id: str) -> list[str] | None:
        """The projects the store was created in (None: every project's, as were stores made before scopes)."""
        return self._project(store_id)[1].get("scope")

    def list_stores(self, allowed: Callable[[str, list[str] | None], bool] = lambda store_id, scope: True
                    ) -> list[VectorStore]:
        """Every vector store ``allowed`` lets through (given its id and scope), oldest first."""
        found = [vs for p in self.store.list_projects()
                 if (vs := p.settings.get(SETTINGS_KEY)) is not None and allowed(p.name, vs.get("scope"))]
        return [self._view(vs, self._files(vs["id"])) for vs in sorted(found, key=lambda vs: (vs["seq"], vs["id"]))]

    def modify(self, store_id: str, *, name: str | None = None, metadata: dict | None = None,
               expires_after: dict | None = None, clear_expiry: bool = False) -> VectorStore:
        def change(vs: dict) -> dict:
            if name is not None:
                vs["name"] = name
            if metadata is not None:
                vs["metadata"] = metadata
            if expires_after is not None or clear_expiry:
                vs["expires_after"] = expires_after
            vs["last_active_at"] = int(time.time())
            return vs

        with self._lock:
            return self._view(self._update(store_id, change), self._files(store_id))

    def delete(self, store_id: str) -> None:
        with self._lock:
            self._project(store_id)
            self.service.delete_project(store_id)

    # -- files ------------------------------------------------------------------------------------------
    def attach(self, store_id: str, item: Attach,
               visible: openai_files.Visible = openai_files.anyone) -> VectorStoreFile:
        openai_files.get(self.service, item.file_id, visible=visible, target="file_id")
        with self._lock:
            self._attach(store_id, [item])
        return self.get_file(store_id, item.file_id)

    def _attach(self, store_id: str, items: list[Attach], batch_id: str | None = None) -> None:
        """Mark ``items`` in progress and queue them as one job (callers hold the lock)."""
        now = int(time.time())
        job_id = str(uuid.uuid4())
        names = {item.file_id: openai_files.get(self.service, item.file_id).filename for item in items}
        queued = [[item.file_id, secrets.token_hex(4)] for item in items]
        seen = self._project(store_id)
        self._refuse_expired(seen[1])
        # Saved before the job is queued: a worker in another process may claim it at once, and must find
        # the files it is to process.  (A reader between the two writes sees the job missing: failed.)
        files = []
        for item, (_, attempt) in zip(items, queued):
            seq = time.time_ns()
            files.append(AttachedFile(item.file_id, seq, {
                "id": item.file_id, "filename": names[item.file_id], "created_at": now, "seq": seq,
                "status": "in_progress", "last_error": None, "attributes": item.attributes,
                "chunking": [item.chunking.max_tokens, item.chunking.overlap_tokens], "usage_bytes": 0,
                "attempt": attempt, "job": job_id, "batch": batch_id}))
        self.store.put_attached_files(store_id, files)

        def change(vs: dict) -> None:
            if batch_id is not None:  # after its files: a batch is never read without them
                vs["batches"][batch_id] = {"id": batch_id, "created_at": now, "seq": time.time_ns(),
                                           "files": [i.file_id for i in items], "cancelled": False}
            vs["last_active_at"] = now  # unchanged within the second: nothing written

        self._update(store_id, change, seen)
        self.jobs.submit(JOB_KIND, store_id, {"files": queued}, job_id=job_id)

    def get_file(self, store_id: str, file_id: str) -> VectorStoreFile:
        return self._file_view(store_id, self._file(store_id, file_id), {})

    def list_files(self, store_id: str, batch_id: str | None = None) -> list[VectorStoreFile]:
        """The store's files (or one batch's), oldest first."""
        _, vs = self._project(store_id)
        members = None if batch_id is None else self._batch_state(vs, batch_id)["files"]
        cache: dict[str, bool] = {}
        return [self._file_view(store_id, s, cache) for s in self._files(store_id, members)]

    def file_place(self, store_id: str, file_id: str, batch_id: str | None = None) -> tuple[int, str] | None:
        """Where file ``file_id`` stands, or stood before it was detached, in ``list_files``' order (by ``(seq, id)``):
        a cursor naming it pages on from there.  None: it never was in the store (or the batch)."""
        if batch_id is not None and file_id not in self._batch_state(self._project(store_id)[1], batch_id)["files"]:
            return None
        row = self.store.get_attached_file(store_id, file_id)
        return None if row is None else (row.seq, file_id)

    def update_attributes(self, store_id: str, file_id: str, attributes: dict | None) -> VectorStoreFile:
        def change(state: dict | None) -> dict:
            if state is None:
                raise self._missing(store_id, file_id)
            state["attributes"] = attributes
            return state

        with self._lock:
            state = self._update_file(store_id, file_id, change)
            assert state is not None  # ``change`` raised for a missing file
            if state["status"] != "in_progress":  # an in-progress file gets them when the worker commits it
                self._rewrite_attributes(store_id, file_id, attributes)
            return self._file_view(store_id, state, {})

    def detach(self, store_id: str, file_id: str) -> None:
        def change(state: dict | None) -> None:
            if state is None:
                raise self._missing(store_id, file_id)

        with self._lock:
            self._update_file(store_id, file_id, change)
            self._delete_records(store_id, file_id)

    def expire_files(self) -> None:
        """Delete the uploaded files that expired (``openai_files.purge_expired``) and detach them everywhere."""
        for file_id in openai_files.purge_expired(self.service):
            self.detach_everywhere(file_id)

    def detach_everywhere(self, file_id: str) -> None:
        """A deleted file leaves every vector store it was in, as OpenAI's Files API does."""
        for project in self.store.list_projects():
            if SETTINGS_KEY in project.settings and _attached(self.store.get_attached_file(project.name, file_id)):
                self.detach(project.name, file_id)

    def content(self, store_id: str, file_id: str) -> list[str]:
        """The texts of the file's chunks, in order (neighbours share their overlap)."""
        view = self.get_file(store_id, file_id)
        if view.status != "completed":
            raise InvalidArgument(f"File '{file_id}' is {view.status}; only a completed file has content.",
                                  target="file_id")
        records = sorted(self._records(store_id, file_id), key=lambda q: q.fields.get("chunk_index", 0))
        return [q.answer for q in records]

    def _records(self, store_id: str, file_id: str) -> list[QnA]:
        """The file's chunk records: read by their source, not by reading every record of the store."""
        return self.store.source_records(store_id, file_id)

    def _delete_records(self, store_id: str, file_id: str, keep: set[int] = frozenset()) -> None:
        stale = [q.id for q in self._records(store_id, file_id) if q.id not in keep]
        if stale:
            self.store.delete_qnas(store_id, stale)

    def _rewrite_attributes(self, store_id: str, file_id: str, attributes: dict | None) -> None:
        """New attributes on existing records; unchanged texts keep their vectors."""
        records = self._records(store_id, file_id)
        for q in records:
            q.fields = without_attribute_columns(q.fields)
            q.fields.update(attributes=attributes, **attribute_fields(attributes))
        if records:
            self.service.upsert(store_id, records, match_content=False)  # they have their ids: nothing to match

    # -- batches ----------------------------------------------------------------------------------------
    def create_batch(self, store_id: str, items: list[Attach],
                     visible: openai_files.Visible = openai_files.anyone) -> FileBatch:
        for item in items:
            openai_files.get(self.service, item.file_id, visible=visible, target="file_ids")
        batch_id = new_id("vsfb_")
        with self._lock:
            self._attach(store_id, items, batch_id)
        return self.get_batch(store_id, batch_id)

    def _batch_state(self, vs: dict, batch_id: str) -> dict:
        batch = vs["batches"].get(batch_id)
        if batch is None:
            raise NotFound(f"No file batch found with id '{batch_id}' in vector store '{vs['id']}'.")
        return batch

    def get_batch(self, store_id: str, batch_id: str) -> FileBatch:
        _, vs = self._project(store_id)
        batch = self._batch_state(vs, batch_id)
        counts = self._counts(store_id, self._files(store_id, batch["files"]), {})
        if counts.in_progress:
            status = "in_progress"
        elif batch["cancelled"]:
            status = "cancelled"
        elif counts.total and counts.failed == counts.total:
            status = "failed"
        else:
            status = "completed"
        return FileBatch(batch_id, store_id, batch["created_at"], status, counts)

    def cancel_batch(self, store_id: str, batch_id: str) -> FileBatch:
        def change(vs: dict) -> list[str]:
            batch = self._batch_state(vs, batch_id)
            if self.get_batch(store_id, batch_id).status != "in_progress":
                raise InvalidArgument(f"Batch '{batch_id}' is no longer in progress and cannot be cancelled.",
                                      target="batch_id")
            batch["cancelled"] = True
            return list(batch["files"])

        def cancel(state: dict | None) -> dict | None:
            if state is not None and state["status"] == "in_progress" and state["batch"] == batch_id:
                state["status"] = "cancelled"
            return state

        with self._lock:
            for file_id in self._update(store_id, change):  # the batch first: it reads in progress until its files
                self._update_file(store_id, file_id, cancel)  # are cancelled, then cancelled
        return self.get_batch(store_id, batch_id)

    # -- processing (the job worker) -------------------------------------------------------------------
    def _run(self, job: Job) -> None:
        for file_id, attempt in job.params["files"]:
            try:
                self._process(job.project, file_id, attempt)
            except NotFound:  # the store was deleted meanwhile
                return

    def _current(self, store_id: str, file_id: str, attempt: str) -> dict | None:
        """The file's state if ``attempt`` is still the one to process (``NotFound`` when the store is gone)."""
        row = _attached(self.store.get_attached_file(store_id, file_id))
        return row.state if row is not None and row.state["attempt"] == attempt else None

    def _with_earlier_ids(self, store_id: str, file_id: str, records: list[QnA]) -> list[QnA]:
        """``records`` (the file's chunks), each given the id of a record the file has already with the same text, so
        that attaching a file again re-embeds only the chunks that changed.  Matched among the file's own records
        only: matching the whole store by content (``upsert``'s import mode) read every record for every file, which
        made indexing a store of n files take n² record reads."""
        earlier: dict[tuple[str, tuple[str, ...]], list[int]] = {}
        for q in self._records(store_id, file_id):
            if q.id is not None:
                earlier.setdefault((q.answer, tuple(q.questions)), []).append(q.id)
        for q in records:
            same = earlier.get((q.answer, tuple(q.questions)))
            if same:
                q.id = same.pop(0)
        return records

    def _process(self, store_id: str, file_id: str, attempt: str) -> None:
        with self._lock:
            state = self._current(store_id, file_id, attempt)
            if state is None or state["status"] != "in_progress":
                return  # detached, attached again, or cancelled before its turn
            chunking, attributes = Chunking(*state["chunking"]), state["attributes"]
        error, kept, usage = None, set(), 0
        try:
            stored = openai_files.get(self.service, file_id, with_data=True)
            doc = parse_document(stored.filename, stored.data)
            chunks = chunk_document(doc, max_tokens=chunking.max_tokens, overlap_tokens=chunking.overlap_tokens,
                                    count_tokens=gpt2.count_tokens)
            records = self._with_earlier_ids(store_id, file_id,
                                             [chunk_record(file_id, stored.filename, c, attributes) for c in chunks])
            kept = set(self.service.upsert(store_id, records, match_content=False).ids)
            units = sum(len(q.questions) + 1 for q in records)
            usage = sum(len(q.answer.encode()) for q in records) + units * self.service.embedder.dim * 4
        except DocumentError as exc:
            error = {"code": "unsupported_file" if exc.unsupported else "invalid_file", "message": exc.message}
        except NotFound as exc:
            self._project(store_id)  # the store itself is gone: NotFound ends the job quietly
            error = {"code": "invalid_file", "message": exc.message}
        except Exception as exc:  # a bug must still end in a truthful status
            log.exception("vector store %s: processing %s failed", store_id, file_id)
            error = {"code": "server_error", "message": f"Processing failed unexpectedly ({type(exc).__name__})."}
        def change(state: dict | None) -> dict | None:  # what it does to the records is idempotent: it may run again
            if state is None:  # detached while processing (or the store deleted: then this raises NotFound)
                self._delete_records(store_id, file_id)
                return None
            if state["attempt"] != attempt:
                return state  # attached again: the newer attempt replaces the records
            if state["status"] != "in_progress" or error is not None:  # cancelled meanwhile, or failed
                self._delete_records(store_id, file_id)
                if error is not None and state["status"] == "in_progress":
                    state.update(status="failed", last_error=error)
            else:
                self._delete_records(store_id, file_id, keep=kept)  # chunks of an earlier attachment
                if state["attributes"] != attributes:
                    self._rewrite_attributes(store_id, file_id, state["attributes"])
                state.update(status="completed", usage_bytes=usage)
            return state

        with self._lock:
            self._update_file(store_id, file_id, change)

    # -- search ---------------------------------------------------------------------------------------------
    def search(self, store_id: str, queries: list[str], *, limit: int = 10, where: Filter | None = None,
               threshold: float = 0.0, purged: bool = False) -> tuple[list[SearchResult], bool]:
        """The best chunks for any of ``queries`` (each scored 0..1), and whether more passed the threshold; never
        a chunk of a file that has expired (``purged``: the expired files were just purged).

        A blank query (empty, or only whitespace) is a valid request in OpenAI's schema (the string has no minimum
        length) that no chunk matches: it adds nothing, and only blank queries give an empty page.
        """
        project, vs = self._project(store_id)
        self._refuse_expired(vs)
        cache: dict[str, bool] = {}
        completed = tuple(s["id"] for s in self._files(store_id)
                          if self._file_view(store_id, s, cache).status == "completed")
        self._touch(store_id, vs)
        queries = [q for q in queries if q.strip()]
        if not completed or not queries:
            return [], False
        if project.embedder and project.embedder != self.service.embedder.name:
            raise Conflict(f"Vector store '{store_id}' was built with embedder '{project.embedder}', this server "
                           f"runs '{self.service.embedder.name}'; re-embed it first.")
        index = self.service.indexes.get(store_id)
        best: dict[int, float] = {}
        for ranked in self.service.rank_queries(index, queries, all_of(SourceIn(completed), where), top=limit + 1,
                                                threshold=threshold,
                                                calibration=passage_calibration(self.service.embedder.name)):
            for r in ranked:
                best[r.record_id] = max(best.get(r.record_id, 0.0), r.confidence)
        order = sorted(best, key=lambda rid: (-best[rid], rid))
        records = self.store.get_qnas(store_id, order[:limit])
        if not purged and any(openai_files.expired(f) for fid in {q.source for q in records.values()}
                              if (f := self.store.get_file(fid)) is not None):
            # a file expired since the surface last purged (at most once a second, per process): its chunks leave
            # the store now, and the question is asked again without them
            self.expire_files()
            return self.search(store_id, queries, limit=limit, where=where, threshold=threshold, purged=True)
        results = [SearchResult(q.source, q.fields.get("filename", ""), best[rid],
                                q.fields.get("attributes"), q.answer)
                   for rid in order[:limit] if (q := records.get(rid)) is not None]
        return results, len(order) > limit

    def _touch(self, store_id: str, seen: dict) -> None:
        """Record the store as active (at most every ACTIVE_EVERY seconds: ``seen`` is its state as just read); a
        search of a store that cannot be written is answered all the same (``SideWrites``)."""
        now = int(time.time())
        if now - seen["last_active_at"] < ACTIVE_EVERY:
            return

        def change(vs: dict) -> None:
            if now - vs["last_active_at"] >= ACTIVE_EVERY:
                vs["last_active_at"] = max(now, vs["last_active_at"])

        def touch() -> None:
            with self._lock:
                self._update(store_id, change)

        self._touches.attempt(touch)
