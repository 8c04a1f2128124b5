"""The source routes under ``/openqna`` (author role, Azure's error envelope; ``kb/refresh.py`` does the work).

* ``GET /openqna/projects/{project}/sources`` — the project's sources (``source``, ``displayName``, ``sourceUri``,
  ``sourceKind``, ``lastUpdatedDateTime``) with each one's ``refresh``: ``every``, ``everySeconds``,
  ``nextDueDateTime``, ``lastCheckedDateTime``, ``lastChangedDateTime``, ``etag``, ``lastModified`` and the last
  check's ``outcome`` (``status`` unchanged/updated/failed; counts and ids, and ``qnas``/``passages`` counts
  apart; ``error``), or null when never set;
* ``PUT /openqna/projects/{project}/sources/{source}/refresh`` — ``{"every": "6h"}`` (``30m``, ``1d``, ``7d``; at
  least 10 minutes; ``0``/``none`` stops): the source's new refresh state;
* ``POST /openqna/projects/{project}/sources/{source}/:refresh`` — check the source now (re-importing it into the
  live state when it changed) and return its refresh state, ``outcome`` saying what changed.

``{source}`` is the source's name (for a URL source, its URL, percent-encoded as one path segment), its URL or its
display name.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api.azure.wire import authorized_project, body_json, handle_errors_off_loop
from openqna.auth.keys import Authorizer
from openqna.kb.authoring import Authoring
from openqna.kb.refresh import FORMS, Refresher, refresh_json
from openqna.kb.service import Service
from openqna.records import InvalidArgument

PREFIX = "/openqna/projects/{project}/sources"


class SourceRoutes:
    def __init__(self, service: Service, authorizer: Authorizer):
        self.service = service
        self.authorizer = authorizer
        self.refresher = Refresher(service)

    def routes(self) -> list[Route]:
        return [
            Route(PREFIX, self.list_sources, methods=["GET"]),
            Route(f"{PREFIX}/{{source:path}}/refresh", self.set_refresh, methods=["PUT"]),
            Route(f"{PREFIX}/{{source:path}}/:refresh", self.refresh_now, methods=["POST"]),
        ]

    def _author(self, request: Request) -> str:
        return authorized_project(self.authorizer, request)

    @handle_errors_off_loop
    def list_sources(self, request: Request) -> Response:
        project = self._author(request)
        refreshes = self.service.store.list_source_refreshes(project)
        return JSONResponse({"value": [
            {"source": s.source, "displayName": s.display_name, "sourceUri": s.source_uri or None,
             "sourceKind": s.source_kind, "lastUpdatedDateTime": s.last_updated or None,
             "refresh": refresh_json(refreshes.get(s.source))}
            for s in Authoring(self.service).list_sources(project)]})

    @handle_errors_off_loop
    def set_refresh(self, request: Request) -> Response:
        project = self._author(request)
        raw = body_json(request)
        if not isinstance(raw, dict) or "every" not in raw:
            raise InvalidArgument(f'The body is {{"every": INTERVAL}}: {FORMS}.', target="every")
        value = raw["every"]
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or len(value) > 20:
            raise InvalidArgument(f"'every' must be {FORMS}.", target="every")
        every = value
        name = self.refresher.source(project, request.path_params["source"]).source
        state = self.refresher.set_every(project, name, every)
        return JSONResponse({"source": name, "refresh": refresh_json(state)})

    @handle_errors_off_loop
    def refresh_now(self, request: Request) -> Response:
        project = self._author(request)
        name = self.refresher.source(project, request.path_params["source"]).source
        state = self.refresher.refresh(project, name)
        return JSONResponse({"source": name, "refresh": refresh_json(state)})
