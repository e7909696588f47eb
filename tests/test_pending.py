"""The site while the build goes on (``textflix up``): each page, JSON twin and API answer in each state.

The states, each a run record on the fixture database (``tests.web_fixtures``): NB-SVM ready and BERT
learning (``PENDING_RUN``), nothing ready yet, a model's predictions in and its explain step half done
(``build_half_explained_database``), the build failed, the build's process gone, and BERT made ready
while the server runs. The analyzer is the server's own (``ReadyAnalyzer``) over stand-in models that
score cue words; ``test_a_real_build_up_to_nbsvm`` serves a real tiny build instead.
"""

import sqlite3

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

from app.settings import Settings
from app.web.deps import database_engine
from app.web.main import create_app
from app.web.ready_analyzer import ReadyAnalyzer
from tests.web_fixtures import (
    PENDING_RUN,
    RUN,
    build_half_explained_database,
    build_web_database,
    set_run,
    stand_in_models,
)

LINE = (
    "BERT is still learning from the 500 reviews — teacher's labels 47 %, about 12 minutes left on this machine; "
    "the pages show NB-SVM's reading."
)
PENDING_BERT = {"pending": True, "step": "pseudo_label", "eta_s": 720.0}
TEXT = "A great cast. The plot was boring. I loved the ending."


def serve(url: str) -> TestClient:
    """A client of the app over ``url``, its ``ReadyAnalyzer`` loading stand-in models."""
    values = dict(database_url=url, lime_samples=16, batch_window_ms=2, build_poll_s=3600, allow_anonymous_writes=True)
    app_settings = Settings(**values)
    app = create_app(app_settings)
    app.state.analyzer = ReadyAnalyzer(
        app_settings, app.state.build, lambda: database_engine(app), app.state.write_lock, stand_in_models
    )
    return TestClient(app, base_url="http://localhost")  # anonymous writes name this machine


def database(tmp_path, run: dict, models=("nbsvm",)) -> str:
    return build_web_database(tmp_path / "textflix.db", run, models)


def rows(url: str, sql: str, *args) -> list:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        return connection.execute(sql, args).fetchall()


@pytest.fixture
def pending(tmp_path):
    url = database(tmp_path, PENDING_RUN)
    with serve(url) as client:
        yield client, url


def test_pages_show_nbsvm_and_say_bert_is_learning(pending):
    client, _ = pending
    page = client.get("/?analyze=1")
    assert page.status_code == 200
    assert f'<p class="pending-line" id="pending-line" role="status" data-live data-ready="nbsvm">{escape(LINE)}</p>' in page.text
    assert 'data-model="nbsvm"' in page.text and 'data-model="bert"' not in page.text
    data = client.get("/index.json?analyze=1").json()
    assert data["view"]["models"] == ["nbsvm"] and data["view"]["pending"] == ["bert"]
    assert data["build"] == {
        "ready": ["nbsvm"], "explained": ["nbsvm"], "pending": {"bert": PENDING_BERT}, "explaining": {}, "line": LINE
    }
    assert data["summary"]["models"]["nbsvm"]["scored"] == data["summary"]["reviews"] == 13
    title = client.get("/movies/tt0100001?analyze=1&accuracy=1")
    assert escape(LINE) in title.text and "Pending" not in title.text and "accuracy" in title.text
    assert client.get("/movies/tt0100001.json?analyze=1").json()["reviews"][0]["predictions"].keys() == {"nbsvm"}


def test_analyze_off_is_the_catalogue_without_the_line(pending):
    client, _ = pending
    for path in ("/", "/movies/tt0100001", "/reviews/1", "/?q=rocket"):
        answer = client.get(path)
        assert answer.status_code == 200 and "pending-line" not in answer.text, path
    assert "build" not in client.get("/index.json").json()


def test_comparison_shows_bert_pending(pending):
    client, _ = pending
    for path in ("/movies/tt0100001?analyze=1&compare=1", "/reviews/1?analyze=1"):
        page = client.get(path)
        assert page.status_code == 200
        assert '<section class="model-col is-pending" data-model="bert"' in page.text, path
        assert "Pending: the build has not finished BERT yet" in page.text
    disagreements = client.get("/disagreements")
    assert disagreements.status_code == 200 and escape(LINE) in disagreements.text


def test_about_shows_the_build_step_by_step(pending):
    client, _ = pending
    page = client.get("/about")
    assert page.status_code == 200
    assert '<span class="step-name">explain_nbsvm</span> <span class="step-said">done in 1 min 4 s</span>' in page.text
    assert (
        '<li class="step is-running"><span class="step-name">pseudo_label</span> <span class="step-said">the teacher '
        "is labelling unlabeled reviews: 47 of 100 texts (47 %), about 5 minutes left</span>"
    ) in page.text
    assert '<li class="step is-to-come"><span class="step-name">explain_bert</span>' in page.text
    steps = client.get("/about.json").json()["build_steps"]
    assert [s["state"] for s in steps] == ["done"] * 5 + ["running"] + ["to come"] * 7


def test_the_api_answers_with_nbsvm_and_marks_bert_pending(pending):
    client, _ = pending
    [result] = client.post("/api/predict", json={"texts": [TEXT]}).json()["results"]
    assert result["predictions"]["bert"] == PENDING_BERT
    assert result["predictions"]["nbsvm"]["label"] == "positive"
    [explained] = client.post("/api/predict", json={"texts": [TEXT], "explain": True}).json()["results"]
    assert explained["explanations"]["bert"] == PENDING_BERT and explained["explanations"]["nbsvm"]["samples"] == 16
    assert [set(s["weights"]) for s in explained["sentences"]] == [{"nbsvm"}] * 3  # null, left out as all nulls are
    page = client.post("/analyze", data={"text": TEXT})
    assert page.status_code == 200 and escape(LINE) in page.text and "Pending: the build has not finished BERT yet" in page.text
    health = client.get("/api/health").json()
    assert health["models"] == {"nbsvm": True, "bert": False} and health["models_problem"] == LINE


def test_words_asked_while_bert_is_pending_are_absent_and_a_reviews_are_refused_saying_why(pending):
    client, url = pending
    [explained] = client.post("/api/predict", json={"texts": [TEXT], "explain": True, "words": True}).json()["results"]
    assert explained["explanations"]["bert"] == PENDING_BERT and all("words" not in s for s in explained["sentences"])
    refused = client.post("/api/reviews/1/words", json={})
    assert refused.status_code == 503 and "BERT is not loaded (the build is at its pseudo_label step)" in refused.text
    assert rows(url, "SELECT COUNT(*) FROM word_shares") == [(0,)]


def test_a_review_stored_while_bert_is_pending_gets_bert_once_it_is_ready(pending):
    client, url = pending
    answer = client.post("/api/reviews", json={"text": TEXT, "title_id": "tt0100002", "label": "positive"})
    assert answer.status_code == 201, answer.text
    stored = answer.json()
    assert stored["predictions"]["bert"] == PENDING_BERT and stored["predictions"]["nbsvm"]["correct"] is True
    review = stored["id"]
    assert rows(url, "SELECT model FROM predictions WHERE review_id = ?", review) == [("nbsvm",)]
    # the build finishes BERT's steps (which read their list of reviews before this one was stored)
    set_run(url, steps={**PENDING_RUN["steps"], **{s: {"seconds": 1.0} for s in ("pseudo_label", "bert", "calibrate",
            "predict_bert", "explain_bert")}}, progress={**PENDING_RUN["progress"], "step": "predict_evaluation"})  # fmt: skip
    client.portal.call(client.app.state.analyzer.refresh)
    assert rows(url, "SELECT model FROM predictions WHERE review_id = ? ORDER BY model", review) == [("bert",), ("nbsvm",)]
    assert rows(url, "SELECT model FROM explanations WHERE review_id = ? ORDER BY model", review) == [("bert",), ("nbsvm",)]
    weights = rows(
        url, "SELECT w.model, count(*) FROM sentence_weights w JOIN sentences s ON s.id = w.sentence_id "
        "WHERE s.review_id = ? GROUP BY w.model ORDER BY w.model", review,
    )  # fmt: skip
    assert weights == [("bert", 3), ("nbsvm", 3)]
    after = client.get(f"/api/reviews/{review}").json()
    assert after["review"]["predictions"]["bert"]["label"] == "positive"
    [now] = client.post("/api/predict", json={"texts": [TEXT]}).json()["results"]
    assert now["predictions"]["bert"]["label"] == "positive"
    assert "pending-line" not in client.get("/?analyze=1").text


def test_with_no_model_ready_pages_serve_and_the_api_marks_both_pending(tmp_path):
    progress = {"step": "nbsvm", "doing": "NB-SVM is training", "steps": PENDING_RUN["progress"]["steps"]}
    run = {**PENDING_RUN, "steps": {"data": {"seconds": 12.5}}, "progress": progress}
    url = database(tmp_path, run, models=())
    with serve(url) as client:
        for path in ("/", "/?analyze=1", "/?analyze=1&compare=1&accuracy=1", "/movies/tt0100001?analyze=1",
                     "/reviews/1?analyze=1", "/about", "/disagreements", "/analyze", "/?q=rocket"):  # fmt: skip
            assert client.get(path).status_code == 200, path
        line = client.get("/index.json?analyze=1").json()["build"]["line"]
        assert line == "NB-SVM is still learning from the 500 reviews — training, no estimate of the time left yet."
        [result] = client.post("/api/predict", json={"texts": [TEXT], "explain": True}).json()["results"]
        assert result["predictions"] == {m: {"pending": True, "step": "nbsvm", "eta_s": None} for m in ("nbsvm", "bert")}
        assert [s["text"] for s in result["sentences"]] == ["A great cast.", "The plot was boring.", "I loved the ending."]
        stored = client.post("/api/reviews", json={"text": TEXT, "title_id": "tt0100002"})
        assert stored.status_code == 201
        review = stored.json()["id"]
        assert rows(url, "SELECT count(*) FROM sentences WHERE review_id = ?", review) == [(3,)]
        # NB-SVM's predictions are in: the site shows and loads it, but leaves the stored review to its explain
        # step, which listed it and would write its explanation a second time
        set_run(url, steps={**run["steps"], "nbsvm": {}, "predict_nbsvm": {}},
                progress={**progress, "step": "explain_nbsvm", "doing": "NB-SVM is explaining the catalogue reviews"})
        client.portal.call(client.app.state.analyzer.refresh)
        assert client.app.state.analyzer.loaded == ("nbsvm",)
        assert client.get("/index.json?analyze=1").json()["view"]["models"] == ["nbsvm"]
        assert rows(url, "SELECT model FROM explanations WHERE review_id = ?", review) == []
        set_run(url, steps={**run["steps"], "nbsvm": {}, "predict_nbsvm": {}, "explain_nbsvm": {}})
        client.portal.call(client.app.state.analyzer.refresh)
        assert rows(url, "SELECT model FROM predictions WHERE review_id = ?", review) == [("nbsvm",)]
        assert rows(url, "SELECT model FROM explanations WHERE review_id = ?", review) == [("nbsvm",)]


HIGHLIGHTS_LINE = (
    "NB-SVM's highlights are still being computed — 26 % done, about 2 minutes left on this machine; a review not "
    "explained yet shows its prediction alone."
)
STILL_COMPUTED = "highlights of this review are still being computed: the build has not explained it yet."


@pytest.fixture
def explaining(tmp_path):
    with serve(build_half_explained_database(tmp_path / "textflix.db", "nbsvm")) as client:
        yield client


def test_nbsvm_shows_its_predictions_while_it_explains_and_each_review_its_highlights_once_written(explaining):
    client = explaining
    data = client.get("/index.json?analyze=1").json()
    assert data["view"]["models"] == ["nbsvm"] and data["summary"]["models"]["nbsvm"]["scored"] == 13
    bert_line = "BERT is still learning from the 500 reviews, no estimate of the time left yet; the pages show NB-SVM's reading."
    assert data["build"] == {
        "ready": ["nbsvm"], "explained": [], "pending": {"bert": {"pending": True, "step": "explain_nbsvm", "eta_s": None}},
        "explaining": {"nbsvm": {"highlights_pending": True, "step": "explain_nbsvm", "eta_s": 95.0}},
        "line": f"{bert_line} {HIGHLIGHTS_LINE}",
    }  # fmt: skip
    page = client.get("/?analyze=1&accuracy=1")
    assert f'data-ready="nbsvm">{escape(bert_line)} {escape(HIGHLIGHTS_LINE)}</p>' in page.text
    assert page.text.count('<div class="model-bar" data-model="nbsvm">') == 5  # the summary's and each card's

    # a title with two reviews explained and two not: each shows its prediction, the explained ones their highlights
    title = client.get("/movies/tt0100002.json?analyze=1&accuracy=1").json()
    reviews = {review["id"]: review for review in title["reviews"]}
    assert {i: r["highlights_pending"] for i, r in reviews.items()} == {6: [], 7: [], 8: ["nbsvm"], 9: ["nbsvm"]}
    assert all(r["predictions"]["nbsvm"]["label"] in ("positive", "negative") for r in reviews.values())
    assert reviews[8]["predictions"]["nbsvm"]["correct"] is True and title["wrong_reviews"] == 1  # review 6
    assert [set(s["weights"]) for s in reviews[6]["sentences"]] == [{"nbsvm"}] * 2
    assert [s["weights"] for s in reviews[8]["sentences"]] == [{}, {}]
    assert {h["review_id"] for entries in title["highlights"].values() for h in entries} <= {6, 7}
    html = client.get("/movies/tt0100002?analyze=1").text
    assert html.count(f"NB-SVM's {STILL_COMPUTED}") == 2 and "Pending" not in html

    review = client.get("/reviews/8?analyze=1").text
    assert f"<p class=\"highlights-pending\">NB-SVM's {STILL_COMPUTED}</p>" in review
    assert "word-level explanation of this review is still being computed" in review
    assert "Pending: the build has not finished BERT yet" in review
    explained = client.get("/reviews/1?analyze=1").text
    assert STILL_COMPUTED not in explained and 'class="hl ' in explained and "word-view" in explained

    # the API's stored reviews say it in the same field; its analysis answers with NB-SVM, BERT pending
    assert client.get("/api/reviews/8").json()["review"]["highlights_pending"] == ["nbsvm"]
    assert client.get("/api/reviews/1").json()["review"]["highlights_pending"] == []
    movie = client.get("/api/movies/tt0100002").json()
    assert [r["highlights_pending"] for r in movie["reviews"]] == [[], [], ["nbsvm"], ["nbsvm"]]
    [result] = client.post("/api/predict", json={"texts": [TEXT]}).json()["results"]
    assert result["predictions"]["nbsvm"]["label"] == "positive" and result["predictions"]["bert"]["pending"] is True


def test_the_comparison_and_disagreements_while_bert_explains(tmp_path):
    with serve(build_half_explained_database(tmp_path / "textflix.db", "bert")) as client:
        data = client.get("/index.json?analyze=1&compare=1").json()
        assert data["view"]["models"] == ["nbsvm", "bert"] and data["view"]["pending"] == []
        assert data["build"]["explaining"] == {"bert": {"highlights_pending": True, "step": "explain_bert", "eta_s": 95.0}}
        assert data["build"]["line"] == HIGHLIGHTS_LINE.replace("NB-SVM", "BERT")
        disagreements = client.get("/disagreements.json").json()["reviews"]
        assert {r["id"]: r["highlights_pending"] for r in disagreements} == {2: [], 5: [], 6: [], 9: ["bert"]}
        assert {r["id"]: r["key_sentences"]["bert"] is None for r in disagreements}[9]
        html = client.get("/disagreements").text
        assert html.count(f"BERT's {STILL_COMPUTED}") == 1
        compare = client.get("/movies/tt0100002?analyze=1&compare=1").text
        assert compare.count(f"BERT's {STILL_COMPUTED}") == 2 and "is-pending" not in compare


def test_a_stopped_build_says_the_highlights_are_not_all_computed(tmp_path):
    url = build_half_explained_database(tmp_path / "textflix.db", "bert")
    set_run(url, progress={"step": "explain_bert", "builder": {"host": __import__("socket").gethostname(),
                                                               "pid": 2**22 + 1, "started": 0.0}})  # fmt: skip
    with serve(url) as client:
        assert client.get("/index.json?analyze=1").json()["build"]["line"] == (
            "BERT's highlights are not all computed: the build stopped before they were; a review not explained yet "
            "shows its prediction alone. `textflix up` (or `textflix build`) resumes it where it stopped."
        )


@pytest.mark.parametrize(
    "progress, said",
    [
        ({"failed": "out of memory."}, "BERT is not ready: the build's pseudo_label step failed (out of memory); the "
         "pages show NB-SVM's reading. `textflix up` (or `textflix build`) resumes it where it stopped."),
        ({"builder": {"host": __import__("socket").gethostname(), "pid": 2**22 + 1, "started": 0.0}},
         "BERT is not ready: the build stopped before it was ready; the pages show NB-SVM's reading. "
         "`textflix up` (or `textflix build`) resumes it where it stopped."),
    ],
    ids=["failed", "stopped"],
)  # fmt: skip
def test_a_build_that_failed_or_stopped_says_how_to_resume(tmp_path, progress, said):
    url = database(tmp_path, {**PENDING_RUN, "progress": {**PENDING_RUN["progress"], **progress}})
    with serve(url) as client:
        assert client.get("/index.json?analyze=1").json()["build"]["line"] == said
        [result] = client.post("/api/predict", json={"texts": [TEXT]}).json()["results"]
        assert result["predictions"]["bert"] == {"pending": True, "step": None, "eta_s": None}
        assert client.get("/about").status_code == 200


def test_between_two_steps_the_line_says_a_stopped_build_resumes(tmp_path):
    url = database(tmp_path, {**PENDING_RUN, "progress": None})
    with serve(url) as client:
        assert client.get("/index.json?analyze=1").json()["build"]["line"] == (
            "BERT is not ready yet: the build is between two steps (`textflix up` resumes one that stopped); "
            "the pages show NB-SVM's reading."
        )
        assert client.get("/about").status_code == 200


def test_a_finished_build_shows_no_pending_anywhere(tmp_path):
    url = database(tmp_path, RUN, models=("bert", "nbsvm"))
    with serve(url) as client:
        assert "build" not in client.get("/index.json?analyze=1&compare=1").json()
        [result] = client.post("/api/predict", json={"texts": [TEXT]}).json()["results"]
        assert {p.get("pending") for p in result["predictions"].values()} == {None}


def test_openapi_documents_the_pending_mark(pending):
    client, _ = pending
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert set(schemas["PendingModel"]["properties"]) == {"pending", "step", "eta_s"}
    assert {"$ref": "#/components/schemas/PendingModel"} in schemas["Predictions"]["properties"]["bert"]["anyOf"]


@pytest.mark.slow
def test_a_real_build_served_from_nbsvm_on_gets_bert_without_a_restart(tmp_path, real_subset_archive):
    """A tiny real build up to NB-SVM's predictions, served: every review with NB-SVM's prediction, its
    highlights to come; then up to NB-SVM's explanations, served; a review stored while BERT is pending; the
    build goes on to BERT's explanations, and the same server answers with BERT, the review read by it."""
    from app.offline.pipeline import Pipeline
    from app.offline.steps import build_steps

    settings = Settings(
        imdb=str(real_subset_archive), data_dir=tmp_path, train_size=24, titles=2, eval_size=30, epochs=1,
        max_length=96, calibration_folds=2, prior_reviews=40, lime_samples=8, word_lime_samples=20, device="cpu",
        build_poll_s=3600, allow_anonymous_writes=True,
    )  # fmt: skip
    Pipeline(settings, build_steps, progress=False).run(until="predict_nbsvm")
    with TestClient(create_app(settings), base_url="http://localhost") as client:  # NB-SVM predicted, not explained
        data = client.get("/index.json?analyze=1").json()
        assert data["view"]["models"] == ["nbsvm"] and data["build"]["explained"] == []
        assert data["build"]["line"].endswith(
            "NB-SVM's highlights are not all computed yet: the build is between two steps (`textflix up` resumes one "
            "that stopped); a review not explained yet shows its prediction alone."
        )
        title = client.get(f"/api/movies/{data['titles'][0]['title_id']}").json()
        assert {r["highlights_pending"] == ["nbsvm"] and "nbsvm" in r["predictions"] for r in title["reviews"]} == {True}
    Pipeline(settings, build_steps, progress=False).run(until="explain_nbsvm")
    url = settings.database
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        page = client.get("/?analyze=1")
        assert page.status_code == 200 and '<p class="pending-line"' in page.text and "BERT is " in page.text
        assert client.get("/index.json?analyze=1").json()["view"]["models"] == ["nbsvm"]
        title = client.get("/index.json").json()["titles"][0]["title_id"]
        compare = client.get(f"/movies/{title}?analyze=1&compare=1")
        assert compare.status_code == 200 and "Pending: the build has not finished BERT yet" in compare.text
        stored = client.post("/api/reviews", json={"text": TEXT, "title_id": title})
        assert stored.status_code == 201, stored.text
        assert stored.json()["predictions"]["bert"]["pending"] is True
        assert stored.json()["predictions"]["nbsvm"]["label"] in ("positive", "negative")
        review = stored.json()["id"]

        Pipeline(settings, build_steps, progress=False).run(until="explain_bert")
        client.portal.call(client.app.state.analyzer.refresh)
        assert client.app.state.analyzer.loaded == ("nbsvm", "bert")
        [now] = client.post("/api/predict", json={"texts": [TEXT]}).json()["results"]
        assert {model: "label" in p for model, p in now["predictions"].items()} == {"nbsvm": True, "bert": True}
        after = client.get(f"/api/reviews/{review}").json()["review"]
        assert set(after["predictions"]) == {"nbsvm", "bert"}
        assert all(set(sentence["weights"]) == {"nbsvm", "bert"} for sentence in after["sentences"])
        assert rows(url, "SELECT model FROM explanations WHERE review_id = ? ORDER BY model", review) == [("bert",), ("nbsvm",)]
        assert "pending-line" not in client.get("/?analyze=1").text


def test_about_describes_the_recipe_being_built_from_the_first_step(tmp_path):
    """The run record's config is written as the build starts: /about describes the distillation it runs (the
    CPU default) while NB-SVM still trains, not a plain fine-tuning for the config's `epochs`."""
    import torch

    from app.offline.pipeline import concrete_recipe

    config = concrete_recipe(Settings(recipe="auto"), None, torch.device("cpu")).build_config()  # the CPU's default
    progress = {"step": "nbsvm", "doing": "NB-SVM is training", "steps": PENDING_RUN["progress"]["steps"]}
    run = {**PENDING_RUN, "config": config, "steps": {"data": {"seconds": 12.5}}, "progress": progress}
    with serve(database(tmp_path, run, models=())) as client:
        assert client.get("/about.json").json()["recipe"] == "distill"
        facts = client.get("/about").text.split('<dl class="facts">')[1].split("</dl>")[0]
    assert (
        "<dt>BERT</dt><dd>The pretrained encoder <code>sentence-transformers/all-MiniLM-L6-v2</code> trained for two "
        "classes for 2 epochs on the 500 labelled reviews plus 2,000 unlabeled reviews of the IMDB train split and "
        "runs of their sentences (never a test text), labelled by a teacher: knowledge distillation (this build is "
        "making it).</dd>"
    ) in facts
    assert "<dt>Teacher</dt><dd>The pretrained encoder <code>sentence-transformers/all-mpnet-base-v2</code>" in facts
    assert "reading each text whole" in facts and "fine-tuned for two classes" not in facts
