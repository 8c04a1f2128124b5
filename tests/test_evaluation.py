"""The evaluation harness: metric functions on hand-computed examples, and one quick run end to end."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from conftest import SHARED_DATA
from openqna.evaluation import datasets, metrics, run_eval
from openqna.evaluation.baselines import fused
from openqna.evaluation.embedcache import CachedEmbedder
from openqna.evaluation.spans import sample_by_paragraph
from openqna.models.embedder import HashEmbedder

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
                    "## The accurate model: all-mpnet-base-v2 with the universal sentence encoder"):
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
    # a whole sentence almost never equals the gold answer; the short span often does
    em = {method: sum(r["em"][method] for r in m["spans"].values()) for method in ("short span", "best sentence")}
    assert em["short span"] > em["best sentence"]


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
