"""The web console's files: ``/`` is its page, ``/console/<file>`` its scripts and style sheet.

The console is a client of the HTTP APIs (``api/azure*.py``, ``api/native.py``) running in the
browser; this module only serves its files, which are committed under ``openqna/console/`` (hand-written
ES modules and CSS: no JavaScript toolchain at build or test time).  One route per file, listed when
the app starts, so an unknown path is the app's ordinary 404.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

CONSOLE_DIR = Path(__file__).resolve().parent.parent / "console"
MEDIA = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml",
         ".txt": "text/plain"}
# The page loads only its own files; answers are rendered sanitized (console/markdown.js), and this
# policy stops any script that slipped through from running or calling out.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _file_route(path: str, file: Path) -> Route:
    async def serve(_: Request) -> Response:
        return FileResponse(file, media_type=MEDIA.get(file.suffix, "application/octet-stream"),
                            headers=SECURITY_HEADERS)

    return Route(path, serve, methods=["GET"], name=f"console:{file.name}")


def console_routes() -> list[Route]:
    """``/`` and one route per file of the console."""
    files = sorted(p for p in CONSOLE_DIR.iterdir() if p.is_file() and p.suffix in MEDIA)
    return [_file_route("/", CONSOLE_DIR / "index.html"), *(_file_route(f"/console/{p.name}", p) for p in files)]
