"""The queries behind the pages.

Every function returns plain dicts and lists (JSON-ready), which both the HTML templates
and the JSON twin of each page use, so the two always show the same thing. Pages show
only the catalogue (``Review.split == "catalogue"``, user-posted reviews included); what
the view hides (sentiment with Analyze off, gold labels with accuracy off) is left out.
A page costs a handful of queries, whatever the number of reviews.
"""

import math
from collections import defaultdict
from collections.abc import Iterable
from functools import cache
from statistics import fmean
from typing import Literal

from sqlalchemy import Select, and_, bindparam, case, func, select
from sqlalchemy.orm import Session, aliased

from app.web.catalogue_cache import kept
from app.db import (
    Explanation,
    Movie,
    Prediction,
    Review,
    Run,
    Sentence,
    SentenceWeight,
    WordWeight,
    latest_run,
    process_gone,
)
from app.web.view import View
from model.config import DISTILL
from model.curve import LEARNING_CURVE
from model.names import (
    CATALOGUE,
    DISPLAY_NAMES,
    EVAL,
    IMDB,
    LENGTHS,
    MAIN_MODEL,
    MODELS,
    NEGATIVE,
    POSITIVE,
    SENTENCE,
    SST2,
    STUDENT,
    TEACHER,
    USER,
    WORD_LEVEL_MODEL,
    short_label,
)
from model.quality import LOG_ODDS, NO_FIT, QUALITY_FIELDS, UNSTABLE, assessment, is_empty, is_weak


# --- rows ------------------------------------------------------------------------------

GOLD = case((Review.source == IMDB, Review.label))  # a user's label is no gold label
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


# --- summaries -------------------------------------------------------------------------


def _strength(prediction: dict) -> str:
    """Colour class of one review in a bar: side of its label, 1-3 by confidence."""
    confidence = confidence_of(prediction)
    return f"{short_label(prediction['label'])}{min(3, 1 + int(max(0.0, confidence - 0.5) * 6))}"


def confidence_of(prediction: dict) -> float:
    p = prediction["p_positive"]
    return p if prediction["label"] == POSITIVE else 1.0 - p


def model_summary(rows: list[dict], model: str, accuracy: bool) -> dict:
    """Sentiment (and, with ``accuracy``, correctness) of one model over some reviews.

    ``bar`` runs over the scored reviews ordered by positive probability, highest first,
    as runs of equal colour; ``ticks`` are the positions in that order of the wrong ones.
    """
    scored = sorted(
        (row for row in rows if model in row["predictions"]),
        key=lambda row: (-row["predictions"][model]["p_positive"], row["id"]),
    )
    bar: list[dict] = []
    for row in scored:
        level = _strength(row["predictions"][model])
        if bar and bar[-1]["level"] == level:
            bar[-1]["count"] += 1
        else:
            bar.append({"level": level, "count": 1})
    user_labeled = [row for row in scored if row["user_label"] is not None]
    counts = {
        "reviews": len(rows),
        "positive": sum(row["predictions"][model]["label"] == POSITIVE for row in scored),
        "labeled": sum(row["gold"] is not None for row in scored),
        "user_labeled": len(user_labeled),
        "user_agree": sum(row["predictions"][model]["label"] == row["user_label"] for row in user_labeled),
    }
    ticks = [
        {"index": index, "review_id": row["id"], "gold": row["gold"]}
        for index, row in enumerate(scored)
        if row["gold"] is not None and row["predictions"][model]["label"] != row["gold"]
    ]
    return summary_of(model, counts, bar, ticks if accuracy else None)


# What a model's summary holds only with accuracy on (``summary_of``).
ACCURACY_FIELDS = ("user_labeled", "user_agree", "labeled", "wrong", "correct", "accuracy", "ticks")


def summary_of(model: str, counts: dict, bar: list[dict], ticks: list[dict] | None) -> dict:
    """One model's summary (``model_summary``) from its ``counts`` (reviews, positive, labeled,
    user_labeled, user_agree), its ``bar`` and, with accuracy on, the ``ticks`` of the wrong reviews."""
    scored = sum(run["count"] for run in bar)
    summary = {
        "model": model,
        "name": DISPLAY_NAMES[model],
        "reviews": counts["reviews"],
        "scored": scored,
        "positive": counts["positive"],
        "negative": scored - counts["positive"],
        "positive_share": counts["positive"] / scored if scored else None,
        "bar": bar,
    }
    if ticks is not None:
        labeled = counts["labeled"]
        summary.update(
            user_labeled=counts["user_labeled"],
            user_agree=counts["user_agree"],
            labeled=labeled,
            wrong=len(ticks),
            correct=labeled - len(ticks),
            accuracy=(labeled - len(ticks)) / labeled if labeled else None,
            ticks=ticks,
        )
    return summary


def summaries(rows: list[dict], view: View) -> dict[str, dict]:
    return {model: model_summary(rows, model, view.show_accuracy) for model in view.models}


# A title's metadata, by ``title_id``: a Core statement made once, since loading an ORM object
# costs twice as much (0.2 against 0.1 ms a page).
MOVIE_COLUMNS = tuple(Movie.__table__.columns)
MOVIE_OF_TITLE = select(*MOVIE_COLUMNS).where(Movie.title_id == bindparam("title_id"))


def movie_of(session: Session, title_id: str) -> dict:
    return movie_dict(session.execute(MOVIE_OF_TITLE, {"title_id": title_id}).first(), title_id)


def display_title(title: str | None, title_id: str) -> str:
    """What pages and the API call a title: its name, or a label that says it has none."""
    return title or f"Untitled ({title_id})"


def movie_dict(movie, title_id: str) -> dict:
    """A title's metadata as the pages show it (a row of ``MOVIE_COLUMNS``), or only its id where
    the catalogue has none."""
    if movie is None:
        return {"title_id": title_id, "title": display_title(None, title_id), "has_metadata": False, "genres": []}
    return {
        "title_id": movie.title_id,
        "title": display_title(movie.title, movie.title_id),
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


# --- dashboard -------------------------------------------------------------------------

# A review's colour in a bar, as ``_strength`` has it: the side of its label, 1-3 by confidence.
_CONFIDENCE = case((Prediction.label == POSITIVE, Prediction.p_positive), else_=1.0 - Prediction.p_positive)
_LEVEL = case(((_CONFIDENCE - 0.5) * 6 >= 2, 3), ((_CONFIDENCE - 0.5) * 6 >= 1, 2), else_=1)
# The colour runs of a bar whose labels agree with their probabilities, highest positive probability first.
BAR_ORDER = [(POSITIVE, 3), (POSITIVE, 2), (POSITIVE, 1), (NEGATIVE, 1), (NEGATIVE, 2), (NEGATIVE, 3)]


def _missing_last(value: float | None, descending: bool) -> tuple:
    if value is None:
        return (1, 0.0)
    return (0, -value if descending else value)


def _main(card: dict, name: str):
    return card["models"][MAIN_MODEL][name]


# The dashboard's sort orders of the cards (``all_cards``); ties keep the order of the first reviews.
TITLE_SORTS = {
    "reviews": lambda card: (-card["reviews"], card["title"].casefold()),
    "title": lambda card: (card["title"].casefold(), card["title_id"]),
    "positive": lambda card: (_missing_last(_main(card, "positive_share"), True), -card["reviews"]),
    "negative": lambda card: (_missing_last(_main(card, "positive_share"), False), -card["reviews"]),
    "accurate": lambda card: (_missing_last(_main(card, "accuracy"), True), -card["reviews"]),
    "inaccurate": lambda card: (_missing_last(_main(card, "accuracy"), False), -_main(card, "wrong"), -card["reviews"]),
}


def title_page(session: Session, view: View, per_page: int) -> tuple[list[dict], int]:
    """The cards (``all_cards``) on page ``view.page`` of the dashboard (the titles whose title
    or id contains ``view.q``, ignoring case, in ``view``'s order) and how many titles match.
    Each order is kept while the catalogue is unchanged (``catalogue_cache``)."""
    sort = view.effective_sort
    ordered = kept(
        session,
        ("title order", sort),
        lambda: [(f"{c['title']}\n{c['title_id']}".casefold(), c) for c in sorted(all_cards(session).values(), key=TITLE_SORTS[sort])],
    )
    needle = view.q.casefold()
    matching = [card for searched, card in ordered if needle in searched]
    start = (view.page - 1) * per_page
    return matching[start : start + per_page], len(matching)


def all_cards(session: Session) -> dict[str, dict]:
    """Every catalogue title's card, by title id in the order of their first reviews: metadata,
    reviews and every model's summary with accuracy, summed up by the database; kept while the
    catalogue is unchanged (``catalogue_cache``)."""
    return kept(session, ("cards",), lambda: _all_cards(session))


def _all_cards(session: Session) -> dict[str, dict]:
    titles = select(Review.title_id).where(Review.split == CATALOGUE)
    reviews = dict(
        session.execute(
            select(Review.title_id, func.count())
            .where(Review.split == CATALOGUE)
            .group_by(Review.title_id)
            .order_by(func.min(Review.id))
        ).all()
    )
    movies = {row.title_id: row for row in session.execute(select(*MOVIE_COLUMNS).where(Movie.title_id.in_(titles)))}
    figures = model_summaries(session, reviews, Review.title_id)
    return {
        title_id: {**movie_dict(movies.get(title_id), title_id), "reviews": count, "models": figures[title_id]}
        for title_id, count in reviews.items()
    }


def in_view_card(card: dict, view: View) -> dict:
    """A card of ``all_cards`` as ``view`` shows it."""
    return {**card, "models": in_view(card["models"], view)}


def catalogue_summary(session: Session, view: View) -> dict:
    """Titles and reviews of the whole catalogue and its models' summaries (``model_summaries``)
    as ``view`` shows them, kept while the catalogue is unchanged (``catalogue_cache``)."""
    summary = kept(session, ("summary",), lambda: _catalogue_summary(session))
    return {**summary, "models": in_view(summary["models"], view)}


def _catalogue_summary(session: Session) -> dict:
    titles, reviews = session.execute(
        select(func.count(func.distinct(Review.title_id)), func.count()).where(Review.split == CATALOGUE)
    ).one()
    return {"titles": titles, "reviews": reviews, "models": model_summaries(session, {None: reviews})[None]}


def in_view(summaries: dict[str, dict], view: View) -> dict[str, dict]:
    """Of every model's summary with accuracy, those of the models ``view`` shows, without the
    accuracy fields unless it shows accuracy (as ``model_summary`` makes them)."""
    if view.show_accuracy:
        return {model: summaries[model] for model in view.models}
    return {model: {k: v for k, v in summaries[model].items() if k not in ACCURACY_FIELDS} for model in view.models}


def model_summaries(session: Session, reviews: dict, group=None) -> dict:
    """Per key of ``reviews`` (the number of catalogue reviews of each group: every title id,
    with ``group`` ``Review.title_id``; None, without, for the whole catalogue), the summary with
    accuracy that ``model_summary`` makes of each model over the group's reviews, summed up by
    the database: a query of counts by colour and one of the wrong reviews."""
    keys = _group_keys(group)
    counts = session.execute(
        select(
            *keys,
            Prediction.model,
            Prediction.label,
            _LEVEL.label("level"),
            func.count().label("count"),
            func.sum(case((GOLD.is_not(None), 1), else_=0)).label("labeled"),
            func.sum(case((USER_LABEL.is_not(None), 1), else_=0)).label("user_labeled"),
            func.sum(case((USER_LABEL == Prediction.label, 1), else_=0)).label("user_agree"),
        )
        .join(Review, Review.id == Prediction.review_id)
        .where(Review.split == CATALOGUE)
        .group_by(*keys, Prediction.model, Prediction.label, _LEVEL)
    ).all()
    ticks = wrong_ticks(session, group)
    by_key: dict = defaultdict(list)
    for row in counts:
        by_key[getattr(row, "key", None), row.model].append(row)
    return {
        name: {model: _summary_of_counts(model, total, by_key[name, model], ticks[name, model]) for model in MODELS}
        for name, total in reviews.items()
    }


def _group_keys(group) -> list:
    """The column that tells the groups apart, labelled ``key``: none for the whole catalogue."""
    return [] if group is None else [group.label("key")]

def _summary_of_counts(model: str, reviews: int, rows: list, ticks: list[dict]) -> dict:
    """``summary_of`` one model from the database's counts ``rows`` by label and colour."""
    counts = {"reviews": reviews, "positive": sum(row.count for row in rows if row.label == POSITIVE)}
    for name in ("labeled", "user_labeled", "user_agree"):
        counts[name] = sum(getattr(row, name) or 0 for row in rows)
    runs = {(row.label, row.level): row.count for row in rows}
    bar = [
        {"level": f"{short_label(label)}{level}", "count": runs[label, level]}
        for label, level in BAR_ORDER
        if runs.get((label, level))
    ]
    return summary_of(model, counts, bar, ticks)


def wrong_ticks(session: Session, group=None) -> dict:
    """Per (group, model), as ``model_summaries`` groups them, the wrong catalogue
    reviews at their positions in the order of the model's bar (positive probability, highest
    first): one query with a window function."""
    keys = _group_keys(group)
    ranked = (
        select(
            *keys,
            Prediction.model,
            Review.id.label("review_id"),
            GOLD.label("gold"),
            Prediction.label,
            func.row_number()
            .over(partition_by=(*keys, Prediction.model), order_by=(Prediction.p_positive.desc(), Review.id))
            .label("position"),
        )
        .join(Review, Review.id == Prediction.review_id)
        .where(Review.split == CATALOGUE)
        .subquery()
    )
    stmt = (
        select(ranked)
        .where(ranked.c.gold.is_not(None), ranked.c.label != ranked.c.gold)
        .order_by(ranked.c.model, ranked.c.position)
    )
    ticks: dict = defaultdict(list)
    for row in session.execute(stmt):
        tick = {"index": row.position - 1, "review_id": row.review_id, "gold": row.gold}
        ticks[getattr(row, "key", None), row.model].append(tick)
    return ticks


def dashboard(session: Session, view: View, per_page: int) -> dict:
    """Page ``view.page`` of the catalogue's titles (those matching ``view.q``) as cards, with
    a summary of all the catalogue's reviews and the pagination: a handful of queries, whatever
    the size of the catalogue."""
    cards, matching = title_page(session, view, per_page)
    return {
        "summary": catalogue_summary(session, view),
        "titles": [in_view_card(card, view) for card in cards],
        "pagination": {
            "page": view.page,
            "per_page": per_page,
            "total": matching,
            "pages": max(1, math.ceil(matching / per_page)),
        },
    }


# --- reviews ---------------------------------------------------------------------------


def key_sentence(sentences: list[dict], model: str, label: str) -> dict | None:
    """The sentence that pushes hardest toward ``label`` for ``model``, if any pushes that way."""
    sign = 1.0 if label == POSITIVE else -1.0
    best = max(
        (s for s in sentences if sign * s["weights"].get(model, 0.0) > 0),
        key=lambda s: sign * s["weights"][model],
        default=None,
    )
    if best is None:
        return None
    return {"position": best["position"], "text": best["text"], "weight": best["weights"][model]}


def review_item(row: dict, sentences: list[dict], view: View, models: Iterable[str]) -> dict:
    """One review as a page shows it in ``view``, with the predictions of ``models``."""
    item = {"id": row["id"], "title_id": row["title_id"], "source": row["source"], "text": row["text"]}
    if view.show_accuracy:
        item["gold"] = row["gold"]
        item["rating"] = row["rating"]
        item["user_label"] = row["user_label"]
    if not view.analyze:
        return item
    models = [model for model in models if model in row["predictions"]]
    predictions = {}
    for model in models:
        prediction = dict(row["predictions"][model])
        prediction["confidence"] = confidence_of(prediction)
        if view.show_accuracy:
            prediction["correct"] = None if row["gold"] is None else prediction["label"] == row["gold"]
        predictions[model] = prediction
    item["predictions"] = predictions
    item["trust"] = {model: row["trust"][model] for model in models if model in row["trust"]}
    item["wrong"] = any(prediction.get("correct") is False for prediction in predictions.values())
    item["weak"] = any(trust["weak"] for trust in item["trust"].values())
    labels = {prediction["label"] for prediction in predictions.values()}
    item["disagree"] = len(predictions) > 1 and len(labels) > 1
    if len(models) < len(MODELS):  # only the weights of the models shown
        sentences = [
            {**sentence, "weights": {m: sentence["weights"][m] for m in models if m in sentence["weights"]}}
            for sentence in sentences
        ]
    item["sentences"] = sentences
    return item


def movie_page(session: Session, title_id: str, view: View) -> dict | None:
    """A title with all its catalogue reviews, or None if the catalogue has no such title."""
    rows = review_rows(session, "title", {"title_id": title_id}, text=True, trust=view.analyze)
    if not rows:
        return None
    movie = movie_of(session, title_id)
    sentences = sentences_by_review(session, "title", {"title_id": title_id}) if view.analyze else {}
    items = [review_item(row, sentences.get(row["id"], []), view, view.models) for row in rows]
    page = {
        "movie": movie,
        "summary": {"reviews": len(rows), "models": summaries(rows, view)},
    }
    if view.analyze:
        highlights: dict[str, list[dict]] = {POSITIVE: [], NEGATIVE: []}
        for item in items:
            prediction = item["predictions"].get(MAIN_MODEL)
            if prediction is None:
                continue
            sentence = key_sentence(item["sentences"], MAIN_MODEL, prediction["label"])
            if sentence is not None:
                trust = item["trust"].get(MAIN_MODEL, {})
                sentence.update(review_id=item["id"], target=trust.get("target"), weak=trust.get("weak", False))
                highlights[prediction["label"]].append(sentence)
        for label, entries in highlights.items():
            entries.sort(key=lambda entry: -abs(entry["weight"]))
        page["highlights"] = highlights
        page["weak_reviews"] = sum(item["weak"] for item in items)
    if view.show_accuracy:
        page["wrong_reviews"] = sum(item["wrong"] for item in items)
    if view.only_wrong:
        items = [item for item in items if item["wrong"]]
    if view.only_weak:
        items = [item for item in items if item["weak"]]
    page["reviews"] = items
    return page


def review_page(session: Session, review_id: int, view: View) -> dict | None:
    """One catalogue review in full: both models, sentence weights, NB-SVM word weights."""
    rows = review_rows(session, "review", {"review_id": review_id}, text=True, trust=view.analyze)
    if not rows:
        return None
    row = rows[0]
    sentences = sentences_by_review(session, "review", {"review_id": review_id}).get(review_id, []) if view.analyze else []
    item = review_item(row, sentences, view, MODELS)
    page = {"movie": movie_of(session, row["title_id"]), "review": item}
    if view.analyze:
        page["words"] = words_by_review(session, "review", {"review_id": review_id}).get(review_id, [])
        page["explanations"] = [
            explanation_record(e)
            for e in session.scalars(
                select(Explanation)
                .where(Explanation.review_id == review_id)
                .order_by(Explanation.level, Explanation.model)
            )
        ]
    return page


def explanation_record(e: Explanation) -> dict:
    """An explanation row as the review page and the API show it: LIME's fit, then its quality."""
    record = {"model": e.model, "level": e.level, "samples": e.samples, "intercept": e.intercept, "score": e.score}
    if e.level == SENTENCE:
        record["quality"] = {name: getattr(e, name) for name in QUALITY_FIELDS}
        record.update(assessment(e.score, record["quality"]))
    return record


def _disagreement_list(session: Session) -> dict:
    """Every catalogue review the two models label differently, by title then id, with the
    model that was right (None: neither, or no gold label), and the count of each."""
    rows = review_rows(session, disagreeing=True)
    titles = dict(
        session.execute(
            select(Movie.title_id, Movie.title).where(Movie.title_id.in_({row["title_id"] for row in rows}))
        ).all()
    )
    right = {**dict.fromkeys(MODELS, 0), "unknown": 0}
    entries = []
    for row in rows:
        winner = next((m for m, p in row["predictions"].items() if row["gold"] is not None and p["label"] == row["gold"]), None)
        right[winner or "unknown"] += 1
        title = display_title(titles.get(row["title_id"]), row["title_id"])
        entries.append({"id": row["id"], "title": title, "right": winner})
    entries.sort(key=lambda entry: (entry["title"].casefold(), entry["id"]))
    return {"entries": entries, "right": right}


def disagreements(session: Session, page: int, per_page: int) -> dict:
    """Page ``page`` of the catalogue reviews the two models label differently, side by side,
    with which one was right, and the count of all of them. The list is kept while the
    catalogue is unchanged (``catalogue_cache``); the page's reviews are read in three queries."""
    listing = kept(session, ("disagreements",), lambda: _disagreement_list(session))
    entries = listing["entries"][(page - 1) * per_page : page * per_page]
    ids = [entry["id"] for entry in entries]
    view = View(analyze=True, accuracy=True, compare=True)
    rows = {row["id"]: row for row in review_rows(session, "reviews", {"ids": ids}, text=True, trust=True)} if ids else {}
    sentences = sentences_by_review(session, "reviews", {"ids": ids}) if ids else {}
    items = []
    for entry in entries:
        item = review_item(rows[entry["id"]], sentences.get(entry["id"], []), view, MODELS)
        item.update(title=entry["title"], right=entry["right"])
        item["key_sentences"] = {
            model: key_sentence(item["sentences"], model, prediction["label"])
            for model, prediction in item["predictions"].items()
        }
        del item["sentences"]  # the page shows each model's key sentence, not every sentence
        items.append(item)
    count = len(listing["entries"])
    return {
        "count": count,
        "right": listing["right"],
        "reviews": items,
        "pagination": {"page": page, "per_page": per_page, "total": count, "pages": max(1, math.ceil(count / per_page))},
    }


# --- about -----------------------------------------------------------------------------

HISTOGRAM_BINS = 10  # equal bins over [0, 1]; a value outside counts in the nearest end bin
DISTRIBUTED = ("score", "stability", "normalised_comprehensiveness", "normalised_sufficiency")
FAITHFULNESS = (
    "comprehensiveness", "random_comprehensiveness", "comprehensiveness_top", "random_comprehensiveness_top",
    "sufficiency", "random_sufficiency", "sufficiency_top", "random_sufficiency_top",
)  # fmt: skip
LEAST_FAITHFUL = 5


def _histogram(values: list[float]) -> list[int]:
    counts = [0] * HISTOGRAM_BINS
    for value in values:
        counts[min(HISTOGRAM_BINS - 1, max(0, int(value * HISTOGRAM_BINS)))] += 1
    return counts


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _model_quality(model: str, rows: list[dict]) -> dict:
    """One model's sentence explanations summed up (see ``explanation_quality``)."""
    present = {name: [row[name] for row in rows if row[name] is not None] for name in DISTRIBUTED + FAITHFULNESS}
    compared = [row for row in rows if row["normalised_comprehensiveness"] is not None]
    compared.sort(key=lambda row: (row["normalised_comprehensiveness"], row["comprehensiveness"], row["review_id"]))
    return {
        "model": model,
        "name": DISPLAY_NAMES[model],
        "explanations": len(rows),
        "single_sentence": len(rows) - len(compared),
        "weak": sum(is_weak(row["score"], row) for row in rows),
        "empty": sum(
            row["strongest"] is None or is_empty([row["strongest"]], row["target"] or LOG_ODDS) for row in rows
        ),
        "figures": {
            name: {"mean": _mean(present[name]), "histogram": _histogram(present[name])} for name in DISTRIBUTED
        },
        "faithfulness": {name: _mean(present[name]) for name in FAITHFULNESS},
        "least_faithful": [
            {name: row[name] for name in ("review_id", "normalised_comprehensiveness", "comprehensiveness", "score")}
            for row in compared[:LEAST_FAITHFUL]
        ],
    }


def explanation_quality(session: Session) -> dict:
    """``_explanation_quality``, kept while the catalogue is unchanged (``catalogue_cache``)."""
    return kept(session, ("explanation quality",), lambda: _explanation_quality(session))


def _explanation_quality(session: Session) -> dict:
    """Per model, the trust figures of its sentence explanations of the catalogue (user reviews
    included): means and histograms, raw faithfulness beside random sentences, the counts of
    weak and of empty explanations, and the reviews whose top sentence is the least faithful
    (lowest normalised comprehensiveness). One query; the sums are made here."""
    strongest = (
        select(
            Sentence.review_id,
            SentenceWeight.model,
            func.max(func.abs(SentenceWeight.weight)).label("strongest"),
        )
        .join(SentenceWeight, SentenceWeight.sentence_id == Sentence.id)
        .group_by(Sentence.review_id, SentenceWeight.model)
        .subquery()
    )
    stmt = (
        select(
            Explanation.model,
            Explanation.review_id,
            Explanation.score,
            *(getattr(Explanation, name) for name in QUALITY_FIELDS),
            strongest.c.strongest,
        )
        .join(Review, Review.id == Explanation.review_id)
        .outerjoin(
            strongest,
            and_(strongest.c.review_id == Explanation.review_id, strongest.c.model == Explanation.model),
        )
        .where(Review.split == CATALOGUE, Explanation.level == SENTENCE)
        .order_by(Explanation.review_id)
    )
    by_model: dict[str, list[dict]] = defaultdict(list)
    for row in session.execute(stmt).mappings():
        by_model[row["model"]].append(dict(row))
    return {
        "bins": [index / HISTOGRAM_BINS for index in range(HISTOGRAM_BINS + 1)],
        "weak_when": {"score_below": NO_FIT, "stability_below": UNSTABLE},
        "models": [_model_quality(model, by_model[model]) for model in MODELS if by_model[model]],
    }



def about(session: Session) -> dict:
    """The latest pipeline run: configuration, metrics of both models, timings; how far the
    explanations can be trusted."""
    counts = kept(
        session, ("reviews by split",), lambda: dict(session.execute(select(Review.split, func.count()).group_by(Review.split)).all())
    )
    page: dict = {"database_counts": counts, "run": None}
    run = latest_run(session)
    if run is None:
        return page
    record = run.record()
    metrics = record["metrics"]
    page["run"] = record
    page["models"] = [
        {
            "model": model,
            "name": DISPLAY_NAMES[model],
            "sets": {name: metrics[model][name] for name in (EVAL, CATALOGUE, SST2) if name in metrics.get(model, {})},
        }
        for model in MODELS
    ]
    page["timings"] = [{"step": step, "seconds": seconds} for step, seconds in record["timings"].items()]
    page["total_seconds"] = sum(seconds or 0.0 for seconds in record["timings"].values())
    page["lengths"] = metrics.get(LENGTHS)
    page["learning_curve"] = learning_curve(record, run.steps or {})
    page["explanation_quality"] = explanation_quality(session)
    page["build_progress"] = build_progress(run)
    return page


def build_progress(run: Run) -> str | None:
    """What the build is doing while it has not finished (say, in the background of ``textflix up``),
    in a sentence; None once it has. A build killed mid-step left its progress behind: once its
    process is gone, the sentence says it stopped."""
    if run.status == "complete":
        return None
    progress = run.progress
    if not progress:
        return "The build has not finished: what it has not computed yet is missing from this page."
    if process_gone(builder := progress.get("builder", {})):
        return (
            f"The build stopped before it had finished (its process, pid {builder['pid']}, has ended): what it had "
            "not computed yet is missing from this page until `textflix build` or `textflix up` resumes it."
        )
    doing = progress["doing"]
    if progress.get("total"):
        doing += f": {progress['done']:,} of {progress['total']:,} {progress['unit']}"
    return f"{doing[0].upper()}{doing[1:]}. This page shows the result once the build has finished."


def learning_curve(record: dict, steps: dict) -> dict | None:
    """The run's learning curve (``model.curve``) and its ``markers``: a distill build's served
    BERT and its teacher, single points beside the curve of BERT on labels alone
    (``render.learning_curve_svg`` draws them all)."""
    curve = record["metrics"].get(LEARNING_CURVE)
    if not curve:
        return None
    return {**curve, "markers": distill_markers(record["metrics"], steps)}


def distill_markers(metrics: dict, steps: dict) -> list[dict]:
    """The served BERT of a distill build (labels plus teacher labels) and its teacher, each at
    the number of labelled reviews it was trained on; none for another recipe."""
    student = steps.get(STUDENT) or {}
    if student.get("recipe") != DISTILL:
        return []
    labelled = student["labelled"]
    unlabeled = student["teacher_labelled"]
    markers = [
        {
            "kind": DISTILL,
            "label": f"{DISPLAY_NAMES[STUDENT]}, distilled ({labelled:,} labels + {unlabeled:,} unlabeled)",
            "size": labelled,
            "accuracy": metrics[STUDENT][EVAL]["accuracy"],
        }
    ]
    if TEACHER in metrics:
        checkpoint = (steps.get(TEACHER) or {}).get("base_model")
        markers.append(
            {
                "kind": TEACHER,
                "label": f"teacher ({checkpoint.rsplit('/', 1)[-1]})" if checkpoint else "teacher",
                "size": labelled,
                "accuracy": metrics[TEACHER][EVAL]["accuracy"],
            }
        )
    return markers
