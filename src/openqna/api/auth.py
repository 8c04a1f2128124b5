"""Reading an API key or bearer token out of a request: every surface accepts its own header (DESIGN decision 9).

Whether the secret is a key or a token, and what its caller may do, is core's business
(``openqna.keys``, ``openqna.tokens``); this module only knows headers.
"""

from __future__ import annotations


def secret_from_headers(headers) -> str | None:
    """The key or token from any header a supported client sends.

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
