"""Asking from a runtime route and logging the question for the project's opt-in analytics (``openqna.kb.query_log``).

Both happen in one call on the query pool: the log's check of the project's setting costs no extra
thread hop and no second read of the project (the one the question was asked with), and nothing at all is
written unless the project opted in.
"""

from __future__ import annotations

from typing import Any

from openqna.api.concurrency import run_query
from openqna.kb.catalog import LIVE
from openqna.kb.query_log import QueryLog
from openqna.kb.service import Answer, AskRequest, Service


def _ask_and_log(service: Service, log: QueryLog, project: str, deployment: str, req: AskRequest,
                 user_id: Any) -> list[Answer]:
    if deployment.lower() == LIVE:  # "Test" is the live state, as a PUT of it and the query log take it
        deployment = LIVE
    answers, proj = service.ask_in(project, deployment, req)
    if req.qna_id is None and req.question:
        best = answers[0].qna if answers else None
        qna_id = best.id if best is not None and best.id is not None else -1
        log.record(project, deployment, req.question, user_id if isinstance(user_id, str) else "", qna_id,
                   answers[0].confidence if qna_id != -1 else 0.0, settings=proj.settings)
    return answers


async def ask_and_log(service: Service, log: QueryLog, project: str, deployment: str, req: AskRequest,
                      user_id: Any) -> list[Answer]:
    """``service.ask`` on the query pool, then the question logged with the answer given first (-1: the
    default answer) when the project keeps a query log.  A question asked by QnA id (a prompt's button) is not."""
    return await run_query(_ask_and_log, service, log, project, deployment, req, user_id)
