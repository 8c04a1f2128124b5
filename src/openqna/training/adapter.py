"""A knowledge base's learned query adapter: a residual linear map of query vectors over a frozen space.

``openqna train`` fits one per project on what the project holds (``training.examples``); the server applies it
to the question's vector before ranking (``apply``), and the stored vectors stay as they are, so training never
re-indexes anything and a replica needs only the adapter's bytes.  A dot product with a linearly mapped record
vector is a dot product of the raw record vector with a mapped query, so a query-side map loses nothing a
symmetric linear one would give.

The map is ``normalize(v + v @ M)``, with ``M`` starting at zero and held near it by an L2 penalty, so an adapter
trained on little data stays close to the space the ranker's features and calibration were fitted on.

The recipe (``scripts/train_probe.py``, make eval's FAQ-regime dev KBs, full ranker with the KB adaptation refitted
on mapped held-out questions): a strong L2 (1.0).  Weaker ones (1e-2, 1e-1) lost 0.4 to 2.2 points of top-1 on
banking77 and hwu64, whose KB adaptation already learns from the same alternate questions, and up to 10 on the
covid-qsim-deepset FAQ page; 1.0 lost at most 0.5 there and kept covid-q's gain (+7.4 top-1).  Small KBs get at least
``MIN_STEPS`` Adam steps, so a 76-question FAQ moves as far as banking77 does in its ``EPOCHS``, and large ones at
most ``MAX_STEPS``: the cost is steps x 128 x units, so banking77 with all 10,003 questions trains in a third of
the time its 8 epochs took (which gained nothing on its dev questions).

The fit: each example is a query vector and the record it should find; the loss is the cross-entropy of the
record among all the KB's records, a record's logit being the log-sum-exp of its units' (its question and answer
vectors) scaled cosines.  A unit the query is itself (a stored question asked of its own KB) is left out of its
softmax.  Adam, minibatches, numpy only.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property

import numpy as np

TEMPERATURE = 20.0
L2 = 1.0  # on M (the loss is a mean over the batch)
EPOCHS = 8
MIN_STEPS = 50  # Adam steps at least, whatever the number of examples
MAX_STEPS = 200  # and at most: banking77's 10,003 questions would take 632 (each a 128 x 10,080 softmax)
BATCH = 128
LEARNING_RATE = 1e-3


class Stopped(Exception):
    """Training was asked to stop (``stop_when``) before it finished; it has written nothing."""


def _never() -> bool:
    return False


_STOP: ContextVar[Callable[[], bool]] = ContextVar("openqna_training_stop", default=_never)


@contextmanager
def stop_when(asked: Callable[[], bool]) -> Iterator[None]:
    """Within it, training in this thread raises ``Stopped`` at its next step once ``asked()`` is true (the train
    job's process shutting down: a train of a large KB takes a minute, which a shutdown should not wait for)."""
    token = _STOP.set(asked)
    try:
        yield
    finally:
        _STOP.reset(token)


def check_stop() -> None:
    """Raise ``Stopped`` if this thread's training was asked to stop (a check between steps: about 0.1 µs)."""
    if _STOP.get()():
        raise Stopped


@dataclass
class QueryAdapter:
    matrix: np.ndarray  # (dim, dim) float32: a query v is read as normalize(v + v @ matrix)
    space: str  # the embedder (vector space) name it was trained on: it applies to that space only
    # added to the logit of every record a mapped question is ranked against (``ranker.TrainedOffset``): the train job
    # sets it so that the threshold means what it meant before training (``training.project.fit_offset``)
    offset: float = 0.0

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """Query vectors (n, dim) or (dim,), mapped and unit-normalised, float32."""
        v = np.asarray(vectors, np.float32)
        out = v + v @ self.matrix
        norm = np.linalg.norm(out, axis=-1, keepdims=True)
        return (out / np.maximum(norm, 1e-12)).astype(np.float32, copy=False)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(buf, matrix=self.matrix.astype(np.float32), space=np.asarray(self.space),
                            offset=np.asarray(self.offset, np.float64))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> QueryAdapter:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:  # an adapter saved before offsets has none
            return cls(np.asarray(z["matrix"], np.float32), str(z["space"]),
                       float(z["offset"]) if "offset" in z.files else 0.0)

    @cached_property
    def digest(self) -> str:
        """A short hash of the map: what the KB adaptation fitted for it is cached under (``ranking.adapt.of``)."""
        return hashlib.sha256(np.ascontiguousarray(self.matrix, np.float32).tobytes()).hexdigest()[:16]

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes)


@dataclass
class Examples:
    queries: np.ndarray  # (m, dim) float32 unit vectors: what a user's question would look like
    targets: np.ndarray  # (m,) int64: the record (0..n_records-1) each query should find
    self_units: np.ndarray  # (m,) int64: the unit each query is itself (-1: none)


def fit(examples: Examples, units: np.ndarray, unit_records: np.ndarray, n_records: int, space: str, *,
        epochs: int = EPOCHS, l2: float = L2, learning_rate: float = LEARNING_RATE, temperature: float = TEMPERATURE,
        seed: int = 0) -> QueryAdapter:
    """The adapter that makes each example's query find its target record among ``units`` (u, dim) of records
    ``unit_records`` (u,)."""
    X = np.asarray(examples.queries, np.float32)
    U = np.asarray(units, np.float32)
    unit_records = np.asarray(unit_records, np.int64)
    dim = U.shape[1]
    M = np.zeros((dim, dim), np.float32)
    m_, v_ = np.zeros_like(M), np.zeros_like(M)
    rng = np.random.default_rng(seed)
    beta1, beta2, t = 0.9, 0.999, 0
    if not len(X):
        return QueryAdapter(M, space)
    batches = -(-len(X) // BATCH)
    steps = min(max(epochs * batches, MIN_STEPS), MAX_STEPS)
    self_units = np.asarray(examples.self_units, np.int64)
    targets = np.asarray(examples.targets, np.int64)
    while t < steps:
        order = rng.permutation(len(X))
        for start in range(0, len(X), BATCH):
            if t == steps:
                break
            check_stop()
            batch = order[start:start + BATCH]
            x = X[batch]
            a = x + x @ M
            Z = temperature * (a @ U.T)
            own = self_units[batch]
            has_own = own >= 0
            Z[np.flatnonzero(has_own), own[has_own]] = -np.inf
            Z -= Z.max(axis=1, keepdims=True)
            P = np.exp(Z)
            P /= P.sum(axis=1, keepdims=True)
            right = unit_records[None, :] == targets[batch][:, None]
            p_right = np.maximum((P * right).sum(axis=1, keepdims=True), 1e-12)
            G = P - np.where(right, P / p_right, 0.0)  # d loss / d Z for loss = -log sum_{right units} p
            G /= len(batch)
            grad_a = temperature * (G @ U)
            g = x.T @ grad_a + 2 * l2 * M
            t += 1
            m_ = beta1 * m_ + (1 - beta1) * g
            v_ = beta2 * v_ + (1 - beta2) * g * g
            M -= learning_rate * (m_ / (1 - beta1**t)) / (np.sqrt(v_ / (1 - beta2**t)) + 1e-8)
    return QueryAdapter(M.astype(np.float32), space)
