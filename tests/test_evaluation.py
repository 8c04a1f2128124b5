"""The evaluation harness: metric functions on hand-computed examples, and one quick run end to end."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from conftest import REPO, SHARED_DATA
from openqna.evaluation import datasets, guard, metrics, regimes, report, run_eval, space_faq
from openqna.evaluation import document_regimes as doc_eval
from openqna.evaluation.baselines import SIGNALS, fused
from openqna.evaluation.embedcache import CachedEmbedder
from openqna.evaluation.regime_report import plot_name
from openqna.evaluation.regimes import Outcome, Question
from openqna.evaluation.spans import confidence_figures, sample_by_paragraph
from openqna.kb.service import Service
from openqna.models.embedder import HashEmbedder
from openqna.store.sqlite import SQLiteStore

REPO_SAMPLE = REPO / "src" / "openqna" / "samples" / "openqna-faq.tsv"

# -- ranking metrics ---------------------------------------------------------------------


def test_reciprocal_rank():
    assert metrics.reciprocal_rank([7, 3, 1], 1, k=5) == pytest.approx(1 / 3)
    assert metrics.reciprocal_rank([1, 3], 1, k=5) == 1.0
    assert metrics.reciprocal_rank([2, 3, 4, 5, 6, 1], 1, k=5) == 0.0  # rank 6 is beyond MRR@5
    assert metrics.reciprocal_rank([], 1, k=5) == 0.0
    assert metrics.reciprocal_rank([9, 4, 8], {8, 4}, k=5) == 0.5  # first relevant counts


def test_ndcg_at_10():
    # Relevant a and b at ranks 1 and 3: DCG = 1 + 1/log2(4) = 1.5; ideal = 1 + 1/log2(3).
    assert metrics.ndcg_at_k(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert metrics.ndcg_at_k(["x", "y", "b"], {"b"}, 10) == pytest.approx(0.5)
    assert metrics.ndcg_at_k(["b", "a"], {"a", "b"}, 10) == pytest.approx(1.0)
    assert metrics.ndcg_at_k(["x"] * 10 + ["b"], {"b"}, 10) == 0.0
    assert metrics.ndcg_at_k(["b", "b"], {"b", "c"}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert metrics.ndcg_at_k(["b"], set(), 10) == 0.0


# -- answer-span metrics -----------------------------------------------------------------


def test_english_em_and_f1_follow_squad():
    assert metrics.exact_match("The Denver Broncos!", "denver broncos") == 1.0  # case, article, punctuation
    assert metrics.exact_match("Denver", "Denver Broncos") == 0.0
    # pred {broncos, won, game} vs gold {denver, broncos}: P = 1/3, R = 1/2, F1 = 0.4
    assert metrics.f1("Broncos won the game", "the Denver Broncos") == pytest.approx(0.4)
    assert metrics.f1("Broncos won the game", ["nothing here", "the Denver Broncos"]) == pytest.approx(0.4)
    assert metrics.f1("", "Denver") == 0.0
    assert metrics.f1("the", "a") == 1.0  # both normalise to nothing: SQuAD counts that as a match


def test_cjk_f1_is_character_level():
    assert metrics.answer_tokens("COVID-19 疫苗。", "zh") == ["covid", "19", "疫", "苗"]
    assert metrics.exact_match("北京。", "北京", "zh") == 1.0
    # pred 北京大学 (4 characters) vs gold 北京 (2): P = 1/2, R = 1, F1 = 2/3
    assert metrics.f1("北京大学", "北京", "zh") == pytest.approx(2 / 3)
    assert metrics.exact_match("北京大学", "北京", "zh") == 0.0
    # Japanese, best of several golds: vs 小笠原諸島 P = 5/8, R = 1 (F1 10/13);
    # vs 小笠原諸島を除く日本 P = 1, R = 8/10 (F1 8/9).
    golds = ["小笠原諸島", "小笠原諸島を除く日本"]
    assert metrics.f1("小笠原諸島を除く", golds, "ja") == pytest.approx(8 / 9)
    # The same strings scored as English would be one token each: no partial credit.
    assert metrics.f1("北京大学", "北京", "en") == 0.0


# -- harness pieces ----------------------------------------------------------------------


def test_rrf_by_hand():
    bm25 = np.array([0.0, 2.0, 1.0])
    dense = np.array([0.9, 0.1, 0.5])
    scores = fused(bm25, dense, np.ones(3, bool))
    # dense ranks rows 0, 2, 1; BM25 retrieves rows 1, 2 only.
    assert scores == pytest.approx([1 / 61, 1 / 63 + 1 / 61, 1 / 62 + 1 / 62])


def test_embedding_cache_answers_repeats_from_disk(tmp_path):
    inner = HashEmbedder()
    cache = CachedEmbedder(inner, tmp_path / "c" / "vectors.sqlite3")
    first = cache.embed(["alpha", "beta", "alpha"])
    assert (cache.misses, cache.hits) == (2, 1)
    assert cache.name == inner.name and cache.dim == inner.dim
    cache.close()
    again = CachedEmbedder(inner, tmp_path / "c" / "vectors.sqlite3")
    assert np.array_equal(again.embed(["beta", "alpha"]), first[[1, 0]])
    assert again.misses == 0 and again.model_seconds == 0.0
    again.close()


def test_span_sample_takes_whole_paragraphs():
    qs = [datasets.SpanQuestion(str(i), f"q{i}", f"ctx{i // 3}", ["x"], 0) for i in range(30)]
    chosen = sample_by_paragraph(qs, 7, random.Random(1))
    assert len(chosen) == 9  # three paragraphs of three questions reach 7
    assert [q.id for q in chosen] == sorted((q.id for q in chosen), key=int)
    assert sample_by_paragraph(qs, None, random.Random(1)) == qs


def test_span_confidence_figures_by_hand():
    # (confidence, F1): right at 0.9 and 0.4, wrong at 0.6, 0.3 and 0.2
    c = confidence_figures([(0.9, 1.0), (0.4, 0.5), (0.6, 0.0), (0.3, 0.4), (0.2, 0.0)])
    assert c["right at 0.5"] == 0.5 and c["wrong below 0.5"] == 2 / 3
    assert c["AUROC"] == (3 + 2) / 6  # 0.9 beats all three wrong spans, 0.4 beats 0.3 and 0.2


# -- the regimes: splits, labels, calibration figures ------------------------------------


def test_calibration_figures_by_hand():
    # five questions: right at 0.9, wrong at 0.8, right at 0.3, off-topic answered at 0.6, off-topic rejected at 0.1
    conf = [0.9, 0.8, 0.3, 0.6, 0.1]
    right = [True, False, True, False, False]
    answerable = [True, True, True, False, False]
    c = metrics.calibration(conf, right, answerable, 0.5)
    assert c.precision == pytest.approx(1 / 3)  # of 0.9, 0.8, 0.6 only the first is right
    assert c.recall == pytest.approx(1 / 2)  # of the right ones (0.9, 0.3) one is at or above 0.5
    assert c.offtopic_rejected == pytest.approx(1 / 2)
    assert c.answered == pytest.approx(3 / 5)
    assert metrics.calibration([0.2], [True], [True], 0.5).precision is None  # nothing answered
    assert metrics.calibration([0.9], [False], [True], 0.5).recall is None  # nothing right
    assert metrics.calibration([0.5], [True], [True], 0.5).precision == 1.0  # the threshold itself is answered
    bins = metrics.reliability(conf + [1.0], right + [True])
    assert len(bins) == 10 and sum(b["questions"] for b in bins) == 6
    assert bins[9] == {"low": 0.9, "high": 1.0, "questions": 2, "confidence": pytest.approx(0.95), "right": 1.0}
    assert bins[8]["right"] == 0.0 and bins[3]["right"] == 1.0 and bins[6]["right"] == 0.0  # 0.3 is in [0.3, 0.4)
    assert bins[5]["right"] is None


def test_regime_summary_by_hand():
    def o(gold, rank, conf, split="test"):
        return Outcome("kb", split, "q", gold, 1, "", conf, rank == 1, rank)

    outcomes = [o("a", 1, 0.9), o("a", 2, 0.7), o("b", None, 0.2), o(None, None, 0.8), o("a", 1, 0.1, "dev")]
    s = regimes.summary([x for x in outcomes if x.split == "test"], 0.5)
    assert (s.inscope, s.offtopic) == (3, 1)
    assert s.top1 == pytest.approx(1 / 3)
    assert s.mrr5 == pytest.approx((1 + 1 / 2 + 0) / 3)
    assert s.precision == pytest.approx(1 / 3)  # answered: 0.9 right, 0.7 wrong, the off-topic 0.8 wrong
    assert s.recall == 1.0 and s.offtopic_rejected == 0.0
    both = regimes.summaries(outcomes, 0.5)
    assert set(both) == {"all", "kb"} and both["all"]["dev"].inscope == 1 and both["kb"]["test"].questions == 4


def test_splits_are_deterministic_disjoint_and_stratified():
    def make():
        qs = [Question(f"q{i}", f"gold{i % 7}") for i in range(70)] + [Question(f"off{i}", None) for i in range(9)]
        regimes.assign_splits(qs, 20240601, "kb", by_gold=True)
        return qs

    first, again = make(), make()
    assert [q.split for q in first] == [q.split for q in again]
    for gold in {q.gold for q in first if q.gold}:  # all paraphrases of one QnA fall in one split
        assert len({q.split for q in first if q.gold == gold}) == 1
    assert sorted(sum(q.split == s for q in first if q.gold is None) for s in regimes.SPLITS) == [4, 5]
    other_seed = [Question(q.text, q.gold) for q in first]
    regimes.assign_splits(other_seed, 1, "kb", by_gold=True)
    assert [q.split for q in other_seed] != [q.split for q in first]
    # the hand-written document questions: every document in both splits, in-scope and none about half each
    by_doc = doc_eval.split_questions(doc_eval.read_questions(doc_eval.QUESTIONS / "documents.tsv"), 20240601)
    assert by_doc == doc_eval.split_questions(doc_eval.read_questions(doc_eval.QUESTIONS / "documents.tsv"), 20240601)
    for questions in by_doc.values():
        for answerable in (True, False):
            group = [q for q in questions if (q.gold is not None) == answerable]
            dev = sum(q.split == "dev" for q in group)
            assert abs(dev - (len(group) - dev)) <= 1 and all(q.split in regimes.SPLITS for q in group)


def test_chitchat_pages_are_not_asked_what_their_file_files_under_two_answers(tmp_path):
    """The chit-chat file files a dozen texts under two answers ("Good morning": a greeting and "Hi!"); asked, each
    would be wrong whichever of the two the KB answers with, so the one-question regime leaves them out, and only
    them: every other question keeps the split it had."""
    from collections import Counter

    from openqna.evaluation import faq_regimes
    from openqna.formats import read_file
    from openqna.index.analyze import exact_key

    qnas = read_file(datasets.chitchat_file(SHARED_DATA, "friend")).qnas
    owners = Counter(key for qna in qnas for key in {exact_key(q) for q in qna.questions})
    assert owners["good morning"] == 2 and sum(n > 1 for n in owners.values()) >= 10
    store = SQLiteStore(tmp_path / "data")
    kb = faq_regimes.one_question_chitchat_kb(Service(store, HashEmbedder()), SHARED_DATA, "friend",
                                              ["What's my balance?"], seed=20240601)
    store.close()
    asked = [q for q in kb.questions if q.gold is not None]
    assert asked and all(owners[exact_key(q.text)] == 1 for q in asked)
    left_out = sum(len(qna.questions) - 1 for qna in qnas) - len(asked)
    assert 0 < left_out <= sum(n for n in owners.values() if n > 1)
    everyone = [Question(q, qna.answer) for qna in qnas for q in qna.questions]
    regimes.assign_splits(everyone, 20240601, kb.project, by_gold=True)
    split_of = {(q.text, q.gold): q.split for q in everyone}
    assert all(q.split == split_of[(q.text, q.gold)] for q in asked)


def test_hand_written_questions_are_labelled_right(tmp_path):
    """Every snippet label is found in a record of its imported document (a label matching nothing is a
    bug in the labels), every document of the regime is there, and about a sixth of the questions are none."""
    labelled = doc_eval.read_questions(doc_eval.QUESTIONS / "documents.tsv")
    assert len(labelled) >= 150 and len({q.question for q in labelled}) == len(labelled)
    assert 0.15 <= sum(q.answer is None for q in labelled) / len(labelled) <= 0.2
    assert {q.document for q in labelled} == {
        "product-manual.pdf", "white-paper.pdf", "sample-unstructured-paper.pdf", "semi-structured.docx",
        "structured.docx", "multi-turn.docx", "Multiturn-ContosoBenefits.docx",
        "Introducing-surface-laptop-4-and-new-access.pdf"}
    assert {"how long it takes to charge surface?", "How long does it take to charge the battery?"} <= {
        q.question for q in labelled if q.document == "product-manual.pdf" and q.answer == "two to four hours"}
    store = SQLiteStore(tmp_path)
    try:
        service = Service(store, HashEmbedder())
        for document in dict.fromkeys(q.document for q in labelled):
            texts = doc_eval.record_texts(service, doc_eval.import_document(service, SHARED_DATA, document))
            for q in labelled:
                if q.document == document and q.answer is not None:
                    assert any(doc_eval.contains(t, q.answer) for t in texts.values()), (document, q.question)
    finally:
        store.close()
    sample = doc_eval.read_questions(doc_eval.QUESTIONS / "sample-kb.tsv")
    assert len(sample) == 60 and sum(q.answer is None for q in sample) == 20
    from openqna.formats import read_file

    answers = [doc_eval.normalise(q.answer) for q in read_file(REPO_SAMPLE).qnas]
    for q in sample:
        if q.answer is not None:
            assert sum(doc_eval.contains(a, q.answer) for a in set(answers)) >= 1, q.question


def test_label_normalisation():
    assert doc_eval.normalise("It\u2019s  Two\nto FOUR\u2010hours") == "it's two to four-hours"
    assert doc_eval.contains("a b c", "x || b c") and not doc_eval.contains("a b c", "c d")
    assert doc_eval.project_name("Multiturn-ContosoBenefits.docx") == "doc-multiturn-contosobenefits"


# -- one quick run, end to end -----------------------------------------------------------


@pytest.fixture(scope="module")
def quick(tmp_path_factory, embedder):
    out = tmp_path_factory.mktemp("eval")
    return out, run_eval(SHARED_DATA, out, quick=True)


def test_quick_run_writes_report_and_plots(quick):
    out, m = quick
    report = (out / "report.md").read_text(encoding="utf-8")
    for heading in ("## FAQ matching", "## Off-topic rejection at threshold 0.5", "## Passage retrieval",
                    "## Search in Chinese and Japanese", "## Precise answers", "## Runtime",
                    "## Regimes: the kinds of knowledge base users have (threshold t = 0.5)",
                    "## The accurate model: all-mpnet-base-v2 with the universal sentence encoder",
                    "## The int8 model (`fast`): every set of the guard table",
                    "## The accurate model with int8 weights (`accurate-fast`): every set of the guard table",
                    "## mpnet alone with int8 weights (`mpnet-fast`): every set of the guard table",
                    "## Filters: a filter restricts the answers, not the scale"):
        assert heading in report
    assert m["plots"] and all(f"]({name})" in report for name in m["plots"])
    for name in m["plots"]:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {p.name for p in out.iterdir()} == {"report.md", "metrics.json", ".cache", *m["plots"]}


def test_quick_run_metrics_are_sane(quick):
    _, m = quick
    assert set(m["faq"]) == {"banking77", "hwu64", "chitchat-professional", "chitchat-friend", "chitchat-comic"}
    for r in m["faq"].values():
        assert r["queries"] > 0
        for method in ("bm25", "dense", "rrf", "ranker"):
            assert 0.0 <= r["top1"][method] <= r["mrr5"][method] <= 1.0
        assert r["top1"]["ranker"] >= 0.5  # far above chance (1/12) even on a small subset
    for r in m["offtopic"].values():
        assert 0.0 <= r["offtopic_rejected"] <= 1.0 and 0.0 <= r["inscope_rejected"] <= 1.0
        assert r["top1_lost"] == pytest.approx(r["top1_at_zero"] - r["top1_at_threshold"])
        assert r["top1_at_threshold"] <= r["top1_at_zero"]
        assert 0 < r["disjoint_questions"] <= r["offtopic_questions"] and 0.0 <= r["disjoint_rejected"] <= 1.0
    # the same FAQ and off-topic runs with the accurate model and with mpnet alone (make test installs both)
    assert m["accurate"]["embedder"] == "mpnet-base-v2/onnx-fp32+use-multilingual-v3/numpy@0.4"
    assert m["mpnet_alone"]["embedder"] == "mpnet-base-v2/onnx-fp32"
    for acc in (m["accurate"], m["mpnet_alone"]):
        _same_questions_as_the_default(m, acc)
    # every set of the guard table again with the int8 model, the same questions; the guard reads none of it
    assert m["fast"]["embedder"] == "minilm-l6-v2/onnx-int8" and "questions" not in m["fast"]["cjk"]
    default, fast = guard.sets_of(m), guard.sets_of(m["fast"])
    assert [(s.name, s.inscope) for s in fast] == [(s.name, s.inscope) for s in default
                                                   if not s.name.endswith(space_faq.IN_SPACE)]
    assert any(s.name == "covid-q" + space_faq.IN_SPACE for s in default)  # the guard holds the pages in the space
    # the accurate pair, mpnet alone and their int8 mpnet over every set are left to full runs (mpnet twice: 140 s)
    for key in ("accurate_sets", "accurate_fast", "mpnet_sets", "mpnet_fast"):
        assert m[key] == {"missing": "not run by a quick run"}
    # filters, on copies of the regimes' KBs: the copy of a page a tenant's filter leaves out takes nothing
    filtered = [m["filters"]["all"][split] for split in ("dev", "test")]
    assert sum(f["inscope"] for f in filtered) > 0 and sum(f["tenant_questions"] for f in filtered) > 0
    for f in filtered:
        assert f["right"] + f["wrong"] <= f["inscope"] and f["left_out_answered"] <= f["left_out"] <= f["inscope"]
        assert f["tenant_right"] >= f["once_right"] - 1
    p = m["passages"]["scifact"]
    assert p["queries"] > 0 and all(0.0 <= v <= 1.0 for v in p["ndcg10"].values())
    assert set(m["paragraphs"]) == {"xquad-en", "xquad-zh", "jsquad"}
    for r in m["paragraphs"].values():
        assert r["paragraphs"] == 4 and r["queries"] > r["paragraphs"]
        for method in ("bm25", "dense", "rrf", "ranker"):
            assert 0.0 <= r["top1"][method] <= r["mrr10"][method] <= 1.0
        assert r["top1"]["ranker"] >= 0.75  # four paragraphs: chance is 0.25
    for r in m["spans"].values():
        assert r["questions"] > 0
        for method in ("short span", "best sentence", "first sentence", "gold sentence"):
            assert 0.0 <= r["em"][method] <= r["f1"][method] <= 1.0
        assert r["f1"]["best sentence"] > 0.0
        assert 0.0 <= r["confidence"]["right at 0.5"] <= 1.0 and 0.0 <= r["confidence"]["wrong below 0.5"] <= 1.0
    # a whole sentence almost never equals the gold answer; the short span often does
    em = {method: sum(r["em"][method] for r in m["spans"].values()) for method in ("short span", "best sentence")}
    assert em["short span"] > em["best sentence"]


def test_an_int8_models_sets_are_shown_beside_its_fp32_models(quick):
    """The accurate-fast section's table (full runs only) read from two runs of the same shape: the quick run's
    int8 MiniLM standing for accurate-fast, the default's own sets for accurate."""
    _, m = quick
    shaped = {**m, "accurate_sets": {**m["fast"], "regimes": m["regimes"], "cjk": m["cjk"]},
              "accurate_fast": m["fast"]}
    lines = report._int8_pair_section(shaped, *report.INT8_PAIRS[0])
    assert lines[1] == "## The accurate model with int8 weights (`accurate-fast`): every set of the guard table"
    default, fast = {s.name: s for s in guard.sets_of(m)}, guard.sets_of(m["fast"])
    rows = [line for line in lines if line.startswith("| `")]
    assert len(rows) == len(fast)
    for row, s in zip(rows, fast):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == f"`{s.name}`" and float(cells[3]) == pytest.approx(default[s.name].top1, abs=5e-4)
        assert float(cells[4]) == pytest.approx(s.top1, abs=5e-4) and cells[-1] == f"{default[s.name].top1:.3f}"
        moved = max(abs(s.top1 - default[s.name].top1), abs(s.right_at_t - default[s.name].right_at_t)) > 0.005
        assert (cells[10] == "**yes**") == moved
    assert lines[-1].startswith(f"{sum('**yes**' in r for r in rows)} of {len(rows)} sets moved")
    for pair in report.INT8_PAIRS:
        assert report._int8_pair_section(m, *pair)[3] == "Not measured: not run by a quick run"


def test_threshold_curves_agree_with_real_calls(quick):
    """The sweep reads answered-or-not off the confidences; at the threshold it must match Service.ask."""
    _, m = quick
    at = m["curves"]["thresholds"].index(m["config"]["threshold"])
    for kb, r in m["offtopic"].items():
        c = m["curves"][kb]
        tolerance = 1.0 / m["faq"][kb]["queries"] + 1e-9  # one question rounding at the boundary
        assert c["offtopic_rejected"][at] == pytest.approx(r["offtopic_rejected"], abs=tolerance)
        assert c["rejected"][at] == pytest.approx(r["inscope_rejected"], abs=tolerance)
        assert c["accuracy"][at] == pytest.approx(r["top1_at_threshold"], abs=tolerance)


def test_overlap_rule_names_the_currency_intents_of_both_sets():
    from openqna.evaluation.datasets import humanise
    from openqna.evaluation.offtopic import OVERLAP

    for intent in ("exchange_rate", "fiat_currency_support", "card_payment_wrong_exchange_rate", "qa_currency"):
        assert OVERLAP.search(humanise(intent)), intent
    for intent in ("card_arrival", "transfer_not_received_by_recipient", "email_query", "takeaway_query"):
        assert not OVERLAP.search(humanise(intent)), intent


def _same_questions_as_the_default(m: dict, acc: dict) -> None:
    assert set(acc["faq"]) == set(m["faq"])
    for kb, r in acc["faq"].items():
        assert r["queries"] == m["faq"][kb]["queries"] and r["records"] == m["faq"][kb]["records"]
        for method in ("bm25", "dense", "rrf", "ranker"):
            assert 0.0 <= r["top1"][method] <= r["mrr5"][method] <= 1.0
        assert r["top1"]["bm25"] == m["faq"][kb]["top1"]["bm25"]  # same KB and questions, keyword search alike
        assert r["top1"]["ranker"] >= 0.5
    assert set(acc["offtopic"]) == set(m["offtopic"])
    for kb, r in acc["offtopic"].items():
        assert r["offtopic_questions"] == m["offtopic"][kb]["offtopic_questions"] and 0.0 <= r["offtopic_rejected"] <= 1.0


def test_quick_run_covers_every_regime(quick):
    out, m = quick
    r = m["regimes"]
    assert list(r) == ["many questions", "one question", "one question, Chinese", "one question, intent names",
                       "one question, written from the answer", "documents", "tiny"]
    for regime, data in r.items():
        questions = data["questions"]
        for split in regimes.SPLITS:
            s = data["summary"]["all"][split]
            mine = [q for q in questions if q["split"] == split]
            inscope = [q for q in mine if q["gold"] is not None]
            assert s["questions"] == len(mine) > 0 and s["inscope"] == len(inscope) > 0, (regime, split)
            assert s["top1"] == pytest.approx(sum(q["right"] for q in inscope) / len(inscope))
            assert 0.0 <= s["top1"] <= s["mrr5"] <= 1.0
            answered = [q for q in mine if q["confidence"] >= 0.5]
            if answered:
                assert s["precision"] == pytest.approx(sum(q["right"] for q in answered) / len(answered))
            assert sum(b["questions"] for b in s["bins"]) == len(mine)
        # off-topic rejection is measured in every regime (the quick run's four XQuAD paragraphs leave out too few
        # to give both splits off-topic questions)
        assert all(data["summary"]["all"][split]["offtopic"] > 0 for split in regimes.SPLITS) or \
            regime == "one question, written from the answer" and data["summary"]["all"]["test"]["offtopic"] > 0
        for q in questions:
            assert set(q) >= {"kb", "split", "question", "gold", "top", "confidence", "right"}
            assert not (q["right"] and q["gold"] is None)  # an off-topic question is never right
        texts = {}
        for q in questions:  # a question (per KB) sits in one split only
            assert texts.setdefault((q["kb"], q["question"]), q["split"]) == q["split"]
        assert (out / plot_name(regime)).exists()
    assert {"doc-structured", "doc-product-manual"} == set(r["documents"]["kbs"])
    assert "tiny-sample-kb" in r["tiny"]["kbs"] and all(k["records"] < 30 for k in r["tiny"]["kbs"].values())
    charge = [q for q in r["documents"]["questions"] if q["question"] == "how long it takes to charge surface?"]
    assert len(charge) == 1 and charge[0]["gold"] == "two to four hours"


def test_quick_run_covers_the_chinese_and_japanese_kbs(quick):
    """The CJK KBs (issue 23): each asked in-scope and off-topic questions, English and Chinese XQuAD in the same
    splits, paragraphs on the same side in both languages, and the section in report.md."""
    out, m = quick
    r = m["cjk"]
    kinds = ("paragraphs", "faq")
    assert set(r["kbs"]) == {f"cjk-{s}-{k}" for s in ("xquad-zh", "jsquad", "xquad-en") for k in kinds} | {
        "cjk-sample-asked-in-zh"} | {f"cjk-asked-in-zh-xquad-en-{k}" for k in kinds} | {
        f"cjk-asked-in-en-xquad-zh-{k}" for k in kinds}
    by_kb: dict = {}
    for q in r["questions"]:
        by_kb.setdefault(q["kb"], []).append(q)
        assert not (q["right"] and q["gold"] is None)
    for kind in kinds:
        en, zh = by_kb[f"cjk-xquad-en-{kind}"], by_kb[f"cjk-xquad-zh-{kind}"]
        assert [(q["gold"], q["split"]) for q in en] == [(q["gold"], q["split"]) for q in zh]
        # the English KB asked XQuAD's Chinese questions: the Chinese KB's questions, the English KB's golds
        cross = by_kb[f"cjk-asked-in-zh-xquad-en-{kind}"]
        assert [(q["question"], q["gold"], q["split"]) for q in cross] == [
            (z["question"], e["gold"], e["split"]) for z, e in zip(zh, en)]
        reverse = by_kb[f"cjk-asked-in-en-xquad-zh-{kind}"]  # and the Chinese KB asked the English questions
        assert [(q["question"], q["gold"], q["split"]) for q in reverse] == [
            (e["question"], z["gold"], z["split"]) for z, e in zip(zh, en)]
    sample = by_kb["cjk-sample-asked-in-zh"]
    assert len(sample) == 60 and sum(q["gold"] is None for q in sample) == 20
    assert r["summary"]["all"]["test"]["inscope"] > 0
    assert "## Chinese and Japanese" in (out / "report.md").read_text(encoding="utf-8")


def test_quick_run_ranks_real_faq_pages_in_the_multilingual_space(quick):
    """``space_faq``: the one-question regime's English FAQ pages with real answers (and the two tiny cuts) given
    the space and asked the same questions in the same splits, before and after the space's FAQ-page weights."""
    out, m = quick
    r = m["cjk_faq_pages"]["kbs"]
    assert set(r) == {"covid-q", "covid-qsim-deepset", "tiny-covid-q", "tiny-covid-qsim-deepset"} | {
        f"chitchat-{p}-one-question" for p in ("professional", "friend", "comic")}
    regimes = {kb: by_split for data in m["regimes"].values() for kb, by_split in data["summary"].items()}
    for kb, k in r.items():
        for split in ("dev", "test"):  # the same questions as the regime's KB of that name
            assert (k["after"][split]["inscope"], k["after"][split]["offtopic"]) == (
                regimes[kb][split]["inscope"], regimes[kb][split]["offtopic"]), kb
            assert k["before"][split]["inscope"] == k["after"][split]["inscope"]
        assert 0.0 <= k["handover"] <= 1.0 and 0.0 <= k["informativeness"] <= 1.0
    assert "### Real FAQ pages ranked in the multilingual space" in (out / "report.md").read_text(encoding="utf-8")


def test_quick_run_trains_every_regime_kb_and_reports_before_and_after(quick):
    """Save and train in the evaluation (issue 42): every FAQ-regime and CJK KB trained; where no model was kept the
    test figures after are the ones before, and where one was they come from asking the test split again."""
    out, m = quick
    t = m["training"]
    kbs = {kb for data in m["regimes"].values() for kb in data["kbs"]} | set(m["cjk"]["kbs"])
    assert set(t) == kbs
    for name, entry in t.items():
        test = next(data["summary"][name]["test"] for data in [*m["regimes"].values(), m["cjk"]]
                    if name in data["summary"])
        assert entry["before"]["top1"] == test["top1"] and entry["before"]["right_at_t"] == test["right_at_t"]
        if not entry["kept"]:
            assert entry["after"] == entry["before"], name
        for space in entry["held_out"]:
            assert space["kept"] == (entry["kept"] and space["kept"])
        # the dev split sent as feedback: judged by it, cross-validated, where there are 20 questions or more
        fed = entry["with_dev_feedback"]
        judged = {space["judgedBy"] for space in fed["held_out"]}
        if fed["feedback"] >= 20 and all(space["examples"] >= 20 for space in fed["held_out"]):
            assert "feedback, cross-validated" in judged, name
        if not fed["kept"]:
            assert fed["after"] == entry["before"], name
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "## Save and train" in text and "*With its dev split sent as feedback*" in text


def test_real_faq_pages_are_one_question_regimes_with_real_answers(quick):
    """covid-q and covid-qsim-deepset (and Tianchi's Chinese set) are FAQ pages of one question per QnA, judged by
    their gold entries; the intent sets cut to one question are a regime of their own, fitted on by nothing."""
    _, m = quick
    r = m["regimes"]
    assert {"covid-q", "covid-qsim-deepset"} <= set(r["one question"]["kbs"])
    assert not any(kb.startswith(("banking77", "hwu64")) for kb in r["one question"]["kbs"])
    assert set(r["one question, intent names"]["kbs"]) == {"banking77-one-question", "hwu64-one-question"}
    assert set(r["one question, Chinese"]["kbs"]) == {"covid-qsim-tianchi-zh-dev"}
    covid = [q for q in r["one question"]["questions"] if q["kb"] == "covid-q"]
    assert {q["split"] for q in covid if q["gold"]} == {"dev", "test"} and any(q["gold"] is None for q in covid)
    for q in covid:
        if q["gold"] is not None:  # the answer judged right is the gold entry's: right iff its rank is 1
            assert q["origin"] and set(q["signals"]) == set(SIGNALS)
            assert q["right"] == (q["rank"] == 1)
    # the real users' subset leaves out the questions the data set's author wrote
    real = r["one question"]["subsets"]["covid-q, real users"]
    mine = [q for q in covid if q["origin"] != "author_written" and q["split"] == "test"]
    assert real["test"]["questions"] == len(mine)


def test_single_signals_are_counted_per_set(quick):
    _, m = quick
    for regime in m["regimes"].values():
        for kb in regime["kbs"]:
            test = regime["summary"][kb]["test"]
            mine = [q for q in regime["questions"] if q["kb"] == kb and q["split"] == "test" and q["gold"]]
            for name in SIGNALS:
                assert test["signals"][name] == pytest.approx(sum(q["signals"][name] for q in mine) / len(mine))
                assert test["discord"][name] == [sum(q["right"] and not q["signals"][name] for q in mine),
                                                 sum(q["signals"][name] and not q["right"] for q in mine)]
            right = sum(q["right"] and q["confidence"] >= 0.5 for q in mine) / len(mine)
            assert test["right_at_t"] == pytest.approx(right)


def test_guard_reads_back_its_own_table_and_refuses_a_fall(quick):
    out, m = quick
    report = (out / "report.md").read_text(encoding="utf-8")
    sets = guard.sets_of(m)
    committed = guard.committed_figures(report)
    assert committed == {s.name: (round(s.top1, 3), round(s.right_at_t, 3)) for s in sets} and len(committed) > 20
    floors = {s.name for s in sets if not s.floor_met}
    verdict = guard.check(m, committed)  # the same figures: nothing fell
    assert not verdict.regressed and {line.split(" top-1 ")[0] for line in verdict.below_floor} == floors
    assert verdict.compared == len(sets)
    name = next(s.name for s in sets if s.top1 < 0.98)
    higher = dict(committed)
    higher[name] = (committed[name][0] + 0.02, committed[name][1])  # the report said two points more
    fell = guard.check(m, higher)
    assert not fell.ok and fell.regressed == [f"{name} top-1 {committed[name][0] + 0.02:.3f} -> "
                                              f"{next(s.top1 for s in sets if s.name == name):.3f}"]
    half = dict(committed)
    half[name] = (committed[name][0] + 0.009, committed[name][1])  # within the point allowed
    assert not guard.check(m, half).regressed
    assert guard.committed_figures("# Answer quality\n\nno guard here\n") == {}


def test_guard_reads_no_table_after_its_own(quick):
    out, m = quick
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## The int8 model (`fast`)" in report.split(guard.HEADING, 1)[1]  # a later section, with a table
    committed = guard.committed_figures(report)
    # a later table with the guard's own column names is not read either
    later = "\n".join(["", "## Another model", "", f"| {guard.SET} | {guard.TOP1} | {guard.RIGHT} |", "|---|---:|---:|",
                       *[f"| `{name}` | 0.001 | 0.001 |" for name in committed]])
    assert guard.committed_figures(report + later) == committed


def test_guard_holds_each_set_to_its_best_single_signal():
    figures = guard.SetFigures("kb", "one question", 100, 0.806, 0.5, {"bm25-q": 0.6, "dense-a": 0.81})
    assert figures.best_signal == ("dense-a", 0.81) and figures.floor_met  # within half a point
    figures.signals["dense-q"] = 0.812
    assert not figures.floor_met
    assert figures.odds is None  # no question counted apart: no test
    figures.discord = {"dense-q": [5, 15], "dense-a": [0, 30]}  # the best signal's are read
    assert figures.odds == pytest.approx(sum(math.comb(20, k) for k in range(15, 21)) / 2 ** 20)  # 0.0207
    figures.discord["dense-q"] = [9, 9]
    assert figures.odds is None  # the ranker does not trail on the questions apart
    figures.discord["dense-q"] = [9, 10]
    assert figures.odds == pytest.approx(0.5)  # one question of nineteen: even odds


def test_near_topic_section_asks_an_intent_set_without_some_intents(service, monkeypatch):
    from openqna.evaluation import near_topic

    full = datasets.banking77(SHARED_DATA)
    labels = sorted(full.train)[:12]
    data = datasets.IntentData("banking77", {k: full.train[k] for k in labels},
                               [(t, i) for t, i in full.test if i in labels])
    monkeypatch.setattr(near_topic, "HELD_OUT", 3)
    monkeypatch.setattr(near_topic, "INSCOPE", 60)
    far = [t for t, _ in datasets.hwu64(SHARED_DATA).test[:20]]
    kb, near = near_topic.held_out_kb(service, data, far, "hwu64", seed=1)
    left_out = {i for t, i in data.test if t in near}
    assert len(left_out) == 3 and kb.records == 9
    assert not left_out & {q.answer for q in service.store.list_qnas(kb.project)}  # the KB holds none of them
    assert len(near) == sum(i in left_out for _, i in data.test)
    figures = near_topic.evaluate(service, [(kb, near)], threshold=0.5)[kb.project]
    assert list(figures) == ["off", "0.2", "0.1"]
    off, strict = figures["off"], figures["0.1"]
    assert (off["inscope"], off["near"], off["far"]) == (60, len(near), 20)
    assert off["margin"] == 0.0 and off["held_out_answered"] is None
    assert strict["margin"] >= figures["0.2"]["margin"] >= 0.0
    assert strict["near_answered"] <= off["near_answered"] and strict["right"] <= off["right"] <= off["top1"]
    assert strict["top1"] == off["top1"]  # a margin moves every record of the KB alike: the order stays
    lines = near_topic.section({"near_topic": {kb.project: figures}, "config": {"threshold": 0.5}})
    assert sum(line.startswith(f"| {kb.project} |") for line in lines) == 3
