"""Duplicates, conflicts and misplaced questions in a project's QnAs, and the two fixes: merge and move.

``find`` reads one state of a project (``test`` by default) from its index: the stored question vectors, never
re-embedded, in one pass of the question units against themselves, a block of rows at a time (``block_rows``), so
memory stays bounded whatever the size.  Passages are ignored.  It reports:

* ``duplicate``: two QnAs whose closest pair of questions has a cosine of at least ``QUESTION_SAME`` (0.90) and whose
  answers are the same text (ignoring case and spacing) or have a cosine of at least ``ANSWER_SAME`` (0.90);
* ``conflict``: the same near-identical questions, different answers: one question, two answers;
* ``misplaced``: a question of a QnA with at least two questions that the ranker, asked that question with the
  question's own unit left out (as ``ranking.adapt`` holds alternate questions out), puts another QnA first by at
  least ``MISPLACED_MARGIN`` in its logit (the features' calibrated sum times the calibration's scale, before the KB's
  adaptation and the confidence's rescaling).  A question whose winner holds a near-identical question is left out:
  the pair is reported as a duplicate or a conflict already.

How the thresholds were chosen (the ``local`` embedder; scripts in the commit message):

* ``QUESTION_SAME`` 0.90: on deepset's COVID question-similarity set (488 labelled pairs), every pair at 0.85 or more
  is labelled similar (precision 1.000, 67 pairs; 0.990 at 0.80).  On the chit-chat "professional" KB (96 QnAs, 653
  questions), every cross-QnA pair at 0.90 or more means the same (14 pairs: ten questions stored word for word in two
  QnAs, "How's your day going?"/"How's your day?" 0.915, "Where do you come from?"/"Where did you come from?" 0.911),
  while 0.894 is "Good evening to you"/"Good night to you" and 0.854 "Do you like me?"/"Do you not like me?".
* ``ANSWER_SAME`` 0.90: the answers the chit-chat personalities give to one scenario read alike at 0.926 ("I'm sorry
  to hear that."/"I'm really sorry to hear that."), and differently worded ones fall well below (median 0.35, "I'm
  sure you look great."/"I bet you look fantastic." 0.849): below 0.90 a person should read both, so it is a conflict.
* ``MISPLACED_MARGIN``: see its comment.

``merge`` and ``move_question`` write the live state (``test``) in one transaction each, as any edit does, so the next
deploy carries them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from openqna.index.analyze import cjk_share
from openqna.index.memindex import MemIndex
from openqna.kb.catalog import LIVE
from openqna.kb.service import Service
from openqna.ranking import adapt, calibrations, ranker
from openqna.ranking.multilingual import cjk_kb
from openqna.records import InvalidArgument, NotFound, Prompt, QnA

QUESTION_SAME = 0.90  # question-question cosine at which two questions mean the same (module docstring)
ANSWER_SAME = 0.90  # answer-answer cosine at which two answers say the same
# The same in the multilingual space, which Chinese, Japanese and Korean text is read in (the default model cannot read
# it: on the labelled Chinese question pairs of covid-qsim-tianchi-zh's train split, pairs at 0.90 or more in its space
# are the same question 63% of the time, against 88% in the multilingual space (E5, centred); 0.95 there: 96%, 1,807
# of 8,753 pairs flagged; the dev split: 94%, as the universal sentence encoder's 0.94 was before it).  Its answers are
# held to the same cosine.
MULTILINGUAL_SAME = 0.95
# How far (in the ranker's scaled logit) another QnA must beat a question's own QnA for the question to be misplaced.
# Chit-chat "professional" with 39 questions moved at random to another QnA: margins of 0.5, 1, 1.5 and 2 all find 34 of
# them (the other 5 still rank their old QnA first), while the questions left in place that get flagged fall from 99 to
# 73, 46 and 30 (of 622); at 3 only 28 are found.  2.0 keeps the recall with the fewest flags.
MISPLACED_MARGIN = 2.0
BLOCK_ROWS = 2048  # question units per block of the one pass, at most
BLOCK_CELLS = 1 << 24  # ... and block rows × columns at most (64 MB of float32)
IMPORT_CHECK_MAX = 20_000  # question units above which ``openqna import`` skips its duplicates hint
KINDS = ("duplicate", "conflict", "misplaced")


@dataclass
class Finding:
    """One thing for the owner to look at: two QnAs, how sure, and what to compare."""

    kind: str
    qna_ids: list[int]
    score: float  # cosine of the two closest questions (a misplaced question's: with the winner's closest question)
    questions: list[str]
    answers: list[str]
    question: str | None = None  # misplaced: the question, its QnA (``qna_ids[0]``) and the QnA that wins it
    winner: int | None = None
    margin: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "qna_ids": self.qna_ids, "score": round(self.score, 4),
                               "questions": self.questions, "answers": self.answers}
        if self.kind == "misplaced":
            out.update(question=self.question, winner=self.winner, margin=round(float(self.margin or 0.0), 4))
        return out


def block_rows(columns: int) -> int:
    """Rows of a block of the one pass against ``columns`` question units: ``BLOCK_ROWS``, fewer on a large project."""
    return max(1, min(BLOCK_ROWS, BLOCK_CELLS // max(columns, 1)))


def _same_text(a: str, b: str) -> bool:
    def norm(s: str) -> str:
        return re.sub(r"\s+", " ", s).strip().casefold()

    return norm(a) == norm(b)


def find(service: Service, project: str, deployment: str = LIVE, *, misplaced: bool = True) -> list[Finding]:
    """Duplicates, conflicts and (with ``misplaced``) misplaced questions of ``project``'s ``deployment``, best first."""
    proj = service.store.get_project(project)
    index = service.indexes.get(project, deployment)
    if not index.q.n:
        return []
    own = service.calibration(proj)
    same = Same(QUESTION_SAME, ANSWER_SAME)
    cjk = cjk_units(index)
    if cjk_kb(index):  # read as the server reads its questions: in the multilingual space
        view = index.multilingual()
        if view is None:  # no vectors there (OPENQNA_MULTILINGUAL=off): the default model cannot tell
            return []
        index, own, same = view, calibrations.MULTILINGUAL, Same(MULTILINGUAL_SAME, MULTILINGUAL_SAME)
        cjk = np.zeros_like(cjk)
    q = index.q
    qna_unit = ~index.passage[q.rows]
    units = np.flatnonzero(qna_unit)
    pairs: dict[tuple[int, int], tuple[float, int, int]] = {}  # record rows (lo, hi) -> (cosine, unit of lo, of hi)
    held: list[tuple[int, int, float, float]] = []  # misplaced: (unit, winner row, margin, cosine with the winner)
    calibration = ranker.weights(index, own)
    informative = ranker.answer_informativeness(index) if calibration is not own else 0.0
    alternates = (q.counts[q.rows] >= 2) & qna_unit & ~cjk
    step = block_rows(q.n)
    for start in range(0, len(units), step):
        block = units[start:start + step]
        S = q.matrix[block] @ q.matrix.T  # the one pass: this block's questions against every question
        S[:, ~qna_unit] = -1.0
        S[:, cjk] = -1.0  # CJK questions of a KB read by the default model: compared below, in their own space
        S[cjk[block]] = -1.0
        hit_i, hit_j = np.nonzero(S >= same.question)
        for i, j in zip(hit_i.tolist(), hit_j.tolist()):
            u, v = int(block[i]), j
            ru, rv = int(q.rows[u]), int(q.rows[v])
            if ru == rv:
                continue
            key, pair = ((ru, rv), (u, v)) if ru < rv else ((rv, ru), (v, u))
            score = float(S[i, j])
            if score > pairs.get(key, (-2.0, 0, 0))[0]:
                pairs[key] = (score, *pair)
        if misplaced:
            held += _misplaced(index, calibration, informative, block, S, alternates[block], same)
    if cjk.any():
        _cjk_pairs(index, cjk & qna_unit, pairs)
    return _findings(service, project, deployment, index, pairs, held, same, cjk)


@dataclass(frozen=True)
class Same:
    """The cosines at which two questions, and two answers, say the same in the space they are compared in."""

    question: float
    answer: float


def cjk_units(index: MemIndex) -> np.ndarray:
    """Which question units hold a Chinese, Japanese or Korean word (one of their analysed terms)."""
    postings = index.q.postings
    tids = np.asarray([tid for term, tid in postings.vocab.items() if cjk_share(term) > 0], np.int64)
    out = np.zeros(index.q.n, bool)
    if len(tids):
        units = postings.units[np.isin(postings.tids, tids)]
        out[units[units < index.q.n]] = True
    return out


def _cjk_pairs(index: MemIndex, cjk: np.ndarray, pairs: dict[tuple[int, int], tuple[float, int, int]]) -> None:
    """The pairs among the CJK questions (``cjk``) of a KB read by the default model, compared in the multilingual
    space (none without vectors there): the default model cannot tell them apart."""
    view = index.multilingual()
    if view is None:
        return
    units = np.flatnonzero(cjk)
    q = view.q
    S = q.matrix[units] @ q.matrix[units].T
    for i, j in zip(*np.nonzero(S >= MULTILINGUAL_SAME)):
        u, v = int(units[i]), int(units[j])
        ru, rv = int(q.rows[u]), int(q.rows[v])
        if ru >= rv:
            continue
        score = float(S[i, j])
        if score > pairs.get((ru, rv), (-2.0, 0, 0))[0]:
            pairs[(ru, rv)] = (score, u, v)


def _misplaced(index: MemIndex, calibration: Any, informative: float, block: np.ndarray, S: np.ndarray,
               alternate: np.ndarray, same: Same) -> list[tuple[int, int, float, float]]:
    """The block's alternate questions another QnA wins by ``MISPLACED_MARGIN``: (unit, winner row, margin, cosine)."""
    q = index.q
    out = []
    chosen = np.flatnonzero(alternate)
    step = max(1, BLOCK_CELLS // 8 // max(index.n, 1))  # held-out features are ~8 arrays of (questions × records)
    for start in range(0, len(chosen), step):
        pos = chosen[start:start + step]
        units = block[pos]
        best_cos = S[pos]  # a copy (fancy indexing): the features overwrite what they are handed
        feats = adapt.held_out_features(index, q.matrix[units], adapt.unit_terms(index, units), units, best_cos.copy())
        logit = calibration.scale * calibration.logit(SimpleNamespace(**feats), False, informative)
        logit = np.where(index.passage[None, :], -np.inf, logit)
        own = q.rows[units]
        rows = np.arange(len(units))
        own_logit = logit[rows, own].copy()
        logit[rows, own] = -np.inf
        winner = np.argmax(logit, axis=1)
        margin = logit[rows, winner] - own_logit
        for k in np.flatnonzero(margin >= MISPLACED_MARGIN).tolist():
            w = int(winner[k])
            cosine = float(best_cos[k, q.lo[w]:q.hi[w]].max()) if q.counts[w] else 0.0
            if cosine < same.question:  # a near-identical question in the winner: a duplicate or conflict already
                out.append((int(units[k]), w, float(margin[k]), cosine))
    return out


def _findings(service: Service, project: str, deployment: str, index: MemIndex,
              pairs: dict[tuple[int, int], tuple[float, int, int]],
              held: list[tuple[int, int, float, float]], same: Same, cjk: np.ndarray) -> list[Finding]:
    q, a = index.q, index.a
    rows = {r for key in pairs for r in key} | {int(q.rows[u]) for u, *_ in held} | {w for _, w, *_ in held}
    ids = {r: int(index.ids[r]) for r in rows}
    qnas = service.store.get_qnas(project, list(ids.values()), deployment)

    def question(unit: int) -> str:
        record = qnas.get(ids[int(q.rows[unit])])
        position = unit - int(q.lo[q.rows[unit]])
        return record.questions[position] if record and position < len(record.questions) else ""

    def answer(row: int) -> str:
        record = qnas.get(ids[row])
        return record.answer if record else ""

    def nearest(unit: int, row: int) -> int:
        lo, hi = int(q.lo[row]), int(q.hi[row])
        return lo + int(np.argmax(q.matrix[lo:hi] @ q.matrix[unit]))

    out = []
    for (r1, r2), (score, u1, u2) in pairs.items():
        same_answer = _same_text(answer(r1), answer(r2))
        if not same_answer and a.counts[r1] and a.counts[r2]:
            alike, at = a, same.answer
            view = index.multilingual() if cjk[u1] or cjk[u2] else None  # a CJK pair of a KB read by the default model
            if view is not None:
                alike, at = view.a, MULTILINGUAL_SAME
            same_answer = float(alike.matrix[alike.lo[r1]] @ alike.matrix[alike.lo[r2]]) >= at
        out.append(Finding("duplicate" if same_answer else "conflict", [ids[r1], ids[r2]], min(score, 1.0),
                           [question(u1), question(u2)], [answer(r1), answer(r2)]))
    for unit, winner, margin, cosine in held:
        own = int(q.rows[unit])
        text = question(unit)
        out.append(Finding("misplaced", [ids[own], ids[winner]], cosine, [text, question(nearest(unit, winner))],
                           [answer(own), answer(winner)], question=text, winner=ids[winner], margin=margin))
    out.sort(key=lambda f: (-f.score, KINDS.index(f.kind), f.qna_ids))
    return out


def counts(findings: list[Finding]) -> dict[str, int]:
    return {kind: sum(f.kind == kind for f in findings) for kind in KINDS}


# -- the fixes --------------------------------------------------------------------------------------------------------
def _qnas(service: Service, project: str, *ids: int) -> dict[int, QnA]:
    service.store.get_project(project)
    found = service.store.get_qnas(project, list(ids))
    for i in ids:
        if i not in found:
            raise NotFound(f"There is no QnA with id {i} in project '{project}' (its test state): `openqna duplicates "
                           f"{project}` lists the ids of the QnAs it flags.")
        if found[i].kind != "qna":
            raise InvalidArgument(f"Record {i} of project '{project}' is a passage, not a QnA: only QnAs are merged "
                                  "and have questions to move.")
    return found


def _write(service: Service, project: str, writes: list[QnA], delete: list[int]) -> None:
    """``writes`` and the deletion of ``delete`` in one transaction of the live state."""
    _, items = service.plan_upsert(project, writes, match_content=False)
    service.store.replace_qnas(project, items, delete)
    for qid in delete:
        service.store.delete_feedback(project, qid)


def merge(service: Service, project: str, keep_id: int, drop_id: int) -> QnA:
    """Fold QnA ``drop_id`` into ``keep_id``: its questions (those not there already), its metadata (the kept QnA's
    values win) and its follow-up prompts join the kept QnA, which keeps its answer; prompts elsewhere that led to the
    dropped QnA lead to the kept one; the dropped QnA is deleted.  One write of the live state; returns the kept QnA."""
    if keep_id == drop_id:
        raise InvalidArgument(f"keep and drop are both QnA {keep_id}: name two different QnAs.", target="drop")
    found = _qnas(service, project, keep_id, drop_id)
    keep, drop = found[keep_id], found[drop_id]
    seen = {x.casefold() for x in keep.questions}
    for text in drop.questions:
        if text.casefold() not in seen:
            keep.questions.append(text)
            seen.add(text.casefold())
    keep.metadata = {**drop.metadata, **keep.metadata}
    keep.dialog.prompts = keep.dialog.prompts + drop.dialog.prompts
    writes = {keep_id: keep}
    for other in service.store.records_prompting(project, [drop_id]).values():  # a query, not every record
        if other.id is not None and other.id not in (keep_id, drop_id):
            writes[other.id] = other
    for record in writes.values():
        record.dialog.prompts = _rewired(record.dialog.prompts, drop_id, keep_id, record.id)
    _write(service, project, list(writes.values()), [drop_id])
    return keep


def _rewired(prompts: list[Prompt], old: int, new: int, owner: int | None) -> list[Prompt]:
    """``prompts`` with those to ``old`` leading to ``new``, one prompt per target, none to the QnA ``owner`` itself."""
    out: list[Prompt] = []
    targets: set[int] = set()
    for p in prompts:
        target = new if p.qna_id == old else p.qna_id
        if target == owner or target in targets:
            continue
        targets.add(target)
        out.append(Prompt(p.display_order, target, p.display_text))
    return out


def move_question(service: Service, project: str, question: str, from_id: int, to_id: int) -> tuple[QnA, QnA]:
    """Move ``question`` (as stored, case and spacing aside) from QnA ``from_id`` to ``to_id`` in one write; returns
    the two QnAs as written."""
    if from_id == to_id:
        raise InvalidArgument(f"from and to are both QnA {from_id}: name the QnA the question should move to.",
                              target="to")
    found = _qnas(service, project, from_id, to_id)
    source, target = found[from_id], found[to_id]
    matching = [x for x in source.questions if _same_text(x, question)]
    if not matching:
        listed = "; ".join(repr(x) for x in source.questions[:10])
        raise InvalidArgument(f"QnA {from_id} has no question {question!r}; its questions: {listed}.",
                              target="question")
    if len(source.questions) == 1:
        raise InvalidArgument(f"{question!r} is QnA {from_id}'s only question: merge the two QnAs instead "
                              f"(keep {to_id}, drop {from_id}).", target="question")
    source.questions = [x for x in source.questions if not _same_text(x, question)]
    if not any(_same_text(x, question) for x in target.questions):
        target.questions.append(matching[0])
    _write(service, project, [source, target], [])
    return source, target
