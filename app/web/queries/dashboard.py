"""The dashboard: a page of title cards in the view's order, and the summary of the whole catalogue,
each kept while the catalogue is unchanged (``catalogue_cache``)."""

import math

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import Movie, Review
from app.web.catalogue_cache import kept
from app.web.queries.rows import MOVIE_COLUMNS, movie_dict
from app.web.queries.summaries import in_view, model_summaries
from app.web.view import View
from model.names import CATALOGUE


def _missing_last(value: float | None, descending: bool) -> tuple:
    if value is None:
        return (1, 0.0)
    return (0, -value if descending else value)


# The dashboard's sort orders of the cards (``all_cards``) by the figures of the model ``main`` (``View.main``);
# ties keep the order of the first reviews.
TITLE_SORTS = {
    "reviews": lambda card, main: (-card["reviews"], card["title"].casefold()),
    "title": lambda card, main: (card["title"].casefold(), card["title_id"]),
    "positive": lambda card, m: (_missing_last(card["models"][m]["positive_share"], True), -card["reviews"]),
    "negative": lambda card, m: (_missing_last(card["models"][m]["positive_share"], False), -card["reviews"]),
    "accurate": lambda card, m: (_missing_last(card["models"][m]["accuracy"], True), -card["reviews"]),
    "inaccurate": lambda card, m: (
        _missing_last(card["models"][m]["accuracy"], False), -card["models"][m]["wrong"], -card["reviews"]
    ),
}


def title_page(session: Session, view: View, per_page: int, imdb: bool) -> tuple[list[dict], int]:
    """The cards (``all_cards``) on page ``view.page`` of the dashboard (the titles whose title
    or id contains ``view.q``, ignoring case, in ``view``'s order) and how many titles match.
    Each order is kept while the catalogue is unchanged (``catalogue_cache``). ``imdb``: whether the
    catalogue is IMDB's (``all_cards``)."""
    sort, main = view.effective_sort, view.main
    ordered = kept(
        session,
        ("title order", sort, main, imdb),
        lambda: [
            (f"{c['title']}\n{c['title_id']}".casefold(), c)
            for c in sorted(all_cards(session, imdb).values(), key=lambda card: TITLE_SORTS[sort](card, main))
        ],
    )
    needle = view.q.casefold()
    matching = [card for searched, card in ordered if needle in searched]
    start = (view.page - 1) * per_page
    return matching[start : start + per_page], len(matching)


def all_cards(session: Session, imdb: bool) -> dict[str, dict]:
    """Every catalogue title's card, by title id in the order of their first reviews: metadata,
    reviews and every model's summary with accuracy, summed up by the database; kept while the
    catalogue is unchanged (``catalogue_cache``). ``imdb``: whether the catalogue is IMDB's
    (``rows.display_title``), a key of what is kept, as a new corpus's run record may follow its reviews."""
    return kept(session, ("cards", imdb), lambda: _all_cards(session, imdb))


def _all_cards(session: Session, imdb: bool) -> dict[str, dict]:
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
        title_id: {**movie_dict(movies.get(title_id), title_id, imdb), "reviews": count, "models": figures[title_id]}
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


def dashboard(session: Session, view: View, per_page: int, imdb: bool) -> dict:
    """Page ``view.page`` of the catalogue's titles (those matching ``view.q``) as cards, with
    a summary of all the catalogue's reviews and the pagination: a handful of queries, whatever
    the size of the catalogue. ``imdb``: whether the catalogue is IMDB's (``all_cards``)."""
    cards, matching = title_page(session, view, per_page, imdb)
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
