"""POST /api/reviews (analyse, and store with a title), GET /api/reviews/{id} and POST /api/reviews/{id}/words
(BERT's word shares of a stored review: computed and stored on its first view, read after)."""

import threading
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response, Security
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.settings import Settings
from app.web.analysis import Analyzer
from app.web.analysis_types import Analysis
from app.web.costs import check_explanation_size
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
from app.web.errors import GUARD_ERRORS, AppError, error_responses
from app.web.guard import bearer
from app.web.limits import MAX_ID, check_identifier, check_write_allowed, off_the_loop, posted_text
from app.web.queries.reviews import review_page, review_sentences_with_words
from app.web.review_words import review_word_shares
from app.web.schemas import ReviewDetail, ReviewRequest, ReviewResult, ReviewWords
from app.web.store import catalogue_title_exists, store_user_review
from app.web.view import Items, View

router = APIRouter(prefix="/api", tags=["reviews"], responses=error_responses(422, 503))
FULL_VIEW = View(analyze=True, accuracy=True, compare=True)


@router.post(
    "/reviews",
    status_code=201,
    response_model=ReviewResult,
    dependencies=[Security(bearer)],
    responses={
        200: {"model": ReviewResult, "description": "Analysed and not stored (no `title_id`)."},
        **GUARD_ERRORS,
        **error_responses(429),
    },
)
async def post_review(
    body: ReviewRequest,
    request: Request,
    response: Response,
    settings: Settings = Depends(get_settings),
    analyzer: Analyzer = Depends(get_analyzer),
    write_lock: threading.Lock = Depends(get_write_lock),
) -> ReviewResult:
    """Analyse a review, and store it under a title.

    Both models' predictions and sentence-level explanations of one review. With a
    `title_id` the review is stored (source `user`, shown with the catalogue), committed
    before the answer, which is **201** with its id and URL; without one, nothing is stored
    and the answer is 200."""
    text = await off_the_loop(posted_text, "text", body.text, settings)  # cleaning reads every character
    check_identifier("title_id", body.title_id)
    check_explanation_size("text", [text], settings)
    require_models(analyzer)
    if body.title_id is not None:
        check_write_allowed(request, settings)
        engine = await get_engine(request)  # only a review to store needs the database
        if not await run_in_threadpool(catalogue_title_exists, engine, body.title_id):
            raise AppError.one(422, "title_id", f"There is no title {body.title_id!r} in the catalogue.")
    [analysis] = await analyze_while_connected(request, analyzer, "text", [text], True)
    answer = ReviewResult(**dict(judged(analysis, body.label)), stored=False, title_id=body.title_id, label=body.label)
    if body.title_id is None:
        response.status_code = 200
        return answer
    review_id = await run_in_threadpool(store_user_review, engine, write_lock, text, body.title_id, body.label, analysis)
    urls = {"url": f"/reviews/{review_id}", "api_url": f"/api/reviews/{review_id}"}
    stored = answer.model_copy(update={"stored": True, "id": review_id, **urls})
    response.headers["Location"] = stored.api_url
    return stored


def judged(analysis: Analysis, label: str | None) -> Analysis:
    """``analysis`` with each prediction marked ``correct`` or not against the writer's ``label`` (if given)."""
    if label is None:
        return analysis
    predictions = {
        model: prediction.model_copy(update={"correct": prediction.label == label})
        for model, prediction in analysis.analysed_predictions().items()
    }
    return analysis.model_copy(update={"predictions": analysis.predictions.model_copy(update=predictions)})


@router.get("/reviews/{review_id}", response_model=ReviewDetail, responses=error_responses(404))
def get_review(
    review_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    session: Session = Depends(get_session),
    items: Items = Depends(get_items),
) -> dict:
    """One catalogue review with both models and its explanations.

    Text, gold label (if any), each model's prediction, the sentences with their spans
    and per-model LIME weights, NB-SVM's word weights and the explanation records."""
    page = review_page(session, review_id, FULL_VIEW, items.imdb)
    if page is None:
        raise AppError.one(404, "review_id", f"There is no review {review_id} in the catalogue.")
    return {"url": f"/reviews/{review_id}", **page}


@router.post(
    "/reviews/{review_id}/words",
    response_model=ReviewWords,
    dependencies=[Security(bearer)],
    responses={**GUARD_ERRORS, **error_responses(404, 409, 429)},
)
async def review_words(
    review_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    request: Request,
    analyzer: Analyzer = Depends(get_analyzer),
    write_lock: threading.Lock = Depends(get_write_lock),
) -> ReviewWords:
    """BERT's words of a stored review.

    Each sentence of the review with BERT's words and their shares of the sentence's contribution. The
    first request computes them (integrated gradients: about 1.5 CPU s a sentence, charged to the work
    limit) and stores them; later ones, and the review's JSON, read them. `computed` says which."""
    engine = await get_engine(request)
    computed = await review_word_shares(request, engine, write_lock, analyzer, review_id)
    sentences = await run_in_threadpool(sentences_with_words, engine, review_id)
    return ReviewWords(review_id=review_id, url=f"/reviews/{review_id}", computed=computed, sentences=sentences)


def sentences_with_words(engine: Engine, review_id: int) -> list[dict]:
    with Session(engine) as session:
        return review_sentences_with_words(session, review_id)