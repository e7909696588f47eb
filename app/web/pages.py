"""The web pages: server-rendered HTML (Jinja2) with a JSON twin for every page.

Each page is one query function (``app.web.queries``) whose dict feeds both the template
and the JSON answer. Ask for JSON with ``Accept: application/json`` or the ``.json``
twin of the path (``/index.json`` for the dashboard). The view state lives in the query
string (``app.web.view``). Templates are in ``templates/``, CSS and JS in ``static/``.
"""

import math
import threading
from dataclasses import replace
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.settings import Settings
from app.web import whatif
from app.web.analysis import Analyzer
from app.web.build_state import build_line, highlights_entry, pending_entry
from app.web.costs import check_explanation_size, words_seconds
from app.web.deps import (
    analyze_while_connected,
    get_analyzer,
    get_engine,
    get_items,
    get_session,
    get_settings,
    get_write_lock,
    require_models,
)
from app.web.errors import AppError, route_path, shown, wants_json
from app.web.limits import MAX_ID, off_the_loop, plausible_identifier, raw_length_problems, text_problems
from app.web.queries import about, dashboard, rationales, reviews, rows, summaries
from app.web.review_words import review_word_shares
from app.web.templating import STATIC_DIR, templates
from app.web.view import Items, View
from model.data import clean_text
from model.names import BERT, MODELS, TEACHER


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return value


# Pages that show the pending line whatever the view: they analyse, or list what both models read.
ANALYSING_PATHS = ("/analyze", "/disagreements")


def build_said(request: Request, path: str, view: View) -> dict | None:
    """While a model is pending, or a shown one's highlights are not all in (``app.web.build_state``), on a
    page that would show it: the models ready (their predictions shown) and explained (their highlights all
    in), each pending one as the API marks it, each one still explaining with its ``highlights_entry``, and
    the line the page shows near its top; None otherwise."""
    build = getattr(request.app.state, "build", None)
    if build is None or not (view.analyze or path in ANALYSING_PATHS):
        return None
    state = build.state
    if not (state.pending or state.explaining):
        return None
    return {
        "ready": list(state.ready),
        "explained": list(state.explained),
        "pending": {model: pending_entry(state, model) for model in state.pending},
        "explaining": {model: highlights_entry(state, model) for model in state.explaining},
        "line": build_line(state),
    }


def respond(
    request: Request, template: str, data: dict, view: View, items: Items | None = None, error: AppError | None = None
) -> Response:
    """The page as HTML, or its data (and the view) as JSON when the client asks for JSON;
    with ``error``, the page (a form, say) says what was wrong, with the error's status. While the
    build has not made every model ready, ``build`` says so (``build_said``). ``items``: how the
    HTML speaks of the catalogue's items (the JSON's keys are the same whatever they are)."""
    status, headers = (error.status, error.headers) if error else (200, None)
    path = quote(route_path(request.scope))  # an item's id may hold any character: its page links itself
    if build := build_said(request, path, view):
        data = {**data, "build": build}
    if wants_json(request):
        return JSONResponse(_json_safe({"view": view.as_dict(), **data}), status, headers)
    query = request.url.query
    json_url = ("/index.json" if path == "/" else path + ".json") + (f"?{query}" if query else "")
    context = {"view": view, "path": path, "json_url": json_url, **data}
    if items is not None:
        context["items"] = items
    return templates.TemplateResponse(request, template, context, status_code=status, headers=headers)


def respond_found(request: Request, template: str, data: dict | None, view: View, what: str, items: Items) -> Response:
    """``respond``, or a 404 naming ``what`` when the query found nothing (``data`` is None)."""
    if data is None:
        raise AppError.one(404, None, f"{what} is not in the catalogue.")
    return respond(request, template, data, view, items)


router = APIRouter(include_in_schema=False)

# Each page answers at its path and at its .json twin. Decorators apply bottom-up, so the
# twin (the lower one) is registered first: "/movies/{title_id}" would swallow "x.json".


MAX_PAGE = 1_000_000  # as the API's page numbers
MAX_SEARCH_CHARS = 200
FORM_BOOLEANS = {"on": True, "true": True, "1": True, "false": False, "0": False, "": False}


def page_number(request: Request) -> int:
    """The ``page`` of the query string, a whole number from 1 (``AppError`` 422 otherwise)."""
    given = request.query_params.get("page", "1").strip() or "1"
    whole = given.isascii() and given.isdigit() and len(given) <= len(str(MAX_PAGE))
    if not whole or not 1 <= int(given) <= MAX_PAGE:
        raise AppError.one(
            422, "page", f"The page number is a whole number from 1 to {MAX_PAGE:,}; got {given[:20]!r}.", MAX_PAGE
        )
    return int(given)


def dashboard_view(request: Request) -> View:
    """The view of the dashboard, with its title search (``q``) and page number."""
    search = request.query_params.get("q", "").strip()
    if len(search) > MAX_SEARCH_CHARS:
        raise AppError.one(
            422, "q", f"A title search is at most {MAX_SEARCH_CHARS} characters; got {len(search):,}.", MAX_SEARCH_CHARS
        )
    return replace(View.from_request(request), q=search, page=page_number(request))


def paginated(request: Request, view: View, pagination: dict, what: str) -> None:
    """Add to ``pagination`` the links to the pages before and after, in the format of this
    answer (None at either end); a 404 for a page past the last."""
    page, pages, total = pagination["page"], pagination["pages"], pagination["total"]
    if page > pages:
        raise AppError.one(404, "page", f"There is no page {page:,}: {total:,} {what}, {pages:,} pages of {pagination['per_page']}.")
    path = route_path(request.scope)
    pagination["prev"] = path + view.query(page=page - 1) if page > 1 else None
    pagination["next"] = path + view.query(page=page + 1) if page < pages else None


@router.get("/")
@router.get("/index.json")
def dashboard_page(
    request: Request,
    session: Session = Depends(get_session),
    settings: Settings = Depends(get_settings),
    items: Items = Depends(get_items),
) -> Response:
    view = dashboard_view(request)
    data = dashboard.dashboard(session, view, settings.titles_per_page, items.imdb)
    paginated(request, view, data["pagination"], f"{items.plural} match {view.q!r}" if view.q else items.plural)
    return respond(request, "dashboard.html", data, view, items)


# An item's page, at the path IMDB's links have always had and at the general one (``app.web.view.Items``); its
# id may hold a slash.
@router.get("/movies/{title_id:path}")
@router.get("/movies/{title_id:path}.json")
@router.get("/items/{title_id:path}")
@router.get("/items/{title_id:path}.json")
def movie_page(
    title_id: str, request: Request, session: Session = Depends(get_session), items: Items = Depends(get_items)
) -> Response:
    view = View.from_request(request)
    page = reviews.movie_page(session, title_id, view, items.imdb) if plausible_identifier(title_id) else None
    return respond_found(request, "movie.html", page, view, f"{items.capital} {shown(title_id)!r}", items)


@router.get("/reviews/{review_id:row_id}")
@router.get("/reviews/{review_id:row_id}.json")
def review_page(
    review_id: int,
    request: Request,
    session: Session = Depends(get_session),
    settings: Settings = Depends(get_settings),
    items: Items = Depends(get_items),
    analyzer: Analyzer = Depends(get_analyzer),
) -> Response:
    view = View.from_request(request)
    page = reviews.review_page(session, review_id, view, items.imdb) if review_id <= MAX_ID else None
    if page is not None and page.get("words_stored") is False:  # the page offers to compute them: it says how long
        page["needs_token"] = settings.api_token is not None  # the words' form sends it (``guard.FORM_PATHS``)
        page["words_seconds"] = words_seconds([s["text"] for s in page["review"]["sentences"]], seconds_per_pass(analyzer))
    what = f"Review {review_id}" if review_id <= MAX_ID else f"A review id over {MAX_ID:,}"
    return respond_found(request, "review.html", page, view, what, items)


@router.post("/reviews/{review_id:row_id}/words")
async def review_words(
    review_id: int,
    request: Request,
    engine: Engine = Depends(get_engine),
    analyzer: Analyzer = Depends(get_analyzer),
    write_lock: threading.Lock = Depends(get_write_lock),
) -> Response:
    """The review page's "Show BERT's words" without JavaScript: its word shares computed and stored (once), then
    the page again, the words in place (303)."""
    await review_word_shares(request, engine, write_lock, analyzer, review_id)
    return RedirectResponse(View.from_request(request).link(f"/reviews/{review_id}") + "#bert-words", status_code=303)


@router.get("/disagreements")
@router.get("/disagreements.json")
def disagreements_page(
    request: Request,
    session: Session = Depends(get_session),
    settings: Settings = Depends(get_settings),
    items: Items = Depends(get_items),
) -> Response:
    view = replace(View.from_request(request), page=page_number(request))
    data = reviews.disagreements(session, view.page, settings.disagreements_per_page, items.imdb)
    paginated(request, view, data["pagination"], "disagreements")
    return respond(request, "disagreements.html", data, view, items)


@router.get("/about")
@router.get("/about.json")
def about_page(request: Request, session: Session = Depends(get_session), items: Items = Depends(get_items)) -> Response:
    return respond(request, "about.html", about.about(session), View.from_request(request), items)


@router.get("/rationales/{doc}")
@router.get("/rationales/{doc}.json")
def rationale_page(
    doc: str, request: Request, session: Session = Depends(get_session), items: Items = Depends(get_items)
) -> Response:
    view = View.from_request(request)
    page = rationales.rationale_page(session, doc) if plausible_identifier(doc) else None
    if page is None:
        raise AppError.one(404, None, f"Review {doc!r} is not among ERASER's annotated reviews of this build.")
    return respond(request, "rationale.html", page, view, items)


async def _analyze(request: Request, analyzer: Analyzer, text: str, words: bool = False) -> dict:
    """Both models on one text, as the page shows them (with BERT's ``words`` in its sentences)."""
    [analysis] = await analyze_while_connected(request, analyzer, "text", [text], True, words)
    # as the API answers them, with the fields each has (``exclude_unset``: an explanation not exact has no start)
    predictions = {model: p.model_dump(exclude_unset=True) for model, p in analysis.analysed_predictions().items()}
    for prediction in predictions.values():
        prediction["confidence"] = summaries.confidence_of(prediction)
    explanations = {model: e.model_dump(exclude_unset=True) for model, e in analysis.analysed_explanations().items()}
    sentences = [
        {**sentence.model_dump(exclude_unset=True), "position": index,
         "weights": {m: w for m, w in sentence.weights.by_model().items() if w is not None}}
        for index, sentence in enumerate(analysis.sentences)
    ]  # fmt: skip
    item = {
        "predictions": {model: predictions[model] for model in MODELS if model in predictions},
        # the models the build has not made ready yet (``app.web.ready_analyzer``)
        "pending": [model for model in MODELS if model not in predictions],
        "sentences": sentences,
        "disagree": len({p["label"] for p in predictions.values()}) > 1,
        "trust": {model: rows.explanation_trust({**e["quality"], "score": e["score"]}) for model, e in explanations.items()},
        # what each model's sentence weights are counted from: the text with every sentence removed
        "intercepts": {model: e["intercept"] for model, e in explanations.items()},
        "explanations": explanations,
        # the exact models' shares as the bars of a waterfall (whatif.waterfall)
        "waterfalls": {
            model: whatif.waterfall(e["start"], [s["contributions"][model] for s in sentences])
            for model, e in explanations.items() if e.get("exact")
        },
    }
    return item


async def _submitted(request: Request) -> dict:
    """The fields of the posted form or JSON object (the guard has checked its size, its type and the token)."""
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return dict(await request.form())
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        raise AppError.one(400, "body", "The body is not valid JSON (or is nested too deeply).") from None
    return body if isinstance(body, dict) else {}


def words_asked(value) -> bool:
    """The posted ``words`` field: JSON's true or false, or a form's checkbox ("on", "true", "1"; absent, "false", "0")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in FORM_BOOLEANS:
        return FORM_BOOLEANS[value.lower()]
    raise AppError.one(422, "words", "`words` is true or false: whether to add BERT's word shares to the sentences.")


def seconds_per_pass(analyzer: Analyzer) -> float | None:
    """A model pass's seconds as the server measured them at start (``ModelAnalyzer.limits``); None unmeasured."""
    return analyzer.info().get("limits", {}).get("seconds_per_pass")


def _cleaned(text: str, clean: bool) -> tuple[str, str]:
    """The posted ``text``, cleaned (when ``clean``) as the API's texts and the catalogue's reviews are, and as
    the form gives it back, printable; off the event loop, as both read every character."""
    if clean:
        text = clean_text(text)
    return text, text.encode("utf-8", "replace").decode("utf-8")


async def _analysis(request: Request, analyzer: Analyzer, settings: Settings, data: dict) -> None:
    """Fill ``data`` with the analysis of the posted text, or raise ``AppError`` saying why not."""
    if request.method != "POST":  # a link may fill the form in, but only a POST makes the server work
        require_models(analyzer)
        return
    fields = await _submitted(request)
    text = fields.get("text", "")
    if not isinstance(text, str):
        raise AppError.one(422, "text", "The text must be a string.")
    too_long = raw_length_problems("text", text, settings)  # before the cleaning, which reads every character
    text, data["text"] = await off_the_loop(_cleaned, text, not too_long)
    if too_long:
        raise AppError(422, too_long)
    require_models(analyzer)
    if not text.strip():
        raise AppError.one(422, "text", "Paste a review into the box first.", 1)
    if problems := text_problems("text", text, settings):
        raise AppError(422, problems)
    check_explanation_size("text", [text], settings)
    data["result"] = result = await _analyze(request, analyzer, text, words_asked(fields.get("words", False)))
    teacher = result["predictions"].get(BERT, {}).get("read_by") == TEACHER
    data["words_seconds"] = words_seconds([s["text"] for s in result["sentences"]], seconds_per_pass(analyzer), teacher)


@router.api_route("/analyze", methods=["GET", "POST"])
@router.api_route("/analyze.json", methods=["GET", "POST"])
async def analyze_page(
    request: Request, analyzer: Analyzer = Depends(get_analyzer), settings: Settings = Depends(get_settings)
) -> Response:
    """The form (GET, ``?text=`` fills it in) and the analysis of the posted review (POST)."""
    limit = settings.max_text_chars
    text = request.query_params.get("text", "")[:limit]
    view = View.from_request(request)
    data = {"text": text, "result": None, "error": None, "max_chars": limit, "needs_token": settings.api_token is not None}
    try:
        await _analysis(request, analyzer, settings, data)
    except AppError as error:
        if wants_json(request):
            raise
        data["error"] = " ".join(problem["message"] for problem in error.problems)
        return respond(request, "analyze.html", data, view, error=error)
    return respond(request, "analyze.html", data, view)


def install(app: FastAPI) -> None:
    """Add the pages and their static files to ``app``."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(router)
