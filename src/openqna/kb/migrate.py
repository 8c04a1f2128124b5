"""Copy every knowledge base from one store to another (SQLite → PostgreSQL, or back).

Records keep their ids, vectors are copied (never re-embedded: the analysed terms are
recomputed with the same analyzer, so BM25 is unchanged), and the deploys are replayed in
order, each of a kept version's content staged as the live state and deployed under its
deployment, time and author, so that the target numbers the versions alike, keeps the same ones
and can roll back to them; then the live state itself is copied.  Every write is made under the
original's time (``clock.stamped``): QnAs keep their ``lastUpdated``, deployments and versions when
they were deployed, sources and test sets their times.  Synonyms, trained models, sources and how
they refresh, feedback, accepted suggestions, test sets and their runs (the same run numbers, in
order), the query log, files (with their scope and expiry) and API keys come along; finished jobs do
not (they expire after six hours anyway), nor do the deploys of versions whose content was no longer
kept (``OPENQNA_VERSIONS_KEPT``): the versions after them are numbered on from the first kept one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from itertools import groupby

from openqna.clock import stamped
from openqna.index.analyze import analyze
from openqna.kb.writing import content_hash
from openqna.ranking.multilingual import hashed_space
from openqna.records import Conflict, NotFound, QnA
from openqna.store import Store, StoredQnA, Unit
from openqna.store.base import LIVE, Trained
from openqna.store.statements import version_name


def _stored(source: Store, project: str, qnas: list[QnA], state: str, embedder: str | None) -> list[StoredQnA]:
    """``qnas`` of ``state`` (the live state, a deployment, or a kept version's ``version_name``) with their vectors."""
    vectors = source.get_vectors(project, [q.id for q in qnas], state)
    out = []
    for q in qnas:
        v = vectors.get(q.id, {})
        units = [Unit("q", n, analyze(t), v[("q", n)]) for n, t in enumerate(q.questions)]
        units.append(Unit("a", 0, analyze(q.answer), v[("a", 0)]))
        multilingual = ("ma", 0) in v  # the record's vectors in the multilingual space come along
        if multilingual:
            units += [Unit("mq", n, [], v[("mq", n)]) for n in range(len(q.questions))] + [Unit("ma", 0, [], v[("ma", 0)])]
        out.append(StoredQnA(q, units, content_hash(q, hashed_space(embedder or "", multilingual))))
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
    kept = set()
    for version in source.list_versions(project):
        if not version.kept:
            continue  # its content is gone: there is nothing to deploy
        kept.add(version.version)
        state = version_name(version.version)
        qnas = source.version_records(project, version.version)
        _stage(target, project, _stored(source, project, qnas, state, embedder),
               source.version_synonyms(project, version.version), source.get_trained(project, state))
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


def migrate(source: Store, target: Store, *, progress: Callable[[str], None] = print) -> dict[str, int]:
    """Copy all projects, files and keys; refuses to overwrite a project that already exists."""
    counts = {"projects": 0, "qnas": 0, "deployments": 0, "files": 0, "keys": 0}
    projects = source.list_projects()
    clashes = []
    for project in projects:
        try:
            target.get_project(project.name)
            clashes.append(project.name)
        except NotFound:
            pass
    if clashes:
        raise Conflict(f"The target store already has project(s) {', '.join(clashes)}; nothing was copied.")
    for project in projects:
        name = project.name
        target.create_project(copy.deepcopy(project))
        counts["deployments"] += _replay_deploys(source, target, name, project.embedder)
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
        with stamped(project.modified):
            target.update_project(copy.deepcopy(project))
        counts["projects"] += 1
        counts["qnas"] += len(live)
        progress(f"{name}: {len(live)} records, {len(source.list_deployments(name))} deployments, "
                 f"{len(source.list_versions(name))} deploys, {len(queries)} logged questions")
    for f in source.list_files():
        stored = source.get_file(f.id, with_data=True)
        assert stored is not None  # listed just now
        target.put_file(stored)
        counts["files"] += 1
    existing = {k.id for k in target.list_keys()}
    for key in source.list_keys():
        if key.id not in existing:
            target.add_key(key, source.key_hash(key.id))
            counts["keys"] += 1
    return counts
