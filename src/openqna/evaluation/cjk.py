"""Chinese and Japanese knowledge bases (issue 23), asked one question at a time, with dev and test splits.

Built from the visible span sets (``datasets.SPAN_SETS``) as users would build them, through
``Service`` with the default settings (``OPENQNA_MULTILINGUAL=auto``: these KBs hold CJK text, so they
get the multilingual space):

* *paragraphs*: every paragraph a passage (as ``passages.paragraph_retrieval``), asked the questions
  written about it;
* *FAQ*: every paragraph a QnA whose question is the first question written about it and whose answer is
  the paragraph, asked the paragraph's other questions (one question per QnA, the answer does the work);
* in each, a fifth of the paragraphs (seeded) is left out of the KB and their questions are asked as
  questions it cannot answer (``gold`` None): the same subject and style, the hardest off-topic case;
* XQuAD's English and Chinese files are the same questions about the same paragraphs, so the English KBs
  (``xquad-en``, the English path, untouched) are the parallel comparison: same paragraphs left out, same
  splits;
* the bundled sample KB asked in Chinese (``questions/sample-kb-zh.tsv``, ``sample-kb.tsv`` translated)
  with ``OPENQNA_MULTILINGUAL=on``: cross-lingual search, a Chinese question finding the English QnA;
* and on a larger scale XQuAD's English KBs with ``OPENQNA_MULTILINGUAL=on`` asked the Chinese file's questions
  (``asked_in_chinese``: the English KBs' golds and splits), and the Chinese KBs asked the English file's
  (``asked_in_english``).

Splits follow ``regimes``: by paragraph (no paragraph has questions in both), so a fit on dev never saw a
test paragraph.  JSQuAD is cut to its first ``JSQUAD_PARAGRAPHS`` paragraphs (file order) for time.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from importlib import resources
from pathlib import Path

from openqna.evaluation import datasets
from openqna.evaluation.document_regimes import contains, read_questions
from openqna.evaluation.env import setting
from openqna.evaluation.regimes import Question, RegimeKB, ask_all, split_of_keys, summaries
from openqna.evaluation.tiny import SAMPLE
from openqna.formats import read_file
from openqna.index.analyze import normalise
from openqna.kb.service import Service
from openqna.records import QnA

CJK = "cjk"
JSQUAD_PARAGRAPHS = 400
HELD_OUT = 5  # one paragraph in this many is left out of the KB
SETS = ("xquad-zh", "jsquad", "xquad-en")
QUESTIONS = Path(str(resources.files("openqna") / "evaluation" / "questions"))
SAMPLE_ZH = "cjk-sample-asked-in-zh"


def _held_out(i: int, seed: int) -> bool:
    return int(hashlib.sha256(f"{seed}:cjk-held-out:{i}".encode()).hexdigest(), 16) % HELD_OUT == 0


def paragraph_kbs(service: Service, data_dir: Path, name: str, *, seed: int, limit: int | None = None,
                  kinds: tuple[str, ...] = ("paragraphs", "faq"), prefix: str = "cjk", regime: str = CJK,
                  asked_in: str | None = None) -> list[RegimeKB]:
    """The paragraphs KB and the FAQ KB of span set ``name`` (see the module docstring), or those of ``kinds``,
    as projects ``{prefix}-{name}-{kind}`` of ``regime`` (the one-question regime has XQuAD's English FAQ).

    ``asked_in``: a span set parallel to ``name`` (XQuAD's files: the same questions about the same paragraphs, by
    id), whose questions are asked instead of ``name``'s (the FAQ KB's stored questions stay ``name``'s)."""
    relative, _ = datasets.SPAN_SETS[name]
    questions = datasets.squad(data_dir, relative)
    translated = None if asked_in is None else {
        q.id: q.question for q in datasets.squad(data_dir, datasets.SPAN_SETS[asked_in][0])}
    paragraphs = list(dict.fromkeys(q.context for q in questions))
    if limit is None and name == "jsquad":
        limit = JSQUAD_PARAGRAPHS
    paragraphs = paragraphs[:limit]
    number = {p: i for i, p in enumerate(paragraphs)}
    asked: dict[int, list[str]] = {}
    ids: dict[int, list[str]] = {}  # each asked question's id, in the same places (texts repeat: not by text)
    for q in questions:
        if q.context in number:
            asked.setdefault(number[q.context], []).append(q.question)
            ids.setdefault(number[q.context], []).append(q.id)
    split = split_of_keys(range(len(paragraphs)), seed, f"cjk:{name.split('-')[0]}")  # xquad-en/zh alike
    kept = [i for i in range(len(paragraphs)) if not _held_out(i, seed)]
    out = []
    for kind in kinds:
        project = f"{prefix}-{name}-{kind}"
        service.create_project(project)
        if kind == "paragraphs":
            records = [QnA([], paragraphs[i], source=str(i), kind="passage") for i in kept]
        else:
            records = [QnA([asked[i][0]], paragraphs[i], source=str(i)) for i in kept if i in asked]
        service.upsert(project, records)
        source = {q.id: q.source for q in service.store.list_qnas(project)}
        qs = []
        for i, texts in asked.items():
            first = 0 if kind == "paragraphs" else 1
            for text, qid in zip(texts[first:], ids[i][first:]):
                text = text if translated is None else translated[qid]
                qs.append(Question(text, None if _held_out(i, seed) else str(i), split[i]))
        out.append(RegimeKB(project, regime, len(records), qs,
                            lambda record_id, gold, source=source: source.get(record_id) == gold,
                            include_unstructured=kind == "paragraphs",
                            notes=f"{name} {kind}, {len(kept)} of {len(paragraphs)} paragraphs"))
    return out


def sample_asked_in_chinese(service: Service, *, seed: int) -> RegimeKB:
    """The bundled English sample KB with the multilingual space (``OPENQNA_MULTILINGUAL=on``), asked in Chinese."""
    with setting("OPENQNA_MULTILINGUAL", "on"):
        path = Path(str(resources.files("openqna") / "samples" / "openqna-faq.tsv"))
        service.import_content(SAMPLE_ZH, read_file(path))
    texts = {q.id: normalise(q.answer) for q in service.store.list_qnas(SAMPLE_ZH)}
    questions = [Question(q.question, q.answer) for q in read_questions(QUESTIONS / "sample-kb-zh.tsv")]
    # the English file's splits: the same question in both languages falls on the same side
    english = [q.question for q in read_questions(QUESTIONS / "sample-kb.tsv")]
    side = {}
    for gold_none in (False, True):
        pairs = [(zh, en) for zh, en in zip(questions, english) if (zh.gold is None) == gold_none]
        dev_test = split_of_keys((en for _, en in pairs), seed, f"{SAMPLE}:{'off' if gold_none else 'in'}")
        side.update({zh.text: dev_test[en] for zh, en in pairs})
    for q in questions:
        q.split = side[q.text]
    return RegimeKB(SAMPLE_ZH, CJK, len(texts), questions,
                    lambda record_id, gold: contains(texts.get(record_id, ""), gold),
                    notes="bundled English sample, hand-translated questions, OPENQNA_MULTILINGUAL=on")


CROSS_PREFIX = "cjk-asked-in-zh"
REVERSE_PREFIX = "cjk-asked-in-en"


def asked_in_chinese(service: Service, data_dir: Path, *, seed: int, limit: int | None = None) -> list[RegimeKB]:
    """XQuAD's English paragraphs and FAQ KBs with the multilingual space (``OPENQNA_MULTILINGUAL=on``), asked the
    same questions in Chinese (XQuAD's parallel file): cross-lingual search on the scale the sample KB is too small
    for, with its dev and test splits (those of the English and Chinese KBs: by paragraph)."""
    with setting("OPENQNA_MULTILINGUAL", "on"):
        return paragraph_kbs(service, data_dir, "xquad-en", seed=seed, limit=limit, prefix=CROSS_PREFIX,
                             asked_in="xquad-zh")


def asked_in_english(service: Service, data_dir: Path, *, seed: int, limit: int | None = None) -> list[RegimeKB]:
    """The other way: XQuAD's Chinese KBs (the space by default) asked the same questions in English
    (``calibrations.CROSSLINGUAL`` was fitted on their dev splits and ``asked_in_chinese``'s)."""
    return paragraph_kbs(service, data_dir, "xquad-zh", seed=seed, limit=limit, prefix=REVERSE_PREFIX,
                         asked_in="xquad-en")


def build(service: Service, data_dir: Path, *, seed: int, limit: int | None = None) -> list[RegimeKB]:
    """Every CJK KB built in ``service``."""
    built = [kb for name in SETS for kb in paragraph_kbs(service, data_dir, name, seed=seed, limit=limit)]
    built.append(sample_asked_in_chinese(service, seed=seed))
    built += asked_in_chinese(service, data_dir, seed=seed, limit=limit)
    built += asked_in_english(service, data_dir, seed=seed, limit=limit)
    return built


def evaluate(service: Service, built: list[RegimeKB], *, threshold: float) -> dict:
    """Every CJK KB (``build``) asked: per KB and split the regime summary, and every outcome (for fitting)."""
    outcomes = [o for kb in built for o in ask_all(service, kb)]
    cjk_kbs = [kb.project for kb in built if "-en-" not in kb.project and kb.project != SAMPLE_ZH]  # monolingual
    groups = summaries(outcomes, threshold)
    groups["all"] = summaries([o for o in outcomes if o.kb in cjk_kbs], threshold)["all"]
    return {"kbs": {kb.project: {"records": kb.records, "questions": len(kb.questions),
                                 "offtopic": sum(q.gold is None for q in kb.questions), "notes": kb.notes}
                    for kb in built},
            "summary": {group: {split: asdict(s) for split, s in by_split.items()}
                        for group, by_split in groups.items()},
            "questions": [asdict(o) for o in outcomes]}
