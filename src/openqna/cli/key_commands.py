"""``openqna keys``: API keys, stored hashed and shown once."""

from __future__ import annotations

import click

from openqna.cli.common import data_option, fail, open_catalog


@click.group()
def keys() -> None:
    """Manage API keys (stored hashed; a key is shown only when created)."""


@keys.command("create")
@click.option("--name", default="", help="A label to recognise the key by.")
@click.option("--role", type=click.Choice(["admin", "author", "query"]), default="admin", show_default=True)
@click.option("--project", "projects_", multiple=True,
              help="Restrict the key to this project (repeat the option for several).")
@data_option
def keys_create(name: str, role: str, projects_: tuple[str, ...], data_dir: str) -> None:
    """Create an API key and print it once (admin manages keys, author edits, query asks)."""
    from openqna.auth.keys import create_key

    store = open_catalog(data_dir, create=True).store
    first = not store.has_keys()
    key, secret = create_key(store, name=name, role=role, projects=list(projects_) or None)
    click.echo(secret)
    click.echo(f"created key {key.id} ({role}); it is shown only now", err=True)
    if first:  # every request needs a key from now on, which a reader of the docs' examples may not expect
        click.echo("this is the server's first key: from now on every request needs a key"
                   + ("" if role == "admin" and not projects_ else
                      "; no key can manage keys yet: make one with `openqna keys create --role admin`"), err=True)


@keys.command("list")
@data_option
def keys_list(data_dir: str) -> None:
    """List keys: id, role, projects (* for all), created, name; never the secret."""
    from openqna.auth.keys import list_keys

    for k in list_keys(open_catalog(data_dir).store):
        click.echo(f"{k.id}\t{k.role}\t{','.join(k.projects) if k.projects else '*'}\t{k.created}\t{k.name}")


@keys.command("revoke")
@click.argument("key_id")
@data_option
def keys_revoke(key_id: str, data_dir: str) -> None:
    """Revoke a key by its id (see `keys list`); it stops working on the next request."""
    from openqna.auth.keys import list_keys, revoke_key

    store = open_catalog(data_dir).store
    if not revoke_key(store, key_id):
        fail(f"no key with id {key_id}")
    click.echo(f"revoked key {key_id}")
    if not list_keys(store):
        click.echo("that was the last key: a server on a network address now refuses every caller (one with token "
                   "issuers still takes their tokens), one on loopback lets everyone in; create a key with "
                   f"`openqna keys create --data {data_dir}`", err=True)
