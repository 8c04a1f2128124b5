"""Searching knowledge bases as tools do: MyScale's ``get_related``, MCP, vector stores; ``where_str`` filters.

``rank_queries`` is the hybrid-search pipeline behind ``search`` and the vector stores' search.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from openqna import settings
from openqna.auth.keys import Caller, allows
from openqna.filters.match import Filter
from openqna.filters.nodes import Column, folded, with_columns
from openqna.filters.where_str import parse_where
from openqna.index.memindex import MemIndex
from openqna.kb.attribute_columns import attribute_where_columns, without_attribute_columns
from openqna.kb.catalog import kind_of
from openqna.kb.service_base import QuerySpace, ServiceBase, taking_turns
from openqna.ranking import calibrations, ranker
from openqna.ranking.multilingual import own_language_rows
from openqna.records import InvalidArgument, NotFound, ProjectNotFound, QnA, blank
from openqna.store import Project
from openqna.store.base import LIVE

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_CLOCK = re.compile(r"now|today", re.IGNORECASE)  # a where_str that may read the clock is parsed on every call

@functools.lru_cache(maxsize=256)
def _parsed_where(where: str, columns: tuple[Column, ...]) -> Filter:
    """``where`` parsed over ``columns`` (filters are immutable, so repeated ones share one parse)."""
    return parse_where(where, {c.name: c for c in columns})

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
    # searched in its live state whatever deployment a caller pins: a connected table (its engine holds its only
    # state) and an OpenAI vector store (OpenAI's have no deployments; openqna answers from the live one)
    live_only: bool = False


class Searching(ServiceBase):
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
        columns = [Column(k, "String") for k in names] + [Column("source", "String")]
        attributes = Searching._attributes(proj, index)
        return columns + [Column(key, c.type) for key, c in attributes.items()]

    @staticmethod
    def _attributes(proj: Project, index: Callable[[], MemIndex]) -> dict[str, Column]:
        """A vector store's file attributes as where_str columns: key → the column that stores it (else empty)."""
        if kind_of(proj) != "vector store":
            return {}
        built = index()
        return built.derived("attribute_columns", lambda: attribute_where_columns(
            (row.get("attributes") for row in built.rows), ["source", *built.metadata_keys()]))

    def warm(self) -> list[tuple[str, str]]:
        """Load the saved indexes (large knowledge bases) and fit their adaptations now, not on a first question.

        ``openqna serve`` calls this before it listens, so /healthz answers only once the large
        knowledge bases answer at full speed.  Small ones build in well under a second on their
        first question.  The typo dictionary is read here too: its tokenizer holds the interpreter lock while it
        loads, and each thread of a first burst of questions loaded it at once, which kept the event loop from
        answering for 1-2 s (bench/soak.py's storm of clients).  Returns the (project, deployment) pairs loaded.
        """
        from openqna.ranking import ranker, typos

        if settings.typo_tolerance():
            typos.dictionary()
        loaded = self.indexes.saved()
        for project, deployment in loaded:
            index = self.indexes.get(project, deployment)
            model = self.trained.get(project, deployment, index.version)
            ranker.kb_adaptation(index, self.calibration(self.store.get_project(project)),  # its near-topic share
                                 None if model is None else model.adapter_for(self.embedder.name))
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
                                         connected=link, live_only=bool(link) or kind_of(p) == "vector store"))
        return out

    @taking_turns
    def search(self, kb: str, subject: str, *, where: str | None = None, limit: int = 4,
               deployment: str = LIVE) -> list[Hit]:
        """Hybrid search over every record of ``kb`` (QnAs, passages, rows), filtered inside retrieval."""
        if deployment.lower() == LIVE:  # "Test" is the live state, as Azure's runtime reads it
            deployment = LIVE
        proj = self.store.get_project(kb)
        if proj.settings.get("connected"):
            if deployment != LIVE:  # the table in its engine is its only state
                raise NotFound(f"Deployment '{deployment}' of '{kb}' was not found: a connected table has no "
                               f"deployments; leave the deployment out (or name '{LIVE}') to search it.")
            return self._search_connected(proj, subject, where, limit)
        try:
            index = self.indexes.get(kb, deployment)
        except NotFound as exc:  # a deployment the project lacks: say which it has, as Azure's runtime does
            if isinstance(exc, ProjectNotFound):
                raise
            raise self.deployment_not_found(kb, deployment) from None
        flt = None
        if where and where.strip():  # the columns read the index's metadata keys (once per index version)
            columns = tuple(self._columns(proj, lambda: index))
            flt = (parse_where(where, {c.name: c for c in columns}) if _CLOCK.search(where)
                   else _parsed_where(where, columns))
            flt = with_columns(flt, self._attributes(proj, lambda: index))
            if not proj.settings.get("schema") and kind_of(proj) != "vector store":  # a QnA's metadata, lower-cased
                flt = folded(flt, frozenset(index.metadata_keys()) - {"source"})
        if index.n and flt is None and blank(subject):
            raise InvalidArgument("'subject' must not be empty.", target="subject")
        self.check_embedder(proj, deployment)
        ranked = self.rank_queries(index, [subject], flt, top=limit, calibration=self.calibration(proj),
                                   trained=(kb, deployment))[0]
        records = self.store.get_qnas(kb, [r.record_id for r in ranked], deployment)
        if kind_of(proj) == "vector store":  # the attributes' storage columns stay inside
            for record in records.values():
                record.fields = without_attribute_columns(record.fields)
        return [Hit(records[r.record_id], round(r.confidence, 4)) for r in ranked if r.record_id in records]

    def _search_connected(self, proj: Project, subject: str, where: str | None, limit: int) -> list[Hit]:
        """A connected table's search runs in its own engine (``kb/connected_search.py``); where_str is parsed here."""
        if blank(subject):
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
                     calibration: calibrations.Calibration, threshold: float = 0.0,
                     trained: tuple[str, str] | None = None) -> list[list[ranker.Ranked]]:
        """Each query's ``top`` records of ``index`` inside ``flt`` with confidence ≥ ``threshold``, best first.

        The one hybrid-search pipeline behind ``search`` and the vector stores' search (which asks
        several queries at once, embedded in one call, and keeps each record's best).  ``trained``: the (project,
        deployment) whose trained adapter, if any, maps the query vectors.  A search page is never empty for a query
        that is not blank: at ``threshold`` 0 the records it gives no evidence for (a Japanese query of an English
        KB) come back with confidence 0, ordered as the embedder reads them (``ranker.rank``'s ``every_record``).
        A ``flt`` restricts the records a page holds, not what a score means: the records it leaves out are read as
        rivals, a little lower, as ``ask`` reads a metadata filter's (``ranker.filtered_out``).
        """
        eligible = index.mask(flt)
        rivals = None if flt is None else np.ones(index.n, dtype=bool)
        project, deployment = trained if trained is not None else (None, None)
        spaces = [self.query_space(index, query, calibration, project=project, deployment=deployment)
                  for query in queries]
        vectors: dict[int, np.ndarray] = {}
        for embedder in dict.fromkeys(space.embedder for space in spaces):  # one call per space, in order
            mine = [i for i, space in enumerate(spaces) if space.embedder is embedder]
            for i, vector in zip(mine, spaces[mine[0]].mapped(embedder.embed([queries[i] for i in mine]))):
                vectors[i] = vector

        def ranked(space: QuerySpace, query: str, vector: np.ndarray, rows: np.ndarray | None) -> list[ranker.Ranked]:
            return ranker.rank(space.index, query, vector, eligible if rows is None else eligible & rows, top=top,
                               threshold=threshold, flt=None if space.multilingual else flt,
                               calibration=space.calibration, reads_cjk=space.reads_cjk, query_map=space.adapter,
                               every_record=True, pool=rivals if rivals is None or rows is None else rivals & rows)

        out = []
        for i, (query, space) in enumerate(zip(queries, spaces)):
            # across languages, the records in the query's own language are read as one language (``Asking.rank``)
            own = own_language_rows(index, query) if space.crossing else None
            if own is None or not own.any() or own.all():
                out.append(ranked(space, query, vectors[i], None))
                continue
            theirs = self.query_space(index, query, calibration, project=project, deployment=deployment, across=False)
            both = ranked(space, query, vectors[i], ~own) + ranked(theirs, query, theirs.mapped(
                theirs.embedder.embed([query]))[0], own)
            out.append(sorted(both, key=lambda r: -r.confidence)[:top])
        return out
