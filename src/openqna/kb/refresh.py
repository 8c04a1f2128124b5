"""URL sources that refresh: a registered URL source may be checked every so often and re-imported when it changed.

A source's refresh state (``store.SourceRefresh``) holds its interval, when the next check is due, the validators
its server last sent (``ETag``, ``Last-Modified``) and the last check's outcome.  A check fetches the URL through the
safe fetcher (``ingest/fetch.py``: the same allow-list, timeout and size cap as any source) with ``If-None-Match``
and ``If-Modified-Since``:

- a 304, or a body whose hash is the one last imported, is recorded ``unchanged`` and imports nothing;
- a changed body is re-imported into the live state (``test``) exactly as ``PATCH .../sources`` with
  ``refresh: true`` does (``Authoring._ingest``: unchanged sections keep their vectors, and what an author edited
  stays as the author left it: ``kb/source_edits.py``), and the QnAs and passages
  added, updated and deleted are recorded (counts and ids, counts of QnAs and passages apart, and ``titles``: the
  first question, or a passage's title, of up to 200 of them, so that a deleted record is named too).  No deployment changes until the next deploy;
- a failure (the fetch was refused, timed out, answered 4xx/5xx; the file no longer parses) is recorded ``failed``
  with its message, changes nothing, and the source is tried again at its next interval.

``RefreshScheduler`` is the background part: each ``openqna serve`` process runs one, which every
``OPENQNA_REFRESH_POLL_SECONDS`` claims the due checks and hands them to the job queue as ``refresh`` jobs.  The
claim moves the check's due time forward in one conditional update (``Store.claim_source_refresh``), so on a shared
PostgreSQL store exactly one process claims a given check; a process that dies after claiming leaves the check to
the next interval.  ``tick(now)`` is the scheduler's one step, callable with any clock.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

from openqna import settings
from openqna.ingest.fetch import fetch_if_changed
from openqna.kb.authoring import FETCH_MAX_BYTES, Authoring
from openqna.kb.jobs import JobRunner
from openqna.kb.service import Service
from openqna.records import InvalidArgument, NotFound, OpenQnAError
from openqna.store import Job, Source
from openqna.store.base import SourceRefresh

log = logging.getLogger("openqna.kb.refresh")

MIN_SECONDS = 10 * 60
MAX_TITLES = 200  # the records an outcome names by their first question (``titles``); the ids are all kept
MAX_SECONDS = 365 * 86400
UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
INTERVAL = re.compile(r"^\s*(\d{1,6})\s*([mhdw])\s*$", re.IGNORECASE)
OFF = ("0", "off", "none", "never")
FORMS = ("an interval such as 30m, 6h, 1d or 7d (minutes m, hours h, days d, weeks w; at least 10m, at most 365d), "
         "or 0 / none to stop refreshing")


def parse_every(raw: str | int | None) -> int:
    """Seconds between checks for an interval as written (``6h``); 0 for ``0``/``none``/``off``."""
    text = str(raw if raw is not None else "").strip().lower()
    if text in OFF:
        return 0
    match = INTERVAL.match(text)
    if match is None:
        raise InvalidArgument(f"'{raw}' is not a refresh interval: give {FORMS}.", target="every")
    seconds = int(match[1]) * UNITS[match[2].lower()]
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise InvalidArgument(f"A refresh interval of '{raw}' is out of range: give {FORMS}.", target="every")
    return seconds


def format_every(seconds: int) -> str:
    """``21600`` -> ``6h``; 0 -> ``off``."""
    if seconds <= 0:
        return "off"
    for unit in ("w", "d", "h", "m"):
        if seconds % UNITS[unit] == 0:
            return f"{seconds // UNITS[unit]}{unit}"
    return f"{seconds}s"


def iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def describe(outcome: dict[str, Any]) -> str:
    """One line for an outcome: ``updated: 1 added, 2 updated, 0 deleted``, ``unchanged (304)``, ``failed: ...``."""
    status = outcome.get("status", "")
    if status == "updated":
        line = (f"updated: {outcome.get('added', 0)} added, {outcome.get('updated', 0)} updated, "
                f"{outcome.get('deleted', 0)} deleted")
        parts = [f"{label} {c['added']}/{c['updated']}/{c['deleted']}" for key, label in
                 (("qnas", "QnAs"), ("passages", "passages")) if isinstance(c := outcome.get(key), dict)]
        return f"{line} ({', '.join(parts)} added/updated/deleted)" if parts else line
    if status == "unchanged":
        return "unchanged (304 Not Modified)" if outcome.get("notModified") else "unchanged"
    if status == "failed":
        return f"failed: {outcome.get('error', '')}"
    return "never checked"


def refresh_json(r: SourceRefresh | None) -> dict[str, Any] | None:
    """A source's refresh state on the wire (``GET /openqna/projects/{p}/sources``)."""
    if r is None:
        return None
    return {"every": format_every(r.every), "everySeconds": r.every, "nextDueDateTime": r.next_due or None,
            "lastCheckedDateTime": r.checked or None, "lastChangedDateTime": r.changed or None,
            "etag": r.etag or None, "lastModified": r.last_modified or None, "outcome": r.outcome or None}


class Refresher:
    """Sets sources' refresh intervals and checks them (now, or when the scheduler finds them due)."""

    def __init__(self, service: Service):
        self.service = service
        self.store = service.store
        self.authoring = Authoring(service)

    def source(self, project: str, name: str) -> Source:
        """The registered source ``name`` (its name, URL or display name, any case); a URL source only."""
        registered = self.store.list_sources(project)
        found = next((s for s in registered if s.source == name), None) or next(
            (s for s in registered if name.lower() in (s.source.lower(), s.display_name.lower(),
                                                         s.source_uri.lower())), None)
        if found is None:
            names = ", ".join(f"'{s.source}'" for s in registered) or "none"
            raise NotFound(f"Project '{project}' has no URL source '{name}' (its URL sources: {names}); add one with "
                           "PATCH .../sources.")
        if not found.source_uri.lower().startswith(("http://", "https://")):
            raise InvalidArgument(f"Source '{found.source}' is not a URL source; only URL sources refresh.",
                                  target="source")
        return found

    def status(self, project: str) -> dict[str, SourceRefresh]:
        return self.store.list_source_refreshes(project)

    def set_every(self, project: str, name: str, every: str | int, *, now: datetime | None = None) -> SourceRefresh:
        """Check source ``name`` every ``every`` (``6h``; ``0``/``none``: stop); the first check is one interval on."""
        seconds = parse_every(every)
        src = self.source(project, name)
        state = self.store.list_source_refreshes(project).get(src.source) or SourceRefresh(src.source)
        state.every = seconds
        state.next_due = iso((now or utcnow()) + timedelta(seconds=seconds)) if seconds else ""
        self.store.put_source_refresh(project, state)
        return state

    def refresh(self, project: str, name: str, *, now: datetime | None = None) -> SourceRefresh:
        """Check source ``name`` now: re-import it into the live state if it changed; returns the recorded state.

        A failure is recorded (``outcome.status`` ``failed``), not raised; an unknown source is ``NotFound``."""
        now = now or utcnow()
        src = self.source(project, name)
        state = self.store.list_source_refreshes(project).get(src.source) or SourceRefresh(src.source)
        try:
            state.outcome = self._check(project, src, state, iso(now))
        except OpenQnAError as exc:
            state.outcome = {"status": "failed", "error": exc.message}
        except Exception as exc:  # a bug or an unreadable file must not stop the scheduler; it is logged in full
            log.exception("refreshing source %r of project %r failed", src.source, project)
            state.outcome = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        state.checked = iso(now)
        if state.outcome["status"] == "updated":
            state.changed = iso(now)
        state.next_due = iso(now + timedelta(seconds=state.every)) if state.every else ""
        self.store.put_source_refresh(project, state)
        log.info("refreshed source %r of project %r: %s", src.source, project, describe(state.outcome))
        return state

    def _check(self, project: str, src: Source, state: SourceRefresh, stamp: str) -> dict[str, Any]:
        got = fetch_if_changed(src.source_uri, etag=state.etag, last_modified=state.last_modified,
                               max_bytes=FETCH_MAX_BYTES)
        state.etag, state.last_modified = got.etag, got.last_modified
        if got.data is None:
            return {"status": "unchanged", "notModified": True}
        digest = hashlib.sha256(got.data).hexdigest()
        if digest == src.content_hash:
            return {"status": "unchanged", "notModified": False}
        before, titles = self._fingerprints(project, src.source)
        self.authoring._ingest(project, src, got.name, got.data)
        after, new_titles = self._fingerprints(project, src.source)
        titles.update(new_titles)  # a changed record is named as it is now, a deleted one as it was
        src.content_hash = digest
        self.store.put_source(project, src)
        added = sorted(set(after) - set(before))
        deleted = sorted(set(before) - set(after))
        updated = sorted(i for i in set(after) & set(before) if after[i] != before[i])
        kind = {**{i: k for i, (k, _) in before.items()}, **{i: k for i, (k, _) in after.items()}}
        apart = {f"{k}s": {"added": sum(kind[i] == k for i in added), "updated": sum(kind[i] == k for i in updated),
                           "deleted": sum(kind[i] == k for i in deleted)} for k in ("qna", "passage")}
        named = [*added, *updated, *deleted][:MAX_TITLES]
        return {"status": "updated", "added": len(added), "updated": len(updated), "deleted": len(deleted),
                "addedIds": added, "updatedIds": updated, "deletedIds": deleted, **apart,
                "titles": {str(i): titles[i] for i in named if i in titles}}

    def _fingerprints(self, project: str, source: str) -> tuple[dict[int, tuple[str, str]], dict[int, str]]:
        """Record id -> (kind, content hash) of the live records of ``source``, and id -> its first question (a
        passage's: its title), which names the record in the outcome."""
        records = {q.id: q for q in self.store.list_qnas(project)
                   if q.source.lower() == source.lower() and q.id is not None}
        hashes: dict[int, tuple[str, str]] = {i: (records[i].kind, h)
                                              for i, h in self.store.content_hashes(project).items() if i in records}
        return hashes, {i: q.questions[0][:200] for i, q in records.items() if q.questions}

    def handle(self, job: Job) -> None:
        """The ``refresh`` job: check the source the scheduler claimed (its outcome is recorded on the source)."""
        try:
            self.refresh(job.project, job.params["source"])
        except NotFound:  # the source (or project) was deleted after the check was claimed
            log.info("refresh job %s: source %r of project %r is gone", job.id, job.params["source"], job.project)


class RefreshScheduler:
    """One per server process: claims due checks and runs them as ``refresh`` jobs (see the module's docstring)."""

    def __init__(self, refresher: Refresher, jobs: JobRunner | None = None, *, poll_seconds: float | None = None):
        self.refresher = refresher
        self.store = refresher.store
        self.jobs = jobs
        self.poll_seconds = settings.refresh_poll_seconds() if poll_seconds is None else poll_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self, now: datetime | None = None) -> list[dict[str, Any]]:
        """Claim every check due at ``now``; submit each as a job, or run it here when there is no job runner.

        Returns one entry per claimed check: ``{"project", "source", "job"}`` or ``{"project", "source", "outcome"}``.
        """
        now = now or utcnow()
        done: list[dict[str, Any]] = []
        for project, state in self.store.due_source_refreshes(iso(now)):
            upcoming = iso(now + timedelta(seconds=state.every))
            if not self.store.claim_source_refresh(project, state.source, state.next_due, upcoming):
                continue  # another process claimed it
            if self.jobs is not None:
                job = self.jobs.submit("refresh", project, {"source": state.source})
                done.append({"project": project, "source": state.source, "job": job.id})
                continue
            try:
                outcome = self.refresher.refresh(project, state.source, now=now).outcome
            except NotFound:
                continue
            done.append({"project": project, "source": state.source, "outcome": outcome})
        return done

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="openqna-source-refresh", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.tick()
            except OpenQnAError as exc:  # the store is unreachable for a moment (it logs so): try at the next poll
                log.debug("looking for sources due to refresh failed: %s", exc.message)
            except Exception:
                log.exception("looking for sources due to refresh failed")

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
