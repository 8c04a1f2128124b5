"""One confidence scale across the kinds of knowledge base (issue 22, DESIGN decision 4).

The ranker's calibrated logit was fitted where every QnA has many alternate questions, and a KB
with enough of them adapts itself to that scale (``adapt``).  A KB the adaptation cannot reach (one
question per QnA, document sections and passages: fewer than ``adapt.MIN_HELD_OUT`` alternate
questions) read the same logit too low: on ``make eval``'s one-question dev split 36% of right top
answers reached 0.5.  For those KBs this last step reads the logit together with what is known at
query time at no cost: how far a record stands above the best other candidate (a right answer
usually stands clear; the strongest term), whether it is a passage, and whether its questions read
as a heading or a statement rather than a question.  ``RegimeTerms`` is a logistic regression of
"the top answer is right" on these, fitted by scripts/fit_regimes.py on the dev splits of the
one-question and document regimes (each weighing the same), so the confidence of such a KB reads as
a probability that the answer is right.  Adapted KBs keep their own scale, fitted on their own
questions.

The gap term is increasing in a record's own logit and the other terms are constants of a record,
so the step moves confidences without reordering records of the same kind (passages, QnAs whose
questions read as headings, other QnAs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GAP_CLIP = 4.0  # a gap (in logit units) beyond this says nothing more


@dataclass(frozen=True)
class RegimeTerms:
    """Weights of the final logit (see the module docstring); the defaults leave the logit as it is."""

    w_logit: float = 1.0
    w_gap: float = 0.0
    w_passage: float = 0.0
    w_heading: float = 0.0  # a QnA whose questions do not read as questions (a document section's heading)
    bias: float = 0.0

    def logit(self, x: dict[str, np.ndarray]) -> np.ndarray:
        return (self.w_logit * x["logit"] + self.w_gap * x["gap"] + self.w_passage * x["passage"]
                + self.w_heading * x["heading"] + self.bias)


def gaps(logit: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Each candidate's logit minus the best other allowed candidate's, clipped to ±``GAP_CLIP``.

    A lone allowed candidate (a filter that leaves one record, say) has no rival to stand clear of:
    its gap is 0, no evidence either way, not the largest gap (which made a wrong answer that a filter
    left alone look sure of itself).
    """
    z = np.where(allowed, logit, -np.inf)
    if len(z) < 2 or allowed.sum() < 2:
        return np.zeros(len(z), np.float64)
    # the best and the runner-up, without sorting every candidate (the sort was a sixth of ranking at 10,000 QnAs)
    best = int(np.argmax(z))
    first = z[best]
    z[best] = -np.inf
    second = z.max()
    other = np.where(np.arange(len(z)) == best, second, first)
    return np.clip(np.where(allowed, logit - other, -GAP_CLIP), -GAP_CLIP, GAP_CLIP)


def inputs(logit: np.ndarray, allowed: np.ndarray, passage: np.ndarray, heading: np.ndarray) -> dict[str, np.ndarray]:
    """The terms' inputs for candidates with calibrated logits ``logit`` (one value per candidate)."""
    return {"logit": logit.astype(np.float64), "gap": gaps(logit, allowed), "passage": passage.astype(np.float64),
            "heading": (heading & ~passage).astype(np.float64)}


# First words of a question (exact-match keys are lower-cased words): a record none of whose questions
# starts with one of these reads as a heading or a statement ("Power and charging", "Tell me a joke").
QUESTION_WORDS = frozenset(
    "how what what's whats why when where who whom whose which can could do does did is are was were will would "
    "should shall may might must have has am i my any".split())


def heading_rows(exact: dict[str, list[int]], n: int, has_question: np.ndarray) -> np.ndarray:
    """Rows (of ``n``) with questions none of which starts with a question word (``exact``: key → rows)."""
    asks = np.zeros(n, dtype=bool)
    for key, rows in exact.items():
        if key.split(" ", 1)[0] in QUESTION_WORDS:
            asks[rows] = True
    return has_question & ~asks
