"""Tables in the user's own ClickHouse/MyScale or PostgreSQL: the engine seam (``engine``) and its engines.

``open_engine`` is the front door: it imports the engine a connection names, and nothing else, so a
server that never connects a table never loads a database client.
"""

from __future__ import annotations

from openqna.connected.engine import Connection, TableEngine


def open_engine(connection: Connection, password: str, *, timeout: float) -> TableEngine:
    """The engine behind ``connection``; ``timeout`` bounds each query, in seconds."""
    if connection.engine == "postgresql":
        from openqna.connected.pgvector import PostgresTable

        return PostgresTable(connection, password, timeout)
    from openqna.connected.clickhouse import ClickHouseTable, chdb_client, http_client

    client = (chdb_client(connection, timeout) if connection.engine == "chdb"
              else http_client(connection, password, timeout))
    return ClickHouseTable(client, timeout)
