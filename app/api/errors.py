"""Errors of the JSON API: one shape for every 4xx and 5xx under /api/.

    {"detail": [{"field": "texts", "message": "at most 64 texts per request; got 65", "limit": 64}]}

``detail`` is a list (several problems are reported at once). ``field`` names the
offending body field (``texts[2]`` for one item of a list), query or path parameter,
header (``Authorization``, ``Content-Type``, ``Content-Length``) or ``body`` for the
request body as a whole; it is null when no one field is to blame (a missing model,
an unknown endpoint). ``limit`` is there when a limit was passed, ``type`` when
pydantic's error type says more than the message.

The pages keep their own error pages: each handler here answers for /api/ paths and
hands every other path to the handler that was registered before it.
"""

import inspect
import logging
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException

from app.db import display_url
from app.deps import DatabaseUnavailable, ModelsUnavailable
from app.schemas import ErrorResponse

log = logging.getLogger("textflix")
API_PREFIX = "/api/"


def problem(field: str | None, message: str, limit: int | None = None, type: str | None = None) -> dict:
    item: dict = {"field": field, "message": message}
    if limit is not None:
        item["limit"] = limit
    if type is not None:
        item["type"] = type
    return item


def error_response(status: int, problems: list[dict], headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"detail": problems}, status_code=status, headers=headers)


class ApiError(Exception):
    """An error answered as ``{"detail": [...problems]}`` with ``status``."""

    def __init__(self, status: int, problems: list[dict] | dict, headers: dict | None = None):
        self.status = status
        self.problems = problems if isinstance(problems, list) else [problems]
        self.headers = headers
        super().__init__(f"{status}: {self.problems}")

    @classmethod
    def one(cls, status: int, field: str | None, message: str, limit: int | None = None, **kw) -> "ApiError":
        return cls(status, problem(field, message, limit), **kw)


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
            message = "Unknown field; the schema at /docs lists the fields this endpoint takes."
        elif kind == "missing" and loc == ("body",):
            message = "The request body is missing: send a JSON object."
        limit = None
        for key in ("max_length", "min_length", "le", "ge", "lt", "gt"):
            if key in ctx and isinstance(ctx[key], int):
                limit = ctx[key]
                break
        problems.append(problem(field_name(loc), message, limit, kind or None))
    return problems


Handler = Callable[[Request, Exception], Awaitable[Response] | Response]


def _is_api(request: Request) -> bool:
    return request.url.path.startswith(API_PREFIX) or request.url.path == API_PREFIX.rstrip("/")


async def _call(handler: Handler | None, request: Request, error: Exception, fallback: Callable[[], Response]):
    if handler is None:
        return fallback()
    response = handler(request, error)
    if inspect.isawaitable(response):
        response = await response
    return response


def install_error_handlers(app: FastAPI) -> None:
    """JSON errors for /api/ paths; install after the pages, whose handlers it wraps."""
    previous = dict(app.exception_handlers)

    async def api_error(request: Request, error: ApiError) -> Response:
        return error_response(error.status, error.problems, error.headers)

    async def models_unavailable(request: Request, error: ModelsUnavailable) -> Response:
        return error_response(503, [problem(None, f"Live analysis is unavailable: {error}")])

    async def invalid_request(request: Request, error: RequestValidationError) -> Response:
        if _is_api(request):
            return error_response(422, validation_problems(error))
        return await _call(previous.get(RequestValidationError), request, error, lambda: error_response(422, []))

    async def http_error(request: Request, error: HTTPException) -> Response:
        if _is_api(request):
            message = str(error.detail)
            if error.status_code == 404 and error.detail == "Not Found":
                message = f"There is no API endpoint at {request.url.path}; see /docs."
            elif error.status_code == 405:
                message = f"{request.method} is not allowed on {request.url.path}; see /docs."
            return error_response(error.status_code, [problem(None, message)], getattr(error, "headers", None))
        return await _call(previous.get(HTTPException), request, error, lambda: PlainTextResponse(str(error.detail), error.status_code))

    async def database_unavailable(request: Request, error: DatabaseUnavailable) -> Response:
        if _is_api(request):
            return error_response(503, [problem(None, str(error))])
        return await _call(previous.get(DatabaseUnavailable), request, error, lambda: PlainTextResponse(str(error), 503))

    async def database_error(request: Request, error: SQLAlchemyError) -> Response:
        if _is_api(request):
            url = display_url(request.app.state.settings.database)
            log.error("Database %s failed on %s %s: %s", url, request.method, request.url.path, error)
            message = "The database cannot be read or written right now; the server log has the details."
            return error_response(503, [problem(None, message)])
        return await _call(previous.get(SQLAlchemyError), request, error, lambda: PlainTextResponse("Database error", 503))

    async def server_error(request: Request, error: Exception) -> Response:
        if _is_api(request):
            return error_response(500, [problem(None, "Internal error; the server log has the details.")])
        return PlainTextResponse("Internal Server Error", status_code=500)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(ModelsUnavailable, models_unavailable)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(DatabaseUnavailable, database_unavailable)
    app.add_exception_handler(SQLAlchemyError, database_error)
    app.add_exception_handler(Exception, server_error)


def error_responses(*statuses: int) -> dict:
    """The documented (OpenAPI) error responses of a route or router."""
    descriptions = {
        400: "The body is not UTF-8, or a header is malformed.",
        401: "A token is required (TEXTFLIX_API_TOKEN is set) and the Authorization header has none.",
        403: "The bearer token is wrong.",
        404: "No such title or review in the catalogue.",
        413: "The body is over the size limit.",
        415: "The body is not sent as application/json.",
        422: "A field is missing, of the wrong type, or over a limit; `field` names it.",
        503: "The models are not loaded, or the database cannot be reached.",
    }
    return {status: {"model": ErrorResponse, "description": descriptions[status]} for status in statuses}


# What the guard (``app.api.guard``) answers on the POST routes before they run.
GUARD_ERRORS = error_responses(400, 401, 403, 413, 415)
