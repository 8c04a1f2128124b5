"""``openqna calibrate``: re-fit a project's confidence on its own development questions.

The shipped ``Calibration`` turns features into a logit and then rescales it (``scale``,
``shift``, a Platt fit) so that the top answer's confidence reads as the chance it is right.
That reading was fitted on banking77/hwu64; a project's own questions may read differently.
Given (question, expected QnA id or ``none``) pairs, this re-fits ``scale`` and ``shift`` on
whether each question's top answer is right (an off-topic question's top answer never is),
by Newton's method with a Gaussian prior centred on the shipped values, so a few dozen
questions nudge them and many questions decide them.  Rescaling never changes the ranking,
only where the threshold cuts.  The fit is kept in the project's settings (``calibration``),
which ``Service.calibration`` reads on every query.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from openqna.kb.service import AskRequest, Service
from openqna.ranking.calibrations import CALIBRATION, Calibration, rescaled
from openqna.records import InvalidArgument, utf8_text
from openqna.store.base import LIVE

PRIOR_WEIGHT = 2.0  # the prior counts like this many questions on each parameter
MIN_QUESTIONS = 10
FOLDS = 5


@dataclass
class Pair:
    question: str
    expected: int | None  # None: off-topic, the default answer is right


@dataclass
class Point:
    logit: float  # the top answer's logit before the Platt rescaling (inf for an exact match)
    right: bool  # the top answer is the expected QnA
    off_topic: bool


@dataclass
class Scores:
    in_scope: float  # share of in-scope questions answered with the expected QnA at the threshold
    off_topic: float  # share of off-topic questions that get the default answer at the threshold
    questions: int


def read_pairs(path: Path) -> list[Pair]:
    """Rows of ``question<TAB>qna id`` (or comma-separated); ``none`` marks an off-topic question.

    A first row whose second cell is not a number or ``none`` is taken as a header.
    """
    return parse_pairs(utf8_text(path.name, path.read_bytes()), path.name)


def parse_pairs(text: str, name: str) -> list[Pair]:
    """``read_pairs`` on a file's text (an upload); ``name`` is how messages call it."""
    text = text.lstrip("\ufeff")
    dialect = "excel-tab" if "\t" in text.split("\n", 1)[0] else "excel"
    pairs: list[Pair] = []
    for line, row in enumerate(csv.reader(text.splitlines(), dialect=dialect), start=1):
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) < 2 or not row[0].strip():
            raise InvalidArgument(f"{name} line {line}: expected 'question<TAB>qna id or none'.")
        question, expected = row[0].strip(), row[1].strip().lower()
        if expected == "none":
            pairs.append(Pair(question, None))
        elif expected.lstrip("-").isdigit():
            pairs.append(Pair(question, int(expected)))
        elif line == 1 and not pairs:
            continue  # header
        else:
            raise InvalidArgument(f"{name} line {line}: '{row[1]}' is neither a QnA id nor 'none'.")
    return pairs


# Reads points ``collect`` took with a calibration as they were served: their logit is the served confidence's.
AS_SERVED = replace(CALIBRATION, scale=1.0, shift=0.0)


def collect(service: Service, project: str, pairs: list[Pair], deployment: str = LIVE,
            calibration: Calibration | None = None) -> list[Point]:
    """Each question's top answer as ``ask`` ranks it, with its logit before rescaling (what ``fit`` fits); or, with
    ``calibration``, as a project with that calibration is served (its logit that of the confidence the server
    gives, read with ``AS_SERVED``: the shipped calibration's last step, ``ranking.regime``, is no affine map of the
    logit before rescaling, so the figures "before" a project's first fit are read this way)."""
    index = service.indexes.get(project, deployment)
    known = set(int(i) for i in index.ids)
    missing = sorted({p.expected for p in pairs if p.expected is not None and p.expected not in known})
    if missing:
        raise InvalidArgument(f"Project '{project}' ({deployment}) has no QnA with id {missing[0]}"
                              + (f" (nor {len(missing) - 1} other ids)." if len(missing) > 1 else "."))
    if calibration is None:  # the logit itself, lexical part alike, read with the project's near-topic margin
        calibration = replace(rescaled(service.shipped_calibration, 1.0, 0.0),
                              near_topic=service.calibration(service.store.get_project(project)).near_topic)
    points = []
    for p in pairs:
        ranked, _ = service.rank(project, deployment, index, AskRequest(question=p.question, top=1),
                                 calibration=calibration)
        if not ranked:
            points.append(Point(-math.inf, False, p.expected is None))
            continue
        top = ranked[0]
        c = min(max(top.confidence, 1e-12), 1.0)
        logit = math.inf if c >= 1.0 else math.log(c / (1.0 - c))
        points.append(Point(logit, p.expected is not None and top.record_id == p.expected, p.expected is None))
    return points


def confidence(point: Point, calibration: Calibration) -> float:
    if math.isinf(point.logit):
        return 1.0 if point.logit > 0 else 0.0
    return 1.0 / (1.0 + math.exp(-(calibration.scale * point.logit + calibration.shift)))


def score(points: list[Point], calibration: Calibration, threshold: float) -> Scores:
    in_scope = [p for p in points if not p.off_topic]
    off = [p for p in points if p.off_topic]
    answered = [p.right and confidence(p, calibration) >= threshold for p in in_scope]
    rejected = [confidence(p, calibration) < threshold for p in off]
    return Scores(float(np.mean(answered)) if answered else float("nan"),
                  float(np.mean(rejected)) if rejected else float("nan"), len(points))


def fit(points: list[Point], base: Calibration = CALIBRATION) -> Calibration:
    """``scale`` and ``shift`` that make the top answer's confidence its chance of being right."""
    usable = [p for p in points if not math.isinf(p.logit)]
    x = np.asarray([p.logit for p in usable], np.float64)
    y = np.asarray([p.right for p in usable], np.float64)
    prior = np.asarray([base.scale, base.shift])
    X = np.stack([x, np.ones_like(x)], axis=1)

    def loss(w: np.ndarray) -> float:  # negative log-likelihood plus the Gaussian prior
        z = X @ w
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + PRIOR_WEIGHT / 2 * np.sum((w - prior) ** 2))

    w = prior.copy()
    for _ in range(100):  # Newton's method, halving a step that does not lower the loss
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        gradient = X.T @ (p - y) + PRIOR_WEIGHT * (w - prior)
        hessian = (X * (p * (1 - p))[:, None]).T @ X + PRIOR_WEIGHT * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        current = loss(w)
        while loss(w - step) > current and np.abs(step).max() > 1e-12:
            step /= 2
        w = w - step
        if np.abs(step).max() < 1e-9:
            break
    return replace(base, scale=round(float(w[0]), 4), shift=round(float(w[1]), 4))


def cross_validated(points: list[Point], threshold: float, base: Calibration = CALIBRATION) -> Scores:
    """Scores of fits that never saw the questions they are scored on (``FOLDS`` interleaved folds)."""
    hits_in: list[bool] = []
    hits_off: list[bool] = []
    for k in range(FOLDS):
        held = points[k::FOLDS]
        trained = fit([p for i, p in enumerate(points) if i % FOLDS != k], base)
        for p in held:
            c = confidence(p, trained)
            (hits_off if p.off_topic else hits_in).append(c < threshold if p.off_topic else p.right and c >= threshold)
    return Scores(float(np.mean(hits_in)) if hits_in else float("nan"),
                  float(np.mean(hits_off)) if hits_off else float("nan"), len(points))


def check(points: list[Point]) -> None:
    if len(points) < MIN_QUESTIONS:
        raise InvalidArgument(f"{len(points)} questions are too few to calibrate on; give at least {MIN_QUESTIONS}.")
    labels = {p.right for p in points if not math.isinf(p.logit)}
    if labels != {True, False}:
        raise InvalidArgument("Calibration needs questions whose top answer is right and questions whose top answer "
                              "is wrong or off-topic ('none'); these are all one kind.")


def save(service: Service, project: str, calibration: Calibration | None) -> None:
    """Keep ``calibration``'s scale and shift in the project's settings (None: back to the shipped one)."""
    proj = service.store.get_project(project)
    if calibration is None:
        proj.settings.pop("calibration", None)
    else:
        proj.settings["calibration"] = {"scale": calibration.scale, "shift": calibration.shift}
    service.store.update_project(proj)


CURVE_STEPS = 20  # the accuracy/rejection curve is read at thresholds 0, 0.05, ..., 1


def curve(points: list[Point], calibration: Calibration) -> list[dict[str, float | None]]:
    """In-scope answered right and off-topic rejected at each threshold: what a threshold buys and costs."""
    out: list[dict[str, float | None]] = []
    for i in range(CURVE_STEPS + 1):
        t = i / CURVE_STEPS
        s = score(points, calibration, t)
        out.append({"threshold": round(t, 2), "answered": round(s.in_scope, 4) if s.in_scope == s.in_scope else None,
                    "rejected": round(s.off_topic, 4) if s.off_topic == s.off_topic else None})
    return out  # None where there are no questions of that kind
