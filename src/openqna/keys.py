"""API keys and roles: random secrets shown once, stored as SHA-256 hashes (DESIGN decision 9).

Keys are 32 random bytes, so a fast hash is enough (there is nothing to brute-force);
each key has a role (admin > author > query) and optionally a list of projects.
An empty key table means an open server, which ``openqna serve`` only allows on loopback.
Reading a key out of a request's headers is each surface's business (``api/auth.py``);
this module decides what a key may do.
"""

from __future__ import annotations

import hashlib
import secrets

from .clock import now_iso
from .store import ApiKey, Store

__all__ = ["ROLES", "ApiKey", "Authorizer", "allows", "create_key", "hash_key", "list_keys", "revoke_key"]

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


class Authorizer:
    """Finds the key behind a secret; an open server (no keys at all) lets everyone in."""

    def __init__(self, store: Store):
        self.store = store

    def open(self) -> bool:
        return not self.store.list_keys()

    def check(self, secret: str | None) -> tuple[ApiKey | None, str | None]:
        """(key, None) when allowed — key None on an open server — or (None, reason) when refused."""
        if self.open():
            return None, None
        if secret is None:
            return None, "missing"
        key = self.store.find_key(hash_key(secret))
        return (key, None) if key is not None else (None, "invalid")


def allows(key: ApiKey | None, *, role: str, project: str | None = None) -> bool:
    """Whether ``key`` (None: an open server) has at least ``role``, on ``project`` when one is named."""
    if key is None:
        return True
    if _RANK[key.role] < _RANK[role]:
        return False
    return project is None or key.projects is None or project.lower() in {p.lower() for p in key.projects}
