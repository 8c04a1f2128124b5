"""The core: projects, records, deployments and ask() — no wire dialect here.

Surfaces (the Azure routes, the CLI) translate their requests into these calls.
Records are analysed and embedded here, once, before the store sees them;
unchanged records (same content hash and embedder) are never re-embedded, which
makes importing the same file twice a no-op.

Why this file is over 500 lines: writing records and asking share the project's embedder check,
calibration and the multilingual space (``openqna.ranking.multilingual``: which records get its vectors,
which questions are ranked in it); its next cut is the asking half (``ask``, ``rank``, follow-ups,
spans and ``:query-text``) into a module of its own.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Callable, Concatenate, Iterable, ParamSpec, TypeVar

import numpy as np
from tqdm import tqdm

from openqna.answers.span import Span, best_spans, sentence_spans
from openqna.auth.keys import Caller, allows
from openqna.filters.match import Filter, IdIn, KindIn, all_of
from openqna.filters.nodes import Column
from openqna.filters.where_str import parse_where
from openqna.formats.limits import LIMITS
from openqna.index.analyze import analyze, cjk_share, exact_key, expand_with_synonyms
from openqna.index.index_cache import IndexCache, engine_search
from openqna.index.memindex import MemIndex
from openqna.kb.catalog import Catalog
from openqna.kb.connected_search import ConnectedTables
from openqna.models.embedder import Embedder
from openqna.ranking import calibrations, followup, ranker, typos
from openqna.ranking.multilingual import FILLED, MultilingualSpace, hashed_space
from openqna.records import Conflict, InvalidArgument, KnowledgeBaseContent, NotFound, QnA
from openqna.store import Project, Store, StoredQnA, Unit
from openqna.store.base import LIVE
from openqna.turns import Turns

EMBED_BATCH = 16
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CLOCK = re.compile(r"now|today", re.IGNORECASE)  # a where_str that may read the clock is parsed on every call


@functools.lru_cache(maxsize=256)
def _parsed_where(where: str, columns: tuple[Column, ...]) -> Filter:
    """``where`` parsed over ``columns`` (filters are immutable, so repeated ones share one parse)."""
    return parse_where(where, {c.name: c for c in columns})


@dataclass
class SpanRequest:
    threshold: float = 0.0
    top_answers: int = 1


@dataclass
class AskRequest:
    question: str | None = None
    qna_id: int | None = None
    top: int = 3
    threshold: float = 0.0
    previous_qna_id: int | None = None
    previous_user_query: str | None = None
    question_only: bool = False
    filter: Filter | None = None
    include_unstructured: bool = False
    span: SpanRequest | None = None
    explain: bool = False  # fill Answer.parts (the console's Inspect)


@dataclass
class Answer:
    qna: QnA | None  # None: the project's default answer
    confidence: float
    span: Span | None = None
    default_text: str = ""
    parts: dict[str, float] = field(default_factory=dict)  # ranker.Ranked.parts, when the request asked


@dataclass
class TextAnswer:
    record_id: str
    text: str
    confidence: float
    offset: int
    length: int
    span: Span | None = None


@dataclass
class Hit:
    record: QnA
    score: float


@dataclass
class KnowledgeBaseInfo:
    name: str
    description: str
    kind: str  # "table" (typed schema) or "project" (QnAs and passages, metadata as strings)
    count: int
    columns: list[Column]
    connected: dict | None = None  # a connected table's engine, table and described columns (no secret)


@dataclass
class ImportReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    embedded: int = 0  # texts sent to the embedder
    ids: list[int] = field(default_factory=list)
    multilingual: bool = False  # the records were written with vectors in the multilingual space


def content_hash(q: QnA, embedder: str) -> str:
    payload = asdict(q)
    payload.pop("id")
    payload.pop("last_updated")
    payload["embedder"] = embedder
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


P = ParamSpec("P")
R = TypeVar("R")


def taking_turns(method: Callable[Concatenate[Service, P], R]) -> Callable[Concatenate[Service, P], R]:
    """``method`` run in a turn of the threads that ask the service (``Service.turns``)."""

    @functools.wraps(method)
    def in_turn(self: Service, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.turns is None:
            return method(self, *args, **kwargs)
        with self.turns.held():
            return method(self, *args, **kwargs)

    return in_turn


class Service(Catalog):
    def __init__(self, store: Store, embedder: Embedder, multilingual: Embedder | None = None):
        """``multilingual``: the encoder of the multilingual space (``openqna.ranking.multilingual``; default: the bundled one,
        loaded on first need)."""
        super().__init__(store)
        # Threads that ask at once (a server's query pool) take turns at their Python work, one per two cores as
        # the embedding workers, and give the turn up while they wait for the model (``openqna.turns``):
        # a server of bench/throughput.py's 10,000 QnAs at concurrency 16, 1.01-1.13x the requests/s and a lower
        # p99 in each of eight paired runs.  A remote store's reads give the turn up while they wait on the
        # network (``PostgresStore._conn``).
        self.turns = Turns(max(1, (os.cpu_count() or 1) // 2))
        self.embedder = embedder
        self.multilingual = MultilingualSpace(embedder, multilingual)
        self.indexes = IndexCache(store, nearest=engine_search(store))
        self.connected = ConnectedTables(store, embedder)

    # -- projects ----------------------------------------------------------------------
    def create_project(self, name: str, *, description: str = "", language: str = "en",
                       default_answer: str | None = None) -> Project:
        settings = {"defaultAnswer": default_answer or "No good match found in KB."}
        return self.store.create_project(Project(name, description, language, settings=settings,
                                                 embedder=self.embedder.name))

    def ensure_project(self, name: str) -> Project:
        try:
            return self.store.get_project(name)
        except NotFound:
            return self.create_project(name)

    # -- writing ---------------------------------------------------------------------
    def _embed(self, texts: list[str], progress: bool, embedder: Embedder | None = None) -> np.ndarray:
        """Embed ``texts`` (each distinct text once), similar lengths together so batches pad little."""
        embedder = embedder or self.embedder
        if not texts:
            return np.zeros((0, embedder.dim), np.float32)
        unique = list(dict.fromkeys(texts))
        order = sorted(range(len(unique)), key=lambda i: len(unique[i]))
        vectors = np.zeros((len(unique), embedder.dim), np.float32)
        bar = tqdm(total=len(unique), desc="embedding", unit="text", disable=not progress, leave=False)
        for start in range(0, len(order), EMBED_BATCH * 8):
            batch = order[start : start + EMBED_BATCH * 8]
            vectors[batch] = embedder.embed([unique[i] for i in batch])
            bar.update(len(batch))
        bar.close()
        position = {t: i for i, t in enumerate(unique)}
        return vectors[[position[t] for t in texts]]

    def prepare(self, qnas: list[QnA], hashes: list[str], progress: bool = False,
                reuse: dict[int, dict[tuple[str, int], np.ndarray]] | None = None,
                multilingual: bool = False) -> tuple[list[StoredQnA], int]:
        """Analyse and embed records: one unit per question and one for the answer.

        ``reuse`` holds vectors already stored for these records' ids; a record whose
        question and answer texts are unchanged keeps them.  ``multilingual``: each unit
        also gets its vector in the multilingual space (units "mq" and "ma", no terms).
        Returns the records and how many texts were embedded.
        """
        reuse = reuse or {}
        spaces = (("q", "a", None),) + ((("mq", "ma", self.multilingual.embedder),) if multilingual else ())
        fresh: dict[tuple[int, str, int], np.ndarray] = {}
        embedded = 0
        for q_field, a_field, embedder in spaces:
            texts: list[str] = []
            slots: list[tuple[int, str, int]] = []
            for i, q in enumerate(qnas):
                stored = reuse.get(q.id, {}) if q.id is not None else {}
                for fld, ord_, text in [(q_field, n, t) for n, t in enumerate(q.questions)] + [(a_field, 0, q.answer)]:
                    if (fld, ord_) not in stored:
                        texts.append(text)
                        slots.append((i, fld, ord_))
            vectors = self._embed(texts, progress, embedder)
            fresh.update({slot: vectors[j] for j, slot in enumerate(slots)})
            embedded += len(texts)
        items = []
        for i, (q, h) in enumerate(zip(qnas, hashes)):
            stored = reuse.get(q.id, {}) if q.id is not None else {}

            def vector(field: str, ord_: int):
                return fresh[(i, field, ord_)] if (i, field, ord_) in fresh else stored[(field, ord_)]

            units = [Unit("q", n, analyze(question), vector("q", n)) for n, question in enumerate(q.questions)]
            units.append(Unit("a", 0, analyze(q.answer), vector("a", 0)))
            if multilingual:
                units += [Unit("mq", n, [], vector("mq", n)) for n in range(len(q.questions))]
                units.append(Unit("ma", 0, [], vector("ma", 0)))
            items.append(StoredQnA(q, units, h))
        return items, embedded

    def _reusable(self, project: str, qnas: list[QnA]) -> dict[int, dict[tuple[str, int], np.ndarray]]:
        """Stored vectors of ``qnas``' units whose text did not change (same question or answer)."""
        ids = [q.id for q in qnas if q.id is not None]
        old = self.store.get_qnas(project, ids) if ids else {}
        if not old:
            return {}
        stored = self.store.get_vectors(project, list(old))
        out: dict[int, dict[tuple[str, int], np.ndarray]] = {}
        for q in qnas:
            prev, vectors = old.get(q.id), stored.get(q.id, {})
            if prev is None:
                continue
            texts = {(f, 0): q.answer for f in ("a", "ma")} | {(f, n): t for n, t in enumerate(q.questions)
                                                              for f in ("q", "mq")}
            before = {(f, 0): prev.answer for f in ("a", "ma")} | {(f, n): t for n, t in enumerate(prev.questions)
                                                                   for f in ("q", "mq")}
            keep = {unit: vectors[unit] for unit, text in texts.items() if before.get(unit) == text and unit in vectors}
            if keep:
                out[q.id] = keep
        return out

    def _check_embedder(self, project: Project) -> None:
        """Vectors from two embedders live in different spaces: never mix or compare them."""
        if project.embedder and project.embedder != self.embedder.name:
            raise Conflict(
                f"Project '{project.name}' was built with embedder '{project.embedder}', this server runs "
                f"'{self.embedder.name}'; re-embed it with `openqna reembed {project.name}` first."
            )

    def reembed(self, project: str, *, progress: bool = False) -> int:
        """Re-embed every record of the live state with this server's embedder; returns the count.

        Vectors in the multilingual space are made where ``OPENQNA_MULTILINGUAL`` wants them now (``auto``: the
        project has CJK text), dropped elsewhere; those already stored are kept, as are the main vectors when the
        project was embedded by this server's embedder already.
        """
        proj = self.store.get_project(project)
        qnas = self.store.list_qnas(project)
        proj.settings.pop(FILLED, None)  # decided again from every record
        multilingual = self.multilingual.wanted(proj, qnas)
        hashes = [content_hash(q, hashed_space(self.embedder.name, multilingual)) for q in qnas]
        reuse = self._reusable(project, qnas)
        if proj.embedder != self.embedder.name:  # another model's vectors: only the multilingual ones still serve
            reuse = {i: {u: v for u, v in units.items() if u[0] in ("mq", "ma")} for i, units in reuse.items()}
        self.store.put_qnas(project, self.prepare(qnas, hashes, progress, reuse, multilingual)[0])
        proj = self.store.get_project(project)
        proj.embedder = self.embedder.name
        proj.settings[FILLED] = multilingual
        self.store.update_project(proj)
        return len(qnas)

    def fill_multilingual(self, project: str, *, progress: bool = False) -> int:
        """Give every live record of ``project`` its vectors in the multilingual space (those written without them:
        the content hash tells); returns how many records were filled."""
        qnas = self.store.list_qnas(project)
        existing = self.store.content_hashes(project)
        name = hashed_space(self.embedder.name, True)
        todo = [q for q in qnas if existing.get(q.id) != content_hash(q, name)]
        if todo:
            items, _ = self.prepare(todo, [content_hash(q, name) for q in todo], progress,
                                    self._reusable(project, todo), multilingual=True)
            self.store.put_qnas(project, items)
        return len(todo)

    def _settle_multilingual(self, project: str, multilingual: bool, progress: bool) -> None:
        """After a write: fill the space if the records just written have it and the others may not; note it."""
        proj = self.store.get_project(project)
        if bool(proj.settings.get(FILLED)) == multilingual:
            return
        if multilingual:
            self.fill_multilingual(project, progress=progress)
        proj = self.store.get_project(project)
        proj.settings[FILLED] = multilingual
        self.store.update_project(proj)

    def upsert(self, project: str, qnas: Iterable[QnA], *, progress: bool = False,
               match_content: bool = True) -> ImportReport:
        """Add or update records; unchanged ones are skipped, so repeating an import is a no-op.

        A record with an id replaces that id.  One without is, when ``match_content`` (imports),
        matched to an existing record with the same content, else to the one existing record
        with its source and answer; without it (explicit "add" edits) it becomes a new record.
        """
        report, items = self.plan_upsert(project, qnas, progress=progress, match_content=match_content)
        if items:
            report.ids.extend(self.store.put_qnas(project, items))
        self._record_embedder(project)
        self._settle_multilingual(project, report.multilingual, progress)
        return report

    def replace_records(self, project: str, qnas: Iterable[QnA], *, synonyms: list[list[str]] | None = None,
                        progress: bool = False) -> ImportReport:
        """Make ``qnas`` (and ``synonyms``, when given) the project's whole live content in one transaction.

        An import upserts, deletes the records that are gone and sets synonyms: written apart, a crash
        between them would leave a half-applied import that queries answer from.
        """
        report, items = self.plan_upsert(project, qnas, progress=progress)
        keep = set(report.ids) | {item.qna.id for item in items if item.qna.id is not None}
        stale = [i for i in self.store.content_hashes(project) if i not in keep]
        report.ids.extend(self.store.replace_qnas(project, items, stale, synonyms))
        self._record_embedder(project)
        self._settle_multilingual(project, report.multilingual, progress)
        return report

    def _record_embedder(self, project: str) -> None:
        proj = self.store.get_project(project)
        if proj.embedder is None:
            proj.embedder = self.embedder.name
            self.store.update_project(proj)

    def plan_upsert(self, project: str, qnas: Iterable[QnA], *, progress: bool = False,
                    match_content: bool = True) -> tuple[ImportReport, list[StoredQnA]]:
        """What ``upsert`` would write: the report (unchanged ids in it) and the analysed, embedded records."""
        qnas = list(qnas)
        proj = self.store.get_project(project)
        self._check_embedder(proj)
        existing = self.store.content_hashes(project)
        by_hash: dict[str, list[int]] = {}
        for rid, h in existing.items():
            by_hash.setdefault(h, []).append(rid)
        by_answer: dict[tuple[str, str], list[int]] = {}
        for q in self.store.list_qnas(project) if match_content else ():  # "add" edits match nothing
            by_answer.setdefault((q.source.lower(), q.answer), []).append(q.id)
        claimed = {q.id for q in qnas if q.id is not None}
        report = ImportReport(multilingual=self.multilingual.wanted(proj, qnas, len(existing)))
        space = hashed_space(self.embedder.name, report.multilingual)
        todo, hashes = [], []
        for q in qnas:
            q.normalised()
            h = content_hash(q, space)
            if q.id is None and match_content:
                same = [i for i in by_hash.get(h, ()) if i not in claimed]
                similar = [i for i in by_answer.get((q.source.lower(), q.answer), ()) if i not in claimed]
                q.id = same[0] if same else similar[0] if len(similar) == 1 else None
                if q.id is not None:
                    claimed.add(q.id)
            if q.id is not None and existing.get(q.id) == h:
                report.unchanged += 1
                report.ids.append(q.id)
                continue
            if q.id is not None and q.id in existing:
                report.updated += 1
            else:
                report.added += 1
            todo.append(q)
            hashes.append(h)
        items: list[StoredQnA] = []
        if todo:
            items, report.embedded = self.prepare(todo, hashes, progress, self._reusable(project, todo),
                                                  report.multilingual)
        return report, items

    def import_content(self, project: str, content: KnowledgeBaseContent, *, progress: bool = False) -> ImportReport:
        self.ensure_project(project)
        report = self.upsert(project, content.qnas, progress=progress)
        if content.synonyms:
            merged = self.store.get_synonyms(project)
            for group in content.synonyms:
                if group not in merged:
                    merged.append(group)
            if merged != self.store.get_synonyms(project):
                self.store.set_synonyms(project, merged)
        return report

    def delete_project(self, project: str) -> None:
        """Delete ``project`` and everything of it, its indexes in this process and on disk too."""
        pid = self.store.current(project)[0]
        self.store.delete_project(project)
        self.indexes.drop(pid)
        self.connected.drop(project)

    # -- knowledge bases as tools -------------------------------------------------------------
    def columns(self, kb: str, deployment: str = LIVE) -> list[Column]:
        """The columns ``where_str`` may name: a table's schema, else metadata keys as Strings plus ``source``."""
        return self._columns(self.store.get_project(kb), lambda: self.indexes.get(kb, deployment))

    @staticmethod
    def _columns(proj: Project, index: Callable[[], MemIndex]) -> list[Column]:
        raw = proj.settings.get("schema")
        if raw:
            columns = [Column(c["name"], c["type"]) for c in raw["columns"]]
            if proj.settings.get("connected"):  # its engine's columns, nothing of openqna's own
                return columns
            return columns + ([Column("source", "String")] if all(c.name != "source" for c in columns) else [])
        names = [k for k in index().metadata_keys() if _IDENT.match(k) and k != "source"]
        return [Column(k, "String") for k in names] + [Column("source", "String")]

    def warm(self) -> list[tuple[str, str]]:
        """Load the saved indexes (large knowledge bases) and fit their adaptations now, not on a first question.

        ``openqna serve`` calls this before it listens, so /healthz answers only once the large
        knowledge bases answer at full speed.  Small ones build in well under a second on their
        first question.  Returns the (project, deployment) pairs loaded.
        """
        from openqna.ranking import ranker

        loaded = self.indexes.saved()
        for project, deployment in loaded:
            ranker.kb_adaptation(self.indexes.get(project, deployment), self.shipped_calibration)
        return loaded

    def knowledge_bases(self, key: Caller | None = None) -> list[KnowledgeBaseInfo]:
        out = []
        for p in self.store.list_projects():
            if p.settings.get("openai_file") or not allows(key, role="query", project=p.name):
                continue
            kind = "table" if p.settings.get("schema") else "project"
            link = p.settings.get("connected")
            count = p.settings["connected_rows"] if link else self.store.count_qnas(p.name)
            out.append(KnowledgeBaseInfo(p.name, p.description, kind, count, self.columns(p.name),
                                         connected=link))
        return out

    @taking_turns
    def search(self, kb: str, subject: str, *, where: str | None = None, limit: int = 4,
               deployment: str = LIVE) -> list[Hit]:
        """Hybrid search over every record of ``kb`` (QnAs, passages, rows), filtered inside retrieval."""
        proj = self.store.get_project(kb)
        if proj.settings.get("connected"):
            return self._search_connected(proj, subject, where, limit)
        index = self.indexes.get(kb, deployment)
        flt = None
        if where and where.strip():  # the columns read the index's metadata keys (once per index version)
            columns = tuple(self._columns(proj, lambda: index))
            flt = (parse_where(where, {c.name: c for c in columns}) if _CLOCK.search(where)
                   else _parsed_where(where, columns))
        if index.n and flt is None and not subject.strip():
            raise InvalidArgument("'subject' must not be empty.", target="subject")
        self._check_embedder(proj)
        ranked = self.rank_queries(index, [subject], flt, top=limit, calibration=self.calibration(proj))[0]
        records = self.store.get_qnas(kb, [r.record_id for r in ranked], deployment)
        return [Hit(records[r.record_id], round(r.confidence, 4)) for r in ranked if r.record_id in records]

    def _search_connected(self, proj: Project, subject: str, where: str | None, limit: int) -> list[Hit]:
        """A connected table's search runs in its own engine (``kb/connected_search.py``); where_str is parsed here."""
        if not subject.strip():
            raise InvalidArgument("'subject' must not be empty.", target="subject")
        columns = tuple(self._columns(proj, lambda: self.indexes.get(proj.name)))
        flt = None
        if where and where.strip():
            flt = (parse_where(where, {c.name: c for c in columns}) if _CLOCK.search(where)
                   else _parsed_where(where, columns))
        return [Hit(record, score) for record, score in self.connected.search(proj, subject, flt, list(columns),
                                                                               limit)]

    @taking_turns
    def rank_queries(self, index: MemIndex, queries: list[str], flt: Filter | None, *, top: int,
                     calibration: calibrations.Calibration, threshold: float = 0.0) -> list[list[ranker.Ranked]]:
        """Each query's ``top`` records of ``index`` inside ``flt`` with confidence ≥ ``threshold``, best first.

        The one hybrid-search pipeline behind ``search`` and the vector stores' search (which asks
        several queries at once, embedded in one call, and keeps each record's best).
        """
        eligible = index.mask(flt)
        views = [self.multilingual.index_for(index, query) for query in queries]
        main = iter(self.embedder.embed([q for q, view in zip(queries, views) if view is None]))
        spaced = [q for q, view in zip(queries, views) if view is not None]
        other = iter(self.multilingual.embedder.embed(spaced) if spaced else [])
        return [ranker.rank(index, query, next(main), eligible, top=top, threshold=threshold, flt=flt,
                            calibration=calibration, reads_cjk=self.reads_cjk) if view is None else
                ranker.rank(view, query, next(other), eligible, top=top, threshold=threshold,
                            calibration=calibrations.MULTILINGUAL)
                for query, view in zip(queries, views)]

    # -- asking -----------------------------------------------------------------------
    def ask(self, project: str, deployment: str, req: AskRequest) -> list[Answer]:
        """Azure's query semantics: qnaId lookup, context, filters, threshold, one default answer."""
        return self.ask_in(project, deployment, req)[0]

    @taking_turns
    def ask_in(self, project: str, deployment: str, req: AskRequest) -> tuple[list[Answer], Project]:
        """``ask``, with the project as read for it (its settings, such as the query log's, need no second read)."""
        proj = self.store.get_project(project)
        index = self.indexes.get(project, deployment)
        if req.qna_id is None and index.n:
            self._check_embedder(proj)
        if req.qna_id is not None:
            found = self.store.get_qnas(project, [req.qna_id], deployment).get(req.qna_id)
            answers = [Answer(found, 1.0)] if found else []
        else:
            answers, vector = self._search(project, deployment, index, req, self.calibration(proj))
            if answers and req.span is not None:
                self._add_spans(req, vector, answers)
        if not answers:
            return [Answer(None, 0.0, default_text=proj.default_answer)], proj
        return answers, proj

    @property
    def reads_cjk(self) -> bool:
        """Whether the embedder reads Chinese, Japanese and Korean (the bundled MiniLM does not)."""
        return getattr(self.embedder, "reads_cjk", True)

    @property
    def shipped_calibration(self) -> calibrations.Calibration:
        """The ranker's calibration for this service's embedder, as fitted on development data."""
        return calibrations.calibration_for(self.embedder.name)

    def calibration(self, project: Project) -> calibrations.Calibration:
        """The project's confidence calibration: the shipped one, with ``openqna calibrate``'s fit if it has one."""
        fitted = project.settings.get("calibration")
        if not fitted:
            return self.shipped_calibration
        return calibrations.rescaled(self.shipped_calibration, float(fitted["scale"]), float(fitted["shift"]))

    def _search(self, project: str, deployment: str, index, req: AskRequest,
                calibration: calibrations.Calibration) -> tuple[list[Answer], np.ndarray]:
        ranked, vector = self.rank(project, deployment, index, req, calibration)
        qnas = self.store.get_qnas(project, [r.record_id for r in ranked], deployment)
        return [Answer(qnas[r.record_id], round(r.confidence, 4), parts=r.parts) for r in ranked
                if r.record_id in qnas], vector

    def rank(self, project: str, deployment: str, index, req: AskRequest,
             calibration: calibrations.Calibration | None = None) -> tuple[list[ranker.Ranked], np.ndarray]:
        """What ``ask`` ranks for ``req`` (unrounded), and the query vector; ``calibration`` overrides the project's.

        A question with Chinese, Japanese or Korean text asked of a knowledge base with the multilingual space is
        ranked there, with that space's own calibration (``openqna.ranking.multilingual``).
        """
        question = req.question or ""
        embedder, reads_cjk = self.embedder, self.reads_cjk
        synonyms = index.synonyms
        if synonyms is None:  # once per index version (``MemIndex.synonyms``)
            synonyms = index.synonyms = self.store.get_synonyms(project, deployment)
        view = self.multilingual.index_for(index, question)
        if view is not None:
            index, embedder, reads_cjk, calibration = view, self.multilingual.embedder, True, calibrations.MULTILINGUAL
        calibration = calibration or self.calibration(self.store.get_project(project))
        kinds = ("qna", "passage") if req.include_unstructured else ("qna",)
        flt = all_of(req.filter, KindIn(kinds))
        eligible = index.mask(flt)
        children: set[int] = set()
        exact_prompt: set[int] = set()
        asked_prompts: set[int] = set()  # prompts whose display text the question asks (``followup.prompt_matches``)
        if req.previous_qna_id is not None:
            prev = self.store.get_qnas(project, [req.previous_qna_id], deployment).get(req.previous_qna_id)
            if prev is not None:
                key = exact_key(question)
                for p in prev.dialog.prompts:
                    children.add(p.qna_id)
                    if exact_key(p.display_text) == key:
                        exact_prompt.add(p.qna_id)
                asked_prompts = followup.prompt_matches(question, {p.qna_id: p.display_text
                                                                   for p in prev.dialog.prompts})
        eligible &= ~index.context_only | index.mask(IdIn(tuple(children)))
        expanded = typos.correct(index, expand_with_synonyms(question, synonyms))
        previous = (req.previous_user_query or "").strip()
        # The expanded question is what the vector and the keyword features read; the exact match reads the
        # question as asked (``rank``'s ``keywords``), so synonyms never lower a stored question asked word for word.
        # One text a call: the embedder caches single queries, and the previous one was asked a turn ago.
        vectors = np.concatenate([embedder.embed([text]) for text in
                                  [expanded] + ([expand_with_synonyms(previous, synonyms)] if previous else [])])
        vector = vectors[0]
        options = dict(question_only=req.question_only, boosted_ids=children, exact_prompt_ids=exact_prompt,
                       calibration=calibration, flt=None if view is not None else flt, reads_cjk=reads_cjk)
        offsets: dict[int, float] = {}
        # the filter a store pushes into its own vector search, per kind ranked (none in the multilingual space)
        kind_flt = {kind: None if view is not None else all_of(req.filter, KindIn((kind,)))
                    for kind in ("qna", "passage")}

        def alone(mask: np.ndarray, kind: str | None) -> list[ranker.Ranked]:
            """The question without the conversation, as the cap of what the context may give (``followup.capped``)."""
            return ranker.rank(index, question, vectors[0], mask, top=followup.POOL, keywords=expanded,
                               **{**options, "boosted_ids": frozenset(), "exact_prompt_ids": frozenset(),
                                  **({"flt": kind_flt[kind]} if kind else {})})

        first = alone(eligible, None) if children or previous else []
        if previous:
            vector, offsets = self._follow_up(project, deployment, index, eligible, question, previous,
                                              first[0].confidence if first else 0.0, expanded, vectors, options,
                                              embedder)
        evidence = (asked_prompts | exact_prompt | followup.records_with_words(index, question)
                    if children or previous else set())

        def ranked_in(mask: np.ndarray, kind: str | None) -> list[ranker.Ranked]:
            """The records of ``mask`` (of one ``kind``, or any) ranked, with the conversation's evidence."""
            extra = {"flt": kind_flt[kind]} if kind else {}
            if not children and not previous:
                return ranker.rank(index, question, vector, mask, top=req.top, keywords=expanded,
                                   threshold=req.threshold, explain=req.explain, **{**options, **extra})
            contextual = ranker.rank(index, question, vector, mask, logit_offsets=offsets,
                                     top=max(req.top, followup.POOL), keywords=expanded, explain=req.explain,
                                     **{**options, **extra})
            capped = followup.capped(contextual, alone(mask, kind) if kind else first, evidence,
                                     prompted=exact_prompt)
            return [r for r in capped if r.confidence >= req.threshold][: req.top]

        passages = eligible & index.passage
        if not passages.any() or not (eligible & ~index.passage).any():
            return ranked_in(eligible, None), vector
        # Passages compete for rank, not for the scale: a QnA's confidence is what it is without them (the last
        # step reads every candidate as a rival), and a passage's is read among the passages.
        qnas = ranked_in(eligible & ~index.passage, "qna")
        found = ranked_in(passages, "passage")
        return sorted(qnas + found, key=lambda r: -r.confidence)[: req.top], vector

    def _follow_up(self, project: str, deployment: str, index, eligible: np.ndarray, question: str, previous: str,
                   confidence: float, expanded: str, vectors: np.ndarray, options: dict,
                   embedder: Embedder) -> tuple[np.ndarray, dict[int, float]]:
        """The query vector and logit offsets of a question asked after ``previousUserQuery`` (see followup);
        ``confidence``: the question's best without context."""
        if confidence >= 1.0 or not followup.needs_context(question, confidence):
            return vectors[0], {}
        vector = followup.context_vector(vectors[0], vectors[1])
        candidates = ranker.rank(index, question, vector, eligible, top=followup.CANDIDATES, keywords=expanded,
                                 **options)
        qnas = self.store.get_qnas(project, [r.record_id for r in candidates], deployment)
        qsims = dict(zip(qnas, index.q.dense_rows(vector, np.asarray([index.row_of[i] for i in qnas], np.int64))))

        def gain(ids: list[int], sentences: np.ndarray) -> np.ndarray:
            rows = np.asarray([index.row_of[i] for i in ids], np.int64)
            return ranker.question_gain(index, vector, rows, sentences, options["calibration"])

        offsets = followup.sentence_offsets(vector, {i: q.answer for i, q in qnas.items()},
                                            {i: float(qsims[i]) for i in qnas},
                                            embedder.embed, gain, f"{question} {previous}")
        return vector, offsets

    def reader(self, question: str) -> Embedder:
        """The embedder that reads ``question``'s answer spans: the multilingual one for a CJK question (when the
        setting is not ``off``), else this service's."""
        return self.multilingual.embedder if self.multilingual.reads(question) else self.embedder

    def _add_spans(self, req: AskRequest, vector: np.ndarray, answers: list[Answer]) -> None:
        """Answer spans; ``vector``, the question's in the space it was ranked in, is made again by ``reader``."""
        assert req.span is not None
        chosen = answers[: req.span.top_answers]
        reader = self.reader(req.question or "")
        if reader is not self.embedder:
            vector = reader.embed([req.question or ""])[0]  # a cache hit when it was ranked in that space
        spans = best_spans(req.question or "", vector, [a.qna.answer for a in chosen], reader.embed)
        for answer, span in zip(chosen, spans):
            if span is not None and span.confidence >= req.span.threshold:
                answer.span = span

    @taking_turns
    def answer_from_text(self, question: str, records: list[tuple[str, str]], *,
                         span: bool = True) -> list[TextAnswer]:
        """Azure's :query-text: the best passages of ad-hoc records, ≤3 per record, best first."""
        passages: list[tuple[str, int, int]] = []
        for rid, text in records:
            for s, e in passages_of(text):
                passages.append((rid, s, e))
        if not passages:
            return []
        texts = [dict(records)[rid][s:e] for rid, s, e in passages]
        vectors = self.embedder.embed([question] + texts)
        qv, pv = vectors[0], vectors[1:]
        q_terms = set(analyze(question, bigrams=False))
        overlaps = [len(q_terms & set(analyze(text, bigrams=False))) / max(len(q_terms), 1) for text in texts]
        unread = 0.0 if self.reads_cjk else cjk_share(question)
        scores = ranker.text_confidences(calibrations.QUERY_TEXT, pv @ qv,
                                         np.asarray(overlaps), unread).tolist()
        order = sorted(range(len(passages)), key=lambda i: -scores[i])
        out: list[TextAnswer] = []
        per_record: dict[str, int] = {}
        for i in order:
            rid, s, e = passages[i]
            if per_record.get(rid, 0) >= LIMITS.text_answers_per_record:
                continue
            per_record[rid] = per_record.get(rid, 0) + 1
            out.append(TextAnswer(rid, texts[i], scores[i], s, e - s))
        if span and out:
            reader = self.reader(question)
            if reader is not self.embedder:
                qv = reader.embed([question])[0]
            best = best_spans(question, qv, [out[0].text], reader.embed)[0]
            out[0].span = best
        return out


def passages_of(text: str, max_chars: int = 400) -> list[tuple[int, int]]:
    """Group consecutive sentences into passages of up to ``max_chars``."""
    out: list[tuple[int, int]] = []
    for s, e in sentence_spans(text):
        if out and e - out[-1][0] <= max_chars and s - out[-1][1] <= 2:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out
