"""A project's near-topic share under ``/openqna`` (author role, Azure's error envelope; ``kb/near_topic_setting.py``
and ``kb/near_topic_effect.py``).

* ``GET /openqna/projects/{project}/near-topic?deploymentName=`` — the project's choice (``nearTopic``: a share,
  ``off``, or ``default``), the server's ``OPENQNA_NEAR_TOPIC`` (``serverDefault``), the share in force
  (``effective``), and what it does on that state of the KB (``test`` unless named): whether it adapts (``adapted``,
  else ``reason``), and of its ``heldOut`` alternate questions, each asked without its own record, the share
  answered at 0.5 without the margin (``nearRate``) and with it (``nearRateAfter``), the ``margin`` in logit units;
* ``PUT /openqna/projects/{project}/near-topic`` — ``{"nearTopic": 0.1}`` (a share from 0 to 1), ``"off"``, or
  ``"default"`` (or null: the server's again): saved in the project's settings, in force at once on ``test`` and
  every deployment, as a fitted calibration is; the answer is the GET's.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openqna.api.azure.wire import Body, authorized_project, handle_errors, read_json
from openqna.api.concurrency import run_query
from openqna.auth.keys import Authorizer
from openqna.kb import near_topic_effect, near_topic_setting
from openqna.kb.catalog import LIVE
from openqna.kb.service import Service
from openqna.records import InvalidArgument

USAGE = ('The body must be {"nearTopic": a share from 0 to 1 such as 0.1, "off", or "default" (the server\'s '
         'OPENQNA_NEAR_TOPIC)}.')


class NearTopicRoutes:
    def __init__(self, service: Service, authorizer: Authorizer):
        self.service = service
        self.authorizer = authorizer

    def routes(self) -> list[Route]:
        return [Route("/openqna/projects/{project}/near-topic", self.near_topic, methods=["GET", "PUT"])]

    @handle_errors
    async def near_topic(self, request: Request) -> Response:
        """Measuring may fit the KB's adaptation (a second or two on a large KB): it runs on the query pool."""
        project = authorized_project(self.authorizer, request)
        deployment = Body(dict(request.query_params)).string("deploymentName", max_len=100) or LIVE
        await run_in_threadpool(self.service.project, project)  # 404 before the body's 400
        if request.method == "PUT":
            raw = await read_json(request)
            if not isinstance(raw, dict) or near_topic_setting.SETTINGS_KEY.lower() not in {k.lower() for k in raw}:
                raise InvalidArgument(USAGE, target=near_topic_setting.SETTINGS_KEY)
            value = near_topic_setting.parse(Body(raw).get(near_topic_setting.SETTINGS_KEY))
            await run_in_threadpool(near_topic_setting.save, self.service, project, value)
        effect = await run_query(near_topic_effect.effect, self.service, project, deployment)
        return JSONResponse(effect.to_json())
