"""Copy every knowledge base from one store to another (SQLite → PostgreSQL, or back).

Records keep their ids, vectors are copied (never re-embedded: the analysed terms are
recomputed with the same analyzer, so BM25 is unchanged), and the deploys are replayed in
order, each of a kept version's content staged as the live state and deployed under its
deployment, time and author, so that the target numbers the versions alike, keeps the same ones
and can roll back to them (a version whose content was no longer kept, ``OPENQNA_VERSIONS_KEPT``, is listed as it
was, without content: ``Store.record_version``); then the live state itself is copied.  Every write is made under the
original's time (``clock.stamped``): QnAs keep their ``lastUpdated``, deployments and versions when
they were deployed, sources and test sets their times.  Synonyms, trained models, sources and how
they refresh, feedback, accepted suggestions, test sets and their runs (the same run numbers, in
order), the query log, a vector store's files (their states), files (with their scope and expiry) and API keys come
along; finished jobs do not (they expire after six hours anyway).

A migration that stopped partway (the target went away, the disk filled, Ctrl-C) is finished by running it again.
Each project is created in the target with a marker naming the source store (``MARKER`` in its settings, the
source's ``instance``) that only the project's last write, its settings as the source has them, removes.  So a
rerun deletes and copies again a project that still carries this source's marker, skips one whose content equals the
source's (``fingerprint``), and refuses, before it writes anything, a project, file or key of the same name that
differs from the source's or carries another source's marker.  Files and keys are each one write, so they are
either there, equal, or missing.  A rerun after a finished migration finds everything there and writes nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from openqna.clock import stamped
from openqna.index.analyze import analyze
from openqna.index.markdown_text import without_urls
from openqna.index.memindex import MULTILINGUAL_DIM, USE_DIM
from openqna.kb.writing import content_hash
from openqna.ranking.multilingual import hashed_space
from openqna.records import Conflict, NotFound, QnA
from openqna.store import Store, StoredQnA, Unit
from openqna.store.base import LIVE, Project, Trained
from openqna.store.statements import version_name


def _stored(source: Store, project: str, qnas: list[QnA], state: str, embedder: str | None) -> list[StoredQnA]:
    """``qnas`` of ``state`` (the live state, a deployment, or a kept version's ``version_name``) with their vectors."""
    vectors = source.get_vectors(project, [q.id for q in qnas], state)
    out = []
    for q in qnas:
        v = vectors.get(q.id, {})
        units = [Unit("q", n, analyze(t), v[("q", n)]) for n, t in enumerate(q.questions)]
        units.append(Unit("a", 0, analyze(without_urls(q.answer)), v[("a", 0)]))
        # the record's vectors in the multilingual space come along, when today's models made them (an earlier one's
        # are left for `openqna serve` to make again: Service.upgrade_multilingual); its hash says it has the space
        # only with both models' vectors, so that a record with E5's alone gets the encoder's on the next fill
        has = {many: (one, 0) in v and len(v[(one, 0)]) == width
               for many, one, width in (("mq", "ma", MULTILINGUAL_DIM), ("uq", "ua", USE_DIM))}
        for many, one in (("mq", "ma"), ("uq", "ua")):
            if has[many]:
                units += [Unit(many, n, [], v[(many, n)]) for n in range(len(q.questions))] + [
                    Unit(one, 0, [], v[(one, 0)])]
        out.append(StoredQnA(q, units, content_hash(q, hashed_space(embedder or "", all(has.values())))))
    return out


def _stage(target: Store, project: str, items: list[StoredQnA], synonyms: list[list[str]],
           trained: Trained | None) -> None:
    """Make ``items``, ``synonyms`` and ``trained`` the target's live state, each QnA written under its own
    ``last_updated``."""
    old = [q.id for q in target.list_qnas(project)]
    if old:
        target.delete_qnas(project, old)

    def stamp(item: StoredQnA) -> str:
        return item.qna.last_updated or ""

    for when, group in groupby(sorted(items, key=stamp), key=stamp):
        with stamped(when):
            target.put_qnas(project, [StoredQnA(copy.deepcopy(i.qna), i.units, i.content_hash) for i in group])
    target.set_synonyms(project, synonyms)
    with stamped(None if trained is None else trained.created):
        target.set_trained(project, None if trained is None else trained.data, None if trained is None else trained.meta)


def _replay_deploys(source: Store, target: Store, project: str, embedder: str | None) -> int:
    """Deploy, oldest first, what each of the source's deploys deployed, when and by whom it was deployed; returns how
    many deployments the project has."""
    for version in source.list_versions(project):
        if not version.kept:  # its content is gone: listed as it was, so that the versions after it keep their numbers
            target.record_version(project, version)
            continue
        state = version_name(version.version)
        qnas = source.version_records(project, version.version)
        _stage(target, project, _stored(source, project, qnas, state, embedder),
               source.version_synonyms(project, version.version), source.get_trained(project, state))
        staged = target.get_project(project)
        if version.default_answer is not None and staged.settings.get("defaultAnswer") != version.default_answer:
            staged.settings["defaultAnswer"] = version.default_answer  # the one it was deployed with (the copy's last
            target.update_project(staged)  # write sets the project's own again)
        with stamped(version.deployed_at):
            target.deploy(project, version.deployment, by=version.deployed_by)
    deployments = source.list_deployments(project)
    for deployment in deployments:
        if deployment.version is None:  # deployed before versions were kept: copied as it is
            qnas = source.list_qnas(project, deployment.name)
            _stage(target, project, _stored(source, project, qnas, deployment.name, embedder),
                   source.get_synonyms(project, deployment.name), source.get_trained(project, deployment.name))
            with stamped(deployment.last_deployed):
                target.deploy(project, deployment.name)
    return len(deployments)


MARKER = "migratingFrom"  # in a target project's settings while its copy is unfinished: the source's instance


@dataclass
class Migration:
    """What a migration copied, and what it found already copied (by an earlier run) and left as it was."""

    copied: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("projects", "qnas", "deployments", "files",
                                                                          "keys"), 0))
    already: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("projects", "files", "keys"), 0))
    recopied: list[str] = field(default_factory=list)  # projects an earlier run left unfinished


def _plain(value: Any) -> Any:
    """``value`` as JSON-able data that is equal exactly when the values are (vectors and blobs by their hash)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return sorted((json.dumps(_plain(k)), _plain(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return hashlib.sha256(value).hexdigest()
    if hasattr(value, "tobytes"):  # a numpy vector
        return hashlib.sha256(value.tobytes()).hexdigest()
    return value


def fingerprint(store: Store, name: str) -> dict[str, str]:
    """A digest of each part of project ``name`` that a migration copies, to tell a finished copy from a different
    project (the parts and exceptions are those the migration tests compare: the project's ``modified`` and the
    versions' ``deployed_at`` are not kept exactly)."""
    deployments = store.list_deployments(name)
    versions = store.list_versions(name)
    parts: dict[str, Any] = {
        "settings": dataclasses.asdict(store.get_project(name)) | {"modified": None},
        "deployments": deployments,
        "versions": [dataclasses.asdict(v) | {"deployed_at": None} for v in versions],
        "kept versions": {v.version: store.version_records(name, v.version) for v in versions if v.kept},
        "sources": [store.list_sources(name), store.list_source_refreshes(name)],
        "feedback": [store.list_feedback(name), store.list_accepted(name)],
        "test sets": [store.list_test_sets(name), [store.get_test_run(name, r.id) for r in store.list_test_runs(name)]],
        "query log": store.list_queries(name, ""),
        "vector store files": store.list_attached_files(name),
    }
    for state in (LIVE, *(d.name for d in deployments)):
        qnas = store.list_qnas(name, state)
        trained = store.get_trained(name, state)
        parts[f"records of {state}"] = [qnas, store.get_vectors(name, [q.id for q in qnas], state),
                                        store.get_synonyms(name, state),
                                        None if trained is None else [trained.data, trained.meta]]
    return {part: hashlib.sha256(json.dumps(_plain(value)).encode()).hexdigest() for part, value in parts.items()}


def _plan(source: Store, target: Store, projects: list[Project], report: Migration) -> list[Project]:
    """The projects to copy (deleting from the target those an earlier run of this migration left unfinished); raises
    ``Conflict``, with nothing written, when the target has a project, file or key of the same name that is not this
    source's."""
    refused: list[str] = []
    todo: list[Project] = []
    unfinished: list[str] = []
    for project in projects:
        try:
            there = target.get_project(project.name)
        except NotFound:
            todo.append(project)
            continue
        marker = there.settings.get(MARKER)
        if marker == source.instance:
            unfinished.append(project.name)
            todo.append(project)
        elif marker is not None:
            refused.append(f"project {project.name} (an unfinished copy from another store)")
        else:
            want, got = fingerprint(source, project.name), fingerprint(target, project.name)
            differ = [part for part in want if got.get(part) != want[part]]
            if differ:
                refused.append(f"project {project.name} (its {', '.join(differ)} differ)")
            else:
                report.already["projects"] += 1
    for f in source.list_files():
        there_file = target.get_file(f.id, with_data=True)
        if there_file is not None:
            if there_file != source.get_file(f.id, with_data=True):
                refused.append(f"file {f.id} ({f.filename})")
    keys = {k.id: k for k in target.list_keys()}
    for key in source.list_keys():
        if key.id in keys:
            if target.key_hash(key.id) != source.key_hash(key.id) or keys[key.id] != key:
                refused.append(f"key {key.id} ({key.name})")
    if refused:
        raise Conflict("The target store already has " + "; ".join(refused) + ", not copied from this source or "
                       "changed since; nothing was copied. Delete them from the target, or migrate into another one.")
    for name in unfinished:
        target.delete_project(name)
        report.recopied.append(name)
    return todo


def _copy_project(source: Store, target: Store, project: Project, progress: Callable[[str], None]) -> tuple[int, int]:
    """Copy one project; its last write removes the ``MARKER`` it was created with.  Returns its records and
    deployments."""
    name = project.name
    unfinished = copy.deepcopy(project)
    unfinished.settings[MARKER] = source.instance
    target.create_project(unfinished)
    deployments = _replay_deploys(source, target, name, project.embedder)
    progress(f"{name}: {deployments} deployments copied")
    live = _stored(source, name, source.list_qnas(name), LIVE, project.embedder)
    _stage(target, name, live, source.get_synonyms(name), source.get_trained(name))
    refreshes = source.list_source_refreshes(name)
    for src in source.list_sources(name):
        with stamped(src.last_updated):
            target.put_source(name, src)
        if src.source in refreshes:
            target.put_source_refresh(name, refreshes[src.source])
    feedback = [(qid, question, "") for qid, items in source.list_feedback(name).items()
                for question, n in items for _ in range(n)]
    if feedback:
        target.add_feedback(name, feedback)
    accepted = source.list_accepted(name)
    if accepted:
        target.add_accepted(name, accepted)
    for test_set in source.list_test_sets(name):
        with stamped(test_set.created):
            target.put_test_set(name, test_set)
        if test_set.modified != test_set.created:
            with stamped(test_set.modified):
                target.put_test_set(name, test_set)
    for run in reversed(source.list_test_runs(name)):  # oldest first: the target numbers them alike
        target.add_test_run(name, source.get_test_run(name, run.id))
    queries = source.list_queries(name, "")
    if queries:
        target.log_queries(name, queries)
    attached = source.list_attached_files(name)
    if attached:
        target.put_attached_files(name, attached)
    with stamped(project.modified):
        target.update_project(copy.deepcopy(project))  # the last write: the copy is complete
    progress(f"{name}: {len(live)} records, {deployments} deployments, "
             f"{len(source.list_versions(name))} deploys, {len(queries)} logged questions")
    return len(live), deployments


def migrate(source: Store, target: Store, *, progress: Callable[[str], None] = print) -> Migration:
    """Copy all projects, files and keys, finishing what an earlier run of the same migration left unfinished; refuses
    (``Conflict``, nothing written) a target that has a project, file or key of the same name that is not this
    source's."""
    report = Migration()
    for project in _plan(source, target, source.list_projects(), report):
        records, deployments = _copy_project(source, target, project, progress)
        report.copied["projects"] += 1
        report.copied["qnas"] += records
        report.copied["deployments"] += deployments
    for f in source.list_files():
        if target.get_file(f.id) is not None:
            report.already["files"] += 1
            continue
        stored = source.get_file(f.id, with_data=True)
        assert stored is not None  # listed just now
        target.put_file(stored)
        report.copied["files"] += 1
    existing = {k.id for k in target.list_keys()}
    for key in source.list_keys():
        if key.id in existing:
            report.already["keys"] += 1
            continue
        target.add_key(key, source.key_hash(key.id))
        report.copied["keys"] += 1
    return report
