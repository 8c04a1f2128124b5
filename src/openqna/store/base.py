"""The store protocol every engine implements and the conformance suite checks.

A store keeps projects (knowledge bases), their QnA records with analysed terms
and vectors (one unit per question and one per answer), named deployments
(copies of the live ``test`` state), synonyms and API keys.  It reads and writes
rows and never builds a search index: ``index/index_cache.py`` builds those from
``read_index_rows`` and keeps them current by ``current``'s version (DESIGN decision 7).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from openqna.filters.nodes import Filter
from openqna.records import MAX_QNA_ID, InvalidArgument, OpenQnAError, QnA

LIVE = "test"  # Azure's name for the authored, un-deployed state.
# Units of the multilingual vector space (``Service``'s second embedder, for Chinese, Japanese and Korean), stored
# beside the main ones under these field names: "mq" holds a question's vector, "ma" the answer's, with no terms; "uq"
# and "ua" the same texts' vectors by the universal sentence encoder, read beside them for a question that crosses
# languages (``MemIndex.crossing``).
MULTILINGUAL_FIELDS = ("mq", "ma", "uq", "ua")


def fresh_ids(next_id: int, count: int) -> list[int]:
    """The ``count`` ids from a project's ``next_id`` on, for records given no id.

    Ids are never reused (a deployment, a kept version, feedback and prompts elsewhere may still name a deleted one),
    so once a project has given out MAX_QNA_ID (an id that high was given explicitly) the stores refuse to give out
    more, rather than hand out ids no client can send back; records given their own unused ids can still be added.
    """
    if next_id + count - 1 > MAX_QNA_ID:
        raise InvalidArgument(f"This project's QnA ids have reached {MAX_QNA_ID}, the largest, so new QnAs cannot be "
                              "numbered after them: give each new QnA an unused id of its own (its id in the API, "
                              "the QnaId column of a file).", target="id")
    return list(range(next_id, next_id + count))


@dataclass(frozen=True)
class JobLease:
    """The job a thread is running: its id, the worker that owns it and how long a renewal of its lease lasts."""

    job_id: str
    owner: str
    seconds: float


# Set by the job runner while a handler runs (``kb/jobs.py``): a store's write transaction then commits only if the
# job is still this worker's, its lease not run out, and extends the lease in the same transaction.  A job another
# process had marked failed ("start the operation again") wrote its changes minutes later, when its worker woke.
RUNNING_JOB: ContextVar[JobLease | None] = ContextVar("openqna_running_job", default=None)


class LeaseLost(OpenQnAError):
    """A job's write came after its lease ran out (the process stalled, or the database was gone for longer than
    the lease): nothing of that write is applied, and the job is failed, so the operation is started again."""

    code = "InternalServerError"
    status = 500


class SchemaTooNew(OpenQnAError):
    """The database was upgraded by a newer openqna: this one refuses to open it, and has written nothing to it.

    An older openqna would not know what the newer columns and tables mean (a file's expiry, say), nor keep them up
    to date, and recording its own schema version over the newer one would make the newer openqna migrate again.
    """

    code = "ServiceUnavailable"
    status = 503

    def __init__(self, version: int, understood: int):
        super().__init__(f"the database has schema version {version}, newer than this openqna understands"
                         f" ({understood}): a newer openqna upgraded it. Run that version of openqna or a newer one"
                         " against it (pip install -U openqna); openqna never downgrades a database, and this one"
                         " has changed nothing in it.")


@dataclass
class Project:
    name: str
    description: str = ""
    language: str = "en"
    multilingual: bool = False
    settings: dict[str, Any] = field(default_factory=lambda: {"defaultAnswer": "No good match found in KB."})
    embedder: str | None = None  # name of the embedder that built this project's vectors
    created: str = ""
    modified: str = ""
    last_deployed: str | None = None

    @property
    def default_answer(self) -> str:
        """The answer given when none passes: the project's own, unless it is blank (a bot would send an empty
        message), as an empty one has always been."""
        value = self.settings.get("defaultAnswer")
        return value if isinstance(value, str) and value.strip() else "No good match found in KB."


def default_answer_of(settings: Any) -> str:
    """``Project.default_answer`` of a project's stored ``settings`` (a migration reads them from their row)."""
    return Project("", settings=settings if isinstance(settings, dict) else {}).default_answer


@dataclass
class Unit:
    """One indexed piece of a record: a question ("q") or the answer ("a")."""

    field: str
    ord: int
    terms: list[str]
    vector: np.ndarray


@dataclass
class StoredQnA:
    qna: QnA
    units: list[Unit]
    content_hash: str


@dataclass(slots=True)
class IndexRow:
    """One record of a deployment as an index reads it: what it filters on and its units, nothing shown to users.

    Vectors are float32 and may be read-only views of the stored bytes.
    """

    id: int
    kind: str
    source: str
    metadata: dict[str, str]
    context_only: bool
    questions: list[str]
    fields: dict[str, Any]  # typed column values, as stored (DateTime still ISO 8601 text)
    content_hash: str
    q_terms: list[list[str]] = field(default_factory=list)  # one list per question, in order
    q_vectors: list[np.ndarray] = field(default_factory=list)
    a_terms: list[str] = field(default_factory=list)
    a_vector: np.ndarray | None = None
    mq_vectors: list[np.ndarray] = field(default_factory=list)  # the multilingual space's, one per question
    ma_vector: np.ndarray | None = None
    uq_vectors: list[np.ndarray] = field(default_factory=list)  # the universal sentence encoder's, one per question
    ua_vector: np.ndarray | None = None

    def add_unit(self, field_name: str, terms: list[str], vector: np.ndarray) -> None:
        """One stored unit of this record: a question ("q", in order), its answer ("a"), or their vectors in the
        multilingual space ("mq", "ma"; the universal sentence encoder's "uq", "ua")."""
        if field_name == "q":
            self.q_vectors.append(vector)
            self.q_terms.append(terms)
        elif field_name == "a":
            self.a_vector, self.a_terms = vector, terms
        elif field_name == "mq":
            self.mq_vectors.append(vector)
        elif field_name == "ma":
            self.ma_vector = vector
        elif field_name == "uq":
            self.uq_vectors.append(vector)
        elif field_name == "ua":
            self.ua_vector = vector


class IndexRows(Protocol):
    """One consistent read of a deployment (a read transaction): every answer is as of ``version``."""

    version: int

    def settings(self) -> dict[str, Any]:
        """The project's settings (its typed schema says which fields are DateTime)."""

    def content_hashes(self) -> dict[int, str]:
        """Record id -> content hash, of every record of the deployment."""

    def record_ids(self) -> list[int]:
        """Every record id of the deployment, ascending."""

    def dim(self) -> int:
        """The dimension of the deployment's vectors (1 when it has none)."""

    def rows(self, ids: list[int] | None = None, id_range: tuple[int, int] | None = None) -> list[IndexRow]:
        """The records of ``ids``, or those from ``id_range``'s first to last id, or all of them."""


class RowsById(Protocol):
    """What a store's nearest-neighbour search reads of an index (``MemIndex``): the index row of each record id."""

    @property
    def row_of(self) -> dict[int, int]: ...


@runtime_checkable
class NearestNeighbours(Protocol):
    """A store whose engine searches vectors itself (PostgreSQL's pgvector HNSW).

    The index cache hands ``nearest_rows`` to the indexes it builds; the ranker asks it for
    candidates before searching in memory, and it answers None to leave the search there.
    """

    def nearest_rows(self, project_id: int, deployment: str, index: RowsById, field: str, query: np.ndarray, k: int,
                     flt: Filter | None, eligible: np.ndarray) -> np.ndarray | None: ...


@dataclass
class Deployment:
    name: str
    last_deployed: str
    version: int | None = None  # the version it holds (None: deployed before versions were kept)
    # the project's default answer when the version it holds was deployed (None: deployed before versions were kept,
    # it answers the live one): editing the default answer changes no deployment until the next deploy
    default_answer: str | None = None


@dataclass
class Version:
    """One deploy of a project: what was deployed where, when and by whom, and what the content was.

    Versions are numbered per project from 1.  A deploy of content that an earlier version kept (same ``hash``) reuses
    that version's number; a rollback deploys a kept version again.  ``kept``: its content is still stored, so a
    deployment can be rolled back to it (the oldest are dropped past ``OPENQNA_VERSIONS_KEPT``, never one a deployment
    holds).
    """

    deployment: str
    version: int
    deployed_at: str
    deployed_by: str
    qnas: int
    passages: int
    hash: str
    kept: bool
    current: bool  # the version this deployment holds now (its latest deploy)
    default_answer: str | None = None  # the project's default answer it was deployed with (``Deployment``)


@dataclass
class Source:
    """A file or URL whose QnAs (records with ``source`` = this name) were ingested together."""

    source: str
    display_name: str
    source_uri: str
    source_kind: str = "url"  # file | url
    content_structure_kind: str = "semistructured"
    content_hash: str = ""
    last_updated: str = ""
    # record id -> ``records.authored_digest`` of the record as the source's file last wrote it (or, for a record the
    # author edited, as the file has it now); None until the source is next written.  What tells a record the author
    # edited from one that follows the file (``kb/source_edits.py``)
    file_records: dict[int, str] | None = None


def file_records_json(records: dict[int, str] | None) -> str | None:
    """``Source.file_records`` as the ``sources.file_records`` column holds it (text, on both stores; NULL: None)."""
    return None if records is None else json.dumps({str(k): v for k, v in sorted(records.items())})


def file_records(text: str | None) -> dict[int, str] | None:
    """``file_records_json``'s inverse."""
    return None if text is None else {int(k): v for k, v in json.loads(text).items()}


@dataclass
class SourceRefresh:
    """How a URL source is refreshed (``kb/refresh.py``) and how its last refresh went.

    ``every``: seconds between checks (0: never); ``next_due``: when the next check is due (empty when off), moved
    forward by whichever process claims the check (``claim_source_refresh``).  ``etag`` and ``last_modified``: the
    validators the source's server last sent, sent back as ``If-None-Match``/``If-Modified-Since``.  ``outcome``:
    ``{"status": "unchanged"|"updated"|"failed", ...}`` with counts and ids when updated, ``error`` when failed.
    """

    source: str
    every: int = 0
    next_due: str = ""
    checked: str = ""
    changed: str = ""
    etag: str = ""
    last_modified: str = ""
    outcome: dict[str, Any] = field(default_factory=dict)


@dataclass
class Job:
    """A persisted long-running operation (Azure's job state, plus what is needed to run it)."""

    id: str
    kind: str  # deploy | export | import | qnas | sources | delete | upload | refresh | train
    project: str
    status: str = "notStarted"  # notStarted | running | succeeded | failed
    created: str = ""
    updated: str = ""
    expires: str = ""
    errors: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    owner: str = ""  # the worker that claimed it (host:pid:nonce), empty until then
    result: bytes | None = None
    result_name: str | None = None
    result_media: str | None = None
    lease_until: float | None = None  # while running: epoch seconds, on the store's clock, its worker must renew by


@dataclass
class StoredFile:
    """An uploaded file (OpenAI's Files API); ``project`` is the knowledge base built from it, if any.

    ``scope``: the projects of the key that uploaded it (None: every project), which decide the keys that reach it.
    """

    id: str
    filename: str
    purpose: str
    bytes: int
    created_at: int
    status: str = "processed"
    data: builtins.bytes = b""  # builtins: the field above is named ``bytes``
    project: str | None = None
    scope: list[str] | None = None
    expires_at: int | None = None  # Unix time after which the file is gone (OpenAI's expires_after); None: never


@dataclass
class ApiKey:
    id: str
    name: str
    role: str  # admin | author | query
    projects: list[str] | None  # None = every project
    created: str


@dataclass
class LoggedQuery:
    """One question asked of a deployment, as the opt-in query log keeps it (``user_hash``: never the user id)."""

    created: str  # ISO 8601, UTC
    deployment: str
    question: str
    user_hash: str
    qna_id: int  # the answer given; -1 for the default answer
    confidence: float


@dataclass
class QuestionCount:
    """The logged queries of one question text that got one answer (``qna_id``; -1 the default answer)."""

    question: str
    qna_id: int
    count: int
    first: str  # when it was first and last asked (ISO 8601)
    last: str
    low: int  # how many got it with a confidence under the summary's ``low_confidence``
    low_sum: float  # their confidences summed


@dataclass
class QuerySummary:
    """A period of the query log counted by the store: per question text and answer, per day (``date`` -> total and
    default answers), and how many distinct users asked."""

    groups: list[QuestionCount]
    daily: dict[str, tuple[int, int]]
    users: int


@dataclass
class AcceptedQuestion:
    """A question an owner confirmed belongs to a QnA (``kb/labelled_questions.py``): an active-learning suggestion
    accepted (``via`` ``suggestion``), or a question from the query log added to the QnA (``via`` ``log``)."""

    qna_id: int
    question: str
    via: str
    accepted: str = ""  # ISO 8601, UTC


class ProjectStore(Protocol):
    """Projects (knowledge bases): their names, descriptions and settings."""

    def create_project(self, project: Project) -> Project: ...
    def get_project(self, name: str) -> Project: ...
    def list_projects(self) -> list[Project]: ...
    def update_project(self, project: Project) -> Project: ...
    def update_settings(self, name: str, expected: dict[str, Any], settings: dict[str, Any]) -> bool:
        """Replace project ``name``'s settings with ``settings`` if they still equal ``expected`` (compare-and-set
        across processes); False, and nothing written, when another writer changed them first."""
    def delete_project(self, name: str) -> None: ...


class RecordStore(Protocol):
    """The records of a project's live state, and of its deployments for reading."""

    def put_qnas(self, project: str, items: list[StoredQnA]) -> list[int]: ...
    def delete_qnas(self, project: str, ids: list[int]) -> int: ...
    def replace_qnas(self, project: str, items: list[StoredQnA], delete: list[int],
                     synonyms: list[list[str]] | None = None) -> list[int]: ...
    def reserve_ids(self, project: str, count: int) -> list[int]: ...
    def get_vectors(self, project: str, ids: list[int],
                    deployment: str = LIVE) -> dict[int, dict[tuple[str, int], np.ndarray]]: ...
    def content_hashes(self, project: str, ids: Iterable[int] | None = None) -> dict[int, str]:
        """Live records' content hashes by id: every record's, or only those of ``ids`` (missing ids left out)."""
        ...
    def get_qnas(self, project: str, ids: list[int], deployment: str = LIVE) -> dict[int, QnA]: ...
    def source_records(self, project: str, source: str) -> list[QnA]:
        """The live records whose source is ``source`` (case and all), by id, read through an index: not every
        record of the project."""
        ...
    def records_prompting(self, project: str, ids: Iterable[int]) -> dict[int, QnA]:
        """The live records with a follow-up prompt to one of ``ids``, by id: found by a query, not by reading every
        record.  (Deleting records takes such prompts out of the live records that hold them, in the same
        transaction, moving their ``last_updated``; a deployment keeps its prompts until the next deploy.)"""
        ...
    def list_qnas(self, project: str, deployment: str = LIVE, offset: int = 0, limit: int | None = None, *,
                  kinds: Sequence[str] | None = None) -> list[QnA]:
        """The records of one deployment by id (``offset`` and ``limit`` read one page), of ``kinds`` only when given:
        the page is read after the kinds are chosen, so a page of QnAs is full however many passages lie between."""
        ...
    def count_qnas(self, project: str, deployment: str = LIVE) -> int: ...
    def count_kinds(self, project: str, deployment: str = LIVE) -> dict[str, int]:
        """Records by kind (``qna``, ``passage``, ``row``); kinds with no records are left out."""
        ...
    def get_synonyms(self, project: str, deployment: str = LIVE) -> list[list[str]]: ...
    def set_synonyms(self, project: str, groups: list[list[str]]) -> None: ...


class DeploymentStore(Protocol):
    """Named copies of the live state (Azure's deployments): what queries read."""

    def deploy(self, project: str, deployment: str, *, version: int | None = None, by: str = "") -> Deployment:
        """Copy the live state (or the kept ``version``: a rollback) to ``deployment``, recording the deploy."""
    def list_deployments(self, project: str) -> list[Deployment]: ...
    def has_deployment(self, project: str, deployment: str) -> bool: ...
    def list_versions(self, project: str) -> list[Version]:
        """Every deploy of the project, oldest first."""
    def record_version(self, project: str, version: Version) -> None:
        """Record a deploy of a version whose content is no longer kept, numbered, timed and counted as ``version``
        says (``openqna migrate``: so that the target numbers every later version as the source does)."""
    def version_records(self, project: str, version: int) -> list[QnA]:
        """The records of a kept version, by id (``NotFound`` when it is not kept or never was)."""
    def version_synonyms(self, project: str, version: int) -> list[list[str]]:
        """The synonyms of a kept version (its vectors and trained model are read as those of the state
        ``statements.version_name(version)``: ``get_vectors``, ``get_trained``)."""


class IndexSource(Protocol):
    """What an index derived from the store reads (``index/index_cache.py``): versions and index rows."""

    # where indexes derived from this store may be saved (None: nowhere), and the random id of its database,
    # which names them: versions are only comparable within one database
    index_dir: Path | None
    instance: str

    def list_projects(self) -> list[Project]: ...
    def list_deployments(self, project: str) -> list[Deployment]: ...
    def version(self, project: str, deployment: str = LIVE) -> int: ...
    def current(self, project: str, deployment: str = LIVE) -> tuple[int, int]:
        """(project id, version) of a deployment in as few reads as the engine allows: what the index cache checks
        on every query; raises ProjectNotFound, or NotFound for a deployment that does not exist."""
    def read_index_rows(self, project_id: int, deployment: str) -> AbstractContextManager[IndexRows]:
        """One consistent read of a deployment's index rows, open while the block runs."""


class SourceStore(Protocol):
    """The files and URLs a project's records came from, and active-learning feedback on its records."""

    def list_sources(self, project: str) -> list[Source]: ...
    def put_source(self, project: str, source: Source) -> None: ...
    def delete_source(self, project: str, source: str) -> bool: ...
    def list_source_refreshes(self, project: str) -> dict[str, SourceRefresh]:
        """The refresh state of the project's sources that have one, by source name."""
    def put_source_refresh(self, project: str, refresh: SourceRefresh) -> None:
        """Write a source's refresh state (kept until the source or the project is deleted)."""
    def due_source_refreshes(self, now: str) -> list[tuple[str, SourceRefresh]]:
        """(project, refresh) of every source, in any project, whose check is due at ``now``."""
    def claim_source_refresh(self, project: str, source: str, due: str, next_due: str) -> bool:
        """Move a due check's ``next_due`` from ``due`` to ``next_due``; True only for the one caller that did."""
    def add_feedback(self, project: str, records: list[tuple[int, str, str]]) -> None: ...
    def list_feedback(self, project: str, ids: Iterable[int] | None = None) -> dict[int, list[tuple[str, int]]]:
        """Per QnA (every one, or those of ``ids``), its distinct feedback questions and their counts."""
        ...
    def delete_feedback(self, project: str, qna_id: int, question: str | None = None) -> int: ...
    def add_accepted(self, project: str, accepted: list[AcceptedQuestion]) -> None:
        """Record acceptances (an empty ``accepted`` time: now); kept until the project is deleted."""
    def list_accepted(self, project: str) -> list[AcceptedQuestion]:
        """Every acceptance, oldest first."""


class JobStore(Protocol):
    """Persisted long-running operations: any process may submit, exactly one worker claims and runs each
    (see kb/jobs.py)."""

    def put_job(self, job: Job) -> None: ...
    def put_job_alone(self, job: Job) -> Job | None:
        """Insert ``job`` unless its project (a name in any case) has an unfinished job of its kind: then return that
        one and insert nothing.  The look and the insert are one step for every process on the store: two callers
        at once never both insert (two trains of a project would each undo the other's model)."""
    def get_job(self, job_id: str) -> Job | None: ...
    def unfinished_jobs(self) -> list[Job]: ...
    def claim_job(self, owner: str, kinds: list[str], lease_seconds: float, after: Sequence[str] = ()) -> Job | None:
        """Atomically turn the next ``notStarted`` job of ``kinds`` into ``running`` for ``owner``: projects take
        turns, a project's jobs start oldest first, and none while its project has an earlier unfinished job of the
        kinds ``after`` names (another worker's, which keep one order with these)."""
    def renew_job(self, job_id: str, owner: str, lease_seconds: float) -> bool:
        """Extend the lease of a job ``owner`` runs; False when it is no longer theirs to run."""
    def finish_job(self, job: Job) -> bool:
        """Write the outcome of a job its owner ran; False (nothing written) when the lease was lost."""
    def fail_expired_jobs(self, errors: list[dict[str, Any]]) -> list[str]:
        """Mark ``failed`` (with ``errors``) every running job whose lease ran out; returns their ids."""
    def delete_finished_jobs(self, before: str) -> int:
        """Delete the finished jobs (and their results) that expired before ``before`` (ISO 8601 UTC; a job with
        no expiry never does); returns how many."""


class FileStore(Protocol):
    """Uploaded files (OpenAI's Files API)."""

    def put_file(self, f: StoredFile) -> None: ...
    def get_file(self, file_id: str, *, with_data: bool = False) -> StoredFile | None: ...
    def list_files(self, purpose: str | None = None) -> list[StoredFile]: ...
    def delete_file(self, file_id: str) -> bool: ...


class KeyStore(Protocol):
    """API keys, stored hashed, with their roles."""

    remote: bool
    """Whether a read may wait on the network (PostgreSQL): a server then checks keys on a worker thread, so that a
    slow or locked read never stalls its event loop (``api/credentials.py``)."""

    def add_key(self, key: ApiKey, key_hash: str) -> None: ...
    def find_key(self, key_hash: str) -> ApiKey | None: ...
    def key_hash(self, key_id: str) -> str | None: ...
    def list_keys(self) -> list[ApiKey]: ...
    def has_keys(self) -> bool:
        """Whether any key exists (asked on every request of a server without issuers: one cheap read)."""
        ...
    def delete_key(self, key_id: str) -> bool: ...


class QueryLogStore(Protocol):
    """The questions asked of a project's deployments, for its analytics (kept only while the project opts in)."""

    def log_queries(self, project: str, queries: list[LoggedQuery]) -> None: ...
    def list_queries(self, project: str, since: str, newest: int | None = None) -> list[LoggedQuery]:
        """The queries logged at or after ``since`` (ISO 8601), oldest first; only the ``newest`` ones when given."""
        ...
    def count_queries(self, project: str, since: str) -> int:
        """How many queries were logged at or after ``since``."""
        ...
    def summarize_queries(self, project: str, since: str, low_confidence: float) -> QuerySummary:
        """The queries logged at or after ``since`` counted in the store, so that a year of a busy bot's log is never
        read into memory row by row (``kb/query_log.py``'s report)."""
        ...
    def queried_questions(self, project: str) -> set[str]:
        """Every question text the log holds, each once."""
        ...
    def delete_queries(self, project: str, before: str | None = None) -> int:
        """Forget the queries logged before ``before`` (all of them when None); returns how many."""
        ...


@dataclass
class TestSet:
    """A named list of questions with what each should get (``kb/test_sets.py``): each item a dict of ``question``,
    ``expected_qna_id`` (int or None), ``expected_answer`` (str or None) and ``metadata`` (dict); neither expected:
    the question should get no answer."""

    __test__ = False  # not a pytest test class

    name: str
    items: list[dict[str, Any]]
    created: str = ""
    modified: str = ""


@dataclass
class TestRun:
    """One run of a test set against a state: its figures (``summary``) and each question's outcome (``results``;
    left empty by ``list_test_runs``)."""

    __test__ = False

    id: int
    test_set: str
    deployment: str
    created: str
    threshold: float
    summary: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)


class TestSetStore(Protocol):
    """A project's test sets and the runs made of them, newest run first."""

    def put_test_set(self, project: str, test_set: TestSet) -> TestSet:
        """Create or replace the set of that name (its ``created`` kept on a replace)."""
    def get_test_set(self, project: str, name: str) -> TestSet:
        """The set (``NotFound`` when there is none)."""
    def list_test_sets(self, project: str) -> list[TestSet]:
        """Every set by name, with its items."""
    def delete_test_set(self, project: str, name: str) -> bool: ...
    def add_test_run(self, project: str, run: TestRun) -> TestRun:
        """Store ``run`` under the project's next run number (its ``id``)."""
    def list_test_runs(self, project: str, test_set: str | None = None) -> list[TestRun]:
        """The runs (of ``test_set`` when given), newest first, without their per-question results."""
    def get_test_run(self, project: str, run_id: int) -> TestRun:
        """One run with its results (``NotFound`` when there is none)."""


@dataclass
class Trained:
    """A project's trained model (``openqna train``) as a deployment holds it: the artefact's bytes, what the train
    job measured (``meta``), when it was made, and the bytes' hash (part of a version's content hash)."""

    data: bytes
    meta: dict[str, Any]
    created: str
    hash: str


class TrainedStore(Protocol):
    """A project's trained model: made in the live state by a train job, copied to a deployment by a deploy (and kept
    with a version, so a rollback restores it), as content is."""

    def set_trained(self, project: str, data: bytes | None, meta: dict[str, Any] | None = None, *,
                    project_id: int | None = None) -> None:
        """Replace the live state's trained model (None: remove it); moves the live state's version.  With
        ``project_id`` (``current``'s, read when the model's training began), ``ProjectNotFound`` unless the project
        of that name is still the one of that id: a project deleted and made again while it trained does not get the
        deleted one's model (ids are never given twice)."""
    def get_trained(self, project: str, deployment: str = LIVE) -> Trained | None: ...


@dataclass
class AttachedFile:
    """One file of an OpenAI vector store (``kinds/vector_stores.py``) as the store keeps it: ``state`` is the JSON
    object that module reads and writes whole, ``seq`` orders the store's files (oldest first)."""

    file_id: str
    seq: int
    state: dict[str, Any]


def attached_files_of(settings: dict[str, Any]) -> list[AttachedFile] | None:
    """Schema 12's migration: the files a vector store kept in its settings until then (``openai_vector_store.files``),
    taken out of ``settings``; None when they hold none (not a vector store, or one whose files were moved)."""
    vs = settings.get("openai_vector_store")
    if not isinstance(vs, dict) or not isinstance(vs.get("files"), dict):
        return None
    files: dict[str, dict[str, Any]] = vs.pop("files")
    return [AttachedFile(file_id, int(state.get("seq", 0)), state) for file_id, state in files.items()]


class AttachedFileStore(Protocol):
    """The files of a vector store, one row each (schema 12), so that a file's change reads and writes that file alone:
    kept in the project's settings, every change parsed and rewrote every file's state (n files cost n²)."""

    def list_attached_files(self, project: str, file_ids: Iterable[str] | None = None) -> list[AttachedFile]:
        """Every file of the project (or those of ``file_ids`` it has), by ``seq`` then file id."""
    def get_attached_file(self, project: str, file_id: str) -> AttachedFile | None: ...
    def put_attached_files(self, project: str, files: list[AttachedFile]) -> None:
        """Write ``files`` in one transaction, each replacing any state of the same file id."""
    def swap_attached_file(self, project: str, file_id: str, expected: dict[str, Any],
                           state: dict[str, Any] | None) -> bool:
        """Replace the file's state with ``state`` (None: remove the file), keeping its ``seq``, if it still equals
        ``expected`` (compare-and-set across processes); False, and nothing written, when another writer changed or
        removed it first."""


class Store(ProjectStore, RecordStore, DeploymentStore, IndexSource, SourceStore, JobStore, FileStore, KeyStore,
            QueryLogStore, TestSetStore, TrainedStore, AttachedFileStore, Protocol):
    """Every concern of a store, as each engine implements them and the conformance suite checks them; a module
    that needs only one concern takes that protocol instead."""

    def close(self) -> None: ...


# The columns that hold JSON, in both stores.  Before lone surrogates were refused at every boundary (issue 40),
# ``json.dumps``'s ASCII escapes kept them (a vector store named with ED A0 80 was stored as "\\ud800"; SQLite's
# text and PostgreSQL's json type take the escape as it is), and every later read of the value failed when the
# answer was encoded: a 500 for every key.  Schema version 4 of each store repairs them.
JSON_COLUMNS = (("projects", "settings"), ("records", "questions"), ("records", "metadata"), ("records", "dialog"),
                ("records", "suggestions"), ("records", "fields"), ("synonyms", "groups"), ("jobs", "errors"),
                ("jobs", "params"), ("api_keys", "projects"))
