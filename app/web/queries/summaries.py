"""What the pages show of a model over some reviews: its bar of predictions by colour, and with
accuracy on, the wrong reviews as ticks; made from rows (``model_summary``) or summed up by
the database for a title or the whole catalogue (``model_summaries``)."""

from collections import defaultdict

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.db import Prediction, Review
from app.web.queries.rows import GOLD, USER_LABEL
from app.web.view import View
from model.names import CATALOGUE, DISPLAY_NAMES, MODELS, NEGATIVE, POSITIVE, short_label


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


# A review's colour in a bar, as ``_strength`` has it: the side of its label, 1-3 by confidence.
_CONFIDENCE = case((Prediction.label == POSITIVE, Prediction.p_positive), else_=1.0 - Prediction.p_positive)
_LEVEL = case(((_CONFIDENCE - 0.5) * 6 >= 2, 3), ((_CONFIDENCE - 0.5) * 6 >= 1, 2), else_=1)
# The colour runs of a bar whose labels agree with their probabilities, highest positive probability first.
BAR_ORDER = [(POSITIVE, 3), (POSITIVE, 2), (POSITIVE, 1), (NEGATIVE, 1), (NEGATIVE, 2), (NEGATIVE, 3)]


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
