"""GET /api/health: database reachable, models loaded, on which device, in which process."""

import logging
import os
import socket

from fastapi import APIRouter, Depends, Request
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.db import display_url
from app.settings import Settings
from app.web.analysis import Analyzer
from app.web.build_state import pending_line
from app.web.deps import database_engine, get_analyzer, get_settings
from app.web.schemas import Health
from model.names import MODELS

router = APIRouter(prefix="/api", tags=["health"])
log = logging.getLogger("textflix")


def database_reachable(request: Request, settings: Settings) -> bool:
    engine = database_engine(request.app)
    if engine is None:
        return False
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1 FROM runs LIMIT 1"))
    except SQLAlchemyError as error:
        log.error("Database %s is not readable: %s", display_url(settings.database), error)
        return False
    return True


@router.get("/health", response_model=Health, response_model_exclude_none=True)
def health(
    request: Request, settings: Settings = Depends(get_settings), analyzer: Analyzer = Depends(get_analyzer)
) -> dict:
    """Health check: database reachable, models loaded, on which device, in which process."""
    reachable = database_reachable(request, settings)
    loaded = analyzer.problem is None
    info = analyzer.info()
    # a model the build has not made ready yet is not loaded (``app.web.ready_analyzer``)
    models = {name: loaded and name in info.get("models_loaded", MODELS) for name in MODELS}
    return {
        "status": "ok" if reachable and all(models.values()) else "degraded",
        "database": "ok" if reachable else "unavailable",
        "models": models,
        "models_problem": analyzer.problem or (None if all(models.values()) else pending_line(request.app.state.build.state)),
        "device": info.get("device"),
        "work_in_flight": info.get("work_in_flight"),
        "limits": info.get("limits"),
        "batch_window_ms": settings.batch_window_ms,
        "batching": settings.batch_window_ms > 0,
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
