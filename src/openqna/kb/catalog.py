"""What the knowledge bases hold, read and written without a model: projects, deployments,
records and synonyms.

``Service`` adds everything that embeds or ranks on top of this.  Commands that need no
model (``openqna deploy``, ``projects``, ``export``, ``keys``) use a ``Catalog`` so they never
load one.  Surfaces reach the store only through these calls, so the types they hand back
(``Project``, ``Deployment``, ``Job``, ``Source``, ``StoredFile``, ``LIVE``) are exported here too.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from openqna import settings
from openqna.records import KnowledgeBaseContent, QnA
from openqna.store import Deployment, Job, Project, Source, Store, StoredFile, open_store
from openqna.store.base import LIVE

__all__ = ["LIVE", "Catalog", "Deployment", "Job", "Project", "Source", "Store", "StoredFile", "kind_of",
           "open_data", "open_store", "store_exists", "store_file"]

STORE_FILE = "openqna.sqlite3"


def store_file(data_dir: str) -> Path:
    """The SQLite file the embedded store keeps in ``data_dir`` (an absolute path, for messages)."""
    return (Path(data_dir) / STORE_FILE).absolute()


def store_exists(data_dir: str) -> bool:
    """Whether the store the settings name is already there: a PostgreSQL URL always counts, since
    its database is made by its administrator; opening a missing SQLite store would create it."""
    return bool(settings.store()) or store_file(data_dir).exists()


def open_data(data_dir: str) -> Store:
    """The store the settings name: OPENQNA_STORE (a postgresql:// URL) when set, else the SQLite store in
    ``data_dir`` (which also keeps PostgreSQL's saved indexes)."""
    return open_store(settings.store() or data_dir, cache_dir=data_dir)


def kind_of(project: Project) -> str:
    """What a knowledge base is to the user who made it: an Azure ``project``, a ``table``
    (kinds/tables.py keeps its schema), an ``OpenAI file`` (kinds/openai_files.py) or a ``vector store``
    (kinds/vector_stores.py); each module marks its own in the project's settings under these keys."""
    if "openai_vector_store" in project.settings:
        return "vector store"
    if "openai_file" in project.settings:
        return "OpenAI file"
    if "schema" in project.settings:
        return "table"
    return "project"


class Catalog:
    def __init__(self, store: Store):
        self.store = store

    # -- projects ----------------------------------------------------------------------------
    def project(self, name: str) -> Project:
        """The project named ``name`` (``ProjectNotFound`` when there is none)."""
        return self.store.get_project(name)

    def projects(self) -> list[Project]:
        return self.store.list_projects()

    def update_project(self, project: Project) -> Project:
        return self.store.update_project(project)

    # -- deployments -------------------------------------------------------------------------
    def deploy(self, project: str, deployment: str) -> Deployment:
        """Copy the live state of ``project`` to ``deployment`` (DESIGN decision 2)."""
        return self.store.deploy(project, deployment)

    def deployments(self, project: str) -> list[Deployment]:
        return self.store.list_deployments(project)

    # -- records -----------------------------------------------------------------------------
    def records(self, project: str, deployment: str = LIVE, *, offset: int = 0, limit: int | None = None) -> list[QnA]:
        """The records of one deployment by id; ``offset`` and ``limit`` read one page of them."""
        return self.store.list_qnas(project, deployment, offset, limit)

    def count(self, project: str, deployment: str = LIVE) -> int:
        return self.store.count_qnas(project, deployment)

    def counts(self, project: str, deployment: str = LIVE) -> Counter[str]:
        """Records by kind (``qna``, ``passage``, ``row``): a passage is not a QnA to the user."""
        return Counter(self.store.count_kinds(project, deployment))

    def synonyms(self, project: str, deployment: str = LIVE) -> list[list[str]]:
        return self.store.get_synonyms(project, deployment)

    def set_synonyms(self, project: str, groups: list[list[str]]) -> None:
        self.store.set_synonyms(project, groups)

    def diff(self, project: str, deployment: str) -> dict[str, list[dict[str, object]]]:
        """What deploying would change in ``deployment``: the QnAs and passages ``test`` has and it lacks
        (``added``), has with other content (``changed``) and lacks (``deleted``), each as id and first question.

        A deployment that does not exist yet holds nothing, so everything is added.
        """
        live = {q.id: q for q in self.records(project)}
        known = {d.name.lower() for d in self.deployments(project)}
        deployed = {q.id: q for q in self.records(project, deployment)} if deployment.lower() in known else {}

        def item(q: QnA) -> dict[str, object]:
            return {"id": q.id, "question": q.questions[0] if q.questions else "", "kind": q.kind}

        return {"added": [item(q) for i, q in live.items() if i not in deployed],
                "changed": [item(q) for i, q in live.items() if i in deployed and _content(q) != _content(deployed[i])],
                "deleted": [item(q) for i, q in deployed.items() if i not in live]}

    def content(self, project: str, deployment: str = LIVE) -> KnowledgeBaseContent:
        """Records and synonyms of one deployment, as the file formats write them."""
        return KnowledgeBaseContent(self.records(project, deployment), self.synonyms(project, deployment))


def _content(q: QnA) -> tuple[object, ...]:
    """What a QnA answers with: everything but its id, its write time and its suggestions."""
    return (q.questions, q.answer, q.source, q.metadata, q.dialog, q.kind, q.fields)
