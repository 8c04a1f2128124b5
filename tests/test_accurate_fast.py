"""The quicker accurate model (OPENQNA_EMBEDDER=accurate-fast): the accurate pair with mpnet's int8 weights
(``onnx_export.MPNET_INT8``: its feed-forward outputs and embedding tables left in fp32), ranked with the accurate
pair's calibration."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openqna.formats import read_file  # noqa: E402
from openqna.models import embedder as embedders  # noqa: E402
from openqna.models import onnx_export  # noqa: E402
from openqna.models.embedder import HybridEncoder, LocalMPNetInt8, UniversalSentenceEncoder, get_embedder  # noqa: E402
from openqna.ranking import calibrations  # noqa: E402
from test_fast import SAMPLE  # noqa: E402
from test_mpnet import check_paraphrases_and_off_topic, shop_service  # noqa: E402


@pytest.fixture(scope="module")
def accurate_fast() -> HybridEncoder:
    return get_embedder("accurate-fast")


@pytest.fixture(scope="module")
def accurate() -> HybridEncoder:
    return get_embedder("accurate")


@pytest.fixture(scope="module")
def sample_kb():
    return read_file(SAMPLE)


def test_accurate_fast_is_int8_mpnet_beside_the_universal_sentence_encoder(accurate_fast, accurate):
    assert isinstance(accurate_fast.a, LocalMPNetInt8) and isinstance(accurate_fast.b, UniversalSentenceEncoder)
    assert accurate_fast.b is accurate.b or accurate_fast.b.name == accurate.b.name
    assert accurate_fast.weight == accurate.weight == embedders.ACCURATE_WEIGHT
    assert accurate_fast.dim == accurate.dim == 1280 and accurate_fast.reads_cjk is False
    # another vector space by name: a KB embedded with one is never searched with the other's vectors
    assert accurate_fast.name == "mpnet-base-v2/onnx-int8+use-multilingual-v3/numpy@0.4" != accurate.name
    int8, fp32 = accurate_fast.a.onnx_path, accurate.a.onnx_path
    assert int8.parent == fp32.parent and int8.stat().st_size < 0.7 * fp32.stat().st_size  # 266 MB against 436


def test_int8_mpnet_vectors_of_the_sample_kb_stay_near_fp32(accurate_fast, accurate, sample_kb):
    # Measured: the 27 questions at cos 0.9891 or more of fp32's (mean 0.9927); the 14 answers, longer, at 0.9824 or
    # more (mean 0.9907).  The whole graph in int8 fell to 0.73 at the least on hwu64 and banking77 texts.
    questions = [q for qna in sample_kb.qnas for q in qna.questions]
    answers = [qna.answer for qna in sample_kb.qnas]
    for texts, bound in ((questions, 0.98), (answers, 0.975)):
        cosines = (accurate_fast.a.embed(texts) * accurate.a.embed(texts)).sum(axis=1)
        worst = int(np.argmin(cosines))
        assert cosines.min() >= bound and cosines.mean() >= 0.985, f"{texts[worst][:40]!r}: cos {cosines[worst]:.4f}"


def test_the_fp32_products_are_what_the_file_keeps_out_of_int8(accurate_fast):
    import onnx

    graph = onnx.load(str(accurate_fast.a.onnx_path), load_external_data=False).graph
    ops = {n.name: n.op_type for n in graph.node}
    feed_forward_out = [name for name in ops if "/output/dense/MatMul" in name]
    assert len(feed_forward_out) == 12 and all(ops[name] == "MatMul" for name in feed_forward_out)  # left in fp32
    assert sum(op == "MatMulInteger" for op in ops.values()) == 12 * 5  # q, k, v, attention output, intermediate


def test_a_quantization_that_moves_the_vectors_too_far_is_refused(tmp_path, accurate):
    (tmp_path / onnx_export.MPNET.onnx_filename).symlink_to(accurate.a.onnx_path)  # the fp32 file, not re-exported
    out = tmp_path / onnx_export.MPNET_INT8.onnx_filename
    whole = replace(onnx_export.MPNET_INT8, fp32_nodes=())  # every product in int8: cos 0.81 on these sentences
    with pytest.raises(RuntimeError, match="moved its vectors too far"):
        onnx_export.quantize(out, whole)
    assert [p.name for p in tmp_path.iterdir()] == [onnx_export.MPNET.onnx_filename]  # no temp file left


@pytest.fixture
def fast_service(tmp_path, accurate_fast):
    yield from shop_service(tmp_path, accurate_fast)


def test_it_is_ranked_with_the_accurate_pairs_calibration(fast_service, accurate_fast):
    assert fast_service.shipped_calibration is calibrations.ACCURATE_CALIBRATION
    assert calibrations.passage_calibration(accurate_fast.name) is calibrations.ACCURATE_PASSAGE_CALIBRATION
    assert calibrations.calibration_for(accurate_fast.a.name) is calibrations.MPNET_CALIBRATION
    assert calibrations.calibration_for("minilm-l6-v2/onnx-int8") is calibrations.CALIBRATION
    check_paraphrases_and_off_topic(fast_service)


@pytest.fixture
def mpnet_fast_service(tmp_path):
    yield from shop_service(tmp_path, get_embedder("mpnet-fast"))


def test_mpnet_fast_is_the_int8_transformer_alone_ranked_with_mpnets_calibration(mpnet_fast_service, accurate_fast):
    """OPENQNA_EMBEDDER=mpnet-fast: accurate-fast's int8 mpnet without the universal sentence encoder, read with
    mpnet alone's fits (its FAQ-page weights and last step, its passage calibration)."""
    mpnet_fast = get_embedder("mpnet-fast")
    assert isinstance(mpnet_fast, LocalMPNetInt8) and mpnet_fast.name == "mpnet-base-v2/onnx-int8"
    assert mpnet_fast.dim == 768 and embedders.spec_of(mpnet_fast) == "mpnet-fast"
    texts = ["how do i reset my password", "Where is my data stored?"]
    assert np.allclose(mpnet_fast.embed(texts), accurate_fast.a.embed(texts), atol=1e-6)
    assert mpnet_fast_service.shipped_calibration is calibrations.MPNET_CALIBRATION
    assert calibrations.passage_calibration(mpnet_fast.name) is calibrations.MPNET_PASSAGE_CALIBRATION
    check_paraphrases_and_off_topic(mpnet_fast_service)
