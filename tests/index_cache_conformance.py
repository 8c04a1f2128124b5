"""The index cache over each store (DESIGN decision 7): every store must serve it alike.

A store's test module does ``from store_conformance import *`` and ``from index_cache_conformance
import *``: these tests read the ``kb`` and ``indexes`` fixtures of the first.  Vectors are small
and hand-made so similarities and BM25 scores can be computed by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from openqna.filters.match import And, IdIn, KindIn, MetaEq, Not, Or, SourceIn
from openqna.index.analyze import analyze
from openqna.index.index_cache import IndexCache, engine_search
from openqna.store import Project
from store_conformance import item, vec


@pytest.mark.parametrize("flt,expected", [
    (MetaEq("Category", "POWER"), {1, 3}),
    (And((MetaEq("category", "power"), MetaEq("product", "surface"))), {1}),
    (Or((MetaEq("category", "accessories"), MetaEq("product", "nothing"))), {2}),
    (SourceIn(("MANUAL.pdf",)), {1, 3}),
    (And((SourceIn(("manual.pdf", "faq.tsv")), MetaEq("product", "surface"))), {1, 2}),
    (Or((SourceIn(("paper.pdf",)), MetaEq("category", "accessories"))), {2, 4}),
    (KindIn(("passage",)), {4}),
    (Not(KindIn(("passage",))), {1, 2, 3}),
    (IdIn((2, 3, 42)), {2, 3}),
    (MetaEq("missing", "x"), set()),
])
def test_filters(kb, flt, expected, indexes):
    index = indexes.get("kb1")
    mask = index.mask(flt)
    assert {int(i) for i in index.ids[mask]} == expected


def test_vector_search_respects_filter(kb, indexes):
    index = indexes.get("kb1")
    q = vec(1, 0, 0, 0)
    sims = index.dense(q, "q", index.mask(None))
    assert sims[index.row_of[1]] == pytest.approx(1.0)  # best of its two questions
    assert sims[index.row_of[3]] == pytest.approx(float(vec(0.7, 0, 0.7, 0) @ q))
    filtered = index.dense(q, "q", index.mask(MetaEq("category", "accessories")))
    assert filtered[index.row_of[1]] == -1.0
    assert filtered[index.row_of[2]] == pytest.approx(0.0, abs=1e-6)
    answers = index.dense(q, "a", index.mask(None))
    assert answers[index.row_of[1]] == pytest.approx(float(vec(0.8, 0.2, 0, 0) @ q))


def _bm25_by_hand(query_terms, docs, target):
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    score = 0.0
    for t in query_terms:
        df = sum(1 for d in docs if t in d)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        tf = docs[target].count(t)
        score += idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * len(docs[target]) / avgdl))
    return score


def test_bm25_scores_match_the_formula(kb, indexes):
    index = indexes.get("kb1")
    terms = analyze("battery charging")
    answers = [analyze(t) for t in ["Plug it in for two hours.", "The pen attaches magnetically.",
                                     "Use the 65 W charger for fast charging of the battery.",
                                     "A passage about battery health and charging cycles."]]
    scores = index.bm25(terms, "a", index.mask(None))
    for rid in (1, 2, 3, 4):
        assert scores[index.row_of[rid]] == pytest.approx(_bm25_by_hand(terms, answers, rid - 1), rel=1e-4)
    assert scores[index.row_of[4]] > scores[index.row_of[3]] > 0 == scores[index.row_of[1]]
    filtered = index.bm25(terms, "a", index.mask(MetaEq("category", "power")))
    assert filtered[index.row_of[4]] == 0.0 and filtered[index.row_of[3]] > 0


def test_bm25_question_field_takes_best_question(kb, indexes):
    index = indexes.get("kb1")
    scores = index.bm25(analyze("charging time"), "q", index.mask(None))
    assert scores[index.row_of[1]] > 0
    assert scores[index.row_of[1]] > scores[index.row_of[3]]


def test_exact_keys_and_context_flags(kb, indexes):
    index = indexes.get("kb1")
    assert index.exact["where is the pen"] == [index.row_of[2]]
    assert {int(i) for i in index.ids[index.context_only]} == {3}


def test_index_follows_writes_without_restart(kb, indexes):
    first = indexes.get("kb1")
    assert indexes.get("kb1") is first  # unchanged store: cached
    kb.delete_qnas("kb1", [2])
    assert 2 not in indexes.get("kb1").row_of


def test_index_applies_changes_in_place_as_a_fresh_build_would(store, monkeypatch, indexes):
    """After writes, the index is updated from the changed records only, and reads as one built from scratch."""
    from openqna.index import field as field_module
    from openqna.index import memindex
    from openqna.ranking import ranker

    rng = np.random.default_rng(7)
    words = "battery charge pen screen cable reset password monitor stylus power dock update".split()

    def random_item(i, **kw):
        qs = [" ".join(rng.choice(words, 3)) + f" {i}" for _ in range(int(rng.integers(1, 4)))]
        return item(qs, " ".join(rng.choice(words, 6)), vectors=[vec(*rng.standard_normal(8)) for _ in qs],
                    answer_vector=vec(*rng.standard_normal(8)), metadata={"group": str(i % 4)},
                    source=f"s{i % 3}", kind="passage" if i % 9 == 0 else "qna", context_only=i % 11 == 0, **kw)

    store.create_project(Project("inc"))
    ids = store.put_qnas("inc", [random_item(i) for i in range(60)])
    monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "0")  # the IVF index exists before the change
    first = indexes.get("inc")
    first.q.ann()
    store.put_qnas("inc", [random_item(100 + i, id=ids[i]) for i in range(0, 10, 2)])  # replaced
    store.delete_qnas("inc", ids[20:25])
    store.put_qnas("inc", [random_item(200 + i) for i in range(10)])  # added
    updates = []
    real = memindex.MemIndex.updated
    monkeypatch.setattr(memindex.MemIndex, "updated", lambda self, *a: updates.append(1) or real(self, *a))
    inc = indexes.get("inc")
    assert updates == [1] and inc.n == 65
    fresh = IndexCache(store, nearest=engine_search(store)).get("inc")  # another process: built from scratch
    assert updates == [1] and fresh.version == inc.version

    def by_id(index, values):
        return dict(zip(index.ids.tolist(), np.round(np.asarray(values, dtype=float), 5).tolist()))

    for name in ("context_only", "passage"):
        assert by_id(inc, getattr(inc, name)) == by_id(fresh, getattr(fresh, name))
    for field in ("q", "a"):  # the norms the centroid cosine divides by are carried over, not recomputed
        assert by_id(inc, getattr(inc, field).sum_norms) == by_id(fresh, getattr(fresh, field).sum_norms)
        assert by_id(inc, getattr(inc, field).counts) == by_id(fresh, getattr(fresh, field).counts)
    assert {k: sorted(inc.ids[r].tolist()) for k, r in inc.exact.items()} == \
        {k: sorted(fresh.ids[r].tolist()) for k, r in fresh.exact.items()}
    for flt in (MetaEq("group", "2"), SourceIn(("S1",)), KindIn(("passage",)), Not(MetaEq("group", "0"))):
        assert by_id(inc, inc.mask(flt)) == by_id(fresh, fresh.mask(flt))
    everything = np.ones(inc.n, dtype=bool)
    inc.nearest_rows = fresh.nearest_rows = None  # compare the in-memory candidates (pgvector has its own tests)
    for _ in range(5):
        query, terms = vec(*rng.standard_normal(8)), list(rng.choice(words, 2))
        for field in ("q", "a"):
            assert by_id(inc, inc.dense(query, field, everything)) == by_id(fresh, fresh.dense(query, field, everything))
            assert by_id(inc, inc.bm25(terms, field, everything)) == by_id(fresh, fresh.bm25(terms, field, everything))
            assert by_id(inc, inc.coverage(terms, field, everything)) == \
                by_id(fresh, fresh.coverage(terms, field, everything))
        question = " ".join(terms)
        for exact_max in ("0", "100000"):  # candidates, then every record
            monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", exact_max)
            ranked = [(r.record_id, round(r.confidence, 5)) for r in ranker.rank(inc, question, query, everything, top=5)]
            assert ranked == [(r.record_id, round(r.confidence, 5))
                              for r in ranker.rank(fresh, question, query, everything, top=5)]
        monkeypatch.setenv("OPENQNA_EXACT_SEARCH_MAX", "0")
        # the IVF index was carried over (its keys follow the change), not rebuilt
        assert inc.q.shared_ann is first.q.shared_ann
        # its codes are approximate (their order too): the exact nearest 3 are among its nearest 10
        near = inc.ids[inc.q.rows[inc.q.nearest_units(query, 10, None)]].tolist()
        exact = fresh.ids[fresh.q.rows[np.argsort(-(fresh.q.matrix @ query))[:3]]].tolist()
        assert len(near) == 10 and set(exact) <= set(near)
        # with a filter, through the carried-over IVF index, whose keys are no longer unit positions
        allowed = inc.q.unit_mask(inc.mask(Not(MetaEq("group", "0"))))
        assert inc.q.next_key != inc.q.n and allowed.sum() > 20
        with monkeypatch.context() as m:
            m.setattr(field_module, "GATHER_MAX", 0)
            units = inc.q.nearest_units(query, 10, allowed)
        # the exact nearest allowed unit is among them
        assert allowed[units].all() and len(units) == 10
        assert np.argmax(np.where(allowed, inc.q.matrix @ query, -np.inf)) in units.tolist()


def test_an_index_that_only_gains_records_reads_as_a_fresh_build_and_leaves_the_old_one_alone(store, monkeypatch,
                                                                                             indexes):
    """Records only added (no record dropped or replaced): the update copies the per-record structures instead of
    renumbering them; the result reads as a fresh build, and the index it came from, which queries may still hold,
    is unchanged, also where an added question repeats one it holds (its exact-match list is shared)."""
    import copy

    from openqna.index import memindex

    rng = np.random.default_rng(11)

    def one(i, question=None, **kw):
        q = question or f"how do I reset device {i}"
        return item([q], f"answer {i}", vectors=[vec(*rng.standard_normal(8))], answer_vector=vec(*rng.standard_normal(8)),
                    metadata={"group": str(i % 3)}, source=f"s{i % 2}", **kw)

    store.create_project(Project("grow"))
    store.put_qnas("grow", [one(i) for i in range(20)])
    first = indexes.get("grow")
    before = (copy.deepcopy(first.exact), copy.deepcopy(first.metadata), len(first.rows), first.n)
    store.put_qnas("grow", [one(20 + i) for i in range(3)] +
                   [one(30, question="how do I reset device 4"), one(31, question="How do I reset device 7?")])
    updates = []
    real = memindex.MemIndex.updated
    monkeypatch.setattr(memindex.MemIndex, "updated", lambda self, *a: updates.append(1) or real(self, *a))
    grown = indexes.get("grow")
    assert updates == [1] and grown.n == 25
    assert (first.exact, first.metadata, len(first.rows), first.n) == before
    fresh = IndexCache(store, nearest=engine_search(store)).get("grow")
    assert {k: sorted(grown.ids[r].tolist()) for k, r in grown.exact.items()} == \
        {k: sorted(fresh.ids[r].tolist()) for k, r in fresh.exact.items()}
    assert len(grown.exact[first_key := next(k for k, r in first.exact.items() if first.ids[r[0]] == first.ids[4])]) == 2
    assert len(first.exact[first_key]) == 1
    assert dict(zip(grown.ids.tolist(), grown.metadata)) == dict(zip(fresh.ids.tolist(), fresh.metadata))
    assert dict(zip(grown.ids.tolist(), (r["@source"] for r in grown.rows))) == \
        dict(zip(fresh.ids.tolist(), (r["@source"] for r in fresh.rows)))
    for flt in (MetaEq("group", "2"), SourceIn(("S1",))):
        assert dict(zip(grown.ids.tolist(), grown.mask(flt).tolist())) == dict(zip(fresh.ids.tolist(), fresh.mask(flt).tolist()))
    query = vec(*rng.standard_normal(8))
    everything = np.ones(grown.n, dtype=bool)
    grown.nearest_rows = fresh.nearest_rows = None
    for field in ("q", "a"):
        assert dict(zip(grown.ids.tolist(), np.round(grown.dense(query, field, everything), 5).tolist())) == \
            dict(zip(fresh.ids.tolist(), np.round(fresh.dense(query, field, everything), 5).tolist()))


def test_an_index_the_cache_replaced_is_freed_at_once(store, indexes):
    """No index refers to itself (the store's own vector search is handed a proxy of it): one the cache replaced is
    freed as soon as no query holds it, not when the cyclic garbage collector runs, which at a million records was
    gigabytes held per write (bench/scale.py)."""
    import gc
    import weakref

    rng = np.random.default_rng(5)
    store.create_project(Project("freed"))
    store.put_qnas("freed", [item([f"question {i}"], f"answer {i}", vectors=[vec(*rng.standard_normal(8))],
                                  answer_vector=vec(*rng.standard_normal(8))) for i in range(10)])
    enabled = gc.isenabled()
    gc.disable()
    try:
        first = indexes.get("freed")
        gone = weakref.ref(first)
        first.row_of  # what the store's vector search reads of it
        del first
        store.put_qnas("freed", [item(["one more"], "answer", vectors=[vec(*rng.standard_normal(8))],
                                      answer_vector=vec(*rng.standard_normal(8)))])
        assert indexes.get("freed").n == 11
        assert gone() is None
    finally:
        if enabled:
            gc.enable()
