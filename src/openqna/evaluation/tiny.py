"""The tiny-KB regime: knowledge bases of a dozen or two QnAs, asked in-scope and off-topic questions.

* the bundled sample KB (``samples/openqna-faq.tsv``, 14 QnAs, imported as ``openqna serve`` imports
  it), asked the hand-written questions of ``questions/sample-kb.tsv`` (40 paraphrases, 20 off-topic) and the 40
  near-topic questions of ``questions/sample-kb-near.tsv`` (about openqna, answered by none of its QnAs);
* cuts of the one-question FAQ pages with real answers (``faq_cut``: ``FAQ_CUT`` seeded-random entries of covid-q
  and of covid-qsim-deepset, asked those entries' queries and as many off-topic questions): the dozen QnAs a team
  starts with, one question each;
* cuts of the chit-chat KBs (``CHITCHAT_CUTS`` seeded-random answers with two or more questions each,
  half of each answer's questions indexed and the rest asked) and of banking77 (``BANKING_CUT``
  seeded-random intents, ten training utterances each, asked their test utterances), each also
  asked ``offtopic`` of hwu64's test utterances (seeded); the chit-chat cuts only those of hwu64's task
  intents (``task_questions``): its ``general_*`` intents (jokes, praise, "say that again") are
  chit-chat, which a chit-chat KB may fairly answer.

The TSV knowledge bases of ``qna-sample-docs/knowledge-bases`` have one question per QnA and no
held-out questions, so they are not used.
"""

from __future__ import annotations

import random
from importlib import resources
from pathlib import Path

from openqna.evaluation import datasets
from openqna.evaluation.document_regimes import QUESTIONS, contains, normalise, read_questions
from openqna.evaluation.faq import PER_INTENT
from openqna.evaluation.faq_regimes import answers_of, by_answer, offtopic_sample, real_faq_kb
from openqna.evaluation.regimes import Question, RegimeKB, assign_splits
from openqna.formats import read_file
from openqna.kb.service import Service
from openqna.records import QnA

TINY = "tiny"
SAMPLE = "tiny-sample-kb"
CHITCHAT_CUTS = {"professional": 12, "friend": 18, "comic": 24}
FAQ_CUT = 12
BANKING_CUT = 15


def sample_kb(service: Service, *, seed: int) -> RegimeKB:
    path = Path(str(resources.files("openqna") / "samples" / "openqna-faq.tsv"))
    service.import_content(SAMPLE, read_file(path))
    texts = {i: normalise(a) for i, a in answers_of(service, SAMPLE).items()}
    questions = [Question(q.question, q.answer) for q in read_questions(QUESTIONS / "sample-kb.tsv")]
    assign_splits(questions, seed, SAMPLE, by_gold=False)
    # near-topic questions no answer answers (openqna's pricing, licence, platforms...), split on their own so that
    # the questions above keep the splits they had before these were written
    near = [Question(q.question, q.answer) for q in read_questions(QUESTIONS / "sample-kb-near.tsv")]
    assign_splits(near, seed, f"{SAMPLE}:near", by_gold=False)
    return RegimeKB(SAMPLE, TINY, len(texts), questions + near,
                    lambda record_id, gold: contains(texts.get(record_id, ""), gold),
                    notes="bundled sample, hand-written questions",
                    offtopic_source="hand-written, half of them near-topic")


def task_questions(data: datasets.IntentData) -> list[str]:
    """hwu64's test utterances except its ``general_*`` intents: assistant tasks, none of them chit-chat."""
    return [text for text, intent in data.test if not intent.startswith("general_")]


def chitchat_cut(service: Service, data_dir: Path, personality: str, size: int, offtopic: list[str], *,
                 seed: int, per_answer_queries: int | None = None) -> RegimeKB:
    project = f"tiny-chitchat-{personality}"
    rng = random.Random(f"{seed}:{project}")
    qnas = [q for q in read_file(datasets.chitchat_file(data_dir, personality)).qnas if len(q.questions) >= 2]
    chosen = sorted(rng.sample(range(len(qnas)), size))
    indexed, questions = [], []
    for qna in (qnas[i] for i in chosen):
        asked = list(qna.questions)
        rng.shuffle(asked)
        half = (len(asked) + 1) // 2
        qna.questions = asked[:half]
        indexed.append(qna)
        questions += [Question(q, qna.answer) for q in asked[half:][:per_answer_queries]]
    service.create_project(project)
    service.upsert(project, indexed)
    questions += [Question(q, None) for q in offtopic]
    assign_splits(questions, seed, project, by_gold=True)
    return RegimeKB(project, TINY, len(indexed), questions, by_answer(answers_of(service, project)),
                    notes=f"{size} chit-chat answers", offtopic_source="hwu64 tasks")


def banking_cut(service: Service, data: datasets.IntentData, offtopic: list[str], *, seed: int,
                per_intent_queries: int | None = None) -> RegimeKB:
    project = "tiny-banking77"
    rng = random.Random(f"{seed}:{project}")
    labels = sorted(rng.sample(sorted(data.train), BANKING_CUT))
    service.create_project(project)
    service.upsert(project, [QnA(rng.sample(data.train[label], min(PER_INTENT, len(data.train[label]))),
                                 datasets.humanise(label), source=data.name) for label in labels])
    taken: dict[str, int] = {}
    questions = []
    for text, label in data.test:
        if label in labels and (per_intent_queries is None or taken.get(label, 0) < per_intent_queries):
            taken[label] = taken.get(label, 0) + 1
            questions.append(Question(text, datasets.humanise(label)))
    questions += [Question(q, None) for q in offtopic]
    assign_splits(questions, seed, project, by_gold=True)
    return RegimeKB(project, TINY, len(labels), questions, by_answer(answers_of(service, project)),
                    notes=f"{BANKING_CUT} intents, {PER_INTENT} questions each", offtopic_source="hwu64")


def faq_cut(service: Service, data: datasets.FaqData, offtopic: list[str], *, seed: int, source: str) -> RegimeKB:
    """``FAQ_CUT`` seeded-random entries of a one-question FAQ page with real answers (of those some query asks),
    each a QnA with its one question and its answer, asked every query of theirs and as many questions of
    ``offtopic``; split by entry, as ``faq_regimes.real_faq_kb`` splits a whole page."""
    project = f"tiny-{data.name}"
    rng = random.Random(f"{seed}:{project}")
    asked = {gold for _, golds, _ in data.queries for gold in golds}
    eligible = [entry for entry in data.entries if entry[0] in asked]
    entries = [eligible[i] for i in sorted(rng.sample(range(len(eligible)), FAQ_CUT))]
    ids = {faq_id for faq_id, _, _ in entries}
    queries = [(text, tuple(g for g in golds if g in ids), origin) for text, golds, origin in data.queries
               if ids.intersection(golds)]
    cut = datasets.FaqData(project, entries, queries, [])
    kb = real_faq_kb(service, cut, offtopic_sample(offtopic, len(queries), seed, project), seed=seed, source=source)
    kb.regime, kb.notes = TINY, f"{FAQ_CUT} entries of {data.name}, one question each"
    return kb
