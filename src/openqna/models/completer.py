"""Completers: where generated answers come from (DESIGN decision 6).

``OpenAICompatibleCompleter`` calls any OpenAI-compatible endpoint (OpenAI, Azure OpenAI,
vLLM, llama.cpp, Ollama) through ``/chat/completions`` or ``/completions``, passing n,
stop, temperature and max_tokens through.  Never ``logit_bias``: the Answers API's are GPT-2 token ids, which the
endpoint's model (with a tokenizer of its own) would read as other tokens (``logit_bias_refusal``).  With no endpoint configured,
``ExtractiveCompleter`` answers from the selected documents (the sentence closest to the
question), so ``/v1/answers`` works offline; the ``model`` it reports says which answered.
``ExtractiveCompleter`` picks sentences, which is retrieval's job, so it lives in
``answers/extractive.py``; ``answers.get_completer`` chooses between the two.

An endpoint that fails is a 502 whose message names no address and quotes no reply of the
endpoint (any key that may ask sees it); the server's log has both.  An endpoint that sends
fewer choices than ``n`` (Ollama and llama.cpp ignore ``n``) is asked again for the rest.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from openqna.records import OpenQnAError

log = logging.getLogger("openqna.models.completer")

@dataclass
class CompletionRequest:
    prompt: str
    model: str
    question: str
    documents: list[str]  # the selected documents, as placed in the prompt
    n: int = 1
    max_tokens: int = 16
    temperature: float = 0.0
    stop: list[str] | None = None
    logprobs: int | None = None
    user: str | None = None


@dataclass
class Completion:
    id: str
    model: str
    texts: list[str]
    raw: dict = field(default_factory=dict)
    logprobs: list = field(default_factory=list)  # each choice's, as the endpoint sent them (None: not sent)


class CompleterError(OpenQnAError):
    code = "completer_error"
    status = 502


ENDOFTEXT = 50256  # GPT-2's <|endoftext|>


def logit_bias_refusal(bias: dict[str, float]) -> str | None:
    """Why the Answers API's ``logit_bias`` cannot be honoured, or None when it may be dropped.

    Its keys are GPT-2 token ids, and no completer here reads them: an endpoint's model has a tokenizer of its own
    (passed on, the ids biased unrelated tokens of it), and the extractive completer makes no tokens.  A bias of 0
    changes nothing, and a negative one on <|endoftext|> (the reference's own example, ``{"50256": -100}``) only kept
    the text from ending on its own, where the stop sequences and ``max_tokens`` end it: those are dropped.
    """
    honoured = [k for k, v in bias.items() if v and not (int(k) == ENDOFTEXT and v < 0)]
    if not honoured:
        return None
    return (f"'logit_bias' names GPT-2 token ids, and this server has no model that reads them: the model behind its "
            f"completion endpoint has a tokenizer of its own, so token {honoured[0]} would bias an unrelated token "
            f"(without an endpoint, answers are sentences of the documents, made of no tokens). Leave 'logit_bias' out; "
            f"only a negative bias on {ENDOFTEXT} (<|endoftext|>) is accepted, and dropped, since the stop sequences and "
            f"'max_tokens' end the answer.")


class Completer(Protocol):
    def complete(self, request: CompletionRequest) -> Completion: ...


class OpenAICompatibleCompleter:
    """Completions from an OpenAI-compatible server; engine names map to its models."""

    def __init__(self, base_url: str, api_key: str | None = None, *, model_map: dict[str, str] | None = None,
                 default_model: str | None = None, api: str = "chat", timeout: float = 60.0):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model_map = model_map or {}
        self.default_model = default_model
        self.api = api
        self.timeout = timeout

    def _model(self, requested: str) -> str:
        return self.model_map.get(requested) or self.default_model or requested

    def complete(self, request: CompletionRequest) -> Completion:
        first = self._complete(request, request.n)
        texts, logprobs = list(first.texts), list(first.logprobs)
        for _ in range(request.n - 1):  # an endpoint that ignores n sent one choice: one more call each
            if len(texts) >= request.n:
                break
            more = self._complete(request, request.n - len(texts))
            if not more.texts:
                break
            texts += more.texts
            logprobs += more.logprobs
        if len(texts) < request.n:
            raise self._failed(f"sent {len(texts)} completions when {request.n} were asked for")
        return Completion(first.id, first.model, texts[:request.n], first.raw, logprobs[:request.n])

    def _failed(self, what: str, detail: str = "") -> CompleterError:
        """The caller's error says ``what`` went wrong; the log also has ``detail`` and the endpoint's address."""
        log.warning("the completion endpoint %s %s%s", self.base_url, what, f": {detail}" if detail else "")
        return CompleterError("The completion endpoint the server is configured with (OPENQNA_LLM_BASE_URL) failed: "
                              f"it {what}. The server's log has the details; try again, or ask its operator.")

    def _complete(self, request: CompletionRequest, n: int) -> Completion:
        model = self._model(request.model)
        params = {"model": model, "n": n, "max_tokens": request.max_tokens,
                  "temperature": request.temperature}
        if request.stop:
            params["stop"] = request.stop
        if request.user:
            params["user"] = request.user
        if self.api == "chat":
            path, body = "/chat/completions", {**params, "messages": [{"role": "user", "content": request.prompt}]}
            if request.logprobs is not None:  # the chat API's spelling of the same request
                body["logprobs"], body["top_logprobs"] = True, request.logprobs
        else:
            path, body = "/completions", {**params, "prompt": request.prompt}
            if request.logprobs is not None:
                body["logprobs"] = request.logprobs
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            r = httpx.post(self.base_url + path, json=body, headers=headers, timeout=self.timeout)
        except httpx.TimeoutException as exc:
            raise self._failed(f"did not answer within {self.timeout:g} s (OPENQNA_LLM_TIMEOUT)", repr(exc)) from None
        except httpx.HTTPError as exc:
            raise self._failed("could not be reached", repr(exc)) from None
        if r.status_code >= 400:
            raise self._failed(f"answered HTTP {r.status_code}", repr(r.text[:300]))
        try:
            raw = r.json()
            choices = sorted(raw["choices"], key=lambda c: c.get("index", 0))
            # A chat message's content may be null (a refusal, or a reasoning model that spent max_tokens thinking):
            # the model wrote no text.
            texts = [(c["message"]["content"] or "") if self.api == "chat" else c["text"] for c in choices]
        except (ValueError, KeyError, TypeError) as exc:
            raise self._failed("sent an unexpected response", repr(exc)) from None
        if not all(isinstance(t, str) for t in texts):
            raise self._failed("sent a completion whose text is not a string")
        logprobs = [c.get("logprobs") for c in choices]
        if self.api == "chat":
            logprobs = [completion_logprobs(lp, len(request.prompt)) for lp in logprobs]
        return Completion(raw.get("id") or f"cmpl-{uuid.uuid4().hex[:24]}", raw.get("model") or model, texts, raw,
                          logprobs)


def completion_logprobs(chat: object, offset: int) -> dict | None:
    """A chat choice's ``logprobs`` (``{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]}``)
    in the completions API's shape, which the Answers endpoint returns: ``tokens``, ``token_logprobs``,
    ``top_logprobs`` (one map of token to logprob per token) and ``text_offset`` (each token's offset in the prompt
    and completion, the completion starting at ``offset``); None when the endpoint sent none or a shape it does
    not read."""
    if not isinstance(chat, dict) or not isinstance(chat.get("content"), list):
        return None
    tokens, values, tops, offsets = [], [], [], []
    for item in chat["content"]:
        if not isinstance(item, dict) or not isinstance(item.get("token"), str):
            return None
        offsets.append(offset)
        offset += len(item["token"])
        tokens.append(item["token"])
        values.append(item.get("logprob"))
        tops.append({t["token"]: t.get("logprob") for t in item.get("top_logprobs") or []
                     if isinstance(t, dict) and isinstance(t.get("token"), str)})
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}
