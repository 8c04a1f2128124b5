"""The opt-in query log behind a project's analytics: the loop that improves a knowledge base.

Azure answers these questions with Application Insights queries and QnA Maker had them in its
portal: which questions got the default answer, which answers were given with low confidence, and
what is asked most.  A project logs nothing until its owner turns the log on; then every question
asked of one of its deployments (not of ``test``, the live state authors try things on) is kept for
``retentionDays`` with the answer given and its confidence.  A user id is kept only as a keyed hash
(HMAC-SHA-256 with a random key of the project's), enough to count distinct users and never enough to
recover the id; turning the log off forgets it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from openqna.kb.side_writes import SideWrites
from openqna.records import InvalidArgument
from openqna.store import LoggedQuery, Store
from openqna.store.base import LIVE

SETTINGS_KEY = "queryLog"
DEFAULT_RETENTION_DAYS = 30
MAX_RETENTION_DAYS = 365
MAX_PERIOD_DAYS = 365
MAX_DOWNLOAD_ROWS = 100_000  # the newest queries of a period a download holds (``queries``)
PRUNE_EVERY_SECONDS = 3600.0  # old queries are deleted at most this often per project, on the write path


@dataclass(frozen=True)
class LogSettings:
    enabled: bool = False
    retention_days: int = DEFAULT_RETENTION_DAYS


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def question_key(question: str) -> str:
    """How a question is grouped: case, spacing and trailing punctuation do not make another question."""
    return re.sub(r"\s+", " ", question).strip().rstrip("?!.。？！ ").lower()


class QueryLog:
    def __init__(self, store: Store):
        self.store = store
        self._pruned: dict[str, float] = {}
        self._writes = SideWrites("question(s) not logged in a query log")

    def settings(self, project: str) -> LogSettings:
        raw = self.store.get_project(project).settings.get(SETTINGS_KEY) or {}
        return LogSettings(bool(raw.get("enabled")), int(raw.get("retentionDays", DEFAULT_RETENTION_DAYS)))

    def configure(self, project: str, *, enabled: bool, retention_days: int) -> LogSettings:
        """Turn the log on or off and set how long queries are kept; turning it off forgets every logged query."""
        if not 1 <= retention_days <= MAX_RETENTION_DAYS:
            raise InvalidArgument(f"'retentionDays' must be between 1 and {MAX_RETENTION_DAYS}; got {retention_days}.",
                                  target="retentionDays")
        proj = self.store.get_project(project)
        current = dict(proj.settings.get(SETTINGS_KEY) or {})
        current.update(enabled=enabled, retentionDays=retention_days)
        current.setdefault("salt", secrets.token_hex(16))
        if not enabled:
            self.store.delete_queries(project)
            current["salt"] = secrets.token_hex(16)  # hashes made before cannot be matched with later ones
        proj.settings[SETTINGS_KEY] = current
        self.store.update_project(proj)
        self._prune(project, retention_days, force=True)
        return LogSettings(enabled, retention_days)

    def record(self, project: str, deployment: str, question: str, user_id: str, qna_id: int,
               confidence: float, *, settings: dict[str, Any] | None = None) -> bool:
        """Log one question asked of ``deployment`` when the project has opted in; True when it was logged (False
        too when the store cannot be written: the entry is dropped, with a warning now and then, ``SideWrites``).
        ``settings``: the project's settings as just read (when the question was asked), else read here."""
        if deployment.lower() == LIVE or not question.strip():
            return False
        if settings is None:
            settings = self.store.get_project(project).settings
        raw: dict[str, Any] = settings.get(SETTINGS_KEY) or {}
        if not raw.get("enabled"):
            return False
        user_hash = hmac.new(str(raw["salt"]).encode(), user_id.encode(), hashlib.sha256).hexdigest()[:24] \
            if user_id else ""
        logged = LoggedQuery(_iso(datetime.now(UTC)), deployment, question.strip()[:1000], user_hash, qna_id,
                             round(confidence, 4))

        def write() -> None:
            self.store.log_queries(project, [logged])
            self._prune(project, int(raw.get("retentionDays", DEFAULT_RETENTION_DAYS)))

        return self._writes.attempt(write)  # a full or read-only store still answers: the entry is dropped

    def _prune(self, project: str, retention_days: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._pruned.get(project.lower(), -PRUNE_EVERY_SECONDS) < PRUNE_EVERY_SECONDS:
            return
        self._pruned[project.lower()] = now
        self.store.delete_queries(project, _iso(datetime.now(UTC) - timedelta(days=retention_days)))

    @staticmethod
    def period(days: int) -> tuple[datetime, datetime]:
        """The last ``days`` days, today included: from midnight UTC ``days - 1`` days ago until now."""
        if not 1 <= days <= MAX_PERIOD_DAYS:
            raise InvalidArgument(f"'days' must be between 1 and {MAX_PERIOD_DAYS}; got {days}.", target="days")
        until = datetime.now(UTC)
        return (until - timedelta(days=days - 1)).replace(hour=0, minute=0, second=0, microsecond=0), until

    def queries(self, project: str, *, days: int = 7) -> dict[str, Any]:
        """Every query logged over the last ``days``, oldest first, as a download for review holds them: the newest
        ``MAX_DOWNLOAD_ROWS`` when there are more (``truncated``); ``user`` is the keyed hash, never the id."""
        since, until = self.period(days)
        total = self.store.count_queries(project, _iso(since))
        rows = self.store.list_queries(project, _iso(since), newest=MAX_DOWNLOAD_ROWS)
        return {"since": _iso(since), "until": _iso(until), "total": total, "truncated": total > len(rows),
                "value": [{"createdDateTime": q.created, "deployment": q.deployment, "question": q.question,
                           "user": q.user_hash, "qnaId": q.qna_id, "confidence": q.confidence} for q in rows]}

    def report(self, project: str, *, days: int = 7, low_confidence: float = 0.5, limit: int = 20) -> dict[str, Any]:
        """What was asked over the last ``days``: the questions that got the default answer, the answers given
        with a confidence under ``low_confidence``, the most asked questions (each with counts), and per day
        how many questions and how many got the default answer."""
        since, until = self.period(days)
        settings = self.settings(project)
        summary = self.store.summarize_queries(project, _iso(since), low_confidence)
        shown: dict[str, tuple[str, str]] = {}  # question key -> (first asked, the text it was first asked in)
        unanswered: Counter[str] = Counter()
        low: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])  # (key, QnA) -> [count, sum]
        asked: Counter[str] = Counter()
        answered_by: dict[str, Counter[int]] = defaultdict(Counter)
        last: dict[str, str] = {}
        daily = {(since + timedelta(days=i)).date().isoformat(): [0, 0] for i in range(days)}
        for date, (asked_that_day, default_answers) in summary.daily.items():
            daily[date] = [asked_that_day, default_answers]
        for g in sorted(summary.groups, key=lambda g: (g.first, g.qna_id, g.question)):  # first asked, first counted
            key = question_key(g.question)
            shown.setdefault(key, (g.first, g.question))
            asked[key] += g.count
            answered_by[key][g.qna_id] += g.count
            last[key] = max(last.get(key, g.last), g.last)
            if g.qna_id == -1:
                unanswered[key] += g.count
            elif g.low:
                low[(key, g.qna_id)][0] += g.low
                low[(key, g.qna_id)][1] += g.low_sum
        low_items = sorted(low.items(), key=lambda kv: (-kv[1][0], kv[0]))[:limit]
        return {
            "enabled": settings.enabled, "retentionDays": settings.retention_days, "days": days,
            "since": _iso(since), "until": _iso(until), "lowConfidence": low_confidence,
            "total": sum(asked.values()), "users": summary.users,
            "unanswered": [{"question": shown[k][1], "count": n, "lastAsked": last[k]}
                           for k, n in sorted(unanswered.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]],
            "lowConfidenceAnswers": [{"question": shown[k][1], "qnaId": qid, "count": int(n),
                                      "confidence": round(summed / n, 4)} for (k, qid), (n, summed) in low_items],
            "mostAsked": [{"question": shown[k][1], "count": n, "qnaId": answered_by[k].most_common(1)[0][0]}
                          for k, n in sorted(asked.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]],
            "daily": [{"date": d, "total": t, "unanswered": u} for d, (t, u) in sorted(daily.items())],
        }
