"""The FAQ regimes of ``regimes``: intent sets with many alternate questions, and one-question FAQs.

* *many questions*: the FAQ knowledge bases of ``faq`` (ten training utterances per intent, half of
  each chit-chat answer's questions), asked their held-out questions again, one at a time with the
  outcome kept, and questions from another set they cannot answer.
* *one question*: the same visible sets reduced to one question per QnA, as an FAQ page is.
  banking77 and hwu64: one seeded-random training utterance per intent as its question; the only
  answer text these sets have is the humanised intent name (``datasets.humanise``), so the answer
  side carries little. Chit-chat: the real answers, each with one seeded-random question of its
  own; the others are asked. Asked the intent sets' test utterances and the chit-chat answers'
  other questions, but for those the chit-chat file itself files under two answers or more (12
  texts in each personality's file, "Good morning" and "Do you hate me?" among them: at most 24 of
  about 650 questions), which no answer can get right when the other answer holds the text.

Off-topic questions: banking77's KBs are asked hwu64's test utterances and hwu64's banking77's
(both have currency questions, see ``offtopic.OVERLAP``; they are not removed here, so a few
"off-topic" questions have a fair answer); chit-chat KBs are asked banking77's, as a bot's
chit-chat layer hears task questions. A seeded sample of ``offtopic`` of them per KB.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from openqna.evaluation import datasets
from openqna.evaluation.faq import KnowledgeBase
from openqna.evaluation.regimes import Question, RegimeKB, assign_splits
from openqna.formats import read_file
from openqna.index.analyze import exact_key
from openqna.kb.service import Service
from openqna.records import QnA

MANY = "many questions"
ONE = "one question"  # FAQ pages with real answers: what the FAQ-page weights are fitted and held to
ONE_ZH = "one question, Chinese"  # Chinese questions matched to stored ones (no answer texts)
ONE_INTENT = "one question, intent names"  # intent sets cut to one question, the intent's name as the answer
PARAGRAPH_FAQ = "one question, written from the answer"  # a question written from each paragraph, asked others


def answers_of(service: Service, project: str) -> dict[int, str]:
    return {q.id: q.answer for q in service.store.list_qnas(project)}


def by_answer(answers: dict[int, str]):
    """``is_right`` for FAQ KBs: the gold label is the right QnA's answer text."""
    return lambda record_id, gold: answers.get(record_id) == gold


def offtopic_sample(questions: list[str], size: int | None, seed: int, salt: str) -> list[str]:
    """A seeded sample of ``size`` distinct questions (all when ``size`` is None), in their order."""
    distinct = list(dict.fromkeys(questions))
    if size is None or size >= len(distinct):
        return distinct
    chosen = set(random.Random(f"{seed}:{salt}").sample(range(len(distinct)), size))
    return [q for i, q in enumerate(distinct) if i in chosen]


def many_question_kb(service: Service, kb: KnowledgeBase, offtopic: list[str], seed: int,
                     source: str) -> RegimeKB:
    """A ``faq`` knowledge base already built in ``service``, as a regime KB."""
    answers = answers_of(service, kb.project)
    questions = [Question(q, answers[gold]) for q, gold in kb.queries] + [Question(q, None) for q in offtopic]
    assign_splits(questions, seed, kb.project, by_gold=True)
    return RegimeKB(kb.project, MANY, kb.records, questions, by_answer(answers), offtopic_source=source)


def one_question_intent_kb(service: Service, data: datasets.IntentData, offtopic: list[str], *, seed: int,
                           intents: int | None = None, per_intent_queries: int | None = None,
                           source: str = "") -> RegimeKB:
    project = f"{data.name}-one-question"
    rng = random.Random(f"{seed}:{project}")
    labels = list(data.train)[:intents]
    service.create_project(project)
    service.upsert(project, [QnA([rng.choice(data.train[label])], datasets.humanise(label), source=data.name)
                             for label in labels])
    taken: dict[str, int] = {}
    questions = []
    for text, label in data.test:
        if label in labels and (per_intent_queries is None or taken.get(label, 0) < per_intent_queries):
            taken[label] = taken.get(label, 0) + 1
            questions.append(Question(text, datasets.humanise(label)))
    questions += [Question(q, None) for q in offtopic]
    assign_splits(questions, seed, project, by_gold=True)
    return RegimeKB(project, ONE_INTENT, len(labels), questions, by_answer(answers_of(service, project)),
                    notes="answer = humanised intent name", offtopic_source=source)


def one_question_chitchat_kb(service: Service, data_dir: Path, personality: str, offtopic: list[str], *,
                             seed: int, answers: int | None = None, per_answer_queries: int | None = None,
                             source: str = "") -> RegimeKB:
    project = f"chitchat-{personality}-one-question"
    rng = random.Random(f"{seed}:{project}")
    indexed, questions = [], []
    qnas = read_file(datasets.chitchat_file(data_dir, personality)).qnas[:answers]
    answers_of_text = Counter(key for qna in qnas for key in {exact_key(q) for q in qna.questions})
    for qna in qnas:
        asked = list(qna.questions)
        rng.shuffle(asked)
        qna.questions = asked[:1]
        indexed.append(qna)
        questions += [Question(q, qna.answer) for q in asked[1:][:per_answer_queries]]
    service.create_project(project)
    service.upsert(project, indexed)
    questions += [Question(q, None) for q in offtopic]
    assign_splits(questions, seed, project, by_gold=True)
    # split first, so that leaving the ambiguous ones out moves no other question to the other split
    questions = [q for q in questions if q.gold is None or answers_of_text[exact_key(q.text)] == 1]
    return RegimeKB(project, ONE, len(indexed), questions, by_answer(answers_of(service, project)),
                    notes="real answers", offtopic_source=source)


def real_faq_kb(service: Service, data: datasets.FaqData, offtopic: list[str], *, seed: int, source: str,
                queries: int | None = None, entries: int | None = None) -> RegimeKB:
    """A one-question FAQ page with real answers (``datasets.covid_q``, ``covid_qsim_deepset``, ...): each entry a QnA
    with its one stored question and its answer, asked the data set's queries (a seeded sample of ``queries``) and
    ``offtopic``; a query is right when the top QnA is one of its gold entries.  Split by gold entry, so no test
    query asks an entry a dev query asks.  ``entries`` (a quick run's): the asked queries' gold entries and a seeded
    sample of this many others, not all."""
    project = data.name
    asked = data.queries
    if queries is not None and queries < len(asked):
        chosen = random.Random(f"{seed}:{project}").sample(range(len(asked)), queries)
        asked = [asked[i] for i in sorted(chosen)]
    stored = data.entries
    if entries is not None:
        golds = {faq_id for _, gold, _ in asked for faq_id in gold}
        others = [e for e in stored if e[0] not in golds]
        extra = {e[0] for e in random.Random(f"{seed}:{project}:entries").sample(others, min(entries, len(others)))}
        stored = [e for e in stored if e[0] in golds or e[0] in extra]
    service.create_project(project)
    service.upsert(project, [QnA([question], answer, source=data.name) for _, question, answer in stored])
    record = {(q.questions[0], q.answer): q.id for q in service.store.list_qnas(project)}
    entry_of = {record[(question, answer)]: faq_id for faq_id, question, answer in stored}
    questions = [Question(text, ",".join(gold), origin=origin) for text, gold, origin in asked]
    questions += [Question(q, None) for q in offtopic]
    assign_splits(questions, seed, project, by_gold=True)
    return RegimeKB(project, ONE, len(stored), questions,
                    lambda record_id, gold: entry_of.get(record_id) in gold.split(","),
                    notes="real answers, one question each", offtopic_source=source)
