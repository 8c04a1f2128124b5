"""A project's near-topic share: ``OPENQNA_NEAR_TOPIC`` chosen per knowledge base.

``OPENQNA_NEAR_TOPIC`` trades right answers at 0.5 for fewer answers to questions on a KB's subject that it holds
no answer for (``ranking/adapt.py``'s ``near_margin``; docs/confidence.md has both, measured).  Whether that trade
is worth it is a question about each bot, not about the server, so a project may choose for itself: a share from 0
to 1, or ``off``; a project that has not chosen follows the server.  The choice is kept in the project's settings
(``nearTopic``), as ``openqna calibrate``'s fit is, so it applies at once to ``test`` and every deployment, on every
server process sharing the store; ``ServiceBase.calibration`` puts it in the calibration the project's questions
are ranked with, in either vector space, and the adaptation is fitted for that share on first use.
``kb/near_topic_effect.py`` measures what the share in force does on a KB.
"""

from __future__ import annotations

from typing import Any, Literal

from openqna.kb.catalog import Catalog
from openqna.ranking.calibrations import NearTopic
from openqna.records import InvalidArgument
from openqna.store import Project

SETTINGS_KEY = "nearTopic"
OFF: Literal["off"] = "off"
DEFAULT = "default"  # the word for "the server's": the setting removed from the project


def parse(value: Any, name: str = SETTINGS_KEY) -> NearTopic:
    """A share from 0 to 1 (a number, or a string of one), ``off``, or ``default``/None (the server's); anything
    else is refused with a message that names ``name`` (the field, or the CLI option) and the range."""
    if value is None:
        return None
    if isinstance(value, str):
        word = value.strip().lower()
        if word == DEFAULT:
            return None
        if word == OFF:
            return OFF
        try:
            value = float(word)
        except ValueError:
            pass
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0:  # NaN fails too
        return float(value)
    raise InvalidArgument(f"'{name}' must be a share from 0 to 1 (such as 0.1), \"{OFF}\", or \"{DEFAULT}\" (the "
                          f"server's OPENQNA_NEAR_TOPIC); got {value!r}.", target=name)


def of(project: Project) -> NearTopic:
    """The project's own choice (None: it follows the server); read with each question, so kept cheap."""
    value = project.settings.get(SETTINGS_KEY)
    if value is None or value == OFF:
        return value
    return float(value)


def save(catalog: Catalog, project: str, value: NearTopic) -> None:
    """Keep ``value`` (a ``parse``d one) in the project's settings; None removes it (the server's again)."""
    proj = catalog.project(project)
    if value is None:
        proj.settings.pop(SETTINGS_KEY, None)
    else:
        proj.settings[SETTINGS_KEY] = value
    catalog.store.update_project(proj)
