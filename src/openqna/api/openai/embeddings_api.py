"""OpenAI's Embeddings API (``POST /v1/embeddings``) with the server's own embedder (``kb/embeddings.py``).

Code written for ``client.embeddings.create`` (and the 0.x ``openai.Embedding.create``) gets the vectors openqna
itself makes, so a connected table's vector column filled through it is searched by ``table connect
--embedder local`` (docs/tools.md).  Requests are checked as OpenAI's schema does (unknown fields refused) and
refused in OpenAI's error envelope; text only, since token ids of OpenAI's tokenizers mean nothing to this
model.  Both encodings are served: ``float`` (the default) and ``base64``, which the modern clients ask for and
decode (little-endian float32).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from openqna.api.concurrency import run_query
from openqna.api.credentials import secret_from_headers
from openqna.api.openai.answers_api import Body, Refused, error_response, openai_error, read_json, unauthorized
from openqna.auth.keys import Authorizer
from openqna.formats.limits import LIMITS
from openqna.kb.embeddings import Embeddings, UnknownModel
from openqna.records import InvalidArgument, OpenQnAError

FIELDS = {"input", "model", "encoding_format", "dimensions", "user"}
ENCODINGS = ("float", "base64")
# Texts embedded per turn on the query pool: a request of 2,048 texts takes turns with the questions asked
# meanwhile instead of holding the model for its whole length, and stops when its client has gone.
CHUNK = 16


def texts_from(raw: Any) -> list[str]:
    """``input`` as texts: a string or an array of 1 to ``LIMITS.embedding_inputs`` non-empty strings."""
    if raw is None:
        raise InvalidArgument("'input' is a required property", target="input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list):
        raise InvalidArgument("'input' must be a string or an array of strings.", target="input")
    if not texts:
        raise InvalidArgument("'input' is an empty array: send at least one text.", target="input")
    if any(isinstance(t, (int, list)) for t in texts):
        raise InvalidArgument("'input' holds token ids: this server embeds text only (its model's tokens are not "
                              "OpenAI's), so send the text itself.", target="input")
    if len(texts) > LIMITS.embedding_inputs:
        raise InvalidArgument(f"'input' holds {len(texts):,} texts; the limit is {LIMITS.embedding_inputs:,} a "
                              "request.", target="input")
    for i, text in enumerate(texts):
        where = "'input'" if isinstance(raw, str) else f"'input[{i}]'"
        if not isinstance(text, str):
            raise InvalidArgument(f"{where} must be a string; got {type(text).__name__}.", target="input")
        if not text:
            raise InvalidArgument(f"{where} is an empty string: every input needs text.", target="input")
        if len(text) > LIMITS.embedding_input_chars:
            raise InvalidArgument(f"{where} is {len(text):,} characters long; the limit is "
                                  f"{LIMITS.embedding_input_chars:,} an input.", target="input")
    return texts


def encoded(vector: np.ndarray, encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()


def response_body(vectors: np.ndarray, encoding: str, model: str, tokens: int) -> bytes:
    """The answer's JSON, made off the event loop: 2,048 vectors as floats are some 15 MB of text."""
    data = [{"object": "embedding", "index": i, "embedding": encoded(v, encoding)} for i, v in enumerate(vectors)]
    return json.dumps({"object": "list", "data": data, "model": model,
                       "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode()


class EmbeddingRoutes:
    def __init__(self, embeddings: Embeddings, authorizer: Authorizer):
        self.embeddings = embeddings
        self.authorizer = authorizer

    def routes(self) -> list[Route]:
        # openai 0.x's Embedding.create(engine=...) posts to the engine's path, with no model in the body; any of the
        # model's names, the vector space's (minilm-l6-v2/onnx-fp32) with its slash too
        return [Route("/v1/embeddings", self.create, methods=["POST"]),
                Route("/v1/engines/{engine:path}/embeddings", self.create, methods=["POST"])]

    async def create(self, request: Request) -> Response:
        """Any key may embed (a scoped one too): the answer depends on no knowledge base."""
        try:
            _, denied = self.authorizer.check(secret_from_headers(request.headers))
            if denied:
                return unauthorized(denied)
            body = Body(await read_json(request), FIELDS)
            engine = request.path_params.get("engine")
            model = body.string("model", required=engine is None)
            if engine is not None and model is not None and model != engine:
                raise InvalidArgument(f"'model' is {model!r} but the path names engine {engine!r}; send one of them.",
                                      target="model")
            model = model or engine
            assert model is not None
            self.embeddings.check_model(model)
            texts = texts_from(body.raw.get("input"))
            encoding = body.string("encoding_format", default="float")
            if encoding not in ENCODINGS:
                raise InvalidArgument(f"'encoding_format' must be 'float' or 'base64'; got {encoding!r}.",
                                      target="encoding_format")
            dimensions = body.integer("dimensions", None, 1)
            if dimensions is not None and dimensions != self.embeddings.dim:
                raise InvalidArgument(f"'dimensions' must be {self.embeddings.dim}, the dimension of "
                                      f"'{self.embeddings.model}': this model cannot shorten its vectors.",
                                      target="dimensions")
            body.string("user")
            parts = []
            for start in range(0, len(texts), CHUNK):
                if start and await request.is_disconnected():
                    return Response(status_code=400)  # nobody reads it: the client has gone
                parts.append(await run_query(self.embeddings.embed, texts[start:start + CHUNK]))
            tokens = await run_in_threadpool(self.embeddings.count_tokens, texts)
            content = await run_in_threadpool(response_body, np.concatenate(parts), encoding, self.embeddings.model,
                                              tokens)
            return Response(content, media_type="application/json")
        except Refused as exc:
            return exc.response
        except UnknownModel as exc:
            return openai_error(404, exc.message, param="model", code="model_not_found")
        except OpenQnAError as exc:
            return error_response(exc)
