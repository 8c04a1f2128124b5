"""The fitted calibrations: the weights that turn retrieval features into a confidence, all in one place.

A ``Calibration`` is a linear logit over the ranker's features plus a Platt rescaling.  Its numbers are data,
in ``calibrations.json`` beside this module: each entry was written by the script it names (``--write``), fitted
on development data, per embedding model (each model spreads its cosines differently); what each was fitted on
is said below, beside the name it is served by.  The ranker (``ranker.py``) applies them; ``Service`` picks the
FAQ ones by embedder (``calibration_for``), the vector stores the passage ones (``passage_calibration``), and
``openqna calibrate`` rescales one for a project (``rescaled``).  Refitting rewrites the data file and nothing
else; ``tests/test_calibrations.py`` loads it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Union

import numpy as np

from openqna.ranking.regime import RegimeTerms

NearTopic = Union[float, Literal["off"], None]  # a project's near-topic share, "off", or None: the server's


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
    # An FAQ page's weights may hand the page over to the calibration's own weights as its answers say more
    # (``ranker.handover_share``): none at an answer informativeness of ``handover_from`` or below, all of it at
    # ``handover_full`` and above, in proportion between; 0 and 0: never (the page is read partly as passages are
    # instead, ``ranker.passage_share``).
    handover_from: float = 0.0
    handover_full: float = 0.0
    # Not a fitted number: the project's choice of ``OPENQNA_NEAR_TOPIC`` (``kb/near_topic_setting.py``), a share from 0 to 1
    # or "off"; None: the server's.  It rides here because every path that ranks a project's question, and every
    # use of its adaptation (duplicates, Inspect), is handed the calibration the project is ranked with
    # (``ServiceBase.calibration``, ``query_space``); ``ranker.near_share`` reads it.  Never in the data file.
    near_topic: NearTopic = None

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


# -- the data file ------------------------------------------------------------------------------------------------
DATA_FILE = Path(__file__).with_name("calibrations.json")
Fit = Union[Calibration, RegimeTerms]
_PROJECT_CHOICES = {"near_topic"}  # fields a project sets (``ServiceBase.calibration``), never a fit's
_NESTED: dict[str, type] = {"passages": Calibration, "lexical": Calibration, "sparse": Calibration,
                            "regime": RegimeTerms}


def load(path: Path = DATA_FILE) -> dict[str, Fit]:
    """Every entry of the data file by name.  A nested value that is a string names another entry (the same object
    is then shared); a dict is a fit of its own; a field not given has the class's (neutral) default."""
    entries = json.loads(Path(path).read_text(encoding="utf-8"))["fits"]
    built: dict[str, Fit] = {}

    def build(cls: type, values: dict[str, Any], trail: tuple[str, ...]) -> Fit:
        known = {f.name for f in dataclasses.fields(cls)} - _PROJECT_CHOICES
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{path}: {'.'.join(trail)} has no field {', '.join(unknown)} ({cls.__name__})")
        args = {}
        for key, value in values.items():
            if key in _NESTED and value is not None:
                value = named(value, trail + (key,)) if isinstance(value, str) else \
                    build(_NESTED[key], value, trail + (key,))
                if not isinstance(value, _NESTED[key]):
                    raise ValueError(f"{path}: {'.'.join(trail + (key,))} names a {type(value).__name__}")
            args[key] = value
        fit: Fit = cls(**args)
        return fit

    def named(name: str, trail: tuple[str, ...]) -> Fit:
        if name not in built:
            if name not in entries:
                raise ValueError(f"{path}: {'.'.join(trail)} names {name!r}, which is not an entry")
            if name in trail:
                raise ValueError(f"{path}: {name} refers to itself")
            entry = entries[name]
            built[name] = build(RegimeTerms if entry.get("kind") == "regime" else Calibration, entry["values"],
                                trail + (name,))
        return built[name]

    for name in entries:
        named(name, ())
    return built


def served(use: str, path: Path = DATA_FILE) -> dict[str, str]:
    """The entries the data file says serve ``use`` ("faq" or "passage"), by the embedder whose vectors they read."""
    entries = json.loads(Path(path).read_text(encoding="utf-8"))["fits"]
    return {e["embedder"]: name for name, e in entries.items() if e.get("use") == use}


def save(name: str, fit: Fit, *, fitted_by: str, use: str | None = None, embedder: str | None = None,
         path: Path = DATA_FILE) -> None:
    """Write ``fit`` as the entry ``name`` of the data file (what a fit script's ``--write`` does).

    Only the numbers a fit makes are its own: a nested fit it leaves None (``passages``, ``lexical``, ``sparse``,
    ``regime``) keeps the entry's current one; one it gives replaces the entry's, and where that is another entry
    by name (``CALIBRATION``'s ``passages`` is ``PASSAGES``), that entry is rewritten; any other nested fit equal to
    an entry is written as that entry's name.  The file is read back before it is replaced, so a fit that would not load is never written."""
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    entries = document["fits"]
    others = {n: f for n, f in load(path).items() if n != name}

    def values(obj: Fit, old: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.name in _NESTED and value is None and old.get(f.name) is not None:
                out[f.name] = old[f.name]
            elif f.name in _NESTED and isinstance(old.get(f.name), str):  # a part with an entry of its own: refitted
                part = entries[old[f.name]]
                part["values"] = values(value, part["values"])
                out[f.name] = old[f.name]
            elif f.name in _NESTED and value is not None:
                same = [n for n, o in others.items() if o == value]
                out[f.name] = same[0] if same else values(value, {})
            elif value != f.default:
                out[f.name] = value
        return out

    entry: dict[str, Any] = {"fitted_by": fitted_by}
    if isinstance(fit, RegimeTerms):
        entry["kind"] = "regime"
    if use is not None:
        entry["use"], entry["embedder"] = use, embedder
    entry["values"] = values(fit, entries.get(name, {}).get("values", {}))
    entries[name] = entry
    text = json.dumps(document, indent=1, ensure_ascii=False) + "\n"
    trial = Path(path).with_suffix(".json.new")
    trial.write_text(text, encoding="utf-8")
    try:
        load(trial)
    except Exception:
        trial.unlink()
        raise
    trial.replace(path)


def entry_for(use: str, embedder: str, path: Path = DATA_FILE) -> str:
    """The name of the entry that serves ``use`` for ``embedder``: the existing one, else a new name."""
    return served(use, path).get(embedder) or f"{use.upper()}:{embedder}"


_FITS = load()


def _calibration(name: str) -> Calibration:
    fit = _FITS[name]
    assert isinstance(fit, Calibration), name
    return fit


def _regime(name: str) -> RegimeTerms:
    fit = _FITS[name]
    assert isinstance(fit, RegimeTerms), name
    return fit


# -- what each entry was fitted on ----------------------------------------------------------------------------------
# Passages (SciFact train claims): text cosine, text coverage and text BM25.
PASSAGES = _calibration("PASSAGES")
# For the share of a question the embedder cannot read (``rank``'s ``reads_cjk``): the same fits
# with the keyword features alone (``scripts/fit_ranker.py --lexical``, the same development data).
LEXICAL = _calibration("LEXICAL")
# A KB of QnAs the adaptation does not reach (one question per QnA, as FAQ pages are): scripts/fit_regimes.py, a
# softmax over each question's records fitted on the dev splits of ``make eval``'s one-question regime only: FAQ
# pages with real answers (covid-q, covid-qsim-deepset, the three chit-chat KBs cut to one question; each KB weighing
# the same).  The intent sets with intent names for answers and XQuAD's FAQ, whose questions were written from the
# answer, are not fitted on (issue 38: they taught the previous fit to read answers more than real FAQ pages
# reward).  Dense alone over question and answer (``w_dmax``) carries most of it; the answer's features are read
# again in proportion to the KB's answer informativeness (``ranker.answer_informativeness``), which lets the same
# weights read chit-chat by its questions and paragraphs by their text (XQuAD's FAQ, never fitted on: dev top-1
# 0.917 against 0.819 without the informativeness terms).
SPARSE = _calibration("SPARSE")
# The last step on every KB, one scale across kinds of KB (``regime``): scripts/fit_regimes.py on the dev splits of
# the regimes of ``make eval`` that are fitted on (many questions, one question, XQuAD's FAQ, documents, tiny; not
# the intent sets with intent names for answers; each regime weighs the same; the many-question KBs count both
# adapted and as a KB that cannot adapt ranks them).  Its output is the probability that the top answer is right,
# less ``shift`` (0.75 logit units), so that 0.5 stands where that probability is 0.68 (see scripts/fit_regimes.py
# for the choice).  An FAQ page's logit and gap have weights of their own, as an adapted KB's do: its logits come
# from ``SPARSE``.
REGIME = _regime("REGIME")
# all-MiniLM-L6-v2, the bundled model: scripts/fit_ranker.py, a softmax over each question's records fitted on
# development questions only (banking77 training utterances not in the KB, hwu64's validation split, chit-chat
# questions the evaluation indexes); it names PASSAGES, LEXICAL, REGIME and SPARSE as its parts.  It also serves the
# same model with int8 weights (OPENQNA_EMBEDDER=fast, ``calibration_for``'s fallback), not refitted: on ``make
# eval``'s regimes its precision at 0.5 moved by -0.8 to +2.9 points against fp32's (docs/confidence.md).
CALIBRATION = _calibration("CALIBRATION")
# The fits above read all-MiniLM-L6-v2's vectors.  Another model's cosines are spread differently (its KBs'
# typical right-answer logit is 16.3 against MiniLM's 21.9), so the accurate model, all-mpnet-base-v2, has the
# same fits of its own, made by ``OPENQNA_EMBEDDER=mpnet python scripts/fit_ranker.py`` on the same development
# data.  The lexical part reads keywords only and is shared.  Its FAQ-page weights and last step (``MPNET_SPARSE``,
# ``MPNET_REGIME``) are its own too, by ``OPENQNA_EMBEDDER=mpnet python scripts/fit_regimes.py --write``.
MPNET_CALIBRATION = _calibration("MPNET_CALIBRATION")
# OPENQNA_EMBEDDER=accurate (mpnet beside the universal sentence encoder, ``embedder.HybridEncoder``): its own
# fits, by ``OPENQNA_EMBEDDER=accurate python scripts/fit_ranker.py`` on the same development data; and its own
# FAQ-page weights and last step (``ACCURATE_SPARSE``, ``ACCURATE_REGIME``), by ``OPENQNA_EMBEDDER=accurate python
# scripts/fit_regimes.py --write``, the default's recipe and shift on the same dev splits.  Without them, its 0.5
# answered 71% of covid-q's off-topic questions (docs/confidence.md, "Every kind of knowledge base, per model").
ACCURATE_CALIBRATION = _calibration("ACCURATE_CALIBRATION")
# OPENQNA_EMBEDDER=balanced (MiniLM beside the universal sentence encoder): its own fits, by
# ``OPENQNA_EMBEDDER=balanced python scripts/fit_ranker.py --write`` on the same development data, and FAQ-page weights
# and a last step of its own (``BALANCED_SPARSE``, ``BALANCED_REGIME``) as the accurate model's are made.
BALANCED_CALIBRATION = _calibration("BALANCED_CALIBRATION")
# Questions with Chinese, Japanese or Korean text ranked in the multilingual space (``openqna.ranking.multilingual``):
# multilingual-e5-small's cosines and the keyword features together, fitted by scripts/fit_multilingual.py
# on the dev splits of ``make eval``'s CJK knowledge bases (XQuAD-zh and JSQuAD as paragraphs and as FAQs) and 400
# patients' questions of covid-qsim-tianchi-zh's train split (make eval asks its dev split): 2,392 in-scope questions
# for the weights, a softmax over each question's records; then the last step, a logistic regression of "the top
# answer is right" with the off-topic ones: dev precision 0.917 and recall 0.945 at 0.5.
# The question mean and centroid have no weight: the dev FAQs have one question per QnA.  Those FAQs' questions were
# written from the paragraph, so the weights read the answer; an FAQ page (one question per QnA, no passages) is
# read with MULTILINGUAL's ``sparse`` part instead, MULTILINGUAL_SPARSE: scripts/fit_multilingual.py --faq, the
# English FAQ-page weights' columns fitted on the dev splits of make eval's English FAQ pages with real answers
# ranked in the space (``evaluation.space_faq``; tianchi's entries have no answers, so it is not an FAQ page), scaled
# onto MULTILINGUAL's last step with 0.5 where the English FAQ pages' stands; it hands a page whose answers say as
# much as those paragraphs (``ranker.handover_share``) or whose questions read as headings (``heading_handover``)
# back to MULTILINGUAL's own weights, so XQuAD-zh's and JSQuAD's KBs rank as before.
MULTILINGUAL = _calibration("MULTILINGUAL")
# The same space when a CJK question is asked of a KB whose records are mostly not CJK (``multilingual.crosses``: an
# English KB given the space with ``OPENQNA_MULTILINGUAL=on``, or the other way round), ranked on E5's vectors beside
# the universal sentence encoder's (``MemIndex.crossing``: the mean of the two models' cosines): the same terms fitted
# by ``scripts/fit_multilingual.py --cross`` on XQuAD's English paragraphs and FAQ KBs asked XQuAD's Chinese questions
# and its Chinese ones asked the English questions (dev splits, 1,578 in-scope questions for the weights), its last
# step less 0.75 as the FAQ one's (dev top-1 0.831, precision 0.888, recall 0.731 at 0.5; on E5's cosines alone,
# CROSSLINGUAL_E5 below: 0.76, 0.863 and 0.653).
# Read with MULTILINGUAL instead, whose weights lean on the words a question shares with a record (none here but
# names and numbers), a right cross-lingual answer came out below 0.5 nearly always.
CROSSLINGUAL = _calibration("CROSSLINGUAL")
# CROSSLINGUAL as it was fitted on E5's cosines alone: a question crossing languages of a KB whose records lack the
# universal sentence encoder's vectors (written before they joined E5's; ``MemIndex.crossing``) is ranked on E5's
# and read with it.  CROSSLINGUAL itself is refitted on ``crossing()``'s cosines, the two models' mean.
CROSSLINGUAL_E5 = _calibration("CROSSLINGUAL_E5")
# CROSSLINGUAL for a question ranked by the stored questions alone (``rankerType: QuestionOnly``): the question's
# cosine and coverage fitted alone on the same FAQ KBs and dev questions (``scripts/fit_multilingual.py --cross
# --questions``; dev top-1 0.444, precision 0.812 and recall 0.307 at 0.5, on KBs whose one stored question asks
# something else about the paragraph than the question asked).  CROSSLINGUAL with its answer terms dropped, as
# ``logit(question_only=True)`` drops them, left every answer below 0.5: it weighs the answer's cosine 37.2, the
# question's 6.3.
CROSSLINGUAL_QUESTIONS = _calibration("CROSSLINGUAL_QUESTIONS")
_FITTED = {embedder: _calibration(name) for embedder, name in served("faq").items()}


def calibration_for(embedder: str) -> Calibration:
    """The shipped calibration for vectors of the embedder named ``embedder`` (MiniLM's for any model not fitted).

    A model with int8 weights is read as the fp32 model it was quantized from (``accurate-fast`` as ``accurate``;
    ``fast`` as MiniLM): its vectors stay at cos 0.99 of that model's on average (docs/confidence.md)."""
    return _FITTED.get(embedder) or _FITTED.get(quantized_from(embedder), CALIBRATION)


def quantized_from(embedder: str) -> str:
    """The name of the fp32 model whose int8 weights the embedder named ``embedder`` runs (else that name)."""
    return embedder.replace("/onnx-int8", "/onnx-fp32")


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
# ``lexical``: the same fit on coverage alone, for questions the embedder cannot read (ranker.rank's ``reads_cjk``).
PASSAGE_CALIBRATION = _calibration("PASSAGE_CALIBRATION")
# The same fit on all-mpnet-base-v2's vectors (OPENQNA_EMBEDDER=mpnet scripts/fit_passage_calibration.py, the
# same data and pairs: 6,046, 0.953 accuracy at 0.5).
MPNET_PASSAGE_CALIBRATION = _calibration("MPNET_PASSAGE_CALIBRATION")
# And on the accurate model's (OPENQNA_EMBEDDER=accurate: mpnet beside the universal sentence encoder), the same
# data and pairs: 6,046, 0.952 accuracy at 0.5.
ACCURATE_PASSAGE_CALIBRATION = _calibration("ACCURATE_PASSAGE_CALIBRATION")
_PASSAGE_CALIBRATIONS = {embedder: _calibration(name) for embedder, name in served("passage").items()}


def passage_calibration(embedder: str) -> Calibration:
    """How a vector store scores chunks embedded by ``embedder`` (MiniLM's fit for any model not fitted)."""
    return _PASSAGE_CALIBRATIONS.get(embedder) or _PASSAGE_CALIBRATIONS.get(quantized_from(embedder),
                                                                            PASSAGE_CALIBRATION)


# -- Azure :query-text (``Service.answer_from_text``): ad-hoc passages ------------------------------
# A passage's cosine with the question and the share of the question's words it holds, fitted by
# scripts/fit_query_text.py on XQuAD's English dev paragraphs (576 questions, each asked of five records,
# 7,704 passages; right: the passage holds the answer; MiniLM's vectors, used for every model): precision 0.80
# and recall 0.69 at 0.5.  ``lexical``: the same fit on the word share alone.
QUERY_TEXT = _calibration("QUERY_TEXT")
