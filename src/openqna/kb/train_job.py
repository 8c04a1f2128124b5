"""Save and train: ``openqna train``, ``POST /openqna/projects/{p}:train`` and the console's button run this.

``Trainer.train`` reads the live state's records as the index reads them (vectors included: nothing is embedded
again but the feedback's and the test sets' questions), trains a query adapter for each space the project is searched
in (``training.project.train_space``: held-out questions and the test sets' questions, or without test sets the users'
questions sent as feedback, cross-validated, the ranker's verdict before and after) and writes the
adapters that win as the live state's trained model (``Store.set_trained``).  A space whose adapter does not win
keeps what it had: the previous model's adapter for it, if any.  Nothing changes in production until a deploy
copies the model with the content; a rollback restores the model the version held.  ``forget`` removes the live
state's model.  The job's result (``TrainResult.json``) is what the caller and the console show.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openqna.index.analyze import exact_key
from openqna.index.index_cache import index_records
from openqna.kb.catalog import embedder_of
from openqna.kb.jobs import Requeue, stopping
from openqna.kb.progress import Progress, publish
from openqna.kb.service import Service
from openqna.kb.test_sets import labelled_questions, no_answer_questions, project_threshold
from openqna.ranking import calibrations
from openqna.ranking.multilingual import crosses
from openqna.store import Job, Project
from openqna.store.base import LIVE
from openqna.training.adapter import QueryAdapter, Stopped, stop_when
from openqna.training.model import TrainedModel
from openqna.training.project import Labelled, Space, SpaceReport, train_space


@dataclass
class TrainResult:
    project: str
    threshold: float
    spaces: list[SpaceReport] = field(default_factory=list)
    kept: bool = False  # a new adapter was written for some space
    seconds: float = 0.0
    model_bytes: int = 0

    def json(self) -> dict[str, Any]:
        return {"project": self.project, "threshold": self.threshold, "kept": self.kept, "seconds": self.seconds,
                "modelBytes": self.model_bytes, "spaces": [s.json() for s in self.spaces]}


class Trainer:
    def __init__(self, service: Service):
        self.service = service
        self.store = service.store

    def train(self, project: str) -> TrainResult:
        """Train ``project``'s model on its live state; the adapters that win replace the live state's."""
        started = time.perf_counter()
        proj = self.service.project(project)
        self.service.check_embedder(proj)
        threshold = project_threshold(proj)
        pid = self.store.current(project)[0]
        with self.store.read_index_rows(pid, LIVE) as rows:
            stored = rows.rows()
            dim = rows.dim()
        records, _, _ = index_records(stored, [])
        questions = {row.id: row.questions for row in stored}
        spaces = [Space(self.service.embedder.name, self.service.calibration(proj), self.service.reads_cjk)]
        live = self.service.indexes.get(project, LIVE)
        if stored and all(row.mq_vectors or row.ma_vector is not None for row in stored):
            # each question read as the server reads it there (``ServiceBase.query_space``)
            spaces.append(Space(self.service.multilingual.embedder.name, calibrations.MULTILINGUAL, True,
                                multilingual=True, cross=calibrations.CROSSLINGUAL_E5))
        tests = labelled_questions(self.service, project)
        unanswerable = no_answer_questions(self.service, project)
        # a test set's questions are never learnt from (docs/authoring.md), though :from-log makes them of the
        # users' feedback: the job learnt from the very questions it was judged by (52 of 53 on one KB)
        judged = {exact_key(text) for text, _ in tests} | {exact_key(text) for text in unanswerable}
        feedback = [(text, qna_id) for qna_id, items in self.store.list_feedback(project).items()
                    for text, _ in items if qna_id in records and exact_key(text) not in judged]
        served: dict[str, str] = {}

        def read(text: str) -> str:
            """``text`` as the server reads it (its synonyms expanded, its typos corrected: ``Service.read_as``):
            judged raw, "Are all boily fluids infecstious?" read 0.24 where the server answers it at 0.67."""
            if text not in served:
                served[text] = self.service.read_as(project, LIVE, text)
            return served[text]

        previous = self.store.get_trained(project)
        had = dict(TrainedModel.from_bytes(previous.data).adapters) if previous else {}
        # an adapter of a space the project is no longer embedded in (`openqna reembed` with another embedder) is
        # never applied again: the retrain it asked for drops it, whether or not a new one wins
        adapters: dict[str, QueryAdapter] = {s: a for s, a in had.items()
                                             if s in (self.service.embedder.name, self.service.multilingual.name)}
        result = TrainResult(project, threshold)
        # a train of a large or multilingual KB runs for tens of seconds: say which space it is at (``kb.progress``)
        publish(Progress("training", 0, len(spaces), len(records), 0))
        for space in spaces:
            embedder = self.service.multilingual.embedder if space.multilingual else self.service.embedder

            def ranked_here(text: str) -> bool:  # the server ranks it in this space (``ServiceBase.query_space``)
                if self.service.multilingual.index_for(live, text) is None:
                    return not space.multilingual
                # a question crossing languages is ranked on E5's and the universal sentence encoder's vectors
                # together where the KB has both (``MemIndex.crossing``): no adapter is trained there
                return space.multilingual and not (crosses(live, text) and live.crossing() is not None)

            # users' questions, learnt from (and judged by, without test sets) in the space they are ranked in
            ours = [(read(text), qna_id) for text, qna_id in feedback if ranked_here(text)]
            vectors = embedder.embed([text for text, _ in ours]) if ours else np.zeros((0, 1), np.float32)
            sent = [Labelled(text, v, frozenset((qna_id,))) for v, (text, qna_id) in zip(vectors, ours)]
            mine = [(read(text), accepted) for text, accepted in tests if ranked_here(text)]
            outside = [read(text) for text in unanswerable if ranked_here(text)]
            outside_vectors = embedder.embed(outside) if outside else np.zeros((0, 1), np.float32)
            test_vectors = embedder.embed([text for text, _ in mine]) if mine else np.zeros((0, 1), np.float32)
            labelled = [Labelled(text, v, accepted) for v, (text, accepted) in zip(test_vectors, mine)]
            adapter, report = train_space(records, questions, dim, space, sent, threshold, labelled=labelled,
                                          no_answer=[Labelled(t, v, frozenset()) for t, v in zip(outside,
                                                                                                   outside_vectors)])
            result.spaces.append(report)
            if adapter is not None:
                adapters[space.name] = adapter
                result.kept = True
            publish(Progress("training", len(result.spaces), len(spaces), len(records), 0))
        result.seconds = round(time.perf_counter() - started, 2)
        if result.kept:
            model = TrainedModel(adapters)
            result.model_bytes = model.nbytes
            self.store.set_trained(project, model.to_bytes(), result.json(), project_id=pid)
        elif previous is not None and len(adapters) < len(had):
            self.store.set_trained(project, TrainedModel(adapters).to_bytes() if adapters else None, previous.meta,
                                   project_id=pid)
        return result

    def forget(self, project: str) -> bool:
        """Remove the live state's trained model (deployments keep theirs until the next deploy)."""
        self.service.project(project)
        had = self.store.get_trained(project) is not None
        if had:
            self.store.set_trained(project, None)
        return had

    def status(self, project: str) -> dict[str, Any]:
        """The trained model of the live state and of each deployment: when it was trained, what it measured, and
        whether it is applied (``applied``: it has an adapter for a space the deployment is searched in; ``notApplied``
        names the spaces it was trained for that the deployment's vectors are no longer in, after `openqna reembed`
        with another embedder, and says to retrain)."""
        proj = self.service.project(project)
        out: dict[str, Any] = {"project": project, "deployments": {}}
        for name in [LIVE] + [d.name for d in self.store.list_deployments(project)]:
            trained = self.store.get_trained(project, name)
            if trained is None:
                out["deployments"][name] = None
                continue
            entry: dict[str, Any] = {"trainedDateTime": trained.created, "hash": trained.hash, "report": trained.meta}
            entry.update(self.applied(proj, name, trained.data))
            out["deployments"][name] = entry
        return out

    def applied(self, proj: Project, deployment: str, data: bytes) -> dict[str, Any]:
        """Whether the model ``data`` of ``deployment`` is applied: the server keys adapters by the name of the space
        a question is ranked in, so after a re-embedding with another embedder the model's adapter for the old one
        is stored, listed and deployed but never read."""
        built = embedder_of(proj, deployment) or self.service.embedder.name
        try:
            spaces = list(TrainedModel.from_bytes(data).adapters)
        except (ValueError, KeyError, OSError):  # answered without (``TrainedModels``): say so here too
            return {"applied": False, "notApplied": "not applied: the stored model cannot be read; retrain"}
        stale = [s for s in spaces if s not in (built, self.service.multilingual.name)]
        out: dict[str, Any] = {"applied": len(stale) < len(spaces)}
        if stale:
            out["notApplied"] = (f"{'partly ' if out['applied'] else ''}not applied: trained for embedder "
                                 f"{', '.join(stale)}, and its vectors are now {built}'s (openqna reembed): retrain")
        return out

    def handle(self, job: Job) -> None:
        """The ``train`` job: its result is the report, as JSON."""
        try:
            with stop_when(stopping):
                result = self.train(job.project)
        except Stopped:
            raise Requeue from None  # nothing written: the model is stored only at the end
        job.result = json.dumps(result.json()).encode()
        job.result_name, job.result_media = "train.json", "application/json"
