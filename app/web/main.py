"""The web application: pages, JSON API and health check over the pipeline's database."""

import gc
import logging
import threading
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.db import database_problem, make_engine
from app.settings import Settings
from app.web import api, errors, pages
from app.web.analysis import load_analyzer
from app.web.build_state import BuildWatch
from app.web.deps import database_engine
from app.web.guard import ApiGuard
from app.web.headers import SecurityHeaders
from app.web.ready_analyzer import ReadyAnalyzer
from app.web.timing import ServerTiming

log = logging.getLogger("textflix")


def load_models(settings: Settings, models: tuple[str, ...]):
    """The analyzer of ``models`` (looked up when called: the shutdown tests put stand-in models here)."""
    return load_analyzer(settings, models)


@asynccontextmanager
async def lifespan(app: FastAPI):
    """Start the analyzer of the models that are ready (it stays on the app when the lifespan restarts, and
    loads each other model once the build has made it ready); stop it."""
    state = app.state
    if state.analyzer is None:
        state.analyzer = ReadyAnalyzer(
            state.settings, state.build, lambda: database_engine(app), state.write_lock, load_models
        )
    await state.analyzer.start()
    # What start-up made (modules, models: hundreds of thousands of objects) stays for good: kept out of
    # the collector's full passes, which hold every request while they run (half a second on 2 busy cores).
    gc.freeze()
    try:
        yield
    finally:
        await state.analyzer.stop()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(
        title="Textflix",
        description="Sentiment analysis of movie reviews, explained. JSON API under /api/; "
        "errors are `{\"detail\": [{\"field\", \"message\", \"limit\"?}]}`.",
        lifespan=lifespan,
        # no redirect from /api/movies/ to /api/movies: it would be built from the Host header, which the
        # client writes (Host: evil.example sent it to http://evil.example/api/movies)
        redirect_slashes=False,
        docs_url=None,  # /docs and /redoc on local files instead (app.web.api.install_docs)
        redoc_url=None,
    )
    problem = database_problem(settings.database)
    if problem:
        log.error(problem)
    app.state.settings = settings
    app.state.database_problem = problem
    app.state.engine = None if problem else make_engine(settings.database)
    app.state.write_lock = threading.Lock()  # one writer at a time (SQLite)
    app.state.export_lock = threading.Lock()  # one export at a time: each reads the whole database
    app.state.build = BuildWatch()  # what the build has made ready, as the analyzer last read it
    app.state.analyzer = None  # started at start-up, see lifespan
    app.state.first_views = {}  # review id: the computation of its words under way (``app.web.api.reviews``)

    pages.install(app)
    api.install(app)
    errors.install(app)
    app.add_middleware(ApiGuard, settings=settings)
    app.add_middleware(errors.StoppedAnswered)  # outside the guard: a request cancelled while its body is read too
    app.add_middleware(ServerTiming)  # outside the guard, so it times the guard too
    app.add_middleware(SecurityHeaders)  # outermost: the guard's refusals carry the headers too
    return app
