"""Authoring operations behind Azure's authoring API and the CLI: QnA edits, sources,
import/export, feedback.  The long ones run as jobs (see ``kb/jobs.py``); this module only
knows records, not wire formats or HTTP routes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import PurePosixPath
from urllib.parse import parse_qs, urlparse

from openqna.clock import later_than
from openqna.formats import (
    IMPORT_FORMATS,
    QNA_SUFFIXES,
    export_archive,
    import_format_of,
    is_archive,
    read_file,
    read_json,
)
from openqna.formats.azure_json import hoist_prompt_qnas, suggestions_to_azure
from openqna.formats.qna_table import casefold_keys
from openqna.ingest import parse_document
from openqna.ingest.fetch import fetch as safe_fetch
from openqna.ingest.parse import ParsedDocument
from openqna.kb.documents import DOCUMENT_SUFFIXES, ingest_document, is_document, suffix_from_content
from openqna.kb.labelled_questions import acceptances
from openqna.kb.query_log import question_key
from openqna.kb.service import Service
from openqna.kb.source_edits import SourceEdits
from openqna.kb.source_ids import source_ids
from openqna.kb.suggestion_counts import feedback_counted_in, feedback_taken_out
from openqna.records import (
    QNA_LIST_KINDS,
    Conflict,
    FormatError,
    InvalidArgument,
    KnowledgeBaseContent,
    NotFound,
    ProjectSettings,
    QnA,
)
from openqna.store import Job, Project, Source, Store
from openqna.store.base import AcceptedQuestion

KB_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
EXPORT_RESULT = re.compile(r"/projects/[^/]+/export/jobs/(?P<job>[^/]+)/result$")
FETCH_MAX_BYTES = 10 * 1024 * 1024
# what to do about a follow-up prompt to a QnA that does not exist, after an edit and after an import
EDIT_PROMPTS_FIX = "Add those QnAs first (or in the same request, with their ids), or remove the prompts."
IMPORT_PROMPTS_FIX = "Import those QnAs too, with those ids, or remove the prompts."
# The job kinds that embed a whole file or source (``refresh`` is ``kb.refresh``'s): they run on a worker of their own,
# so that an import of minutes holds up no other project's edit or deploy (``kb.jobs``)
BULK_KINDS = frozenset({"upload", "import", "sources", "refresh"})


@dataclass
class QnaOp:
    op: str  # add | replace | delete
    qna: QnA
    keep_questions: bool = False  # a replace that sent no questions keeps the stored ones
    # ... and one that sent no activeLearningSuggestions keeps the stored ones but those it made questions (the
    # console's editor, which sends none, discarded every pending suggestion of a QnA it saved)
    keep_suggestions: bool = False
    # openqna's precondition (``ifLastUpdated`` in the op): the QnA's lastUpdatedDateTime the edit started from
    if_last_updated: str | None = None
    # the op's place in the caller's list, which errors name: a follow-up QnA written inline becomes an op of its own
    index: int | None = None


@dataclass
class SourceOp:
    op: str  # add | replace | delete
    source: Source
    refresh: bool = False
    data: bytes | None = None  # a file sent with the operation (PATCH .../sources as multipart): read, not fetched


def fetch(uri: str) -> tuple[bytes, str]:
    """Download ``uri`` for a source or an import: public addresses only, unless the operator allows more."""
    return safe_fetch(uri, max_bytes=FETCH_MAX_BYTES)


def project_metadata(proj: Project) -> dict:
    """The ``Metadata`` block of Azure's JSON export: the project's settings, which ``:import`` and
    ``openqna import`` apply again (``formats.azure_json.project_settings`` reads it)."""
    metadata = {"ProjectName": proj.name, "Description": proj.description, "Language": proj.language,
                "MultilingualResource": proj.multilingual, "Settings": {"DefaultAnswer": proj.default_answer}}
    if proj.settings.get("kbId"):
        metadata["KbId"] = proj.settings["kbId"]
    return metadata


def feedback_suggestions(store: Store, project: str) -> dict[int, list[tuple[str, int]]]:
    """User questions sent as feedback, per QnA, that are not yet among its questions."""
    feedback = store.list_feedback(project)
    qnas = store.get_qnas(project, list(feedback))
    out = {}
    for qid, items in feedback.items():
        have = {x.lower() for x in qnas[qid].questions} if qid in qnas else set()
        keep = [(q, n) for q, n in items if q.lower() not in have]
        if keep:
            out[qid] = keep
    return out


def with_feedback(qnas: list[QnA], feedback: dict[int, list[tuple[str, int]]]) -> list[QnA]:
    """``qnas`` with the users' questions sent as feedback among their suggestions (QnA Maker's SuggestedQuestions
    clusters: counted into the suggestion of the same question, else one cluster per question), so that an export
    carries them: a KB moved through one lost them.  ``import_assets`` takes them out again (``suggestion_counts``)."""
    out = []
    for q in qnas:
        if q.id not in feedback:
            out.append(q)
            continue
        merged, rest = feedback_counted_in(q.suggested_questions, feedback[q.id])
        out.append(replace(q, suggested_questions=[*merged, *(
            {"ClusterHead": question, "AlternateQuestionList": [
                {"Question": question, "UserSuggestedCount": count, "AutoSuggestedCount": 0}]}
            for question, count in rest)]))
    return out


def suggestions_left(clusters: list[dict], questions: list[str]) -> list[dict]:
    """QnA Maker's SuggestedQuestions ``clusters`` without the suggested questions now among ``questions`` (in any
    case), and without the clusters left empty."""
    have = {q.lower() for q in questions}
    out = []
    for cluster in clusters:
        key = next((k for k in cluster if k.lower() == "alternatequestionlist"), None)
        alternates = [a for a in (cluster.get(key) or [] if key else [])
                      if str(casefold_keys(a).get("question", "")).lower() not in have]
        if key is not None and alternates:
            out.append({**cluster, key: alternates})
    return out


def suggestion_clusters(q: QnA, feedback: list[tuple[str, int]]) -> list[dict]:
    """``q``'s active-learning suggestions as Azure's ``activeLearningSuggestions``: each user question sent as
    feedback for it (``Authoring.suggestions``) in a cluster of its own, then the clusters an import or an edit
    brought (QnA Maker's SuggestedQuestions) as the file had them, but for the feedback that asks one of their
    questions, which is counted in that one (``suggestion_counts``: a suggestion is listed, and counted, once).  The
    API, and so the console, and ``openqna suggestions`` list these, so they show the same suggestions."""
    merged, rest = feedback_counted_in(q.suggested_questions, feedback)
    clusters = [{"clusterHead": question, "suggestedQuestions": [
        {"question": question, "userSuggestedCount": count, "autoSuggestedCount": 0}]} for question, count in rest]
    for cluster in suggestions_to_azure(merged):
        clusters.append({"clusterHead": cluster["ClusterHead"], "suggestedQuestions": [
            {"question": s["Question"], "userSuggestedCount": s["UserSuggestedCount"],
             "autoSuggestedCount": s["AutoSuggestedCount"]} for s in cluster["SuggestedQuestions"]]})
    return clusters


@dataclass
class SettingChange:
    """One project setting an import changed: its label, the value before (None: the project is new, and had the
    defaults) and after."""

    label: str
    old: str | None
    new: str


def cluster_questions(clusters: list[dict]) -> list[str]:
    """The questions of suggestion clusters (QnA Maker's shape: ``alternateQuestionList``, any case)."""
    out = []
    for cluster in clusters:
        fields = {k.lower(): k for k in cluster}
        for a in cluster.get(fields.get("alternatequestionlist", ""), []):
            out.append(str({k.lower(): v for k, v in a.items()}.get("question", "")))
    return out


def without_questions(clusters: list[dict], questions: set[str]) -> list[dict]:
    """Suggestion clusters (QnA Maker's shape) without ``questions`` (any case); emptied clusters are dropped."""
    drop = {q.lower() for q in questions}
    out = []
    for cluster in clusters:
        fields = {k.lower(): k for k in cluster}
        alternates = [a for a in cluster.get(fields.get("alternatequestionlist", ""), [])
                      if str({k.lower(): v for k, v in a.items()}.get("question", "")).lower() not in drop]
        if not alternates:
            continue
        kept = dict(cluster)
        kept[fields["alternatequestionlist"]] = alternates
        for total, count in (("totalautosuggestedcount", "autosuggestedcount"),
                             ("totalusersuggestedcount", "usersuggestedcount")):
            if total in fields:
                kept[fields[total]] = sum(int({k.lower(): v for k, v in a.items()}.get(count) or 0)
                                          for a in alternates)
        out.append(kept)
    return out


class Authoring:
    def __init__(self, service: Service):
        self.service = service
        self.store = service.store

    # -- QnA Maker knowledge-base ids ------------------------------------------------------
    def project_for_kb(self, kb_id: str) -> Project:
        """The project a QnA Maker ``kbId`` names: its own name, or the kbId it was migrated with.

        Bots keep their kbId in configuration; an alias lets them move here by changing only
        the host and the key.
        """
        try:
            return self.store.get_project(kb_id)
        except NotFound:
            pass
        for p in self.store.list_projects():
            if str(p.settings.get("kbId", "")).lower() == kb_id.lower():
                return p
        raise NotFound(f"There is no knowledge base with id or name '{kb_id}'.")

    def set_kb_id(self, project: str, kb_id: str) -> Project:
        """Keep a QnA Maker kbId on ``project`` so generateAnswer and train calls reach it."""
        if not KB_ID.match(kb_id):
            raise InvalidArgument(f"'{kb_id}' is not a QnA Maker kbId; it is a GUID such as "
                                  "'1a2b3c4d-0000-4000-8000-123456789abc'.", target="kbId")
        for p in self.store.list_projects():
            if p.name.lower() != project.lower() and str(p.settings.get("kbId", "")).lower() == kb_id.lower():
                raise InvalidArgument(f"kbId {kb_id} already belongs to project '{p.name}'.", target="kbId")
        proj = self.store.get_project(project)
        if proj.settings.get("kbId") != kb_id.lower():
            proj.settings["kbId"] = kb_id.lower()
            proj = self.store.update_project(proj)
        return proj

    # -- QnAs ------------------------------------------------------------------------------
    def update_qnas(self, project: str, ops: list[QnaOp]) -> None:
        """Apply add/replace/delete operations as one change; any bad operation fails them all.

        The operations apply in the order given, each to the state the ones before it left: [delete 1, add 1] adds
        QnA 1 anew, [add 6000, delete 6000] leaves no QnA 6000, and [delete 1, replace 1] is refused (the replace has
        no QnA to replace), where each was checked against the state before the change and the replace was dropped.
        Only what the operations name is read (their QnAs, their feedback, their prompts' targets): an edit of one
        QnA must not read a project of a million.
        """
        existing = self.store.get_qnas(project, list({op.qna.id for op in ops if op.qna.id is not None}))
        state: dict[int, QnA | None] = dict(existing)  # each named QnA as the operations so far leave it
        dropped: set[int] = set()  # stored QnAs a delete takes out (and their feedback), even when added again after
        errors = []
        conflicts = []
        added: dict[int, int] = {}  # id -> the operation that adds it: a second add would overwrite the first
        for position, op in enumerate(ops):
            i, qid = position if op.index is None else op.index, op.qna.id
            current = state.get(qid) if qid is not None else None
            if op.op == "add" and current is not None and qid in added:
                errors.append(f"[{i}] add: QnA {qid} is also added by [{added[qid]}]; every QnA added needs its own id.")
            elif op.op == "add" and current is not None:
                errors.append(f"[{i}] add: QnA {qid} already exists; use 'replace'.")
            elif op.op in ("replace", "delete") and current is None:
                errors.append(f"[{i}] {op.op}: there is no QnA with id {qid}.")
            elif op.op == "add" and op.if_last_updated:
                errors.append(f"[{i}] add: ifLastUpdated is for 'replace' and 'delete'; a QnA being added has no "
                              "earlier version to compare it with.")
            elif op.if_last_updated and (qid not in existing or existing[qid].last_updated != op.if_last_updated):
                stamp = existing[qid].last_updated if qid in existing else "in this same change"
                conflicts.append(f"[{i}] {op.op}: QnA {qid} was changed elsewhere at {stamp} "
                              f"(this edit started from {op.if_last_updated}); reload it and apply the edit again.")
            elif op.op == "delete":
                state[qid] = None
                if qid in existing:
                    dropped.add(qid)
            else:
                if op.op == "add" and qid is not None:
                    added[qid] = i
                if op.op == "replace":
                    assert current is not None  # refused above otherwise
                if op.op == "replace" and op.keep_questions:
                    op.qna.questions = list(current.questions)
                if op.op == "replace" and op.keep_suggestions:
                    op.qna.suggested_questions = suggestions_left(current.suggested_questions, op.qna.questions)
                if op.op == "replace":  # Azure's QnA records carry no kind: a passage replaced stays a passage
                    op.qna.kind = current.kind
                if qid is not None:
                    state[qid] = op.qna
        # what the change writes (in the operations' order) and deletes: each QnA as the last operation on it left it
        writes = [op.qna for op in ops if op.op != "delete" and (op.qna.id is None or state.get(op.qna.id) is op.qna)]
        deletes = [qid for qid, q in state.items() if q is None and qid in existing]
        if errors:
            raise InvalidArgument(" ".join(errors))
        if conflicts:
            raise Conflict(" ".join(conflicts))
        feedback = self.store.list_feedback(project, [q.id for q in writes if q.id is not None and q.id not in dropped])
        for q in writes:
            q.normalised()
            q.questions = list(dict.fromkeys(q.questions))  # an edit that gives a question twice stores it once
            if q.id in feedback:  # a read-modify-write sends the feedback back counted in: it is counted once
                q.suggested_questions = feedback_taken_out(q.suggested_questions, feedback[q.id])
        self.check_prompts(project, writes, set(deletes), existing)
        accepted = self._accepted(project, [(existing[q.id], q) for q in writes
                                            if q.id in existing and q.id not in dropped], feedback)
        replaced = [existing[q.id].last_updated or "" for q in writes if q.id in existing]
        if replaced:
            later_than(max(replaced))  # a QnA written twice in one second must not keep its stamp (``ifLastUpdated``)
        self.service.upsert(project, writes, match_content=False)
        if accepted:
            self.store.add_accepted(project, accepted)
        if deletes:
            self.store.delete_qnas(project, deletes)
        for qid in sorted(dropped):  # users' questions for a QnA deleted are none for one added under its id after
            self.store.delete_feedback(project, qid)
        if deletes:
            self.touch(project)

    def _accepted(self, project: str, edits: list[tuple[QnA, QnA]],
                  feedback: dict[int, list[tuple[str, int]]]) -> list[AcceptedQuestion]:
        """The suggestions and logged questions that ``edits`` (QnA before, after) accept (kb/labelled_questions.py);
        the query log is read only when an edit adds a question."""
        added = [(old, new) for old, new in edits
                 if {q.casefold() for q in new.questions} - {q.casefold() for q in old.questions}]
        if not added:
            return []
        logged = {question_key(q) for q in self.store.queried_questions(project)}
        return [a for old, new in added
                for a in acceptances(old, new, [x for x, _ in feedback.get(old.id or 0, [])], logged)]

    def touch(self, project: str) -> Project:
        """Move ``lastModifiedDateTime``: apps such as FAQ Plus republish when it is later than the last deploy."""
        return self.store.update_project(self.store.get_project(project))

    def set_synonyms(self, project: str, groups: list[list[str]]) -> None:
        """Replace the project's synonym groups (a change to what it answers, so it moves lastModifiedDateTime)."""
        self.store.set_synonyms(project, groups)
        self.touch(project)

    def check_import_prompts(self, project: str, qnas: list[QnA], *, replacing: bool) -> None:
        """Refuse an import whose prompts lead to no QnA, as ``check_prompts`` refuses an edit's: the target must be
        a QnA of the import or a stored one, and not a stored one when the import is ``replacing`` the project's QnAs
        (Azure's ``:import``, which deletes those the file does not hold).  Called before anything is written, the
        project included (it may not exist yet).

        Exports never hold such prompts (deleting a QnA takes the prompts to it out of the others), so a file that
        does was written by hand or by another tool: storing the prompt would keep a button that is never shown."""
        if not any(q.dialog.prompts for q in qnas):
            return
        try:
            stored = set(self.store.content_hashes(project))
        except NotFound:
            stored = set()  # a new project: only the import's own QnAs can be led to
        written = {q.id for q in qnas if q.id is not None}
        if stored:
            self.check_prompts(project, qnas, stored - written if replacing else set(), fix=IMPORT_PROMPTS_FIX)
            return
        for q in qnas:
            if missing := [p.qna_id for p in q.dialog.prompts if p.qna_id not in written]:
                raise InvalidArgument(prompts_problem(q, missing, IMPORT_PROMPTS_FIX))

    def check_prompts(self, project: str, writes: list[QnA], deletes: set[int],
                      existing: dict[int, QnA] | None = None, *, if_last_updated: dict[int, str] | None = None,
                      fix: str = EDIT_PROMPTS_FIX) -> None:
        """Refuse ``writes`` whose prompts lead to no QnA: not one written, nor one stored and not in ``deletes``.

        ``if_last_updated`` (QnA id -> the lastUpdatedDateTime an edit started from): a QnA changed since is not
        checked here; its edit fails as a Conflict (deleting a QnA takes the prompts to it out of the QnAs that held
        them, which changes them), so the editor is told to reload rather than that its prompts are wrong.

        A prompt that the stored QnA (``existing``, else read) already had, to a QnA deleted since or in this same
        change, is dropped instead: answers leave such prompts out (``asking.with_prompts_shown``), and a QnA
        sent back as it was read must not be refused for the deletion of another.
        """
        written = {q.id for q in writes if q.id is not None}
        targets = {p.qna_id for q in writes for p in q.dialog.prompts if p.qna_id is not None} - written
        stored = set(self.store.content_hashes(project, targets)) if targets else set()
        known = written | (stored - deletes)
        stale = [q for q in writes if any(p.qna_id not in known for p in q.dialog.prompts)]
        if not stale:
            return
        if existing is None:
            existing = self.store.get_qnas(project, [q.id for q in stale if q.id is not None])
        since = if_last_updated or {}
        for q in stale:
            if q.id in since and q.id in existing and existing[q.id].last_updated != since[q.id]:
                continue  # the job reports the conflict
            had = {p.qna_id for p in existing[q.id].dialog.prompts} if q.id in existing else set()
            missing = [p.qna_id for p in q.dialog.prompts if p.qna_id not in known and p.qna_id not in had]
            if missing:
                raise InvalidArgument(prompts_problem(q, missing, fix))
            q.dialog.prompts = [p for p in q.dialog.prompts if p.qna_id in known]

    # -- active learning -----------------------------------------------------------------------
    def add_feedback(self, project: str, records: list[tuple[int, str, str]], field: str = "records") -> None:
        """``field``: what the caller's body calls the list (Azure's ``records``, QnA Maker's ``feedbackRecords``)."""
        ids = set(self.store.content_hashes(project, [qid for qid, _, _ in records]))
        for i, (qid, _, _) in enumerate(records):
            if qid not in ids:
                raise InvalidArgument(f"{field}[{i}].qnaId: there is no QnA with id {qid}.",
                                      target=f"{field}[{i}].qnaId")
        self.store.add_feedback(project, records)

    def suggestions(self, project: str) -> dict[int, list[tuple[str, int]]]:
        """User questions sent as feedback, per QnA, that are not yet among its questions."""
        return feedback_suggestions(self.store, project)

    def pending_suggestions(self, project: str) -> list[tuple[int, str, int]]:
        """Every suggestion of every QnA as ``(qna id, question, count)``: what GET .../qnas lists in
        ``activeLearningSuggestions`` (``suggestion_clusters``) and the console's Improve tab shows, users' feedback
        and the clusters an import brought alike."""
        feedback = self.suggestions(project)
        return [(q.id, s["question"], s["userSuggestedCount"] + s["autoSuggestedCount"])
                for q in self.store.list_qnas(project, kinds=QNA_LIST_KINDS) if q.id is not None
                for cluster in suggestion_clusters(q, feedback.get(q.id, [])) for s in cluster["suggestedQuestions"]]

    def accept_suggestion(self, project: str, qna_id: int, question: str) -> tuple[QnA, bool]:
        """Add ``question`` to QnA ``qna_id``; returns it, and whether ``question`` was one of its suggestions (users'
        feedback, or an imported suggestion): only those are recorded as accepted, the users' questions that test
        sets are made from (``openqna test-set-from-log``), so a question the owner typed is not taken for a user's."""
        qna = self.store.get_qnas(project, [qna_id]).get(qna_id)
        if qna is None:
            raise NotFound(f"There is no QnA with id {qna_id} in project '{project}'.")
        sent = {q.casefold() for q, _ in self.store.list_feedback(project, [qna_id]).get(qna_id, [])}
        suggested = question.casefold() in sent | {q.casefold() for q in cluster_questions(qna.suggested_questions)}
        added = question.lower() not in {q.lower() for q in qna.questions}
        if added:
            qna.questions.append(question)
        pending = without_questions(qna.suggested_questions, {question})  # accepted: no longer suggested
        if added or pending != qna.suggested_questions:
            qna.suggested_questions = pending
            self.service.upsert(project, [qna], match_content=False)
        if added and suggested:
            self.store.add_accepted(project, [AcceptedQuestion(qna_id, question, "suggestion")])
        self.store.delete_feedback(project, qna_id, question)
        return qna, suggested

    def reject_suggestion(self, project: str, qna_id: int, question: str) -> bool:
        """Drop a suggested question of a QnA (the user feedback sent with it, and the imported suggestion
        clusters' copies); False when the QnA had no such suggestion."""
        qna = self.store.get_qnas(project, [qna_id]).get(qna_id)
        if qna is None:
            raise NotFound(f"There is no QnA with id {qna_id} in project '{project}'.")
        dropped = self.store.delete_feedback(project, qna_id, question) > 0
        kept = without_questions(qna.suggested_questions, {question})
        if kept != qna.suggested_questions:
            qna.suggested_questions = kept
            self.service.upsert(project, [qna], match_content=False)
            dropped = True
        return dropped

    # -- sources -------------------------------------------------------------------------------
    def list_sources(self, project: str) -> list[Source]:
        """Registered sources, plus every record source that came from an import or an edit.

        Those are named as sourceFilter and a source's delete read them, case-insensitively: "Editorial" and
        "editorial" are one source, listed under the spelling of its first record.  One whose records are all
        passages (a KB replica's ``UnstructuredContent/`` document) is ``unstructured``, as a source added so is."""
        registered = self.store.list_sources(project)
        names = {s.source.lower() for s in registered}
        spelling: dict[str, str] = {}
        newest: dict[str, str] = {}  # an imported file's last update: its newest record's
        passages_only: dict[str, bool] = {}
        for q in self.store.list_qnas(project):
            key = q.source.lower()
            if key not in names:
                spelling.setdefault(key, q.source)
                newest[key] = max(newest.get(key, ""), q.last_updated or "")
                passages_only[key] = passages_only.get(key, True) and q.kind == "passage"
        return registered + [Source(spelling[k], spelling[k], "", "file",
                                    "unstructured" if passages_only[k] else "semistructured", last_updated=newest[k])
                             for k in sorted(spelling, key=lambda k: spelling[k])]

    def update_sources(self, project: str, ops: list[SourceOp]) -> None:
        """Apply ``ops``: every URL is fetched and read first, and only then is anything written, so that a source
        that cannot be fetched or read fails the job with nothing changed (a delete before a 404 was applied
        behind a job reported failed)."""
        registered = {s.source: s for s in self.store.list_sources(project)}
        read: dict[int, tuple[str, ParsedDocument | list[QnA] | None]] = {}  # op position -> (digest, read)
        for i, op in enumerate(ops):
            src = op.source
            if op.op == "delete":
                continue
            old = registered.get(src.source)
            if op.op == "replace" and old is None:
                raise NotFound(f"There is no source '{src.source}' in project '{project}'.")
            if op.data is not None or op.op == "add" or op.refresh or old is None or old.source_uri != src.source_uri:
                data, name = (op.data, src.source) if op.data is not None else fetch(src.source_uri)
                digest = hashlib.sha256(data).hexdigest()
                read[i] = (digest, self._read_source(project, src, name, data)
                           if old is None or old.content_hash != digest else None)
        for i, op in enumerate(ops):
            src = op.source
            if op.op == "delete":  # all its records, edited or not, as Azure deletes a source's QnAs
                self._replace_source_records(project, src, [])
                self.store.delete_source(project, src.source)
                continue
            old = registered.get(src.source)
            src.file_records = old.file_records if old is not None else None  # what tells the author's edits
            if i in read:
                digest, content = read[i]
                if content is not None:
                    self._write_source(project, src, content)
                src.content_hash = digest
            else:
                assert old is not None
                src.content_hash = old.content_hash
            self.store.put_source(project, src)
            if old is not None and old.source_uri != src.source_uri:  # the validators were the old URL's
                refresh = self.store.list_source_refreshes(project).get(src.source)
                if refresh is not None and (refresh.etag or refresh.last_modified):
                    refresh.etag = refresh.last_modified = ""
                    self.store.put_source_refresh(project, refresh)

    def _ingest(self, project: str, src: Source, name: str, data: bytes) -> None:
        """A QnA file replaces the source's QnAs; a document becomes QnAs and passages; what the author edited stays
        (``_write_source``)."""
        self._write_source(project, src, self._read_source(project, src, name, data))

    def _read_source(self, project: str, src: Source, name: str, data: bytes) -> ParsedDocument | list[QnA]:
        """A source's file read, nothing written: a document parsed, or a QnA file's records (checked as an
        import's); ``FormatError`` when it is neither."""
        sniffed = suffix_from_content(data)
        if sniffed == ".html" and not name.lower().endswith((".htm", ".html")):
            name += ".html"  # a web page's URL rarely ends in .html
        elif PurePosixPath(name).suffix.lower() not in (*DOCUMENT_SUFFIXES, *QNA_SUFFIXES):
            if not sniffed:  # read_file's message would list the QnA files alone
                suffix = PurePosixPath(name).suffix.lower() or "(none)"
                raise FormatError(f"unsupported file type {suffix!r}; a source is a QnA file "
                                  f"({', '.join(QNA_SUFFIXES)}) or a document ({', '.join(DOCUMENT_SUFFIXES)})",
                                  file=name)
            name += sniffed  # a download link: the bytes say what the name does not
        if is_document(name, data):
            return parse_document(name, data)
        content = read_file(name, data)
        for q in content.qnas:
            q.source = src.source
        self.check_import_prompts(project, content.qnas, replacing=False)  # as an import's: none leads nowhere
        return content.qnas

    def _write_source(self, project: str, src: Source, content: ParsedDocument | list[QnA]) -> None:
        """Make ``content`` the records of ``src``, but those its author edited (``kb/source_edits.py``); sets
        ``src.file_records`` to what the write recorded (the caller puts the source)."""
        if isinstance(content, list):
            self._replace_source_records(project, src, content)
            return
        edits = self._source_edits(project, src)
        report = ingest_document(self.service, project, content, source=src.source, edits=edits,
                                 unstructured=src.content_structure_kind.lower() == "unstructured")
        src.file_records = edits.record(self.store, project, report.written)

    def _source_edits(self, project: str, src: Source) -> SourceEdits:
        own = {q.id: q for q in self.store.list_qnas(project)
               if q.source.lower() == src.source.lower() and q.id is not None}
        return SourceEdits(own, src.file_records)

    def _replace_source_records(self, project: str, src: Source, qnas: list[QnA]) -> None:
        """Make ``qnas`` the records of ``src``: upsert them, delete the ones that disappeared, but leave those the
        author edited as they are.  The file's ids are its own (``source_ids``): they never overwrite another
        source's or an editorial QnA."""
        edits = self._source_edits(project, src)
        source_ids(self.store, project, src.source, qnas, src.file_records)
        writes, _ = edits.split(qnas)
        report = self.service.upsert(project, writes)
        stale = edits.stale(report.ids)
        if stale:
            self.store.delete_qnas(project, stale)
        src.file_records = edits.record(self.store, project, report.ids)

    # -- import / export ------------------------------------------------------------------------
    def import_assets(self, project: str, fmt: str, asset_kind: str, body: dict | None,
                      files: list[tuple[str, bytes]] | None = None) -> None:
        """Azure's :import: replace the project's QnAs (or synonyms) with the file's, creating it if needed.

        A body replaces only the assets it holds: one of synonyms or settings alone leaves the QnAs as they are (it
        used to delete them all, as an import of no QnAs); so does a file without QnAs or documents.  ``files``
        (name, bytes): the files of a multipart :import, read as their names and contents say (``read_import_files``),
        their documents made sources as an upload's are."""
        body = body or {}
        lowered = {k.lower(): v for k, v in body.items()}
        file_uri = lowered.get("fileuri")
        if file_uri is not None and not isinstance(file_uri, str):
            raise InvalidArgument("'fileUri' must be a string: the URL of the file to import.", target="fileUri")
        metadata = lowered.get("metadata")
        uploaded: list[ParsedDocument] = []
        try:
            if files:
                content, uploaded = read_import_files(files)
            elif file_uri:
                data, name = self.own_export(file_uri) or fetch(file_uri)
                content = read_import_file(name, data, fmt)
                if metadata is not None:  # the body's settings win over those the file carries
                    content.settings = read_json({"metadata": metadata}, "import body").settings
            else:
                content = read_json(body, "import body")
            documents = [(d, parse_document(d.name, d.data)) for d in content.documents]
        except FormatError as exc:
            raise InvalidArgument(exc.message) from None
        assets = {k.lower() for k in lowered.get("assets") or {}} if isinstance(lowered.get("assets"), dict) else set()
        from_file = bool(file_uri or files)
        if asset_kind != "synonyms" and (from_file or "qnas" in assets):  # the file's QnAs replace the project's
            self.check_import_prompts(project, content.qnas, replacing=True)
        self.ensure_project(project, content.settings)
        if asset_kind == "synonyms":
            self.set_synonyms(project, content.synonyms)
            return
        given = content.synonyms or "synonyms" in assets
        # synonyms or settings alone: the QnAs are not part of the import.  A file of no QnA and no document (an
        # export of the synonyms, imported without assetKind, as the SDK does by default) is no QnA file either: it
        # deleted every QnA of the project it was imported into
        if (not from_file and "qnas" not in assets) or (from_file and not content.qnas and not documents
                                                          and not uploaded):
            if given:
                self.set_synonyms(project, content.synonyms)
            return
        feedback = self.store.list_feedback(project)
        before = {qid: q.answer for qid, q in self.store.get_qnas(project, list(feedback)).items()}
        for q in content.qnas:  # an export carries the feedback counted in (``with_feedback``): it stays, once
            if q.id in before and q.answer.strip() == before[q.id]:
                q.suggested_questions = feedback_taken_out(q.suggested_questions, feedback[q.id])
        self.service.replace_records(project, content.qnas, synonyms=content.synonyms if given else None)
        # users' questions sent for a QnA the import replaced by another answer are no suggestions for that one
        # (they stayed, and the console offered "german capital city?" for the bread QnA that took its id)
        after = self.store.get_qnas(project, list(feedback))
        for qid in feedback:
            if qid not in after or after[qid].answer != before.get(qid):
                self.store.delete_feedback(project, qid)
        for unstructured, document in documents:  # a replica's unstructured documents, as `openqna import` reads them
            ingest_document(self.service, project, document, source=unstructured.source, unstructured=True)
        for parsed in uploaded:  # as POST /openqna/projects/{project}/files adds a document
            ingest_document(self.service, project, parsed)

    def import_file(self, project: str, name: str, data: bytes) -> dict[str, int]:
        """One uploaded file, as ``openqna import`` reads it: QnA files merge into the project (creating it),
        a document's QnAs and passages become the records of its source.

        Returns what it did, as the upload job's result: records ``added``, ``updated`` and ``unchanged`` (and a
        document's ``deleted``); for a file that holds synonym groups, ``synonymGroupsAdded`` (those the project did
        not hold) and ``synonymGroups`` (how many it holds now), which no count of records shows."""
        try:
            document = parse_document(name, data) if is_document(name, data) else None
            content = read_file(name, data) if document is None else None
        except FormatError as exc:
            raise InvalidArgument(exc.message) from None
        if content is not None:
            self.check_import_prompts(project, content.qnas, replacing=False)
        self.ensure_project(project, None)
        if document is not None:
            r = ingest_document(self.service, project, document)
            return {"added": r.added, "updated": r.updated, "unchanged": r.unchanged, "deleted": r.deleted}
        assert content is not None  # read above when the file is no document
        report = self.service.import_content(project, content)
        out = {"added": report.added, "updated": report.updated, "unchanged": report.unchanged}
        if content.synonyms:
            out.update(synonymGroupsAdded=report.synonyms_added, synonymGroups=len(self.store.get_synonyms(project)))
        return out

    def ensure_project(self, project: str, settings: ProjectSettings | None) -> tuple[Project, list[SettingChange]]:
        """``project``, created if need be, with the settings an import's file or body gives, and what they changed.

        A project that exists takes them too, as Azure's ``:import`` of a body with ``metadata`` updates the
        project's settings: an export moved between servers keeps its default answer and language.  Only what
        the file says is set (``ProjectSettings``' None says nothing)."""
        given = settings or ProjectSettings()
        try:
            proj, created = self.store.get_project(project), False
        except NotFound:
            proj, created = self.service.create_project(project), True
        before = _settings_shown(proj)
        if given.description is not None:
            proj.description = given.description
        if given.language:
            proj.language = given.language
        if given.default_answer:
            proj.settings["defaultAnswer"] = given.default_answer
        if given.multilingual is not None:
            proj.multilingual = given.multilingual
        after = _settings_shown(proj)
        if after != before:
            proj = self.store.update_project(proj)
        changes = [SettingChange(label, None if created else before[label], value)
                   for label, value in after.items() if value != before[label]]
        return self._keep_kb_id(proj, given.kb_id), changes

    def _keep_kb_id(self, proj: Project, kb_id: str | None) -> Project:
        """An export of a project that kept its QnA Maker kbId keeps it when imported again.

        A copy imported beside the original (the kbId already taken) or a malformed id is imported
        without it: a project's content must not fail to import over an alias.
        """
        if not kb_id:
            return proj
        try:
            return self.set_kb_id(proj.name, kb_id)
        except InvalidArgument:
            return proj

    def export(self, project: str, fmt: str, asset_kind: str) -> tuple[bytes, str, str]:
        """Azure's ``:export`` of ``project``: the file's bytes, the name it downloads as (``export_name``) and its
        media type."""
        proj = self.store.get_project(project)
        content = KnowledgeBaseContent(with_feedback(self.store.list_qnas(project), self.suggestions(project)),
                                       self.store.get_synonyms(project))
        data, name, media = export_archive(content, fmt, asset_kind, project_metadata(proj))  # type: ignore[arg-type]
        return data, export_name(proj.name, fmt, asset_kind, PurePosixPath(name).suffix), media

    def signed_export(self, job_id: str, signature: str) -> Job | None:
        """The export job whose resultUrl carries ``signature``, while the job has not expired; else None.

        Export jobs get a random token when submitted (the API puts it in ``resultUrl`` as ``sig``):
        the URL is a credential for that one file, as Azure's export URLs are, so it can be handed
        to ``:import`` as a ``fileUri`` on a server with keys.
        """
        job = self.store.get_job(job_id)
        if job is None or job.kind != "export" or not job.params.get("token") or not signature:
            return None
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # the jobs' timestamp format
        if not (now < job.expires and hmac.compare_digest(signature, job.params["token"])):
            return None
        return job if self.exported_from_live_project(job) else None

    def project_instance(self, name: str) -> str:
        """A random token of this project, made on first need: a project deleted and made again under its name
        has another (its creation time, to the second, could be the same)."""
        project = self.store.get_project(name)
        token = project.settings.get("instance")
        if not isinstance(token, str) or not token:
            project.settings["instance"] = token = secrets.token_hex(8)
            self.store.update_project(project)
        return token

    def exported_from_live_project(self, job: Job) -> bool:
        """Whether the project an export job read still exists, the same one (not deleted and made again since):
        a deleted project's export stayed downloadable, and importable, until the job expired (6 h)."""
        try:
            project = self.store.get_project(job.project)
        except NotFound:
            return False
        return "instance" not in job.params or project.settings.get("instance") == job.params["instance"]

    def own_export(self, uri: str) -> tuple[bytes, str] | None:
        """The file behind one of this server's signed export URLs, read from the job, not over HTTP.

        Whatever host the URL names (OPENQNA_PUBLIC_URL behind a proxy the server cannot reach from
        inside, or loopback, which URL fetching refuses), the signature identifies the file.
        """
        parsed = urlparse(uri)
        match = EXPORT_RESULT.search(parsed.path)
        if match is None:
            return None
        job = self.signed_export(match["job"], parse_qs(parsed.query).get("sig", [""])[0])
        if job is None or job.result is None:
            return None
        return job.result, job.result_name or "export"

    # -- job handlers -------------------------------------------------------------------------
    def handlers(self) -> dict:
        def deploy(job: Job) -> None:
            self.service.deploy(job.project, job.params["deployment"], by=job.params.get("by", ""))

        def delete(job: Job) -> None:
            self.service.delete_project(job.project)

        def export(job: Job) -> None:
            job.result, job.result_name, job.result_media = self.export(job.project, job.params["format"],
                                                                        job.params["assetKind"])

        def import_(job: Job) -> None:
            files = [(f["name"], base64.b64decode(f["data"])) for f in job.params.get("files") or []]
            self.import_assets(job.project, job.params["format"], job.params["assetKind"], job.params.get("body"),
                               files or None)

        def qnas(job: Job) -> None:
            ops = []
            named = {o["value"].get("id") for o in job.params["ops"] if isinstance(o.get("value"), dict)}

            def new_id() -> int:  # a free id that no QnA of this change names either
                while (qna_id := self.store.reserve_ids(job.project, 1)[0]) in named:
                    pass
                return qna_id

            for i, o in enumerate(job.params["ops"]):
                if o["op"] == "delete":
                    ops.append(QnaOp("delete", QnA([], "", id=o["value"]["id"]), if_last_updated=o.get("ifLastUpdated"),
                                     index=i))
                    continue
                # follow-ups written inline ("qna" instead of "qnaId") become QnAs added in this same change
                inline = hoist_prompt_qnas(o["value"], new_id)
                ops.extend(QnaOp("add", q, index=i) for q in read_json({"assets": {"qnas": inline}}).qnas)
                ops.append(QnaOp(o["op"], read_json({"assets": {"qnas": [o["value"]]}}).qnas[0],
                                 keep_questions=bool(o.get("keepQuestions")), if_last_updated=o.get("ifLastUpdated"),
                                 keep_suggestions=all(k.lower() != "activelearningsuggestions" for k in o["value"]),
                                 index=i))
            self.update_qnas(job.project, ops)

        def sources(job: Job) -> None:
            self.update_sources(job.project, [SourceOp(o["op"], Source(**o["source"]), o["refresh"],
                                                       base64.b64decode(o["data"]) if "data" in o else None)
                                              for o in job.params["ops"]])

        def upload(job: Job) -> None:
            done = self.import_file(job.project, job.params["name"], base64.b64decode(job.params["data"]))
            job.result, job.result_media = json.dumps(done).encode(), "application/json"  # GET /openqna/jobs/{id}

        return {"deploy": deploy, "delete": delete, "export": export, "import": import_, "qnas": qnas,
                "sources": sources, "upload": upload}


def read_import_file(name: str, data: bytes, fmt: str) -> KnowledgeBaseContent:
    """A ``fileUri`` import's file, read as ``fmt`` (json, tsv or excel) says, whatever its name ends in; a KB
    replica's .zip in any format.  A file that plainly is another format (a .tsv imported with format=excel) is
    refused naming the format it looks like, and one the reader refuses is said to be read as ``fmt``: the readers'
    own errors ("not a readable .xlsx workbook", "save the file as UTF-8") never mentioned the parameter."""
    if is_archive(data):
        return read_file(name if name.lower().endswith(".zip") else name + ".zip", data)
    suffix, label = IMPORT_FORMATS[fmt]
    seen = import_format_of(data)
    if seen is not None and seen != fmt:
        raise InvalidArgument(f"{name}: the file does not look like {label} (format={fmt}); it looks like "
                              f"{IMPORT_FORMATS[seen][1]}: import it with format={seen}.", target="format")
    try:
        return read_file(name if name.lower().endswith(suffix) else name + suffix, data)
    except FormatError as exc:
        raise InvalidArgument(f"{exc.message} (format={fmt} reads the file as {label}: if it is another, import "
                              f"it with that format)") from None


def read_import_files(files: list[tuple[str, bytes]]) -> tuple[KnowledgeBaseContent, list[ParsedDocument]]:
    """The files of a multipart :import, each read as its contents show (``import_format_of``), else as its name
    says: their QnAs and synonyms together, and the documents among them parsed.  Two QnA files that give one id
    are refused: the second would overwrite the first's QnA."""
    out, documents = KnowledgeBaseContent(), []
    owner: dict[int, str] = {}
    for name, data in files:
        if is_document(name, data):
            documents.append(parse_document(name, data))
            continue
        seen = None if is_archive(data) else import_format_of(data)
        content = read_import_file(name, data, seen) if seen else read_file(name, data)
        for q in content.qnas:
            if q.id is not None and owner.setdefault(q.id, name) != name:
                raise InvalidArgument(f"{owner[q.id]} and {name} both hold QnA id {q.id}: import them in separate "
                                      "calls, or give the QnAs of one other ids.")
        out.qnas += content.qnas
        out.synonyms += content.synonyms
        out.documents += content.documents
        out.settings = out.settings or content.settings
    return out, documents


def export_name(project: str, fmt: str, asset_kind: str, suffix: str) -> str:
    """The name an export downloads as: its project's, and what it holds when that is not the JSON of its QnAs
    (``kb1.json``, ``kb1-tsv.zip``, ``kb1-excel.zip``, ``kb1-synonyms.json``), so that exports of several projects
    and formats do not all arrive as ``KnowledgeBase.json`` or ``KnowledgeBase.zip`` (Azure's name, the archive's
    own), each overwriting or renaming the last."""
    parts = [project, *(["synonyms"] if asset_kind == "synonyms" else []), *([] if fmt == "json" else [fmt])]
    return "-".join(parts) + suffix


def _settings_shown(proj: Project) -> dict[str, str]:
    """The settings an import may set, as ``openqna import`` shows what it changed."""
    return {"description": proj.description, "language": proj.language, "default answer": proj.default_answer,
            "multilingual": "yes" if proj.multilingual else "no"}


def prompts_problem(qna: QnA, missing: list[int], fix: str) -> str:
    """What is wrong with ``qna``'s prompts to ``missing``, naming the QnA (its id, when it has one) and the ids."""
    name = qna.questions[0] if qna.questions else qna.answer[:40]
    where = "" if qna.id is None else f" (id {qna.id})"
    return f"QnA '{name}'{where} has follow-up prompts to QnA ids that do not exist: {missing}. {fix}"

