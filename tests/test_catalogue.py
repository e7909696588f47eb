"""The dashboard of a big catalogue: pages of titles, title search, figures summed up by the
database, and a number of queries per page that does not grow with the catalogue.

Expected orders and figures come from plain SQL (``web_fixtures.web_facts``) or from the
per-review computation the title cards use, never from the aggregate under test alone.
"""

import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from fastapi.testclient import TestClient
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from app import db as app_db
from app.web.queries.dashboard import catalogue_summary
from app.web.queries.rows import review_rows, sentences_by_review
from app.web.queries.summaries import summaries
from app.web.catalogue_cache import catalogue_version
from app.db import Prediction, Review, make_engine, session_scope
from app.web.main import create_app
from app.web.render import TICK_COLUMNS, ticks_svg
from app.settings import Settings
from app.web.view import View
from scripts.bench_pages import build_database
from tests.test_pages import _expected_order, get_json
from tests.conftest import empty_postgresql
from tests.web_fixtures import (  # noqa: F401
    GAMES,
    build_web_database,
    fill_web_database,
    game_database,
    web_database,
    web_facts,
)

PER_PAGE = 2


@pytest.fixture(scope="module")
def paged_client(web_database):
    """The fixture catalogue, two titles a page."""
    with TestClient(create_app(Settings(database_url=web_database, titles_per_page=PER_PAGE))) as client:
        yield client


def walk(client, path):
    """Every page of the dashboard from ``path`` on, following the JSON twin's next links."""
    pages = []
    while path:
        pages.append(get_json(client, path))
        path = pages[-1]["pagination"]["next"]
    return pages


def test_the_pages_hold_every_title_once_in_the_sort_order(paged_client, web_facts):
    for sort in ("title", "inaccurate"):
        pages = walk(paged_client, f"/index.json?analyze=1&accuracy=1&sort={sort}")
        titles = len(web_facts["by_title"])
        assert len(pages) == -(-titles // PER_PAGE) > 1
        assert [card["title_id"] for page in pages for card in page["titles"]] == _expected_order(web_facts, sort)
        for number, page in enumerate(pages, 1):
            pagination = page["pagination"]
            assert (pagination["page"], pagination["pages"], pagination["total"]) == (number, len(pages), titles)
            assert page["summary"]["titles"] == titles  # the summary is always the whole catalogue's
        assert pages[0]["pagination"]["prev"] is None
        assert pages[1]["pagination"]["prev"] == f"/index.json?analyze=1&accuracy=1&sort={sort}"
        assert pages[0]["pagination"]["next"] == f"/index.json?analyze=1&accuracy=1&sort={sort}&page=2"


def test_page_links_keep_the_view_and_work_without_javascript(paged_client):
    html = paged_client.get("/?analyze=1&compare=1&sort=positive&q=tt01&page=2").text
    pager = html.split('class="pager"')[1].split("</nav>")[0]
    assert 'rel="prev" href="/?analyze=1&amp;compare=1&amp;sort=positive&amp;q=tt01"' in pager
    assert 'aria-current="page" href="/?analyze=1&amp;compare=1&amp;sort=positive&amp;q=tt01&amp;page=2"' in pager
    # a switch keeps the search and the page; a sort order keeps the search and starts again at page 1
    assert 'href="/?analyze=1&amp;accuracy=1&amp;compare=1&amp;sort=positive&amp;q=tt01&amp;page=2" data-switch="accuracy"' in html
    assert 'href="/?analyze=1&amp;compare=1&amp;sort=negative&amp;q=tt01">negative' in html
    # links to other pages leave the search behind
    assert 'href="/about?analyze=1&amp;compare=1&amp;sort=positive"' in html
    # the search form is a plain GET form that carries the view, not the page
    form = html.split('<form class="search"')[1].split("</form>")[0]
    assert 'method="get" action="/"' in form
    hidden = dict(re.findall(r'type="hidden" name="(\w+)" value="([^"]*)"', form))
    assert hidden == {"analyze": "1", "compare": "1", "sort": "positive"}
    assert 'name="q" value="tt01"' in form


@pytest.mark.parametrize("search", ["rocket", "ROCKET SUM", "tt0100004", "TT01000", "café", "<i>noir"])
def test_search_finds_titles_by_title_or_id_ignoring_case(paged_client, web_facts, search):
    expected = [
        title_id
        for title_id in _expected_order(web_facts, "reviews")
        if search.lower() in web_facts["by_title"][title_id][0]["title"].lower() or search.lower() in title_id.lower()
    ]
    assert expected
    pages = walk(paged_client, f"/index.json?q={search}")
    assert [card["title_id"] for page in pages for card in page["titles"]] == expected
    assert pages[0]["pagination"]["total"] == len(expected)
    assert pages[0]["view"]["q"] == search
    html = paged_client.get("/", params={"q": search}).text
    assert f"{len(expected)} of {len(web_facts['by_title'])} titles match" in html


@pytest.mark.parametrize("search", ["no such film", "%", "_", "Only In Training"])
def test_a_search_that_matches_nothing_says_so(paged_client, search):
    response = paged_client.get("/", params={"q": search, "analyze": 1})
    assert response.status_code == 200
    assert "No titles match" in response.text and 'class="card"' not in response.text
    assert 'href="/?analyze=1">Show every title</a>' in response.text
    data = get_json(paged_client, f"/index.json?q={search.replace('%', '%25')}")
    assert data["titles"] == [] and data["pagination"]["total"] == 0 and data["pagination"]["next"] is None


@pytest.mark.parametrize(
    "query, status, message",
    [
        ("page=0", 422, "whole number from 1"),
        ("page=-1", 422, "whole number from 1"),
        ("page=abc", 422, "whole number from 1"),
        ("page=1.5", 422, "whole number from 1"),
        ("page=%EF%BC%92", 422, "whole number from 1"),  # a full-width digit
        ("page=" + "9" * 40, 422, "whole number from 1"),
        ("page=" + "9" * 5000, 422, "whole number from 1"),  # more digits than int() reads
        ("page=99", 404, "There is no page 99"),
        ("q=" + "x" * 201, 422, "at most 200 characters"),
    ],
)
def test_bad_page_values_get_a_clear_4xx(paged_client, query, status, message):
    answer = paged_client.get(f"/index.json?{query}")
    assert answer.status_code == status
    [problem] = answer.json()["detail"]
    assert message in problem["message"] and problem["field"] in ("page", "q")
    html = paged_client.get(f"/?{query}")
    assert html.status_code == status and message in html.text


def test_the_catalogue_summary_equals_the_per_review_figures(web_database):
    """The database's sums (``catalogue_summary``) against the per-review computation of the
    cards (``model_summary`` over every review)."""
    view = View(analyze=True, accuracy=True, compare=True)
    engine = create_app(Settings(database_url=web_database)).state.engine
    with Session(engine) as session:
        rows = review_rows(session)
        assert catalogue_summary(session, view)["models"] == summaries(rows, view)
    engine.dispose()


@contextmanager
def counting_statements(engine):
    """A list that gets one entry, (SQL, parameters), per statement ``engine`` runs while the block runs."""
    statements = []

    def count(conn, cursor, statement, parameters, context, executemany):
        statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)


PAGES = [
    "/",
    "/?analyze=1&accuracy=1&compare=1",
    "/?analyze=1&accuracy=1&sort=inaccurate&page=2",
    "/?q=title+1",
    "/movies/tt0000001?analyze=1&accuracy=1&compare=1",
    "/reviews/1?analyze=1&accuracy=1",
    "/disagreements",
    "/about",
]


@pytest.fixture(scope="module")
def synthetic_catalogues(tmp_path_factory):
    """Two synthetic catalogues (``scripts/bench_pages.py``), the second six times the first."""
    urls = []
    for titles, reviews in ((12, 150), (72, 900)):
        url = f"sqlite:///{tmp_path_factory.mktemp('catalogue') / 'textflix.db'}"
        build_database(url, titles, reviews)
        urls.append(url)
    return urls


def test_queries_per_page_do_not_grow_with_the_catalogue(synthetic_catalogues):
    counts = []
    for url in synthetic_catalogues:
        app = create_app(Settings(database_url=url, titles_per_page=5))
        with TestClient(app) as client:
            per_page = {}
            for path in PAGES:
                client.get(path)  # the first request may read more (the schema, say)
                with counting_statements(app.state.engine) as statements:
                    assert client.get(path).status_code == 200, path
                per_page[path] = len(statements)
        app.state.engine.dispose()
        counts.append(per_page)
    small, big = counts
    assert small == big
    assert max(big.values()) <= 8, big


def test_a_page_s_reviews_are_read_by_id_not_through_the_whole_catalogue(synthetic_catalogues):
    """With the statistics every build leaves (``app.db.analyze``), SQLite reads the reviews
    and sentences of a page of disagreements by their ids; without them it took the index
    of every catalogue review (3 ms a query at 25,000 reviews instead of 0.2)."""
    engine = make_engine(synthetic_catalogues[1])
    page = {"ids": list(range(1, 21))}
    with counting_statements(engine) as statements, Session(engine) as session:
        review_rows(session, "reviews", page, text=True, trust=True)
        sentences_by_review(session, "reviews", page)
    with engine.connect() as connection:
        for sql, parameters in statements:
            plan = " | ".join(row[3] for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", parameters))
            assert "reviews USING INTEGER PRIMARY KEY" in plan and "ix_reviews_split_title" not in plan, plan
    engine.dispose()


def test_the_summary_equals_the_per_review_figures_on_a_synthetic_catalogue(synthetic_catalogues):
    """As above, with random probabilities: the bar's colour bounds and the ticks' positions."""
    for view in (View(analyze=True, accuracy=True, compare=True), View(analyze=True)):
        engine = create_app(Settings(database_url=synthetic_catalogues[1])).state.engine
        with Session(engine) as session:
            expected = summaries(review_rows(session), view)
            assert catalogue_summary(session, view)["models"] == expected
        engine.dispose()


# --- figures kept while the catalogue is unchanged ---------------------------------------------


def add_user_review(url: str, title_id: str, bert: str, nbsvm: str) -> None:
    """A review of ``title_id`` with both models' predictions, written by another connection (as
    another server process or the build would)."""
    engine = make_engine(url)
    with session_scope(engine) as session:
        review = Review(title_id=title_id, text="Written later.", label=None, split="catalogue", source="user", word_count=2)
        session.add(review)
        session.flush()
        for model, label in (("bert", bert), ("nbsvm", nbsvm)):
            session.add(Prediction(review_id=review.id, model=model, label=label, p_positive=0.9 if label == "positive" else 0.1))
    engine.dispose()


def figures(client) -> tuple:
    dashboard = get_json(client, "/index.json?analyze=1&accuracy=1")
    card = next(card for card in dashboard["titles"] if card["title_id"] == "tt0100002")
    return (
        dashboard["summary"]["reviews"],
        dashboard["summary"]["models"]["bert"]["positive"],
        card["reviews"],
        get_json(client, "/disagreements.json")["count"],
        get_json(client, "/about.json")["database_counts"]["catalogue"],
    )


@pytest.mark.parametrize("counted", [True, False], ids=["counted", "built-before-0004"])
def test_a_change_to_the_catalogue_shows_on_the_next_request(tmp_path, counted):
    url = build_web_database(tmp_path / "textflix.db")
    if not counted:  # a database from before migration 0004: figures are computed per request
        with make_engine(url).begin() as connection:
            config = Config()
            config.set_main_option("script_location", str(Path(app_db.__file__).parent / "migrations"))
            config.attributes["connection"] = connection
            command.downgrade(config, "0003")
    with TestClient(create_app(Settings(database_url=url))) as client:
        reviews, positive, title_reviews, disagreeing, catalogue = figures(client)
        assert figures(client) == (reviews, positive, title_reviews, disagreeing, catalogue)  # kept: the same
        add_user_review(url, "tt0100002", "positive", "negative")
        assert figures(client) == (reviews + 1, positive + 1, title_reviews + 1, disagreeing + 1, catalogue + 1)
        add_user_review(url, "tt0100002", "negative", "negative")
        assert figures(client) == (reviews + 2, positive + 1, title_reviews + 2, disagreeing + 1, catalogue + 2)


def test_the_triggers_count_every_kind_of_change(tmp_path):
    url = build_web_database(tmp_path / "textflix.db")
    engine = make_engine(url)

    def version():
        with Session(engine) as session:
            return catalogue_version(session)

    before = version()
    add_user_review(url, "tt0100001", "positive", "positive")
    assert version() > before
    for change in (
        "UPDATE movies SET title = 'Renamed' WHERE title_id = 'tt0100001'",
        "UPDATE predictions SET label = 'negative' WHERE review_id = 1 AND model = 'bert'",
        "DELETE FROM explanations WHERE review_id = 1",
    ):
        before = version()
        with engine.begin() as connection:
            connection.execute(text(change))
        assert version() > before, change
    engine.dispose()


def test_on_postgresql_pages_search_and_a_change_show_as_on_sqlite(web_facts):
    """The fixture catalogue in the PostgreSQL of TEXTFLIX_TEST_POSTGRES_URL: its statement triggers count the changes."""
    url = fill_web_database(empty_postgresql())
    app = create_app(Settings(database_url=url, titles_per_page=PER_PAGE))
    with TestClient(app) as client:
        for sort in ("title", "inaccurate"):
            pages = walk(client, f"/index.json?analyze=1&accuracy=1&sort={sort}")
            assert [card["title_id"] for page in pages for card in page["titles"]] == _expected_order(web_facts, sort)
        assert [card["title_id"] for card in get_json(client, "/index.json?q=ROCKET")["titles"]] == ["tt0100002"]
        with Session(app.state.engine) as session:
            view = View(analyze=True, accuracy=True, compare=True)
            assert catalogue_summary(session, view)["models"] == summaries(review_rows(session), view)
        reviews = get_json(client, "/index.json")["summary"]["reviews"]
        add_user_review(url, "tt0100002", "positive", "negative")
        assert get_json(client, "/index.json")["summary"]["reviews"] == reviews + 1
    app.state.engine.dispose()


def test_a_big_catalogue_s_wrong_reviews_are_drawn_as_columns_of_ticks():
    # 40,000 reviews (columns of 100), a wrong one every 10th in the first half and every 50th in the second
    ticks = [{"index": i, "review_id": i, "gold": "negative"} for i in range(0, 20_000, 10)]
    ticks += [{"index": i, "review_id": i, "gold": "positive"} for i in range(20_000, 40_000, 50)]
    summary = {"scored": 40_000, "ticks": ticks}
    assert ticks_svg(summary) is ticks_svg(summary)  # drawn once while the summary is kept
    svg = str(ticks_svg(summary))
    lines = re.findall(r'<line class="tick gold-(pos|neg)" x1="([\d.]+)"[^>]*?(?: stroke-opacity="([\d.]+)")?/>', svg)
    assert len(lines) == TICK_COLUMNS  # one per column, each column holding some wrong reviews
    opacity = {side: {float(o or 1) for s, _, o in lines if s == side} for side in ("neg", "pos")}
    assert opacity == {"neg": {1.0}, "pos": {0.2}}  # five times fewer wrong reviews: a fifth as dark
    # a small catalogue keeps a tick per wrong review
    assert str(ticks_svg({"scored": 300, "ticks": ticks[:7]})).count('class="tick ') == 7


def test_disagreements_come_in_pages(web_database, web_facts):
    expected = {r["id"] for r in web_facts["reviews"] if r["bert"] != r["nbsvm"]}
    with TestClient(create_app(Settings(database_url=web_database, disagreements_per_page=2))) as client:
        pages = walk(client, "/disagreements.json")
        assert len(pages) == -(-len(expected) // 2) > 1
        seen = [review["id"] for page in pages for review in page["reviews"]]
        assert sorted(seen) == sorted(expected) and len(seen) == len(expected)
        assert all(page["count"] == len(expected) for page in pages)
        html = client.get("/disagreements?page=2").text
        assert "Page 2 of" in html and 'rel="prev" href="/disagreements"' in html
        assert client.get("/disagreements?page=0").status_code == 422
        assert client.get(f"/disagreements?page={len(pages) + 1}").status_code == 404


def test_a_catalogue_of_games_sorts_searches_and_pages_its_games_by_name_or_id(game_database):
    settings = Settings(database_url=game_database, item_noun="game", titles_per_page=PER_PAGE)
    with TestClient(create_app(settings)) as client:
        pages = walk(client, "/index.json?sort=title")
        reviewed = [game for game in GAMES.values() if game["title_id"] != "620"]  # 620 has training reviews only
        named = sorted((game["title"] or game["title_id"] for game in reviewed), key=str.casefold)
        assert [card["title"] for page in pages for card in page["titles"]] == named  # "730" has no name: its id
        assert [card["title_id"] for card in get_json(client, "/index.json?q=73")["titles"]] == ["730"]
        assert [card["title_id"] for card in get_json(client, "/index.json?q=DOTA")["titles"]] == ["570"]
        html = client.get("/", params={"page": 2}).text
        assert 'aria-label="Pages of games"' in html and "Page 2 of 2 · games 3–4 of 4" in html
