"""OPENQNA_EMBEDDER=balanced: the bundled MiniLM beside the multilingual universal sentence encoder (both ship with
openqna, no extra), their weighted vectors side by side, ranked with the calibration fitted for the pair."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openqna.kb.service import AskRequest
from openqna.models import embedder as embedders  # noqa: E402
from openqna.models.embedder import HybridEncoder, LocalMiniLM, UniversalSentenceEncoder, get_embedder  # noqa: E402
from openqna.ranking import calibrations
from openqna.store.base import LIVE  # noqa: E402
from test_mpnet import check_own_faq_page_fits, check_paraphrases_and_off_topic, shop_service  # noqa: E402


@pytest.fixture(scope="module")
def balanced() -> HybridEncoder:
    return get_embedder("balanced")


def test_balanced_is_minilm_beside_the_universal_sentence_encoder(balanced):
    assert isinstance(balanced, HybridEncoder) and get_embedder("balanced") is balanced
    assert isinstance(balanced.a, LocalMiniLM) and isinstance(balanced.b, UniversalSentenceEncoder)
    assert balanced.weight == embedders.BALANCED_WEIGHT == 0.4
    assert balanced.dim == 384 + 512 and balanced.reads_cjk is False
    texts = ["How do I reset my password?", "I forgot my password", "What time do you open on Sundays?"]
    v = balanced.embed(texts)
    a, b = balanced.a.embed(texts), balanced.b.embed(texts)
    assert np.allclose(v @ v.T, 0.6 * (a @ a.T) + 0.4 * (b @ b.T), atol=1e-5)


@pytest.fixture
def balanced_service(tmp_path, balanced):
    yield from shop_service(tmp_path, balanced)


def test_questions_are_ranked_with_the_calibration_fitted_for_the_pair(balanced_service):
    assert balanced_service.shipped_calibration is calibrations.BALANCED_CALIBRATION  # fails if the name drifts
    assert calibrations.BALANCED_CALIBRATION is not calibrations.CALIBRATION
    assert calibrations.BALANCED_CALIBRATION.lexical is calibrations.LEXICAL
    index = balanced_service.indexes.get("shop", LIVE)
    req = AskRequest(question="I can't remember my password", top=1)
    answers = balanced_service.ask("shop", LIVE, req)
    assert answers[0].qna.id == 1 and answers[0].confidence >= 0.5
    fitted, _ = balanced_service.rank("shop", LIVE, index, req, calibration=calibrations.BALANCED_CALIBRATION)
    minilms, _ = balanced_service.rank("shop", LIVE, index, req, calibration=calibrations.CALIBRATION)
    assert answers[0].confidence == pytest.approx(round(fitted[0].confidence, 4))
    assert abs(fitted[0].confidence - minilms[0].confidence) > 1e-3


def test_paraphrases_found_and_off_topic_declined(balanced_service):
    check_paraphrases_and_off_topic(balanced_service)



def test_faq_pages_are_read_with_the_pairs_own_faq_page_weights_and_last_step(balanced_service):
    check_own_faq_page_fits(balanced_service, calibrations.BALANCED_CALIBRATION)
