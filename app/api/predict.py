"""POST /api/predict: both models on a batch of texts, optionally explained; nothing is stored."""

from fastapi import APIRouter, Request, Security

from app.api.deps import bearer, check_texts, require_analyzer, run_analysis
from app.api.errors import error_responses
from app.schemas import PredictRequest, PredictResponse

router = APIRouter(prefix="/api", tags=["analysis"])


@router.post(
    "/predict",
    response_model=PredictResponse,
    response_model_exclude_none=True,
    dependencies=[Security(bearer)],
    responses=error_responses(400, 401, 403, 413, 415, 422, 503),
    summary="Predict the sentiment of up to 64 texts",
)
async def predict(body: PredictRequest, request: Request) -> dict:
    """One result per text, in order: each model's label and positive probability, and with
    `explain` the sentences with their character spans and LIME weight per model.
    Concurrent requests are batched together for the models."""
    check_texts(body.texts, request.app.state.settings)
    analyzer = require_analyzer(request)
    return {"results": await run_analysis(analyzer, body.texts, body.explain)}
