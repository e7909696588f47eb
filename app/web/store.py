"""Storing reviews posted through the API, so that they show like catalogue reviews.

A user review is a ``Review`` (split "catalogue", source "user", no source key or
rating) with both models' ``Prediction`` rows, its ``Sentence`` rows with both models'
``SentenceWeight`` rows, and one sentence-level ``Explanation`` row per model, written
in one transaction that is committed before the API answers. Writes are serialized
with one lock per server (SQLite allows one writer at a time; the busy timeout set
in ``app.db.make_engine`` covers writers in other processes).

A model still pending when the review was posted (the build has not made it ready) gets its
rows later: the build's predict and explain steps of that model cover the user reviews stored
before they listed their reviews, and the server fills in the rest once it loads the model
(``lacking_model`` and ``fill_in_model``, run by ``app.web.ready_analyzer``).
"""

import threading
from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.engine import Engine

from app.db import Explanation, Prediction, Review, Sentence, SentenceWeight, session_scope
from app.web.analysis import finite
from app.web.build_state import analysed
from model.names import CATALOGUE, SENTENCE, USER
from model.sentences import Span


def catalogue_title_exists(engine: Engine, title_id: str) -> bool:
    """Whether ``title_id`` is a title of the catalogue (it has catalogue reviews)."""
    with session_scope(engine) as session:
        found = session.scalar(
            select(Review.id).where(Review.title_id == title_id, Review.split == CATALOGUE).limit(1)
        )
    return found is not None


def prediction_row(model: str, prediction: dict) -> Prediction:
    return Prediction(model=model, label=prediction["label"], p_positive=finite(prediction["p_positive"]))


def explanation_row(model: str, info: dict) -> Explanation:
    return Explanation(
        model=model,
        level=SENTENCE,
        samples=info["samples"],
        intercept=finite(info["intercept"]),
        score=finite(info["score"]),
        **info["quality"],
    )


def store_user_review(
    engine: Engine, lock: threading.Lock, text: str, title_id: str, label: str | None, result: dict
) -> int:
    """Write the review and its analysis (from ``Analyzer.analyze(..., explain=True)``); returns its id.
    A model that was pending gets no rows: ``fill_in_model`` writes them once it is loaded."""
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
    review.predictions = [prediction_row(model, p) for model, p in analysed(result["predictions"]).items()]
    review.sentences = [
        Sentence(
            position=position,
            start=sentence["start"],
            end=sentence["end"],
            text=sentence["text"],
            weights=[
                SentenceWeight(model=model, weight=finite(w)) for model, w in sentence["weights"].items() if w is not None
            ],
        )
        for position, sentence in enumerate(result["sentences"])
    ]
    review.explanations = [explanation_row(model, info) for model, info in analysed(result["explanations"]).items()]
    with lock, session_scope(engine) as session:
        session.add(review)
        session.flush()
        review_id = review.id
    return review_id


def lacking_model(engine: Engine, model: str) -> list[tuple[int, str, list[Span]]]:
    """The user reviews that ``model`` has not predicted or explained yet (stored while it was pending, after
    the build had listed the reviews to do): id, text and stored sentences of each."""
    predicted = select(Prediction.review_id).where(Prediction.model == model)
    explained = select(Explanation.review_id).where(Explanation.model == model, Explanation.level == SENTENCE)
    with session_scope(engine) as session:
        reviews = session.execute(
            select(Review.id, Review.text)
            .where(Review.split == CATALOGUE, Review.source == USER)
            .where(Review.id.not_in(predicted) | Review.id.not_in(explained))
            .order_by(Review.id)
        ).all()
        spans = defaultdict(list)
        if reviews:
            rows = session.execute(
                select(Sentence.review_id, Sentence.start, Sentence.end, Sentence.text)
                .where(Sentence.review_id.in_([review.id for review in reviews]))
                .order_by(Sentence.review_id, Sentence.position)
            )
            for row in rows:
                spans[row.review_id].append(Span(row.start, row.end, row.text))
    return [(review.id, review.text, spans[review.id]) for review in reviews]


def fill_in_model(engine: Engine, lock: threading.Lock, review_id: int, model: str, result: dict) -> None:
    """Write ``model``'s rows of a stored review that lacks them, from ``result`` (an analysis of its text
    over its stored sentences, in order): its prediction, and its sentence weights with its explanation,
    each only if it is still missing (the build may have written one of them)."""
    with lock, session_scope(engine) as session:
        if session.get(Prediction, {"model": model, "review_id": review_id}) is None:
            row = prediction_row(model, result["predictions"][model])
            row.review_id = review_id
            session.add(row)
        if session.get(Explanation, {"model": model, "review_id": review_id, "level": SENTENCE}) is None:
            sentences = session.scalars(
                select(Sentence).where(Sentence.review_id == review_id).order_by(Sentence.position)
            ).all()
            for sentence, analysed_sentence in zip(sentences, result["sentences"], strict=True):
                session.merge(SentenceWeight(sentence_id=sentence.id, model=model, weight=finite(analysed_sentence["weights"][model])))
            row = explanation_row(model, result["explanations"][model])
            row.review_id = review_id
            session.add(row)
