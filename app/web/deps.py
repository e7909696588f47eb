"""What the pages and the JSON API share: settings, the database, the analyzer.

Routes take them as FastAPI dependencies; ``app.web.main`` puts them on ``app.state`` at
start-up. Tests swap the analyzer with ``app.dependency_overrides[get_analyzer]``.
"""

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from fastapi import Depends, Request
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.db import database_problem, make_engine
from app.settings import Settings
from app.web.analysis import Analyzer
from app.web.analysis_types import Analysis
from app.web.costs import ExplanationTooLarge
from app.web.errors import AnalysisTooLong, AppError, ClientGone, DatabaseUnavailable, ModelsUnavailable
from app.web.view import Items

T = TypeVar("T")
DISCONNECT_POLL_S = 0.25  # how often a running analysis looks whether its client is still there


# The dependencies are coroutines because none of them waits on anything but the session's
# close: FastAPI runs a plain function in the thread pool, a hop that cost ~0.3 ms each
# (measured beside the pages' 10 ms budget, scripts/bench_pages.py).


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def database_engine(app) -> Engine | None:
    """The app's engine; None while its SQLite file is missing. A server started before its
    database was built serves it as soon as the file is there, without a restart."""
    state = app.state
    if state.engine is None and state.database_problem is not None:
        if database_problem(state.settings.database) is None:
            state.engine, state.database_problem = make_engine(state.settings.database), None
    return state.engine


async def get_engine(request: Request) -> Engine:
    engine = database_engine(request.app)
    if engine is None:  # the path is in the log, not in the answer
        raise DatabaseUnavailable("There is no database yet: run `textflix build` to create it.")
    return engine


async def get_session(engine: Engine = Depends(get_engine)) -> AsyncIterator[Session]:
    """A session for a route's thread: it connects on its first query; closing it hands the
    connection back to the pool (a rollback: no more than one round trip)."""
    with Session(engine) as session:
        yield session


async def get_items(request: Request) -> Items:
    """What the pages call the catalogue's items, and where their pages are (``app.web.view.Items``): of the
    corpus the app's ``BuildWatch`` last read in the run record, not a query per request."""
    state = request.app.state
    return Items.of(state.build.state.corpus, state.settings.item_noun)


async def get_write_lock(request: Request) -> threading.Lock:
    """Serialises the server's writes (SQLite takes one writer at a time)."""
    return request.app.state.write_lock


async def get_analyzer(request: Request) -> Analyzer:
    """The analyzer, loaded or not (``Analyzer.problem`` says why not)."""
    return request.app.state.analyzer


def require_models(analyzer: Analyzer) -> None:
    """``ModelsUnavailable`` when the analyzer's models are not loaded (checked after the input)."""
    if analyzer.problem is not None:
        raise ModelsUnavailable(analyzer.problem)


async def analyze_while_connected(
    request: Request, analyzer: Analyzer, field: str, texts: list[str], explain: bool, words: bool = False
) -> list[Analysis]:
    """``analyzer.analyze`` (with BERT's ``words``), ``while_connected``."""
    return await while_connected(request, field, analyzer.analyze(texts, explain, words=words))


async def while_connected(request: Request, field: str, work: Awaitable[T]) -> T:
    """``work``, cancelled as soon as the client goes away (``ClientGone``) or it runs past
    ``analysis_timeout_s`` (``AnalysisTooLong``); an explanation over the budget is a 422
    naming ``field``, the field of the texts."""
    limit = request.app.state.settings.analysis_timeout_s
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit if limit else None
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise ClientGone()
            if deadline is not None and loop.time() > deadline:
                raise AnalysisTooLong(limit)
    except ExplanationTooLarge as error:
        raise AppError.one(422, field, str(error), error.limit) from None
    finally:
        task.cancel()
