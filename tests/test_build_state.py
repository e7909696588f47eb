"""The server's view of the build (``app.web.build_state``): what the pages learn from the run record, read by
the ``BuildWatch`` when it refreshes and not by each request."""

import shutil

from fastapi.testclient import TestClient
from sqlalchemy import event

from app.settings import Settings
from app.web.deps import database_engine
from app.web.main import create_app
from model.names import IMDB_CORPUS
from tests.web_fixtures import GAME_CORPUS, GAME_RUN, game_database, set_run  # noqa: F401


def test_the_pages_learn_the_corpus_from_the_build_watch_not_from_each_request(game_database, tmp_path):  # noqa: F811
    database = tmp_path / "textflix.db"
    shutil.copy(game_database.removeprefix("sqlite:///"), database)
    url = f"sqlite:///{database}"
    app = create_app(Settings(database_url=url, build_poll_s=3600))  # no refresh but the ones the test makes
    with TestClient(app) as client:
        assert app.state.build.state.corpus == GAME_CORPUS  # read at start-up
        review_id = client.get("/items/570.json").json()["reviews"][0]["id"]
        statements = []
        event.listen(database_engine(app), "before_cursor_execute", lambda *call: statements.append(call[2]))
        pages = ("/", "/items/570", f"/reviews/{review_id}", "/disagreements", "/api/items", "/api/items/570")
        for path in pages:
            assert client.get(path).status_code == 200, path
        assert statements and not [sql for sql in statements if "runs" in sql]
        assert '<a href="/items/570">' in client.get("/").text

        set_run(url, counts={**GAME_RUN["counts"], "corpus": IMDB_CORPUS})  # another build's record
        assert '<a href="/items/570">' in client.get("/").text  # the pages wait for the watch
        app.state.build.refresh(database_engine(app))
        assert app.state.build.state.corpus == IMDB_CORPUS
        assert '<a href="/movies/570">' in client.get("/").text
        assert client.get("/api/items/999").json()["detail"][0]["message"] == "There is no title '999' in the catalogue."
