"""Large knowledge bases rank candidates (IVF nearest vectors + keyword matches) instead of every record.

The candidate path must give the answers the exhaustive path gives, with the same confidences,
and filters must still yield ``top`` answers when that many records match.  The threshold is
lowered here so a 770-question KB takes the large-KB path with a real faiss index.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest

from conftest import SHARED_DATA
from openqna.filters.nodes import IdIn, MetaEq
from openqna.index import field as field_module
from openqna.kb.service import AskRequest
from openqna.records import KnowledgeBaseContent, QnA
from pg import pg_server  # noqa: F401  (fixture)


def _banking77(split: str) -> list[tuple[str, str]]:
    with open(SHARED_DATA / "banking77" / f"{split}.csv") as f:
        return [(row["text"], row["category"]) for row in csv.DictReader(f)]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def bank(request, tmp_path_factory, embedder):
    """The same KB on both stores; on PostgreSQL the vector candidates come from pgvector's HNSW index."""
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    by_intent: dict[str, list[str]] = {}
    for text, intent in _banking77("train"):
        if len(by_intent.setdefault(intent, [])) < 10:
            by_intent[intent].append(text)
    qnas = [QnA(questions, intent.replace("_", " "), id=i + 1, metadata={"group": str(i % 5)})
            for i, (intent, questions) in enumerate(sorted(by_intent.items()))]
    schema = None
    if request.param == "sqlite":
        store = SQLiteStore(tmp_path_factory.mktemp("bank") / "data")
    else:
        from openqna.store.postgres import PostgresStore

        pg = request.getfixturevalue("pg_server")
        schema = pg.create_schema()
        store = PostgresStore(pg.dsn(schema=schema))
    service = Service(store, embedder)
    service.import_content("bank", KnowledgeBaseContent(qnas=qnas))
    if schema:
        store.ensure_vector_index(384)
    questions = [text for text, _ in _banking77("test")[::25]]
    yield service, questions, {q.id: q.metadata["group"] for q in qnas}
    store.close()
    if schema:
        pg.drop_schema(schema)


def _searched_in_db(service, monkeypatch) -> list[int]:
    """Counts the vector searches PostgreSQL runs (none on SQLite)."""
    calls: list[int] = []
    store = service.store
    if hasattr(store, "_vector_search"):
        real = store._vector_search

        def counted(*args, **kw):
            calls.append(1)
            return real(*args, **kw)

        monkeypatch.setattr(store, "_vector_search", counted)
    return calls


def _ask_all(service, questions, **kw):
    return [service.ask("bank", "test", AskRequest(question=q, **kw)) for q in questions]


@pytest.mark.parametrize("pg_search", ["memory", "pgvector"])
def test_candidates_answer_like_the_exhaustive_path(bank, monkeypatch, pg_search):
    service, questions, _ = bank
    # one ranking per question, so that the store's searches can be counted (``focus`` asks a long question's
    # sentences again when it is unsure)
    monkeypatch.setenv("OPENQNA_QUESTION_FOCUS", "0")
    exhaustive = _ask_all(service, questions, top=3)
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "200")
    monkeypatch.setenv("OPENQNA_PG_VECTOR_SEARCH", pg_search)
    index = service.indexes.get("bank", "test")
    assert not index.exhaustive()
    in_db = _searched_in_db(service, monkeypatch)
    candidates = _ask_all(service, questions, top=3)
    if index.nearest_rows is None or pg_search == "memory":
        assert index.q.ann() is not None and not in_db  # the in-memory faiss index is what answers
    else:
        assert len(in_db) == 2 * len(questions)  # PostgreSQL's pgvector, for questions and answers
    same_top, total = 0, len(questions)
    for ex, ca in zip(exhaustive, candidates):
        if ex[0].qna.id == ca[0].qna.id:
            same_top += 1
            assert ca[0].confidence == pytest.approx(ex[0].confidence, abs=1e-4)
    assert same_top >= 0.97 * total, f"top-1 agrees on {same_top}/{total}"


def test_a_selective_filter_still_fills_top(bank, monkeypatch):
    service, questions, groups = bank
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "200")
    in_db = _searched_in_db(service, monkeypatch)
    for answers in _ask_all(service, questions, top=5, filter=MetaEq("group", "3")):
        assert len(answers) == 5 and all(groups[a.qna.id] == "3" for a in answers)
    few = (4, 17, 33, 60)
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "200")
    narrowed = _ask_all(service, questions[:20], top=10, filter=IdIn(few))
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "100000")
    expected = _ask_all(service, questions[:20], top=10, filter=IdIn(few))
    for got, want in zip(narrowed, expected):
        assert [a.qna.id for a in got] == [a.qna.id for a in want]
        assert sorted(a.qna.id for a in got) == sorted(few)
    assert not in_db  # filtered questions search in memory, with the filter's mask, on PostgreSQL too


def test_nearest_units_from_the_ivf_index(bank, monkeypatch):
    service, questions, _ = bank
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "200")
    field = service.indexes.get("bank", "test").q
    query = service.embedder.embed(questions[:1])[0]
    exact = np.argsort(-(field.matrix @ query))[:10]
    found = field.nearest_units(query, 10, None)
    assert len(found) == 10 and len(set(found) & set(exact)) >= 8
    for step in (2, 7):  # through the IVF index with a selector, then exactly (too few units to bother)
        monkeypatch.setattr(field_module, "GATHER_MAX", 0)
        allowed = np.zeros(field.n, dtype=bool)
        allowed[::step] = True
        found = field.nearest_units(query, 10, allowed)
        assert len(found) == 10 and allowed[found].all()
        want = np.flatnonzero(allowed)[np.argsort(-(field.matrix[allowed] @ query))[:10]]
        assert len(set(found) & set(want)) >= 8


@pytest.mark.parametrize("sample", [2048, 16])
def test_coverage_top_is_the_top_of_every_unit(bank, monkeypatch, sample):
    """The keyword candidates: the same masses a sort of every matching unit gives, filtered or not."""
    from openqna.index.analyze import analyze

    monkeypatch.setattr(field_module, "COVERAGE_SAMPLE", sample)  # 16: the sampled threshold, even on this small KB
    service, questions, _ = bank
    field = service.indexes.get("bank", "test").q
    every_third = np.zeros(field.n, dtype=bool)
    every_third[::3] = True
    checked = 0
    for question in questions[:20]:
        weights = {t: field.idf(t) for t in set(analyze(question)) if " " not in t}
        share = field.coverage_units(weights)
        for allowed in (None, every_third):
            hits = np.flatnonzero((share > 0) & (True if allowed is None else allowed))
            for k in (1, 5, 40):
                mass, total, top = field.coverage_top(weights, k, allowed)
                assert len(top) == min(k, len(hits)) and len(set(top.tolist())) == len(top)
                assert allowed is None or allowed[top].all()
                assert np.allclose(mass / total, share)
                assert sorted(mass[top]) == sorted(mass[hits])[len(hits) - len(top):]
                checked += len(hits) > k
    assert checked > 20  # most cases had more matches than k


def test_bm25_of_a_few_units_is_the_full_pass_read_at_them(bank):
    """bm25_at (a binary search per term for a few candidates) gives bm25_units' floats exactly."""
    from openqna.index.analyze import analyze

    service, questions, _ = bank
    index = service.indexes.get("bank", "test")
    rng = np.random.default_rng(3)
    for field in (index.q, index.a):
        for question in questions[:10]:
            terms = analyze(question) + ["no-such-word"]
            units = rng.choice(field.n, field.n // 10, replace=False)  # unsorted, as units_of may give them
            full = field.bm25_units(terms)
            assert np.array_equal(field.bm25_at(terms, units), full[units])
            assert (full[units] > 0).any() or field is index.a


@pytest.mark.parametrize("rows", [[0, 1, 2, 4], [0, 0, 1, 2, 2, 2, 4]], ids=["one unit a record", "several"])
def test_field_scores_every_record_as_its_units_say(rows):
    """Best, mean and centroid cosine per record, as read off the units one by one: a field of one unit a
    record skips the per-segment reduction, which must not change a value (row 3 has no unit)."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(rows), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    fld = field_module.Field(rows, vectors, [["w"]] * len(rows), 5, 8)
    query = vectors[-1] * 0.5 + vectors[0] * 0.5
    best, mean, centroid = fld.similarities(query, np.arange(5))
    dense = fld.dense(query)
    for r in range(5):
        mine = vectors[[i for i, row in enumerate(rows) if row == r]]
        if not len(mine):
            assert best[r] == mean[r] == centroid[r] == dense[r] == -1.0
            continue
        sims = mine @ query
        assert best[r] == dense[r] == pytest.approx(sims.max(), abs=1e-6)
        assert mean[r] == pytest.approx(sims.mean(), abs=1e-6)
        assert centroid[r] == pytest.approx(sims.sum() / np.linalg.norm(mine.sum(axis=0)), abs=1e-6)
