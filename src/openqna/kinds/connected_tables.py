"""Connecting a table in the user's own ClickHouse/MyScale or PostgreSQL as a knowledge base (``openqna table connect``).

What a connected table is and how it is searched is ``kb.connected_search``; this is the use case that
reads the table's schema, checks the embedder against its vectors and records the knowledge base.
"""

from __future__ import annotations

from openqna import settings
from openqna.connected import open_engine
from openqna.connected.engine import parse_url, usable_index
from openqna.kb.connected_search import SECRET, ConnectedTable, encrypted, typed_columns
from openqna.kb.service import Service
from openqna.models.embedder import get_embedder
from openqna.records import InvalidArgument


def connect_table(service: Service, name: str, url: str, table: str, *, vector: str, text: list[str],
                  title: str | None = None, embedder: str = "local", metric: str = "cosine",
                  description: str = "") -> ConnectedTable:
    """Connect ``table`` as knowledge base ``name``; nothing is copied and nothing is written to the engine.

    The returned table says which vector index its searches use (``index``), or, when it has none for
    ``metric``, the statements that would build one (``suggested_index``); both are kept in its settings.
    """
    if metric not in ("cosine", "l2"):
        raise InvalidArgument("metric must be cosine or l2", target="metric")
    if not text:
        raise InvalidArgument("name at least one --text column: the text an LLM reads from each row")
    connection, password = parse_url(url)
    engine = open_engine(connection, password, timeout=settings.connected_timeout())
    try:
        described = engine.describe(table)
        if not described:
            raise InvalidArgument(f"there is no table {table!r} at {connection.masked_url}", target="table")
        by_name = {c.name: c for c in described}
        vec = by_name.get(vector)
        if vec is None or vec.dim is None:
            vectors = [c.name for c in described if c.dim is not None] or ["none"]
            raise InvalidArgument(f"--vector must name a vector column of {table}; its vector columns: "
                                  f"{', '.join(vectors)}", target="vector")
        for column in text + ([title] if title else []):
            if column not in by_name or by_name[column].type != "String":
                raise InvalidArgument(f"text and title columns must be String columns of {table}; "
                                      f"'{column}' is not", target="text")
        try:
            model = get_embedder(embedder)
        except (RuntimeError, ValueError) as exc:
            raise InvalidArgument(str(exc), target="embedder") from None
        dim = engine.vector_dim(table, vec)
        if dim != model.dim:
            raise InvalidArgument(f"the embedder '{embedder}' ({model.name}) writes {model.dim} dimensions and "
                                  f"{table}.{vector} holds {dim or 'no'} vectors of {dim}: they must match, so "
                                  "name the embedder that wrote the table's vectors", target="embedder")
        count = engine.count(table)
        index = usable_index(engine.vector_indexes(table, vector), metric)  # type: ignore[arg-type]
        ddl = "" if index else engine.index_ddl(table, vector, metric, dim)  # type: ignore[arg-type]
    finally:
        engine.close()
    info = ConnectedTable(connection.engine, connection.masked_url, table, vector, dim, metric, embedder,
                          [{"name": c.name, "type": c.engine_type, "comment": c.comment} for c in described],
                          index.to_json() if index else None, ddl)
    columns = [{"name": c.name, "type": c.type} for c in typed_columns(described)]
    secret = encrypted(service.store, password)
    project = service.create_project(name, description=description or f"rows of {table}")
    project.settings.update({"schema": {"columns": columns, "text": text, "title": title},
                             "connected": info.to_json(), "connected_rows": count})
    if secret is not None:
        project.settings[SECRET] = secret
    service.store.update_project(project)
    return info
