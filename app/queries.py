"""The queries behind the pages.

Every function returns plain dicts and lists (JSON-ready), which both the HTML templates
and the JSON twin of each page use, so the two always show the same thing. Pages show
only the catalogue (``Review.split == "catalogue"``, user-posted reviews included); what
the view hides (sentiment with Analyze off, gold labels with accuracy off) is left out.
A page costs a handful of queries, whatever the number of reviews.
"""

from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session, aliased

from app.db import Explanation, Movie, Prediction, Review, Sentence, SentenceWeight, WordWeight, latest_run
from app.view import View
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
    USER,
    WORD_LEVEL_MODEL,
    short_label,
)
from model.quality import QUALITY_FIELDS, assessment


# --- rows ------------------------------------------------------------------------------


def review_rows(session: Session, *conditions, text: bool = False, disagreeing: bool = False) -> list[dict]:
    """Catalogue reviews matching ``conditions`` with both models' predictions, one query.

    ``disagreeing`` keeps only the reviews that the two models label differently.
    """
    aliases = {model: aliased(Prediction, name=f"p_{model}") for model in MODELS}
    columns = [
        Review.id,
        Review.title_id,
        case((Review.source == IMDB, Review.label)).label("gold"),  # a user's label is no gold label
        case((Review.source == USER, Review.label)).label("user_label"),
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
    stmt = stmt.where(Review.split == CATALOGUE, *conditions).order_by(Review.id)
    if disagreeing:
        first, second = aliases.values()
        stmt = stmt.where(first.label != second.label)
    names = [column.key for column in stmt.selected_columns]
    rows = []
    for record in session.execute(stmt):
        row = dict(zip(names, record))
        row["predictions"] = {}
        for model in MODELS:
            label, p_positive = row.pop(f"{model}_label"), row.pop(f"{model}_p_positive")
            if label is not None:
                row["predictions"][model] = {"label": label, "p_positive": p_positive}
        rows.append(row)
    return rows


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
    positive = sum(row["predictions"][model]["label"] == POSITIVE for row in scored)
    bar: list[dict] = []
    for row in scored:
        level = _strength(row["predictions"][model])
        if bar and bar[-1]["level"] == level:
            bar[-1]["count"] += 1
        else:
            bar.append({"level": level, "count": 1})
    summary = {
        "model": model,
        "name": DISPLAY_NAMES[model],
        "reviews": len(rows),
        "scored": len(scored),
        "positive": positive,
        "negative": len(scored) - positive,
        "positive_share": positive / len(scored) if scored else None,
        "bar": bar,
    }
    if accuracy:
        user_labeled = [row for row in scored if row["user_label"] is not None]
        summary.update(
            user_labeled=len(user_labeled),
            user_agree=sum(row["predictions"][model]["label"] == row["user_label"] for row in user_labeled),
        )
        ticks = [
            {"index": index, "review_id": row["id"], "gold": row["gold"]}
            for index, row in enumerate(scored)
            if row["gold"] is not None and row["predictions"][model]["label"] != row["gold"]
        ]
        labeled = sum(row["gold"] is not None for row in scored)
        summary.update(
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


def _sort_key(sort: str):
    def share(card):
        return card["models"][MAIN_MODEL]["positive_share"]

    def accuracy(card):
        return card["models"][MAIN_MODEL].get("accuracy")

    def missing_last(value, descending: bool):
        if value is None:
            return (1, 0.0)
        return (0, -value if descending else value)

    keys = {
        "reviews": lambda card: (-card["reviews"], card["title"].lower()),
        "title": lambda card: (card["title"].lower(), card["title_id"]),
        "positive": lambda card: (missing_last(share(card), True), -card["reviews"]),
        "negative": lambda card: (missing_last(share(card), False), -card["reviews"]),
        "accurate": lambda card: (missing_last(accuracy(card), True), -card["reviews"]),
        "inaccurate": lambda card: (
            missing_last(accuracy(card), False),
            -card["models"][MAIN_MODEL]["wrong"],
            -card["reviews"],
        ),
    }
    return keys[sort]


def dashboard(session: Session, view: View) -> dict:
    """All catalogue titles as cards, with a summary of all their reviews: two queries."""
    rows = review_rows(session)
    by_title: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_title[row["title_id"]].append(row)
    movies = {
        movie.title_id: movie
        for movie in session.scalars(select(Movie).where(Movie.title_id.in_(list(by_title))))
    }
    cards = []
    for title_id, title_rows in by_title.items():
        card = movie_dict(movies.get(title_id), title_id)
        card["reviews"] = len(title_rows)
        card["models"] = summaries(title_rows, view)
        cards.append(card)
    cards.sort(key=_sort_key(view.effective_sort))
    return {
        "summary": {"titles": len(cards), "reviews": len(rows), "models": summaries(rows, view)},
        "titles": cards,
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
    item["wrong"] = any(prediction.get("correct") is False for prediction in predictions.values())
    labels = {prediction["label"] for prediction in predictions.values()}
    item["disagree"] = len(predictions) > 1 and len(labels) > 1
    item["sentences"] = [
        {**sentence, "weights": {m: sentence["weights"][m] for m in models if m in sentence["weights"]}}
        for sentence in sentences
    ]
    return item


def weight_scale(weights: Iterable[float]) -> float:
    """The weight drawn at full colour: the 95th percentile of the absolute weights."""
    values = sorted(abs(weight) for weight in weights if weight)
    if not values:
        return 1.0
    return values[int(0.95 * (len(values) - 1))]


def weight_scales(items: list[dict], models: Iterable[str]) -> dict[str, float]:
    return {
        model: weight_scale(
            sentence["weights"].get(model, 0.0)
            for item in items
            for sentence in item.get("sentences", ())
        )
        for model in models
    }


def movie_page(session: Session, title_id: str, view: View) -> dict | None:
    """A title with all its catalogue reviews, or None if the catalogue has no such title."""
    rows = review_rows(session, Review.title_id == title_id, text=True)
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
        for row in rows:
            prediction = row["predictions"].get(MAIN_MODEL)
            if prediction is None:
                continue
            sentence = key_sentence(sentences.get(row["id"], []), MAIN_MODEL, prediction["label"])
            if sentence is not None:
                highlights[prediction["label"]].append({"review_id": row["id"], **sentence})
        for label, entries in highlights.items():
            entries.sort(key=lambda entry: -abs(entry["weight"]))
        page["highlights"] = highlights
        page["weight_scale"] = weight_scales(items, view.models)
    if view.show_accuracy:
        page["wrong_reviews"] = sum(item["wrong"] for item in items)
    if view.only_wrong:
        items = [item for item in items if item["wrong"]]
    page["reviews"] = items
    return page


def review_page(session: Session, review_id: int, view: View) -> dict | None:
    """One catalogue review in full: both models, sentence weights, NB-SVM word weights."""
    rows = review_rows(session, Review.id == review_id, text=True)
    if not rows:
        return None
    row = rows[0]
    movie = session.get(Movie, row["title_id"])
    sentences = sentences_by_review(session, Review.id == review_id).get(review_id, []) if view.analyze else []
    item = review_item(row, sentences, view, MODELS)
    page = {"movie": movie_dict(movie, row["title_id"]), "review": item}
    if view.analyze:
        page["words"] = words_by_review(session, Review.id == review_id).get(review_id, [])
        page["word_scale"] = weight_scale(word["weight"] for word in page["words"])
        page["weight_scale"] = weight_scales([item], MODELS)
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
    rows = review_rows(session, text=True, disagreeing=True)
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
    scale = weight_scales(items, MODELS)
    for item in items:  # the page shows each model's key sentence, not every sentence
        del item["sentences"]
    return {"count": len(items), "right": right, "reviews": items, "weight_scale": scale}


# --- about -----------------------------------------------------------------------------


def about(session: Session) -> dict:
    """The latest pipeline run: configuration, metrics of both models, timings."""
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
    page["learning_curve"] = metrics.get("learning_curve")
    return page
