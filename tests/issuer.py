"""A local OpenID issuer for the token tests: discovery, a JWKS with RSA and EC keys, minted tokens.

Tests start one with ``with LocalIssuer() as issuer:`` (or a fixture of their own).  Keys can be rotated
(``issuer.rotate()``) while the server runs, as an identity provider rotates them.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

AUDIENCE = "https://cognitiveservices.azure.com"


class LocalIssuer:
    def __init__(self):
        self.keys: dict[str, tuple[str, object]] = {}  # kid -> (alg, private key)
        self.jwks_fetches = 0
        self.jwks_delay = 0.0  # seconds the JWKS takes to answer: a slow or distant identity provider
        self.jwks_asked = threading.Event()  # set when a JWKS fetch arrives
        self.rotate()
        self.add_key("ES256")
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/keys"}
                elif self.path == "/keys":
                    issuer.jwks_fetches += 1
                    issuer.jwks_asked.set()
                    time.sleep(issuer.jwks_delay)
                    body = issuer.jwks()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/realms/test"
        self.httpd.RequestHandlerClass.__name__ = "Handler"
        # serve the issuer's paths under /realms/test, as Keycloak does
        original = Handler.do_GET

        def under_realm(handler: BaseHTTPRequestHandler) -> None:
            handler.path = handler.path.removeprefix("/realms/test")
            original(handler)

        Handler.do_GET = under_realm
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def add_key(self, alg: str) -> str:
        kid = uuid.uuid4().hex[:12]
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048) if alg.startswith("RS") \
            else ec.generate_private_key(ec.SECP256R1())
        self.keys[kid] = (alg, key)
        return kid

    def rotate(self) -> str:
        """A new RSA key becomes the signing key; older ones stay published."""
        self.kid = self.add_key("RS256")
        return self.kid

    def jwks(self) -> dict:
        out = []
        for kid, (alg, key) in self.keys.items():
            jwk = json.loads((RSAAlgorithm if alg.startswith("RS") else ECAlgorithm).to_jwk(key.public_key()))
            out.append({**jwk, "kid": kid, "alg": alg, "use": "sig"})
        return {"keys": out}

    def token(self, *, kid: str | None = None, lifetime: int = 600, **claims) -> str:
        kid = kid or self.kid
        alg, key = self.keys[kid]
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "sub": "user-1", "iat": now, "nbf": now, "exp": now + lifetime,
                **claims}
        return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm=alg, headers={"kid": kid})

    def config(self, **overrides) -> dict:
        return {"issuer": self.url, "audience": AUDIENCE, "role_claim": "roles",
                "role_map": {"QnA.Admin": "admin", "QnA.Author": "author", "QnA.Reader": "query",
                             "faq-editors": {"role": "author", "projects": ["faq"]}},
                "algorithms": ["RS256", "ES256"], "jwks_refresh_cooldown": 0, **overrides}

    def close(self) -> None:
        self.httpd.shutdown()

    def __enter__(self) -> "LocalIssuer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
