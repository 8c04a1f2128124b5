"""One confidence scale across the kinds of knowledge base (issue 22, DESIGN decision 4).

The ranker's calibrated logit was fitted where every QnA has many alternate questions.  A KB with
enough of them adapts itself to that scale (``adapt``); a KB the adaptation cannot reach (one
question per QnA, document sections and passages) is ranked by its own feature weights
(``calibrations.SPARSE`` for FAQ pages, the shipped ones for documents).  Either way the logit read
alone meant different things on different kinds of KB: at 0.5, 84% of the many-question KBs' top
answers were right against 67% of the one-question KBs'.

This last step, applied to every KB, reads the logit together with what is known at query time at
no cost, and turns it into one scale:

* how far a record stands above the best other candidate (*gap*) and its share of the probability
  mass of all eligible candidates and of a rival that stands for "none of these" (*share*: its logit
  minus the log-sum-exp of theirs); a right answer usually stands clear of every rival, not only of the
  runner-up, and of "none of these";
* the record's kind: a passage, or a QnA whose questions read as a heading or a statement;
* the KB's kind: adapted or not, an FAQ page ranked by its own weights (``calibrations.SPARSE``) or not
  (with the logit and the gap read apart for each, whose logits are on scales of their own: on FAQ pages a
  right answer stands clear of the runner-up by less than on intent sets, so the same gap says more), and
  its size (log of its records: more rivals).

``RegimeTerms`` is a logistic regression of "the top answer is right" on these, fitted by
scripts/fit_regimes.py on the dev splits of every regime of ``make eval`` (many questions per QnA,
one question, documents, tiny KBs; each regime weighs the same), with the logit, gap and share
weights bounded at 0 so that a record's confidence never falls as its own logit rises.  Its output
is the probability that the top answer is right; ``shift`` moves it so that 0.5 stands where the
dev splits' answers at or above it are right about nine times in ten (the issue's target), the
same function on every kind of KB.

The gap and share terms are increasing in a record's own logit and the others are constants of a
record or of the KB, so the step moves confidences without reordering records of the same kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

GAP_CLIP = 4.0  # a gap (in logit units) beyond this says nothing more
# A filter (metadata, sources) restricts which records may answer, not what a confidence means: the records it leaves
# out still count as rivals (``RegimeTerms.of``'s ``outside``), each read this much lower (logit units), since the
# filter says the question is about what it keeps.  Chosen on the dev splits by scripts/filters_probe.py among none
# (the behaviour before: the kept records read as the whole KB), 0, 1 and 2 (make eval's "Filters" section): at 1 a
# filter that leaves the right answer out gets an answer at 0.5 less than half as often as with none, and one that
# keeps it still lifts it, with a higher precision; at 0 a filter lifts nothing (a filter keeping a covid-q question's
# answer: right at 0.5 0.25, as unfiltered, against 0.49 at 1).  Records that store a question a kept record stores
# are no rivals at any discount (``ranker.filtered_out``).
FILTERED_OUT = 1.0


@dataclass(frozen=True)
class RegimeTerms:
    """Weights of the final logit (see the module docstring); the defaults leave the logit as it is."""

    w_logit: float = 1.0
    w_gap: float = 0.0
    w_share: float = 0.0
    w_passage: float = 0.0
    w_heading: float = 0.0  # a QnA whose questions do not read as questions (a document section's heading)
    w_adapted: float = 0.0  # the KB is adapted (``adapt``): its logits are on its own scale ...
    w_adapted_logit: float = 0.0  # ... so its logit and gap get weights of their own, added to the above
    w_adapted_gap: float = 0.0
    w_faq_page: float = 0.0  # the KB is an FAQ page ranked by its own weights (``calibrations.SPARSE``) ...
    w_faq_page_logit: float = 0.0  # ... so its logit and gap get weights of their own too
    w_faq_page_gap: float = 0.0
    w_log_records: float = 0.0  # log of the KB's records
    bias: float = 0.0
    shift: float = 0.0  # subtracted last: where 0.5 stands on the fitted probability's logit
    rival: float | None = None  # the logit of "none of these", a rival every share counts (None: none)

    def logit(self, x: dict[str, np.ndarray]) -> np.ndarray:
        a, page = x["adapted"], x["faq_page"]
        out: np.ndarray = ((self.w_logit + self.w_adapted_logit * a + self.w_faq_page_logit * page) * x["logit"]
                           + (self.w_gap + self.w_adapted_gap * a + self.w_faq_page_gap * page) * x["gap"]
                           + self.w_share * x["share"] + self.w_passage * x["passage"] + self.w_heading * x["heading"]
                           + self.w_adapted * a + self.w_faq_page * page + self.w_log_records * x["log_records"]
                           + self.bias - self.shift)
        return out

    def of(self, logit: np.ndarray, allowed: np.ndarray, passage: np.ndarray, heading: np.ndarray, *,
           adapted: bool = False, faq_page: bool = False, records: int = 1,
           outside: np.ndarray | None = None) -> np.ndarray:
        """``self.logit(inputs(...))`` with the same arguments (and ``self.rival``), the same floats, in fewer passes.

        The terms that are constants of the KB (adapted, FAQ page, records) stay scalars instead of arrays of one
        value per candidate, so a query at 10,000 QnAs makes about half the passes over its candidates; each
        scalar is combined in the order ``logit`` combines the arrays, so every float comes out the same.
        """
        a, page = float(adapted), float(faq_page)
        passage_f = passage.astype(np.float64)
        out: np.ndarray = ((self.w_logit + self.w_adapted_logit * a + self.w_faq_page_logit * page)
                           * logit.astype(np.float64))
        beyond = filtered_out(logit, outside)
        gap = gaps(logit, allowed, None if beyond is None else float(beyond.max())).astype(np.float64)
        out += (self.w_gap + self.w_adapted_gap * a + self.w_faq_page_gap * page) * gap
        out += self.w_share * shares(logit, allowed, self.rival, beyond)
        out += self.w_passage * passage_f
        out += self.w_heading * (heading & ~passage).astype(np.float64)
        for constant in (self.w_adapted * a, self.w_faq_page * page,
                         self.w_log_records * float(np.log(max(records, 1))), self.bias):
            out += constant
        out -= self.shift
        return out


def filtered_out(logit: np.ndarray, outside: np.ndarray | None) -> np.ndarray | None:
    """The logits of the candidates a filter left out (``outside``), read ``FILTERED_OUT`` lower, as rivals of the
    ones it kept; None when it left none out."""
    if outside is None or not outside.any():
        return None
    beyond: np.ndarray = logit[outside].astype(np.float64) - FILTERED_OUT
    return beyond


def gaps(logit: np.ndarray, allowed: np.ndarray, beyond: float | None = None) -> np.ndarray:
    """Each candidate's logit minus the best other allowed candidate's (or ``beyond``, a rival that is no candidate:
    the best record a filter left out, read lower), clipped to ±``GAP_CLIP``.

    A lone allowed candidate (a filter that leaves one record, say) with no rival beyond has none to stand clear
    of: its gap is 0, no evidence either way, not the largest gap (which made a wrong answer that a filter left
    alone look sure of itself).
    """
    z = np.where(allowed, logit, -np.inf)
    rival = beyond is not None and np.isfinite(beyond)
    if not rival and (len(z) < 2 or allowed.sum() < 2):
        return np.zeros(len(z), np.float64)
    # the best and the runner-up, without sorting every candidate (the sort was a sixth of ranking at 10,000 QnAs)
    best = int(np.argmax(z))
    first = z[best]
    z[best] = -np.inf
    second = z.max()
    if rival:
        first, second = max(first, beyond), max(second, beyond)
    other = np.where(np.arange(len(z)) == best, second, first)
    return np.clip(np.where(allowed, logit - other, -GAP_CLIP), -GAP_CLIP, GAP_CLIP)


def shares(logit: np.ndarray, allowed: np.ndarray, rival: float | None = None,
           beyond: np.ndarray | None = None) -> np.ndarray:
    """Each candidate's logit minus the log-sum-exp of the allowed candidates', of ``rival`` and of ``beyond`` (the
    records a filter left out, read lower; ``gaps``) (≤ 0).

    ``rival`` is "none of these": without it a lone candidate (a filter that leaves one record) would hold all
    the mass however poorly it matches, and a question no record answers would still give its best record a
    large share of a little mass.
    """
    z = logit[allowed].astype(np.float64)
    if rival is not None:
        z = np.append(z, rival)
    if beyond is not None:
        z = np.concatenate([z, beyond[np.isfinite(beyond)]])
    if not len(z):
        return np.zeros(len(logit), np.float64)
    top = float(z.max())
    out: np.ndarray = logit.astype(np.float64) - (top + float(np.log(np.exp(z - top).sum())))
    return out


def inputs(logit: np.ndarray, allowed: np.ndarray, passage: np.ndarray, heading: np.ndarray, *,
           adapted: bool = False, faq_page: bool = False, records: int = 1, rival: float | None = None,
           outside: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The terms' inputs for candidates with calibrated logits ``logit`` (one value per candidate) of a KB of
    ``records`` records, ``adapted`` or not, an FAQ page ranked by its own weights or not (``rival``: see
    ``shares``; ``outside``: the candidates a filter left out, ``filtered_out``)."""
    n = len(logit)
    beyond = filtered_out(logit, outside)
    return {"logit": logit.astype(np.float64), "gap": gaps(logit, allowed, None if beyond is None else
                                                           float(beyond.max())),
            "share": shares(logit, allowed, rival, beyond),
            "passage": passage.astype(np.float64), "heading": (heading & ~passage).astype(np.float64),
            "adapted": np.full(n, float(adapted)), "faq_page": np.full(n, float(faq_page)),
            "log_records": np.full(n, float(np.log(max(records, 1))))}


# First words of a question (exact-match keys are lower-cased words): a record none of whose questions
# starts with one of these reads as a heading or a statement ("Power and charging", "Tell me a joke").
QUESTION_WORDS = frozenset(
    "how what what's whats why when where who whom whose which can could do does did is are was were will would "
    "should shall may might must have has am i my any".split())


# What makes a Chinese, Japanese or Korean text ask: an interrogative, a request ("教えて", "知りたい", "请问",
# "알려 주세요") or a sentence-final question ending (its question mark may be gone: ``exact_key`` drops punctuation).
CJK_ASKS = re.compile("何|なに|なん|どう|どこ|どれ|どの|どちら|どんな|いつ|誰|だれ|なぜ|いくら|教えて|知りたい|"
                      "什么|甚麼|怎么|怎麼|怎样|怎樣|如何|为什么|為什麼|哪|谁|多少|多久|几|幾|是否|能否|请问|請問|"
                      "想知道|想了解|무엇|뭐|뭘|어떻게|어떤|언제|어디|왜|누구|누가|얼마|몇|알려 ?주|궁금|"
                      "(?:か|かな|かね|吗|嗎|呢|么|麼|나요|까요|니까|가요|는지|인가|을까)$")


def key_asks(key: str) -> bool:
    """Whether a question's key (``exact_key``: lower case, no punctuation) asks: an English question word first
    (``QUESTION_WORDS``), or what ``CJK_ASKS`` finds."""
    return key.split(" ", 1)[0] in QUESTION_WORDS or CJK_ASKS.search(key) is not None


def heading_rows(exact: dict[str, list[int]], n: int, has_question: np.ndarray) -> np.ndarray:
    """Rows (of ``n``) with questions none of which starts with a question word (``exact``: key → rows)."""
    asks = np.zeros(n, dtype=bool)
    for key, rows in exact.items():
        if key.split(" ", 1)[0] in QUESTION_WORDS:
            asks[rows] = True
    return has_question & ~asks
