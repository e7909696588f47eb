"""BERT's word shares over HTTP (issue 55): asked with an explained analysis (`words`), and a stored review's
computed on its first view, stored, then read; priced under the server's work limit.

Real tiny builds (``api_data_dir``: a MiniLM sentence student fine-tuned on 8 real reviews), each test on a
copy of its models and a fresh fixture database, served by uvicorn in a thread.
"""

import asyncio
import json
import shutil
import sqlite3

import httpx
import pytest
import torch
from sqlalchemy.orm import Session

from app.db import Review, make_engine
from app.web.main import create_app
from model.bert import BertClassifier
from model.config import MINILM, BertConfig
from tests.conftest import serve_in_thread
from tests.test_analysis_answers import add_teacher, copy_build
from tests.test_api import REVIEW, api_settings

pytestmark = pytest.mark.slow
ONE_SENTENCE = "A wonderful, moving film with brilliant acting."


def served(data_dir, **settings):
    return serve_in_thread(create_app(api_settings(data_dir, **settings)))


def word_rows(data_dir) -> int:
    with sqlite3.connect(data_dir / "textflix.db") as connection:
        return connection.execute("SELECT COUNT(*) FROM word_shares").fetchone()[0]


def check_words_add_up(text: str, sentence: dict) -> None:
    """A sentence's words lie in it, in order, and their shares add up to its exact contribution."""
    words = sentence["words"]["bert"]
    assert "nbsvm" not in sentence["words"] and words
    assert all(text[w["start"] : w["end"]] == w["text"] for w in words)
    assert sentence["start"] <= words[0]["start"] and words[-1]["end"] <= sentence["end"]
    assert sum(w["share"] for w in words) == pytest.approx(sentence["contributions"]["bert"], abs=0.01)


@pytest.fixture
def build(api_data_dir, tmp_path):
    return copy_build(api_data_dir, tmp_path / "build")


def test_words_of_an_explained_text_add_up_to_each_sentences_contribution(build):
    with served(build) as url, httpx.Client(base_url=url, timeout=300) as client:
        plain = client.post("/api/predict", json={"texts": [REVIEW], "explain": True})
        response = client.post("/api/predict", json={"texts": [REVIEW], "explain": True, "words": True})
        page = client.post("/analyze.json", json={"text": REVIEW, "words": True})
    assert plain.status_code == 200 and response.status_code == 200, response.text
    assert all("words" not in sentence for sentence in plain.json()["results"][0]["sentences"])
    [result] = response.json()["results"]
    assert len(result["sentences"]) == 4
    for sentence in result["sentences"]:
        check_words_add_up(result["text"], sentence)
    assert page.status_code == 200, page.text
    for sentence in page.json()["result"]["sentences"]:
        check_words_add_up(REVIEW, sentence)


def test_words_without_explain_are_refused_naming_the_field(build):
    with served(build) as url:
        response = httpx.post(f"{url}/api/predict", json={"texts": [REVIEW], "words": True}, timeout=60)
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["field"] == "words" and "needs `explain`" in problem["message"]


def test_the_one_sentence_text_the_teacher_reads_splits_too(build):
    add_teacher(build)
    with served(build) as url:
        response = httpx.post(f"{url}/api/predict", json={"texts": [ONE_SENTENCE], "explain": True, "words": True}, timeout=300)
    assert response.status_code == 200, response.text
    [result] = response.json()["results"]
    assert result["predictions"]["bert"]["read_by"] == "teacher"
    [sentence] = result["sentences"]
    check_words_add_up(ONE_SENTENCE, sentence)


def test_a_request_whose_words_cost_more_than_the_server_takes_is_refused_saying_so(build):
    with served(build, max_work_in_flight=20, small_work_in_flight=0) as url, httpx.Client(base_url=url, timeout=300) as client:
        assert client.post("/api/predict", json={"texts": [REVIEW], "explain": True}).status_code == 200
        refused = client.post("/api/predict", json={"texts": [REVIEW], "explain": True, "words": True})
        review = client.post("/api/reviews/1/words", json={})
    assert refused.status_code == 422 and review.status_code == 422
    for response, field in ((refused, "texts"), (review, "review_id")):
        [problem] = response.json()["detail"]
        assert problem["field"] == field and problem["limit"] <= 20
        assert "words" in problem["message"] and "TEXTFLIX_MAX_WORK_IN_FLIGHT" in problem["message"], problem
    assert word_rows(build) == 0


def test_a_reviews_first_view_computes_and_stores_its_words_and_later_ones_read_them(build):
    async def first_views(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=300) as client:
            return await asyncio.gather(*(client.post("/api/reviews/1/words", json={}) for _ in range(2)))

    with served(build) as url, httpx.Client(base_url=url, timeout=300) as client:
        assert client.get("/api/reviews/1").json()["review"]["sentences"][0]["words"] is None
        first = asyncio.run(first_views(url))
        stored = word_rows(build)
        again = client.post("/api/reviews/1/words", json={})
        detail, twin = client.get("/api/reviews/1").json(), client.get("/reviews/1.json?analyze=1").json()
        export = [json.loads(line) for line in client.get("/api/export.jsonl").text.splitlines()]
        missing = client.post("/api/reviews/999999/words", json={})
    assert [response.status_code for response in first] == [200, 200], first[0].text
    answer = first[0].json()
    assert answer["computed"] and first[1].json()["sentences"] == answer["sentences"]
    words = [word for sentence in answer["sentences"] for word in sentence["words"]["bert"]]
    assert stored == len(words) > 0  # stored once, whichever first view came first
    assert again.status_code == 200 and not again.json()["computed"] and again.json()["sentences"] == answer["sentences"]
    assert word_rows(build) == stored
    text = detail["review"]["text"]
    for sentence in answer["sentences"]:
        assert all(text[w["start"] : w["end"]] == w["text"] for w in sentence["words"]["bert"])
        assert sentence["start"] <= sentence["words"]["bert"][0]["start"]
    assert [s["words"] for s in detail["review"]["sentences"]] == [s["words"] for s in answer["sentences"]]
    assert [s["words"] for s in twin["review"]["sentences"]] == [s["words"] for s in answer["sentences"]]
    [row] = [row for row in export if row["id"] == 1]
    assert [s["words"] for s in row["sentences"]] == [s["words"] for s in answer["sentences"]]
    assert all(s["words"] is None for other in export if other["id"] != 1 for s in other["sentences"])
    assert missing.status_code == 404 and "999999" in missing.json()["detail"][0]["message"]


def test_deleting_a_review_deletes_its_words(build):
    with served(build) as url:
        assert httpx.post(f"{url}/api/reviews/2/words", json={}, timeout=300).status_code == 200
    assert word_rows(build) > 0
    engine = make_engine(f"sqlite:///{build / 'textflix.db'}")
    with Session(engine) as session:
        session.delete(session.get(Review, 2))
        session.commit()
    assert word_rows(build) == 0


def test_a_server_with_int8_bert_computes_words_on_its_own_float_copy(build):
    """Integrated gradients need a network with gradients: an int8 server's words are its float copy's, which add
    up to the float network's contributions (the int8 ones differ by the quantization's error; docs/api.md)."""
    answers = []
    for int8 in (False, True):
        with served(build, cpu_int8=int8) as url:
            response = httpx.post(f"{url}/api/predict", json={"texts": [REVIEW], "explain": True, "words": True}, timeout=300)
        assert response.status_code == 200, response.text
        answers.append(response.json()["results"][0]["sentences"])
    float32, int8 = answers
    for sentence, same in zip(float32, int8, strict=True):
        check_words_add_up(REVIEW, sentence)
        assert [w["share"] for w in same["words"]["bert"]] == pytest.approx([w["share"] for w in sentence["words"]["bert"]], abs=2e-3)


def test_a_bert_that_reads_a_text_whole_has_no_words_for_it_and_says_so_for_a_review(build):
    shutil.rmtree(build / "models" / "bert")
    whole = BertClassifier.pretrained(BertConfig(base_model=MINILM, max_length=64, pooling="cls", seed=3), torch.device("cpu"))
    whole.save(build / "models" / "bert")
    with served(build) as url, httpx.Client(base_url=url, timeout=300) as client:
        response = client.post("/api/predict", json={"texts": [REVIEW], "explain": True, "words": True})
        review = client.post("/api/reviews/1/words", json={})
    assert response.status_code == 200, response.text
    assert all("words" not in sentence for sentence in response.json()["results"][0]["sentences"])
    assert review.status_code == 409 and "reads a review of several sentences whole" in review.text
    assert word_rows(build) == 0
