"""Several servers, one database: real ``textflix serve`` processes over HTTP.

Two servers on one PostgreSQL start together before the database is built (a server never
migrates, so they create nothing), serve it once a build has filled it, and each shows all of
200 reviews posted concurrently to both. One ``serve --workers 2`` on SQLite answers from two
processes and stores every review posted to either. The models are the API tests' (conftest).
"""

import asyncio
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.cli import main, worker_environment
from app.settings import Settings
from tests.conftest import ServerProcess, serve_process
from tests.web_fixtures import build_web_database, fill_web_database

TITLE = "tt0100003"  # a catalogue title of the fixture database, without user reviews
FIXTURE_REVIEWS = 2  # its catalogue reviews there
TOKEN = "several-servers-token"
SCHEMA = "textflix_servers_test"
# Few LIME samples and faithfulness draws: a stored review is always explained. The 200 reviews come
# from one client address: no per-client rate limit.
FAST = {"TEXTFLIX_LIME_SAMPLES": "8", "TEXTFLIX_FAITHFULNESS_DRAWS": "1", "TEXTFLIX_RATE_LIMIT": ""}
REVIEWS = 200
READERS = 16  # concurrent GETs per server while checking


needs_postgresql = pytest.mark.skipif(
    not os.environ.get("TEXTFLIX_TEST_POSTGRES_URL"),
    reason="TEXTFLIX_TEST_POSTGRES_URL is not set (CI sets it, see .ci/run)",
)


@pytest.fixture
def postgresql_schema() -> Iterator[str]:
    """The URL of an empty schema of its own in the database of TEXTFLIX_TEST_POSTGRES_URL (its
    connections search it first), so that other PostgreSQL tests' tables are left alone; dropped
    at the end."""
    url = os.environ["TEXTFLIX_TEST_POSTGRES_URL"]
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        connection.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    try:
        schema_url = make_url(url).update_query_dict({"options": f"-csearch_path={SCHEMA}"})
        yield schema_url.render_as_string(hide_password=False)
    finally:
        with engine.begin() as connection:
            connection.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        engine.dispose()


def tables(url: str) -> list[str]:
    engine = create_engine(url)
    with engine.connect() as connection:
        names = connection.scalars(
            text("SELECT table_name FROM information_schema.tables WHERE table_schema = :schema"), {"schema": SCHEMA}
        ).all()
    engine.dispose()
    return names


def review_text(i: int) -> str:
    mood = ("great", "loved") if i % 2 else ("awful", "hated")
    return f"Crowd review number {i}: the plot was {mood[0]}. I {mood[1]} it."


async def post_reviews(urls: list[str], count: int, token: str | None = None) -> list[httpx.Response]:
    """``count`` reviews of TITLE posted all at once, review i to server ``urls[i % len(urls)]``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(timeout=300, limits=limits, headers=headers) as http:
        return await asyncio.gather(
            *(
                http.post(
                    f"{urls[i % len(urls)]}/api/reviews",
                    json={"text": review_text(i), "title_id": TITLE, "label": "positive" if i % 2 else "negative"},
                )
                for i in range(count)
            )
        )


async def fetch_all(url: str, paths: list[str]) -> list[httpx.Response]:
    """GET every path of ``paths`` from the server at ``url``, READERS at a time."""
    gate = asyncio.Semaphore(READERS)
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:

        async def get(path: str) -> httpx.Response:
            async with gate:
                return await http.get(path)

        return await asyncio.gather(*(get(path) for path in paths))


def user_reviews_in_api(url: str) -> dict[int, str]:
    """The user reviews of TITLE that GET /api/movies/{title_id} lists, page by page: id → text."""
    found, page, pages = {}, 1, 1
    while page <= pages:
        answer = httpx.get(f"{url}/api/movies/{TITLE}", params={"page": page, "per_page": 100}, timeout=60)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        found.update({r["id"]: r["text"] for r in body["reviews"] if r["source"] == "user"})
        page, pages = page + 1, body["pagination"]["pages"]
    return found


def check_shows_every_review(server: ServerProcess, posted: dict[int, str]) -> None:
    """The server lists the posted reviews (id → text) with their title in its API, shows each on its
    review page, and counts them on the title page."""
    assert user_reviews_in_api(server.url) == posted
    ids = sorted(posted)
    pages = asyncio.run(fetch_all(server.url, [f"/reviews/{review_id}" for review_id in ids]))
    for review_id, page in zip(ids, pages):
        assert page.status_code == 200 and posted[review_id] in page.text, (review_id, page.status_code)
    title_page = httpx.get(f"{server.url}/movies/{TITLE}", timeout=60)
    assert f"{FIXTURE_REVIEWS + len(posted)} reviews" in title_page.text


@needs_postgresql
def test_two_servers_on_one_postgresql_show_every_review_posted_to_either(api_data_dir, postgresql_schema, tmp_path):
    url = postgresql_schema
    with ExitStack() as stack:
        servers = [
            stack.enter_context(
                serve_process(api_data_dir, url, tmp_path / f"{name}.log", env={**FAST, "TEXTFLIX_API_TOKEN": TOKEN}, wait=False)
            )
            for name in ("first", "second")
        ]  # fmt: skip
        for server in servers:  # started together, on a database nobody has built yet
            server.wait_until_loaded()
            health = httpx.get(f"{server.url}/api/health", timeout=10).json()
            assert (health["status"], health["database"]) == ("degraded", "unavailable")
            assert httpx.get(f"{server.url}/", timeout=10).status_code == 503
        assert tables(url) == []  # servers never create or migrate the schema: the build does

        fill_web_database(url)  # the one build job (migrations and rows), while both servers run
        for server in servers:
            assert httpx.get(f"{server.url}/api/health", timeout=10).json()["status"] == "ok"
        assert len({httpx.get(f"{s.url}/api/health", timeout=10).json()["pid"] for s in servers}) == 2

        responses = asyncio.run(post_reviews([s.url for s in servers], REVIEWS, TOKEN))
        assert [r.status_code for r in responses] == [201] * REVIEWS, {r.status_code: r.text for r in responses}
        posted = {r.json()["id"]: review_text(i) for i, r in enumerate(responses)}
        assert len(posted) == REVIEWS  # the database numbers them: no two servers hand out one id
        for server in servers:
            check_shows_every_review(server, posted)


def test_serve_with_two_workers_answers_from_both_and_stores_every_review(api_data_dir, tmp_path):
    url = build_web_database(tmp_path / "workers.db")
    with serve_process(api_data_dir, url, tmp_path / "serve.log", "--workers", "2", env={**FAST, "TEXTFLIX_ALLOW_ANONYMOUS_WRITES": "1"}) as server:
        pids = answering_pids(server.url)
        assert len(pids) == 2 and server.process.pid not in pids, pids
        assert all(parent_pid(pid) == server.process.pid for pid in pids)

        count = 40  # SQLite, written by two processes at once (WAL, busy timeout)
        responses = asyncio.run(post_reviews([server.url], count))
        assert [r.status_code for r in responses] == [201] * count, {r.status_code: r.text for r in responses}
        posted = {r.json()["id"]: review_text(i) for i, r in enumerate(responses)}
        assert len(posted) == count
        check_shows_every_review(server, posted)
    log = server.output()
    assert "with 2 worker processes; each loads its own copy of the models" in log
    for pid in pids:
        assert f"(pid {pid}) holds" in log  # each worker logged its models and its memory


def answering_pids(url: str, timeout: float = 120) -> set[int]:
    """The processes that answer GET /api/health with their models loaded, asked on new connections,
    eight at a time, until two have answered or ``timeout`` seconds have passed."""

    async def ask() -> set[int]:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as http:
            answers = await asyncio.gather(*(http.get(f"{url}/api/health") for _ in range(8)))
        return {a.json()["pid"] for a in answers if a.json()["models"]["bert"]}

    pids: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(pids) < 2 and time.monotonic() < deadline:
        pids |= asyncio.run(ask())
    return pids


def parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rpartition(")")[2].split()[1])


def test_worker_processes_rebuild_the_same_settings_from_the_environment(monkeypatch, tmp_path):
    settings = Settings(
        data_dir=tmp_path / "data", database_url="postgresql+psycopg://u:p@db/textflix", device="cpu", port=8123,
        workers=3, learning_curve=[100, 300], lime_samples=64, batch_window_ms=2.5, allow_anonymous_writes=True,
        api_token="s3cret token", lime_target="probability", inference_max_tokens=None,
    )  # fmt: skip
    monkeypatch.setenv("TEXTFLIX_INFERENCE_MAX_TOKENS", "4096")  # a variable the flags overrode
    for variable, value in worker_environment(settings).items():
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    rebuilt = Settings()
    assert rebuilt.model_dump() == settings.model_dump()
    assert rebuilt.api_token.get_secret_value() == "s3cret token"


def test_workers_is_a_flag_of_serve_and_up_and_must_be_positive(capsys):
    assert main(["serve", "--workers", "0", "--data-dir", "/nonexistent"]) == 2
    assert "workers: Input should be greater than or equal to 1" in capsys.readouterr().err
    assert main(["up", "--workers", "0"]) == 2
