"""The safe fetcher: URL sources and fileUri imports never reach loopback, private or metadata addresses."""

from __future__ import annotations

import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from openqna.ingest import fetch as fetching
from openqna.ingest.fetch import Allowed, fetch, refusal
from openqna.records import InvalidArgument


@pytest.mark.parametrize("address,rule", [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("10.1.2.3", "private"), ("192.168.0.10", "private"), ("172.16.5.4", "private"), ("fd00::1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("224.0.0.1", "multicast"),
    ("0.0.0.0", "unspecified"), ("100.64.0.1", "not globally routable"), ("240.0.0.1", "reserved"),
    ("8.8.8.8", None), ("2606:4700:4700::1111", None),
    # IPv4 wrapped in IPv6, judged as itself (Python calls 6to4's 2002:7f00:1:: global): 6to4, NAT64, Teredo
    ("2002:7f00:1::", "loopback"), ("2002:a00:1::", "private"), ("2002:808:808::", None),
    ("64:ff9b::a9fe:a9fe", "link-local"), ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),
])
def test_refusal_rules(address, rule):
    assert refusal(ipaddress.ip_address(address)) == rule


class Site:
    """A loopback web server: /doc.tsv is a file, /hop/N redirects to /hop/N+1, /away redirects to ``away``."""

    def __init__(self, away: str = ""):
        self.hosts: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                site.hosts.append(self.headers.get("Host", ""))
                if self.path.startswith("/hop/"):
                    self._redirect(f"/hop/{int(self.path.rsplit('/', 1)[1]) + 1}")
                elif self.path == "/away":
                    self._redirect(site.away)
                elif self.path == "/secret":
                    self.send_response(418)
                    self.end_headers()
                else:
                    body = b"Question\tAnswer\nhi\thello\n"
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def _redirect(self, to: str) -> None:
                self.send_response(302)
                self.send_header("Location", to)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.away = away
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture
def site():
    s = Site()
    yield s
    s.close()


LOOPBACK = Allowed.parse("127.0.0.0/8")


def test_loopback_is_refused_and_its_answer_not_reported(site, monkeypatch):
    monkeypatch.delenv("OPENQNA_FETCH_ALLOW", raising=False)
    for url in (f"http://127.0.0.1:{site.port}/secret", f"http://localhost:{site.port}/secret"):
        with pytest.raises(InvalidArgument) as err:
            fetch(url)
        assert "loopback" in err.value.message and "OPENQNA_FETCH_ALLOW" in err.value.message
        assert "418" not in err.value.message
    assert site.hosts == []  # nothing was sent


def test_the_operator_allow_list_lets_an_intranet_host_through(site, monkeypatch):
    monkeypatch.setenv("OPENQNA_FETCH_ALLOW", "wiki.example, 127.0.0.0/8")
    data, name = fetch(f"http://127.0.0.1:{site.port}/doc.tsv")
    assert data.startswith(b"Question\tAnswer") and name == "doc.tsv"
    with pytest.raises(InvalidArgument) as err:
        fetch(f"http://127.0.0.1:{site.port}/secret")
    assert "HTTP 418" in err.value.message  # an allowed host's status is the author's business


def test_every_redirect_is_checked_again(site):
    site.away = f"http://127.0.0.1:{site.port}/doc.tsv"
    allowed_by_name = Allowed.parse("localhost")
    data, _ = fetch(f"http://localhost:{site.port}/doc.tsv", allowed=allowed_by_name)
    assert data.startswith(b"Question")
    with pytest.raises(InvalidArgument) as err:
        fetch(f"http://localhost:{site.port}/away", allowed=allowed_by_name)
    assert "127.0.0.1" in err.value.message and "loopback" in err.value.message
    site.away = "http://169.254.169.254/latest/meta-data/"
    with pytest.raises(InvalidArgument) as err:
        fetch(f"http://127.0.0.1:{site.port}/away", allowed=LOOPBACK)
    assert "link-local" in err.value.message


def test_redirects_are_capped(site):
    with pytest.raises(InvalidArgument) as err:
        fetch(f"http://127.0.0.1:{site.port}/hop/0", allowed=LOOPBACK)
    assert "more than 5 times" in err.value.message
    assert len(site.hosts) == 6


def test_the_checked_address_is_the_one_connected_to(site, monkeypatch):
    """DNS rebinding: the name resolves to an allowed address when checked, to another afterwards."""
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1"] + ["10.255.255.1"] * 10)

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(fetching.socket, "getaddrinfo", rebinding)
    data, _ = fetch(f"http://rebind.example:{site.port}/doc.tsv", allowed=LOOPBACK)
    assert data.startswith(b"Question")
    assert site.hosts == [f"rebind.example:{site.port}"]  # the name travelled in Host


@pytest.mark.parametrize("url,words", [
    ("file:///etc/passwd", "not an http(s) URL"),
    ("http:///nohost", "has no host"),
    ("http://example.com:99999/x", "invalid port"),
    ("http://no-such-host.invalid/x", "Could not resolve"),
])
def test_bad_urls(url, words):
    with pytest.raises(InvalidArgument) as err:
        fetch(url)
    assert words in err.value.message


def test_size_cap(site):
    with pytest.raises(InvalidArgument) as err:
        fetch(f"http://127.0.0.1:{site.port}/doc.tsv", allowed=LOOPBACK, max_bytes=10)
    assert "larger than 10 bytes" in err.value.message


def test_a_private_url_source_is_refused_at_once(live, monkeypatch):
    """PATCH sources with a URL into a private address answers 400 naming the rule, as the docs promise, instead of
    202 and a job that fails later; nothing is submitted."""
    import httpx

    from openqna.auth.keys import create_key

    monkeypatch.delenv("OPENQNA_FETCH_ALLOW", raising=False)
    headers = {"Ocp-Apim-Subscription-Key": create_key(live.service.store, role="admin")[1]}
    base = live.url + "/language/authoring/query-knowledgebases/projects/kb"
    assert httpx.patch(base, params={"api-version": "2023-04-01"}, json={"language": "en"},
                       headers=headers).status_code in (200, 201)
    r = httpx.patch(base + "/sources", params={"api-version": "2023-04-01"}, headers=headers,
                    json=[{"op": "add", "value": {"sourceUri": "http://10.1.2.3/faq.html", "sourceKind": "url"}}])
    assert r.status_code == 400, r.text
    assert "private" in r.json()["error"]["message"] and "Operation-Location" not in r.headers
