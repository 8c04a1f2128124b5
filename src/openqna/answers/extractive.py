"""The completer used when no LLM endpoint is configured: it extracts, it does not generate.

It answers with the sentence of the selected documents closest to the question (a whole
sentence, as a writer would answer), so ``/v1/answers`` works offline.  It implements the
``models.completer.Completer`` protocol but chooses text with retrieval's span selection,
which is why it lives here rather than beside the protocol.
"""

from __future__ import annotations

import uuid
from typing import Callable

import numpy as np

from openqna.answers.span import best_spans
from openqna.models.completer import Completion, CompletionRequest

EXTRACTIVE_MODEL = "openqna-extractive"


class ExtractiveCompleter:
    """No LLM: the best sentence of the selected documents (a whole sentence, as a writer would answer)."""

    def __init__(self, embed: Callable[[list[str]], np.ndarray]):
        self.embed = embed

    def complete(self, request: CompletionRequest) -> Completion:
        context = "\n".join(d.strip() for d in request.documents if d.strip())
        text = ""
        if context and request.question.strip():
            vector = self.embed([request.question])[0]
            span = best_spans(request.question, vector, [context], self.embed, short=False)[0]
            text = span.text if span is not None else ""
        for stop in request.stop or []:
            if stop and stop in text:
                text = text.split(stop, 1)[0]
        return Completion(f"cmpl-{uuid.uuid4().hex[:24]}", EXTRACTIVE_MODEL, [text] * request.n)
