"""A project's own near-topic share (``kb/near_topic_setting.py``): the real model, real SQLite stores.

The sample KB (14 QnAs, 25 held-out alternate questions) and its 40 questions about openqna that it does not answer
(``evaluation/questions/sample-kb-near.tsv``): at a share of 0.2 it answers 14 of them at 0.5 instead of 25.
"""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import pytest

from openqna.formats import read_file
from openqna.kb import near_topic_setting
from openqna.kb.near_topic_effect import effect
from openqna.kb.service import AskRequest
from openqna.ranking import adapt, ranker
from openqna.records import InvalidArgument, QnA

SAMPLE = Path(str(resources.files("openqna") / "samples" / "openqna-faq.tsv"))
NEAR_FILE = Path(str(resources.files("openqna") / "evaluation" / "questions" / "sample-kb-near.tsv"))
NEAR = [row["question"] for row in csv.DictReader(NEAR_FILE.open(encoding="utf-8"), delimiter="\t")]


def _confidences(service, project, deployment="test"):
    return [service.ask(project, deployment, AskRequest(question=q, top=1))[0].confidence for q in NEAR]


def _answered(confidences):
    return sum(c >= 0.5 for c in confidences)


@pytest.fixture
def two(service, monkeypatch):
    """Two projects of the same sample KB on one service, no server-wide share."""
    monkeypatch.delenv("OPENQNA_NEAR_TOPIC", raising=False)
    for name in ("alpha", "beta"):
        service.import_content(name, read_file(SAMPLE))
    return service


def test_a_projects_share_lowers_its_confidences_and_no_other_projects(two):
    service = two
    service.deploy("alpha", "production")
    before = {name: _confidences(service, name) for name in ("alpha", "beta")}
    assert before["alpha"] == before["beta"] and _answered(before["alpha"]) == 25
    near_topic_setting.save(service, "alpha", 0.2)
    alpha, beta = _confidences(service, "alpha"), _confidences(service, "beta")
    assert beta == before["beta"]  # the other project of the server is left as it was
    assert all(a <= b + 1e-9 for a, b in zip(alpha, before["alpha"])) and _answered(alpha) == 14
    # kept in the project's settings as a fitted calibration is: a deployment reads it at once, no redeploy
    assert _confidences(service, "alpha", "production") == alpha
    said = effect(service, "alpha")
    assert (said.project, said.server, said.share, said.adapted, said.held_out) == (0.2, None, 0.2, True, 25)
    assert said.near_rate > said.near_rate_after == pytest.approx(0.2) and 0 < said.margin <= adapt.NEAR_MAX
    near_topic_setting.save(service, "alpha", None)  # default: the server's (off) again
    assert _confidences(service, "alpha") == before["alpha"]


def test_off_on_a_project_overrides_the_servers_share(two, monkeypatch):
    service = two
    unset = _confidences(service, "alpha")
    monkeypatch.setenv("OPENQNA_NEAR_TOPIC", "0.2")
    near_topic_setting.save(service, "alpha", "off")
    assert _confidences(service, "alpha") == unset
    assert _answered(_confidences(service, "beta")) == 14  # beta follows the server
    said = effect(service, "alpha")
    assert (said.project, said.server, said.share, said.adapted) == ("off", 0.2, None, True)
    assert said.near_rate == said.near_rate_after == effect(service, "beta").near_rate  # measured, no margin
    assert said.margin == 0.0


def test_a_project_with_a_fitted_calibration_reads_its_own_margin(two):
    """The margin is read through the project's last step, so ``openqna calibrate`` ranking with the logit itself
    (and a fitted scale) must not leave the served questions a margin fitted for another scale."""
    service = two
    near_topic_setting.save(service, "alpha", 0.2)
    proj = service.project("alpha")
    proj.settings["calibration"] = {"scale": 0.5, "shift": -1.0}
    service.store.update_project(proj)
    index = service.indexes.get("alpha")
    from dataclasses import replace

    from openqna.ranking.calibrations import rescaled

    logit_itself = replace(rescaled(service.shipped_calibration, 1.0, 0.0), near_topic=0.2)
    first = ranker.kb_adaptation(index, logit_itself)
    served = ranker.kb_adaptation(index, service.calibration(service.project("alpha")))
    assert served is not first and served.near_rate_after <= 0.2 + 1e-9


def test_a_cjk_kbs_questions_carry_the_projects_share_into_the_multilingual_space(service):
    from test_cjk import ZH

    service.create_project("zh")
    service.upsert("zh", [QnA(list(q), a) for q, a in ZH])
    near_topic_setting.save(service, "zh", 0.1)
    index = service.indexes.get("zh")
    space = service.query_space(index, "充电要多久才能充满", project="zh")
    assert space.multilingual and space.calibration.near_topic == 0.1
    said = effect(service, "zh")
    assert said.share == 0.1 and not said.adapted and "multilingual space" in said.why
    assert service.ask("zh", "test", AskRequest(question="充电要多久才能充满", top=1))[0].qna is not None


@pytest.mark.parametrize("value, expected", [(0.1, 0.1), ("0.25", 0.25), (0, 0.0), (1, 1.0), ("off", "off"),
                                             (" OFF ", "off"), ("default", None), (None, None)])
def test_a_share_off_or_default_is_read(value, expected):
    assert near_topic_setting.parse(value) == expected


@pytest.mark.parametrize("value", [1.5, -0.1, "lots", "", True, float("nan"), float("inf"), [0.1], {"share": 0.1}])
def test_anything_else_is_refused_naming_the_field_and_the_range(value):
    with pytest.raises(InvalidArgument, match=r"'nearTopic' must be a share from 0 to 1 \(such as 0.1\), \"off\""):
        near_topic_setting.parse(value)
