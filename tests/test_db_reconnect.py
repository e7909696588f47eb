"""A server on PostgreSQL keeps answering after the database drops its connections (a restart,
a killed backend): the next request reconnects instead of failing."""

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app.settings import Settings
from app.web.main import create_app
from tests.conftest import empty_postgresql
from tests.web_fixtures import fill_web_database


def terminate_other_sessions(url: str) -> int:
    """End every other session on the database, as a restart would; returns how many there were."""
    engine = create_engine(url)
    with engine.connect() as connection:
        ended = connection.scalar(
            text(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    engine.dispose()
    return ended


def test_the_server_reconnects_after_postgresql_ends_its_sessions():
    url = fill_web_database(empty_postgresql())
    app = create_app(Settings(database_url=url))
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/").status_code == 200
        for path in ("/movies/tt0100001", "/api/movies"):
            assert terminate_other_sessions(url) >= 1  # the server's pooled connection among them
            response = client.get(path)
            assert response.status_code == 200, f"{path}: {response.status_code} {response.text[:300]}"
    app.state.engine.dispose()
