"""From retrieval features to a calibrated confidence (DESIGN decision 4).

Every eligible record (or candidate, on a large index) gets features: best, mean and centroid
cosine of its questions, answer cosine, idf-weighted query coverage of its best question and of
its answer, and for passages the answer BM25 over the query's largest possible BM25.  A linear
logit of them (``calibrations.Calibration``, fitted by scripts/fit_ranker.py on development data only) plus,
where it helps, the KB's own classifier (``adapt``), is read against the KB's typical in-scope
logit and rescaled into a confidence in 0..1 meant to read the same on every knowledge base.
An exact question match scores 1.0, as in Azure.

``rank`` runs ``STAGES`` in order, each a named step with its own docstring (``FeatureSum``,
``KnowledgeBaseScale``, ``PassageScale``, ``Conversation``, ``RegimeStep``, ``TrainedOffset``,
``UnreadScript``, ``Confidence``, ``ExactMatch``); ``explain`` reports the logit after each under ``stage:<name>``.

Why this file is over 500 lines: the features, the per-KB weights they are read with and the stages
that read them change together (every refit touches all three), and the stages use the weight helpers
that nothing outside ranking should call; the next cut is the features (``Features``, ``features``,
``bm25_share``) into a module of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace

import numpy as np

from openqna import settings
from openqna.filters.nodes import Filter
from openqna.index.analyze import analyze, cjk_share, exact_key, unread_share
from openqna.index.memindex import MemIndex
from openqna.index.postings import K1
from openqna.index.products import no_units, unit_products
from openqna.ranking import adapt, regime
from openqna.ranking.calibrations import CALIBRATION, Calibration


@dataclass
class Ranked:
    record_id: int
    confidence: float
    # What the confidence is made of, when ``rank(..., explain=True)`` asked (the console's Inspect):
    # the features, and the logit parts added to their calibrated sum.
    parts: dict[str, float] = field(default_factory=dict)


# In candidate mode (large indexes), how many of each kind of candidate a query scores: the
# nearest question vectors, the nearest answer/passage vectors, and the best keyword matches of each field.
CANDIDATES = 100


@dataclass
class Features:
    """What the confidence is computed from, for the record rows ``rows`` (sorted), one value per row."""

    rows: np.ndarray
    qsim: np.ndarray  # best question cosine (a passage's: its text's)
    asim: np.ndarray  # answer cosine
    qcov: np.ndarray  # idf-weighted share of the query's words in the best question
    acov: np.ndarray  # ... in the answer
    qmean: np.ndarray  # mean question cosine (a passage's: its text's)
    qcent: np.ndarray  # cosine with the centroid of the questions (a passage's: its text's)
    bm25: np.ndarray  # answer BM25 over the query's largest possible BM25 (0..1)


def sigmoid(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return out


def features(index: MemIndex, terms: list[str], query_vector: np.ndarray, eligible: np.ndarray,
             must_rows: list[int], flt: Filter | None = None, sections: bool = True,
             answerable: np.ndarray | None = None) -> Features:
    """Features of every eligible record (small index), or of the candidates and ``must_rows`` (large one).

    Candidates are the ``CANDIDATES`` nearest units of each field (exact or from the IVF
    index or the store's own vector index, with the filter pushed in; ``flt`` is the filter
    ``eligible`` was computed from, for the store) and the ``CANDIDATES`` units of each field that cover
    most of the query's idf mass; every candidate is then scored exactly, so a candidate gets
    the confidence it would get from the exhaustive path.  ``answerable``: the records a filter keeps, of the
    ``eligible`` ones read as their rivals (``flt`` is then the filter it came from): candidates are found among
    both, so that a selective filter still finds its own.
    """
    q_units = None  # index.q.units_of(rows), when the candidate path needs it anyway
    # A passage's or row's "question" is only its title: its text is what answers, so the
    # question features read the text (SciFact training queries: nDCG@10 0.608 -> 0.708); in a KB
    # of passages only (a vector store) the question fields are not scored at all.
    all_passages = index.only_passages
    q_products = None  # every question unit's cosine, on the exhaustive path
    if index.exhaustive():
        rows = np.arange(index.n)
        # a KB of passages only scores no question field: its (empty) products cost nothing
        q_products, a_products = unit_products(no_units(index.dim) if all_passages else index.q.columns,
                                               index.a.columns, query_vector)
        qcov = None if all_passages else index.coverage(terms, "q", eligible)
        asim = np.maximum(index.dense(query_vector, "a", eligible, a_products), 0.0)
        acov = index.coverage(terms, "a", eligible)
    else:
        parts = [np.asarray(must_rows, dtype=np.int64)]
        coverage = {}
        # where candidates are looked for: the eligible records, and those a filter keeps among them (with the
        # filter, for a store that searches vectors itself)
        searches = [(eligible, flt)] if answerable is None else [(answerable, flt), (eligible, None)]
        for name, fld in (("q", index.q), ("a", index.a)):
            weights = {t: fld.idf(t) for t in set(terms) if " " not in t}
            for mask, mask_flt in searches:
                unit_allowed = None if mask.all() else fld.unit_mask(mask)
                found = None
                if index.nearest_rows is not None:
                    found = index.nearest_rows(name, query_vector, CANDIDATES, mask_flt, mask)
                if found is None:
                    found = fld.rows[fld.nearest_units(query_vector, CANDIDATES, unit_allowed)]
                parts.append(found)
                mass, total, hit = fld.coverage_top(weights, CANDIDATES, unit_allowed)
                coverage[name] = (mass, total if total > 0 else 1.0)
                parts.append(fld.rows[hit])
        rows = np.unique(np.concatenate(parts))
        rows = rows[eligible[rows]]
        a_units = index.a.units_of(rows)
        asim = np.maximum(index.a.dense_rows(query_vector, rows, a_units), 0.0)
        units, starts, has = q_units = index.q.units_of(rows)
        mass, total = coverage["q"]  # divided as coverage_units divides: the same confidence as exhaustive
        qcov = index.q.max_per_row(mass[units] / total, starts, has, 0.0)
        units, starts, has = a_units
        mass, total = coverage["a"]
        acov = index.a.max_per_row(mass[units] / total, starts, has, 0.0)
    bm25 = np.zeros(len(rows), np.float32)
    passages = read_as_passages(index, sections)[rows]
    if index.a.n:  # a QnA's answer BM25 too: the FAQ-page weights read it (``calibrations.SPARSE``)
        bm25 = bm25_share(index, terms, rows)
    if all_passages:
        return Features(rows, asim, asim, acov, acov, asim, asim, bm25)
    assert qcov is not None  # None only in a KB of passages only, answered above
    qsim, qmean, qcent = (np.maximum(x, 0.0) for x in index.q.similarities(query_vector, rows, q_units, q_products))
    return Features(rows, np.where(passages, asim, qsim), asim, np.where(passages, acov, qcov), acov,
                    np.where(passages, asim, qmean), np.where(passages, asim, qcent), bm25)


def bm25_share(index: MemIndex, terms: list[str], rows: np.ndarray) -> np.ndarray:
    """Answer BM25 of ``rows`` over the query's largest possible BM25 (every term at idf·(k1+1))."""
    fld = index.a
    most = sum(fld.idf(t) * (K1 + 1.0) for t in terms if fld.postings.get(t) is not None)
    if most <= 0:
        return np.zeros(len(rows), np.float32)
    units, starts, has = fld.units_of(rows)
    return fld.max_per_row(fld.bm25_at(terms, units), starts, has, 0.0) / np.float32(most)


def text_confidences(c: Calibration, cosines: np.ndarray, coverages: np.ndarray, unread: float = 0.0) -> np.ndarray:
    """Azure :query-text's confidence of ad-hoc passages: ``c`` (``calibrations.QUERY_TEXT``) over each passage's
    cosine with the question and the share of the question's words it holds (a handful of ad-hoc records gives
    no idf, so words weigh alike).  ``unread``: the share of the question the embedder cannot read, ranked by
    ``c.lexical`` as in ``rank``.
    """
    zero = np.zeros(len(cosines))
    f = SimpleNamespace(qsim=np.maximum(cosines, 0.0), qcov=coverages, asim=zero, acov=zero, bm25=zero, qmean=zero,
                        qcent=zero)
    logit = c.scale * c.logit(f) + c.shift
    if unread and c.lexical is not None:
        lex = c.lexical
        logit = (1.0 - unread) * logit + unread * (lex.scale * lex.logit(f) + lex.shift)
    return sigmoid(logit)


def kb_adaptation(index: MemIndex, calibration: Calibration = CALIBRATION,
                  query_map: adapt.TrainedMap | None = None) -> adapt.Adaptation | None:
    """The adaptation ``calibration`` uses on ``index`` (None: none fitted or turned off), for questions mapped by
    ``query_map`` (a project's trained adapter, ``openqna train``) when they are."""
    return _adaptation(index, calibration, query_map)


def _adaptation(index: MemIndex, c: Calibration, query_map: adapt.TrainedMap | None = None
                ) -> adapt.Adaptation | None:
    """The KB's own adaptation (held-out alternate questions), when ``c`` and the settings allow it.  With a trained
    ``query_map`` the held-out questions are mapped as asked questions are, so the KB's typical right answer (and so
    the threshold) is read in the space the questions are ranked in: a model that moves every right answer's score
    moves the typical score with it."""
    if c.typical is None or not settings.kb_adapt():
        return None
    share = near_share(c)
    near = None if share is None else (share, partial(adapted_confidence, c, index))
    final = "" if near is None else f"{c.scale!r},{c.shift!r}{',regime' if c.regime is not None else ''}"
    if query_map is None:
        return adapt.of(index, lambda *a: _held_out_logits(c, *a), near=near, final_name=final)
    return adapt.of(index, lambda *a: _held_out_logits(c, *a), query_map=query_map.apply,
                    map_name=query_map.digest, near=near, final_name=final)


def near_share(c: Calibration) -> float | None:
    """The near-topic share ``c``'s adaptation keeps to (None: no margin): the project's choice carried in ``c``
    (``Calibration.near_topic``), else the server's ``OPENQNA_NEAR_TOPIC``."""
    if c.near_topic is None:
        return settings.near_topic()
    return None if c.near_topic == "off" else float(c.near_topic)


def adapted_confidence(c: Calibration, index: MemIndex, logit: np.ndarray, allowed: np.ndarray,
                       rows: np.ndarray) -> np.ndarray:
    """The confidence's logits of candidates ``rows`` of an adapted ``index`` whose logits, read against the KB's
    typical score, are ``logit`` (``allowed``: which may answer), as ``KnowledgeBaseScale`` and ``RegimeStep`` read
    them (QnAs only: the adaptation's held-out questions rank no passages)."""
    z = c.scale * logit + c.shift
    if c.regime is None:
        return z
    out: np.ndarray = c.regime.of(z, allowed, index.passage[rows], headings(index)[rows], adapted=True,
                                  records=index.n)
    return out


def _held_out_logits(c: Calibration, index: MemIndex, V: np.ndarray, terms: list[list[str]],
                     units: np.ndarray) -> np.ndarray:
    f = SimpleNamespace(**adapt.held_out_features(index, V, terms, units))
    return np.where(index.passage[None, :], -np.inf, c.logit(f))


def question_gain(index: MemIndex, query_vector: np.ndarray, rows: np.ndarray, vectors: np.ndarray,
                  calibration: Calibration = CALIBRATION) -> np.ndarray:
    """The logit ``rank`` would gain on records ``rows`` if ``vectors`` (one each) were one more question of each.

    The best, mean and centroid question cosines are recomputed with the extra question and read
    through the calibration's own weights, so the gain is in the units of ``rank``'s logit whatever
    the fitted weights are.  Passages gain nothing: their question features read their text.  (A conversation
    ranks document sections by their headings, ``read_as_passages``, so a section gains as a QnA does.)
    """
    q, c = index.q, calibration
    best, mean, centroid = q.similarities(query_vector, rows)
    units, starts, has = q.units_of(rows)
    sums = np.zeros((len(rows), q.dim), np.float32)
    if len(units):
        sums[has] = np.add.reduceat(q.matrix[units], starts)
    sims = vectors @ query_vector
    counts = q.counts[rows]
    grown = sums + vectors
    zero = np.zeros(len(rows), np.float32)
    before = SimpleNamespace(qsim=np.maximum(best, 0.0), qmean=np.maximum(mean, 0.0),
                             qcent=np.maximum(centroid, 0.0), qcov=zero, bm25=zero)
    after = SimpleNamespace(qsim=np.maximum(np.maximum(best, sims), 0.0),
                            qmean=np.maximum((np.maximum(mean, 0.0) * counts + sims) / (counts + 1), 0.0),
                            qcent=np.maximum(grown @ query_vector / np.maximum(np.linalg.norm(grown, axis=1), 1e-9),
                                             0.0),
                            qcov=zero, bm25=zero)
    w = weights(index, c)
    gain = w.scale * (w.logit(after, question_only=True) - w.logit(before, question_only=True))
    return np.where(index.passage[rows], 0.0, gain)


# The logit of the share of a question that neither the embedder nor the keywords can read ("Surface Pro 4の充電時間は"
# asked of an English KB: the Japanese asks what the question is about): an answer is hardly ever right on it alone.
# -4 until the FAQ-page refit, whose last step is surer of a small FAQ page's best record: on a KB of two QnAs it left
# that question at 0.38, above Bot Framework's default threshold of 0.3 (tests/test_cjk.py); -6 puts it at 0.24.
UNREAD_LOGIT = -6.0


def _unmatched_cjk(index: MemIndex, terms: list[str]) -> bool:
    """Whether the question has CJK terms and no record holds any of them."""
    cjk = [t for t in terms if cjk_share(t) > 0]
    return bool(cjk) and not any(fld.postings.get(t) is not None for t in cjk for fld in (index.q, index.a))


def weights(index: MemIndex, calibration: Calibration = CALIBRATION,
            query_map: adapt.TrainedMap | None = None) -> Calibration:
    """The feature weights (and their scale and shift) ``rank`` reads ``index``'s records with."""
    return _sparse(index, calibration, _adaptation(index, calibration, query_map)) or calibration


def _sparse(index: MemIndex, c: Calibration, adaptation: adapt.Adaptation | None) -> Calibration | None:
    """``c.sparse`` for an FAQ page (QnAs, no passages, most with one question) the adaptation does not reach.

    A document KB (it has passages) keeps the shipped weights, which rank its sections and passages better on
    ``make eval``'s document dev split (0.692 top-1 against 0.648 with the refitted sparse weights), and so does a KB of
    QnAs with many questions that does not adapt (too large, or adaptation turned off): the shipped weights were
    fitted there (banking77 without adaptation: 0.853 top-1 against 0.792).
    """
    if c.sparse is None or adaptation is not None or index.has_passages or not index.mostly_one_question:
        return None
    return c.sparse


def _calibrated(c: Calibration, logit: np.ndarray, f: Features, passages: np.ndarray) -> np.ndarray:
    """``logit`` (records) with the passage rows' replaced by ``c.passages``' calibrated logit, if it has one."""
    if c.passages is None or not passages.any():
        return logit
    p = c.passages
    return np.where(passages, p.scale * p.logit(f) + p.shift, logit)


def headings(index: MemIndex) -> np.ndarray:
    """Which records' questions all read as headings or statements (``regime.heading_rows``), once per index."""
    return index.derived("ranking.headings", lambda: regime.heading_rows(index.exact, index.n, index.q.counts > 0))


def read_as_passages(index: MemIndex, sections: bool = True) -> np.ndarray:
    """Which records are ranked as passages: the passages, and in a KB that has passages (a document imported
    with its sections), the section QnAs whose questions read as headings (``headings``), once per index.

    A heading ("Power and charging", "Charge your Surface Pro 4") names a section's topic, not the questions its
    text answers, so such a section is read through its text, heading included, with the passages' weights and
    scale, as its own passage is: "how long does it take to charge surface pro 4?" is answered by the section
    that says "two to four hours", not by the one whose heading shares most of its words.  ``sections=False``
    (a conversation: the previous answer's heading is the topic a follow-up asks about, and the follow-up's
    evidence is measured in question units, ``question_gain``) reads only the passages so.
    """
    if not sections:
        return index.passage
    return index.derived("ranking.read_as_passages",
                         lambda: index.passage | (headings(index) if index.has_passages else False))


INFORMATIVE_SAMPLE = 300  # stored questions asked of the answers, at most


def answer_informativeness(index: MemIndex) -> float:
    """How much a KB's answers say about their questions: the share of (up to ``INFORMATIVE_SAMPLE``, evenly spread)
    QnAs whose first question's vector is closer to their own answer than to the others' answers, once per index.

    Measured on the KB's own content, so it needs no labelled question: chit-chat's answers ("Hi!") say nothing
    of their question (0.19 on the three chit-chat KBs cut to one question), an FAQ page's say some (covid-q 0.45),
    paragraphs written about their question say nearly everything (XQuAD 0.92).  The FAQ-page weights read the
    answer more where it is higher (``calibrations.Calibration.w_asim_informative``).
    """
    return index.derived("ranking.informativeness", lambda: _informativeness(index))


# An FAQ page whose answers say as much as passages do is read partly as passages are (``passage_share``): from an
# answer informativeness of PASSAGE_FROM, in proportion, up to PASSAGE_MOST of the logit at PASSAGE_FULL and above.
PASSAGE_FROM, PASSAGE_FULL, PASSAGE_MOST = 0.7, 0.9, 0.5
# ... on a KB of this many records or more: among a few rivals any answer is nearer its own question than the others
# (a KB of four QnAs on four topics measures 1.0), and no KB of make eval below it was measured
PASSAGE_MIN_RECORDS = 100


def passage_share(informative: float, records: int) -> float:
    """The share of an FAQ page's calibrated logit read with the passages' weights (``calibrations.PASSAGES``: the
    answer's cosine, its words and its BM25), the rest with the FAQ-page weights, by the KB's answer informativeness.

    The FAQ-page weights were fitted on FAQ pages whose answers say some of their question (covid-q 0.45, deepset's
    0.42, chit-chat 0.19), and read the answer little.  Where each answer is nearly a passage about its question
    (XQuAD's paragraphs stored with one question written about them, 0.92), the answer is what decides: on that KB's
    dev split the passages' weights alone ranked 0.966 top-1 against the FAQ-page weights' 0.917, and half of each
    0.960, while on the real FAQ pages' dev splits any share of them lost (covid-q 0.528 -> 0.479 at half, deepset
    0.702 -> 0.492).  So the share is 0 below 0.7, which no real FAQ page of ``make eval`` reaches, and at most half,
    so that a KB's questions always count; and only on a KB of ``PASSAGE_MIN_RECORDS`` or more, where the measure
    has rivals enough to mean something (XQuAD's has 197 records).
    """
    if informative <= PASSAGE_FROM or records < PASSAGE_MIN_RECORDS:
        return 0.0
    return PASSAGE_MOST * min(1.0, (informative - PASSAGE_FROM) / (PASSAGE_FULL - PASSAGE_FROM))


def handover_share(sparse: Calibration, informative: float, records: int) -> float:
    """The share of an FAQ page's calibrated logit read with its calibration's own weights rather than the FAQ-page
    weights ``sparse``, by the KB's answer informativeness (``Calibration.handover_from`` and ``handover_full``;
    0 when ``sparse`` names no handover).  ``calibrations.MULTILINGUAL_SPARSE`` hands a CJK FAQ page whose answers
    say as much as XQuAD's or JSQuAD's paragraphs (0.65 and more in the multilingual space) back to
    ``calibrations.MULTILINGUAL``, fitted on such KBs, and reads a real FAQ page (0.4 and less) by its questions.
    As ``passage_share``, only on a KB of ``PASSAGE_MIN_RECORDS`` or more: among a dozen QnAs nearly any answer is
    nearer its own question than the others'."""
    lo, hi = sparse.handover_from, sparse.handover_full
    if hi <= 0.0 or informative <= lo or records < PASSAGE_MIN_RECORDS:
        return 0.0
    return 1.0 if informative >= hi else (informative - lo) / (hi - lo)


# A page whose questions read as headings ("電源と充電", "Wi-Fi に接続する": a manual's sections typed in as QnAs) names
# topics, not the questions its answers answer: the FAQ-page weights hand it over too (``heading_handover``), none
# when HEADINGS_FROM of its records or fewer read so, all of it from HEADINGS_FULL (chit-chat's one-question pages:
# a third; covid-q's 7%, deepset's 3%).
HEADINGS_FROM, HEADINGS_FULL = 0.5, 0.9


def heading_share(index: MemIndex) -> float:
    """The share of ``index``'s QnAs no question of which asks (``regime.key_asks``; a QnA without questions asks
    nothing either: the train job's answers-only index is read through its answers), once per index."""
    return index.derived("ranking.heading_share", lambda: _heading_share(index))


def _heading_share(index: MemIndex) -> float:
    qnas = ~index.passage
    if not qnas.any():
        return 0.0
    asks = np.zeros(index.n, dtype=bool)
    for key, rows in index.exact.items():
        if regime.key_asks(key):
            asks[rows] = True
    return float((qnas & ~asks).sum() / qnas.sum())


def heading_handover(index: MemIndex) -> float:
    """The share of an FAQ page handed over for its questions reading as headings (``HEADINGS_FROM``, ``_FULL``)."""
    share = heading_share(index)
    if share <= HEADINGS_FROM:
        return 0.0
    return min(1.0, (share - HEADINGS_FROM) / (HEADINGS_FULL - HEADINGS_FROM))


def _informativeness(index: MemIndex) -> float:
    qna = ~index.passage & (index.q.counts > 0) & (index.a.counts > 0)
    rows = np.flatnonzero(qna)
    if len(rows) < 2:
        return 0.0
    rows = np.unique(rows[np.linspace(0, len(rows) - 1, min(len(rows), INFORMATIVE_SAMPLE)).astype(np.int64)])
    # each sampled QnA's first question against the sampled QnAs' answers (one unit each): a bounded cost, and the
    # same measure on a KB of any size (among at most INFORMATIVE_SAMPLE rivals)
    sims = index.q.matrix[index.q.lo[rows]] @ index.a.matrix[index.a.lo[rows]].T
    return float(np.mean(np.argmax(sims, axis=1) == np.arange(len(rows))))


def _position(rows: np.ndarray, row: int | None) -> int | None:
    if row is None:
        return None
    i = int(np.searchsorted(rows, row))
    return i if i < len(rows) and rows[i] == row else None


# -- the stages: a question's candidates to their confidences -------------------------------------------------------
@dataclass
class Scoring:
    """What the stages read and write for one question: its candidates' features and their logit so far.

    Every array is per candidate row (``f.rows``).  ``base`` is the calibrated sum of the features before any
    rescaling, ``adapted`` what the KB's adaptation added, ``context`` what the conversation added, ``unread`` the
    share of the question written in a script the embedder cannot read; ``confidence`` is set by the last stages.
    ``trace`` (only when explaining) keeps the logit, or the confidence, after each stage by its name.
    """

    index: MemIndex
    question: str
    terms: list[str]
    query_vector: np.ndarray
    eligible: np.ndarray
    calibration: Calibration
    question_only: bool
    reads_cjk: bool
    f: Features
    exact_rows: list[int]
    boosted_rows: list[int]
    offsets: dict[int, float]
    trace: dict[str, np.ndarray] | None = None
    adaptation: adapt.Adaptation | None = None
    sparse: Calibration | None = None
    logit: np.ndarray = field(default_factory=lambda: np.zeros(0))
    base: np.ndarray = field(default_factory=lambda: np.zeros(0))
    adapted: np.ndarray = field(default_factory=lambda: np.zeros(0))
    context: np.ndarray = field(default_factory=lambda: np.zeros(0))
    unread: float = 0.0
    informative: float = 0.0  # the KB's answer informativeness, when it is read with the FAQ-page weights
    confidence: np.ndarray | None = None
    # the logit the embedder and the keywords give, before ``UnreadScript`` mixes in the share they cannot read: how
    # a search page orders the records no evidence was found for (``rank(..., every_record=True)``)
    read_logit: np.ndarray | None = None
    sections: bool = True  # document sections with headings read as passages (``read_as_passages``)
    query_map: adapt.TrainedMap | None = None  # the project's trained adapter that mapped ``query_vector``, if any
    # the records a filter keeps, when ``eligible`` holds those it leaves out as well (their rivals, ``filtered_out``)
    answerable: np.ndarray | None = None

    @property
    def passages(self) -> np.ndarray:
        rows: np.ndarray = read_as_passages(self.index, self.sections)[self.f.rows]
        return rows


class Stage:
    """One step of ``rank``: reads and writes a ``Scoring``.  ``name`` is how ``explain`` reports it."""

    name = ""

    def apply(self, s: Scoring) -> None:
        raise NotImplementedError


class FeatureSum(Stage):
    """The features' weighted sum: the calibration's weights, or the KB's own FAQ-page weights (``calibrations.SPARSE``)
    when it is an FAQ page its adaptation does not reach, which also read the answer as much as the KB's answers
    inform (``answer_informativeness``)."""

    name = "features"

    def apply(self, s: Scoring) -> None:
        s.adaptation = _adaptation(s.index, s.calibration, s.query_map)
        s.sparse = _sparse(s.index, s.calibration, s.adaptation)
        informative = answer_informativeness(s.index) if s.sparse is not None else 0.0
        s.informative = informative
        s.logit = (s.sparse or s.calibration).logit(s.f, s.question_only, informative)
        s.base = s.logit.copy()
        s.adapted = np.zeros_like(s.logit)


class KnowledgeBaseScale(Stage):
    """The sum read on the knowledge base's own scale: an FAQ page's weights carry their own scale and shift (and an
    FAQ page whose answers read as passages is read partly with the passages' weights, ``passage_share``, or, where
    the FAQ-page weights name a handover, with the calibration's own, ``handover_share``);
    otherwise the KB's adaptation adds its classifier's evidence and reads the logit against its typical right
    answer (``ranking.adapt``), or the calibration's typical score does, before the calibration's scale and shift."""

    name = "kb_scale"

    def apply(self, s: Scoring) -> None:
        c = s.calibration
        if s.sparse is not None:
            s.logit = s.sparse.scale * s.logit + s.sparse.shift
            if s.sparse.handover_full > 0.0:
                own = max(handover_share(s.sparse, s.informative, s.index.n), heading_handover(s.index))
                if own:
                    z = c.logit(s.f, s.question_only) - (c.typical or 0.0)
                    s.logit = (1.0 - own) * s.logit + own * (c.scale * z + c.shift)
                return
            share = passage_share(s.informative, s.index.n)
            if share and c.passages is not None and not s.question_only:
                p = c.passages
                s.logit = (1.0 - share) * s.logit + share * (p.scale * p.logit(s.f) + p.shift)
            return
        if s.adaptation is not None:
            extra = s.adaptation.logit(s.query_vector, s.f.rows)
            if extra is not None:
                s.logit += extra
                s.adapted += extra
            s.logit -= s.adaptation.offset + s.adaptation.margin
            s.adapted -= s.adaptation.offset + s.adaptation.margin
        elif c.typical is not None:
            s.logit -= c.typical
        s.logit = c.scale * s.logit + c.shift


class PassageScale(Stage):
    """Passages read on their own scale (``calibrations.passage``), so a passage's confidence means what a QnA's does."""

    name = "passages"

    def apply(self, s: Scoring) -> None:
        s.logit = _calibrated(s.calibration, s.logit, s.f, s.passages)


class Conversation(Stage):
    """Evidence from the conversation, in the units of the calibrated logit: a follow-up prompt of the previous
    answer (``context_boost``) and a sentence that answers a follow-up question (``logit_offsets``).  Added before
    the last step, so that a record it lifts also stands clearer of its rivals."""

    name = "context"

    def apply(self, s: Scoring) -> None:
        c = s.calibration
        s.context = np.zeros_like(s.logit)
        for row in s.boosted_rows:
            i = _position(s.f.rows, row)
            if i is not None:
                s.context[i] += c.scale * c.context_boost
        for row, offset in s.offsets.items():
            i = _position(s.f.rows, row)
            if i is not None:
                s.context[i] += offset
        s.logit += s.context


def question_groups(index: MemIndex) -> np.ndarray:
    """Each record's group, once per index: records that store a question in common (``exact_key``) share one, the
    others have one each (a record's smallest row in its group)."""
    return index.derived("ranking.question_groups", lambda: _question_groups(index))


def _question_groups(index: MemIndex) -> np.ndarray:
    group = np.arange(index.n, dtype=np.int64)

    def root(r: int) -> int:
        while group[r] != r:
            group[r] = group[group[r]]
            r = int(group[r])
        return r

    for rows in index.exact.values():
        if len(rows) > 1:
            first = root(rows[0])
            for r in rows[1:]:
                other = root(r)
                if other != first:
                    group[max(first, other)] = min(first, other)
                    first = min(first, other)
    return np.asarray([root(r) for r in range(index.n)], dtype=np.int64)


def filtered_out(s: Scoring) -> np.ndarray | None:
    """The candidates a filter left out that are rivals of the ones it kept (``regime.FILTERED_OUT``), None without a
    filter: all but those that ask a question some kept record asks too (the same question answered for another
    product, tenant or audience, which is what metadata is for, is no rival)."""
    if s.answerable is None:
        return None
    allowed = s.answerable[s.f.rows]
    outside: np.ndarray = s.eligible[s.f.rows] & ~allowed
    if outside.any():
        group = question_groups(s.index)
        outside &= ~np.isin(group[s.f.rows], group[s.answerable])
    return outside


class RegimeStep(Stage):
    """One confidence scale across kinds of knowledge base (``ranking.regime``): the top candidate read against its
    rivals, the KB's size and kind (adapted, an FAQ page, passages, headings)."""

    name = "regime"

    def apply(self, s: Scoring) -> None:
        c = s.calibration
        if c.regime is None:
            return
        passages, heading = s.passages, headings(s.index)[s.f.rows]
        allowed = (s.eligible if s.answerable is None else s.answerable)[s.f.rows]
        outside = filtered_out(s)
        logit = c.regime.of(s.logit, allowed, passages, heading, adapted=s.adaptation is not None,
                            faq_page=s.sparse is not None, records=s.index.n, outside=outside)
        if s.adaptation is not None and passages.any():
            # passages (and sections read as passages) are on the passages' scale, not the adapted one: in a KB whose
            # FAQ adapts, the adapted terms once sank a manual's "Power and charging" to 0.06
            plain = c.regime.of(s.logit, allowed, passages, heading, adapted=False, faq_page=s.sparse is not None,
                                records=s.index.n, outside=outside)
            logit = np.where(passages, plain, logit)
        s.logit = logit


class TrainedOffset(Stage):
    """A question mapped by the project's trained adapter (``openqna train``) is read on the scale the threshold was
    set on: the adapter's ``offset``, fitted by the train job on the questions it was judged by
    (``training.project.fit_offset``), is added to every record's logit.  A mapped question's cosines shift as a
    whole, so without it a model that ranks better could answer fewer questions at the threshold."""

    name = "trained_offset"

    def apply(self, s: Scoring) -> None:
        if s.query_map is not None and s.query_map.offset:
            s.logit = s.logit + s.query_map.offset


class UnreadScript(Stage):
    """The share of the question in Chinese, Japanese or Korean that the embedder cannot read is ranked by the keyword
    features alone (``calibration.lexical``); a CJK part that no record holds a word of says "none of these"
    (``UNREAD_LOGIT``).  The two logits are mixed in that share."""

    name = "unread_script"

    def apply(self, s: Scoring) -> None:
        lex = s.calibration.lexical
        # without a lexical part CJK text is read as the embedder reads it; a question of no word at all never is
        s.unread = unread_share(s.question, reads_cjk=s.reads_cjk or lex is None)
        if not s.unread or lex is None:
            return  # (a question of no word at all: ``Confidence`` gives every record 0)
        s.read_logit = s.logit.copy()
        if _unmatched_cjk(s.index, s.terms):
            lexical = np.full_like(s.logit, UNREAD_LOGIT) + s.context
        else:
            lexical = _calibrated(lex, lex.scale * lex.logit(s.f, s.question_only) + lex.shift, s.f, s.passages) \
                + s.context
        s.logit = (1.0 - s.unread) * s.logit + s.unread * lexical


class Confidence(Stage):
    """The logit as a confidence (its sigmoid).  When only the keywords were read (the whole question in a script the
    embedder cannot read), a record with none of them, and no evidence from the conversation, is no answer."""

    name = "confidence"

    def apply(self, s: Scoring) -> None:
        s.confidence = sigmoid(s.logit)
        if s.unread >= 1.0:
            f = s.f
            s.confidence[(f.qcov <= 0) & (f.acov <= 0) & (f.bm25 <= 0) & (s.context == 0)] = 0.0


class ExactMatch(Stage):
    """A stored question asked word for word (``exact_key``), or the display text of a prompt of the previous answer,
    is the answer: confidence 1.0."""

    name = "exact_match"

    def apply(self, s: Scoring) -> None:
        assert s.confidence is not None
        for row in s.exact_rows:
            i = _position(s.f.rows, row)
            if i is not None:
                s.confidence[i] = 1.0


STAGES: tuple[Stage, ...] = (FeatureSum(), KnowledgeBaseScale(), PassageScale(), Conversation(), RegimeStep(),
                             TrainedOffset(), UnreadScript(), Confidence(), ExactMatch())


def scoring(index: MemIndex, question: str, query_vector: np.ndarray, eligible: np.ndarray, *,
            question_only: bool = False, boosted_ids: set[int] | frozenset[int] = frozenset(),
            exact_prompt_ids: set[int] | frozenset[int] = frozenset(), logit_offsets: dict[int, float] | None = None,
            calibration: Calibration = CALIBRATION, flt: Filter | None = None, reads_cjk: bool = True,
            keywords: str | None = None, explain: bool = False, sections_as_passages: bool = True,
            query_map: adapt.TrainedMap | None = None, pool: np.ndarray | None = None) -> Scoring | None:
    """The candidates of ``question`` and their features, ready for ``STAGES`` (``rank``'s arguments); None when
    no record may answer."""
    if index.n == 0 or not eligible.any():
        return None
    answerable = None
    if pool is not None:
        answerable, eligible = eligible, pool
    terms = analyze(question if keywords is None else keywords)
    exact_rows = list(index.exact.get(exact_key(question), ()))
    exact_rows += [index.row_of[i] for i in exact_prompt_ids if i in index.row_of]
    boosted_rows = [index.row_of[i] for i in boosted_ids if i in index.row_of]
    offsets = {index.row_of[i]: v for i, v in (logit_offsets or {}).items() if i in index.row_of}
    f = features(index, terms, query_vector, eligible, exact_rows + boosted_rows + list(offsets), flt,
                 sections_as_passages, answerable)
    if not len(f.rows):
        return None
    return Scoring(index, question, terms, query_vector, eligible, calibration, question_only, reads_cjk, f,
                   exact_rows, boosted_rows, offsets, trace={} if explain else None, sections=sections_as_passages,
                   query_map=query_map, answerable=answerable)


def rank(
    index: MemIndex,
    question: str,
    query_vector: np.ndarray,
    eligible: np.ndarray,
    *,
    question_only: bool = False,
    boosted_ids: set[int] | frozenset[int] = frozenset(),
    exact_prompt_ids: set[int] | frozenset[int] = frozenset(),
    logit_offsets: dict[int, float] | None = None,
    top: int = 3,
    threshold: float = 0.0,
    calibration: Calibration = CALIBRATION,
    flt: Filter | None = None,
    reads_cjk: bool = True,
    keywords: str | None = None,
    explain: bool = False,
    sections_as_passages: bool = True,
    query_map: adapt.TrainedMap | None = None,
    pool: np.ndarray | None = None,
    every_record: bool = False,
) -> list[Ranked]:
    """The ``top`` eligible records with confidence ≥ ``threshold``, best first.

    ``eligible`` is the mask of records that may answer; ``flt``, when given, is the filter it
    came from (a store that searches vectors itself pushes it into its query).
    ``logit_offsets`` (record id → logit) carries evidence found outside the index, such as
    a follow-up's sentence match (``followup.sentence_offsets``).
    ``reads_cjk=False`` says the embedder cannot read Chinese, Japanese or Korean: the share of the
    question written in them (``cjk_share``) is then ranked by ``calibration.lexical``, the
    keyword features alone, and the rest by the full calibration (the two calibrated logits are
    mixed in that proportion).
    ``keywords`` (default: ``question``) is the text whose words the keyword features read, such as the
    question expanded with its synonyms; the exact match reads ``question`` itself, so an expansion never
    hides a stored question asked word for word.
    ``explain`` fills each result's ``parts`` with its features and the logit parts added to them.
    ``sections_as_passages=False`` ranks a document's sections by their headings too (``read_as_passages``), as a
    conversation does.
    ``query_map``: the project's trained adapter when it mapped ``query_vector`` (``openqna train``); the KB's
    adaptation is then the one fitted on questions mapped alike.
    ``every_record=True`` (a search page, which is never empty for a question that is not blank) also returns, when
    ``threshold`` is 0 and fewer than ``top`` records have a confidence above it, the records of confidence 0 (a
    question in a script the embedder cannot read, none of whose words any record holds: ``Confidence``), after
    the others, in the order the embedder and the keywords read them (``Scoring.read_logit``); ``ask`` leaves them
    out, as no answer.
    """
    s = scoring(index, question, query_vector, eligible, question_only=question_only, boosted_ids=boosted_ids,
                exact_prompt_ids=exact_prompt_ids, logit_offsets=logit_offsets, calibration=calibration, flt=flt,
                reads_cjk=reads_cjk, keywords=keywords, explain=explain, sections_as_passages=sections_as_passages,
                query_map=query_map, pool=pool)
    if s is None:
        return []
    f = s.f
    exact_rows = s.exact_rows
    for stage in STAGES:
        stage.apply(s)
        if s.trace is not None:
            s.trace[stage.name] = s.logit.copy() if s.confidence is None else s.confidence.copy()
    confidence = s.confidence
    assert confidence is not None, "the last stages turn the logit into a confidence"
    allowed = eligible[f.rows]
    confidence[~allowed] = -1.0
    best = [int(i) for i in best_first(confidence, min(top, len(f.rows)))
            if confidence[i] >= threshold and confidence[i] > 0.0 and allowed[i]]
    if every_record and threshold <= 0.0 and len(best) < top:
        best += unscored_rows(s, allowed, top - len(best))
    exact = set(exact_rows)
    return [Ranked(int(index.ids[f.rows[i]]), float(confidence[i]), _parts(s, i, int(f.rows[i]) in exact) if explain else {})
            for i in best]


def unscored_rows(s: Scoring, allowed: np.ndarray, k: int) -> list[int]:
    """Up to ``k`` positions of the allowed candidates of confidence 0, best read first (``Scoring.read_logit``: the
    dense cosines the embedder computes even of a script it cannot read, and the keyword features), ties in row
    order."""
    assert s.confidence is not None
    rows = np.flatnonzero(allowed & (s.confidence == 0.0))
    read = s.logit if s.read_logit is None else s.read_logit
    return [int(i) for i in rows[np.argsort(-read[rows], kind="stable")][:k]]


# Up to this many results ``best_first`` finds them by passes of ``argmax``: one pass over 10,000 candidates costs
# about a tenth of ``np.argpartition`` over them (12 against 122 us), and a question asks for 3 by default.
FEW = 8


def best_first(confidence: np.ndarray, k: int) -> np.ndarray:
    """The positions of the ``k`` largest values of ``confidence``, largest first, as ``np.argpartition`` and a stable
    sort of the ``k`` it keeps give them.

    For a few (``FEW``) they are found by ``k + 1`` passes of ``argmax`` (each best is set aside in turn, and put back
    after), and kept when that answer is the partition's: when the ``k`` values and the next one all differ.  Ties
    among them or at the cut, and NaN, are left to the partition, whose choice among equal values is its own.
    """
    if 0 < k <= FEW and len(confidence) > k:
        picked: list[int] = []
        values: list[float] = []
        try:
            for _ in range(k + 1):
                i = int(np.argmax(confidence))
                picked.append(i)
                values.append(confidence[i])
                confidence[i] = -np.inf
        finally:
            for i, value in zip(reversed(picked), reversed(values)):  # in reverse: a position picked twice (-inf
                confidence[i] = value  # left) gets its own value back last
        if all(values[j] > values[j + 1] for j in range(k)):  # False for NaN
            return np.asarray(picked[:k], dtype=np.intp)
    best = np.argpartition(-confidence, k - 1)[:k]
    sorted_best: np.ndarray = best[np.argsort(-confidence[best], kind="stable")]
    return sorted_best


FEATURE_NAMES = ("qsim", "asim", "qcov", "acov", "qmean", "qcent", "bm25")


def _parts(s: Scoring, i: int, exact: bool) -> dict[str, float]:
    """Row ``i``'s features and logit parts: the calibrated sum of the features, the KB adaptation, the follow-up
    context and the final logit (after rescaling); ``exact_match`` 1.0 when a stored question matched;
    ``qsim_question``, for a record read by its questions, which of them ``qsim`` is the cosine of (its position in
    the record's questions: Inspect names it); and, under ``stage:<name>``, the logit (the confidence, from
    ``confidence`` on) after each of ``STAGES``."""
    f = s.f
    out = {name: round(float(getattr(f, name)[i]), 4) for name in FEATURE_NAMES}
    row, q = int(f.rows[i]), s.index.q
    if q.hi[row] > q.lo[row] and not s.passages[i]:  # a passage's qsim is its text's
        out["qsim_question"] = float(np.argmax(q.matrix[q.lo[row]:q.hi[row]] @ s.query_vector))
    out.update(features_logit=round(float(s.base[i]), 4), kb_adaptation=round(float(s.adapted[i]), 4),
               context=round(float(s.context[i]), 4), logit=round(float(s.logit[i]), 4), exact_match=float(exact))
    for name, values in (s.trace or {}).items():
        out[f"stage:{name}"] = round(float(values[i]), 4)
    return out
