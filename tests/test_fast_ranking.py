"""The ranker's fast paths answer what the plain ones answer (issue 29: throughput without a change of quality).

``RegimeTerms.of`` is the last step of ``rank`` with the KB's constants kept scalar: it must give the floats that
``RegimeTerms.logit(regime.inputs(...))`` gives, whatever the fitted weights.  ``products.unit_products`` multiplies
with each field's columns (``Field.columns``) instead of its unit matrix: the cosines may differ in the last float
bit, so a real KB must rank the same records with confidences within a few parts in a million.
"""

from __future__ import annotations

import csv
import dataclasses
from importlib import resources

import numpy as np
import pytest

from conftest import SHARED_DATA
from openqna.formats import read_file
from openqna.index import products
from openqna.index.field import Field
from openqna.kb.service import AskRequest
from openqna.ranking import calibrations, ranker, regime
from openqna.records import KnowledgeBaseContent, QnA


def random_terms(rng: np.random.Generator, rival: float | None) -> regime.RegimeTerms:
    """Every weight of the last step set, so that each term's arithmetic is exercised."""
    names = [f.name for f in dataclasses.fields(regime.RegimeTerms) if f.name.startswith("w_")]
    weights = {name: float(rng.normal(0, 2)) for name in names}
    return regime.RegimeTerms(**weights, bias=float(rng.normal()), shift=float(rng.normal()), rival=rival)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_last_step_with_scalar_constants_gives_the_same_floats(dtype):
    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(1, 60))
        terms = random_terms(rng, None if trial % 3 == 0 else float(rng.normal(0, 3)))
        logit = rng.normal(0, 4, n).astype(dtype)
        allowed = rng.random(n) < (0.05 if trial % 5 == 0 else 0.8)  # some trials leave one candidate or none
        passage, heading = rng.random(n) < 0.3, rng.random(n) < 0.3
        kb = {"adapted": bool(trial % 2), "faq_page": bool(trial % 4 == 1), "records": int(rng.integers(1, 50_000)),
              "outside": None if trial % 3 else ~allowed & (rng.random(n) < 0.5)}  # left out by a filter
        plain = terms.logit(regime.inputs(logit, allowed, passage, heading, rival=terms.rival, **kb))
        fast = terms.of(logit, allowed, passage, heading, **kb)
        assert fast.dtype == plain.dtype and fast.tobytes() == plain.tobytes()


def plain_products(questions: np.ndarray, answers: np.ndarray, vector: np.ndarray) -> products.Products:
    """Every unit's cosine as the ranker took it before ``Field.columns``: the unit matrix times the vector."""
    return np.ascontiguousarray(questions.T) @ vector, np.ascontiguousarray(answers.T) @ vector


def plain_last_step(self: regime.RegimeTerms, logit: np.ndarray, allowed: np.ndarray, passage: np.ndarray,
                    heading: np.ndarray, **kb) -> np.ndarray:
    return self.logit(regime.inputs(logit, allowed, passage, heading, rival=self.rival, **kb))


def banking77(per_intent: int) -> list[QnA]:
    by_intent: dict[str, list[str]] = {}
    with open(SHARED_DATA / "banking77" / "train.csv") as f:
        for row in csv.DictReader(f):
            if len(by_intent.setdefault(row["category"], [])) < per_intent:
                by_intent[row["category"]].append(row["text"])
    return [QnA(questions, intent.replace("_", " ")) for intent, questions in sorted(by_intent.items())]


def ranked(service, project: str, questions: list[str]) -> list[list[tuple[int, float]]]:
    index = service.indexes.get(project, "test")
    out = []
    for q in questions:
        found, _ = service.rank(project, "test", index, AskRequest(question=q, top=5))
        out.append([(r.record_id, r.confidence) for r in found])
    return out


@pytest.mark.parametrize("kb", ["sample", "banking77"])
def test_real_kbs_rank_as_on_the_plain_path(service, monkeypatch, kb):
    monkeypatch.setenv("OPENQNA_EMBED_BATCH", "1")  # each question alone: the floats of one product, not a batch's
    if kb == "sample":
        with resources.as_file(resources.files("openqna") / "samples" / "openqna-faq.tsv") as path:
            service.import_content(kb, read_file(path))
        questions = [q for qna in service.store.list_qnas(kb) for q in qna.questions[:1]]
        questions += ["how do i get started", "what does it cost to run", "tell me a joke"]
    else:
        service.import_content(kb, KnowledgeBaseContent(qnas=banking77(3)))
        with open(SHARED_DATA / "banking77" / "test.csv") as f:
            questions = [row["text"] for row in csv.DictReader(f)][::60]
    assert service.indexes.get(kb, "test").exhaustive()
    fast = ranked(service, kb, questions)
    monkeypatch.setattr(ranker, "unit_products", plain_products)
    monkeypatch.setattr(regime.RegimeTerms, "of", plain_last_step)
    plain = ranked(service, kb, questions)
    assert calibrations.CALIBRATION.regime is not None  # the last step ran on both paths
    assert sum(len(r) for r in plain) > len(questions)  # the KB answers: there is something to compare
    for got, want in zip(fast, plain):
        assert [i for i, _ in got] == [i for i, _ in want]
        np.testing.assert_allclose([c for _, c in got], [c for _, c in want], atol=2e-6, rtol=0)


@pytest.mark.parametrize("rows_of_units", [[0, 0, 1, 3, 3, 3], [0, 1, 2, 3]])
def test_every_records_similarities_are_those_of_the_gathered_path(rows_of_units):
    """The exhaustive path's best, mean and centroid cosines (divisors made once per field) are the floats that
    the candidates' path gathers, for records with several units, one, or none (row 2 of the first field)."""
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((len(rows_of_units), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    fld = Field(rows_of_units, vectors, [["w"]] * len(rows_of_units), 4, 384)
    query = vectors[0] * 0.5 + vectors[-1] * 0.5
    rows = np.arange(4)
    for _ in range(2):  # the second call reads the divisors the first one made
        fast = fld.similarities(query, rows, products=query @ fld.columns)
        gathered = fld.similarities(query, rows, fld.units_of(rows))
        for got, want in zip(fast, gathered):
            assert got.dtype == want.dtype and np.allclose(got, want, atol=1e-6, rtol=0)
        assert (fast[0] == -1.0).sum() == (0 if len(set(rows_of_units)) == 4 else 1)
