"""The web application: pages, JSON API and health check over the pipeline's database."""

import logging
import threading
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import event
from starlette.concurrency import run_in_threadpool

from app import api, pages
from app.analysis import Analyzer
from model.trained import ModelUnavailable
from app.db import make_engine, sqlite_path
from app.settings import Settings

log = logging.getLogger("textflix")
SQLITE_BUSY_TIMEOUT_MS = 30_000


def database_problem(settings: Settings) -> str | None:
    """Why the database cannot be served, in one sentence, or None when it can."""
    path = sqlite_path(settings.database)
    if path is not None and not path.exists():
        return f"No database at {path}: run `textflix build` to create it."
    return None


def _sqlite_busy_timeout(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


@asynccontextmanager
async def lifespan(app: FastAPI):
    """Load the models once (kept on the app across restarts of the lifespan); start and stop the batchers.

    An analyzer put on ``app.state.analyzer`` before start-up (a test's stand-in) is left alone.
    """
    state = app.state
    started = None
    if state.analyzer is None:
        if state.loaded_analyzer is None and state.models_problem is None:
            try:
                state.loaded_analyzer = await run_in_threadpool(Analyzer.load, state.settings)
            except ModelUnavailable as error:
                state.models_problem = str(error)
                log.error("The API cannot analyse reviews: %s The pages still serve the database.", error)
        if state.loaded_analyzer is not None:
            started = state.loaded_analyzer
            await started.start()
            state.analyzer = started
    try:
        yield
    finally:
        if started is not None:
            state.analyzer = None
            await started.stop()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(
        title="Textflix",
        description="Sentiment analysis of movie reviews, explained. JSON API under /api/; "
        "errors are `{\"detail\": [{\"field\", \"message\", \"limit\"?}]}`.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    problem = database_problem(settings)
    if problem:
        log.error(problem)
    app.state.database_problem = problem
    app.state.engine = None if problem else make_engine(settings.database)
    if app.state.engine is not None and app.state.engine.dialect.name == "sqlite":
        event.listen(app.state.engine, "connect", _sqlite_busy_timeout)
    app.state.write_lock = threading.Lock()  # one writer at a time (SQLite)
    app.state.analyzer = None  # set at start-up, see lifespan
    app.state.loaded_analyzer = None
    app.state.models_problem = None

    pages.install(app)
    api.install(app)  # after the pages: its error handlers wrap theirs
    return app
