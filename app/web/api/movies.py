"""GET /api/movies and /api/movies/{title_id}: the catalogue as the pages show it, paginated; /api/items and
/api/items/{title_id} are the same, under the name a catalogue of any items has (``app.web.view.Items``)."""

import math
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query
from sqlalchemy.orm import Session

from app.settings import Settings
from app.web.deps import get_items, get_session, get_settings
from app.web.errors import AppError, error_responses
from app.web.limits import IDENTIFIER_MAX_CHARS, check_page_size, plausible_identifier
from app.web.queries import dashboard, reviews
from app.web.schemas import MovieDetail, MovieList
from app.web.view import SORTS, Items, View

router = APIRouter(prefix="/api", tags=["catalogue"], responses=error_responses(422, 503))
Sort = Literal[SORTS]  # type: ignore[valid-type]
Page = Annotated[int, Query(ge=1, le=1_000_000, description="Page number, from 1.")]
PerPage = Annotated[int, Query(ge=1, description="Items per page, at most TEXTFLIX_MAX_PER_PAGE.")]


def paginate(items: list, page: int, per_page: int, settings: Settings) -> tuple[list, dict]:
    check_page_size(per_page, settings)
    total = len(items)
    start = (page - 1) * per_page
    info = {"page": page, "per_page": per_page, "total": total, "pages": max(1, math.ceil(total / per_page))}
    return items[start : start + per_page], info


@router.get("/movies", response_model=MovieList)
@router.get("/items", response_model=MovieList)
def list_movies(
    sort: Annotated[Sort, Query(description="As on the dashboard: most reviews, title, most positive, ...")] = "reviews",
    q: Annotated[str, Query(max_length=200, description="Only titles whose title or id contains this, ignoring case.")] = "",
    page: Page = 1,
    per_page: PerPage = 50,
    session: Session = Depends(get_session),
    settings: Settings = Depends(get_settings),
    items: Items = Depends(get_items),
) -> dict:
    """The catalogue titles with both models' statistics.

    Catalogue titles as dashboard cards (metadata, review count, per-model sentiment and
    accuracy), sorted as on the dashboard and paginated by the database, with the summary
    of all the catalogue's reviews."""
    check_page_size(per_page, settings)
    view = View(analyze=True, accuracy=True, compare=True, sort=sort, q=q.strip(), page=page)
    data = dashboard.dashboard(session, view, per_page, items.imdb)
    return {"sort": view.effective_sort, **data}


@router.get("/movies/{title_id:path}", response_model=MovieDetail, responses=error_responses(404))
@router.get("/items/{title_id:path}", response_model=MovieDetail, responses=error_responses(404))
def get_movie(
    title_id: Annotated[str, Path(max_length=IDENTIFIER_MAX_CHARS)],
    page: Page = 1,
    per_page: PerPage = 20,
    wrong: Annotated[bool, Query(description="Only reviews some model gets wrong.")] = False,
    session: Session = Depends(get_session),
    settings: Settings = Depends(get_settings),
    items: Items = Depends(get_items),
) -> dict:
    """One title: metadata, per-model statistics, its reviews.

    Metadata, the per-model statistics of all its reviews, the key sentences, and its
    reviews (user reviews included) with predictions and sentence weights, paginated."""
    view = View(analyze=True, accuracy=True, compare=True, wrong=wrong)
    data = reviews.movie_page(session, title_id, view, items.imdb) if plausible_identifier(title_id) else None
    if data is None:
        raise AppError.one(404, "title_id", f"There is no {items.noun} {title_id!r} in the catalogue.")
    data["reviews"], data["pagination"] = paginate(data["reviews"], page, per_page, settings)
    return data
