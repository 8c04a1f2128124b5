"""The fitted calibrations: the weights that turn retrieval features into a confidence, all in one place.

A ``Calibration`` is a linear logit over the ranker's features plus a Platt rescaling; the numbers
below were fitted on development data by the scripts named beside each, per embedding model (each
model spreads its cosines differently).  The ranker (``ranker.py``) applies them; ``Service`` picks
the FAQ ones by embedder (``calibration_for``), the vector stores the passage ones
(``passage_calibration``), and ``openqna calibrate`` rescales one for a project (``rescaled``).
Refitting changes numbers here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from openqna.ranking.regime import RegimeTerms


@dataclass(frozen=True)
class Calibration:
    """Weights over the features (a logit), then a Platt rescaling of it into a confidence.

    The defaults are neutral: no feature weighed, no rescaling (``scale`` 1, ``shift`` 0), no typical score,
    no boost; every fit below names each number it sets, so a new fit starts from nothing rather than from
    another model's weights.  ``scale`` and ``shift`` put confidence 0.5 where a threshold keeps ~97% of
    right answers on the development KBs.  ``typical`` is the logit of a right answer on a typical KB: a KB
    with enough alternate questions measures its own (``adapt``) and its logits are shifted by the
    difference, so a threshold reads the same on every KB; None turns KB adaptation off.  ``passages``:
    own weights for passage records (None: these, reading the text).  ``context_boost`` is read from the
    calibration a question is ranked with, never from the ones inside it.
    """

    w_qsim: float = 0.0
    w_asim: float = 0.0
    w_qcov: float = 0.0
    w_acov: float = 0.0
    bias: float = 0.0
    w_qmean: float = 0.0
    w_qcent: float = 0.0
    w_bm25: float = 0.0
    context_boost: float = 0.0  # logit added to follow-ups of the previous answer
    scale: float = 1.0
    shift: float = 0.0
    typical: float | None = None
    passages: Calibration | None = None
    lexical: Calibration | None = None  # keyword features only, for what the embedder cannot read
    regime: RegimeTerms | None = None  # the last step, one scale across kinds of KB (``regime``); None: none
    # the weights of a KB of QnAs the adaptation does not reach (an FAQ page, one question per QnA); None: these
    sparse: Calibration | None = None
    # An FAQ page's weights read two more things: the better of a record's question and answer cosines (``dmax``:
    # dense alone, reading both), and the answer's features again in proportion to how much the KB's answers say
    # (``informative``, ``ranker.answer_informativeness``: 0 for chit-chat, near 1 for paragraphs); 0: not read.
    w_dmax: float = 0.0
    w_asim_informative: float = 0.0
    w_acov_informative: float = 0.0
    w_bm25_informative: float = 0.0

    def logit(self, f: Any, question_only: bool = False, informative: float = 0.0) -> Any:
        """The raw logit of features ``f`` (any object with the ``Features`` arrays, any shape); ``informative``:
        the KB's answer informativeness, read by the ``*_informative`` weights."""
        out = self.w_qsim * f.qsim + self.w_qcov * f.qcov + self.w_bm25 * f.bm25 + self.bias
        if self.w_qmean or self.w_qcent:
            out = out + self.w_qmean * f.qmean + self.w_qcent * f.qcent
        if self.w_dmax:  # a question-only logit reads the question's side of it
            out = out + self.w_dmax * (f.qsim if question_only else np.maximum(f.qsim, f.asim))
        if self.w_bm25_informative and not question_only:
            out = out + self.w_bm25_informative * informative * f.bm25
        if not question_only:
            out = out + (self.w_asim + self.w_asim_informative * informative) * f.asim \
                + (self.w_acov + self.w_acov_informative * informative) * f.acov
        return out


# Passages (SciFact train claims): text cosine, text coverage and text BM25.
PASSAGES = Calibration(w_qsim=0.0, w_asim=13.634, w_qcov=0.0, w_acov=5.211, w_qmean=0.0, w_qcent=0.0, w_bm25=6.932,
                       scale=0.566, shift=-8.649, typical=None, context_boost=1.0)
# For the share of a question the embedder cannot read (``rank``'s ``reads_cjk``): the same fits
# with the keyword features alone (``scripts/fit_ranker.py --lexical``, the same development data).
LEXICAL = Calibration(w_qsim=0.0, w_asim=0.0, w_qcov=10.74, w_acov=8.055, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0,
                      scale=0.851, shift=-2.383, typical=None,
                      passages=Calibration(w_qsim=0.0, w_asim=0.0, w_qcov=0.0, w_acov=7.252, w_qmean=0.0, w_qcent=0.0,
                                           w_bm25=14.345, scale=0.62, shift=-6.908, typical=None), context_boost=1.0)
# A KB of QnAs the adaptation does not reach (one question per QnA, as FAQ pages are): scripts/fit_regimes.py, a
# softmax over each question's records fitted on the dev splits of ``make eval``'s one-question regime only: FAQ
# pages with real answers (covid-q, covid-qsim-deepset, the three chit-chat KBs cut to one question; each KB weighing
# the same).  The intent sets with intent names for answers and XQuAD's FAQ, whose questions were written from the
# answer, are not fitted on (issue 38: they taught the previous fit to read answers more than real FAQ pages
# reward).  Dense alone over question and answer (``w_dmax``) carries most of it; the answer's features are read
# again in proportion to the KB's answer informativeness (``ranker.answer_informativeness``), which lets the same
# weights read chit-chat by its questions and paragraphs by their text (XQuAD's FAQ, never fitted on: dev top-1
# 0.917 against 0.819 without the informativeness terms).
SPARSE = Calibration(w_qsim=5.74, w_asim=2.77, w_qcov=1.744, w_acov=1.447, w_qmean=0.0, w_qcent=0.0, w_bm25=-0.006,
                     w_dmax=5.514, w_asim_informative=1.115, w_acov_informative=1.238, w_bm25_informative=0.309,
                     scale=0.34, shift=-3.356, typical=None, context_boost=1.0)
# The last step on every KB, one scale across kinds of KB (``regime``): scripts/fit_regimes.py on the dev splits of
# the regimes of ``make eval`` that are fitted on (many questions, one question, XQuAD's FAQ, documents, tiny; not
# the intent sets with intent names for answers; each regime weighs the same; the many-question KBs count both adapted and as a KB that cannot adapt ranks them).  Its output is the
# probability that the top answer is right, less ``shift`` (0.75 logit units), so that 0.5 stands where that
# probability is 0.68 (see scripts/fit_regimes.py for the choice).  An FAQ page's logit and gap have weights of
# their own, as an adapted KB's do: its logits come from ``SPARSE``.
REGIME = RegimeTerms(w_logit=0.092, w_gap=0.564, w_share=0.718, w_passage=0.298, w_heading=0.203, w_adapted=-1.245,
                     w_adapted_logit=0.428, w_adapted_gap=-0.261, w_faq_page=0.318, w_faq_page_logit=0.266,
                     w_faq_page_gap=1.351, w_log_records=0.176, bias=0.14, shift=0.75, rival=-1.0)
# all-MiniLM-L6-v2, the bundled model: scripts/fit_ranker.py, a softmax over each question's records fitted on
# development questions only (banking77 training utterances not in the KB, hwu64's validation split, chit-chat
# questions the evaluation indexes).
CALIBRATION = Calibration(w_qsim=7.765, w_asim=2.379, w_qcov=1.887, w_acov=1.889, w_qmean=-12.307, w_qcent=21.163,
                          context_boost=1.0, scale=0.681, shift=5.037, typical=21.874,
                          passages=PASSAGES, lexical=LEXICAL, regime=REGIME, sparse=SPARSE)
# The fits above read all-MiniLM-L6-v2's vectors.  Another model's cosines are spread differently (its KBs'
# typical right-answer logit is 16.3 against MiniLM's 21.9), so the accurate model, all-mpnet-base-v2, has the
# same fits of its own, made by ``OPENQNA_EMBEDDER=mpnet python scripts/fit_ranker.py`` on the same development
# data.  The lexical part reads keywords only and is shared.
MPNET_CALIBRATION = Calibration(
    w_qsim=8.292, w_asim=3.121, w_qcov=2.338, w_acov=1.932, w_qmean=-13.466, w_qcent=21.327, scale=0.798,
    shift=5.907, typical=16.279, lexical=LEXICAL,
    passages=Calibration(w_qsim=0.0, w_asim=13.891, w_qcov=0.0, w_acov=4.937, w_qmean=0.0, w_qcent=0.0,
                         w_bm25=7.079, scale=0.577, shift=-9.186, typical=None), context_boost=1.0)
# OPENQNA_EMBEDDER=accurate (mpnet beside the universal sentence encoder, ``embedder.HybridEncoder``): its own
# fits, by ``OPENQNA_EMBEDDER=accurate python scripts/fit_ranker.py`` on the same development data.
ACCURATE_CALIBRATION = Calibration(
    w_qsim=7.964, w_asim=3.667, w_qcov=1.649, w_acov=1.53, w_qmean=-13.704, w_qcent=23.431, scale=0.778,
    shift=5.91, typical=18.337, lexical=LEXICAL,
    passages=Calibration(w_qsim=0.0, w_asim=17.586, w_qcov=0.0, w_acov=5.398, w_qmean=0.0, w_qcent=0.0,
                         w_bm25=5.545, scale=0.562, shift=-9.176, typical=None), context_boost=1.0)
# Questions with Chinese, Japanese or Korean text ranked in the multilingual space (``openqna.ranking.multilingual``): the
# universal sentence encoder's cosines and the keyword features together, fitted by scripts/fit_multilingual.py on
# the dev splits of ``make eval``'s CJK knowledge bases (XQuAD-zh and JSQuAD as paragraphs and as FAQs: 1,992
# in-scope questions for the weights, a softmax over each question's records; then the last step, a logistic
# regression of "the top answer is right" with the off-topic ones): dev precision 0.916 and recall 0.936 at 0.5.
# The question mean and centroid have no weight: the dev FAQs have one question per QnA.
MULTILINGUAL = Calibration(
    w_qsim=2.438, w_asim=8.21, w_qcov=0.751, w_acov=18.462, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0, scale=1.0,
    shift=0.0, typical=None,
    passages=Calibration(w_qsim=0.0, w_asim=7.677, w_qcov=0.0, w_acov=15.363, w_qmean=0.0, w_qcent=0.0, w_bm25=6.646,
                         scale=1.0, shift=0.0, typical=None),
    regime=RegimeTerms(w_logit=0.185, w_gap=1.146, w_passage=0.034, w_heading=0.0, bias=-4.107), context_boost=1.0)
_FITTED = {"minilm-l6-v2/onnx-fp32": CALIBRATION, "mpnet-base-v2/onnx-fp32": MPNET_CALIBRATION,
           "mpnet-base-v2/onnx-fp32+use-multilingual-v3/numpy@0.4": ACCURATE_CALIBRATION}


def calibration_for(embedder: str) -> Calibration:
    """The shipped calibration for vectors of the embedder named ``embedder`` (MiniLM's for any model not fitted)."""
    return _FITTED.get(embedder, CALIBRATION)


def rescaled(c: Calibration, scale: float, shift: float) -> Calibration:
    """``c`` with the Platt rescaling ``scale``, ``shift`` (``openqna calibrate``'s fit), its lexical part alike.

    A new rescaling is an affine map of the old calibrated logit (a·z + b); the lexical logit a question's
    CJK share is ranked by, and the logit of a KB ranked by the ``sparse`` weights, get the same map, so a fit
    of ``scale`` and ``shift`` predicts the served confidence of a Chinese question as it does an English one's,
    on every kind of KB.  Passages keep their own calibration.  The
    shipped last step across kinds of KB (``regime``) is left out: the project's own fit, on its own questions,
    replaces it.
    """
    a = scale / c.scale
    b = shift - a * c.shift
    lexical, sparse = c.lexical, c.sparse
    if lexical is not None:
        lexical = replace(lexical, scale=a * lexical.scale, shift=a * lexical.shift + b)
    if sparse is not None:
        sparse = replace(sparse, scale=a * sparse.scale, shift=a * sparse.shift + b)
    return replace(c, scale=scale, shift=shift, lexical=lexical, sparse=sparse, regime=None)


# -- vector stores (``kinds/vector_stores.py``): passages ranked on their best window --------------------
# Passages are ranked on their best window alone (the answer vector saw only the chunk's first 256
# word pieces).  Fitted by scripts/fit_passage_calibration.py on SciFact train claims against
# abstracts recorded as here, with banking77/hwu64 utterances as off-topic queries: 6,051 pairs,
# 0.951 accuracy at 0.5.  A score is a probability of relevance, so a loose paraphrase scores low.
# Every field is given: the defaults are the FAQ ranker's (question mean/centroid weights, its typical
# score and Platt scale), which a fitted logistic model must not inherit.  ``lexical``: the same fit
# on coverage alone, for questions the embedder cannot read (ranker.rank's ``reads_cjk``).
PASSAGE_CALIBRATION = Calibration(
    w_qsim=7.906, w_asim=0.0, w_qcov=4.935, w_acov=0.0, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0, bias=-8.023,
    scale=1.0, shift=0.0, typical=None,
    lexical=Calibration(w_qsim=0.0, w_asim=0.0, w_qcov=6.818, w_acov=0.0, w_qmean=0.0, w_qcent=0.0,
                               w_bm25=0.0, bias=-4.967, scale=1.0, shift=0.0, typical=None), context_boost=1.0)
# The same fit on all-mpnet-base-v2's vectors (OPENQNA_EMBEDDER=mpnet scripts/fit_passage_calibration.py, the
# same data and pairs: 6,046, 0.953 accuracy at 0.5).
MPNET_PASSAGE_CALIBRATION = Calibration(
    w_qsim=8.136, w_asim=0.0, w_qcov=4.966, w_acov=0.0, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0, bias=-8.415,
    scale=1.0, shift=0.0, typical=None,
    lexical=Calibration(w_qsim=0.0, w_asim=0.0, w_qcov=6.832, w_acov=0.0, w_qmean=0.0, w_qcent=0.0,
                               w_bm25=0.0, bias=-4.982, scale=1.0, shift=0.0, typical=None), context_boost=1.0)
# And on the accurate model's (OPENQNA_EMBEDDER=accurate: mpnet beside the universal sentence encoder), the same
# data and pairs: 6,046, 0.952 accuracy at 0.5.
ACCURATE_PASSAGE_CALIBRATION = Calibration(
    w_qsim=9.483, w_asim=0.0, w_qcov=4.827, w_acov=0.0, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0, bias=-8.288,
    scale=1.0, shift=0.0, typical=None,
    lexical=Calibration(w_qsim=0.0, w_asim=0.0, w_qcov=6.732, w_acov=0.0, w_qmean=0.0, w_qcent=0.0,
                               w_bm25=0.0, bias=-5.018, scale=1.0, shift=0.0, typical=None), context_boost=1.0)
_PASSAGE_CALIBRATIONS = {"mpnet-base-v2/onnx-fp32": MPNET_PASSAGE_CALIBRATION,
                         "mpnet-base-v2/onnx-fp32+use-multilingual-v3/numpy@0.4": ACCURATE_PASSAGE_CALIBRATION}


def passage_calibration(embedder: str) -> Calibration:
    """How a vector store scores chunks embedded by ``embedder`` (MiniLM's fit for any model not fitted)."""
    return _PASSAGE_CALIBRATIONS.get(embedder, PASSAGE_CALIBRATION)


# -- Azure :query-text (``Service.answer_from_text``): ad-hoc passages ------------------------------
# A passage's cosine with the question and the share of the question's words it holds, fitted by
# scripts/fit_query_text.py on XQuAD's English dev paragraphs (576 questions, each asked of five records,
# 7,704 passages; right: the passage holds the answer; MiniLM's vectors, used for every model): precision 0.80
# and recall 0.69 at 0.5.  ``lexical``: the same fit on the word share alone.
QUERY_TEXT = Calibration(
    w_qsim=5.01, w_asim=0.0, w_qcov=5.958, w_acov=0.0, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0, bias=-6.251,
    scale=1.0, shift=0.0, typical=None,
    lexical=Calibration(w_qsim=0.0, w_asim=0.0, w_qcov=9.122, w_acov=0.0, w_qmean=0.0, w_qcent=0.0,
                        w_bm25=0.0, bias=-5.353, scale=1.0, shift=0.0, typical=None), context_boost=1.0)
