"""Bearer tokens from an identity provider (OAuth2 / OpenID Connect), beside API keys.

Azure's question answering API takes an Entra ID token as well as a key, and the official
SDKs send one through a ``TokenCredential``; Keycloak, Okta, Auth0 and Google issue the same
kind of JWT.  An operator lists the issuers openqna trusts (``OPENQNA_TOKEN_ISSUERS``, a JSON
list); a token is accepted when PyJWT verifies:

- its signature, with a key from the issuer's JWKS (found through OpenID discovery unless
  ``jwks_uri`` is given; cached, fetched again when a token names an unknown ``kid`` so a key
  rotation needs no restart, at most once per ``jwks_refresh_cooldown`` seconds);
- an asymmetric algorithm from the issuer's list (never ``none`` nor HMAC: an HS256 token signed
  with the public key is the classic forgery);
- ``iss``, ``aud``, ``exp`` and ``nbf`` (with ``leeway_seconds`` of clock skew);
- the required scope: ``https://cognitiveservices.azure.com/.default`` by default, the scope the
  Azure SDK asks for.  A ``/.default`` scope means the resource itself, so it is met by a token
  whose audience is the resource, as Entra ID issues them; any other scope must be listed in the
  ``scp`` or ``scope`` claim.

Then a claim (``roles``, ``groups``, ``scp``, Keycloak's ``realm_access.roles``: any dotted
path) is mapped to openqna's roles and project scopes, with the same meaning as a key's role
and projects.  A token that verifies but maps to no role is refused, saying so.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt

from openqna import settings

AZURE_SCOPE = "https://cognitiveservices.azure.com/.default"
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
ROLES = ("admin", "author", "query")
_RANK = {"query": 0, "author": 1, "admin": 2}


class TokenRefused(Exception):
    """A token that is not accepted; ``reason`` says why in words a caller can act on (never the token)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class IssuerConfigError(ValueError):
    """``OPENQNA_TOKEN_ISSUERS`` is not valid; the message names the field."""


@dataclass(frozen=True)
class Grant:
    """A role, on every project (``projects`` None) or on the listed ones."""

    role: str
    projects: tuple[str, ...] | None = None

    def allows(self, role: str, project: str | None) -> bool:
        if _RANK[self.role] < _RANK[role]:
            return False
        return project is None or self.projects is None or project.lower() in {p.lower() for p in self.projects}


@dataclass(frozen=True)
class Principal:
    """Who a verified token speaks for, and what it may do."""

    issuer: str
    subject: str
    grants: tuple[Grant, ...]

    def allows(self, role: str, project: str | None = None) -> bool:
        return any(g.allows(role, project) for g in self.grants)

    @property
    def role(self) -> str:
        """The highest role granted anywhere (what a listing of the caller shows)."""
        return max((g.role for g in self.grants), key=_RANK.__getitem__)


@dataclass(frozen=True)
class Issuer:
    """One trusted identity provider, as configured."""

    issuer: str
    audiences: tuple[str, ...]
    role_claim: str = "roles"
    role_map: dict[str, Grant] = field(default_factory=dict)
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    jwks_uri: str | None = None
    required_scope: str | None = AZURE_SCOPE
    leeway_seconds: int = 60
    jwks_refresh_cooldown: float = 30.0

    @classmethod
    def from_json(cls, raw: Any, where: str = "OPENQNA_TOKEN_ISSUERS[0]") -> "Issuer":
        if not isinstance(raw, dict):
            raise IssuerConfigError(f"{where} must be an object with at least 'issuer' and 'audience'.")
        known = {"issuer", "audience", "role_claim", "role_map", "algorithms", "jwks_uri", "required_scope",
                 "leeway_seconds", "jwks_refresh_cooldown"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise IssuerConfigError(f"{where} has unknown fields {unknown}; known: {sorted(known)}.")
        issuer = raw.get("issuer")
        if not isinstance(issuer, str) or not issuer.startswith(("https://", "http://")):
            raise IssuerConfigError(f"{where}.issuer must be the issuer's URL (the tokens' 'iss').")
        audiences = _strings(raw.get("audience"))
        if not audiences:
            raise IssuerConfigError(f"{where}.audience must be a string or a list of strings (the tokens' 'aud').")
        algorithms = _strings(raw.get("algorithms") or ["RS256", "ES256"])
        if not algorithms:
            raise IssuerConfigError(f"{where}.algorithms must be a list of algorithm names, e.g. [\"RS256\"].")
        refused = [a for a in algorithms if a not in ASYMMETRIC]
        if refused:
            raise IssuerConfigError(f"{where}.algorithms may only hold asymmetric algorithms {list(ASYMMETRIC)}; "
                                    f"refused {refused}.")
        role_map_raw = raw.get("role_map", {})
        if not isinstance(role_map_raw, dict) or not role_map_raw:
            raise IssuerConfigError(f"{where}.role_map must map claim values to roles, e.g. "
                                    '{"QnA.Admin": "admin", "kb-editors": {"role": "author", "projects": ["faq"]}}.')
        role_map = {str(k): _grant(v, f"{where}.role_map[{k!r}]") for k, v in role_map_raw.items()}
        role_claim = raw.get("role_claim", "roles")
        if not isinstance(role_claim, str) or not role_claim:
            raise IssuerConfigError(f"{where}.role_claim must name a claim, e.g. 'roles' or 'realm_access.roles'.")
        scope = raw.get("required_scope", AZURE_SCOPE)
        if scope is not None and not isinstance(scope, str):
            raise IssuerConfigError(f"{where}.required_scope must be a string, or null for none.")
        jwks_uri = raw.get("jwks_uri")
        if jwks_uri is not None and not isinstance(jwks_uri, str):
            raise IssuerConfigError(f"{where}.jwks_uri must be a URL.")
        numbers = {}
        for name, default in (("leeway_seconds", 60), ("jwks_refresh_cooldown", 30.0)):
            value = raw.get(name, default)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise IssuerConfigError(f"{where}.{name} must be a number of seconds, 0 or more.")
            numbers[name] = value
        return cls(issuer.rstrip("/"), audiences, role_claim, role_map, algorithms, jwks_uri, scope or None,
                   int(numbers["leeway_seconds"]), float(numbers["jwks_refresh_cooldown"]))

    def grants_for(self, claims: dict) -> tuple[Grant, ...]:
        values = claim_values(claims, self.role_claim)
        return tuple(self.role_map[v] for v in values if v in self.role_map)


def _strings(value: Any) -> tuple[str, ...]:
    """A string, or a list of non-empty strings, as a tuple; anything else (a number, an object, an empty string or
    list) as ``()``, for the caller's one-line error."""
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    return ()


def _grant(raw: Any, where: str) -> Grant:
    if isinstance(raw, str):
        raw = {"role": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str) or raw["role"] not in ROLES:
        raise IssuerConfigError(f"{where} must be one of {list(ROLES)} or {{\"role\": ..., \"projects\": [...]}}.")
    projects = raw.get("projects")
    if projects is not None and (not isinstance(projects, list) or not all(isinstance(p, str) for p in projects)):
        raise IssuerConfigError(f"{where}.projects must be a list of project names.")
    return Grant(raw["role"], tuple(projects) if projects is not None else None)


def claim_values(claims: dict, path: str) -> list[str]:
    """The strings at a dotted claim path; a space-separated string (``scp``, ``scope``) is split."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return []
        value = value[part]
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def parse_issuers(raw: str) -> list[Issuer]:
    """``OPENQNA_TOKEN_ISSUERS``: a JSON list of issuer objects (empty: tokens are not accepted)."""
    if not raw.strip():
        return []
    try:
        items = json.loads(raw)
    except ValueError as exc:
        raise IssuerConfigError(f"OPENQNA_TOKEN_ISSUERS is not valid JSON: {exc}.") from None
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise IssuerConfigError("OPENQNA_TOKEN_ISSUERS must be a JSON list of issuer objects.")
    issuers = [Issuer.from_json(item, f"OPENQNA_TOKEN_ISSUERS[{i}]") for i, item in enumerate(items)]
    names = [i.issuer for i in issuers]
    if len(set(names)) != len(names):
        raise IssuerConfigError("OPENQNA_TOKEN_ISSUERS lists an issuer twice.")
    return issuers


def looks_like_jwt(secret: str) -> bool:
    """A compact JWS: three base64url parts, the header starting ``eyJ`` (``{"``); API keys never do."""
    return secret.startswith("eyJ") and secret.count(".") == 2


class TokenValidator:
    """Verifies tokens against the configured issuers; thread-safe, one per server."""

    def __init__(self, issuers: Iterable[Issuer], *, timeout: float = 5.0):
        self.issuers = {i.issuer: i for i in issuers}
        self.timeout = timeout
        self._clients: dict[str, jwt.PyJWKClient] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls) -> "TokenValidator":
        return cls(parse_issuers(settings.token_issuers()))

    def __bool__(self) -> bool:
        return bool(self.issuers)

    def principal(self, token: str) -> Principal:
        """The verified caller, or ``TokenRefused`` with the reason."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused("the bearer token is not a well-formed JWT") from None
        issuer = self.issuers.get(str(unverified.get("iss", "")).rstrip("/"))
        if issuer is None:
            raise TokenRefused(f"the token's issuer '{unverified.get('iss')}' is not one this server trusts")
        if header.get("alg") not in issuer.algorithms:
            raise TokenRefused(f"the token's algorithm '{header.get('alg')}' is not accepted "
                               f"(accepted: {', '.join(issuer.algorithms)})")
        key = self._signing_key(issuer, token)
        try:
            claims = jwt.decode(token, key, algorithms=list(issuer.algorithms), audience=list(issuer.audiences),
                                issuer=str(unverified["iss"]), leeway=issuer.leeway_seconds,
                                options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            raise TokenRefused("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("the token is not valid yet (nbf or iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused(f"the token's audience is not {' or '.join(issuer.audiences)}") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("the token's issuer does not match") from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRefused(f"the token has no '{exc.claim}' claim") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("the token's signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"the token is not valid ({type(exc).__name__})") from None
        if issuer.required_scope and not _has_scope(claims, issuer.required_scope):
            raise TokenRefused(f"the token lacks the scope '{issuer.required_scope}'")
        grants = issuer.grants_for(claims)
        if not grants:
            raise TokenRefused(f"the token's '{issuer.role_claim}' claim holds no value mapped to an openqna role "
                               f"(mapped: {', '.join(sorted(issuer.role_map))})")
        return Principal(issuer.issuer, str(claims.get("sub", "")), grants)

    def _signing_key(self, issuer: Issuer, token: str) -> Any:
        client = self._client(issuer)
        try:
            return client.get_signing_key_from_jwt(token).key
        except jwt.PyJWKClientConnectionError:
            raise TokenRefused(f"the keys of issuer '{issuer.issuer}' could not be fetched") from None
        except (jwt.PyJWKClientError, jwt.PyJWTError):
            raise TokenRefused("the token's signing key (kid) is not among the issuer's keys") from None

    def _client(self, issuer: Issuer) -> jwt.PyJWKClient:
        with self._lock:
            client = self._clients.get(issuer.issuer)
            if client is None:
                uri = issuer.jwks_uri or self._discover(issuer)
                client = jwt.PyJWKClient(uri, cache_keys=False, lifespan=3600, timeout=self.timeout,
                                         cooldown_duration=issuer.jwks_refresh_cooldown)
                self._clients[issuer.issuer] = client
            return client

    def _discover(self, issuer: Issuer) -> str:
        """The JWKS URL from the issuer's OpenID discovery document."""
        url = issuer.issuer + "/.well-known/openid-configuration"
        try:
            doc = httpx.get(url, timeout=self.timeout, follow_redirects=False).raise_for_status().json()
        except (httpx.HTTPError, ValueError):
            raise TokenRefused(f"the OpenID discovery document of issuer '{issuer.issuer}' could not be read") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("jwks_uri"), str):
            raise TokenRefused(f"the discovery document of issuer '{issuer.issuer}' names no jwks_uri")
        if str(doc.get("issuer", "")).rstrip("/") != issuer.issuer:
            raise TokenRefused(f"the discovery document at {url} is for another issuer")
        return doc["jwks_uri"]


def _has_scope(claims: dict, scope: str) -> bool:
    granted = set(claim_values(claims, "scp")) | set(claim_values(claims, "scope"))
    if scope in granted:
        return True
    if scope.endswith("/.default"):
        resource = scope[: -len("/.default")]
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else list(audiences or [])
        return resource in audiences or resource + "/" in audiences
    return False
