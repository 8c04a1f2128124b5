"""API keys and roles: random secrets shown once, stored as SHA-256 hashes (DESIGN decision 9).

Keys are 32 random bytes, so a fast hash is enough (there is nothing to brute-force);
each key has a role (admin > author > query) and optionally a list of projects.
An empty key table means an open server, which ``openqna serve`` only allows on loopback.
Reading a key out of a request's headers is each surface's business (``api/credentials.py``);
this module decides what a key may do.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from openqna.auth.bearer import Principal, TokenRefused, TokenValidator, looks_like_jwt
from openqna.clock import now_iso
from openqna.records import OpenQnAError
from openqna.store import ApiKey, Store

__all__ = ["ROLES", "ApiKey", "Authorizer", "Caller", "Denied", "Principal", "allows", "create_key", "hash_key", "who",
           "list_keys", "lacks_role", "reaches", "revoke_key", "scope_of"]

ROLES = ("admin", "author", "query")
_RANK = {r: i for i, r in enumerate(reversed(ROLES))}  # query 0 < author 1 < admin 2


def hash_key(secret: str) -> str:
    """The stored form of a secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(store: Store, *, name: str = "", role: str = "admin", projects: list[str] | None = None) -> tuple[ApiKey, str]:
    """Create a key; returns it and the secret, which is never stored."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    secret = "oq_" + secrets.token_urlsafe(32)
    key = ApiKey(secrets.token_hex(6), name, role, projects, now_iso())
    store.add_key(key, hash_key(secret))
    return key, secret


def list_keys(store: Store) -> list[ApiKey]:
    """Every key (without its secret, which was never stored)."""
    return store.list_keys()


def revoke_key(store: Store, key_id: str) -> bool:
    """Delete a key by its id; False when there was none."""
    return store.delete_key(key_id)


Caller = ApiKey | Principal
"""Who a request speaks for: an API key, or the principal of a verified bearer token."""


def who(caller: Caller | None) -> str:
    """How a caller is named where a change is recorded (a deploy's version): the key's name and id, the token's
    subject, or "open server" when no key is configured."""
    if caller is None:
        return "open server"
    if isinstance(caller, Principal):
        return f"token {caller.subject}"
    return f"key {caller.name} ({caller.id})" if caller.name else f"key {caller.id}"


@dataclass(frozen=True)
class Denied:
    """Why a request's credential was refused, in words a caller can act on (never the secret itself).

    ``missing``: nothing was sent (Azure and QnA Maker answer their own text for that);
    ``token``: a bearer token was refused, and ``reason`` says what was wrong with it.
    """

    reason: str
    missing: bool = False
    token: bool = False


Checked = tuple[Caller | None, Denied | None]
# A check made before the request reached its handler (``Authorizer.checked``): (who, the secret, its answer).
_CHECKED: ContextVar[tuple["Authorizer", str | None, Checked | OpenQnAError] | None] = ContextVar("openqna_checked", default=None)


class Authorizer:
    """Finds the caller behind a secret: an API key, or a token from a trusted issuer.

    A server with no keys and no issuers lets everyone in; configuring an issuer closes it,
    even before the first key exists.  A ``closed`` one (``openqna serve`` on an address other than loopback) is
    never open: when its last key is revoked it refuses every caller, where it let in everyone on the network,
    writes included, until a key is created again.
    """

    def __init__(self, store: Store, tokens: TokenValidator | None = None, *, closed: bool = False):
        self.store = store
        self.tokens = tokens
        self.closed = closed

    def open(self) -> bool:
        """Whether everyone is let in: not ``closed``, no issuer configured and no key in the store (asked of the
        store each time, one indexed read, so a key created by another process closes this one at once)."""
        return not self.closed and not self.tokens and not self.store.has_keys()

    def may_block(self, secret: str | None) -> bool:
        """Whether ``check(secret)`` may wait on the network: any read of a remote store (PostgreSQL, where a lock
        or the network can hold a read up), or a token whose issuer's keys (JWKS) may need fetching.

        An async caller runs such a check on a thread (``api/credentials.py``) so that neither stalls the event loop;
        a check in a local store is one indexed read and runs where it is.
        """
        return self.store.remote or (secret is not None and bool(self.tokens) and looks_like_jwt(secret))

    @contextmanager
    def checked(self, secret: str | None, answer: Checked | OpenQnAError) -> Iterator[None]:
        """Within the block (its task, and the tasks and threads started from it), ``check(secret)`` is ``answer``
        (raised, when it is the error that kept the check from being made: the store unreachable).

        How a check made on a thread before routing (``api/credentials.py``) reaches the surfaces' own ``check``
        calls without each of them waiting on the network again; only for one request's own secret.
        """
        token = _CHECKED.set((self, secret, answer))
        try:
            yield
        finally:
            _CHECKED.reset(token)

    def check(self, secret: str | None) -> Checked:
        """(caller, None) when allowed — caller None on an open server — or (None, why) when refused.

        A sent key is looked up first: a key that is found proves the server is not open, so a server
        with keys answers its callers with one store read (``open`` is only asked when nothing valid
        was sent).  An open server lets in any secret, as it always did.
        """
        done = _CHECKED.get()
        if done is not None and done[0] is self and done[1] == secret:
            if isinstance(done[2], OpenQnAError):
                raise done[2]
            return done[2]
        if secret is None or (looks_like_jwt(secret) and not self.tokens):
            if self.open():
                return None, None
            if secret is None:
                return None, Denied("no API key or bearer token was sent", missing=True)
            return None, Denied("this server accepts API keys, not bearer tokens", token=True)
        if looks_like_jwt(secret):  # keys never look like a JWT, so a token is never hashed and looked up
            assert self.tokens  # a token without issuers was answered above
            try:
                return self.tokens.principal(secret), None
            except TokenRefused as exc:
                return None, Denied(exc.reason, token=True)
        key = self.store.find_key(hash_key(secret))
        if key is not None:
            return key, None
        return (None, None) if self.open() else (None, Denied("the API key is not valid"))


def allows(caller: Caller | None, *, role: str, project: str | None = None) -> bool:
    """Whether ``caller`` (None: an open server) has at least ``role``, on ``project`` when one is named."""
    if caller is None:
        return True
    if isinstance(caller, Principal):
        return caller.allows(role, project)
    if _RANK[caller.role] < _RANK[role]:
        return False
    return project is None or caller.projects is None or project.lower() in {p.lower() for p in caller.projects}


def scope_of(caller: Caller | None, role: str) -> list[str] | None:
    """The projects a thing ``caller`` makes with ``role`` is filed under (an OpenAI file, a vector store): those on
    which it has ``role``, or None (every project) for an unscoped key or grant and on an open server.

    A key limited to projects that uploads a file must reach it afterwards, and keys limited to other projects must
    not; so the thing keeps the scope it was made in, and ``reaches`` reads it.
    """
    if caller is None:
        return None
    if isinstance(caller, Principal):
        grants = [g for g in caller.grants if _RANK[g.role] >= _RANK[role]]
        if any(g.projects is None for g in grants):
            return None
        return sorted({p for g in grants for p in g.projects or ()})
    return None if caller.projects is None else list(caller.projects)


def reaches(caller: Caller | None, role: str, name: str, scope: list[str] | None) -> bool:
    """Whether ``caller`` has ``role`` on a thing named ``name`` filed under ``scope`` (``scope_of``).

    It does on any project of the scope, and on the thing's own name (a key whose list names a ``file-…`` or ``vs_…``
    id, as keys were given before scopes were kept).  A thing filed under no scope (made by an unscoped key, or
    before scopes were kept) is reached by unscoped keys and by keys that name it.
    """
    return any(allows(caller, role=role, project=p) for p in (name, *(scope or ())))


def lacks_role(caller: Caller, role: str, project: str | None = None) -> str:
    """The reason for a 403: what the caller has against what the operation needs."""
    if isinstance(caller, Principal):
        where = f" on project '{project}'" if project else ""
        return (f"This token's roles ({', '.join(sorted({g.role for g in caller.grants}))}) do not include "
                f"'{role}' or higher{where}.")
    return f"This key has the role '{caller.role}'; this operation needs '{role}' or higher."
