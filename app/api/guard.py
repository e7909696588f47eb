"""The gate in front of every POST under /api/: token, content type, body size.

A pure ASGI middleware, so it answers before the body is read (and before FastAPI
parses it), in this order:

1. ``TEXTFLIX_API_TOKEN`` set: ``Authorization: Bearer <token>`` or 401 (none) / 403
   (wrong); the token is compared in constant time (``hmac.compare_digest``).
2. ``Content-Type`` must be ``application/json`` (or ``+json``): 415 otherwise.
3. The body may not be over ``max_body_bytes``: 413 when ``Content-Length`` says so,
   or as soon as the streamed body passes the limit; it must be UTF-8 (400).

The body it read is handed on to the app unchanged.
"""

import email.message
import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import API_PREFIX, error_response, problem
from app.settings import Settings

GUARDED_METHODS = {"POST", "PUT", "PATCH"}


def is_json_content_type(value: str | None) -> bool:
    if not value:
        return False
    message = email.message.Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def token_problem(authorization: str | None, token: bytes) -> tuple[int, str] | None:
    """(status, message) when the Authorization header does not carry ``token``; None when it does."""
    if authorization is None:
        return 401, "This server needs `Authorization: Bearer <token>` on every POST."
    scheme, _, given = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return 401, "The Authorization header must be `Bearer <token>`."
    # Header values arrive as latin-1; compare the raw bytes, in constant time.
    if not hmac.compare_digest(given.strip().encode("latin-1", "replace"), token):
        return 403, "The bearer token is not valid."
    return None


class ApiGuard:
    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.limit = settings.max_body_bytes
        secret = settings.api_token.get_secret_value() if settings.api_token else None
        self.token = secret.encode("utf-8") if secret else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in GUARDED_METHODS
            or not scope["path"].startswith(API_PREFIX)
        ):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)

        async def refuse(status: int, field: str | None, message: str, limit: int | None = None, extra=None):
            response = error_response(status, [problem(field, message, limit)], extra)
            await response(scope, receive, send)

        if self.token is not None:
            refused = token_problem(headers.get("authorization"), self.token)
            if refused:
                status, message = refused
                extra = {"WWW-Authenticate": "Bearer"} if status == 401 else None
                return await refuse(status, "Authorization", message, extra=extra)
        content_type = headers.get("content-type")
        if not is_json_content_type(content_type):
            got = f"got {content_type!r}" if content_type else "none was sent"
            return await refuse(415, "Content-Type", f"Send the body as JSON with `Content-Type: application/json` ({got}).")
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
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
                return await refuse(
                    413, "body", f"The body is over the limit of {self.limit:,} bytes.", self.limit
                )
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
