"""Settings in one declarative table: environment variable, default, meaning.

The CLI reads defaults from here and the README's settings table is generated
from the same list, so a setting cannot exist without being documented.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    env: str
    default: str
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting("OPENQNA_DATA", "./data", "Directory of the embedded store (SQLite database and caches)."),
    Setting("OPENQNA_STORE", "", "Where the store lives: empty for the embedded SQLite store in OPENQNA_DATA, or a `postgresql://user:password@host:5432/db` URL (PostgreSQL with pgvector 0.8+)."),
    Setting("OPENQNA_PG_POOL_SIZE", "5", "Most connections one process keeps open to PostgreSQL."),
    Setting("OPENQNA_JOB_POLL_SECONDS", "1", "How often each process's job worker looks for jobs that other processes accepted (a job a process accepts itself wakes its worker at once)."),
    Setting("OPENQNA_JOB_LEASE_SECONDS", "30", "Lease of a running job, renewed every third of it; a job whose worker died is marked `failed` once its lease runs out."),
    Setting("OPENQNA_HOST", "127.0.0.1", "Address `openqna serve` binds; beyond loopback it refuses to start without API keys."),
    Setting("OPENQNA_PORT", "8000", "Port `openqna serve` listens on."),
    Setting("OPENQNA_EMBEDDER", "local", "`local` (bundled all-MiniLM-L6-v2 on onnxruntime: fast), `accurate` (all-mpnet-base-v2 on onnxruntime beside the multilingual universal sentence encoder, the `openqna[mpnet]` extra: the most accurate, several times slower per question; see 'Choosing the embedding model'), `mpnet` (all-mpnet-base-v2 alone) or `openai` (an OpenAI-compatible /v1/embeddings endpoint)."),
    Setting("OPENQNA_EMBEDDINGS_BASE_URL", "", "Base URL of the OpenAI-compatible embeddings endpoint, e.g. `http://localhost:11434/v1`."),
    Setting("OPENQNA_EMBEDDINGS_API_KEY", "", "Bearer key for that endpoint."),
    Setting("OPENQNA_EMBEDDINGS_MODEL", "", "Model name sent to that endpoint."),
    Setting("OPENQNA_LLM_BASE_URL", "", "OpenAI-compatible endpoint that writes `/v1/answers` completions (e.g. `http://localhost:11434/v1`); empty: the offline extractive completer answers."),
    Setting("OPENQNA_LLM_API_KEY", "", "Bearer key for that endpoint."),
    Setting("OPENQNA_LLM_API", "chat", "`chat` (`/chat/completions`) or `completions` (`/completions`)."),
    Setting("OPENQNA_LLM_MODEL", "", "Model sent to the endpoint when OPENQNA_LLM_MODEL_MAP has no entry for the requested engine."),
    Setting("OPENQNA_LLM_MODEL_MAP", "{}", "JSON map from requested engine names to the endpoint's models, e.g. `{\"curie\": \"llama3\"}`."),
    Setting("OPENQNA_MODEL_CONTEXT", "{}", "JSON map of model name to context window in tokens for the Answers budget (`\"*\"` for the default; ada/babbage/curie/davinci are 2049)."),
    Setting("OPENQNA_MODEL_DIR", "~/.cache/openqna/models", "Where the bundled model's ONNX export is kept."),
    Setting("OPENQNA_THREADS", "2", "Threads for the local embedding model."),
    Setting("OPENQNA_QUERY_THREADS", "auto", "Questions `openqna serve` works on at once (embedding and ranking); more wait their turn. `auto`: twice the CPU cores, which measured best (more threads only contend for the CPU)."),
    Setting("OPENQNA_PUBLIC_URL", "", "The server's URL as clients reach it (behind a TLS proxy): put in the tool OpenAPI documents' `servers` (for GPT Actions) and in the authoring API's `Operation-Location`, `nextLink` and export `resultUrl`; default: the URL each request arrived at."),
    Setting("OPENQNA_TOOLS_MAX_LIMIT", "20", "Largest `limit` the tool endpoints accept."),
    Setting("OPENQNA_EXACT_SEARCH_MAX", "30000", "Knowledge bases with at most this many vectors (one per question, one per answer or passage) score every record exactly; larger ones score candidates: the nearest vectors from a faiss IVF index plus keyword matches."),
    Setting("OPENQNA_PG_VECTOR_SEARCH", "memory", "On PostgreSQL, where a large knowledge base's questions find their nearest vectors: `memory` (the faiss index each server process holds next to the vectors it rescores with; the faster, see bench/results.md) or `pgvector` (PostgreSQL's HNSW index, built in the background on first need). Filtered questions always search in memory."),
    Setting("OPENQNA_KB_ADAPT", "1", "Fit each knowledge base's adaptation from its own alternate questions when its index is first searched: its typical in-scope score (so the confidence threshold means the same on every KB) and a light classifier used only where held-out alternate questions show it helps (0 to turn off)."),
    Setting("OPENQNA_SAMPLE", "1", "Load the sample knowledge base on the first `openqna serve` of an empty store (0 to skip)."),
)


def exact_search_max() -> int:
    """OPENQNA_EXACT_SEARCH_MAX, read on each use so a test or an operator can change it."""
    raw = get("OPENQNA_EXACT_SEARCH_MAX")
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"OPENQNA_EXACT_SEARCH_MAX must be a whole number of vectors (0 or more), not {raw!r}")
    return value


def pg_vector_search() -> str:
    """OPENQNA_PG_VECTOR_SEARCH: `memory` or `pgvector`."""
    raw = get("OPENQNA_PG_VECTOR_SEARCH")
    if raw not in ("memory", "pgvector"):
        raise ValueError(f"OPENQNA_PG_VECTOR_SEARCH must be `memory` or `pgvector`, not {raw!r}")
    return raw


def query_threads() -> int:
    """OPENQNA_QUERY_THREADS: how many questions are worked on at once."""
    raw = get("OPENQNA_QUERY_THREADS")
    if raw.strip().lower() == "auto":
        return 2 * (os.cpu_count() or 1)
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"OPENQNA_QUERY_THREADS must be `auto` or a whole number of threads (1 or more), not {raw!r}")
    return value


_DEFAULTS = {s.env: s.default for s in SETTINGS}


def get(env: str) -> str:
    """The setting's value now (read on each call, so a test or an operator can change it)."""
    return os.environ.get(env, _DEFAULTS[env])


@dataclass(frozen=True)
class Limits:
    """Request limits; each one answers a 400 that names it (see the README)."""

    question_chars: int = 1000
    top: int = 50
    body_bytes: int = 4 * 1024 * 1024
    text_records: int = 5
    text_record_chars: int = 5120
    text_answers_per_record: int = 3
    span_top: int = 10
    filter_pairs: int = 50
    prompts: int = 20


LIMITS = Limits()
