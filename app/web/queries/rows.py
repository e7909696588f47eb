"""The catalogue's rows as plain dicts: reviews with every model's prediction (and the trust
figures of its explanation), their sentences with every model's weight, NB-SVM's word weights,
BERT's word shares, a title's metadata, an explanation's record. Each statement is made once per
shape and only binds values per request."""

from collections import defaultdict
from functools import cache
from typing import Literal

from sqlalchemy import Select, and_, bindparam, case, func, select
from sqlalchemy.orm import Session, aliased

from app.db import Explanation, Movie, Prediction, Review, Sentence, SentenceWeight, WordWeight
from model.names import CATALOGUE, CORPORA, MODELS, SENTENCE, USER, WORD_LEVEL_MODEL
from model.quality import LOG_ODDS, QUALITY_FIELDS, assessment

GOLD = case((Review.source.in_(CORPORA), Review.label))  # a user's label is no gold label
USER_LABEL = case((Review.source == USER, Review.label))
# The explanation columns a page needs beside the highlights (``explanation_trust``).
TRUST_COLUMNS = ("score", "target", "stability", "comprehensiveness", "random_comprehensiveness")
# Per model, the aliases ``review_rows`` joins its predictions and explanations as: made once, since
# making them costs more than the query they are in.
PREDICTION_OF = {model: aliased(Prediction, name=f"p_{model}") for model in MODELS}
EXPLANATION_OF = {model: aliased(Explanation, name=f"e_{model}") for model in MODELS}


# Which catalogue reviews a page reads, by name, with bound parameters (``title_id``,
# ``review_id``, ``ids``): each statement that takes one is made once per name (so the caches
# below hold at most one per name), and a request only binds values, where making the
# statement would cost about as much as running it.
PICKS = {
    "title": Review.title_id == bindparam("title_id"),
    "review": Review.id == bindparam("review_id"),
    "reviews": Review.id.in_(bindparam("ids", expanding=True)),
}
Pick = Literal["title", "review", "reviews"]


def review_rows(
    session: Session,
    pick: Pick | None = None,
    params: dict | None = None,
    *,
    text: bool = False,
    trust: bool = False,
    disagreeing: bool = False,
) -> list[dict]:
    """Catalogue reviews (all, or those ``pick`` names, with ``params``) with both models'
    predictions, one query.

    ``trust`` adds, per model, what the pages show beside its sentence highlights
    (``explanation_trust``); ``disagreeing`` keeps only the reviews that the two models
    label differently.
    """
    stmt, names = _review_rows_statement(pick, text, trust, disagreeing)
    rows = []
    for record in session.execute(stmt, params):
        row = dict(zip(names, record))
        row["predictions"], row["trust"] = {}, {}
        for model in MODELS:
            label, p_positive = row.pop(f"{model}_label"), row.pop(f"{model}_p_positive")
            if label is not None:
                row["predictions"][model] = {"label": label, "p_positive": p_positive}
            if trust:
                figures = {name: row.pop(f"{model}_{name}") for name in TRUST_COLUMNS}
                if figures["score"] is not None:
                    row["trust"][model] = explanation_trust(figures)
        rows.append(row)
    return rows


@cache
def _review_rows_statement(
    pick: Pick | None, text: bool, trust: bool, disagreeing: bool
) -> tuple[Select, list[str]]:
    """``review_rows``' query of one shape, and the names of its columns."""
    columns = [
        Review.id,
        Review.title_id,
        GOLD.label("gold"),
        USER_LABEL.label("user_label"),
        Review.rating,
        Review.source,
    ]
    if text:
        columns.append(Review.text)
    stmt = select(*columns)
    for model, alias in PREDICTION_OF.items():
        stmt = stmt.add_columns(
            alias.label.label(f"{model}_label"), alias.p_positive.label(f"{model}_p_positive")
        ).outerjoin(alias, and_(alias.review_id == Review.id, alias.model == model))
        if trust:
            explanation = EXPLANATION_OF[model]
            stmt = stmt.add_columns(
                *(getattr(explanation, name).label(f"{model}_{name}") for name in TRUST_COLUMNS)
            ).outerjoin(
                explanation,
                and_(explanation.review_id == Review.id, explanation.model == model, explanation.level == SENTENCE),
            )
    stmt = stmt.where(Review.split == CATALOGUE).order_by(Review.id)
    if pick is not None:
        stmt = stmt.where(PICKS[pick])
    if disagreeing:
        first, second = PREDICTION_OF.values()
        stmt = stmt.where(first.label != second.label)
    return stmt, [column.key for column in stmt.selected_columns]


def explanation_trust(figures: dict) -> dict:
    """What a page shows beside a model's sentence highlights: the space of the weights
    (``target``, for the colour scale), whether the explanation is weak and why."""
    return {"target": figures["target"] or LOG_ODDS, **assessment(figures["score"], figures)}


# Per model, the alias ``sentences_by_review`` joins its sentence weights as.
WEIGHT_OF = {model: aliased(SentenceWeight, name=f"w_{model}") for model in MODELS}


@cache
def _sentences_statement(pick: Pick) -> Select:
    """The sentences of the catalogue reviews ``pick`` names, each model's weight in a
    column of its own: one row per sentence."""
    stmt = select(
        Sentence.review_id,
        Sentence.position,
        Sentence.start,
        Sentence.end,
        Sentence.text,
        *(weight.weight for weight in WEIGHT_OF.values()),
    ).join(Review, Review.id == Sentence.review_id)
    for model, weight in WEIGHT_OF.items():
        stmt = stmt.outerjoin(weight, and_(weight.sentence_id == Sentence.id, weight.model == model))
    return stmt.where(Review.split == CATALOGUE, PICKS[pick]).order_by(Sentence.review_id, Sentence.position)


def sentences_by_review(session: Session, pick: Pick, params: dict) -> dict[int, list[dict]]:
    """Sentences (with every model's LIME weight) of the catalogue reviews ``pick`` names, with ``params``."""
    by_review: dict[int, list[dict]] = defaultdict(list)
    for review_id, position, start, end, text, *weights in session.execute(_sentences_statement(pick), params):
        by_review[review_id].append(
            {
                "position": position,
                "start": start,
                "end": end,
                "text": text,
                "weights": {model: weight for model, weight in zip(MODELS, weights) if weight is not None},
            }
        )
    return by_review


@cache
def _words_statement(pick: Pick) -> Select:
    return (
        select(WordWeight.review_id, WordWeight.word, WordWeight.weight)
        .join(Review, Review.id == WordWeight.review_id)
        .where(WordWeight.model == WORD_LEVEL_MODEL, Review.split == CATALOGUE, PICKS[pick])
        .order_by(WordWeight.review_id, func.abs(WordWeight.weight).desc(), WordWeight.word)
    )


def words_by_review(session: Session, pick: Pick, params: dict) -> dict[int, list[dict]]:
    """NB-SVM's word weights of the catalogue reviews ``pick`` names, with ``params``, strongest first."""
    by_review: dict[int, list[dict]] = defaultdict(list)
    for review_id, word, weight in session.execute(_words_statement(pick), params):
        by_review[review_id].append({"word": word, "weight": weight})
    return by_review


# A title's metadata, by ``title_id``: a Core statement made once, since loading an ORM object
# costs twice as much (0.2 against 0.1 ms a page).
MOVIE_COLUMNS = tuple(Movie.__table__.columns)
MOVIE_OF_TITLE = select(*MOVIE_COLUMNS).where(Movie.title_id == bindparam("title_id"))


def movie_of(session: Session, title_id: str, imdb: bool) -> dict:
    """An item's metadata as the pages show it (``movie_dict``)."""
    movie = session.execute(MOVIE_OF_TITLE, {"title_id": title_id}).first()
    return movie_dict(movie, title_id, imdb)


def display_title(title: str | None, title_id: str, imdb: bool) -> str:
    """What pages and the API call an item: its name; without one, an IMDB title says it has none (its
    metadata is missing), an item of a user's file is its id (the file gives it no name)."""
    return title or (f"Untitled ({title_id})" if imdb else title_id)


def movie_dict(movie, title_id: str, imdb: bool) -> dict:
    """An item's metadata as the pages show it (a row of ``MOVIE_COLUMNS``), or only its id where the
    catalogue has none; ``imdb``: whether the catalogue is IMDB's (``display_title``)."""
    if movie is None:
        return {"title_id": title_id, "title": display_title(None, title_id, imdb), "has_metadata": False, "genres": []}
    return {
        "title_id": movie.title_id,
        "title": display_title(movie.title, movie.title_id, imdb),
        "has_metadata": movie.title is not None,
        "year": movie.year,
        "runtime_min": movie.runtime_min,
        "rated": movie.rated,
        "genres": [genre for genre in (movie.genres or "").split("|") if genre],
        "director": movie.director,
        "actors": movie.actors,
        "plot": movie.plot,
        "imdb_rating": movie.imdb_rating,
    }


def explanation_record(e: Explanation) -> dict:
    """An explanation row as the review page and the API show it: LIME's fit, then its quality."""
    record = {"model": e.model, "level": e.level, "samples": e.samples, "intercept": e.intercept, "score": e.score}
    if e.level == SENTENCE:
        record["quality"] = {name: getattr(e, name) for name in QUALITY_FIELDS}
        record.update(assessment(e.score, record["quality"]))
    return record
