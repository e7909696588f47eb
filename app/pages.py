"""The web pages: server-rendered HTML (Jinja2) with a JSON twin for every page.

Each page is one query function (``app.queries``) whose dict feeds both the template
and the JSON answer. Ask for JSON with ``Accept: application/json`` or the ``.json``
twin of the path (``/index.json`` for the dashboard). The view state lives in the query
string (``app.view``). Templates are in ``templates/``, CSS and JS in ``static/``.
"""

import logging
import math
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

import app as app_package
from app import queries, render
from app.analysis import Analyzer
from app.db import display_url
from app.deps import DatabaseUnavailable, get_analyzer, get_session, get_settings
from app.settings import Settings
from app.view import View
from model.names import DISPLAY_NAMES, MAIN_MODEL, MODELS, short_label

log = logging.getLogger("textflix")

ROOT = Path(app_package.__file__).resolve().parent.parent
TEMPLATES_DIR = ROOT / "templates"
STATIC_DIR = ROOT / "static"

templates = Jinja2Templates(directory=TEMPLATES_DIR)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _pct(value: float | None, digits: int = 0) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}%}"


templates.env.filters.update(
    num=lambda value: "–" if value is None else f"{value:,}",
    pct=_pct,
    signed=lambda value: "–" if value is None else f"{value:+.3f}",
    duration=_duration,
    side=short_label,
)
templates.env.globals.update(
    highlight=render.highlight,
    sentence_mark=render.sentence_mark,
    word_highlight=render.word_highlight,
    bar_svg=render.bar_svg,
    ticks_svg=render.ticks_svg,
    calibration_svg=render.calibration_svg,
    learning_curve_svg=render.learning_curve_svg,
    DISPLAY_NAMES=DISPLAY_NAMES,
    MODELS=MODELS,
    MAIN_MODEL=MAIN_MODEL,
    ANALYSIS_VIEW=View(analyze=True, accuracy=True, compare=True),
)


def wants_json(request: Request) -> bool:
    if request.url.path.endswith(".json"):
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return value


def respond(request: Request, template: str, data: dict, view: View, status_code: int = 200) -> Response:
    """The page as HTML, or its data (and the view) as JSON when the client asks for JSON."""
    if wants_json(request):
        return JSONResponse(_json_safe({"view": view.as_dict(), **data}), status_code=status_code)
    path = request.url.path
    query = request.url.query
    json_url = ("/index.json" if path == "/" else path + ".json") + (f"?{query}" if query else "")
    context = {"view": view, "path": path, "json_url": json_url, **data}
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def respond_found(request: Request, template: str, data: dict | None, view: View, what: str) -> Response:
    """``respond``, or a 404 naming ``what`` when the query found nothing (``data`` is None)."""
    if data is None:
        raise HTTPException(status_code=404, detail=f"{what} is not in the catalogue.")
    return respond(request, template, data, view)


router = APIRouter(include_in_schema=False)

# Each page answers at its path and at its .json twin. Decorators apply bottom-up, so the
# twin (the lower one) is registered first: "/movies/{title_id}" would swallow "x.json".


@router.get("/")
@router.get("/index.json")
def dashboard_page(request: Request, session: Session = Depends(get_session)) -> Response:
    view = View.from_request(request)
    return respond(request, "dashboard.html", queries.dashboard(session, view), view)


@router.get("/movies/{title_id}")
@router.get("/movies/{title_id}.json")
def movie_page(title_id: str, request: Request, session: Session = Depends(get_session)) -> Response:
    view = View.from_request(request)
    return respond_found(request, "movie.html", queries.movie_page(session, title_id, view), view, f"Title {title_id}")


@router.get("/reviews/{review_id:int}")
@router.get("/reviews/{review_id:int}.json")
def review_page(review_id: int, request: Request, session: Session = Depends(get_session)) -> Response:
    view = View.from_request(request)
    page = queries.review_page(session, review_id, view)
    return respond_found(request, "review.html", page, view, f"Review {review_id}")


@router.get("/disagreements")
@router.get("/disagreements.json")
def disagreements_page(request: Request, session: Session = Depends(get_session)) -> Response:
    return respond(request, "disagreements.html", queries.disagreements(session), View.from_request(request))


@router.get("/about")
@router.get("/about.json")
def about_page(request: Request, session: Session = Depends(get_session)) -> Response:
    return respond(request, "about.html", queries.about(session), View.from_request(request))


async def _analyze(analyzer: Analyzer, text: str) -> dict:
    """Both models on one text, as the page shows them."""
    [result] = await analyzer.analyze([text], True)
    predictions = {
        model: {**prediction, "confidence": queries.confidence_of(prediction)}
        for model, prediction in result.get("predictions", {}).items()
    }
    sentences = [
        {**sentence, "position": index, "weights": sentence.get("weights") or {}}
        for index, sentence in enumerate(result.get("sentences") or [])
    ]
    item = {
        "predictions": {model: predictions[model] for model in MODELS if model in predictions},
        "sentences": sentences,
        "disagree": len({p["label"] for p in predictions.values()}) > 1,
    }
    item["weight_scale"] = queries.weight_scales([item], MODELS)
    return item


async def _submitted_text(request: Request) -> str | None:
    if request.method != "POST":
        return request.query_params.get("text")
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            body = await request.json()
        except ValueError:
            body = None
        text = body.get("text") if isinstance(body, dict) else None
    else:
        text = (await request.form()).get("text")
    return text if isinstance(text, str) else ""


@router.api_route("/analyze", methods=["GET", "POST"])
@router.api_route("/analyze.json", methods=["GET", "POST"])
async def analyze_page(
    request: Request, analyzer: Analyzer = Depends(get_analyzer), settings: Settings = Depends(get_settings)
) -> Response:
    text = await _submitted_text(request)
    limit = settings.max_text_chars
    data = {"text": text or "", "result": None, "error": None, "max_chars": limit}
    status = 200
    if analyzer.problem is not None:
        data["error"] = "The models are not loaded, so nothing can be analysed right now."
        status = 503
    elif text is not None:
        if not text.strip():
            data["error"], status = "Paste a review into the box first.", 422
        elif len(text) > limit:
            data["error"] = f"The review is {len(text):,} characters long; the limit is {limit:,}."
            status = 422
        else:
            try:
                data["result"] = await _analyze(analyzer, text)
            except Exception:
                log.exception("Analysis of a %d-character text failed", len(text))
                data["error"], status = "The analysis failed; the server log has the details.", 500
    return respond(request, "analyze.html", data, View.from_request(request), status)


# --- errors --------------------------------------------------------------------------------


def _error_page(request: Request, status: int, title: str, message: str) -> Response:
    if wants_json(request) or request.url.path.startswith("/api/"):
        return JSONResponse({"detail": message}, status_code=status)
    context = {"view": View.from_request(request), "path": request.url.path, "title": title, "message": message}
    return templates.TemplateResponse(request, "error.html", context, status_code=status)


async def _http_error(request: Request, error: HTTPException) -> Response:
    if wants_json(request) or request.url.path.startswith("/api/"):
        return await http_exception_handler(request, error)
    titles = {404: "Not found", 405: "Method not allowed"}
    message = "There is no page at this address." if error.detail == "Not Found" else str(error.detail)
    return _error_page(request, error.status_code, titles.get(error.status_code, "Error"), message)


async def _database_unavailable(request: Request, error: DatabaseUnavailable) -> Response:
    return _error_page(request, 503, "The database is not built yet", str(error))


async def _database_error(request: Request, error: SQLAlchemyError) -> Response:
    url = display_url(request.app.state.settings.database)
    log.error("Database %s is not readable (%s): run `textflix build` to build it.", url, error.__class__.__name__)
    return _error_page(
        request,
        503,
        "The database cannot be read",
        f"The database at {url} is missing tables or damaged: run `textflix build` to build it.",
    )


def install(app: FastAPI) -> None:
    """Add the pages, their static files and their error pages to ``app``."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(router)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(DatabaseUnavailable, _database_unavailable)
    app.add_exception_handler(SQLAlchemyError, _database_error)
