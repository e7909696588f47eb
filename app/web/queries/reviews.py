"""The pages of reviews: a title's page with its reviews and key sentences, a review in full,
and the reviews the two models disagree on."""

import math
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import Explanation, Movie
from app.web.catalogue_cache import kept
from app.web.queries.rows import (
    display_title,
    explanation_record,
    movie_of,
    review_rows,
    sentences_by_review,
    words_by_review,
)
from app.web.queries.summaries import confidence_of, summaries
from app.web.view import View
from app.word_rows import with_words, words_by_sentence
from model.names import BERT, MODELS, NEGATIVE, POSITIVE


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
    key = {"position": best["position"], "start": best["start"], "text": best["text"], "weight": best["weights"][model]}
    if "words" in best:
        key["words"] = best["words"]
    return key


def review_item(row: dict, sentences: list[dict], view: View, models: Iterable[str]) -> dict:
    """One review as a page shows it in ``view``, with the predictions of ``models``."""
    item = {"id": row["id"], "title_id": row["title_id"], "source": row["source"], "text": row["text"]}
    if view.show_accuracy:
        item["gold"] = row["gold"]
        item["rating"] = row["rating"]
        item["user_label"] = row["user_label"]
    if not view.analyze:
        return item
    models = [model for model in models if model in row["predictions"] and model not in view.pending]
    predictions = {}
    for model in models:
        prediction = dict(row["predictions"][model])
        prediction["confidence"] = confidence_of(prediction)
        if view.show_accuracy:
            prediction["correct"] = None if row["gold"] is None else prediction["label"] == row["gold"]
        predictions[model] = prediction
    item["predictions"] = predictions
    item["trust"] = {model: row["trust"][model] for model in models if model in row["trust"]}
    # predicted but not explained yet: the build's explain step commits each review's highlights as it goes
    item["highlights_pending"] = [model for model in models if model not in item["trust"]]
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


def movie_page(session: Session, title_id: str, view: View, imdb: bool) -> dict | None:
    """A title with all its catalogue reviews, or None if the catalogue has no such title; ``imdb``: whether
    the catalogue is IMDB's (``rows.movie_dict``)."""
    rows = review_rows(session, "title", {"title_id": title_id}, text=True, trust=view.analyze)
    if not rows:
        return None
    movie = movie_of(session, title_id, imdb)
    sentences, shares = {}, {}
    if view.analyze:
        sentences = sentences_by_review(session, "title", {"title_id": title_id})
        shares = words_by_sentence(session, [row["id"] for row in rows])
    items = [review_item(row, with_words(row["id"], sentences.get(row["id"], []), shares), view, view.models) for row in rows]
    page = {
        "movie": movie,
        "summary": {"reviews": len(rows), "models": summaries(rows, view)},
    }
    if view.analyze:
        highlights: dict[str, list[dict]] = {POSITIVE: [], NEGATIVE: []}
        for item in items:
            prediction = item["predictions"].get(view.main)
            if prediction is None:
                continue
            sentence = key_sentence(item["sentences"], view.main, prediction["label"])
            if sentence is not None:
                trust = item["trust"].get(view.main, {})
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


def review_sentences_with_words(session: Session, review_id: int) -> list[dict]:
    """A review's sentences, each with its stored words (``app.word_rows.with_words``: null where none are)."""
    sentences = sentences_by_review(session, "review", {"review_id": review_id}).get(review_id, [])
    return with_words(review_id, sentences, words_by_sentence(session, [review_id]))


def review_page(session: Session, review_id: int, view: View, imdb: bool) -> dict | None:
    """One catalogue review in full: both models, sentence weights, NB-SVM word weights; ``imdb``: whether
    the catalogue is IMDB's (``rows.movie_dict``)."""
    rows = review_rows(session, "review", {"review_id": review_id}, text=True, trust=view.analyze)
    if not rows:
        return None
    row = rows[0]
    sentences = review_sentences_with_words(session, review_id) if view.analyze else []
    item = review_item(row, sentences, view, MODELS)
    page = {"movie": movie_of(session, row["title_id"], imdb), "review": item}
    if view.analyze:
        page["words_stored"] = any(BERT in (s["words"] or {}) for s in sentences)  # else the page offers to compute them
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


def _disagreement_list(session: Session, imdb: bool) -> dict:
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
        title = display_title(titles.get(row["title_id"]), row["title_id"], imdb)
        entries.append({"id": row["id"], "title": title, "right": winner})
    entries.sort(key=lambda entry: (entry["title"].casefold(), entry["id"]))
    return {"entries": entries, "right": right}


def disagreements(session: Session, page: int, per_page: int, imdb: bool) -> dict:
    """Page ``page`` of the catalogue reviews the two models label differently, side by side,
    with which one was right, and the count of all of them. The list is kept while the
    catalogue is unchanged (``catalogue_cache``); the page's reviews are read in three queries. ``imdb``:
    whether the catalogue is IMDB's (``rows.display_title``)."""
    listing = kept(session, ("disagreements", imdb), lambda: _disagreement_list(session, imdb))
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
