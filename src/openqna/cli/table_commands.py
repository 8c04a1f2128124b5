"""``openqna table``: typed tables loaded into openqna, and tables connected where they live."""

from __future__ import annotations

import os
from pathlib import Path

import click

from openqna.cli.common import data_option, fail, open_service
from openqna.records import OpenQnAError


@click.group()
def table() -> None:
    """Typed knowledge bases: tables with typed columns that where_str filters read."""


@table.command("create")
@click.argument("name")
@click.option("--column", "columns", multiple=True, required=True, metavar="NAME:TYPE",
              help="A column: String, Int64, Float64, Bool, DateTime or Array(String). Repeat.")
@click.option("--text", "text", multiple=True, required=True, help="A String column to embed and search. Repeat.")
@click.option("--title", default=None, help="A String column shown as each row's title.")
@click.option("--description", default="", help="What the table holds (shown to LLMs in the tool description).")
@data_option
def table_create(name: str, columns: tuple[str, ...], text: tuple[str, ...], title: str | None, description: str,
                 data_dir: str) -> None:
    """Create table NAME with typed columns (--column options); its --text columns are embedded and searched.

    Load rows with `openqna table load`; tools filter them with where_str over the columns.
    """
    from openqna.kinds.tables import TableSchema, create_table, parse_column

    try:
        schema = TableSchema([parse_column(c) for c in columns], list(text), title)
        create_table(open_service(data_dir, create=True), name, schema, description=description)
    except OpenQnAError as exc:
        fail(exc.message)
    click.echo(f"created table {name} with {len(columns)} columns")


@table.command("load")
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--source", default=None, metavar="NAME",
              help="What this load replaces: the rows loaded earlier under this source name (any case) become the "
                   "file's rows. Default: the file's name, so another file of that name (2024-02/products.csv after "
                   "2024-01/products.csv) replaces its rows; give each such file its own --source to keep both.")
@data_option
def table_load(name: str, file: Path, source: str | None, data_dir: str) -> None:
    """Load rows from a .jsonl, .csv or .parquet FILE; every row is checked before any is written.

    A load replaces the rows loaded earlier under its --source (default: the file's name): rows it no longer has are
    deleted and unchanged ones kept, so loading a corrected file again fixes the table. where_str filters read the
    source as the column `source`.
    """
    from openqna.kinds.tables import load_rows

    try:
        loaded = load_rows(open_service(data_dir), name, file.name, file.read_bytes(), source=source, progress=True)
    except OpenQnAError as exc:
        fail(exc.message)
    named = "" if source is None else f" as source {source.strip()}"
    click.echo(f"{name}: {loaded.rows} rows from {file.name}{named} ({loaded.embedded} texts embedded, "
               f"{loaded.deleted} stale rows deleted)")
    if loaded.replaced:
        earlier = "from a file named" if source is None else "as source"
        hint = (" (if they came from another file of that name, give each file its own --source NAME to keep both)"
                if source is None and loaded.deleted else "")
        click.echo(f"replaced the {loaded.replaced} rows loaded earlier {earlier} {loaded.replaced_source}{hint}")


@table.command("connect")
@click.argument("name")
@click.option("--url", required=True, help="clickhouse://USER[:PASSWORD]@HOST:8123/DB (clickhouses:// for TLS), "
              "postgresql://USER[:PASSWORD]@HOST:5432/DB, or chdb:///DIR. Use a read-only user.")
@click.option("--password-env", default=None, metavar="VAR", help="Read the password from this environment variable "
              "instead of the URL (keeps it out of shell history).")
@click.option("--table", "table_", required=True, help="TABLE or DATABASE.TABLE (SCHEMA.TABLE on PostgreSQL).")
@click.option("--vector", required=True, help="The column of vectors (Array(Float32), or pgvector's vector).")
@click.option("--text", "text", multiple=True, required=True, help="A String column whose text each hit returns. Repeat.")
@click.option("--title", default=None, help="A String column shown as each row's title.")
@click.option("--embedder", default="local", show_default=True,
              help="The embedder that wrote the table's vectors (as OPENQNA_EMBEDDER names them).")
@click.option("--metric", type=click.Choice(["cosine", "l2"]), default="cosine", show_default=True)
@click.option("--description", default="", help="What the table holds (shown to LLMs in the tool description).")
@data_option
def table_connect(name: str, url: str, password_env: str | None, table_: str, vector: str, text: tuple[str, ...],
                  title: str | None, embedder: str, metric: str, description: str, data_dir: str) -> None:
    """Connect a ClickHouse/MyScale or PostgreSQL (pgvector) table as knowledge base NAME, without copying it.

    Searches run in that database; openqna never writes to it. The password is stored encrypted and never
    shown again.
    """
    from openqna.kinds.connected_tables import connect_table

    if password_env:
        password = os.environ.get(password_env)
        if password is None:
            fail(f"the environment variable {password_env} is not set")
        url = with_password(url, password or "")
    try:
        info = connect_table(open_service(data_dir, create=True), name, url, table_, vector=vector, text=list(text),
                             title=title, embedder=embedder, metric=metric, description=description)
    except OpenQnAError as exc:
        fail(exc.message)
    click.echo(f"connected table {name}: {info.table} at {info.url}, {info.dim}-dimensional vectors in {info.vector}")
    if info.index:
        click.echo(f"vector index found: {info.index['name']} ({info.index['method']}, {info.metric}); searches use it")
    else:
        click.echo(f"no vector index for {info.metric} distance on {info.vector}: every search scans the whole table. "
                   f"To build one (run as the table's owner, not the read-only user):\n{info.suggested_index}")


def with_password(url: str, password: str) -> str:
    from urllib.parse import quote, urlsplit, urlunsplit

    parts = urlsplit(url)
    user, _, host = parts.netloc.rpartition("@")
    user = user.split(":")[0] or "default"
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))
