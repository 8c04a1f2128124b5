"""What the knowledge bases hold, read and written without a model: projects, deployments,
records and synonyms.

``Service`` adds everything that embeds or ranks on top of this.  Commands that need no
model (``openqna deploy``, ``projects``, ``export``, ``keys``) use a ``Catalog`` so they never
load one.  Surfaces reach the store only through these calls, so the types they hand back
(``Project``, ``Deployment``, ``Job``, ``Source``, ``StoredFile``, ``LIVE``) are exported here too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from openqna import settings
from openqna.records import Conflict, InvalidArgument, KnowledgeBaseContent, NotFound, QnA, RecordKind
from openqna.store import Deployment, Job, Project, Source, Store, StoredFile, check_location, is_postgres, open_store
from openqna.store.base import LIVE, TestRun, TestSet, Version
from openqna.store.statements import version_name

__all__ = ["LIVE", "NAME", "Catalog", "Deployment", "Job", "Project", "Source", "Store", "StoredFile", "Version",
           "check_deployment_name", "check_location", "check_project_name", "embedded_dir", "kind_of", "is_postgres",
           "no_store_message", "open_data", "open_store", "state_name", "store_exists", "store_file"]

STORE_FILE = "openqna.sqlite3"
# Azure's projectName pattern, with '_' kept because earlier releases accepted it, and 100 characters at most as
# 2021-10-01 says (2023-04-01's pattern stops at 99, which refused a name of 100 with a message saying 1-100).  The
# spec gives deploymentName no pattern; the same rule keeps it a plain URL segment and a header value.
NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-_]{0,98}[a-zA-Z0-9]$|^[a-zA-Z0-9]$")


def check_project_name(name: str) -> None:
    """Refuse a project name the HTTP surfaces could not route to, before anything is created under it."""
    _check_name(name, "Project", "projectName")


def check_deployment_name(name: str) -> None:
    """Refuse a deployment name that is the live state ('test', in any case) or that the HTTP surfaces could not
    route to: every surface that writes a deployment (the APIs, ``openqna deploy``) refuses the same names."""
    if name.lower() == LIVE:
        raise InvalidArgument("'test' always answers the live state; deploy to another name such as 'production'.",
                              target="deploymentName")
    _check_name(name, "Deployment", "deploymentName")


def _check_name(name: str, what: str, target: str) -> None:
    if not NAME.match(name):
        raise InvalidArgument(f"{what} name '{name}' must be 1-100 ASCII letters, digits, '-' or '_', starting and "
                              "ending with a letter or digit.", target=target)


def store_file(data_dir: str) -> Path:
    """The SQLite file the embedded store keeps in ``data_dir`` (an absolute path, for messages)."""
    return (Path(data_dir) / STORE_FILE).absolute()


def store_exists(data_dir: str) -> bool:
    """Whether the store the settings name is already there: a PostgreSQL URL always counts, since
    its database is made by its administrator; opening a missing SQLite store would create it."""
    return store_file(embedded_dir(data_dir)).exists() or is_postgres(settings.store())


def embedded_dir(data_dir: str) -> str:
    """The folder of the SQLite store the settings name: OPENQNA_STORE when it is a directory, else ``data_dir``."""
    store = settings.store()
    check_location(store, "OPENQNA_STORE")
    return store if store and not is_postgres(store) else data_dir


def no_store_message(data_dir: str, fix: str = "pass --data or set OPENQNA_DATA to the folder that has one") -> str:
    """What a command that reads says when ``data_dir`` holds no store (rather than creating an empty one there);
    ``fix`` says how to name the right one, in the command's own options."""
    path = store_file(data_dir)
    return f"no openqna store in {path.parent} (looked for {path}); {fix}"


def open_data(data_dir: str) -> Store:
    """The store the settings name: OPENQNA_STORE (a postgresql:// URL) when set, else the SQLite store in
    ``data_dir`` (which also keeps PostgreSQL's saved indexes)."""
    check_location(settings.store(), "OPENQNA_STORE")
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


# What `openqna reembed` leaves behind: the embedder whose vectors each deployment and each kept version still holds,
# when it is not the project's (a deploy from the live state, or a rollback, makes them the project's again).
DEPLOYED_WITH = "deployed_embedders"  # deployment name -> embedder name
VERSIONS_WITH = "version_embedders"  # kept version (as a string) -> embedder name


def embedder_of(project: Project, deployment: str = LIVE) -> str | None:
    """The embedder whose vectors ``deployment`` of ``project`` holds (the live state's: the project's)."""
    if deployment == LIVE:
        return project.embedder
    built: str | None = project.settings.get(DEPLOYED_WITH, {}).get(deployment, project.embedder)
    return built


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

    # -- deployments and versions --------------------------------------------------------------------------------
    def deploy(self, project: str, deployment: str, *, version: int | None = None, by: str = "") -> Deployment:
        """Copy the live state of ``project`` to ``deployment`` (DESIGN decision 2), or roll it back (or forward) to
        a kept ``version``; either is recorded as a version (``versions``), ``by`` saying who deployed."""
        check_deployment_name(deployment)
        self.check_new_deployment(project, deployment)
        proj = self.store.get_project(project)
        made = proj.settings.get(VERSIONS_WITH, {}).get(str(version), proj.embedder) if version else proj.embedder
        if made != proj.embedder:
            raise Conflict(f"Version {version} of project '{project}' holds the vectors of embedder '{made}', from "
                           f"before the project was re-embedded with '{proj.embedder}': roll back to a version deployed "
                           f"since, or deploy the live state.", target="version")
        deployed = self.store.deploy(project, deployment, version=version, by=by)
        if deployment in proj.settings.get(DEPLOYED_WITH, {}):  # it holds the project's vectors now
            proj = self.store.get_project(project)
            proj.settings.get(DEPLOYED_WITH, {}).pop(deployment, None)
            self.store.update_project(proj)
        return deployed

    def check_new_deployment(self, project: str, deployment: str) -> None:
        """Refuse a deployment name that differs from an existing one only in case.

        Names are case-sensitive, so a deploy to 'Production' would make a second deployment beside
        'production' and leave the one the bots ask unchanged: the slip is refused rather than made.
        """
        for d in self.deployments(project):
            if d.name != deployment and d.name.lower() == deployment.lower():
                raise InvalidArgument(f"Project '{project}' has a deployment '{d.name}'; deployment names are "
                                      f"case-sensitive, so '{deployment}' would be another one beside it. Deploy to "
                                      f"'{d.name}', or choose a name that differs by more than case.",
                                      target="deploymentName")

    def deployments(self, project: str) -> list[Deployment]:
        return self.store.list_deployments(project)

    def deployment_not_found(self, project: str, deployment: str) -> NotFound:
        """The error for a ``deployment`` of ``project`` that does not exist, naming those that do.

        Deployment names are case-sensitive (a deploy to 'Production' makes a second deployment beside
        'production'), while 'test' is the live state in any case; a name that differs from one only in case
        says which it may have meant, as that is the usual slip.
        """
        names = [d.name for d in self.deployments(project)]
        if deployment.lower() == LIVE:  # asked as a deployment's record (GET .../deployments/test): it has none
            deployed = f"; its deployments are {', '.join(repr(n) for n in names)}" if names else \
                "; it has no deployments yet"
            return NotFound(f"'{deployment}' is the live state of project '{project}', not a deployment: no deploy "
                            f"records it, so it has no deployment date. Read its QnAs and synonyms with GET .../qnas "
                            f"and .../synonyms, or ask it as deployment 'test'{deployed}.")
        message = f"Deployment '{deployment}' of project '{project}' was not found."
        near = [n for n in names if n.lower() == deployment.lower()]
        if near:
            message += f" Deployment names are case-sensitive: did you mean '{near[0]}'?"
        if names:
            message += f" Its deployments are {', '.join(repr(n) for n in names)}, and 'test' (the live state)."
        else:
            message += " It has no deployments yet: deploy it, or ask 'test' (the live state)."
        return NotFound(message)

    def has_deployment(self, project: str, deployment: str) -> bool:
        return self.store.has_deployment(project, deployment)

    def versions(self, project: str) -> list[Version]:
        """Every deploy of ``project``, oldest first: deployment, version, when, by whom, counts and content hash."""
        return self.store.list_versions(project)

    # -- test sets and runs (kb/test_sets.py runs them) ---------------------------------------------------------------
    def import_test_set(self, project: str, name: str, data: bytes, filename: str, fmt: str | None = None) -> TestSet:
        """Read a test-set file (``formats/test_set_files.py``: TSV, CSV or XLSX) and store it as set ``name``, replacing
        one of that name; a file with an error stores nothing."""
        from openqna.formats.test_set_files import check_set_name, read_test_set

        name = check_set_name(name)
        items = read_test_set(data, filename, fmt)
        self.store.get_project(project)
        return self.store.put_test_set(project, TestSet(name, items))

    def test_set_from_log(self, project: str, name: str) -> tuple[TestSet, dict[str, Any]]:
        """Store set ``name`` made of the questions whose QnA someone confirmed: accepted suggestions and logged
        questions with feedback (``kb/labelled_questions.py``); returns it with what was taken and left out.
        Refused (nothing stored) when there is no such question."""
        from openqna.formats.test_set_files import check_set_name
        from openqna.kb.labelled_questions import labelled_questions

        name = check_set_name(name)
        labelled = labelled_questions(self.store, project)
        if not labelled.items:
            left = labelled.gone + labelled.ambiguous
            raise InvalidArgument(
                f"Project '{project}' has no question whose answer someone confirmed"
                + (f" ({left} left out: their QnA was deleted, or their feedback names more than one QnA)" if left
                   else "")
                + ": accept suggestions (Improve), add logged questions to QnAs (Analytics), or send feedback on "
                  "questions asked of a deployment with the query log on; then make the set again.")
        return self.store.put_test_set(project, TestSet(name, labelled.items)), labelled.report()

    def test_sets(self, project: str) -> list[TestSet]:
        return self.store.list_test_sets(project)

    def test_set(self, project: str, name: str) -> TestSet:
        return self.store.get_test_set(project, name)

    def delete_test_set(self, project: str, name: str) -> bool:
        return self.store.delete_test_set(project, name)

    def test_runs(self, project: str, test_set: str | None = None) -> list[TestRun]:
        """The runs of ``project``'s sets (of ``test_set`` when given), newest first, without per-question results."""
        return self.store.list_test_runs(project, test_set)

    def test_run(self, project: str, run_id: int) -> TestRun:
        return self.store.get_test_run(project, run_id)

    # -- records -----------------------------------------------------------------------------
    def records(self, project: str, deployment: str = LIVE, *, offset: int = 0, limit: int | None = None,
                kinds: Sequence[RecordKind] | None = None) -> list[QnA]:
        """The records of one deployment by id, of ``kinds`` only when given; ``offset`` and ``limit`` read one page
        of them."""
        return self.store.list_qnas(project, deployment, offset, limit, kinds=kinds)

    def count(self, project: str, deployment: str = LIVE, *, kinds: Sequence[RecordKind] | None = None) -> int:
        """How many records ``records`` would list."""
        if kinds is None:
            return self.store.count_qnas(project, deployment)
        counts = self.counts(project, deployment)
        return sum(counts[kind] for kind in set(kinds))

    def counts(self, project: str, deployment: str = LIVE) -> Counter[str]:
        """Records by kind (``qna``, ``passage``, ``row``): a passage is not a QnA to the user."""
        return Counter(self.store.count_kinds(project, deployment))

    def synonyms(self, project: str, deployment: str = LIVE) -> list[list[str]]:
        return self.store.get_synonyms(project, deployment)

    def set_synonyms(self, project: str, groups: list[list[str]]) -> None:
        self.store.set_synonyms(project, groups)

    def diff(self, project: str, deployment: str) -> dict[str, list[dict[str, object]]]:
        """What deploying would change in ``deployment``: the QnAs and passages ``test`` has and it lacks
        (``added``), has with other content (``changed``, each with what changed: ``changes``) and lacks
        (``deleted``), each as id, first question and kind.

        A deployment that does not exist yet holds nothing, so everything is added.
        """
        known = {d.name.lower() for d in self.deployments(project)}
        deployed = self.records(project, deployment) if deployment.lower() in known else []
        return _diff(deployed, self.records(project))

    def state(self, project: str, name: str) -> list[QnA]:
        """The records of a state by ``name``: ``test`` (the live state), a deployment's name, or ``v`` and a
        version's number (``v3``: a kept version)."""
        number = version_number(name)
        if number is not None:
            return self.store.version_records(project, number)
        return self.records(project, name)

    def compare(self, project: str, old: str, new: str) -> dict[str, dict[str, Any]]:
        """What changed from state ``old`` to state ``new`` (``state``'s names), QnAs and passages apart: each
        ``added``, ``changed`` (with which of questions, answer, metadata and prompts changed, old and new) and
        ``deleted``; the synonym groups ``added`` and ``removed``; and the trained model (``openqna train``) each
        state holds (``old``, ``new``: its hash and when it was trained, or None) and whether it ``changed``: a
        deploy that changes only the model changes answers too."""
        changes = _diff(self.state(project, old), self.state(project, new))
        out: dict[str, dict[str, Any]] = {"qnas": {}, "passages": {}}
        for key, items in changes.items():
            out["passages"][key] = [i for i in items if i["kind"] == "passage"]
            out["qnas"][key] = [i for i in items if i["kind"] != "passage"]
        groups = [{tuple(sorted(g)): g for g in self._state_synonyms(project, name)} for name in (old, new)]
        out["synonyms"] = {"added": [g for k, g in groups[1].items() if k not in groups[0]],
                           "removed": [g for k, g in groups[0].items() if k not in groups[1]]}
        models = [self.store.get_trained(project, self._state_key(name)) for name in (old, new)]
        out["model"] = {"changed": (models[0] and models[0].hash) != (models[1] and models[1].hash),
                        **{side: None if m is None else {"hash": m.hash[:12], "trainedDateTime": m.created}
                           for side, m in zip(("old", "new"), models)}}
        return out

    def _state_key(self, name: str) -> str:
        """The store's name of state ``name`` (``state``'s names): a kept version's is ``version_name``."""
        number = version_number(name)
        return name if number is None else version_name(number)

    def _state_synonyms(self, project: str, name: str) -> list[list[str]]:
        number = version_number(name)
        return self.store.version_synonyms(project, number) if number is not None else self.synonyms(project, name)

    def content(self, project: str, deployment: str = LIVE) -> KnowledgeBaseContent:
        """Records and synonyms of one deployment, as the file formats write them."""
        return KnowledgeBaseContent(self.records(project, deployment), self.synonyms(project, deployment))


def version_number(name: str) -> int | None:
    """The number of a version named ``v3`` (or ``3``), None for any other name (a deployment, ``test``)."""
    text = name.strip().lower()
    digits = text[1:] if text.startswith("v") else text
    if not digits.isdigit():
        return None
    if len(digits) > 18:
        raise InvalidArgument(f"Version '{name}' is not a version number.", target="version")
    return int(digits)


def state_name(name: str) -> str:
    """How a state is named in messages: ``v3``, ``test`` or a deployment's name."""
    number = version_number(name)
    return name if number is None else f"v{number}"


# What a changed QnA's ``changes`` say changed, each read from the QnA as a value shown to its owner
_PARTS: dict[str, Callable[[QnA], object]] = {
    "questions": lambda q: list(q.questions),
    "answer": lambda q: q.answer,
    "metadata": lambda q: dict(q.metadata),
    "prompts": lambda q: [{"displayText": p.display_text, "qnaId": p.qna_id, "displayOrder": p.display_order}
                          for p in q.dialog.prompts],
    "contextOnly": lambda q: q.dialog.is_context_only,
    "source": lambda q: q.source,
    "fields": lambda q: dict(q.fields),
}


def _diff(old_records: list[QnA], new_records: list[QnA]) -> dict[str, list[dict[str, object]]]:
    old = {q.id: q for q in old_records}
    new = {q.id: q for q in new_records}

    def item(q: QnA) -> dict[str, object]:
        return {"id": q.id, "question": q.questions[0] if q.questions else "", "kind": q.kind}

    def changed(a: QnA, b: QnA) -> dict[str, object]:
        parts = {name: {"old": read(a), "new": read(b)} for name, read in _PARTS.items() if read(a) != read(b)}
        if a.kind != b.kind:
            parts["kind"] = {"old": a.kind, "new": b.kind}
        return {**item(b), "changes": parts}

    return {"added": [item(q) for i, q in new.items() if i not in old],
            "changed": [changed(old[i], q) for i, q in new.items() if i in old and _content(q) != _content(old[i])],
            "deleted": [item(q) for i, q in old.items() if i not in new]}


def _content(q: QnA) -> tuple[object, ...]:
    """What a QnA answers with: everything but its id, its write time and its suggestions."""
    return (q.questions, q.answer, q.source, q.metadata, q.dialog, q.kind, q.fields)
