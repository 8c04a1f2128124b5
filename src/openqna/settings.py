"""Settings in one declarative table: environment variable, default, meaning, type.

Every ``OPENQNA_`` variable is read here and nowhere else.  Each setting is a typed
accessor: ``settings.tools_max_limit()`` is an ``int``, read on each call (so a test or an
operator can change it) and parsed by the table's parser, which names the variable when a
value is bad.  The CLI reads its defaults from here and the settings table of ``docs/settings.md`` is
tested against the same list, so a setting cannot exist without being documented.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class SettingError(ValueError):
    """A setting's value is not what it must be; the message names the variable and what it expected."""


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One environment variable; calling it returns its parsed value now."""

    env: str
    default: str
    help: str
    parse: Callable[[str], T]

    def __call__(self) -> T:
        raw = os.environ.get(self.env, self.default)
        try:
            return self.parse(raw)
        except ValueError as exc:  # the parser says what it expected; the message names the variable
            shown = f"{len(raw)} characters (a secret is not shown)" if self.secret else repr(raw)
            raise SettingError(f"{self.env} must be {exc}, not {shown}") from None

    @property
    def secret(self) -> bool:
        """Whether the value is a secret, which an error must not print (it goes to logs)."""
        return self.env.endswith(("_KEY", "_SECRET", "_PASSWORD", "_TOKEN"))


def text(raw: str) -> str:
    return raw


def whole(minimum: int, unit: str = "") -> Callable[[str], int]:
    """A parser of whole numbers (of ``unit``), ``minimum`` or more."""
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise ValueError(f"a whole number{' of ' + unit if unit else ''} ({minimum} or more)")
        return value
    return parse


def seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not math.isfinite(value) or value <= 0:
        raise ValueError("a positive number of seconds")
    return value


def milliseconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1000:
        raise ValueError("a number of milliseconds from 0 to 1000")
    return value


def one_of(*options: str) -> Callable[[str], str]:
    """A parser that accepts exactly one of ``options``."""
    def parse(raw: str) -> str:
        if raw not in options:
            raise ValueError(" or ".join(f"`{o}`" for o in options))
        return raw
    return parse


def threads_or_auto(raw: str) -> int:
    """``auto`` (eight per CPU core, which measured best with batching) or a whole number of threads."""
    if raw.strip().lower() == "auto":
        return 8 * (os.cpu_count() or 1)
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError("`auto` or a whole number of threads (1 or more)")
    return value


def json_object(raw: str) -> dict[str, Any]:
    """A JSON object; empty means ``{}``."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ValueError("a JSON object")
    return value


def json_strings(raw: str) -> dict[str, str]:
    """A JSON object whose values are strings (model names); empty means ``{}``."""
    value = json_object(raw)
    if not all(isinstance(v, str) and v for v in value.values()):
        raise ValueError("a JSON object of model names (strings), e.g. {\"curie\": \"llama3\"}")
    return value


def json_token_counts(raw: str) -> dict[str, int]:
    """A JSON object whose values are whole numbers of tokens, 1 or more; empty means ``{}``."""
    value = json_object(raw)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value.values()):
        raise ValueError("a JSON object of whole numbers of tokens (1 or more), e.g. {\"*\": 8192}")
    return value


def rate(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < math.inf:
        raise ValueError("a number of requests a second, 0 or more (0: no limit)")
    return value


def share_or_off(raw: str) -> float | None:
    """A share from 0 to 1, or nothing (empty: off)."""
    if not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise ValueError("a share from 0 to 1, such as 0.1 (empty: off)")
    return value


def fernet_key(raw: str) -> str:
    """Empty, or a Fernet key: 32 bytes in URL-safe base64 (``cryptography`` refuses any other, on every search)."""
    import base64
    import binascii

    if not raw:
        return raw
    try:
        size = len(base64.urlsafe_b64decode(raw.encode("ascii")))
    except (UnicodeEncodeError, binascii.Error):
        size = 0
    if size != 32:
        raise ValueError("a Fernet key, 32 bytes in URL-safe base64 (empty: a key kept in secret.key)")
    return raw


def switch(raw: str) -> bool:
    """On unless ``0``."""
    return raw != "0"


MODEL_DIR_DEFAULT = "~/.cache/openqna/models"


def directory(raw: str) -> Path:
    """A directory, ``~`` expanded; empty means the default."""
    return Path(raw or MODEL_DIR_DEFAULT).expanduser()


data = Setting("OPENQNA_DATA", "./data", "Directory of the embedded store (SQLite database and caches).", text)
store = Setting("OPENQNA_STORE", "", "Where the store lives: empty for the embedded SQLite store in OPENQNA_DATA, or PostgreSQL (with pgvector 0.8+) as a `postgresql://user:password@host:5432/db` URL (`postgres://` too) or a libpq `host=... dbname=...` string; a directory keeps the SQLite store there instead. A URL of any other scheme is refused, not taken for a directory.", text)
pg_pool_size = Setting("OPENQNA_PG_POOL_SIZE", "5", "Most connections one process keeps open to PostgreSQL.", whole(1, "connections"))
job_poll_seconds = Setting("OPENQNA_JOB_POLL_SECONDS", "1", "How often each process's job worker looks for jobs that other processes accepted (a job a process accepts itself wakes its worker at once).", seconds)
job_lease_seconds = Setting("OPENQNA_JOB_LEASE_SECONDS", "30", "Lease of a running job, renewed every third of it; a job whose worker died is marked `failed` once its lease runs out.", seconds)
refresh_poll_seconds = Setting("OPENQNA_REFRESH_POLL_SECONDS", "60", "How often each `openqna serve` process looks for URL sources due to refresh (`openqna source-refresh`); a due check is claimed by one process and run as a job.", seconds)
host = Setting("OPENQNA_HOST", "127.0.0.1", "Address `openqna serve` binds; beyond loopback it refuses to start without API keys.", text)
port = Setting("OPENQNA_PORT", "8000", "Port `openqna serve` listens on.", whole(0))
embedder = Setting("OPENQNA_EMBEDDER", "local", "`local` (bundled all-MiniLM-L6-v2 on onnxruntime: fast), `accurate` (all-mpnet-base-v2 on onnxruntime beside the multilingual universal sentence encoder, the `openqna[mpnet]` extra: the most accurate, several times slower per question; see docs/confidence.md, 'Choosing the embedding model'), `accurate-fast` (the same pair with mpnet's int8 weights, quantized on first use: about two thirds of `accurate`'s time a question, its top-1 within a point on most sets; see docs/confidence.md), `balanced` (MiniLM beside the universal sentence encoder: about twice the default's cost per question), `fast` (the same MiniLM with int8 weights, quantized on first use: about half the default's cost per question and when indexing, slightly different rankings; see docs/confidence.md), `mpnet` (all-mpnet-base-v2 alone), `mpnet-fast` (mpnet alone with `accurate-fast`'s int8 weights: about 3x the default's time a question, most of `accurate`'s gain on FAQ pages; see docs/confidence.md) or `openai` (an OpenAI-compatible /v1/embeddings endpoint). `/healthz` names the server's (`model`, `embedder`), `GET /openqna/projects` each project's (`embedder`).", text)
embeddings_base_url = Setting("OPENQNA_EMBEDDINGS_BASE_URL", "https://api.openai.com/v1", "Base URL of the OpenAI-compatible embeddings endpoint, e.g. `http://localhost:11434/v1`.", text)
embeddings_api_key = Setting("OPENQNA_EMBEDDINGS_API_KEY", "", "Bearer key for that endpoint.", text)
embeddings_model = Setting("OPENQNA_EMBEDDINGS_MODEL", "text-embedding-3-small", "Model name sent to that endpoint.", text)
llm_base_url = Setting("OPENQNA_LLM_BASE_URL", "", "OpenAI-compatible endpoint that writes `/v1/answers` completions (e.g. `http://localhost:11434/v1`); empty: the offline extractive completer answers.", text)
llm_api_key = Setting("OPENQNA_LLM_API_KEY", "", "Bearer key for that endpoint.", text)
llm_api = Setting("OPENQNA_LLM_API", "chat", "`chat` (`/chat/completions`) or `completions` (`/completions`).", text)
llm_model = Setting("OPENQNA_LLM_MODEL", "", "Model sent to the endpoint when OPENQNA_LLM_MODEL_MAP has no entry for the requested engine.", text)
llm_model_map = Setting("OPENQNA_LLM_MODEL_MAP", "{}", "JSON map from requested engine names to the endpoint's models, e.g. `{\"curie\": \"llama3\"}`.", json_strings)
llm_timeout = Setting("OPENQNA_LLM_TIMEOUT", "60", "Seconds a completion from that endpoint may take (each call; an endpoint that ignores `n` is called again for each further choice); one that takes longer is a 502 that says so.", seconds)
model_context = Setting("OPENQNA_MODEL_CONTEXT", "{}", "JSON map of model name to context window in tokens for the Answers budget (`\"*\"` for the default; ada/babbage/curie/davinci are 2049).", json_token_counts)
model_dir = Setting("OPENQNA_MODEL_DIR", MODEL_DIR_DEFAULT, "Where the bundled model's ONNX export is kept.", directory)
threads = Setting("OPENQNA_THREADS", "2", "Threads for the local embedding model when it embeds one question alone or imports; questions that arrive together are embedded as one batch on one thread (bench/batching.py).", whole(0, "threads"))
embed_batch = Setting("OPENQNA_EMBED_BATCH", "8", "Most questions embedded in one call of the model when they arrive at once (`openqna serve` under load, bench/batching.py), and scored in one matrix product on a knowledge base small enough to score every record (index/products.py); 1: every question alone. 8 rather than 16: at concurrency 16 the questions then form two batches in turn, one embedded while the other is ranked, instead of one batch that leaves the other core idle (bench/tail.py: 1.1-1.25x the requests/s, p99 0.7-0.87x, three runs; with the products and batches grouped by length, 16 against 8: 0.87x and 1.07x the requests/s in two runs, no clear difference).", whole(1, "questions"))
embed_batch_wait_ms = Setting("OPENQNA_EMBED_BATCH_WAIT_MS", "0", "How long the first question of a batch waits for others to join it, in milliseconds; 0: a question is embedded at once when the model is idle, and the questions that arrive while it is busy form the next batch.", milliseconds)
query_threads = Setting("OPENQNA_QUERY_THREADS", "auto", "Questions `openqna serve` works on at once (embedding and ranking); more wait their turn. `auto`: eight per CPU core, so that the questions of a busy server meet in batches (OPENQNA_EMBED_BATCH); with batching the threads wait for the model instead of contending for the CPU, and they take turns at their Python work, one thread per two cores at a time, so that they leave the interpreter to the model's worker (bench/throughput.py); a thread waiting for the model or the database gives its turn up.", threads_or_auto)
public_url = Setting("OPENQNA_PUBLIC_URL", "", "The server's URL as clients reach it, with the path a proxy serves it under (`https://kb.example.org/qna`): put in the tool OpenAPI documents' `servers` (for GPT Actions) and in the authoring API's `Operation-Location`, `nextLink` and export `resultUrl`; default: the address each request arrived at (never its `Host` header unless `OPENQNA_ALLOWED_HOSTS` checks it). Set it behind a reverse proxy: `X-Forwarded-Host` and `X-Forwarded-Prefix` are never read, so without it those links pair the proxy's scheme with this server's own address (`https://127.0.0.1:8000`).", text)
allowed_hosts = Setting("OPENQNA_ALLOWED_HOSTS", "", "Host names the server answers to, comma-separated (`qna.example.com,*.corp.example`; Starlette's `TrustedHostMiddleware`): a request with any other `Host` gets 400, and links the server builds (`Operation-Location`, export `resultUrl`, the tools' OpenAPI `servers`) may then use the request's `Host`. Empty (the default): every host is answered, and links use `OPENQNA_PUBLIC_URL`, else the address the server was reached on, never the `Host` header.", text)
trusted_proxies = Setting("OPENQNA_TRUSTED_PROXIES", "", "Addresses of the reverse proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed, comma-separated (uvicorn's `forwarded_allow_ips`, e.g. `127.0.0.1` or `10.0.0.0/8`); empty (the default): those headers are ignored from everyone. `X-Forwarded-Host` and `X-Forwarded-Prefix` are read from no one: behind a proxy, `OPENQNA_PUBLIC_URL` says the host and path links use.", text)
fetch_allow = Setting("OPENQNA_FETCH_ALLOW", "", "Hosts and CIDR ranges that URL sources and `fileUri` imports may fetch from although they are not public addresses, comma-separated (e.g. `wiki.corp.example,10.20.0.0/16`); every other loopback, private, link-local or reserved address is refused.", text)
token_issuers = Setting("OPENQNA_TOKEN_ISSUERS", "", "Identity providers whose OAuth2/OpenID Connect bearer tokens are accepted beside API keys: a JSON list of `{\"issuer\", \"audience\", \"role_claim\", \"role_map\", ...}` objects (see docs/tokens.md); empty: keys only.", text)
tools_max_limit = Setting("OPENQNA_TOOLS_MAX_LIMIT", "20", "Largest `limit` the tool endpoints accept.", whole(1, "results"))
exact_search_max = Setting("OPENQNA_EXACT_SEARCH_MAX", "30000", "Knowledge bases with at most this many vectors (one per question, one per answer or passage) score every record exactly; larger ones score candidates: the nearest vectors from a faiss IVF index plus keyword matches.", whole(0, "vectors"))
pg_vector_search = Setting("OPENQNA_PG_VECTOR_SEARCH", "memory", "On PostgreSQL, where a large knowledge base's questions find their nearest vectors: `memory` (the faiss index each server process holds next to the vectors it rescores with; the faster, see bench/results.md) or `pgvector` (PostgreSQL's HNSW index, built in the background on first need). Filtered questions always search in memory.", one_of("memory", "pgvector"))
multilingual = Setting("OPENQNA_MULTILINGUAL", "auto", "Vectors in a second, multilingual space (multilingual-e5-small, which reads Chinese, Japanese and Korean) beside the bundled English model's, for questions written in those languages: `auto` gives them to knowledge bases with Chinese, Japanese or Korean text (at least 5% of the records with a question or answer at least 30% in them), `on` to every knowledge base (a Chinese question then also finds the English QnA that answers it), `off` to none. A question in the other language from most of a knowledge base's records (a Chinese question of an English KB with `on`, an English question of a Chinese KB) is ranked on the space's vectors and the universal sentence encoder's together (stored beside them) with a cross-lingual calibration. Existing knowledge bases gain them with `openqna reembed`, or on the next write whose CJK records reach that share (an import of their content); until then such questions are ranked by their keywords.", one_of("auto", "on", "off"))
kb_adapt = Setting("OPENQNA_KB_ADAPT", "1", "Fit each knowledge base's adaptation from its own alternate questions when its index is first searched: its typical in-scope score (so the confidence threshold means the same on every KB) and a light classifier used only where held-out alternate questions show it helps (0 to turn off).", switch)
header_timeout = Setting("OPENQNA_HEADER_TIMEOUT", "10", "Seconds a client has to send a request's headers, from its connection (or the request's first byte) on; a connection past it is closed (`api/deadlines.py`: a client trickling its headers holds no socket for ever).", seconds)
body_timeout = Setting("OPENQNA_BODY_TIMEOUT", "60", "Seconds a client has to send a request's body once its headers are in; a connection past it is closed and the request ends as the client leaving (4 MiB, the largest body, takes 34 s at 1 Mbit/s).", seconds)
slow_requests_per_address = Setting("OPENQNA_SLOW_REQUESTS_PER_ADDRESS", "32", "Most slow requests one client address may have at once (a request is slow once it has been arriving for a second: connected, or begun, and its headers or body not all in); a request that grows slow beyond it, and every new connection from the address while it is at the cap, is answered 503 with `Retry-After` and closed (`api/slow_requests.py`: a slowloris from one address holds that many sockets, not thousands). Connections from `OPENQNA_TRUSTED_PROXIES` are not counted, since all their clients share the proxy's address; behind a NAT or an untrusted proxy every client shares one address's cap; 0: no cap.", whole(0, "requests"))
rate_limit = Setting("OPENQNA_RATE_LIMIT", "0", "Requests a second each caller may make on average (`api/rate_limits.py`): a caller is the API key or bearer token it sends, else its address (behind `OPENQNA_TRUSTED_PROXIES`, the forwarded one); past it, the caller's surface's own 429 with `Retry-After`, which the Azure SDK and the `openai` client wait for and retry. `/healthz` and the console's files are not counted, the console's API calls are. Each server process counts for itself. 0 (the default): no limit.", rate)
rate_burst = Setting("OPENQNA_RATE_BURST", "0", "Requests a caller may make at once before `OPENQNA_RATE_LIMIT` holds it back (the size of its token bucket); 0: twice the rate, at least 1.", rate)
connected_timeout = Setting("OPENQNA_CONNECTED_TIMEOUT", "10", "Seconds a search of a connected table (`openqna table connect`) may take in its ClickHouse or PostgreSQL server before the tools answer 504.", seconds)
secret_key = Setting("OPENQNA_SECRET_KEY", "", "Fernet key (`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`) that encrypts connected tables' passwords in the store; empty: a key kept in `secret.key` beside the embedded store (with a PostgreSQL store, in `OPENQNA_DATA`; a process that makes one there says so on stderr). Every process sharing a PostgreSQL store, servers and CLI alike, needs the same key: a server whose key cannot decrypt a table's password answers its searches 503 `engine_unavailable`, naming this setting.", fernet_key)
near_topic = Setting("OPENQNA_NEAR_TOPIC", "", "Off when empty (the default). A share from 0 to 1, such as 0.1: each adapted knowledge base (`OPENQNA_KB_ADAPT`) reads its confidences lower, by as little as keeps this share of its own held-out alternate questions, each asked without the record it belongs to, from an answer at 0.5 or more (by at most 6 logit units). Such questions stand for the ones users ask about the KB's subject that it holds no answer for, which the default scale answers at 0.5 up to half the time on KBs of alike records; the price is right answers at 0.5 (docs/confidence.md has both, measured). This is the server's default: a project overrides it with a share of its own or `off` (`openqna calibrate PROJECT --near-topic`, `PUT /openqna/projects/{project}/near-topic`, the console's Improve page).", share_or_off)
typo_tolerance = Setting("OPENQNA_TYPO_TOLERANCE", "1", "Read a misspelt word of a question as the knowledge base's word one edit away (two for words of 8 letters or more) when the KB does not hold it, a Chinese character typed as a homophone as the KB's character of that syllable, and a Japanese word in hiragana or katakana as the KB writes it (0 to turn off).", switch)
question_focus = Setting("OPENQNA_QUESTION_FOCUS", "1", "When a long message (12 words or more, a Chinese, Japanese or Korean character counting as two thirds of one; two sentences or more) gets no answer with confidence 0.5 or more, also ask each of its asking sentences on its own, and give each answer the best confidence the message or one of those sentences gets it, so greetings and details around a question do not sink its confidence (0 to turn off; see docs/confidence.md).", switch)
versions_kept = Setting("OPENQNA_VERSIONS_KEPT", "10", "How many of a project's latest deployed versions keep their content, so that a deployment can be rolled back to them (`openqna deploy PROJECT DEPLOYMENT --version N`); a version a deployment holds is always kept. Each kept version stores a copy of the records and their vectors; older versions stay listed (`openqna deployments`) without their content.", whole(1, "versions"))
trained_max_mb = Setting("OPENQNA_TRAINED_MAX_MB", "512", "Memory for the trained models (`openqna train`) a server keeps loaded: each project's is loaded on its first question and the least recently used are dropped past this (a MiniLM project's model takes about 0.6 MB).", whole(1, "MB"))
sample = Setting("OPENQNA_SAMPLE", "1", "Load the sample knowledge base on the first `openqna serve` of an empty store (0 to skip).", switch)

SETTINGS: tuple[Setting[Any], ...] = (
    data, store, pg_pool_size, job_poll_seconds, job_lease_seconds, refresh_poll_seconds, host, port, embedder, embeddings_base_url,
    embeddings_api_key, embeddings_model, llm_base_url, llm_api_key, llm_api, llm_model, llm_model_map,
    model_context, model_dir, threads, embed_batch, embed_batch_wait_ms, query_threads, public_url, allowed_hosts,
    trusted_proxies, fetch_allow,
    token_issuers, tools_max_limit, exact_search_max, pg_vector_search, multilingual, kb_adapt, near_topic, typo_tolerance,
    question_focus, header_timeout, body_timeout, slow_requests_per_address,
    connected_timeout, secret_key, versions_kept, trained_max_mb, sample,
)


