"""A catalogue review's BERT words on its first view: computed once (``app.web.word_sharing``), stored
(``app.word_rows``), then read. The API's ``POST /api/reviews/{id}/words`` and the review page's form
without JavaScript (``POST /reviews/{id}/words``) both ask through ``review_word_shares``."""

import asyncio
from functools import partial

from fastapi import Request
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.web.analysis import Analyzer
from app.web.deps import require_models, while_connected
from app.web.errors import AppError
from app.word_rows import has_words, review_sentences, store_words
from model.names import BERT, DISPLAY_NAMES


async def review_word_shares(request: Request, engine: Engine, write_lock, analyzer: Analyzer, review_id: int) -> bool:
    """Make sure BERT's words of review ``review_id`` are stored; True when this request computed them."""
    found = await run_in_threadpool(stored_review, engine, review_id)
    if found is None:
        raise AppError.one(404, "review_id", f"There is no review {review_id} in the catalogue.")
    text, sentence_ids, spans, stored = found
    if stored:
        return False
    if not spans:
        raise AppError.one(
            409, "review_id", f"Review {review_id} has no sentences stored yet (the build has not explained it): "
            "its words can be computed once it has.",
        )  # fmt: skip
    require_models(analyzer)
    compute = partial(computed_words, engine, write_lock, analyzer, text, sentence_ids, spans)
    return await while_connected(request, "review_id", first_view(request.app.state.first_views, review_id, compute))


def stored_review(engine: Engine, review_id: int) -> tuple[str, list[int], list, bool] | None:
    """A catalogue review's text, its stored sentences' ids and spans, and whether BERT's words of them are stored."""
    with Session(engine) as session:
        found = review_sentences(session, review_id)
        return None if found is None else (*found, has_words(session, found[1], BERT))


def first_view(views: dict, review_id: int, compute) -> asyncio.Future:
    """The computation of a review's words under way (``compute()``), shared by the first views that ask at
    once, and not cancelled when one of them leaves: the first to start computes, the others wait for it."""
    if review_id not in views:
        views[review_id] = asyncio.ensure_future(compute())
        views[review_id].add_done_callback(lambda _: views.pop(review_id, None))
    return asyncio.shield(views[review_id])


async def computed_words(engine: Engine, write_lock, analyzer: Analyzer, text: str, sentence_ids: list[int], spans) -> bool:
    """BERT's words of a review's stored sentences, computed and stored; True when this stored them."""
    shares = await analyzer.review_words(text, spans)
    if shares is None:
        raise AppError.one(
            409, "review_id", f"This build's {DISPLAY_NAMES[BERT]} reads a review of several sentences whole, so its "
            "sentences have no exact shares to split over their words (a build with --pooling sentences has).",
        )  # fmt: skip
    return await run_in_threadpool(store_words, engine, write_lock, sentence_ids, BERT, shares)
