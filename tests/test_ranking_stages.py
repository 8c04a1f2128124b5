"""Each of the ranker's named stages (``ranker.STAGES``) does what its docstring says, on a real index.

The knowledge base is small and real (the real MiniLM, the real SQLite store and index cache); each test builds
the question's ``Scoring`` with ``ranker.scoring``, runs the stages before the one it tests, and checks that stage
alone against the arithmetic its docstring states.  The last test checks that ``rank`` is the stages in order:
its confidences are what they leave, and ``explain`` reports every stage by name.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from openqna.kb.service import AskRequest
from openqna.ranking import ranker
from openqna.records import QnA
from openqna.store.base import LIVE

QNAS = [
    QnA(id=1, answer="Charge the battery for two to four hours.", questions=["How long does charging take?"]),
    QnA(id=2, answer="Press and release the power button.", questions=["How do I turn it on?"]),
    QnA(id=3, answer="Use the USB port on the power supply.", questions=["Can I charge my phone?"]),
    QnA(id=4, answer="Open Settings and choose Update.", questions=["How do I update the software?"]),
]


@pytest.fixture
def kb(service):
    service.create_project("kb")
    service.upsert("kb", QNAS)
    return service


def prepared(service, question: str, *, upto: str, **options) -> ranker.Scoring:
    """``question``'s Scoring after every stage before the one named ``upto``."""
    index = service.indexes.get("kb", LIVE)
    vector = service.embedder.embed([question])[0]
    options.setdefault("calibration", service.shipped_calibration)
    s = ranker.scoring(index, question, vector, np.ones(index.n, bool), **options)
    assert s is not None
    for stage in ranker.STAGES:
        if stage.name == upto:
            return s
        stage.apply(s)
    raise AssertionError(f"no stage {upto}")


def stage(name: str) -> ranker.Stage:
    return next(s for s in ranker.STAGES if s.name == name)


def test_the_stages_have_names_and_docstrings():
    names = [s.name for s in ranker.STAGES]
    assert len(set(names)) == len(names) and all(names)
    assert all((type(s).__doc__ or "").strip() for s in ranker.STAGES)


def test_the_feature_sum_is_the_calibrations_weights(kb):
    s = prepared(kb, "how long does it take to charge?", upto="features")
    stage("features").apply(s)
    assert s.sparse is kb.shipped_calibration.sparse is not None  # an FAQ page: its own weights
    informative = ranker.answer_informativeness(s.index)
    assert np.allclose(s.logit, s.sparse.logit(s.f, False, informative))
    plain = prepared(kb, "how long does it take to charge?", upto="features",
                     calibration=dataclasses.replace(kb.shipped_calibration, sparse=None))
    stage("features").apply(plain)
    assert plain.sparse is None and np.allclose(plain.logit, plain.calibration.logit(plain.f, False, 0.0))
    assert np.array_equal(s.base, s.logit) and s.base is not s.logit and not s.adapted.any()


def test_the_kb_scale_is_the_calibrations_scale_and_shift_without_faq_weights(kb):
    plain = dataclasses.replace(kb.shipped_calibration, sparse=None)
    s = prepared(kb, "how long does it take to charge?", upto="kb_scale", calibration=plain)
    before = s.logit.copy()
    stage("kb_scale").apply(s)
    assert s.adaptation is None  # four QnAs of one question each: nothing to adapt to
    assert np.allclose(s.logit, plain.scale * (before - (plain.typical or 0.0)) + plain.shift)
    faq = prepared(kb, "how long does it take to charge?", upto="kb_scale")
    assert faq.sparse is not None  # an FAQ page: its own weights carry their own scale
    before = faq.logit.copy()
    stage("kb_scale").apply(faq)
    assert np.allclose(faq.logit, faq.sparse.scale * before + faq.sparse.shift)


def test_passages_alone_are_rescaled(kb):
    kb.upsert("kb", [QnA(id=9, kind="passage", answer="The battery charges fully in two to four hours.",
                         questions=["Battery"])])
    s = prepared(kb, "how long does it take to charge?", upto="passages")
    before = s.logit.copy()
    stage("passages").apply(s)
    p = s.calibration.passages
    assert p is not None and s.passages.any() and (~s.passages).any()
    assert np.allclose(s.logit[s.passages], (p.scale * p.logit(s.f) + p.shift)[s.passages])
    assert np.array_equal(s.logit[~s.passages], before[~s.passages])  # QnAs keep their logit


def test_the_conversation_adds_the_prompt_boost_and_the_sentence_offsets(kb):
    c = kb.shipped_calibration
    s = prepared(kb, "what next?", upto="context", boosted_ids={2}, logit_offsets={3: 0.75})
    before = s.logit.copy()
    stage("context").apply(s)
    rows = list(s.f.rows)
    added = s.logit - before
    assert added[rows.index(s.index.row_of[2])] == pytest.approx(c.scale * c.context_boost)
    assert added[rows.index(s.index.row_of[3])] == pytest.approx(0.75)
    others = [i for i, row in enumerate(rows) if row not in (s.index.row_of[2], s.index.row_of[3])]
    assert not added[others].any() and np.array_equal(added, s.context)


def test_the_regime_step_reads_the_top_against_its_rivals(kb):
    s = prepared(kb, "how long does it take to charge?", upto="regime")
    before = s.logit.copy()
    stage("regime").apply(s)
    assert s.calibration.regime is not None, "the shipped calibration has a last step"
    expected = s.calibration.regime.of(before, s.eligible[s.f.rows], s.passages, ranker.headings(s.index)[s.f.rows],
                                       adapted=s.adaptation is not None, faq_page=s.sparse is not None,
                                       records=s.index.n)
    assert np.allclose(s.logit, expected)
    no_step = prepared(kb, "how long does it take to charge?", upto="regime",
                       calibration=dataclasses.replace(kb.shipped_calibration, regime=None))
    kept = no_step.logit.copy()
    stage("regime").apply(no_step)
    assert np.array_equal(no_step.logit, kept)


def test_an_unread_script_with_no_word_in_the_kb_says_none_of_these(kb):
    s = prepared(kb, "充电需要多长时间", upto="unread_script", reads_cjk=False)
    stage("unread_script").apply(s)
    assert s.unread == 1.0
    assert np.allclose(s.logit, ranker.UNREAD_LOGIT + s.context)
    read = prepared(kb, "充电需要多长时间", upto="unread_script", reads_cjk=True)
    kept = read.logit.copy()
    stage("unread_script").apply(read)
    assert read.unread == 0.0 and np.array_equal(read.logit, kept)


def test_confidence_is_the_sigmoid_and_keywords_only_need_a_keyword(kb):
    s = prepared(kb, "how long does it take to charge?", upto="confidence")
    stage("confidence").apply(s)
    assert np.allclose(s.confidence, 1.0 / (1.0 + np.exp(-s.logit)))
    unread = prepared(kb, "充电需要多长时间", upto="confidence", reads_cjk=False)
    stage("confidence").apply(unread)
    assert unread.unread == 1.0 and not unread.confidence.any()  # no record holds one of its words


def test_a_stored_question_asked_word_for_word_is_the_answer(kb):
    s = prepared(kb, "How do I turn it on?", upto="exact_match")
    assert s.confidence is not None and s.confidence.max() < 1.0
    stage("exact_match").apply(s)
    assert s.confidence[list(s.f.rows).index(s.index.row_of[2])] == 1.0


def test_rank_is_the_stages_in_order_and_explain_names_each(kb):
    question = "how long does charging the battery take"
    s = prepared(kb, question, upto="exact_match")
    stage("exact_match").apply(s)
    ranked = ranker.rank(s.index, question, s.query_vector, s.eligible, top=4, calibration=s.calibration,
                         explain=True)
    by_row = dict(zip(s.f.rows.tolist(), s.confidence.tolist()))
    assert [(r.record_id, r.confidence) for r in ranked] == \
        [(r.record_id, pytest.approx(by_row[s.index.row_of[r.record_id]])) for r in ranked]
    assert ranked[0].record_id == 1
    parts = ranked[0].parts
    assert [k for k in parts if k.startswith("stage:")] == [f"stage:{st.name}" for st in ranker.STAGES]
    assert parts["stage:exact_match"] == pytest.approx(ranked[0].confidence, abs=1e-4)
    # the question qsim is the cosine of, by its position among the record's questions (Inspect names it)
    q, row = s.index.q, s.index.row_of[1]
    assert float(q.matrix[q.lo[row] + int(parts["qsim_question"])] @ s.query_vector) == pytest.approx(
        parts["qsim"], abs=1e-4)
    answers = kb.ask("kb", LIVE, AskRequest(question=question, top=1, explain=True))
    assert answers[0].qna.id == 1 and "stage:regime" in answers[0].parts


def test_what_ranking_derives_from_an_index_lives_with_that_version(kb):
    """``MemIndex.derived`` is the one home of per-index state: computed once per version, gone with it."""
    index = kb.indexes.get("kb", LIVE)
    calls: list[int] = []
    assert index.derived("test.n", lambda: calls.append(1) or index.n) == 4
    assert index.derived("test.n", lambda: calls.append(1) or -1) == 4 and calls == [1]
    assert ranker.headings(index) is ranker.headings(index)  # ranking's own state is kept there too
    kb.upsert("kb", [QnA(id=5, answer="Hold the button for ten seconds.", questions=["How do I reset it?"])])
    newer = kb.indexes.get("kb", LIVE)
    assert newer is not index and newer.n == 5
    assert newer.derived("test.n", lambda: newer.n) == 5 and len(ranker.headings(newer)) == 5


def test_an_faq_page_of_passage_like_answers_is_read_partly_as_passages(kb, monkeypatch):
    assert ranker.passage_share(0.45, 245) == 0.0  # covid-q: an FAQ page's answers, read by its own weights
    assert ranker.passage_share(0.8, 200) == pytest.approx(0.25)
    assert ranker.passage_share(0.92, 197) == ranker.passage_share(1.0, 5000) == 0.5  # XQuAD's paragraphs: half
    assert ranker.passage_share(1.0, 99) == 0.0  # among a few rivals every answer looks informative
    s = prepared(kb, "how long does it take to charge?", upto="kb_scale")
    assert s.informative == 1.0 and s.index.n < ranker.PASSAGE_MIN_RECORDS  # four QnAs on four topics
    before = s.logit.copy()
    stage("kb_scale").apply(s)
    assert np.allclose(s.logit, s.sparse.scale * before + s.sparse.shift)  # the FAQ-page weights alone
    monkeypatch.setattr(ranker, "PASSAGE_MIN_RECORDS", 4)
    big = prepared(kb, "how long does it take to charge?", upto="kb_scale")
    before = big.logit.copy()
    stage("kb_scale").apply(big)
    p = big.calibration.passages
    assert np.allclose(big.logit, 0.5 * (big.sparse.scale * before + big.sparse.shift)
                       + 0.5 * (p.scale * p.logit(big.f) + p.shift))
