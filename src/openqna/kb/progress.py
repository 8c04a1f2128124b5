"""How far a running job has got, for whoever polls it (DESIGN decision 8: long work shows progress).

The work deep inside a job (``kb.writing`` embedding an import's texts) calls ``publish``; the job runner
(``kb.jobs``) has set where reports go for the job its thread runs, and keeps the last one for the job's status.
Outside a job ``publish`` does nothing, so the CLI and tests call the same code.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Progress:
    """``done`` of ``total`` units of the job's ``stage`` (``embedding``: texts, a QnA's questions and answer each
    one), for ``qnas`` QnAs and ``passages`` passages."""

    stage: str
    done: int
    total: int
    qnas: int
    passages: int


SINK: ContextVar[Callable[[Progress], None] | None] = ContextVar("openqna_job_progress", default=None)


def publish(progress: Progress) -> None:
    """Tell the poller of the job this thread runs how far it has got (nothing outside a job)."""
    sink = SINK.get()
    if sink is not None:
        sink(progress)
