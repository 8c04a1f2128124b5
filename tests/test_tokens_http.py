"""Bearer tokens over real HTTPS: a local OpenID issuer, the official Azure SDK with a TokenCredential,
and one request on every other surface, each refusal in that surface's own envelope."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import jwt
import pytest
from azure.ai.language.questionanswering import QuestionAnsweringClient
from azure.ai.language.questionanswering.authoring import AuthoringClient
from azure.core.credentials import AccessToken, AzureKeyCredential
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from conftest import LiveServer, free_port
from issuer import LocalIssuer
from openqna.auth.bearer import AZURE_SCOPE
from openqna.auth.keys import create_key
from openqna.records import QnA

QKB = "/language/:query-knowledgebases"
PROJECTS = "/language/authoring/query-knowledgebases/projects"


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, so the SDK sends its bearer token (azure-core refuses to over plain http)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class Minted:
    """A TokenCredential, as DefaultAzureCredential is one: hands the SDK a token from the local issuer."""

    def __init__(self, token: str):
        self.token = token
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(self.token, int(time.time()) + 600)


@pytest.fixture
def issuer():
    with LocalIssuer() as server:
        yield server


@pytest.fixture
def kbs(service):
    """'faq' and 'hr', deployed, so a token scoped to one can be refused the other."""
    for name, question, answer in (("faq", "When are you open?", "9 to 5, Monday to Friday."),
                                   ("hr", "How many days of leave do I get?", "25 days a year.")):
        service.create_project(name)
        service.upsert(name, [QnA([question], answer)])
        service.deploy(name, "production")
    return service


@pytest.fixture
def secure(kbs, issuer, tmp_path, monkeypatch):
    """The real server over https, trusting the local issuer (its settings are read when the app is built)."""
    monkeypatch.setenv("OPENQNA_TOKEN_ISSUERS", json.dumps([issuer.config()]))
    cert, key = self_signed(tmp_path)
    with LiveServer(kbs, tls=(cert, key)) as server:
        server.cert = cert
        server.http = httpx.Client(base_url=server.url, verify=ssl.create_default_context(cafile=str(cert)),
                                   timeout=30)
        yield server
        server.http.close()


def qa(server, credential) -> QuestionAnsweringClient:
    return QuestionAnsweringClient(server.url, credential, connection_verify=str(server.cert))


def authoring(server, credential) -> AuthoringClient:
    return AuthoringClient(server.url, credential, connection_verify=str(server.cert))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def ask(server, token: str, project: str = "faq") -> httpx.Response:
    return server.http.post(QKB, params={"projectName": project, "deploymentName": "production",
                                         "api-version": "2023-04-01"},
                            json={"question": "when are you open?", "top": 1}, headers=bearer(token))


def test_sdk_clients_with_a_token_credential_and_the_role_mapping(secure, issuer):
    reader = Minted(issuer.token(roles=["QnA.Reader"]))
    with qa(secure, reader) as client:
        answers = client.get_answers(question="when are you open?", project_name="faq", deployment_name="production")
    assert answers.answers[0].answer == "9 to 5, Monday to Friday."
    assert reader.scopes == [(AZURE_SCOPE,)]  # the scope the server requires by default is the SDK's own
    own_app = Minted(issuer.token(roles=["QnA.Reader"]))  # an Entra app of one's own: docs/tokens.md's scope argument
    with QuestionAnsweringClient(secure.url, own_app, connection_verify=str(secure.cert),
                                 credential_scopes=["api://openqna/.default"]) as client:
        assert client.get_answers(question="when are you open?", project_name="faq", deployment_name="production")
    assert own_app.scopes == [("api://openqna/.default",)]

    with authoring(secure, reader) as client, pytest.raises(HttpResponseError) as refused:
        list(client.list_projects())
    assert refused.value.status_code == 403
    assert "roles (query) do not include 'author'" in refused.value.message

    with authoring(secure, Minted(issuer.token(roles=["QnA.Author"]))) as client:
        client.create_project("kb", {"language": "en", "description": "made with a token"})
        client.begin_update_qnas("kb", [{"op": "add", "value": {"questions": ["hi?"], "answer": "hello"}}]).result()
        client.begin_deploy_project("kb", "production").result()
        assert {p["projectName"] for p in client.list_projects()} == {"faq", "hr", "kb"}

    # "faq-editors" grants author on faq only: hr does not exist for it, as for a key scoped to faq
    editor = Minted(issuer.token(roles=["faq-editors"]))
    with authoring(secure, editor) as client:
        assert [p["projectName"] for p in client.list_projects()] == ["faq"]
        assert client.get_project_details("faq")["projectName"] == "faq"
        with pytest.raises(ResourceNotFoundError):
            client.get_project_details("hr")
    with qa(secure, editor) as client:
        assert client.get_answers(question="when are you open?", project_name="faq", deployment_name="production")
        with pytest.raises(ResourceNotFoundError):
            client.get_answers(question="how much leave?", project_name="hr", deployment_name="production")

    # one grant per project: query everywhere and author on faq is not author on hr
    mixed = issuer.token(roles=["faq-editors", "QnA.Reader"])
    assert ask(secure, mixed, "hr").status_code == 200
    refused_hr = secure.http.get(PROJECTS + "/hr/qnas", params={"api-version": "2023-04-01"}, headers=bearer(mixed))
    assert refused_hr.status_code == 403 and "on project 'hr'" in refused_hr.json()["error"]["message"]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forgeries(issuer: LocalIssuer) -> dict[str, tuple[str, str]]:
    """name -> (token, the reason the server must give)."""
    good = issuer.token(roles=["QnA.Admin"])
    header, payload, signature = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    tampered = b64(json.dumps({**claims, "sub": "someone-else"}).encode())
    public_pem = issuer.keys[issuer.kid][1].public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    signing_input = f"{b64(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': issuer.kid}).encode())}.{payload}"
    confused = f"{signing_input}.{b64(hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest())}"
    with LocalIssuer() as stranger:
        foreign = stranger.token(roles=["QnA.Admin"])
    return {
        "expired": (issuer.token(lifetime=-3600, roles=["QnA.Admin"]), "the token has expired"),
        "wrong audience": (issuer.token(aud="https://other.example", roles=["QnA.Admin"]), "audience is not"),
        "unknown issuer": (foreign, "is not one this server trusts"),
        "alg none": (jwt.encode(claims, None, algorithm="none", headers={"kid": issuer.kid}),
                     "algorithm 'none' is not accepted"),
        "HS256 with the public key": (confused, "algorithm 'HS256' is not accepted"),
        "tampered": (f"{header}.{tampered}.{signature}", "signature does not verify"),
        "missing role": (issuer.token(roles=["Something.Else"]), "holds no value mapped to an openqna role"),
    }


def test_bad_tokens_are_refused_with_the_reason_in_azures_envelope(secure, issuer):
    for name, (token, reason) in forgeries(issuer).items():
        response = ask(secure, token)
        assert response.status_code == 401, name
        error = response.json()["error"]
        assert error["code"] == "401" and response.headers["x-ms-error-code"] == "401", name
        assert error["message"].startswith("Access denied due to an invalid bearer token: "), name
        assert reason in error["message"], (name, error["message"])
        assert 'error="invalid_token"' in response.headers["www-authenticate"], name
        assert token not in response.text, name


def test_the_sdk_sees_the_reason(secure, issuer):
    expired = Minted(issuer.token(lifetime=-3600, roles=["QnA.Reader"]))
    with qa(secure, expired) as client, pytest.raises(HttpResponseError) as refused:
        client.get_answers(question="when are you open?", project_name="faq", deployment_name="production")
    assert refused.value.status_code == 401 and "the token has expired" in str(refused.value)


def test_a_key_rotation_at_the_issuer_needs_no_restart(secure, issuer):
    assert ask(secure, issuer.token(roles=["QnA.Reader"])).status_code == 200
    old = issuer.kid
    issuer.rotate()
    assert issuer.kid != old
    assert ask(secure, issuer.token(roles=["QnA.Reader"])).status_code == 200
    assert ask(secure, issuer.token(kid=old, roles=["QnA.Reader"])).status_code == 200  # still published


def test_every_other_surface_takes_the_token_and_refuses_in_its_own_dialect(secure, issuer):
    token = issuer.token(roles=["QnA.Reader"])
    expired = issuer.token(lifetime=-3600, roles=["QnA.Reader"])
    http = secure.http

    files = http.get("/v1/files", headers=bearer(token))
    assert files.status_code == 200 and files.json()["object"] == "list"
    refused = http.get("/v1/files", headers=bearer(expired)).json()["error"]
    assert refused == {"message": "Invalid bearer token: the token has expired.", "type": "invalid_request_error",
                       "param": None, "code": "invalid_token"}
    upload = http.post("/v1/files", headers=bearer(token), files={"file": ("a.jsonl", b"{}")},
                       data={"purpose": "answers"})
    assert upload.status_code == 403 and upload.json()["error"]["type"] == "permission_error"
    assert http.get("/v1/vector_stores", headers=bearer(token)).status_code == 200
    refused = http.get("/v1/vector_stores", headers=bearer(expired)).json()["error"]
    assert refused["code"] == "invalid_token" and "expired" in refused["message"]

    related = http.get("/get_related_faq", params={"subject": "opening hours"}, headers=bearer(token))
    assert related.status_code == 200 and "9 to 5" in related.text
    refused = http.get("/get_related_faq", params={"subject": "opening hours"}, headers=bearer(expired))
    assert refused.status_code == 401 and refused.json() == {"error": {
        "code": "unauthorized", "message": "The bearer token was refused: the token has expired."}}
    scoped = issuer.token(roles=["faq-editors"])
    assert http.get("/get_related_hr", params={"subject": "leave"}, headers=bearer(scoped)).status_code == 404

    for prefix in ("/qnamaker", "/qnamaker/v5.0-preview.2"):
        path = f"{prefix}/knowledgebases/faq/generateAnswer"
        answer = http.post(path, json={"question": "when are you open?", "top": 1},
                           headers={"Authorization": f"EndpointKey {token}"})
        assert answer.status_code == 200 and answer.json()["answers"][0]["answer"] == "9 to 5, Monday to Friday."
    refused = http.post("/qnamaker/knowledgebases/faq/generateAnswer", json={"question": "hi"}, headers=bearer(expired))
    assert refused.status_code == 401 and refused.json() == {"error": {
        "code": "Unauthorized", "message": "Access denied due to an invalid bearer token: the token has expired."}}

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    assert http.post("/mcp", json=initialize, headers=accept | bearer(token)).status_code == 200
    refused = http.post("/mcp", json=initialize, headers=accept | bearer(expired))
    assert refused.status_code == 401 and refused.json()["error"]["message"] == \
        "Access denied: the token has expired."


def test_keys_keep_working_beside_tokens_and_issuers_close_the_server(secure, issuer):
    assert ask(secure, issuer.token(roles=["QnA.Reader"])).status_code == 200
    anonymous = secure.http.post(QKB, params={"projectName": "faq", "deploymentName": "production",
                                              "api-version": "2023-04-01"}, json={"question": "hi"})
    assert anonymous.status_code == 401  # no key exists, yet an issuer is configured: not an open server
    assert "missing subscription key" in anonymous.json()["error"]["message"]
    _, secret = create_key(secure.service.store, name="bot", role="query")
    with qa(secure, AzureKeyCredential(secret)) as client:
        assert client.get_answers(question="when are you open?", project_name="faq", deployment_name="production")
    assert ask(secure, issuer.token(roles=["QnA.Reader"])).status_code == 200
    assert secure.http.get("/v1/files", headers={"api-key": secret}).status_code == 200


def test_a_slow_issuer_stalls_no_other_request(kbs, issuer, monkeypatch):
    """A token whose issuer takes 2 s to publish its keys waits for them on a thread of its own: a key's
    query and /healthz sent meanwhile are answered at once (on the event loop they waited the 2 s)."""
    issuer.jwks_delay = 2.0
    monkeypatch.setenv("OPENQNA_TOKEN_ISSUERS", json.dumps([issuer.config()]))
    _, key = create_key(kbs.store, role="query")
    params = {"projectName": "faq", "deploymentName": "production", "api-version": "2023-04-01"}
    body = {"question": "when are you open?", "top": 1}
    with LiveServer(kbs) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        http.post(QKB, params=params, json=body, headers={"api-key": key}).raise_for_status()  # warm
        slow: list[httpx.Response] = []
        token = issuer.token(roles=["QnA.Reader"])
        waiting = threading.Thread(target=lambda: slow.append(
            httpx.post(server.url + QKB, params=params, json=body, headers=bearer(token), timeout=30)))
        waiting.start()
        assert issuer.jwks_asked.wait(10)
        t = time.perf_counter()
        assert http.get("/healthz").status_code == 200
        answered = http.post(QKB, params=params, json=body, headers={"api-key": key})
        meanwhile = time.perf_counter() - t
        waiting.join(30)
    assert answered.status_code == 200 and answered.json()["answers"][0]["answer"] == "9 to 5, Monday to Friday."
    assert meanwhile < 1.0, f"requests waited {meanwhile:.2f} s for another request's JWKS fetch"
    assert slow[0].status_code == 200 and slow[0].json()["answers"][0]["answer"] == "9 to 5, Monday to Friday."


def test_tokens_are_never_logged(secure, issuer, caplog):
    caplog.set_level(logging.DEBUG)
    tokens = [issuer.token(roles=["QnA.Reader"]), *(t for t, _ in forgeries(issuer).values())]
    for token in tokens:
        ask(secure, token)
        secure.http.get("/v1/files", headers=bearer(token))
    assert caplog.records  # something was logged (httpx, the JWKS fetches), none of it a token
    assert not any(token in caplog.text for token in tokens)


def test_tokens_are_refused_where_no_issuer_is_configured(live, issuer):
    create_key(live.service.store, name="bot", role="query")
    response = httpx.post(live.url + QKB, params={"projectName": "faq", "deploymentName": "production",
                                                  "api-version": "2023-04-01"},
                          json={"question": "hi"}, headers=bearer(issuer.token(roles=["QnA.Admin"])))
    assert response.status_code == 401
    assert "this server accepts API keys, not bearer tokens" in response.json()["error"]["message"]


OPENQNA = str(Path(sys.executable).with_name("openqna"))


def serve(tmp_path: Path, issuers: str, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OPENQNA_DATA": str(tmp_path / "data"),
           "OPENQNA_TOKEN_ISSUERS": issuers}
    return subprocess.Popen([OPENQNA, "serve", "--no-sample", *extra], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_serve_names_the_bad_issuer_field_in_one_line(tmp_path):
    proc = serve(tmp_path, '[{"issuer": "https://login.example/v2.0", "audience": "api://qna", "role_map": {}}]')
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert err.strip().splitlines() == ["error: OPENQNA_TOKEN_ISSUERS[0].role_map must map claim values to roles, "
                                        'e.g. {"QnA.Admin": "admin", "kb-editors": {"role": "author", '
                                        '"projects": ["faq"]}}.']


def test_serve_beyond_loopback_starts_with_an_issuer_and_no_keys(tmp_path, issuer):
    port = free_port()
    proc = serve(tmp_path, json.dumps([issuer.config()]), "--host", "0.0.0.0", "--port", str(port))
    try:
        deadline = time.time() + 180
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.time() < deadline, "the server did not start"
            time.sleep(0.5)
        assert httpx.get(f"http://127.0.0.1:{port}/v1/files", timeout=10).status_code == 401
    finally:
        proc.terminate()
        proc.wait(30)
