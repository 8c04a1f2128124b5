"""One error builder per wire dialect (DESIGN decision 10)."""

from __future__ import annotations

from starlette.responses import JSONResponse

from openqna.auth.keys import Denied

UNAUTHORIZED_MESSAGE = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an "
    "active subscription and use a correct regional API endpoint for your resource."
)
MISSING_KEY_MESSAGE = (
    "Access denied due to missing subscription key. Make sure to include subscription key when making requests to an API."
)


def unauthorized_message(denied: Denied) -> str:
    """Azure's and QnA Maker's 401 text: their own words for keys, the reason for a refused bearer token."""
    if denied.missing:
        return MISSING_KEY_MESSAGE
    if denied.token:
        return f"Access denied due to an invalid bearer token: {denied.reason}."
    return UNAUTHORIZED_MESSAGE


def azure_error(status: int, code: str, message: str, *, target: str | None = None,
                inner: str | None = None, headers: dict | None = None) -> JSONResponse:
    """Azure's envelope: {"error": {"code", "message", "target"?, "innererror"?}} plus x-ms-error-code."""
    error: dict = {"code": code, "message": message}
    if target:
        error["target"] = target
    if inner:
        error["innererror"] = {"code": inner, "message": message}
    return JSONResponse({"error": error}, status_code=status, headers={"x-ms-error-code": code, **(headers or {})})


# QnA Maker's ErrorCodeType by status.  A status without a code of its own is a BadArgument below 500 and a
# ServiceError from 500 on: a 503 (the store unreachable or read-only) said BadArgument, so a bot's log blamed its own
# request for the server's trouble.  A throttled caller (429) gets QuotaExceeded, the code of the list that says so
# (Azure's TooManyRequests is not in it).
QNAMAKER_CODES = {400: "BadArgument", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
                  413: "BadArgument", 429: "QuotaExceeded", 500: "QnaRuntimeError", 507: "QnaRuntimeError"}


def qnamaker_code(status: int) -> str:
    """QnA Maker's error code for an error of HTTP ``status``."""
    return QNAMAKER_CODES.get(status) or ("ServiceError" if status >= 500 else "BadArgument")


def qnamaker_error(status: int, code: str, message: str, *, target: str | None = None) -> JSONResponse:
    """QnA Maker's envelope: {"error": {"code", "message", "target"?}} with its codes (BadArgument, KbNotFound...).

    botbuilder-python reads ``answers`` whatever the status, so the message is what a bot's log shows.
    """
    error: dict = {"code": code, "message": message}
    if target:
        error["target"] = target
    return JSONResponse({"error": error}, status_code=status)
