"""GET /api/health: database reachable, models loaded, on which device."""

import logging

from fastapi import APIRouter, Request
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from app.db import MODELS
from app.schemas import Health

router = APIRouter(prefix="/api", tags=["health"])
log = logging.getLogger("textflix")


@router.get("/health", response_model=Health, response_model_exclude_none=True, summary="Health check")
def health(request: Request) -> dict:
    state = request.app.state
    reachable = False
    if state.engine is not None:
        try:
            with state.engine.connect() as connection:
                connection.execute(text("SELECT 1 FROM runs LIMIT 1"))
            reachable = True
        except SQLAlchemyError as error:
            url = make_url(state.settings.database).render_as_string(hide_password=True)
            log.error("Database %s is not readable: %s", url, error)
    analyzer = getattr(state, "analyzer", None)
    info = analyzer.info() if analyzer is not None and hasattr(analyzer, "info") else {}
    settings = state.settings
    return {
        "status": "ok" if reachable and analyzer is not None else "degraded",
        "database": "ok" if reachable else "unavailable",
        "models": {name: analyzer is not None for name in MODELS},
        "models_problem": getattr(state, "models_problem", None) if analyzer is None else None,
        "device": info.get("device"),
        "batch_window_ms": settings.batch_window_ms,
        "batching": settings.batch_window_ms > 0,
    }
