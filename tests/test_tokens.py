"""Bearer tokens verified against a real local OpenID issuer (discovery, JWKS, RSA and EC keys)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from issuer import AUDIENCE, LocalIssuer
from openqna.auth.bearer import (
    AZURE_SCOPE,
    Issuer,
    IssuerConfigError,
    TokenRefused,
    TokenValidator,
    looks_like_jwt,
    parse_issuers,
)


@pytest.fixture
def issuer():
    with LocalIssuer() as server:
        yield server


def validator(issuer, **overrides) -> TokenValidator:
    return TokenValidator([Issuer.from_json(issuer.config(**overrides))])


def refusal(v: TokenValidator, token: str) -> str:
    with pytest.raises(TokenRefused) as err:
        v.principal(token)
    assert token not in err.value.reason
    return err.value.reason


def test_roles_and_project_scopes(issuer):
    v = validator(issuer)
    admin = v.principal(issuer.token(roles=["QnA.Admin"]))
    assert admin.allows("admin") and admin.role == "admin" and admin.subject == "user-1"
    reader = v.principal(issuer.token(roles=["QnA.Reader", "unmapped"]))
    assert reader.allows("query", "any") and not reader.allows("author", "any")
    editor = v.principal(issuer.token(roles=["faq-editors", "QnA.Reader"]))
    assert editor.allows("author", "FAQ") and not editor.allows("author", "hr") and editor.allows("query", "hr")
    ec = v.principal(issuer.token(kid=[k for k, (alg, _) in issuer.keys.items() if alg == "ES256"][0],
                                  roles=["QnA.Author"]))
    assert ec.allows("author") and not ec.allows("admin")


def test_keycloak_style_nested_claim_and_scope(issuer):
    v = validator(issuer, audience="openqna", role_claim="realm_access.roles", required_scope="qna.read",
                  role_map={"qna-user": "query"})
    token = issuer.token(aud="openqna", scope="openid qna.read", realm_access={"roles": ["qna-user"]})
    assert v.principal(token).allows("query")
    assert "lacks the scope 'qna.read'" in refusal(v, issuer.token(aud="openqna", scope="openid",
                                                                      realm_access={"roles": ["qna-user"]}))


def test_azure_default_scope_is_met_by_the_resource_audience(issuer):
    v = validator(issuer)
    assert v.principal(issuer.token(roles=["QnA.Reader"])).allows("query")
    other = validator(issuer, audience=["api://openqna", AUDIENCE])
    assert "lacks the scope" in refusal(other, issuer.token(aud="api://openqna", roles=["QnA.Reader"]))
    assert other.principal(issuer.token(aud="api://openqna", scp=AZURE_SCOPE, roles=["QnA.Reader"]))


def test_refusals_say_why(issuer):
    v = validator(issuer)
    assert refusal(v, issuer.token(lifetime=-3600, roles=["QnA.Admin"])) == "the token has expired"
    assert "audience" in refusal(v, issuer.token(aud="https://other.example", roles=["QnA.Admin"]))
    assert "not one this server trusts" in refusal(v, issuer.token(iss="https://evil.example", roles=["QnA.Admin"]))
    assert "not valid yet" in refusal(v, issuer.token(nbf=2_000_000_000 + 10**9, roles=["QnA.Admin"]))
    assert "no value mapped" in refusal(v, issuer.token(roles=["Something.Else"]))
    assert "no 'exp' claim" in refusal(v, issuer.token(exp=None, roles=["QnA.Admin"]))
    assert "not a well-formed JWT" in refusal(v, "eyJhbGciOi.not-a-token.x")


def test_forgeries_are_refused(issuer):
    v = validator(issuer)
    good = issuer.token(roles=["QnA.Reader"])
    header, payload, signature = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["roles"] = ["QnA.Admin"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert "signature does not verify" in refusal(v, f"{header}.{forged}.{signature}")
    unsigned = jwt.encode({**claims}, None, algorithm="none", headers={"kid": issuer.kid})
    assert "algorithm 'none' is not accepted" in refusal(v, unsigned)
    # HS256 signed with the issuer's public key, the classic algorithm-confusion forgery
    public_pem = issuer.keys[issuer.kid][1].public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = f"{b64(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': issuer.kid}).encode())}.{forged}"
    mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    confused = f"{signing_input}.{b64(mac)}"
    assert "algorithm 'HS256' is not accepted" in refusal(v, confused)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # a key the issuer never published
    assert "kid" in refusal(v, jwt.encode(claims, stranger, algorithm="RS256", headers={"kid": "unknown"}))


def test_a_rotated_key_is_picked_up_without_a_restart(issuer):
    v = validator(issuer)
    assert v.principal(issuer.token(roles=["QnA.Reader"]))
    fetches = issuer.jwks_fetches
    v.principal(issuer.token(roles=["QnA.Reader"]))
    assert issuer.jwks_fetches == fetches  # cached
    issuer.rotate()
    assert v.principal(issuer.token(roles=["QnA.Reader"])).allows("query")
    assert issuer.jwks_fetches == fetches + 1


def test_unknown_kids_refetch_at_most_once_per_cooldown(issuer):
    v = validator(issuer, jwks_refresh_cooldown=300)
    v.principal(issuer.token(roles=["QnA.Reader"]))
    fetches = issuer.jwks_fetches
    for _ in range(3):
        issuer.rotate()
        refusal(v, issuer.token(roles=["QnA.Reader"]))
    assert issuer.jwks_fetches <= fetches + 1


def test_looks_like_jwt():
    assert looks_like_jwt("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln")
    assert not looks_like_jwt("oq_abcdef") and not looks_like_jwt("eyJ.only-one-dot")


@pytest.mark.parametrize("raw,words", [
    ("not json", "not valid JSON"),
    ('[{"audience": "a", "role_map": {"x": "admin"}}]', "issuer must be the issuer's URL"),
    ('[{"issuer": "https://i", "role_map": {"x": "admin"}}]', "audience must be"),
    ('[{"issuer": "https://i", "audience": "a", "role_map": {"x": "owner"}}]', "role_map['x'] must be one of"),
    ('[{"issuer": "https://i", "audience": "a", "role_map": {}}]', "role_map must map"),
    ('[{"issuer": "https://i", "audience": "a", "role_map": {"x": "admin"}, "algorithms": ["HS256"]}]',
     "refused ['HS256']"),
    ('[{"issuer": "https://i", "audience": "a", "role_map": {"x": "admin"}, "audiance": "typo"}]',
     "unknown fields ['audiance']"),
])
def test_bad_issuer_settings_name_the_field(raw, words):
    with pytest.raises(IssuerConfigError) as err:
        parse_issuers(raw)
    assert words in str(err.value)


def test_settings_round_trip(issuer, monkeypatch):
    monkeypatch.setenv("OPENQNA_TOKEN_ISSUERS", json.dumps([issuer.config()]))
    v = TokenValidator.from_settings()
    assert v and v.principal(issuer.token(roles=["QnA.Admin"])).allows("admin")
    monkeypatch.setenv("OPENQNA_TOKEN_ISSUERS", "")
    assert not TokenValidator.from_settings()
