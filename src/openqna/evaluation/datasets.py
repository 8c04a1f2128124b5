"""Readers for the shared data sets (``../shared/data``), read in place and never copied.

Each returns plain Python data in a fixed order, so a seeded sample of it is the same on
every machine.  The folders' READMEs describe the formats.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path


@dataclass
class IntentData:
    """Utterances by intent: ``train`` builds the knowledge base, ``test`` is asked."""

    name: str
    train: dict[str, list[str]]
    test: list[tuple[str, str]]  # (utterance, intent)


def banking77(data_dir: Path) -> IntentData:
    def rows(split: str) -> list[tuple[str, str]]:
        with open(data_dir / "banking77" / f"{split}.csv", newline="", encoding="utf-8") as f:
            return [(r["text"], r["category"]) for r in csv.DictReader(f)]

    return IntentData("banking77", _group(rows("train")), rows("test"))


def hwu64(data_dir: Path) -> IntentData:
    def rows(split: str) -> list[tuple[str, str]]:
        folder = data_dir / "hwu64" / split
        texts = (folder / "seq.in").read_text(encoding="utf-8").splitlines()
        labels = (folder / "label").read_text(encoding="utf-8").splitlines()
        return [(t.strip(), label.strip()) for t, label in zip(texts, labels, strict=True)]

    return IntentData("hwu64", _group(rows("train")), rows("test"))


def _group(rows: list[tuple[str, str]]) -> dict[str, list[str]]:
    by: dict[str, list[str]] = defaultdict(list)
    for text, label in rows:
        by[label].append(text)
    return dict(sorted(by.items()))


def humanise(intent: str) -> str:
    """``card_arrival`` -> ``Card arrival``: the answer text of an intent's QnA."""
    text = intent.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


CHITCHAT_PERSONALITIES = ("professional", "friend", "comic")


def chitchat_file(data_dir: Path, personality: str) -> Path:
    return data_dir / "ms-qna-chitchat" / f"qna_chitchat_the_{personality}.tsv"


@dataclass
class Corpus:
    """A BEIR data set: documents by id, queries by id, relevant document ids per query."""

    docs: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, set[str]]


def scifact(data_dir: Path, split: str = "test") -> Corpus:
    folder = data_dir / "beir-scifact"
    docs: dict[str, tuple[str, str]] = {}
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs[d["_id"]] = (d["title"], d["text"])
    qrels: dict[str, set[str]] = defaultdict(set)
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, did, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels[qid].add(did)
    queries = {}
    with open(folder / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            if q["_id"] in qrels:
                queries[q["_id"]] = q["text"]
    return Corpus(docs, queries, dict(qrels))


@dataclass
class SpanQuestion:
    id: str
    question: str
    context: str
    answers: list[str]
    answer_start: int  # of the first answer, in code points of ``context``


SPAN_SETS = {  # name -> (path under the data folder, language)
    "xquad-en": ("xquad/xquad.en.json", "en"),
    "xquad-zh": ("xquad/xquad.zh.json", "zh"),
    "jsquad": ("jsquad/valid-v1.3.json", "ja"),
}


def squad(data_dir: Path, relative: str) -> list[SpanQuestion]:
    """Questions of a SQuAD v1.1-format file, in file order."""
    raw = json.loads((data_dir / relative).read_text(encoding="utf-8"))
    out = []
    for article in raw["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if qa.get("is_impossible") or not qa["answers"]:
                    continue
                out.append(SpanQuestion(qa["id"], qa["question"], paragraph["context"],
                                        [a["text"] for a in qa["answers"]], qa["answers"][0]["answer_start"]))
    return out


@dataclass
class FaqData:
    """A one-question FAQ with real answers: ``entries`` (id, question, answer), ``queries`` (text, gold ids,
    origin) asked of it, and ``unanswered`` questions no entry answers (off-topic probes; may be empty)."""

    name: str
    entries: list[tuple[str, str, str]]
    queries: list[tuple[str, tuple[str, ...], str]]
    unanswered: list[str]


def _tsv(path: Path) -> list[dict[str, str]]:
    """A derived file of ``../shared/data``: tab-separated with a header, no quoting."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def covid_q(data_dir: Path) -> FaqData:
    """COVID-Q: 245 FAQ entries (one stored question, a real answer), 594 questions of real users and of other FAQ
    sites (``origin``; 166 the dataset's author wrote), and 763 questions of classes with no answer."""
    folder = data_dir / "covid-q" / "derived"
    entries = [(e["faq_id"], e["question"], e["answer"]) for e in _jsonl(folder / "faq.jsonl")]
    queries = [(r["query"], (r["faq_id"],), r["origin"]) for r in _tsv(folder / "queries.tsv")]
    unanswered = [r["query"] for r in _tsv(folder / "unanswered_questions.tsv")]
    return FaqData("covid-q", entries, queries, unanswered)


def covid_qsim_deepset(data_dir: Path) -> FaqData:
    """deepset's COVID-QA question similarity: 210 health agencies' FAQ entries, 240 annotators' paraphrases."""
    folder = data_dir / "covid-qsim-deepset" / "derived"
    entries = [(e["faq_id"], e["question"], e["answer"]) for e in _jsonl(folder / "faq.jsonl")]
    queries = [(r["query"], tuple(r["faq_ids"].split(",")), "paraphrase") for r in _tsv(folder / "queries.tsv")]
    return FaqData("covid-qsim-deepset", entries, queries, [])


def covid_qsim_tianchi_zh(data_dir: Path, split: str = "dev") -> FaqData:
    """Tianchi's Chinese patient-question matching, one split: its stored questions (no answer texts: the entry's
    answer is its question) and the paraphrases labelled with them (the hard negatives are left out: they may
    match another entry)."""
    folder = data_dir / "covid-qsim-tianchi-zh" / "derived"
    entries = [(r["faq_id"], r["question"], r["question"]) for r in _tsv(folder / "faq.tsv") if r["split"] == split]
    golds: dict[str, list[str]] = defaultdict(list)
    for r in _tsv(folder / "queries.tsv"):
        if r["split"] == split and r["label"] == "1" and r["faq_id"] not in golds[r["query"]]:
            golds[r["query"]].append(r["faq_id"])
    return FaqData(f"covid-qsim-tianchi-zh-{split}", entries,
                   [(text, tuple(ids), "paraphrase") for text, ids in golds.items()], [])
