"""What a project's near-topic share does on its knowledge base, as the KB's own adaptation measures it.

The console's confidence page and ``GET /openqna/projects/{project}/near-topic`` show it to an owner choosing the
share (``kb/near_topic_setting.py``): of the KB's held-out alternate questions, each asked without the record it belongs
to, how many get an answer at 0.5 without the margin and with it; or, when the KB has no adaptation, why the setting
does nothing on it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from openqna import settings
from openqna.kb.near_topic_setting import DEFAULT, OFF, of
from openqna.kb.service import Service
from openqna.ranking import adapt, ranker
from openqna.ranking.calibrations import NearTopic
from openqna.ranking.multilingual import cjk_kb
from openqna.records import NotFound, ProjectNotFound
from openqna.store.base import LIVE


@dataclass
class Effect:
    """What the share in force does on one state of a knowledge base, as its adaptation measured it."""

    project: NearTopic  # the project's own choice (None: it follows the server)
    server: float | None  # the server's OPENQNA_NEAR_TOPIC (None: off)
    share: float | None  # the share in force (None: off)
    adapted: bool  # False: the KB has no adaptation, so the setting does nothing on it (``why``)
    held_out: int = 0  # the held-out alternate questions the rates are read on
    near_rate: float = 0.0  # their share answered at 0.5 or more without their own record, with no margin ...
    near_rate_after: float = 0.0  # ... and with the margin
    margin: float = 0.0  # logit units the confidences are read lower by
    why: str = ""
    multilingual: bool = False  # measured in the multilingual space (a KB of mostly CJK records)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nearTopic": DEFAULT if self.project is None else self.project,
                               "serverDefault": OFF if self.server is None else self.server,
                               "effective": OFF if self.share is None else self.share, "adapted": self.adapted,
                               "space": "multilingual" if self.multilingual else "default"}
        if self.adapted:
            out.update(heldOut=self.held_out, nearRate=round(self.near_rate, 4),
                       nearRateAfter=round(self.near_rate_after, 4), margin=self.margin)
        else:
            out["reason"] = self.why
        return out


MEASURE_SHARE = 1.0  # the share an ``off`` KB is measured at: it never adds a margin, and it reads the rate
CJK_QUESTION = "中"  # stands for any question in Chinese, Japanese or Korean: ``query_space`` picks the space by it


def effect(service: Service, project: str, deployment: str = LIVE) -> Effect:
    """What the share in force does on ``project``'s ``deployment``: how many of its held-out alternate questions,
    each asked without its own record, get an answer at 0.5 without the margin and with it, in the space the KB's
    own questions are ranked in (the multilingual one for a KB of mostly CJK records).  With the setting off the
    rate is still measured (at a share that never adds a margin, ``MEASURE_SHARE``), so an owner sees what turning
    it on would act on.  Fits the adaptation when the KB has not been asked yet (a second or two on a large one).
    """
    proj = service.store.get_project(project)
    try:
        index = service.indexes.get(project, deployment)
    except NotFound as exc:  # a deployment the project lacks: say which it has
        if isinstance(exc, ProjectNotFound):
            raise
        raise service.deployment_not_found(project, deployment) from None
    space = service.query_space(index, CJK_QUESTION if cjk_kb(index) else "", project=project, deployment=deployment)
    calibration = space.calibration
    share = ranker.near_share(calibration)
    found = Effect(of(proj), settings.near_topic(), share, adapted=False, multilingual=space.multilingual)
    if not settings.kb_adapt():
        found.why = "KB adaptation is turned off on this server (OPENQNA_KB_ADAPT=off), and the margin is part of it."
        return found
    if calibration.typical is None:  # the multilingual space's fits (``scripts/fit_multilingual.py``)
        found.why = ("This KB's questions are ranked in the multilingual space (its records are mostly Chinese, "
                     "Japanese or Korean), whose confidence does not adapt to a KB; the margin is part of that "
                     "adaptation, so the setting changes nothing on them." if space.multilingual else
                     "This server's ranker does not adapt to a KB, and the margin is part of that adaptation.")
        return found
    measured = calibration if share is not None else replace(calibration, near_topic=MEASURE_SHARE)
    adaptation = ranker.kb_adaptation(space.index, measured, space.adapter)
    if adaptation is None:
        found.why = (f"The knowledge base has too few alternate questions to adapt to (it needs {adapt.MIN_HELD_OUT} "
                     f"or more questions in QnAs that have two or more), or more than {adapt.MAX_UNITS} vectors, so "
                     "it reads the shipped scale and the setting changes nothing on it. Add alternate questions to "
                     "its QnAs to give it one.")
        return found
    found.adapted = True
    found.held_out, found.margin = adaptation.held_out, adaptation.margin
    found.near_rate, found.near_rate_after = adaptation.near_rate, adaptation.near_rate_after
    return found
