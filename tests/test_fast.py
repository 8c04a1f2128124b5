"""OPENQNA_EMBEDDER=fast: the bundled MiniLM with int8 weights (onnxruntime's dynamic quantization, per channel),
made on first use beside the fp32 file, a vector space of its own, ranked with MiniLM's calibration."""

from __future__ import annotations

import os
from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openqna.formats import read_file  # noqa: E402
from openqna.kb.service import AskRequest, Service  # noqa: E402
from openqna.models import onnx_export  # noqa: E402
from openqna.models.embedder import LocalMiniLMInt8, get_embedder  # noqa: E402
from openqna.ranking import calibrations  # noqa: E402
from openqna.records import Conflict  # noqa: E402
from openqna.store.base import LIVE  # noqa: E402
from openqna.store.sqlite import SQLiteStore  # noqa: E402
from test_mpnet import check_paraphrases_and_off_topic, shop_service  # noqa: E402

SAMPLE = Path(str(resources.files("openqna") / "samples" / "openqna-faq.tsv"))


@pytest.fixture(scope="module")
def fast() -> LocalMiniLMInt8:
    return get_embedder("fast")


@pytest.fixture(scope="module")
def sample_kb():
    return read_file(SAMPLE)


def test_fast_is_minilm_with_int8_weights_in_a_space_of_its_own(fast, embedder):
    assert isinstance(fast, LocalMiniLMInt8) and get_embedder("fast") is fast
    assert fast.name == "minilm-l6-v2/onnx-int8" != embedder.name == "minilm-l6-v2/onnx-fp32"
    assert fast.dim == embedder.dim == 384 and fast.reads_cjk is False
    assert fast.onnx_path.parent == embedder.onnx_path.parent  # made beside the fp32 file
    assert fast.onnx_path.stat().st_size < embedder.onnx_path.stat().st_size / 3  # 23 MB against 90 MB


def test_vectors_of_the_sample_kb_stay_with_fp32(fast, embedder, sample_kb):
    # Measured: the 27 questions at cos 0.9933 or more (mean 0.9950); the 14 answers, longer, at 0.9876 or more. On a
    # CPU without VNNI (AVX2 alone, AMD EPYC) onnxruntime's int8 kernels differ: the questions' least 0.98999.
    questions = [q for qna in sample_kb.qnas for q in qna.questions]
    answers = [qna.answer for qna in sample_kb.qnas]
    for texts, bound in ((questions, 0.989), (answers, 0.985)):
        cosines = (fast.embed(texts) * embedder.embed(texts)).sum(axis=1)
        worst = int(np.argmin(cosines))
        assert cosines.min() >= bound, f"{texts[worst][:40]!r}: cos {cosines[worst]:.4f}"


def test_quantize_writes_a_verified_file_and_nothing_else(tmp_path, embedder):
    (tmp_path / onnx_export.MINILM.onnx_filename).symlink_to(embedder.onnx_path)  # the fp32 file, not re-exported
    out = tmp_path / onnx_export.MINILM_INT8.onnx_filename
    assert onnx_export.export(out, onnx_export.MINILM_INT8) == out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, onnx_export.MINILM.onnx_filename])
    out.unlink()
    broken = replace(onnx_export.MINILM_INT8, min_int8_cosine=1.01)  # as a broken quantization would be
    with pytest.raises(RuntimeError, match="moved its vectors too far"):
        onnx_export.quantize(out, broken)
    assert [p.name for p in tmp_path.iterdir()] == [onnx_export.MINILM.onnx_filename]  # no temp file left


@pytest.fixture
def fast_service(tmp_path, fast):
    yield from shop_service(tmp_path, fast)


def test_questions_are_ranked_with_minilms_calibration(fast_service, fast):
    assert fast_service.shipped_calibration is calibrations.CALIBRATION
    assert calibrations.calibration_for(fast.name) is calibrations.CALIBRATION
    assert calibrations.passage_calibration(fast.name) is calibrations.PASSAGE_CALIBRATION
    check_paraphrases_and_off_topic(fast_service)


def test_a_sample_kb_built_with_fast_answers_and_is_never_read_with_fp32(tmp_path, fast, embedder, sample_kb):
    store = SQLiteStore(tmp_path / "data")
    try:
        service = Service(store, fast)
        service.import_content("sample", sample_kb)
        asked = {"what exactly is openqna": 1, "how do I launch it": 2, "can I load an excel file?": 3,
                 "where does it keep my data": 10}
        for question, expected in asked.items():
            top = service.ask("sample", LIVE, AskRequest(question=question, top=1))[0]
            assert top.qna is not None and top.qna.id == expected and top.confidence >= 0.5, (question, top)
        with pytest.raises(Conflict, match="minilm-l6-v2/onnx-int8"):
            Service(store, embedder).ask("sample", LIVE, AskRequest(question="how do I launch it"))
    finally:
        store.close()
