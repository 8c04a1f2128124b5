"""Connected tables: knowledge bases that stay in the user's own ClickHouse/MyScale or PostgreSQL table.

``kinds.connected_tables.connect_table`` reads the table's schema from the engine, checks that the named embedder writes
vectors of the vector column's dimension, and records the table as a knowledge base of kind table
whose settings say where it lives (``connected``, with the URL's password masked) and hold the
password encrypted (``connected_secret``), never shown again.  ``ConnectedTables.search`` answers the
tool surfaces' searches: the subject embedded by that embedder, ``where_str`` parsed by the allow-list
parser, then the engine's own vector search with the filter's values bound (``connected.engine``), through the
table's vector index when it has one for the connection's metric (looked up again whenever the engine is
opened, so an index built after ``table connect`` is used from the server's next start).
openqna never writes to a connected table.

The password is encrypted with Fernet (AES-128-CBC with an HMAC) under ``OPENQNA_SECRET_KEY``, or
else under a key kept in ``secret.key`` beside the embedded store (created on first need, mode 0600);
replicas that share a PostgreSQL store share ``OPENQNA_SECRET_KEY``.  A process that finds no key makes its
own, so a key file made for a PostgreSQL store is announced on stderr (a process run from another folder
makes another), and a password the process's key cannot decrypt is the table's engine being unavailable,
in words that name the key, not a crash on every search.  A table without a password (chdb's,
or one whose user needs none) stores none and never needs the key.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openqna import settings
from openqna.connected import open_engine
from openqna.connected.engine import (
    Connection,
    EngineUnavailable,
    TableColumn,
    TableEngine,
    VectorIndex,
    usable_index,
)
from openqna.filters.nodes import Column, Filter
from openqna.models.embedder import Embedder, get_embedder
from openqna.records import InvalidArgument, QnA
from openqna.store import Project, Store
from openqna.turns import paused

SECRET = "connected_secret"
log = logging.getLogger("openqna.kb.connected_search")


@dataclass(frozen=True)
class ConnectedTable:
    """A connected table as ``settings["connected"]`` records it (no secret here)."""

    engine: str
    url: str  # masked
    table: str
    vector: str
    dim: int
    metric: str
    embedder: str  # the spec given to get_embedder ("local", "openai", ...)
    columns: list[dict[str, str]]  # every column the engine described: name, engine type, comment
    index: dict[str, Any] | None = None  # the vector index ``table connect`` found for the metric (VectorIndex)
    suggested_index: str = ""  # without one: the DDL that would build it

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "ConnectedTable":
        return cls(**raw)


def fernet(store: Store) -> Any:
    """The cipher of connected tables' passwords: ``OPENQNA_SECRET_KEY``, else ``secret.key`` (made if missing)."""
    from cryptography.fernet import Fernet

    key = settings.secret_key()
    if not key:
        embedded = getattr(store, "directory", None)
        path = key_file(store)
        directory = path.parent
        if not path.exists():
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(Fernet.generate_key())
            if embedded is None:  # a shared store: a process elsewhere makes a key of its own and cannot decrypt
                log.warning("created a new secret key for connected tables' passwords at %s; every process sharing "
                            "this PostgreSQL store needs the same key: set OPENQNA_SECRET_KEY to its content in each "
                            "(docs/settings.md)", path.resolve())
        key = path.read_text().strip()
    return Fernet(key.encode())


def key_file(store: Store) -> Path:
    """Where the key of ``store``'s connected tables is kept without ``OPENQNA_SECRET_KEY``: beside an embedded store,
    else (PostgreSQL) in this process's ``OPENQNA_DATA``."""
    return Path(getattr(store, "directory", None) or settings.data()) / "secret.key"


def carry_secret_key(source: Store, target: Store) -> str | None:
    """After ``openqna migrate``: the key that decrypts the connected tables' passwords copied from ``source`` put
    beside an embedded ``target`` that has none (a server there would make a new key, silently, and answer those
    tables 503), or what its operator must do (a PostgreSQL target; a target with a key of its own); None when there
    is nothing to do."""
    tables = [p.name for p in source.list_projects() if p.settings.get(SECRET)]
    if not tables:
        return None
    if settings.secret_key():
        return ("the connected tables' passwords in the copy are encrypted with OPENQNA_SECRET_KEY: serve the target "
                "with the same key")
    key = key_file(source)
    if not key.exists():
        return None
    if getattr(target, "directory", None) is None:
        return (f"the connected tables' passwords in the copy ({', '.join(tables)}) are encrypted with {key}: give "
                f"every process on the PostgreSQL store that key, OPENQNA_SECRET_KEY=$(cat {key}) (docs/postgresql.md)")
    there = key_file(target)
    if not there.exists():
        fd = os.open(there, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.read_bytes())
        return f"copied {key} to {there}: the connected tables' passwords in the copy are encrypted with it"
    if there.read_bytes().strip() == key.read_bytes().strip():
        return None
    return (f"warning: {there} is another key than {key}, so the passwords of the connected tables copied "
            f"({', '.join(tables)}) cannot be decrypted there (503 engine_unavailable): put {key} in its place if the "
            "target has no connected tables of its own, else connect those tables again there")


def encrypted(store: Store, password: str) -> str | None:
    """What a connected table keeps of its password: None without one, so that it never needs the key."""
    return fernet(store).encrypt(password.encode()).decode() if password else None


def decrypted(store: Store, name: str, info: ConnectedTable, token: str | None) -> str:
    """The password of connected table ``name`` from its stored ``token`` ('' without one).  A chdb table's token is
    never read: chdb takes no password, and a chdb table connected by an earlier openqna holds an encrypted empty
    one, under whichever key that process had."""
    from cryptography.fernet import InvalidToken

    if not token or info.engine == "chdb":
        return ""
    try:
        return str(fernet(store).decrypt(token.encode()).decode())
    except InvalidToken:
        raise EngineUnavailable(f"The stored password of connected table '{name}' cannot be decrypted with this "
                                "server's secret key: every process sharing a store needs the same "
                                "OPENQNA_SECRET_KEY (docs/settings.md). Its operator should set it, or connect the "
                                "table again.") from None


def typed_columns(described: list[TableColumn]) -> list[Column]:
    """The columns where_str may name: those of a type it reads and a plain identifier as a name."""
    out = []
    for c in described:
        try:
            out.append(Column(c.name, c.type)) if c.type is not None else None
        except ValueError:
            continue
    return out


def connected(project: Project) -> ConnectedTable | None:
    raw = project.settings.get("connected")
    return ConnectedTable.from_json(raw) if raw else None


class ConnectedTables:
    """One open engine per connected table, opened on its first search (and after a reconnect)."""

    def __init__(self, store: Store, embedder: Embedder):
        self.store = store
        self.embedder = embedder
        self.engines: dict[str, tuple[str, TableEngine, VectorIndex | None]] = {}
        self.lock = threading.Lock()

    def engine(self, project: Project, info: ConnectedTable) -> tuple[TableEngine, VectorIndex | None]:
        """The table's open engine and the vector index its searches use (None: an exact scan)."""
        stamp = repr(project.settings.get(SECRET)) + info.url + info.table
        with self.lock:
            held = self.engines.get(project.name)
            if held is not None and held[0] == stamp:
                return held[1], held[2]
            if held is not None:
                del self.engines[project.name]
                held[1].close()
            engine, index = self.open(project, info)
            self.engines[project.name] = (stamp, engine, index)
            return engine, index

    def open(self, project: Project, info: ConnectedTable) -> tuple[TableEngine, VectorIndex | None]:
        """A new engine on the table, closed again if it fails (a search that fails opens another next time)."""
        password = decrypted(self.store, project.name, info, project.settings.get(SECRET))
        engine = open_engine(Connection(info.engine, _unmasked(info.url)), password,  # type: ignore[arg-type]
                             timeout=settings.connected_timeout())
        try:
            engine.describe(info.table)  # the engine learns the columns' own types
            index = usable_index(engine.vector_indexes(info.table, info.vector), info.metric)  # type: ignore[arg-type]
        except Exception:
            engine.close()
            raise
        return engine, index

    def model(self, info: ConnectedTable) -> Embedder:
        model = get_embedder(info.embedder)
        if model.dim != info.dim:
            raise InvalidArgument(f"this knowledge base's embedder writes {model.dim} dimensions and its table "
                                  f"holds {info.dim}; reconnect it with the embedder that wrote the vectors")
        return model

    def search(self, project: Project, subject: str, flt: Filter | None, columns: list[Column],
               limit: int) -> list[tuple[QnA, float]]:
        info = connected(project)
        assert info is not None
        schema = project.settings["schema"]
        text, title = list(schema["text"]), schema.get("title")
        limit = min(limit, settings.tools_max_limit())
        query = self.model(info).embed([subject])[0]
        reads = columns + [Column(n, "String") for n in text if all(c.name != n for c in columns)]
        try:
            with paused():  # the engine's round trips: no Python work of this thread (``openqna.turns``)
                engine, index = self.engine(project, info)
                rows = engine.nearest(info.table, info.vector, info.metric, query, flt, reads,  # type: ignore[arg-type]
                                      limit, index)
        except EngineUnavailable as exc:  # the operator's to fix (a key, a server, a chdb directory): one line
            log.warning("connected table %s: %s", project.name, exc.message)
            raise
        out = []
        for fields, distance in rows:
            body = "\n\n".join(str(fields[n]) for n in text if fields.get(n))
            record_id = fields.get("id")
            record = QnA([str(fields[title])] if title and fields.get(title) else [], body,
                         id=record_id if isinstance(record_id, int) else None, source=info.table, kind="row",
                         fields={c.name: fields[c.name] for c in columns})
            score = 1.0 - distance / 2 if info.metric == "cosine" else 1.0 / (1.0 + distance)
            out.append((record, round(max(0.0, min(1.0, score)), 4)))
        return out

    def drop(self, name: str) -> None:
        """Close the engine of a knowledge base that was deleted (the table itself is untouched)."""
        with self.lock:
            held = self.engines.pop(name, None)
        if held is not None:
            held[1].close()

    def close(self) -> None:
        with self.lock:
            for _, engine, _ in self.engines.values():
                engine.close()
            self.engines.clear()


def _unmasked(url: str) -> str:
    return url.replace(":***@", "@", 1)
