"""``openqna calibrate PROJECT --near-topic SHARE|off|default|show``: a project's own ``OPENQNA_NEAR_TOPIC``.

It lives beside ``calibrate`` because both choose how a project's confidences read against the threshold and both
are kept in the project's settings, in force at once on every deployment (``kb/near_topic_setting.py``).
"""

from __future__ import annotations

import click

from openqna.kb import near_topic_setting as setting
from openqna.kb.near_topic_effect import effect
from openqna.kb.service import Service

SHOW = "show"


def set_near_topic(service: Service, project: str, value: str, deployment: str) -> None:
    """Keep the project's share (unless ``show``), then say what the share in force does on ``deployment``: a
    share makes no difference an owner can see until it is measured on the KB's own questions."""
    service.project(project)  # an unknown project is named before a bad value
    if value.strip().lower() != SHOW:
        setting.save(service, project, setting.parse(value, "--near-topic"))
    said = effect(service, project, deployment)
    own = "default (the server's)" if said.project is None else said.project
    server = setting.OFF if said.server is None else said.server
    click.echo(f"{project}: near-topic {own}; the server's OPENQNA_NEAR_TOPIC is {server}, so "
               f"{setting.OFF if said.share is None else said.share} is in force")
    if not said.adapted:
        click.echo(f"  no effect on {deployment}: {said.why}")
        return
    click.echo(f"  on {deployment}: of {said.held_out} held-out alternate questions, each asked without its own QnA, "
               f"{said.near_rate:.0%} get an answer at 0.5 without the margin"
               + (f", {said.near_rate_after:.0%} with it (confidences read {said.margin:g} logit units lower)"
                  if said.share is not None else "; off, no margin is added"))
