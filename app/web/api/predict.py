"""POST /api/predict: both models on a batch of texts, optionally explained; nothing is stored."""

from fastapi import APIRouter, Depends, Request, Security

from app.settings import Settings
from app.web.analysis import Analyzer
from app.web.costs import check_explanation_size
from app.web.deps import analyze_while_connected, get_analyzer, get_settings, require_models
from app.web.errors import GUARD_ERRORS, error_responses
from app.web.guard import bearer
from app.web.limits import check_words, off_the_loop, posted_texts
from app.web.schemas import PredictRequest, PredictResponse

router = APIRouter(prefix="/api", tags=["analysis"], responses=error_responses(422, 429, 503))


@router.post(
    "/predict",
    response_model=PredictResponse,
    response_model_exclude_none=True,
    dependencies=[Security(bearer)],
    responses=GUARD_ERRORS,
)
async def predict(
    body: PredictRequest,
    request: Request,
    settings: Settings = Depends(get_settings),
    analyzer: Analyzer = Depends(get_analyzer),
) -> PredictResponse:
    """Predict the sentiment of a batch of texts.

    One result per text, in order: each model's label and positive probability, and with
    `explain` the sentences with their character spans and LIME weight per model, and with
    `words` BERT's words of each sentence with their shares of its contribution.
    Concurrent requests are batched together for the models."""
    check_words(body.words, body.explain)
    texts = await off_the_loop(posted_texts, body.texts, settings)  # cleaning reads every character
    if body.explain:
        check_explanation_size("texts", texts, settings)
    require_models(analyzer)
    results = await analyze_while_connected(request, analyzer, "texts", texts, body.explain, body.words)
    return PredictResponse(results=results)
