"""Storing reviews posted through the API, so that they show like catalogue reviews.

A user review is a ``Review`` (split "catalogue", source "user", no source key or
rating) with both models' ``Prediction`` rows, its ``Sentence`` rows with both models'
``SentenceWeight`` rows, and one sentence-level ``Explanation`` row per model, written
in one transaction that is committed before the API answers. Writes are serialized
with one lock per server (SQLite allows one writer at a time; the busy timeout set
in ``app.db.make_engine`` covers writers in other processes).
"""

import threading

from sqlalchemy import select
from sqlalchemy.engine import Engine

from app.db import Explanation, Prediction, Review, Sentence, SentenceWeight, session_scope
from app.web.analysis import finite
from model.names import CATALOGUE, SENTENCE, USER


def catalogue_title_exists(engine: Engine, title_id: str) -> bool:
    """Whether ``title_id`` is a title of the catalogue (it has catalogue reviews)."""
    with session_scope(engine) as session:
        found = session.scalar(
            select(Review.id).where(Review.title_id == title_id, Review.split == CATALOGUE).limit(1)
        )
    return found is not None


def store_user_review(
    engine: Engine, lock: threading.Lock, text: str, title_id: str, label: str | None, result: dict
) -> int:
    """Write the review and its analysis (from ``Analyzer.analyze(..., explain=True)``); returns its id."""
    review = Review(
        title_id=title_id,
        text=text,
        label=label,
        rating=None,
        split=CATALOGUE,
        source=USER,
        source_key=None,
        word_count=len(text.split()),
    )
    review.predictions = [
        Prediction(model=model, label=p["label"], p_positive=finite(p["p_positive"]))
        for model, p in result["predictions"].items()
    ]
    review.sentences = [
        Sentence(
            position=position,
            start=sentence["start"],
            end=sentence["end"],
            text=sentence["text"],
            weights=[SentenceWeight(model=model, weight=finite(w)) for model, w in sentence["weights"].items()],
        )
        for position, sentence in enumerate(result["sentences"])
    ]
    review.explanations = [
        Explanation(
            model=model,
            level=SENTENCE,
            samples=info["samples"],
            intercept=finite(info["intercept"]),
            score=finite(info["score"]),
            **info["quality"],
        )
        for model, info in result["explanations"].items()
    ]
    with lock, session_scope(engine) as session:
        session.add(review)
        session.flush()
        review_id = review.id
    return review_id
