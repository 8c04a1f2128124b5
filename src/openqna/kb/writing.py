"""Writing a knowledge base's records: projects, records analysed and embedded once, imports, re-embedding.

Records are analysed and embedded here, once, before the store sees them; unchanged records (same
content hash and embedder) are never re-embedded, which makes importing the same file twice a no-op.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

import numpy as np
from tqdm import tqdm

from openqna.index.analyze import analyze
from openqna.index.markdown_text import without_urls
from openqna.kb.catalog import DEPLOYED_WITH, VERSIONS_WITH
from openqna.kb.progress import Progress, publish
from openqna.kb.service_base import ServiceBase
from openqna.kb.suggestion_counts import feedback_taken_out
from openqna.models.embedder import Embedder
from openqna.ranking.multilingual import (
    E5_ONLY,
    FILLED,
    cjk_text_rows,
    e5_current,
    filled,
    filled_value,
    hashed_space,
    outdated,
)
from openqna.records import Conflict, InvalidArgument, KnowledgeBaseContent, NotFound, QnA
from openqna.store import Project, StoredQnA, Unit
from openqna.store.base import MULTILINGUAL_FIELDS

EMBED_BATCH = 16
# ``fill_multilingual`` embeds and writes this many records at a time: what it wrote stays written (the content hash
# says so), so a server stopped while it upgrades a large store (``openqna serve``; a supervisor that finds it not yet
# listening may stop it) goes on from there when it starts again, rather than from the first record
FILL_CHUNK = 500

@dataclass
class ImportReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    embedded: int = 0  # texts sent to the embedder
    ids: list[int] = field(default_factory=list)
    multilingual: bool = False  # the records were written with vectors in the multilingual space
    synonyms_added: int = 0  # synonym groups of the content the project did not hold yet (``import_content``)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a knowledge base, or None.

    Every surface puts the name in a URL path (``/get_related_{kb}``, ``/tools/{kb}/search``, the Azure and console
    routes), and a path segment cannot hold it when it has '/' (a router splits there, even percent-encoded, as
    servers decode the path first), a backslash (which browsers and some clients turn into '/'), is '.' or '..'
    (which clients resolve away) or holds control characters.  Spaces and letters outside ASCII are fine: they are
    percent-encoded.
    """
    if not name.strip():
        return "a knowledge base name must not be empty"
    bad = sorted({c for c in name if c in "/\\" or not c.isprintable()})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return (f"a knowledge base name cannot hold {shown}: every API puts the name in a URL path, where it would "
                f"not reach its routes; use letters, digits, spaces, '-', '_' or '.' instead")
    if name in (".", ".."):
        return f"a knowledge base cannot be named '{name}': clients resolve it away in a URL path"
    return None


def content_hash(q: QnA, embedder: str) -> str:
    payload = asdict(q)
    payload.pop("id")
    payload.pop("last_updated")
    payload["embedder"] = embedder
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class Writing(ServiceBase):
    # -- projects ----------------------------------------------------------------------
    def create_project(self, name: str, *, description: str = "", language: str = "en",
                       default_answer: str | None = None) -> Project:
        """A new, empty project; ``Conflict`` when the name is taken (the stores compare names case-insensitively),
        ``InvalidArgument`` when no URL could route to it (``name_problem``)."""
        problem = name_problem(name)
        if problem:
            raise InvalidArgument(f"Knowledge base name {name[:100]!r} refused: {problem}.", target="projectName")
        try:
            taken = self.store.get_project(name)
        except NotFound:
            pass
        else:
            raise Conflict(f"A knowledge base named '{taken.name}' already exists; choose another name.")
        settings = {"defaultAnswer": default_answer or "No good match found in KB."}
        return self.store.create_project(Project(name, description, language, settings=settings,
                                                 embedder=self.embedder.name))

    def ensure_project(self, name: str) -> Project:
        try:
            return self.store.get_project(name)
        except NotFound:
            return self.create_project(name)

    # -- writing ---------------------------------------------------------------------
    def _embed(self, texts: list[str], progress: bool, embedder: Embedder | None = None,
               passages: list[bool] | None = None, on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed ``texts`` (each distinct text once), similar lengths together so batches pad little; those that
        ``passages`` marks as answers or passages read as such by an embedder that tells them apart
        (``embed_passages``)."""
        embedder = embedder or self.embedder
        if passages is None or not any(passages) or not hasattr(embedder, "embed_passages"):
            return _embedded(embedder.embed, embedder.dim, texts, progress, on_batch)
        out = np.zeros((len(texts), embedder.dim), np.float32)
        for kind, run in ((False, embedder.embed), (True, embedder.embed_passages)):
            mine = [i for i, p in enumerate(passages) if p == kind]
            if mine:
                out[mine] = _embedded(run, embedder.dim, [texts[i] for i in mine], progress, on_batch)
        return out

    def prepare(self, qnas: list[QnA], hashes: list[str], progress: bool = False,
                reuse: dict[int, dict[tuple[str, int], np.ndarray]] | None = None,
                multilingual: bool = False) -> tuple[list[StoredQnA], int]:
        """Analyse and embed records: one unit per question and one for the answer.

        ``reuse`` holds vectors already stored for these records' ids; a record whose
        question and answer texts are unchanged keeps them.  ``multilingual``: each unit
        also gets its vector in the multilingual space (units "mq" and "ma", no terms) and the universal sentence
        encoder's (units "uq" and "ua"; ``MemIndex.crossing``).
        Returns the records and how many texts were embedded.
        """
        reuse = reuse or {}
        spaces = (("q", "a", None),) + ((("mq", "ma", self.multilingual.embedder),
                                          ("uq", "ua", self.multilingual.use)) if multilingual else ())
        fresh: dict[tuple[int, str, int], np.ndarray] = {}
        todo = []  # per space: its texts to embed and where each vector goes
        for q_field, a_field, embedder in spaces:
            texts: list[str] = []
            slots: list[tuple[int, str, int]] = []
            for i, q in enumerate(qnas):
                stored = reuse.get(q.id, {}) if q.id is not None else {}
                for fld, ord_, text in [(q_field, n, t) for n, t in enumerate(q.questions)] + [(a_field, 0,
                                                                                                 without_urls(q.answer))]:
                    if (fld, ord_) not in stored:
                        texts.append(text)
                        slots.append((i, fld, ord_))
            todo.append((texts, slots, a_field, embedder))
        total, embedded = sum(len(texts) for texts, *_ in todo), 0
        passages = sum(q.kind == "passage" for q in qnas)

        def on_batch(n: int) -> None:  # the job's poller sees how far embedding, most of an import's time, has got
            nonlocal embedded
            embedded += n
            publish(Progress("embedding", embedded, total, len(qnas) - passages, passages))

        for texts, slots, a_field, embedder in todo:
            vectors = self._embed(texts, progress, embedder, [fld == a_field for _, fld, _ in slots], on_batch)
            fresh.update({slot: vectors[j] for j, slot in enumerate(slots)})
        items = []
        for i, (q, h) in enumerate(zip(qnas, hashes)):
            stored = reuse.get(q.id, {}) if q.id is not None else {}

            def vector(field: str, ord_: int):
                return fresh[(i, field, ord_)] if (i, field, ord_) in fresh else stored[(field, ord_)]

            units = [Unit("q", n, analyze(question), vector("q", n)) for n, question in enumerate(q.questions)]
            units.append(Unit("a", 0, analyze(without_urls(q.answer)), vector("a", 0)))
            if multilingual:
                for many, one in (("mq", "ma"), ("uq", "ua")):
                    units += [Unit(many, n, [], vector(many, n)) for n in range(len(q.questions))]
                    units.append(Unit(one, 0, [], vector(one, 0)))
            items.append(StoredQnA(q, units, h))
        return items, total

    def _reusable(self, project: str, qnas: list[QnA]) -> dict[int, dict[tuple[str, int], np.ndarray]]:
        """Stored vectors of ``qnas``' units whose text did not change (same question or answer); those in the
        multilingual space only when they are today's models' (``filled``; E5's also when the universal sentence
        encoder's were still to join them, ``e5_current``)."""
        ids = [q.id for q in qnas if q.id is not None]
        old = self.store.get_qnas(project, ids) if ids else {}
        if not old:
            return {}
        stored = self.store.get_vectors(project, list(old))
        proj = self.store.get_project(project)
        spaces = ("q", "a") + (("mq", "ma") if e5_current(proj) else ()) + (("uq", "ua") if filled(proj) else ())
        # a record's own hash tells too, whatever the project says (a KB written without the space after it had it
        # holds today's vectors of the records written before: ``reembed`` embedded all 1,200 again)
        hashes = self.store.content_hashes(project, list(old))
        embedded_by = proj.embedder or self.embedder.name
        out: dict[int, dict[tuple[str, int], np.ndarray]] = {}
        for q in qnas:
            prev, vectors = old.get(q.id), stored.get(q.id, {})
            if prev is None:
                continue
            mine = spaces
            if hashes.get(q.id) == content_hash(prev, hashed_space(embedded_by, True)):
                mine = ("q", "a", "mq", "ma", "uq", "ua")
            elif hashes.get(q.id) == content_hash(prev, f"{embedded_by}+{E5_ONLY}"):
                mine = tuple(dict.fromkeys(spaces + ("mq", "ma")))
            texts = {(f, 0): q.answer for f in ("a", "ma", "ua")} | {(f, n): t for n, t in enumerate(q.questions)
                                                                    for f in ("q", "mq", "uq")}
            before = {(f, 0): prev.answer for f in ("a", "ma", "ua")} | {
                (f, n): t for n, t in enumerate(prev.questions) for f in ("q", "mq", "uq")}
            keep = {unit: vectors[unit] for unit, text in texts.items()
                    if unit[0] in mine and before.get(unit) == text and unit in vectors}
            if keep:
                out[q.id] = keep
        return out

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
            reuse = {i: {u: v for u, v in units.items() if u[0] in MULTILINGUAL_FIELDS} for i, units in reuse.items()}
        self.store.put_qnas(project, self.prepare(qnas, hashes, progress, reuse, multilingual)[0])
        proj = self.store.get_project(project)
        if proj.embedder and proj.embedder != self.embedder.name:  # deployments and kept versions keep the old vectors
            deployed, kept = proj.settings.get(DEPLOYED_WITH, {}), proj.settings.get(VERSIONS_WITH, {})
            for d in self.store.list_deployments(project):
                deployed.setdefault(d.name, proj.embedder)
            for v in self.store.list_versions(project):
                kept.setdefault(str(v.version), proj.embedder)
            proj.settings[DEPLOYED_WITH] = {d: e for d, e in deployed.items() if e != self.embedder.name}
            proj.settings[VERSIONS_WITH] = {v: e for v, e in kept.items() if e != self.embedder.name}
        proj.embedder = self.embedder.name
        proj.settings[FILLED] = filled_value(multilingual)
        self.store.update_project(proj)
        return len(qnas)

    def fill_multilingual(self, project: str, *, progress: bool = False) -> int:
        """Give every live record of ``project`` its vectors in the multilingual space (those written without them:
        the content hash tells), ``FILL_CHUNK`` records at a time, each chunk written before the next is embedded;
        returns how many records were filled."""
        qnas = self.store.list_qnas(project)
        existing = self.store.content_hashes(project)
        name = hashed_space(self.embedder.name, True)
        todo = [q for q in qnas if existing.get(q.id) != content_hash(q, name)]
        for start in range(0, len(todo), FILL_CHUNK):
            chunk = todo[start:start + FILL_CHUNK]
            items, _ = self.prepare(chunk, [content_hash(q, name) for q in chunk], progress,
                                    self._reusable(project, chunk), multilingual=True)
            self.store.put_qnas(project, items)
        return len(todo)

    def _settle(self, project: str, multilingual: bool, progress: bool) -> None:
        """After a write, from one read of the project (a vector store writes once per file): note the embedder that
        built its vectors when none is noted yet, and fill the multilingual space if the records just written have it
        and the others may not; note that too."""
        proj = self.store.get_project(project)
        if proj.embedder is None:
            proj.embedder = self.embedder.name
            proj = self.store.update_project(proj)
        if (proj.settings.get(FILLED) or False) == filled_value(multilingual):
            return
        if multilingual:
            self.fill_multilingual(project, progress=progress)
            proj = self.store.get_project(project)
        proj.settings[FILLED] = filled_value(multilingual)
        self.store.update_project(proj)

    def upgrade_multilingual(self, *, progress: bool = False) -> dict[str, tuple[int, list[str]]]:
        """Embed again, in today's multilingual space, the records of every project whose vectors there were made by
        an earlier model of it (``outdated``: the universal sentence encoder's alone, before E5; or E5's alone, before
        the encoder's joined them: only the encoder's are made then); returns, per project, how
        many records and the deployments it has.  ``openqna serve`` runs it before it serves.  A deployment keeps the
        vectors it was deployed with, unread, until it is deployed again: its CJK questions are ranked by their
        keywords until then.  Nothing when this server has no multilingual space (``OPENQNA_MULTILINGUAL=off``, or
        a main model that reads CJK itself): the old vectors then stay unread."""
        done: dict[str, tuple[int, list[str]]] = {}
        if self.multilingual.mode() == "off":
            return done
        for proj in self.store.list_projects():
            if outdated(proj):
                done[proj.name] = (self.fill_multilingual(proj.name, progress=progress),
                                   [d.name for d in self.store.list_deployments(proj.name)])
                proj = self.store.get_project(proj.name)
                proj.settings[FILLED] = filled_value(True)
                self.store.update_project(proj)
        return done

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
        self._settle(project, report.multilingual, progress)
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
        self._settle(project, report.multilingual, progress)
        return report

    def plan_upsert(self, project: str, qnas: Iterable[QnA], *, progress: bool = False,
                    match_content: bool = True) -> tuple[ImportReport, list[StoredQnA]]:
        """What ``upsert`` would write: the report (unchanged ids in it) and the analysed, embedded records."""
        qnas = list(qnas)
        proj = self.store.get_project(project)
        self.check_embedder(proj)
        claimed = {q.id for q in qnas if q.id is not None}
        by_hash: dict[str, list[int]] = {}
        by_answer: dict[tuple[str, str], list[int]] = {}
        if match_content:  # an import matches records by content: it reads every record
            existing = self.store.content_hashes(project)
            stored = len(existing)
            for rid, h in existing.items():
                by_hash.setdefault(h, []).append(rid)
            for q in self.store.list_qnas(project):
                by_answer.setdefault((q.source.lower(), q.answer), []).append(q.id)
        else:  # "add" edits match nothing: only the named records' hashes are needed (an edit of one QnA reads one)
            existing = self.store.content_hashes(project, claimed)
            stored = self.store.count_qnas(project)
        def stored_cjk() -> int:  # the records held with CJK text, but those ``qnas`` replace
            index = self.indexes.get(project)
            return int((cjk_text_rows(index) & ~np.isin(index.ids, np.fromiter(claimed, np.int64,
                                                                                  len(claimed)))).sum())

        report = ImportReport(multilingual=self.multilingual.wanted(proj, qnas, stored, stored_cjk))
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

    def own_ids(self, project: str, qnas: list[QnA], taken: set[int] | None = None) -> dict[int, int]:
        """Give a file merged into ``project`` ids of its own where its ids would take other records'.

        Every QnA Maker export numbers its QnAs from 1, so a file's ids are the file's: one replaces a stored record
        only when that record has the same source and kind (this project's export, edited and imported again).  An
        id the project holds for a record of another source or kind (a document imported before), or one ``taken``
        holds (an earlier file of the same import), moves to a fresh id, and the file's prompts to it follow; the
        ids the file keeps are added to ``taken``.  Returns the moves (file id -> id)."""
        taken = set() if taken is None else taken
        ids = [q.id for q in qnas if q.id is not None]
        if not ids:
            return {}
        try:
            stored = self.store.get_qnas(project, ids)
        except NotFound:  # a new project: only the import's own files can collide
            stored = {}

        def kind(q: QnA) -> tuple[str, str]:
            return q.source.strip().lower(), q.kind

        moving = []
        for q in qnas:
            if q.id is None:
                continue
            if q.id in taken or (q.id in stored and kind(stored[q.id]) != kind(q)):
                moving.append(q)
            else:
                taken.add(q.id)
        if not moving:
            return {}
        # a record this file put in before (its id moved then too) keeps the id it got, so importing the same file
        # again changes nothing
        before = {}
        if stored:
            for record in self.store.list_qnas(project):
                before.setdefault((*kind(record), record.answer, tuple(record.questions)), record.id)
        moves: dict[int, int] = {}
        fresh = []
        for q in moving:
            assert q.id is not None
            again = before.get((*kind(q), q.answer.strip(), tuple(x.strip() for x in q.questions if x.strip())))
            if again is not None and again not in taken:
                moves.setdefault(q.id, again)
                q.id = again
                taken.add(again)
            else:
                fresh.append(q)
        if fresh:
            try:
                first = self.store.reserve_ids(project, len(fresh))[0]
            except NotFound:
                first = 1
            first = max(first, max(taken | set(ids)) + 1)  # above every id this import names
            for new, q in enumerate(fresh, start=first):
                assert q.id is not None
                moves.setdefault(q.id, new)
                q.id = new
                taken.add(new)
        for q in qnas:
            for prompt in q.dialog.prompts:
                prompt.qna_id = moves.get(prompt.qna_id, prompt.qna_id)
        return moves

    def import_content(self, project: str, content: KnowledgeBaseContent, *, progress: bool = False) -> ImportReport:
        """Merge ``content`` (one file's, or several already given ids of their own by ``own_ids``) into ``project``:
        records matched by id or content are updated, the others added, none deleted.  The users' feedback for a QnA
        stays, so the file's suggestions of that QnA are stored without it: an export carries it counted in
        (``kb/suggestion_counts.py``), and imported again it was counted twice."""
        self.ensure_project(project)
        self.own_ids(project, content.qnas)
        feedback = self.store.list_feedback(project, [q.id for q in content.qnas if q.id is not None])
        for q in content.qnas:
            if q.id in feedback:
                q.suggested_questions = feedback_taken_out(q.suggested_questions, feedback[q.id])
        report = self.upsert(project, content.qnas, progress=progress)
        if content.synonyms:
            stored = self.store.get_synonyms(project)
            merged = list(stored)
            for group in content.synonyms:
                if group not in merged:
                    merged.append(group)
            if merged != stored:
                self.store.set_synonyms(project, merged)
            report.synonyms_added = len(merged) - len(stored)
        return report

    def delete_project(self, project: str) -> None:
        """Delete ``project`` and everything of it, its indexes in this process and on disk too."""
        pid = self.store.current(project)[0]
        self.store.delete_project(project)
        self.indexes.drop(pid)
        self.connected.drop(project)


def _embedded(run: Callable[[list[str]], np.ndarray], dim: int, texts: list[str], progress: bool,
              on_batch: Callable[[int], None] | None = None) -> np.ndarray:
    """``run`` (an embedder's ``embed`` or ``embed_passages``) over ``texts``, each distinct text once, similar
    lengths together so batches pad little; ``on_batch`` hears how many of ``texts`` each batch embedded (a text
    given twice counts twice)."""
    if not texts:
        return np.zeros((0, dim), np.float32)
    counts: dict[str, int] = {}
    for t in texts:
        counts[t] = counts.get(t, 0) + 1
    unique = list(dict.fromkeys(texts))
    order = sorted(range(len(unique)), key=lambda i: len(unique[i]))
    vectors = np.zeros((len(unique), dim), np.float32)
    bar = tqdm(total=len(unique), desc="embedding", unit="text", disable=not progress, leave=False)
    for start in range(0, len(order), EMBED_BATCH * 8):
        batch = order[start : start + EMBED_BATCH * 8]
        vectors[batch] = run([unique[i] for i in batch])
        bar.update(len(batch))
        if on_batch is not None:
            on_batch(sum(counts[unique[i]] for i in batch))
    bar.close()
    position = {t: i for i, t in enumerate(unique)}
    return vectors[[position[t] for t in texts]]
