"""Embedding a caller's texts with the server's own embedder (``POST /v1/embeddings``).

A table connected with ``openqna table connect --embedder local`` is searched by embedding each subject with
that embedder and comparing it with the table's vector column, so the column must hold vectors of that same
model.  This is how a user without the model at hand fills it: the server's embedder, under the names a
caller may know it by, with the same vectors openqna makes of its own questions and passages (unit-length
float32 rows; the bundled models read the first 256 word pieces of a text, as they do everywhere here).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from openqna.models import gpt2
from openqna.models.embedder import Embedder, spec_of
from openqna.records import NotFound

# The names a bundled model is published under (sentence-transformers' on the Hugging Face hub), by its spec.
HUB_NAMES = {
    "local": ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
    "mpnet": ("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"),
}


class UnknownModel(NotFound):
    """A model name the server's embedder does not answer to."""


class Embeddings:
    """The server's embedder, as ``/v1/embeddings`` offers it."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        spec = spec_of(embedder)
        names = [embedder.name, *([spec] if spec else []), *HUB_NAMES.get(spec or "", ())]
        self.names: tuple[str, ...] = tuple(dict.fromkeys(names))  # the vector space's own name first

    @property
    def model(self) -> str:
        """The name answers carry: the vector space's, which knowledge bases record."""
        return self.embedder.name

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def check_model(self, model: str) -> None:
        """Refuse a name the embedder does not answer to (case aside), saying which names it does."""
        if model.lower() not in {n.lower() for n in self.names}:
            raise UnknownModel(f"The model '{model}' does not exist here: this server embeds with "
                               f"one model, named any of {', '.join(repr(n) for n in self.names)}.",
                               target="model")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 rows of unit length, in ``texts``' order: what openqna itself makes of these texts."""
        return self.embedder.embed(list(texts))

    @staticmethod
    def count_tokens(texts: Sequence[str]) -> int:
        """The texts' GPT-2 tokens, the measure the OpenAI surface counts in (as OpenAI's ``usage`` does)."""
        return sum(len(e.ids) for e in gpt2.tokenizer().encode_batch(list(texts)))
