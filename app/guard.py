"""The gate in front of every request that makes the server work: POST under /api/ and to /analyze.

A pure ASGI middleware, so it answers before the body is parsed, in this order:

1. ``TEXTFLIX_API_TOKEN`` set: ``Authorization: Bearer <token>`` or 401 (none) / 403
   (wrong); the token is compared in constant time (``hmac.compare_digest``). The
   /analyze page checks it itself (``token_problem``), after reading the form, whose
   ``token`` field a browser fills in: a wrong token then gives back the form, text kept.
   The one GET that needs it, the export, checks it as a dependency (``require_token``).
2. ``Content-Type`` must be ``application/json`` (or ``+json``), and for /analyze may
   also be a form (``application/x-www-form-urlencoded``): 415 otherwise.
3. The body may not be over ``max_body_bytes``: 413 when ``Content-Length`` says so,
   or as soon as the streamed body passes the limit; it must be UTF-8 (400).

Paths are matched inside the app (``app.errors.route_path``), so a proxy's root path
does not take a request past the gate. The body it read is handed on unchanged.
"""

import email.message
import hmac

from fastapi import Security
from fastapi.security import HTTPBearer
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import API_PREFIX, AppError, error_response, problem, route_path
from app.limits import check_write_allowed
from app.settings import Settings

GUARDED_METHODS = {"POST", "PUT", "PATCH"}
ANALYZE_PATHS = {"/analyze", "/analyze.json"}
FORM = "application/x-www-form-urlencoded"

# Documents the bearer token in OpenAPI (/docs has an "Authorize" button). The check itself
# is done by ``ApiGuard`` before the body is read, or by ``require_token``, so this never refuses.
bearer = HTTPBearer(
    auto_error=False, description="Needed on every POST, and on the export, when the server sets TEXTFLIX_API_TOKEN."
)


def content_type(value: str | None) -> str | None:
    """The media type of a Content-Type header ("application/json"), or None without one."""
    if not value:
        return None
    message = email.message.Message()
    message["content-type"] = value
    return message.get_content_type()


def is_json(media_type: str | None) -> bool:
    return media_type is not None and (media_type == "application/json" or (media_type.startswith("application/") and media_type.endswith("+json")))


def token_problem(authorization: str | None, token: bytes, needed_on: str = "every POST") -> tuple[int, str] | None:
    """(status, message) when the Authorization header does not carry ``token``; None when it does."""
    if authorization is None:
        return 401, f"This server needs `Authorization: Bearer <token>` on {needed_on}."
    scheme, _, given = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return 401, "The Authorization header must be `Bearer <token>`."
    # Header values arrive as latin-1; compare the raw bytes, in constant time.
    if not hmac.compare_digest(given.strip().encode("latin-1", "replace"), token):
        return 403, "The bearer token is not valid."
    return None


def require_token(request: Request, _credentials=Security(bearer)) -> None:
    """A GET route's own token check (the export, which reads the whole database), answered as the
    guard answers a POST; ``Security(bearer)`` documents it in OpenAPI. Without a token, the route
    is as open as a write (``check_write_allowed``)."""
    settings = request.app.state.settings
    secret = settings.api_token
    if secret is None:
        check_write_allowed(request, settings, "Authorization", "exports the database")
        return
    refused = token_problem(request.headers.get("authorization"), secret.get_secret_value().encode("utf-8"), "the export")
    if refused:
        status, message = refused
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        raise AppError.one(status, "Authorization", message, headers=headers)


class ApiGuard:
    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.limit = settings.max_body_bytes
        secret = settings.api_token.get_secret_value() if settings.api_token else None
        self.token = secret.encode("utf-8") if secret else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in GUARDED_METHODS:
            await self.app(scope, receive, send)
            return
        path = route_path(scope)
        analyze = path in ANALYZE_PATHS
        if not (analyze or path.startswith(API_PREFIX)):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)

        async def refuse(status: int, field: str | None, message: str, limit: int | None = None, extra=None):
            response = error_response(Request(scope), status, [problem(field, message, limit)], extra)
            await response(scope, receive, send)

        if self.token is not None and not analyze:  # before the body is read
            if refused := token_problem(headers.get("authorization"), self.token):
                status, message = refused
                extra = {"WWW-Authenticate": "Bearer"} if status == 401 else None
                return await refuse(status, "Authorization", message, extra=extra)
        media_type = content_type(headers.get("content-type"))
        if not (is_json(media_type) or (analyze and media_type == FORM)):
            got = f"got {media_type!r}" if media_type else "none was sent"
            allowed = "JSON or a form" if analyze else "JSON with `Content-Type: application/json`"
            return await refuse(415, "Content-Type", f"Send the body as {allowed} ({got}).")
        declared = headers.get("content-length")
        if declared is not None:
            if not (declared.strip().isascii() and declared.strip().isdigit()):  # "²".isdigit(), but int("²") fails
                return await refuse(400, "Content-Length", f"Content-Length must be a number of bytes, not {declared!r}.")
            if int(declared) > self.limit:
                return await refuse(
                    413, "body", f"The body is {int(declared):,} bytes; the limit is {self.limit:,} bytes.", self.limit
                )
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left; nobody to answer
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                return await refuse(413, "body", f"The body is over the limit of {self.limit:,} bytes.", self.limit)
        try:
            bytes(body).decode("utf-8")
        except UnicodeDecodeError as error:
            return await refuse(400, "body", f"The body is not valid UTF-8 (byte {error.start}).")

        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
