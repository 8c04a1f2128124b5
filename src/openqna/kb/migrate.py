"""Copy every knowledge base from one store to another (SQLite → PostgreSQL, or back).

Records keep their ids, vectors are copied (never re-embedded: the analysed terms are
recomputed with the same analyzer, so BM25 is unchanged), and each deployment is
recreated as it was, by staging its copy as the live state and deploying it, before
the live state itself is copied.  Synonyms, trained models, sources, feedback, accepted suggestions, test sets and
their runs (the same run numbers, in order), files and API keys come along; finished jobs do not (they expire after
six hours anyway).
"""

from __future__ import annotations

import copy

from openqna.index.analyze import analyze
from openqna.kb.writing import content_hash
from openqna.ranking.multilingual import hashed_space
from openqna.records import Conflict, NotFound
from openqna.store import Store, StoredQnA, Unit
from openqna.store.base import LIVE


def _stored(source: Store, project: str, deployment: str, embedder: str | None) -> list[StoredQnA]:
    qnas = source.list_qnas(project, deployment)
    vectors = source.get_vectors(project, [q.id for q in qnas], deployment)
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


def _replace_live(target: Store, project: str, items: list[StoredQnA]) -> None:
    old = [q.id for q in target.list_qnas(project)]
    if old:
        target.delete_qnas(project, old)
    if items:
        target.put_qnas(project, [StoredQnA(copy.deepcopy(i.qna), i.units, i.content_hash) for i in items])


def _copy_trained(source: Store, target: Store, project: str, deployment: str) -> None:
    """The trained model ``deployment`` holds, as the target's live model (a deploy then copies it)."""
    trained = source.get_trained(project, deployment)
    target.set_trained(project, None if trained is None else trained.data, None if trained is None else trained.meta)


def migrate(source: Store, target: Store, *, progress=print) -> dict[str, int]:
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
        target.create_project(copy.deepcopy(project))
        for deployment in source.list_deployments(project.name):
            _replace_live(target, project.name, _stored(source, project.name, deployment.name, project.embedder))
            target.set_synonyms(project.name, source.get_synonyms(project.name, deployment.name))
            _copy_trained(source, target, project.name, deployment.name)
            target.deploy(project.name, deployment.name)
            counts["deployments"] += 1
        live = _stored(source, project.name, LIVE, project.embedder)
        _replace_live(target, project.name, live)
        target.set_synonyms(project.name, source.get_synonyms(project.name))
        _copy_trained(source, target, project.name, LIVE)
        for src in source.list_sources(project.name):
            target.put_source(project.name, src)
        feedback = [(qid, question, "") for qid, items in source.list_feedback(project.name).items()
                    for question, n in items for _ in range(n)]
        if feedback:
            target.add_feedback(project.name, feedback)
        accepted = source.list_accepted(project.name)
        if accepted:
            target.add_accepted(project.name, accepted)
        for test_set in source.list_test_sets(project.name):
            target.put_test_set(project.name, test_set)
        for run in reversed(source.list_test_runs(project.name)):  # oldest first: the target numbers them alike
            target.add_test_run(project.name, source.get_test_run(project.name, run.id))
        target.update_project(copy.deepcopy(project))
        counts["projects"] += 1
        counts["qnas"] += len(live)
        progress(f"{project.name}: {len(live)} records, {len(source.list_deployments(project.name))} deployments")
    for f in source.list_files():
        target.put_file(source.get_file(f.id, with_data=True))
        counts["files"] += 1
    existing = {k.id for k in target.list_keys()}
    for key in source.list_keys():
        if key.id not in existing:
            target.add_key(key, source.key_hash(key.id))
            counts["keys"] += 1
    return counts

