"""The JSON API over HTTP, with real models trained here on a handful of real reviews.

A session fixture (``api_data_dir``, in conftest) trains NB-SVM on 60 real reviews and
fine-tunes the packaged MiniLM for one epoch on 8 (max length 64), next to the page-test
database (``web_fixtures``); a uvicorn server in a thread serves that app for the tests.
Bad input, auth and a missing model use their own small apps with ``TestClient``.

Over 400 lines: a test per behaviour of the JSON API, all over the one pair of trained models.
"""

import asyncio
import json
import shutil
import signal
import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from app.settings import Settings
from app.web.batching import MicroBatcher
from app.web.errors import ServerStopping
from app.web.main import create_app
from model.artifacts import update_meta
from model.bert import OFFSET, ONE_SENTENCE_READER, BertClassifier
from model.calibration import Calibration
from model.config import MINILM, BertConfig
from model.quality import QUALITY_FIELDS, fit_reading, is_weak
from tests.conftest import _short_train_reviews, serve_in_thread, serve_process
from tests.web_fixtures import (  # noqa: F401
    GAMES,
    FakeAnalyzer,
    build_web_database,
    explanation_figures,
    game_client,
    game_database,
    use_analyzer,
    web_app,
    web_client,
    web_database,
)

TITLE = "tt0100001"  # catalogue titles of the fixture database
OTHER_TITLE = "tt0100002"
CROWD_TITLE = "tt0100003"
TRAINING_ONLY_TITLE = "tt0100005"
REVIEW = (
    "I expected a dull remake. Instead the film is warm, funny and beautifully acted. "
    "The second half drags a little. Still, I loved it and would watch it again."
)
LIME_SAMPLES = 16


# --- fixtures -------------------------------------------------------------------------------


def api_settings(data_dir: Path, **changes) -> Settings:
    # room for the 200 explained reviews of test_200_concurrent_posts_store_200_reviews at once, from one
    # client address (as the fuzzing's requests): no per-client rate limit; writes without a token, as
    # `textflix up` on the loopback takes them
    values = dict(
        data_dir=data_dir, lime_samples=LIME_SAMPLES, api_token=None, batch_window_ms=5, device="cpu",
        max_work_in_flight=16_384, rate_limit="", allow_anonymous_writes=True,
    )  # fmt: skip
    return Settings(**{**values, **changes})


@pytest.fixture(scope="session")
def plain_dir(tmp_path_factory) -> Path:
    """A data dir with the fixture database and no models."""
    data_dir = tmp_path_factory.mktemp("plain-data")
    build_web_database(data_dir / "textflix.db")
    return data_dir


@pytest.fixture(scope="session")
def fake_app(plain_dir):
    """The app with the stand-in analyzer of the page tests: for input checks and auth, no models needed."""
    app = create_app(api_settings(plain_dir))
    use_analyzer(app, FakeAnalyzer())
    return app


@pytest.fixture(scope="session")
def api_app(api_data_dir):
    return create_app(api_settings(api_data_dir))


@pytest.fixture(scope="session")
def api_url(api_app):
    """The API app served by uvicorn on a free localhost port, in a thread (models load at start-up)."""
    with serve_in_thread(api_app) as url:
        yield url


@pytest.fixture
def client(api_url):
    with httpx.Client(base_url=api_url, timeout=120) as client:
        yield client


def db_path(data_dir: Path) -> Path:
    return data_dir / "textflix.db"


def query(db: Path, sql: str, *args):
    with sqlite3.connect(db) as connection:
        return connection.execute(sql, args).fetchall()


def error_fields(response) -> list[str | None]:
    assert response.headers["content-type"].startswith("application/json"), response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail, detail
    for item in detail:
        assert item["message"] and "field" in item
    return [item["field"] for item in detail]


def check_result(result: dict, text: str, explain: bool) -> None:
    assert set(result["predictions"]) == {"bert", "nbsvm"}
    for prediction in result["predictions"].values():
        assert 0.0 <= prediction["p_positive"] <= 1.0
        assert prediction["label"] == ("positive" if prediction["p_positive"] >= 0.5 else "negative")
    if not explain:
        assert "sentences" not in result
        return
    sentences = result["sentences"]
    assert sentences
    for sentence in sentences:
        assert text[sentence["start"] : sentence["end"]] == sentence["text"]
        assert set(sentence["weights"]) == {"bert", "nbsvm"}
        assert all(np.isfinite(w) for w in sentence["weights"].values())
    assert [s["start"] for s in sentences] == sorted(s["start"] for s in sentences)


# --- health ---------------------------------------------------------------------------------


def test_health_reports_models_device_and_database(client):
    health = client.get("/api/health").json()
    assert health["status"] == "ok" and health["database"] == "ok"
    assert health["models"] == {"nbsvm": True, "bert": True}
    assert health["device"].startswith("cpu")
    assert health["batching"] is True and health["batch_window_ms"] == 5


# --- POST /api/predict ----------------------------------------------------------------------


def test_predict_answers_one_result_per_text_in_order(client):
    texts = [
        REVIEW,
        "Awful. The worst film I have seen in years, boring and badly acted.",
        "A masterpiece: moving, clever and beautifully shot.",
    ]
    response = client.post("/api/predict", json={"texts": texts})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == len(texts)
    for text, result in zip(texts, results):
        check_result(result, text, explain=False)
    # in order: each text alone gets the same answer as in the batch
    for text, result in zip(texts, results):
        [alone] = client.post("/api/predict", json={"texts": [text]}).json()["results"]
        for model in ("bert", "nbsvm"):
            assert alone["predictions"][model]["p_positive"] == pytest.approx(
                result["predictions"][model]["p_positive"], abs=0.02
            )


def test_predict_with_explanations(client):
    texts = [REVIEW, "Just one sentence without an ending"]
    response = client.post("/api/predict", json={"texts": texts, "explain": True})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    for text, result in zip(texts, results):
        check_result(result, text, explain=True)
    assert len(results[0]["sentences"]) == 4 and len(results[1]["sentences"]) == 1
    assert results[0]["explanations"]["bert"]["samples"] == LIME_SAMPLES
    assert results[1]["explanations"]["bert"]["samples"] == 2  # one sentence: the text and the empty one
    for result in results:
        assert set(result["explanations"]) == {"bert", "nbsvm"}
        for explanation in result["explanations"].values():
            check_quality(explanation, sentences=len(result["sentences"]))


def check_quality(explanation: dict, sentences: int) -> None:
    """The trust figures of a live sentence explanation, in their ranges (POST /api/predict leaves out nulls)."""
    quality = explanation["quality"]
    assert set(quality) <= set(QUALITY_FIELDS) and quality["target"] == "log_odds"
    assert explanation["weak"] is is_weak(explanation["score"], quality)
    assert explanation["reading"] == fit_reading(explanation["score"])
    assert -1.0 <= quality.get("stability", 0.0) <= 1.0
    if sentences == 1:  # nothing to choose between: no stability, no faithfulness figures
        assert set(quality) == {"target"}
        return
    assert quality["top_k"] >= 1
    faithfulness = [name for name in QUALITY_FIELDS if "comprehensiveness" in name or "sufficiency" in name]
    assert {name for name in faithfulness if not name.startswith("normalised")} <= set(quality)
    for name in faithfulness:
        low = 0.0 if name.startswith("normalised") else -1.0
        assert low <= quality.get(name, low) <= 1.0, (name, quality[name])


def test_a_server_with_int8_bert_answers_as_the_float32_one(client, api_data_dir):
    """TEXTFLIX_CPU_INT8: the same API, BERT's linear layers in int8 (model.devices.int8_linears)."""
    texts = ["A wonderful, moving film with brilliant acting.", "Dull, slow and far too long. I hated it."]
    exact = client.post("/api/predict", json={"texts": texts}).json()["results"]
    with TestClient(create_app(api_settings(api_data_dir, cpu_int8=True))) as int8_client:
        health = int8_client.get("/api/health").json()
        response = int8_client.post("/api/predict", json={"texts": texts, "explain": True})
    assert all(health["models"].values())
    assert response.status_code == 200, response.text
    for ours, theirs in zip(response.json()["results"], exact, strict=True):
        assert ours["predictions"]["nbsvm"] == theirs["predictions"]["nbsvm"]
        p_int8, p_exact = ours["predictions"]["bert"]["p_positive"], theirs["predictions"]["bert"]["p_positive"]
        assert p_int8 == pytest.approx(p_exact, abs=0.1) and p_int8 != p_exact
        assert set(ours["explanations"]) == {"nbsvm", "bert"}


def test_a_server_with_a_sentence_pooled_bert_explains_it_exactly(tmp_path, api_data_dir, real_reviews):
    """--pooling sentences: BERT's sentence weights in the API are its sentences' own scores."""
    shutil.copytree(api_data_dir, tmp_path, dirs_exist_ok=True)
    shutil.rmtree(tmp_path / "models" / "bert")
    train = _short_train_reviews(real_reviews, 4)
    config = BertConfig(base_model=MINILM, epochs=1, batch_size=8, max_length=64, seed=0, pooling="sentences")
    bert = BertClassifier.train([r.text for r in train], [r.label for r in train], config, torch.device("cpu"), False)
    bert.save(tmp_path / "models" / "bert")
    with TestClient(create_app(api_settings(tmp_path, lime_samples=128))) as sentence_client:
        response = sentence_client.post("/api/predict", json={"texts": [REVIEW], "explain": True})
    assert response.status_code == 200, response.text
    result = response.json()["results"][0]
    explanation = result["explanations"]["bert"]
    check_quality(explanation, sentences=4)
    weights = [sentence["weights"]["bert"] for sentence in result["sentences"]]
    own = np.diff(bert.logits([sentence["text"] for sentence in result["sentences"]]), axis=1)[:, 0]
    assert np.corrcoef(weights, own)[0, 1] > 0.99, (weights, own, explanation["score"])
    assert explanation["score"] > 0.95 and explanation["quality"]["stability"] == pytest.approx(1.0)


def test_a_server_whose_bert_hands_one_sentence_texts_to_its_teacher_says_so_and_explains_each_by_its_reader(
    tmp_path, api_data_dir
):
    """--one-sentence-reader teacher: over HTTP, a text of one sentence is the teacher's to read and to
    explain, and a longer one the student's, its LIME texts read sentence by sentence."""
    shutil.copytree(api_data_dir, tmp_path, dirs_exist_ok=True)
    student = BertClassifier.load(tmp_path / "models" / "bert", torch.device("cpu"))
    assert student.reads_sentences
    teacher = BertClassifier.pretrained(BertConfig(base_model=MINILM, max_length=64, pooling="cls", seed=3), torch.device("cpu"))
    teacher.calibration = Calibration(offset=-2.0)  # an untrained head reads every text near even odds
    teacher.save(tmp_path / "models" / "teacher", {OFFSET: teacher.calibration.offset})
    update_meta(tmp_path / "models" / "bert", {ONE_SENTENCE_READER: "teacher"})
    one = "A wonderful, moving film with brilliant acting."
    with TestClient(create_app(api_settings(tmp_path, lime_samples=128))) as routed_client:
        response = routed_client.post("/api/predict", json={"texts": [one, REVIEW], "explain": True})
        pages = [routed_client.post("/analyze", data={"text": text}).text for text in (one, REVIEW)]
    assert response.status_code == 200, response.text
    note = "Read whole by the larger model BERT learnt from, as is every text of one sentence."
    assert pages[0].count(note) == 1 and note not in pages[1]
    alone, longer = response.json()["results"]
    assert alone["predictions"]["bert"]["read_by"] == "teacher" and longer["predictions"]["bert"]["read_by"] == "student"
    assert "read_by" not in alone["predictions"]["nbsvm"]
    p_teacher = teacher.predict_proba([one])[0, 1]
    assert alone["predictions"]["bert"]["p_positive"] == pytest.approx(p_teacher, abs=1e-4) and p_teacher < 0.2
    assert alone["sentences"][0]["weights"]["bert"] == pytest.approx(np.log(p_teacher / (1 - p_teacher)), abs=1e-3)
    assert longer["predictions"]["bert"]["p_positive"] == pytest.approx(student.predict_proba([REVIEW])[0, 1], abs=1e-4)
    explanation = longer["explanations"]["bert"]
    weights = [sentence["weights"]["bert"] for sentence in longer["sentences"]]
    own = np.diff(student.logits([sentence["text"] for sentence in longer["sentences"]]), axis=1)[:, 0]
    assert np.corrcoef(weights, own)[0, 1] > 0.99, (weights, own, explanation["score"])
    assert explanation["score"] > 0.95


def test_predict_stores_nothing(client, api_data_dir):
    before = query(db_path(api_data_dir), "SELECT COUNT(*) FROM reviews")
    assert client.post("/api/predict", json={"texts": ["Stored? No."], "explain": True}).status_code == 200
    assert query(db_path(api_data_dir), "SELECT COUNT(*) FROM reviews") == before


# --- POST /api/reviews ----------------------------------------------------------------------


def test_review_without_title_is_analysed_not_stored(client, api_data_dir):
    before = query(db_path(api_data_dir), "SELECT COUNT(*) FROM reviews")
    response = client.post("/api/reviews", json={"text": REVIEW, "label": "positive"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stored"] is False and body["id"] is None and body["url"] is None
    check_result(body, REVIEW, explain=True)
    assert all(p["correct"] == (p["label"] == "positive") for p in body["predictions"].values())
    assert query(db_path(api_data_dir), "SELECT COUNT(*) FROM reviews") == before


def test_stored_review_shows_on_its_title_page_and_in_its_statistics(client, api_data_dir):
    text = "Dreadful <b>plot</b> & wooden acting. I walked out after an hour. Avoid this one."
    before = client.get(f"/api/movies/{TITLE}").json()["summary"]
    response = client.post("/api/reviews", json={"text": text, "title_id": TITLE, "label": "negative"})
    assert response.status_code == 201, response.text
    body = response.json()
    review_id = body["id"]
    assert body["stored"] is True and body["url"] == f"/reviews/{review_id}"
    assert response.headers["location"] == f"/api/reviews/{review_id}" == body["api_url"]
    check_result(body, text, explain=True)

    # committed: straight from SQL
    [(split, source, key, label, stored_text)] = query(
        db_path(api_data_dir), "SELECT split, source, source_key, label, text FROM reviews WHERE id = ?", review_id
    )
    assert (split, source, key, label, stored_text) == ("catalogue", "user", None, "negative", text)
    sentences = len(body["sentences"])
    assert query(db_path(api_data_dir), "SELECT COUNT(*) FROM sentences WHERE review_id = ?", review_id) == [(sentences,)]
    weights = query(
        db_path(api_data_dir),
        "SELECT COUNT(*) FROM sentence_weights w JOIN sentences s ON s.id = w.sentence_id WHERE s.review_id = ?",
        review_id,
    )
    assert weights == [(2 * sentences,)]
    assert query(
        db_path(api_data_dir), "SELECT model, level, samples FROM explanations WHERE review_id = ? ORDER BY model", review_id
    ) == [("bert", "sentence", LIME_SAMPLES), ("nbsvm", "sentence", LIME_SAMPLES)]

    # the API's own view of it
    stored = client.get(f"/api/reviews/{review_id}").json()
    assert stored["review"]["text"] == text and stored["review"]["gold"] is None  # a writer's label is no gold label
    assert stored["review"]["user_label"] == "negative"
    assert stored["review"]["source"] == "user"
    for model in ("bert", "nbsvm"):
        assert stored["review"]["predictions"][model]["p_positive"] == pytest.approx(
            body["predictions"][model]["p_positive"]
        )
    for mine, theirs in zip(stored["review"]["sentences"], body["sentences"], strict=True):
        assert (mine["start"], mine["end"], mine["text"]) == (theirs["start"], theirs["end"], theirs["text"])
        assert mine["weights"] == pytest.approx(theirs["weights"])

    # the title's statistics and page
    after = client.get(f"/api/movies/{TITLE}", params={"per_page": 100}).json()
    assert after["summary"]["reviews"] == before["reviews"] + 1
    bert = after["summary"]["models"]["bert"]
    # a writer's label is shown apart, never counted in the accuracy figures
    assert bert["labeled"] == before["models"]["bert"]["labeled"]
    assert bert["user_labeled"] == before["models"]["bert"]["user_labeled"] + 1
    assert review_id in [r["id"] for r in after["reviews"]]
    html = client.get(f"/movies/{TITLE}", params={"analyze": 1}).text
    assert "Dreadful &lt;b&gt;plot&lt;/b&gt; &amp; wooden acting." in html
    assert f"/reviews/{review_id}" in html
    page = client.get(f"/reviews/{review_id}", params={"analyze": 1})
    assert page.status_code == 200 and "I walked out after an hour." in page.text

    # the export, with the figures it was answered with
    exported = [json.loads(line) for line in client.get("/api/export.jsonl").text.splitlines()]
    [row] = [row for row in exported if row["id"] == review_id]
    assert (row["source"], row["gold"], row["user_label"], row["text"]) == ("user", None, "negative", text)
    # as stored: the explanation without the answer's "what if" (exact shares and flips are not stored)
    answered = {model: {k: v for k, v in e.items() if k not in {"exact", "start", "log_odds", "flip"}} for model, e in body["explanations"].items()}
    assert row["explanations"] == answered


def test_the_analyze_page_uses_the_same_analyzer(client):
    response = client.post("/analyze.json", json={"text": REVIEW})
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert set(result["predictions"]) == {"bert", "nbsvm"}
    assert [s["text"] for s in result["sentences"]][0] == "I expected a dull remake."
    html = client.post("/analyze", data={"text": REVIEW})
    assert html.status_code == 200 and "I expected a dull remake." in html.text


def test_the_analyze_page_shows_what_a_sentence_weight_is_counted_from(client):
    """A one-sentence text's weight and its model's starting point (the empty text's log-odds) add
    up to the prediction's log-odds: NB-SVM, which reads the empty text as more positive than not,
    can weigh a sentence negative in a text it calls positive, and the page says why."""
    text = "Two hours of my life I will never get back."
    result = client.post("/analyze.json", json={"text": text}).json()["result"]
    [sentence] = result["sentences"]
    for model in ("bert", "nbsvm"):
        p = result["predictions"][model]["p_positive"]
        assert sentence["weights"][model] + result["intercepts"][model] == pytest.approx(np.log(p / (1 - p)), abs=1e-3)
    html = client.post("/analyze", data={"text": text}).text
    assert "Starting point: the fit with every sentence removed" in html


# --- GET endpoints --------------------------------------------------------------------------


def test_movies_sorted_and_paginated_as_on_the_dashboard(client):
    dashboard = client.get("/index.json", params={"analyze": 1, "accuracy": 1, "sort": "title"}).json()
    expected = [card["title_id"] for card in dashboard["titles"]]
    first = client.get("/api/movies", params={"sort": "title", "per_page": 2}).json()
    second = client.get("/api/movies", params={"sort": "title", "per_page": 2, "page": 2}).json()
    assert first["pagination"] == {"page": 1, "per_page": 2, "total": len(expected), "pages": (len(expected) + 1) // 2}
    assert [c["title_id"] for c in first["titles"] + second["titles"]] == expected[:4]
    assert first["summary"]["reviews"] == dashboard["summary"]["reviews"]
    card = first["titles"][0]
    assert {"title", "reviews", "models"} <= set(card) and {"bert", "nbsvm"} == set(card["models"])
    beyond = client.get("/api/movies", params={"page": 99}).json()
    assert beyond["titles"] == [] and beyond["pagination"]["total"] == len(expected)
    negative = client.get("/api/movies", params={"sort": "negative"}).json()["titles"]
    shares = [c["models"]["bert"]["positive_share"] for c in negative]
    assert shares == sorted(shares)


def test_movie_detail_with_paginated_reviews(client):
    full = client.get(f"/api/movies/{OTHER_TITLE}", params={"per_page": 100}).json()
    assert full["movie"]["title"] == "Rocket Summer"
    assert {"bert", "nbsvm"} == set(full["summary"]["models"])
    total = full["pagination"]["total"]
    assert total == full["summary"]["reviews"] == len(full["reviews"])
    pages = [client.get(f"/api/movies/{OTHER_TITLE}", params={"per_page": 1, "page": n}).json() for n in (1, 2)]
    assert [p["reviews"][0]["id"] for p in pages] == [r["id"] for r in full["reviews"][:2]]
    review = full["reviews"][0]
    assert review["sentences"] and set(review["predictions"]) == {"bert", "nbsvm"}


def test_review_detail(client):
    review = client.get(f"/api/movies/{TITLE}").json()["reviews"][0]
    detail = client.get(f"/api/reviews/{review['id']}").json()
    assert detail["review"]["text"] == review["text"]
    assert detail["review"]["gold"] in ("positive", "negative")
    assert detail["movie"]["title_id"] == TITLE and detail["url"] == f"/reviews/{review['id']}"
    sentence = detail["review"]["sentences"][0]
    assert detail["review"]["text"][sentence["start"] : sentence["end"]] == sentence["text"]
    assert set(sentence["weights"]) == {"bert", "nbsvm"}
    assert detail["words"] and {e["model"] for e in detail["explanations"]} == {"bert", "nbsvm"}


def test_review_detail_carries_the_trust_figures(client):
    detail = client.get("/api/reviews/1").json()  # the fixture's first review: BERT's explanation is weak
    explanations = {e["model"]: e for e in detail["explanations"] if e["level"] == "sentence"}
    assert set(explanations) == {"bert", "nbsvm"}
    for model, explanation in explanations.items():
        figures = explanation_figures(0, model)
        assert explanation["score"] == figures["score"]
        assert explanation["quality"] == {name: figures[name] for name in QUALITY_FIELDS}
        assert explanation["reading"] == fit_reading(figures["score"])
    assert explanations["bert"]["weak"] is True and explanations["nbsvm"]["weak"] is False


def test_the_items_routes_answer_as_the_movies_routes_field_for_field(game_client, web_client):
    for client, item in ((game_client, "570"), (web_client, TITLE)):
        for query in ("", "?sort=title&per_page=2&page=2", "?q=2"):
            assert client.get(f"/api/items{query}").json() == client.get(f"/api/movies{query}").json()
        for query in ("", "?per_page=1&page=2&wrong=true"):
            assert client.get(f"/api/items/{item}{query}").json() == client.get(f"/api/movies/{item}{query}").json()
    games, movies = game_client.get("/api/items/570").json(), web_client.get(f"/api/movies/{TITLE}").json()
    assert set(games) == set(movies) and set(games["movie"]) == set(movies["movie"])
    assert (games["movie"]["title"], games["movie"]["year"], games["movie"]["genres"]) == ("Dota 2", None, [])
    game_card = game_client.get("/api/items").json()["titles"][0]
    assert set(game_card) == set(web_client.get("/api/movies").json()["titles"][0])


def test_an_item_id_of_any_character_reaches_its_item_and_an_unknown_one_is_named_by_the_noun(game_client):
    odd = GAMES["tt0100003"]["title_id"]
    for route in ("items", "movies"):
        response = game_client.get(f"/api/{route}/{quote(odd, safe='')}")
        assert response.status_code == 200 and response.json()["movie"]["title_id"] == odd
    for path in ("/api/items/999", "/api/items/..%2F..%2Fhealth", f"/api/items/{'5' * 65}"):
        [problem] = game_client.get(path).json()["detail"]
        assert problem["field"] == "title_id"
    [problem] = game_client.get("/api/items/999").json()["detail"]
    assert problem["message"] == "There is no game '999' in the catalogue."
    assert game_client.get("/api/movies/999").status_code == 404


@pytest.mark.parametrize(
    ("path", "status", "field"),
    [
        ("/api/movies/tt9999999", 404, "title_id"),
        (f"/api/movies/{TRAINING_ONLY_TITLE}", 404, "title_id"),
        ("/api/reviews/999999", 404, "review_id"),
        ("/api/reviews/0", 422, "review_id"),
        ("/api/reviews/abc", 422, "review_id"),
        (f"/api/reviews/{10**30}", 422, "review_id"),
        ("/api/movies?sort=bogus", 422, "sort"),
        ("/api/movies?page=0", 422, "page"),
        ("/api/movies?per_page=1000", 422, "per_page"),
        ("/api/movies?per_page=two", 422, "per_page"),
        ("/api/nothing-here", 404, None),
    ],
)
def test_unknown_ids_and_bad_parameters(client, path, status, field):
    response = client.get(path)
    assert response.status_code == status, response.text
    assert error_fields(response) == [field]


def test_a_training_review_is_not_in_the_catalogue(client, api_data_dir):
    [(hidden,)] = query(db_path(api_data_dir), "SELECT id FROM reviews WHERE split = 'train' LIMIT 1")
    response = client.get(f"/api/reviews/{hidden}")
    assert response.status_code == 404 and error_fields(response) == ["review_id"]


# --- bad input ------------------------------------------------------------------------------

LONG = "x" * 20_001
BAD_BODIES = [
    # (path, body, status, field, limit)
    ("/api/predict", {"texts": [""]}, 422, "texts[0]", 1),
    ("/api/predict", {"texts": ["fine", " \n\t "]}, 422, "texts[1]", 1),
    ("/api/predict", {"texts": ["fine", "\u200b \ufeff\u2060"], "explain": True}, 422, "texts[1]", 1),
    ("/api/predict", {"texts": ["fine", LONG]}, 422, "texts[1]", 20_000),
    ("/api/predict", {"texts": ["a"] * 65}, 422, "texts", 64),
    ("/api/predict", {"texts": []}, 422, "texts", 1),
    ("/api/predict", {"texts": "one text"}, 422, "texts", None),
    ("/api/predict", {"texts": ["fine", 5]}, 422, "texts[1]", None),
    ("/api/predict", {"texts": ["fine"], "explain": "yes"}, 422, "explain", None),
    ("/api/predict", {"texts": ["fine"], "explian": True}, 422, "explian", None),
    ("/api/predict", {}, 422, "texts", None),
    ("/api/predict", ["fine"], 422, "body", None),
    ("/api/reviews", {"text": ""}, 422, "text", 1),
    ("/api/reviews", {"text": "   "}, 422, "text", 1),
    ("/api/reviews", {"text": LONG}, 422, "text", 20_000),
    ("/api/reviews", {"text": 42}, 422, "text", None),
    ("/api/reviews", {"text": "fine", "label": "meh"}, 422, "label", None),
    ("/api/reviews", {"text": "fine", "title_id": "tt9999999"}, 422, "title_id", None),
    ("/api/reviews", {"text": "fine", "title_id": TRAINING_ONLY_TITLE}, 422, "title_id", None),
    ("/api/reviews", {"text": "fine", "title_id": "t" * 65}, 422, "title_id", 64),
    ("/api/reviews", {"text": "fine", "title_id": 7}, 422, "title_id", None),
]


@pytest.mark.parametrize(("path", "body", "status", "field", "limit"), BAD_BODIES)
def test_bad_input_gets_a_4xx_naming_the_field_and_limit(client, api_data_dir, path, body, status, field, limit):
    before = query(db_path(api_data_dir), "SELECT COUNT(*) FROM reviews")
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    assert field in error_fields(response)
    item = next(i for i in response.json()["detail"] if i["field"] == field)
    if limit is not None:
        assert item["limit"] == limit
        assert f"{limit:,}" in item["message"] or str(limit) in item["message"]
    assert query(db_path(api_data_dir), "SELECT COUNT(*) FROM reviews") == before


@pytest.mark.parametrize(
    ("content", "headers", "status", "field"),
    [
        (b'{"texts": ["fine"', {"Content-Type": "application/json"}, 422, "body"),
        (b"", {"Content-Type": "application/json"}, 422, "body"),
        (b'{"texts": ["\\ud800"]}', {"Content-Type": "application/json"}, 422, "texts[0]"),
        (b'{"texts": ["caf\xe9"]}', {"Content-Type": "application/json"}, 400, "body"),
        (b'{"texts": ["fine"]}', {"Content-Type": "text/plain"}, 415, "Content-Type"),
        (b"texts=fine", {"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type"),
        (b'{"texts": ["fine"]}', {}, 415, "Content-Type"),
        (b'{"texts": ["fine"]}', {"Content-Type": "application/json", "Content-Length": "abc"}, 400, "Content-Length"),
    ],
    ids=["truncated-json", "empty-body", "lone-surrogate", "latin-1", "text-plain", "form", "no-content-type", "bad-length"],
)
def test_malformed_requests(fake_app, content, headers, status, field):
    with TestClient(fake_app) as test_client:
        response = test_client.post("/api/predict", content=content, headers=headers)
    assert response.status_code == status, response.text
    assert error_fields(response) == [field]


def test_body_over_the_size_limit(client):
    limit = Settings().max_body_bytes
    big = json.dumps({"texts": ["word " * 1000] * (limit // 5000 + 10)}).encode()
    assert len(big) > limit
    response = client.post("/api/predict", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and error_fields(response) == ["body"]
    assert response.json()["detail"][0]["limit"] == limit

    def chunks():  # no Content-Length: the limit holds on the streamed body too
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    response = client.post("/api/predict", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and error_fields(response) == ["body"]


def test_limits_come_from_the_settings(plain_dir):
    settings = api_settings(plain_dir, max_text_chars=10, max_texts=2, max_body_bytes=2048)
    app = create_app(settings)
    use_analyzer(app, FakeAnalyzer())
    with TestClient(app) as test_client:
        assert test_client.post("/api/predict", json={"texts": ["0123456789"]}).status_code == 200
        response = test_client.post("/api/predict", json={"texts": ["0123456789X"]})
        assert response.status_code == 422 and response.json()["detail"][0]["limit"] == 10
        response = test_client.post("/api/predict", json={"texts": ["a", "b", "c"]})
        assert response.status_code == 422 and response.json()["detail"][0]["limit"] == 2
        response = test_client.post("/api/reviews", json={"text": "y" * 3000})
        assert response.status_code == 413 and response.json()["detail"][0]["limit"] == 2048
        schema = test_client.get("/openapi.json").json()["components"]["schemas"]
        assert schema["PredictRequest"]["properties"]["texts"]["maxItems"] == 2
        assert schema["ReviewRequest"]["properties"]["text"]["maxLength"] == 10


# --- auth -----------------------------------------------------------------------------------


@pytest.fixture
def token_client(plain_dir):
    app = create_app(api_settings(plain_dir, api_token="s3cret-token"))
    analyzer = use_analyzer(app, FakeAnalyzer())
    with TestClient(app) as test_client:
        yield test_client, analyzer


def test_a_token_is_needed_on_every_post(token_client):
    test_client, analyzer = token_client
    body = {"texts": ["A great film."]}
    for path, payload in (("/api/predict", body), ("/api/reviews", {"text": "A great film."})):
        response = test_client.post(path, json=payload)
        assert response.status_code == 401 and error_fields(response) == ["Authorization"]
        assert response.headers["www-authenticate"] == "Bearer"
        response = test_client.post(path, json=payload, headers={"Authorization": "Basic czNjcmV0"})
        assert response.status_code == 401
        response = test_client.post(path, json=payload, headers={"Authorization": "Bearer s3cret-tokeN"})
        assert response.status_code == 403 and error_fields(response) == ["Authorization"]
        response = test_client.post(path, json=payload, headers={"Authorization": "Bearer s3cret-token-and-more"})
        assert response.status_code == 403
    # the token is checked before the body is even read
    response = test_client.post("/api/predict", content=b"{not json", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 403
    assert analyzer.calls == []
    response = test_client.post("/api/predict", json=body, headers={"Authorization": "Bearer s3cret-token"})
    assert response.status_code == 200 and len(response.json()["results"]) == 1
    response = test_client.post("/api/predict", json=body, headers={"authorization": "bearer s3cret-token"})
    assert response.status_code == 200
    # reading needs no token
    assert test_client.get("/api/movies").status_code == 200
    assert test_client.get("/api/health").status_code == 200


def test_token_check_is_constant_time(monkeypatch, plain_dir):
    import hmac

    from app.web import guard

    seen, original = [], hmac.compare_digest
    monkeypatch.setattr(guard.hmac, "compare_digest", lambda a, b: seen.append((a, b)) or original(a, b))
    app = create_app(api_settings(plain_dir, api_token="s3cret-token"))
    use_analyzer(app, FakeAnalyzer())
    with TestClient(app) as test_client:
        test_client.post("/api/predict", json={"texts": ["x"]}, headers={"Authorization": "Bearer guess"})
    assert seen == [(b"guess", b"s3cret-token")]


# --- models missing -------------------------------------------------------------------------


def test_missing_models_give_503_and_the_pages_still_serve(tmp_path):
    url = build_web_database(tmp_path / "textflix.db")
    app = create_app(Settings(data_dir=tmp_path, database_url=url, api_token=None))
    with TestClient(app) as test_client:
        for path, body in (("/api/predict", {"texts": ["A fine film."]}), ("/api/reviews", {"text": "A fine film."})):
            response = test_client.post(path, json=body)
            assert response.status_code == 503
            assert "textflix build" in response.json()["detail"][0]["message"]
        health = test_client.get("/api/health").json()
        assert health["status"] == "degraded" and health["models"] == {"nbsvm": False, "bert": False}
        assert "textflix build" in health["models_problem"] and health["database"] == "ok"
        assert test_client.get("/").status_code == 200
        assert test_client.get("/movies/tt0100001?analyze=1").status_code == 200
        assert test_client.get("/api/movies").status_code == 200
        assert test_client.post("/analyze", data={"text": "A fine film."}).status_code == 503


def test_missing_database_gives_503_on_reads(tmp_path):
    app = create_app(Settings(data_dir=tmp_path, api_token=None))
    with TestClient(app) as test_client:
        response = test_client.get("/api/movies")
        assert response.status_code == 503 and "textflix build" in response.json()["detail"][0]["message"]
        assert test_client.get("/api/reviews/1").status_code == 503
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")  # there, but no tables
    app = create_app(Settings(data_dir=tmp_path, database_url=f"sqlite:///{empty}", api_token=None))
    with TestClient(app) as test_client:
        response = test_client.get("/api/movies")
        assert response.status_code == 503 and error_fields(response) == [None]
        assert "cannot be read" in response.json()["detail"][0]["message"]
        assert str(tmp_path) not in response.text and "sqlite" not in response.text  # its path is in the log only
        assert test_client.get("/api/health").json()["database"] == "unavailable"


# --- batching and concurrency ---------------------------------------------------------------


def test_micro_batcher_merges_concurrent_calls_and_never_blocks_the_loop():
    def run(window_s: float) -> tuple[list[int], list[np.ndarray], int]:
        sizes = []

        def model(texts):
            time.sleep(0.05)  # a slow model, in the worker thread
            sizes.append(len(texts))
            return np.array([[1 - len(t) / 100, len(t) / 100] for t in texts])

        batcher = MicroBatcher("fake", model, window_s, max_texts=1000)

        async def main():
            ticks = 0

            async def heartbeat():
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.005)
                    ticks += 1

            beat = asyncio.create_task(heartbeat())
            results = await asyncio.gather(*(batcher(["x" * i, "same"]) for i in range(1, 17)))
            beat.cancel()
            await batcher.stop()
            return results, ticks

        results, ticks = asyncio.run(main())
        return sizes, results, ticks

    sizes, results, ticks = run(0.01)
    assert sum(sizes) < 16 * 2 and len(sizes) <= 2  # merged and deduplicated ("same")
    for i, probs in enumerate(results, start=1):
        assert probs[:, 1].tolist() == pytest.approx([i / 100, 0.04])
    assert ticks >= 10  # the event loop kept running while the model worked
    sizes, results, _ = run(0.0)  # batching off: one model call per request
    assert sizes == [2] * 16


def test_a_full_batch_goes_to_the_model_without_waiting_out_the_window():
    sizes = []

    def model(texts):
        time.sleep(0.01)
        sizes.append(len(texts))
        return np.zeros((len(texts), 2))

    async def main():
        batcher = MicroBatcher("fake", model, window_s=1.0, max_texts=4)
        started = time.perf_counter()
        await asyncio.gather(*(batcher([f"text {i}"]) for i in range(16)))
        elapsed = time.perf_counter() - started
        await batcher.stop()
        return elapsed

    elapsed = asyncio.run(main())
    assert sizes == [4, 4, 4, 4]  # overlapping calls, batched
    assert elapsed < 0.9  # each batch was full at once: no 1-second window was waited out


def test_a_batch_of_texts_and_texts_given_as_sentences_makes_one_model_call_per_kind():
    """The caller says what it hands over by the method it calls: texts go to ``predict_proba``, texts
    given as their sentences to ``proba_of_sentences``, each kind deduplicated in one call of its own."""
    calls = []

    def read(kind):
        def model(texts):
            calls.append((kind, list(texts)))
            return np.array([[0.0, sum(map(len, t)) / 100 if kind == "sentences" else len(t) / 100] for t in texts])

        return model

    async def main():
        batcher = MicroBatcher("fake", read("texts"), 0.05, max_texts=1000, proba_of_sentences=read("sentences"))
        found = await asyncio.gather(
            batcher(["abc", "a b"]), batcher.sentences([["a", "b"], ()]), batcher.sentences([("a", "b")]), batcher(["abc"])
        )
        plain = MicroBatcher("nbsvm", read("texts"), 0.0, max_texts=1000)
        with pytest.raises(TypeError, match="nbsvm reads texts, not sentences"):
            await plain.sentences([["a"]])
        await batcher.stop()
        await plain.stop()
        return found

    texts, given, again, same = (p[:, 1].tolist() for p in asyncio.run(main()))
    assert texts == [0.03, 0.03] and given == [0.02, 0.0] and again == [0.02] and same == [0.03]
    assert sorted(calls) == [("sentences", [("a", "b"), ()]), ("texts", ["abc", "a b"])]


def test_inference_threads_sets_the_torch_threads_of_the_loaded_models(api_data_dir):
    import torch

    from app.web.analysis import load_analyzer

    default = torch.get_num_threads()
    try:
        analyzer = load_analyzer(api_settings(api_data_dir, inference_threads=1))
        assert analyzer.problem is None and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(default)


def test_a_failing_text_fails_only_its_own_request_and_stop_releases_waiters():
    def model(texts):
        if any("boom" in t for t in texts):
            raise ValueError("boom")
        return np.array([[0.5, 0.5]] * len(texts))

    async def main():
        batcher = MicroBatcher("fake", model, 0.01, max_texts=1000)
        results = await asyncio.gather(
            batcher(["fine"]), batcher(["boom"]), batcher(["also fine", "fine"]), return_exceptions=True
        )
        await batcher.stop()

        slow = MicroBatcher("slow", lambda texts: time.sleep(0.3) or np.zeros((len(texts), 2)), 0.0, 1000)
        waiting = [asyncio.ensure_future(slow([f"text {i}"])) for i in range(3)]
        await asyncio.sleep(0.1)
        await slow.stop()
        stopped = await asyncio.gather(*waiting, return_exceptions=True)
        return results, stopped

    results, stopped = asyncio.run(main())
    assert isinstance(results[1], ValueError)
    assert results[0].shape == (1, 2) and results[2].shape == (2, 2)
    assert all(isinstance(r, ServerStopping) and r.status == 503 for r in stopped)


def test_200_concurrent_posts_store_200_reviews(api_url, api_app, api_data_dir):
    db = db_path(api_data_dir)
    [(before,)] = query(db, "SELECT COUNT(*) FROM reviews WHERE title_id = ?", CROWD_TITLE)
    calls_before = api_app.state.analyzer.batchers["bert"].calls

    async def main():
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(base_url=api_url, timeout=300, limits=limits) as http:
            posts = [
                http.post(
                    "/api/reviews",
                    json={
                        "text": f"Review {i}: the plot was {'great' if i % 2 else 'awful'}. I {'loved' if i % 2 else 'hated'} it.",
                        "title_id": CROWD_TITLE,
                        "label": "positive" if i % 2 else "negative",
                    },
                )
                for i in range(200)
            ]
            return await asyncio.gather(*posts)

    responses = asyncio.run(main())
    assert [r.status_code for r in responses] == [201] * 200, {r.status_code: r.text for r in responses}
    ids = [r.json()["id"] for r in responses]
    assert len(set(ids)) == 200
    [(after,)] = query(db, "SELECT COUNT(*) FROM reviews WHERE title_id = ?", CROWD_TITLE)
    assert after == before + 200
    [(explained,)] = query(
        db, f"SELECT COUNT(DISTINCT review_id) FROM explanations WHERE review_id IN ({','.join(map(str, ids))})"
    )
    assert explained == 200
    # each review needs two BERT calls (its text, then LIME's samples): 400 unbatched, far fewer batched
    assert api_app.state.analyzer.batchers["bert"].calls - calls_before < 200
    assert client_count_on_page(api_url, CROWD_TITLE) == after


def client_count_on_page(api_url: str, title_id: str) -> int:
    return httpx.get(f"{api_url}/api/movies/{title_id}", timeout=60).json()["summary"]["reviews"]


def test_a_stored_review_survives_a_crash_right_after_the_201(api_data_dir, tmp_path):
    url = build_web_database(tmp_path / "crash.db")
    text = "Saved before the answer. Then the server died."
    with serve_process(api_data_dir, url, tmp_path / "serve.log", env={"TEXTFLIX_LIME_SAMPLES": "8", "TEXTFLIX_ALLOW_ANONYMOUS_WRITES": "1"}) as server:
        response = httpx.post(f"{server.url}/api/reviews", json={"text": text, "title_id": TITLE}, timeout=60)
        server.process.send_signal(signal.SIGKILL)  # as abrupt as a power cut, right after the 201
        server.process.wait(10)
    assert response.status_code == 201
    review_id = response.json()["id"]
    stored = query(tmp_path / "crash.db", "SELECT text, source FROM reviews WHERE id = ?", review_id)
    assert stored == [(text, "user")]
    assert query(tmp_path / "crash.db", "SELECT COUNT(*) FROM explanations WHERE review_id = ?", review_id) == [(2,)]


# --- the OpenAPI schema, property-based -----------------------------------------------------

FUZZ_EXAMPLES = 25  # per operation and mode (schema-conforming, then schema-violating data)


def test_openapi_schema_fuzzing_finds_no_server_error(api_url):
    """Schemathesis generates requests from /openapi.json, valid and invalid; none may get a 5xx
    or an answer that does not match the documented schema."""
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import response_schema_conformance

    schema = schemathesis.openapi.from_url(f"{api_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.label for op in operations} >= {
        "GET /api/movies", "GET /api/movies/{title_id}", "GET /api/reviews/{review_id}",
        "POST /api/reviews", "POST /api/predict", "GET /api/health", "GET /api/metrics",
    }  # fmt: skip
    calls = 0
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=FUZZ_EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case):
                nonlocal calls
                calls += 1
                case.call_and_validate(checks=[not_a_server_error, response_schema_conformance], timeout=120)

            try:
                check()
            except Unsatisfiable:  # nothing can violate an operation without inputs (GET /api/health)
                assert mode == GenerationMode.NEGATIVE, operation.label
    assert calls >= len(operations) * 2
