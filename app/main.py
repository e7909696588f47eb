"""The web application: pages, JSON API and health check over the pipeline's database."""

import logging

from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app import pages
from app.db import make_engine, sqlite_path
from app.settings import Settings

log = logging.getLogger("textflix")


def database_problem(settings: Settings) -> str | None:
    """Why the database cannot be served, in one sentence, or None when it can."""
    path = sqlite_path(settings.database)
    if path is not None and not path.exists():
        return f"No database at {path}: run `textflix build` to create it."
    return None


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(title="Textflix", description="Sentiment analysis of movie reviews, explained.")
    app.state.settings = settings
    problem = database_problem(settings)
    if problem:
        log.error(problem)
    app.state.database_problem = problem
    app.state.engine = None if problem else make_engine(settings.database)

    @app.get("/api/health")
    def health() -> dict:
        reachable = False
        if app.state.engine is not None:
            try:
                with app.state.engine.connect() as connection:
                    connection.execute(text("SELECT 1 FROM runs LIMIT 1"))
                reachable = True
            except SQLAlchemyError as error:
                log.error("Database %s is not readable: %s", settings.database, error)
        return {"database": "ok" if reachable else "unavailable"}

    pages.install(app)
    return app
