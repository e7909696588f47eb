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
from statistics import fmean

from sqlalchemy import Float, and_, case, cast, func, or_, select
from sqlalchemy.orm import Session, aliased

from app.db import Explanation, Movie, Prediction, Review, Sentence, SentenceWeight, WordWeight, latest_run
from app.view import View
from model.config import DISTILL
from model.curve import LEARNING_CURVE
from model.names import (
    CATALOGUE,
    DISPLAY_NAMES,
    EVAL,
    IMDB,
    MAIN_MODEL,
    MODELS,
    NEGATIVE,
    POSITIVE,
    SENTENCE,
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


def review_rows(
    session: Session, *conditions, text: bool = False, trust: bool = False, disagreeing: bool = False
) -> list[dict]:
    """Catalogue reviews matching ``conditions`` with both models' predictions, one query.

    ``trust`` adds, per model, what the pages show beside its sentence highlights
    (``explanation_trust``); ``disagreeing`` keeps only the reviews that the two models
    label differently.
    """
    aliases = {model: aliased(Prediction, name=f"p_{model}") for model in MODELS}
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
    for model, alias in aliases.items():
        stmt = stmt.add_columns(
            alias.label.label(f"{model}_label"), alias.p_positive.label(f"{model}_p_positive")
        ).outerjoin(alias, and_(alias.review_id == Review.id, alias.model == model))
        if trust:
            explanation = aliased(Explanation, name=f"e_{model}")
            stmt = stmt.add_columns(
                *(getattr(explanation, name).label(f"{model}_{name}") for name in TRUST_COLUMNS)
            ).outerjoin(
                explanation,
                and_(explanation.review_id == Review.id, explanation.model == model, explanation.level == SENTENCE),
            )
    stmt = stmt.where(Review.split == CATALOGUE, *conditions).order_by(Review.id)
    if disagreeing:
        first, second = aliases.values()
        stmt = stmt.where(first.label != second.label)
    names = [column.key for column in stmt.selected_columns]
    rows = []
    for record in session.execute(stmt):
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


def explanation_trust(figures: dict) -> dict:
    """What a page shows beside a model's sentence highlights: the space of the weights
    (``target``, for the colour scale), whether the explanation is weak and why."""
    return {"target": figures["target"] or LOG_ODDS, **assessment(figures["score"], figures)}


def sentences_by_review(session: Session, *conditions) -> dict[int, list[dict]]:
    """Sentences (with every model's LIME weight) of the reviews matching ``conditions``."""
    stmt = (
        select(
            Sentence.review_id,
            Sentence.id,
            Sentence.position,
            Sentence.start,
            Sentence.end,
            Sentence.text,
            SentenceWeight.model,
            SentenceWeight.weight,
        )
        .join(Review, Review.id == Sentence.review_id)
        .outerjoin(SentenceWeight, SentenceWeight.sentence_id == Sentence.id)
        .where(*conditions)
        .order_by(Sentence.review_id, Sentence.position)
    )
    by_review: dict[int, list[dict]] = defaultdict(list)
    by_id: dict[int, dict] = {}
    for review_id, sentence_id, position, start, end, text, model, weight in session.execute(stmt):
        sentence = by_id.get(sentence_id)
        if sentence is None:
            sentence = by_id[sentence_id] = {
                "position": position,
                "start": start,
                "end": end,
                "text": text,
                "weights": {},
            }
            by_review[review_id].append(sentence)
        if model is not None:
            sentence["weights"][model] = weight
    return by_review


def words_by_review(session: Session, *conditions) -> dict[int, list[dict]]:
    """NB-SVM's word weights of the reviews matching ``conditions``, strongest first."""
    stmt = (
        select(WordWeight.review_id, WordWeight.word, WordWeight.weight)
        .join(Review, Review.id == WordWeight.review_id)
        .where(WordWeight.model == WORD_LEVEL_MODEL, *conditions)
        .order_by(WordWeight.review_id, func.abs(WordWeight.weight).desc(), WordWeight.word)
    )
    by_review: dict[int, list[dict]] = defaultdict(list)
    for review_id, word, weight in session.execute(stmt):
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


def movie_dict(movie: Movie | None, title_id: str) -> dict:
    if movie is None:
        return {"title_id": title_id, "title": title_id, "has_metadata": False, "genres": []}
    return {
        "title_id": movie.title_id,
        "title": movie.display_title,
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


def _title_stats(search: str):
    """A row per catalogue title (those whose title or id contains ``search``, ignoring case):
    its display title, reviews, first review id and the main model's positive share, accuracy
    and wrong reviews, which the dashboard sorts by. A subquery: the database does the sums."""
    main = aliased(Prediction, name="main")
    title = func.coalesce(Movie.title, Review.title_id)
    scored = func.count(main.review_id)
    labeled = func.sum(case((and_(GOLD.is_not(None), main.label.is_not(None)), 1), else_=0))
    wrong = func.sum(case((and_(GOLD.is_not(None), main.label != GOLD), 1), else_=0))
    stmt = (
        select(
            Review.title_id,
            title.label("title"),
            func.count().label("reviews"),
            func.min(Review.id).label("first_review"),
            (cast(func.sum(case((main.label == POSITIVE, 1), else_=0)), Float) / func.nullif(scored, 0)).label("share"),
            (cast(labeled - wrong, Float) / func.nullif(labeled, 0)).label("accuracy"),
            wrong.label("wrong"),
        )
        .outerjoin(Movie, Movie.title_id == Review.title_id)
        .outerjoin(main, and_(main.review_id == Review.id, main.model == MAIN_MODEL))
        .where(Review.split == CATALOGUE)
        .group_by(Review.title_id, Movie.title)
    )
    if search:
        stmt = stmt.where(
            or_(Movie.title.icontains(search, autoescape=True), Review.title_id.icontains(search, autoescape=True))
        )
    return stmt.subquery("titles")


def _title_order(sort: str, stats) -> list:
    """ORDER BY of ``_title_stats`` for a dashboard sort; ties go to the title reviewed first."""
    c = stats.c
    keys = {
        "reviews": [c.reviews.desc(), func.lower(c.title)],
        "title": [func.lower(c.title), c.title_id],
        "positive": [c.share.desc().nulls_last(), c.reviews.desc()],
        "negative": [c.share.asc().nulls_last(), c.reviews.desc()],
        "accurate": [c.accuracy.desc().nulls_last(), c.reviews.desc()],
        "inaccurate": [c.accuracy.asc().nulls_last(), c.wrong.desc(), c.reviews.desc()],
    }
    return [*keys[sort], c.first_review]


def title_page(session: Session, view: View, per_page: int) -> tuple[list[str], int]:
    """The title ids on page ``view.page`` of the dashboard (titles matching ``view.q``, in
    ``view``'s order) and how many titles match: one query (two past the last page)."""
    stats = _title_stats(view.q)
    stmt = (
        select(stats.c.title_id, func.count().over().label("matching"))
        .order_by(*_title_order(view.effective_sort, stats))
        .limit(per_page)
        .offset((view.page - 1) * per_page)
    )
    rows = session.execute(stmt).all()
    if rows:
        return [row.title_id for row in rows], rows[0].matching
    return [], session.scalar(select(func.count()).select_from(stats))


def title_cards(session: Session, title_ids: list[str], view: View) -> list[dict]:
    """Dashboard cards of ``title_ids``, in that order: two queries."""
    by_title: dict[str, list[dict]] = defaultdict(list)
    for row in review_rows(session, Review.title_id.in_(title_ids)) if title_ids else ():
        by_title[row["title_id"]].append(row)
    movies = {movie.title_id: movie for movie in session.scalars(select(Movie).where(Movie.title_id.in_(title_ids)))}
    cards = []
    for title_id in title_ids:
        card = movie_dict(movies.get(title_id), title_id)
        card["reviews"] = len(by_title[title_id])
        card["models"] = summaries(by_title[title_id], view)
        cards.append(card)
    return cards


def catalogue_summary(session: Session, view: View) -> dict:
    """Titles and reviews of the whole catalogue and, per model the view shows, the summary
    that ``model_summary`` would make of all its reviews, summed up by the database."""
    titles, reviews = session.execute(
        select(func.count(func.distinct(Review.title_id)), func.count()).where(Review.split == CATALOGUE)
    ).one()
    models = {}
    if view.models:
        groups = session.execute(
            select(
                Prediction.model,
                Prediction.label,
                _LEVEL.label("level"),
                func.count().label("count"),
                func.sum(case((GOLD.is_not(None), 1), else_=0)).label("labeled"),
                func.sum(case((USER_LABEL.is_not(None), 1), else_=0)).label("user_labeled"),
                func.sum(case((USER_LABEL == Prediction.label, 1), else_=0)).label("user_agree"),
            )
            .join(Review, Review.id == Prediction.review_id)
            .where(Review.split == CATALOGUE, Prediction.model.in_(view.models))
            .group_by(Prediction.model, Prediction.label, _LEVEL)
        ).all()
        ticks = wrong_ticks(session, view.models) if view.show_accuracy else {}
        for model in view.models:
            mine = [group for group in groups if group.model == model]
            counts = {"reviews": reviews, "positive": sum(g.count for g in mine if g.label == POSITIVE)}
            for name in ("labeled", "user_labeled", "user_agree"):
                counts[name] = sum(getattr(g, name) or 0 for g in mine)
            runs = {(g.label, g.level): g.count for g in mine}
            bar = [
                {"level": f"{short_label(label)}{level}", "count": runs[label, level]}
                for label, level in BAR_ORDER
                if runs.get((label, level))
            ]
            models[model] = summary_of(model, counts, bar, ticks.get(model, []) if view.show_accuracy else None)
    return {"titles": titles, "reviews": reviews, "models": models}


def wrong_ticks(session: Session, models: Iterable[str]) -> dict[str, list[dict]]:
    """Per model, its wrong catalogue reviews at their positions in the order of its bar
    (positive probability, highest first): one query with a window function."""
    ranked = (
        select(
            Prediction.model,
            Review.id.label("review_id"),
            GOLD.label("gold"),
            Prediction.label,
            (func.row_number().over(partition_by=Prediction.model, order_by=(Prediction.p_positive.desc(), Review.id)) - 1).label("index"),
        )
        .join(Review, Review.id == Prediction.review_id)
        .where(Review.split == CATALOGUE, Prediction.model.in_(list(models)))
        .subquery()
    )
    stmt = (
        select(ranked.c.model, ranked.c.index, ranked.c.review_id, ranked.c.gold)
        .where(ranked.c.gold.is_not(None), ranked.c.label != ranked.c.gold)
        .order_by(ranked.c.model, ranked.c.index)
    )
    ticks: dict[str, list[dict]] = defaultdict(list)
    for model, index, review_id, gold in session.execute(stmt):
        ticks[model].append({"index": index, "review_id": review_id, "gold": gold})
    return ticks


def dashboard(session: Session, view: View, per_page: int) -> dict:
    """Page ``view.page`` of the catalogue's titles (those matching ``view.q``) as cards, with
    a summary of all the catalogue's reviews and the pagination: a handful of queries, whatever
    the size of the catalogue."""
    title_ids, matching = title_page(session, view, per_page)
    return {
        "summary": catalogue_summary(session, view),
        "titles": title_cards(session, title_ids, view),
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
    item["sentences"] = [
        {**sentence, "weights": {m: sentence["weights"][m] for m in models if m in sentence["weights"]}}
        for sentence in sentences
    ]
    return item


def movie_page(session: Session, title_id: str, view: View) -> dict | None:
    """A title with all its catalogue reviews, or None if the catalogue has no such title."""
    rows = review_rows(session, Review.title_id == title_id, text=True, trust=view.analyze)
    if not rows:
        return None
    movie = movie_dict(session.get(Movie, title_id), title_id)
    sentences = (
        sentences_by_review(session, Review.title_id == title_id, Review.split == CATALOGUE)
        if view.analyze
        else {}
    )
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
    rows = review_rows(session, Review.id == review_id, text=True, trust=view.analyze)
    if not rows:
        return None
    row = rows[0]
    movie = session.get(Movie, row["title_id"])
    sentences = sentences_by_review(session, Review.id == review_id).get(review_id, []) if view.analyze else []
    item = review_item(row, sentences, view, MODELS)
    page = {"movie": movie_dict(movie, row["title_id"]), "review": item}
    if view.analyze:
        page["words"] = words_by_review(session, Review.id == review_id).get(review_id, [])
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


def disagreements(session: Session) -> dict:
    """Every catalogue review the two models label differently, and which one was right."""
    view = View(analyze=True, accuracy=True, compare=True)
    rows = review_rows(session, text=True, trust=True, disagreeing=True)
    ids = [row["id"] for row in rows]
    sentences = sentences_by_review(session, Review.id.in_(ids)) if ids else {}
    titles = dict(
        session.execute(
            select(Movie.title_id, Movie.title).where(Movie.title_id.in_({row["title_id"] for row in rows}))
        ).all()
    )
    right = {**dict.fromkeys(MODELS, 0), "unknown": 0}
    items = []
    for row in rows:
        item = review_item(row, sentences.get(row["id"], []), view, MODELS)
        item["title"] = titles.get(row["title_id"]) or row["title_id"]
        winner = next((m for m, p in item["predictions"].items() if p.get("correct")), None)
        item["right"] = winner
        right[winner or "unknown"] += 1
        item["key_sentences"] = {
            model: key_sentence(item["sentences"], model, prediction["label"])
            for model, prediction in item["predictions"].items()
        }
        items.append(item)
    items.sort(key=lambda item: (item["title"].lower(), item["id"]))
    for item in items:  # the page shows each model's key sentence, not every sentence
        del item["sentences"]
    return {"count": len(items), "right": right, "reviews": items}


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
    counts = dict(session.execute(select(Review.split, func.count()).group_by(Review.split)).all())
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
            "sets": {name: metrics[model][name] for name in (EVAL, CATALOGUE) if name in metrics.get(model, {})},
        }
        for model in MODELS
    ]
    page["timings"] = [{"step": step, "seconds": seconds} for step, seconds in record["timings"].items()]
    page["total_seconds"] = sum(seconds or 0.0 for seconds in record["timings"].values())
    page["learning_curve"] = learning_curve(record, run.steps or {})
    page["explanation_quality"] = explanation_quality(session)
    return page


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
