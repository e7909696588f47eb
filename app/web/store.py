"""Storing reviews posted through the API, so that they show like catalogue reviews.

A user review is a ``Review`` (split "catalogue", source "user", no source key or
rating) with both models' ``Prediction`` rows, its ``Sentence`` rows with both models'
``SentenceWeight`` rows, and one sentence-level ``Explanation`` row per model, written
in one transaction that is committed before the API answers. Writes are serialized
with one lock per server (SQLite allows one writer at a time; the busy timeout set
in ``app.db.make_engine`` covers writers in other processes).

A model still pending when the review was posted (the build has not made it ready) gets its
rows later: the build's predict and explain steps of that model cover the user reviews stored
before they listed their reviews, and the server fills in the rest once it has loaded the model and
the build has explained it (``lacking_model`` and ``fill_in_model``, run by ``app.web.ready_analyzer``).
"""

import threading
from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.engine import Engine

from app.db import Explanation, Prediction, Review, Sentence, session_scope
from app.results import add_analysis, explained_rows, prediction_row
from app.web.analysis_types import Analysis
from model.names import CATALOGUE, SENTENCE, USER
from model.sentences import Span


def catalogue_title_exists(engine: Engine, title_id: str) -> bool:
    """Whether ``title_id`` is a title of the catalogue (it has catalogue reviews)."""
    with session_scope(engine) as session:
        found = session.scalar(
            select(Review.id).where(Review.title_id == title_id, Review.split == CATALOGUE).limit(1)
        )
    return found is not None


def store_user_review(
    engine: Engine, lock: threading.Lock, text: str, title_id: str, label: str | None, analysis: Analysis
) -> int:
    """Write the review and its analysis (an explained ``Analysis``); returns its id.
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
    spans = [Span(sentence.start, sentence.end, sentence.text) for sentence in analysis.sentences]
    p_positive = {model: prediction.p_positive for model, prediction in analysis.analysed_predictions().items()}
    add_analysis(review, spans, p_positive, explanations_of(analysis))
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


def explanations_of(analysis: Analysis) -> dict[str, dict]:
    """Each analysing model's explanation in an explained analysis, in the shape ``app.results`` stores
    (``ReviewExplanation.as_dict()``'s keys, and the API's beside them)."""
    return {
        model: {**explanation.model_dump(), "weights": [getattr(s.weights, model) for s in analysis.sentences]}
        for model, explanation in analysis.analysed_explanations().items()
    }


def fill_in_model(engine: Engine, lock: threading.Lock, review_id: int, model: str, p_positive: float, explanation: dict) -> None:
    """Write ``model``'s rows of a stored review that lacks them: its prediction (``p_positive``), and its
    sentence weights with its explanation (``explanation``, ``ReviewExplanation.as_dict()`` over the review's
    stored sentences, in order), each only if it is still missing (the build may have written one of them)."""
    with lock, session_scope(engine) as session:
        if session.get(Prediction, {"model": model, "review_id": review_id}) is None:
            session.add(prediction_row(model, p_positive, review_id))
        if session.get(Explanation, {"model": model, "review_id": review_id, "level": SENTENCE}) is None:
            sentence_ids = session.scalars(
                select(Sentence.id).where(Sentence.review_id == review_id).order_by(Sentence.position)
            ).all()
            for row in explained_rows(model, review_id, sentence_ids, explanation):
                session.merge(row)
