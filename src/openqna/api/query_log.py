"""Logging an answered question from a runtime route, for the project's opt-in analytics (``openqna.query_log``)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool

from ..query_log import QueryLog
from ..service import Answer


async def log_answer(log: QueryLog, project: str, deployment: str, question: str, user_id: Any,
                     answers: list[Answer]) -> None:
    """Log the question and the answer given first (-1: the default answer); a no-op unless the project opted in."""
    best = answers[0] if answers else None
    qna_id = best.qna.id if best is not None and best.qna is not None and best.qna.id is not None else -1
    confidence = best.confidence if best is not None and best.qna is not None else 0.0
    await run_in_threadpool(log.record, project, deployment, question, user_id if isinstance(user_id, str) else "",
                            qna_id, confidence)
