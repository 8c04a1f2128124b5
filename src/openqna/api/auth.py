"""API keys: random secrets shown once, stored as SHA-256 hashes (DESIGN decision 9).

Keys are 32 random bytes, so a fast hash is enough (there is nothing to brute-force);
each key has a role (admin > author > query) and optionally a list of projects.
Every surface accepts its own header; an empty key table means an open server,
which ``openqna serve`` only allows on loopback.
"""

from __future__ import annotations

import hashlib
import secrets

from ..store import ApiKey, Store
from ..store.sqlite import now_iso

ROLES = ("admin", "author", "query")
_RANK = {r: i for i, r in enumerate(reversed(ROLES))}  # query 0 < author 1 < admin 2


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(store: Store, *, name: str = "", role: str = "admin", projects: list[str] | None = None) -> tuple[ApiKey, str]:
    """Create a key; returns it and the secret, which is never stored."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    secret = "oq_" + secrets.token_urlsafe(32)
    key = ApiKey(secrets.token_hex(6), name, role, projects, now_iso())
    store.add_key(key, hash_key(secret))
    return key, secret


def secret_from_headers(headers) -> str | None:
    """The key from any header a supported client sends.

    QnA Maker clients prefix the key with ``EndpointKey `` in ``Authorization`` and, in
    botbuilder-python, in ``Ocp-Apim-Subscription-Key`` too: the prefix is dropped wherever it is.
    """
    for name in ("ocp-apim-subscription-key", "api-key"):
        value = headers.get(name)
        if value and value.strip():
            return _without_scheme(value.strip(), ("endpointkey ",))
    auth = headers.get("authorization", "")
    for scheme in ("bearer ", "endpointkey "):
        if auth.lower().startswith(scheme):
            return auth[len(scheme):].strip()
    return None


def _without_scheme(value: str, schemes: tuple[str, ...]) -> str:
    for scheme in schemes:
        if value.lower().startswith(scheme):
            return value[len(scheme):].strip()
    return value


class Authorizer:
    def __init__(self, store: Store):
        self.store = store

    def open(self) -> bool:
        return not self.store.list_keys()

    def check(self, headers) -> tuple[ApiKey | None, str | None]:
        """(key, None) when allowed — key None on an open server — or (None, reason) when refused."""
        if self.open():
            return None, None
        secret = secret_from_headers(headers)
        if secret is None:
            return None, "missing"
        key = self.store.find_key(hash_key(secret))
        return (key, None) if key is not None else (None, "invalid")


def allows(key: ApiKey | None, *, role: str, project: str | None = None) -> bool:
    if key is None:
        return True
    if _RANK[key.role] < _RANK[role]:
        return False
    return project is None or key.projects is None or project.lower() in {p.lower() for p in key.projects}
