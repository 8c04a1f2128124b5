"""A project's trained model as stored and served: one query adapter per vector space, and the cache that loads them.

A multilingual knowledge base is searched in two spaces (the server's embedder, and the multilingual space for
Chinese, Japanese and Korean questions, ``ranking.multilingual``); a train job fits an adapter for each space the
project has, and the server applies the one of the space a question is ranked in.

``TrainedModels`` loads a deployment's model on its first question and keeps the most recently used ones within
``OPENQNA_TRAINED_MAX_MB``; it is keyed by the index's version, which moves whenever the model changes (training
writes the live state's model, a deploy or rollback copies it), so a replica picks a new model up as it picks up
content.
"""

from __future__ import annotations

import io
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from openqna.training.adapter import QueryAdapter

log = logging.getLogger("openqna.training")


@dataclass
class TrainedModel:
    adapters: dict[str, QueryAdapter]  # by the name of the vector space (embedder) each maps

    def adapter_for(self, space: str) -> QueryAdapter | None:
        return self.adapters.get(space)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.adapters.values())

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        spaces = list(self.adapters)
        arrays = {f"m{i}": self.adapters[s].matrix.astype(np.float32) for i, s in enumerate(spaces)}
        arrays["offsets"] = np.asarray([self.adapters[s].offset for s in spaces], np.float32)
        np.savez_compressed(buf, spaces=np.asarray(spaces, dtype=str), **arrays)  # type: ignore[arg-type]
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> TrainedModel:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            spaces = [str(s) for s in z["spaces"]]
            # a model trained before adapters had offsets has none (each 0)
            offsets = [float(x) for x in z["offsets"]] if "offsets" in z.files else [0.0] * len(spaces)
            return cls({s: QueryAdapter(np.asarray(z[f"m{i}"], np.float32), s, offsets[i])
                        for i, s in enumerate(spaces)})


class TrainedModels:
    """Deployments' trained models, loaded on first use and evicted least recently used past ``max_bytes``."""

    def __init__(self, load: Callable[[str, str], bytes | None], max_bytes: Callable[[], int]):
        self._load = load  # (project, deployment) -> the stored bytes, or None
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._models: OrderedDict[tuple[str, str, int], TrainedModel | None] = OrderedDict()
        self._bytes = 0

    def get(self, project: str, deployment: str, version: int) -> TrainedModel | None:
        """The model of ``project``/``deployment`` at index ``version`` (None: it has none)."""
        key = (project.lower(), deployment, version)
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key]
        data = self._load(project, deployment)
        try:
            model = None if data is None else TrainedModel.from_bytes(data)
        except (ValueError, KeyError, OSError):  # a damaged artefact: answer untrained rather than fail every question
            log.exception("the trained model of %s/%s cannot be read; answering without it", project, deployment)
            model = None
        with self._lock:
            for old in [k for k in self._models if k[:2] == key[:2] and k != key]:  # older versions of it
                self._drop(old)
            if key not in self._models:
                self._models[key] = model
                self._bytes += model.nbytes if model is not None else 0
            # only when a model was loaded: a project without one adds nothing to evict for, nor reads the setting
            # (a bad OPENQNA_TRAINED_MAX_MB answered every question of every project 500; serve refuses it at start)
            limit = self._max_bytes() if model is not None else self._bytes
            while self._bytes > limit and len(self._models) > 1:
                self._drop(next(iter(self._models)))
        return model

    def _drop(self, key: tuple[str, str, int]) -> None:
        model = self._models.pop(key)
        self._bytes -= model.nbytes if model is not None else 0

    @property
    def loaded_bytes(self) -> int:
        return self._bytes
