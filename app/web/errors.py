"""How every error becomes a response, in one place.

There are three kinds of answer, and one shape for each:

* the JSON API (paths under ``/api/``) and the JSON twin of a page (a ``.json`` path,
  or ``Accept: application/json``): ``{"detail": [{"field", "message", "limit"?, "type"?}]}``,
  all problems at once. ``field`` names the body field (``texts[2]``), parameter, header
  or ``body`` at fault, or is null when no one field is; ``limit`` is the limit passed.
* an HTML page: the error page, a title and the messages in plain words; the
  ``/analyze`` form shows its own input errors above the form it gives back.

Handlers raise ``AppError`` (or a subclass); ``install`` turns it, validation errors,
routing errors, database errors and anything unexpected into those answers, so no
path ends in a bare 500. Paths are taken relative to the app's root path, so the
answers are the same behind a proxy that mounts the site under a prefix.
"""

import asyncio
import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette._utils import get_route_path
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.db import display_url
from app.web.schemas import ErrorResponse
from app.web.templating import templates
from app.web.view import View

log = logging.getLogger("textflix")
API_PREFIX = "/api/"
TITLES = {  # of the HTML error page, when the error names none
    400: "Bad request",
    401: "A token is needed",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    413: "Too large",
    415: "Unsupported content type",
    422: "Not valid",
    429: "The server is busy",
    500: "Internal error",
    503: "Unavailable",
}


def problem(field: str | None, message: str, limit: int | None = None, type: str | None = None) -> dict:
    item: dict = {"field": field, "message": message}
    if limit is not None:
        item["limit"] = limit
    if type is not None:
        item["type"] = type
    return item


class AppError(Exception):
    """An error answered with ``status`` and its ``problems`` in every kind of response."""

    title: str | None = None  # of the HTML error page; None: the status's

    def __init__(self, status: int, problems: list[dict] | dict, headers: Mapping[str, str] | None = None):
        self.status = status
        self.problems = problems if isinstance(problems, list) else [problems]
        self.headers = dict(headers or {})
        super().__init__("; ".join(p["message"] for p in self.problems))

    @classmethod
    def one(cls, status: int, field: str | None, message: str, limit: int | None = None, **kw) -> "AppError":
        return cls(status, problem(field, message, limit), **kw)


class DatabaseUnavailable(AppError):
    """The database is missing or unreadable; the message says how to build it."""

    title = "The database is not built yet"

    def __init__(self, message: str):
        super().__init__(503, problem(None, message))


class ModelsUnavailable(AppError):
    """The models are not loaded, so nothing can be analysed; the message says why."""

    title = "The models are not loaded"

    def __init__(self, reason: str):
        super().__init__(503, problem(None, f"The models are not loaded, so nothing can be analysed right now: {reason}"))


class ServerBusy(AppError):
    """Too much analysis is under way; the client should retry after ``retry_after`` seconds."""

    title = "The server is busy"

    def __init__(self, message: str, retry_after: int):
        super().__init__(429, problem(None, message), {"Retry-After": str(retry_after)})


class ServerStopping(AppError):
    """The server is shutting down: work still waiting for a model is not done; another server (or this
    one, restarted) answers a retry."""

    title = "The server is stopping"

    def __init__(self):
        super().__init__(503, problem(None, "The server is stopping; retry in a moment."), {"Retry-After": "5"})


class AnalysisTooLong(AppError):
    """An analysis ran past ``analysis_timeout_s``; its work was stopped."""

    title = "The analysis took too long"

    def __init__(self, seconds: float):
        message = (
            f"The analysis took longer than this server's limit of {seconds:g} s (TEXTFLIX_ANALYSIS_TIMEOUT_S) "
            "and was stopped: send fewer or shorter texts, or leave out the explanations."
        )
        super().__init__(503, problem(None, message))


class ClientGone(AppError):
    """The client closed the connection before the answer; nobody reads what is sent."""

    def __init__(self):
        super().__init__(499, problem(None, "The client closed the connection; the work for it was cancelled."))


def shown(text: str, most: int = 80) -> str:
    """``text`` as an error message may echo it: cut after ``most`` characters, so that a client's
    long path or id is not sent back whole."""
    return text if len(text) <= most else f"{text[:most]}… ({len(text):,} characters)"


def route_path(scope: Scope) -> str:
    """The request's path inside the app (without the root path a proxy mounts it under)."""
    return get_route_path(scope)


def is_api(scope: Scope) -> bool:
    path = route_path(scope)
    return path.startswith(API_PREFIX) or path == API_PREFIX.rstrip("/")


def wants_json(request: Request) -> bool:
    """Whether to answer JSON: the API, a page's ``.json`` twin, or a client that asks for it."""
    if is_api(request.scope) or route_path(request.scope).endswith(".json"):
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def error_response(
    request: Request, status: int, problems: list[dict], headers: Mapping[str, str] | None = None, title: str | None = None
) -> Response:
    if wants_json(request):
        return JSONResponse({"detail": problems}, status_code=status, headers=headers)
    context = {
        "view": View.from_request(request),
        "path": route_path(request.scope),
        "title": title or TITLES.get(status, "Error"),
        "message": " ".join(p["message"] for p in problems),
    }
    return templates.TemplateResponse(request, "error.html", context, status_code=status, headers=headers)


def field_name(loc: tuple) -> str:
    """("body", "texts", 3) -> "texts[3]"; ("query", "page") -> "page"; ("body",) -> "body"."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        where, parts = parts[0], parts[1:]
        if where == "body" and parts and isinstance(parts[0], int) and len(parts) == 1:
            parts = []  # ("body", 12): the position of a JSON syntax error
        if not parts:
            return where
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name


def validation_problems(error: RequestValidationError) -> list[dict]:
    problems = []
    for e in error.errors():
        loc = tuple(e.get("loc", ()))
        kind = e.get("type", "")
        message = e.get("msg", "invalid")
        ctx = e.get("ctx") or {}
        if kind == "json_invalid":
            position = f" at character {loc[1]}" if len(loc) > 1 else ""
            message = f"The body is not valid JSON: {ctx.get('error', 'decode error')}{position}."
        elif kind == "extra_forbidden":
            count = f"{ctx['count']:,} unknown fields (the first: {', '.join(map(repr, ctx['some']))})" if "count" in ctx else "Unknown field"
            message = f"{count}; the schema at /docs lists the fields this endpoint takes."
        elif kind == "missing" and loc == ("body",):
            message = "The request body is missing: send a JSON object."
        limit = next((ctx[key] for key in ("max_length", "min_length", "le", "ge", "lt", "gt") if isinstance(ctx.get(key), int)), None)
        problems.append(problem(field_name(loc), message, limit, kind or None))
    return problems


def install(app: FastAPI) -> None:
    """Answer every error raised in a handler as ``error_response`` does."""

    async def app_error(request: Request, error: AppError) -> Response:
        return error_response(request, error.status, error.problems, error.headers, error.title)

    async def invalid_request(request: Request, error: RequestValidationError) -> Response:
        return error_response(request, 422, validation_problems(error))

    async def http_error(request: Request, error: HTTPException) -> Response:
        path = shown(route_path(request.scope))
        message = str(error.detail)
        if error.status_code == 404 and error.detail == "Not Found":
            message = f"There is no API endpoint at {path}; see /docs." if is_api(request.scope) else "There is no page at this address."
        elif error.status_code == 405:
            message = f"{request.method} is not allowed on {path}."
        return error_response(request, error.status_code, [problem(None, message)], getattr(error, "headers", None))

    async def database_error(request: Request, error: SQLAlchemyError) -> Response:
        url = display_url(request.app.state.settings.database)
        log.error(
            "Database %s failed on %s %s (%s): if it is missing tables or damaged, run `textflix build`.",
            url, request.method, route_path(request.scope), error.__class__.__name__,
        )  # fmt: skip
        # its address and path are for the log, not for every client
        message = "The database cannot be read or written right now: if it is missing tables or damaged, run `textflix build` to build it."
        return error_response(request, 503, [problem(None, message)], title="The database cannot be read")

    async def server_error(request: Request, error: Exception) -> Response:
        log.error("Internal error on %s %s", request.method, route_path(request.scope), exc_info=error)
        return error_response(request, 500, [problem(None, "Internal error; the server log has the details.")])

    app.add_exception_handler(AppError, app_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(SQLAlchemyError, database_error)
    app.add_exception_handler(Exception, server_error)


class StoppedAnswered:
    """A pure ASGI middleware: a request that the server cancels before its answer has begun is answered
    ``ServerStopping`` (503, Retry-After), not with uvicorn's bare 500. uvicorn cancels the requests
    still under way when a stopping server's grace (``TEXTFLIX_SHUTDOWN_GRACE_S``) is over; their
    work is cancelled with them (``app.web.deps.analyze_while_connected``)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_noted(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_noted)
        except asyncio.CancelledError:
            if started:
                raise
            asyncio.current_task().uncancel()  # the cancellation is answered here: the answer may still go out
            stopping = ServerStopping()
            await error_response(Request(scope), stopping.status, stopping.problems, stopping.headers, stopping.title)(
                scope, receive, send
            )


def error_responses(*statuses: int) -> dict:
    """The documented (OpenAPI) error responses of a route or router."""
    descriptions = {
        400: "The body is not UTF-8 or not parseable, or a header is malformed.",
        401: "A token is required (TEXTFLIX_API_TOKEN is set) and the Authorization header has none.",
        403: "The bearer token is wrong, or the server takes no anonymous writes.",
        404: "No such title or review in the catalogue.",
        409: "The review's words cannot be computed yet, or by this build's BERT; the message says why.",
        413: "The body is over the size limit.",
        415: "The body is not sent as application/json.",
        422: "A field is missing, of the wrong type, or over a limit; `field` names it.",
        429: "Too many requests from this client (TEXTFLIX_RATE_LIMIT), or too much analysis under way; retry "
        "after the `Retry-After` seconds.",
        503: "The models are not loaded, the database cannot be reached, the analysis took longer than "
        "TEXTFLIX_ANALYSIS_TIMEOUT_S, or the server is stopping.",
    }
    return {status: {"model": ErrorResponse, "description": descriptions[status]} for status in statuses}


# What the guard (``app.web.guard``) answers on the POST routes before they run.
GUARD_ERRORS = error_responses(400, 401, 403, 413, 415, 429)
