"""What every ``openqna`` command shares: the ``--data`` option, opening the store, and failing with one line."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, NoReturn

import click

from openqna import settings

if TYPE_CHECKING:
    from openqna.kb.catalog import Catalog, Store
    from openqna.kb.service import Service

data_option = click.option("--data", "data_dir", envvar="OPENQNA_DATA", default=settings.data(),
                           show_default=True, show_envvar=True,
                           help=f"Directory of the embedded store (OPENQNA_DATA when set, else {settings.data.default}).")


def open_store(data_dir: str, create: bool) -> Store:
    """The store in ``data_dir``.  A command that only reads says so when there is none, rather than
    creating an empty one (a CLI run from the wrong folder); a command that writes says where it made one."""
    from openqna.kb.catalog import embedded_dir, open_data, store_exists, store_file
    from openqna.records import OpenQnAError

    try:
        exists = store_exists(data_dir)
        if not exists and not create:
            no_store(embedded_dir(data_dir))
        store = open_data(data_dir)
    except OpenQnAError as exc:  # an OPENQNA_STORE that names no store, a PostgreSQL store that cannot be reached
        fail(exc.message)
    if not exists:
        click.echo(f"created a new openqna store at {store_file(embedded_dir(data_dir))}", err=True)
    return store


def no_store(data_dir: str, fix: str | None = None) -> NoReturn:
    """Exit (code 1) saying where the store was looked for (and ``fix``, when the command names it otherwise than
    with --data)."""
    from openqna.kb.catalog import no_store_message

    click.echo(f"error: {no_store_message(data_dir, fix) if fix else no_store_message(data_dir)}", err=True)
    sys.exit(1)


def open_catalog(data_dir: str, create: bool = False) -> Catalog:
    """The knowledge bases without a model, for the commands that embed nothing."""
    from openqna.kb.catalog import Catalog

    return Catalog(open_store(data_dir, create))


def open_service(data_dir: str, create: bool = False) -> Service:
    from openqna.kb.service import Service
    from openqna.models.embedder import get_embedder

    try:
        embedder = get_embedder()
    except (RuntimeError, ValueError) as exc:  # an unknown OPENQNA_EMBEDDER, a model not installed
        fail(str(exc))
    return Service(open_store(data_dir, create), embedder)


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def live_or_named(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A ``--deployment``: ``test`` in any case is the live state (``Test`` was "not found" here and the live state
    in the Azure API), else the deployment's name as given."""
    from openqna.kb.catalog import LIVE

    return LIVE if value.lower() == LIVE else value
