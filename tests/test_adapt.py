"""Per-KB adaptation (ranking/adapt.py) with the real embedder and the real SQLite store."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from conftest import SHARED_DATA
from openqna.index.analyze import analyze
from openqna.kb.service import AskRequest
from openqna.ranking import adapt, ranker
from openqna.records import QnA

FAQ = [
    QnA(["How do I reset my password?", "I forgot my password", "Password reset steps"],
        "Use the 'Forgot password' link on the sign-in page."),
    QnA(["How can I change my email address?", "Update my e-mail", "New email for my account"],
        "Open Settings, then Account, then Email."),
    QnA(["Where can I download my invoices?", "Get a copy of my bill"], "Invoices are under Billing."),
    QnA(["Is there a mobile app?"], "Yes, for iOS and Android."),
]


def _banking(n_intents: int = 20, per_intent: int = 10):
    by: dict[str, list[str]] = {}
    with open(SHARED_DATA / "banking77" / "train.csv") as f:
        for row in csv.DictReader(f):
            by.setdefault(row["category"], []).append(row["text"])
    intents = sorted(by)[:n_intents]
    kb = [QnA(by[i][:per_intent], i.replace("_", " ")) for i in intents]
    asked = [(t, i.replace("_", " ")) for i in intents for t in by[i][per_intent:per_intent + 3]]
    return kb, asked


def test_held_out_features_equal_the_index_without_that_question(service):
    service.create_project("full")
    service.upsert("full", FAQ)
    index = service.indexes.get("full")
    unit = 1  # "I forgot my password", second question of the first record
    text = FAQ[0].questions[1]
    held = adapt.held_out_features(index, index.q.matrix[[unit]], adapt.unit_terms(index, np.array([unit])),
                                   np.array([unit]))
    without = [QnA([q for q in r.questions if q != text], r.answer) for r in FAQ]
    service.create_project("without")
    service.upsert("without", without)
    other = service.indexes.get("without")
    vector = service.embedder.embed([text])[0]
    f = ranker.features(other, analyze(text), vector, np.ones(other.n, bool), [])
    for name in ("qsim", "asim", "qmean", "qcent"):
        assert held[name][0] == pytest.approx(getattr(f, name), abs=1e-4), name
    # coverage weighs words by idf, which the held-out features take from the whole index (the left-out
    # question still counts in document frequencies): close, not equal, and zero exactly where it is zero
    for name in ("qcov", "acov"):
        assert held[name][0] == pytest.approx(getattr(f, name), abs=0.06), name
        assert ((held[name][0] == 0) == (getattr(f, name) == 0)).all(), name
    assert set(adapt.unit_terms(index, np.array([unit]))[0]) == set(analyze(text, bigrams=False))


def test_select_uses_the_classifier_only_where_held_out_questions_gain():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 10, 200)
    base = rng.normal(size=(200, 10))
    base[np.arange(200), gold] += 1.0  # right about half the time
    informative = np.zeros((200, 10))
    informative[np.arange(200), gold] = 3.0
    weight, without, with_ = adapt.select(base, informative, gold)
    assert weight > 0 and with_ > without + adapt.MIN_GAIN
    hurts = -informative
    assert adapt.select(base, hurts, gold) == (0.0, without, without)


def test_an_intent_kb_gets_its_own_typical_score_and_classifier(service, monkeypatch):
    kb, asked = _banking()
    service.create_project("bank")
    service.upsert("bank", kb)
    index = service.indexes.get("bank")
    a = ranker.kb_adaptation(index)
    assert a is not None and a.held_out == 200 and np.isfinite(a.offset)
    assert a.weight in adapt.WEIGHTS and a.top1_with >= a.top1_without
    assert ranker.kb_adaptation(index) is a  # fitted once per index version
    ids = {q.answer: q.id for q in service.store.list_qnas("bank")}

    def ask_all():
        out = []
        for text, answer in asked:
            top = service.ask("bank", "test", AskRequest(question=text, top=1))[0]
            out.append((top.qna.id == ids[answer], top.confidence))
        return out

    adapted = ask_all()
    monkeypatch.setenv("OPENQNA_KB_ADAPT", "0")
    plain = ask_all()
    assert ranker.kb_adaptation(index) is None
    assert [c for _, c in adapted] != [c for _, c in plain]
    # never worse on questions it was not fitted on (held-out training utterances), by more than noise
    assert np.mean([r for r, _ in adapted]) >= np.mean([r for r, _ in plain]) - 0.02
    monkeypatch.delenv("OPENQNA_KB_ADAPT")
    off = service.ask("bank", "test", AskRequest(question="set an alarm for seven tomorrow morning", top=1))[0]
    right = [c for r, c in adapted if r]
    assert off.confidence < np.median(right)


def test_a_kb_without_alternate_questions_keeps_the_defaults(service):
    service.create_project("single")
    service.upsert("single", [QnA([q.questions[0]], q.answer) for q in FAQ])
    index = service.indexes.get("single")
    assert ranker.kb_adaptation(index) is None
    top = service.ask("single", "test", AskRequest(question="I can't remember my password", top=1))[0]
    assert top.qna.answer == FAQ[0].answer and top.confidence >= 0.5


def test_near_margin_is_the_least_step_that_keeps_the_share():
    # identity "last step": a candidate is answered at 0.5 when its logit (less the margin) is 0 or more
    def final(row, allowed, rows):
        return row

    # four held-out questions; without its own record (column 0 or 1, ``gold``) each one's best rival stands at these
    rivals = np.array([-1.0, 0.3, 1.1, 2.6])
    logits = np.stack([np.array([5.0, r, -3.0]) for r in rivals])
    gold = np.zeros(4, np.int64)
    margin, before, after = adapt.near_margin(logits, gold, final, 0.25)
    assert before == 0.75  # 0.3, 1.1 and 2.6 are answered
    assert margin == 1.25 and after == 0.25  # the least multiple of NEAR_STEP above 1.1
    assert adapt.near_margin(logits, gold, final, 0.75) == (0.0, 0.75, 0.75)  # already within the share
    capped = adapt.near_margin(logits + 10.0, gold, final, 0.0)
    assert capped[0] == adapt.NEAR_MAX and capped[2] == 1.0  # never beyond the cap, and the share says so


def test_near_topic_setting_turns_away_questions_the_kb_has_no_record_for(service, monkeypatch):
    by: dict[str, list[str]] = {}
    with open(SHARED_DATA / "banking77" / "train.csv") as f:
        for row in csv.DictReader(f):
            by.setdefault(row["category"], []).append(row["text"])
    intents = sorted(by)
    kb, asked = _banking()
    service.create_project("bank")
    service.upsert("bank", kb)
    near = [t for i in intents[20:40] for t in by[i][:3]]  # intents the KB has no record for

    def confidences(questions):
        return np.array([service.ask("bank", "test", AskRequest(question=q, top=1))[0].confidence
                         for q in questions])

    index = service.indexes.get("bank")
    monkeypatch.delenv("OPENQNA_NEAR_TOPIC", raising=False)
    assert ranker.kb_adaptation(index).margin == 0.0
    near_off, asked_off = confidences(near), confidences([t for t, _ in asked])
    monkeypatch.setenv("OPENQNA_NEAR_TOPIC", "0.02")
    a = ranker.kb_adaptation(index)
    assert a.near_rate > 0.02 and a.margin > 0.0  # the KB's own held-out questions without their record say so
    assert a.near_rate_after <= 0.02 or a.margin == adapt.NEAR_MAX
    near_on, asked_on = confidences(near), confidences([t for t, _ in asked])
    assert (near_on <= near_off + 1e-9).all() and (asked_on <= asked_off + 1e-9).all()
    assert (near_on >= 0.5).sum() < (near_off >= 0.5).sum()
    monkeypatch.setenv("OPENQNA_NEAR_TOPIC", "2")
    with pytest.raises(ValueError, match="OPENQNA_NEAR_TOPIC must be a share from 0 to 1"):
        ranker.kb_adaptation(index)
