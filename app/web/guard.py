"""The gate in front of every request that makes the server work: POST under /api/, to /analyze and to a
review page's words (``FORM_PATHS``, the pages' forms).

A pure ASGI middleware, so it answers before the body is parsed, in this order:

1. ``TEXTFLIX_RATE_LIMIT``: at most so many such requests from one client address (the
   ``limits`` package, a moving window per address, in this process's memory); 429 with
   ``Retry-After`` beyond it. Refused requests are not counted.
2. ``TEXTFLIX_API_TOKEN`` set: ``Authorization: Bearer <token>`` or 401 (none) / 403
   (wrong); the token is compared in constant time (``hmac.compare_digest``), before the
   body is read. A page's form (``FORM_PATHS``), which a browser posts without that header, sends the
   token as its first field (``templates/analyze.html``): only that field is read, at most
   a few hundred bytes, before the token is checked. The one GET that needs the token, the
   export, checks it as a dependency (``require_token``).
3. ``Content-Type`` must be ``application/json`` (or ``+json``), and at a page's form path may
   also be a form (``application/x-www-form-urlencoded``): 415 otherwise.
4. The body may not be over ``max_body_bytes``, a form's (the /analyze page's one text) not over
   ``FORM_BYTES_PER_CHAR`` bytes a character of ``max_text_chars``: 413 when ``Content-Length``
   says so, or as soon as the streamed body passes the limit; it must be UTF-8 (400).
5. A JSON body may hold at most ``MOST_JSON_ITEMS`` brackets, colons and commas, counted in its
   bytes (413): parsing, which holds the event loop, costs by them, not by size (two million empty
   lists, 6 MiB, take ``json.loads`` a second), and the API's bodies hold a handful.

Paths are matched inside the app (``app.web.errors.route_path``), so a proxy's root path
does not take a request past the gate; a method no route takes at the path (PUT on a GET route) is
routing's to answer (405 with ``Allow``). The body it read is handed on unchanged.
"""

import email.message
import hmac
import math
import re
import time
from collections.abc import Callable
from urllib.parse import unquote_to_bytes

from limits import RateLimitItem, parse_many
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

from fastapi import Security
from fastapi.security import HTTPBearer
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.web.errors import API_PREFIX, AppError, error_response, problem, route_path
from app.web.limits import check_write_allowed
from app.settings import Settings

GUARDED_METHODS = {"POST", "PUT", "PATCH"}
# The pages' forms that make the server work: /analyze, and a review page's "Show BERT's words" without JavaScript.
FORM_PATHS = re.compile(r"/analyze(\.json)?|/reviews/\d+/words")
FORM = "application/x-www-form-urlencoded"
TOKEN_FIELD = b"token="  # how the /analyze form's body begins when the server needs a token
# The most bytes a character of a form's text takes: a four-byte UTF-8 character, each byte %XX.
FORM_BYTES_PER_CHAR = 12
FORM_FIELDS_BYTES = 1024  # the field names, and the room for a token beyond its own length
# Brackets, colons and commas in a JSON body, wherever they are (in strings too: counting them is then a
# few milliseconds of C): 200,000 empty lists take ``json.loads`` about 50 ms; a review has a few per line.
MOST_JSON_ITEMS = 200_000

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


def json_items(body: bytes) -> int:
    """The brackets, colons and commas of a JSON body (the lists, objects, members and items to build), in strings too."""
    return body.count(b"[") + body.count(b"{") + body.count(b":") + body.count(b",")


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


def reaches_a_route(scope: Scope) -> bool:
    """Whether a route of the app takes the request's method at its path: the others are routing's to
    answer (404, or 405 with ``Allow``), not the guard's."""
    return any(route.matches(scope)[0] is Match.FULL for route in scope["app"].router.routes)


def token_field_known(read: bytearray, longest: int) -> bool:
    """Whether the beginning ``read`` of a form's body tells its token: the first field has come whole, or it
    is longer than ``longest`` (the token's field spelt in the longest way), or it is another field."""
    return b"&" in read or len(read) > longest or read[: len(TOKEN_FIELD)] != TOKEN_FIELD[: len(read)]


class BodyReader:
    """A request's body, read as far as the guard needs it."""

    def __init__(self, receive: Receive):
        self.receive = receive
        self.read = bytearray()
        self.more = True

    async def read_until(self, enough: Callable[[bytearray], bool]) -> bool:
        """Read on until ``enough`` of what is read, or the end of the body; False when the client left."""
        while self.more and not enough(self.read):
            message = await self.receive()
            if message["type"] == "http.disconnect":
                return False
            self.read += message.get("body", b"")
            self.more = message.get("more_body", False)
        return True

    def form_token(self) -> str | None:
        """The ``token`` field that a form's body begins with, as an Authorization header carries it (its
        bytes as latin-1, which ``token_problem`` compares); None when the body begins with another field.
        A field cut off where the reading stopped is longer than any spelling of the token: it does not match."""
        first = bytes(self.read).partition(b"&")[0]
        if not first.startswith(TOKEN_FIELD):
            return None
        value = unquote_to_bytes(first[len(TOKEN_FIELD) :].replace(b"+", b" "))
        return f"Bearer {value.decode('latin-1')}"


class ApiGuard:
    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.limit = settings.max_body_bytes
        secret = settings.api_token.get_secret_value() if settings.api_token else None
        self.token = secret.encode("utf-8") if secret else None
        # a form is parsed on the event loop, a chunk at a time: its one text, and no more
        token_bytes = 3 * len(self.token) if self.token else 0
        self.form_limit = min(self.limit, FORM_BYTES_PER_CHAR * settings.max_text_chars + token_bytes + FORM_FIELDS_BYTES)
        self.rates = parse_many(settings.rate_limit) if settings.rate_limit else []
        self.limiter = MovingWindowRateLimiter(MemoryStorage())

    async def over_rate(self, client: str) -> tuple[RateLimitItem, int] | None:
        """The rate ``client`` is over, and the seconds until it may send again; None (and the request
        counted) when it is within every rate."""
        for rate in self.rates:
            if not await self.limiter.test(rate, client):
                window = await self.limiter.get_window_stats(rate, client)
                return rate, max(1, math.ceil(window.reset_time - time.time()))
        for rate in self.rates:
            await self.limiter.hit(rate, client)
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in GUARDED_METHODS:
            await self.app(scope, receive, send)
            return
        path = route_path(scope)
        a_form = FORM_PATHS.fullmatch(path) is not None
        if not (a_form or path.startswith(API_PREFIX)) or not reaches_a_route(scope):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)

        async def refuse(status: int, field: str | None, message: str, limit: int | None = None, extra=None, title=None):
            response = error_response(Request(scope), status, [problem(field, message, limit)], extra, title)
            await response(scope, receive, send)

        client = scope["client"][0] if scope.get("client") else "unknown"
        if over := await self.over_rate(client):
            rate, retry_after = over
            return await refuse(
                429, None,
                f"Too many requests from {client}: this server analyses or stores at most {rate} for one client "
                f"(TEXTFLIX_RATE_LIMIT). Retry in {retry_after} s.",
                extra={"Retry-After": str(retry_after)}, title="Too many requests",
            )  # fmt: skip
        media_type = content_type(headers.get("content-type"))
        reader = BodyReader(receive)
        if self.token is not None:  # before the body is read
            authorization, field = headers.get("authorization"), "Authorization"
            if authorization is None and a_form and media_type == FORM:
                # the form's token comes first: read that field, no further (it is at most 3 bytes a byte of the token)
                longest = len(TOKEN_FIELD) + 3 * len(self.token)
                if not await reader.read_until(lambda read: token_field_known(read, longest)):
                    return  # the client left; nobody to answer
                authorization, field = reader.form_token(), "token"
            if refused := token_problem(authorization, self.token):
                status, message = refused
                extra = {"WWW-Authenticate": "Bearer"} if status == 401 and field == "Authorization" else None
                if field == "token":  # the form's field, in the words of the page
                    message = (
                        "Fill in this server's API token." if status == 401 else "The API token is not valid."
                    ) + " The review was not read: go back to the form, where your browser kept it."
                return await refuse(status, field, message, extra=extra)
        if not (is_json(media_type) or (a_form and media_type == FORM)):
            got = f"got {media_type!r}" if media_type else "none was sent"
            allowed = "JSON or a form" if a_form else "JSON with `Content-Type: application/json`"
            return await refuse(415, "Content-Type", f"Send the body as {allowed} ({got}).")
        limit = self.form_limit if media_type == FORM else self.limit
        declared = headers.get("content-length")
        if declared is not None:
            if not (declared.strip().isascii() and declared.strip().isdigit()):  # "²".isdigit(), but int("²") fails
                return await refuse(400, "Content-Length", f"Content-Length must be a number of bytes, not {declared!r}.")
            if int(declared) > limit:
                return await refuse(413, "body", f"The body is {int(declared):,} bytes; the limit is {limit:,} bytes.", limit)
        if not await reader.read_until(lambda read: len(read) > limit):
            return  # the client left; nobody to answer
        body = bytes(reader.read)
        if len(body) > limit:
            return await refuse(413, "body", f"The body is over the limit of {limit:,} bytes.", limit)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as error:
            return await refuse(400, "body", f"The body is not valid UTF-8 (byte {error.start}).")
        if is_json(media_type) and (items := json_items(body)) > MOST_JSON_ITEMS:
            return await refuse(
                413, "body", f"The JSON body holds {items:,} brackets, colons and commas; this server parses at most "
                f"{MOST_JSON_ITEMS:,} in one body.", MOST_JSON_ITEMS,
            )  # fmt: skip

        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
