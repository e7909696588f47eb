"""BERT's words where people look (issue 55): the marks drawn from hand-made word shares, and the review, title
and JSON pages over a fixture database with one review's words stored (``web_fixtures.add_word_shares``).
The form's and /analyze's tests compute the words themselves, on a real tiny build.
"""

import math
import re
import shutil
from html import unescape

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app.settings import Settings
from app.web.costs import words_seconds
from app.web.guard import FORM
from app.web.main import create_app
from app.web.render import MARKED_WORDS, strongest_words, word_marks, words_legend
from tests.web_fixtures import WORD_SHARES, WORDS_REVIEW, add_word_shares, build_web_database

ANALYZE = "?analyze=1"
MARK = re.compile(r'<mark class="word (pos|neg)" title="([^"]*)"[^>]*>([^<]*)</mark>')


def words_of(text_: str, shares: dict[str, float], offset: int = 0) -> list[dict]:
    """Hand-made words of ``text_`` (at ``offset`` in its review), each word's share from ``shares`` (else 0.01)."""
    return [
        {"text": m.group(), "start": offset + m.start(), "end": offset + m.end(), "share": shares.get(m.group(), 0.01)}
        for m in re.finditer(r"\w+|[^\w\s]+", text_)
    ]


def test_the_strongest_words_are_marked_by_sign_with_their_share_and_the_sentence_s():
    sentence = "The plot is thin but the two leads are wonderful together."
    words = words_of(sentence, {"thin": -0.7, "wonderful": 0.9, "together": 0.2}, offset=30)
    marked = MARK.findall(word_marks(sentence, 30, words, "bert"))
    total = sum(word["share"] for word in words)
    assert [(side, word) for side, _, word in marked] == [("neg", "thin"), ("pos", "wonderful")]
    assert marked[0][1] == f"BERT word share -0.700 toward negative, of the sentence's {total:+.3f}"
    assert marked[1][1] == f"BERT word share +0.900 toward positive, of the sentence's {total:+.3f}"
    # the text is kept whole around the marks
    assert re.sub(r"<[^>]+>", "", word_marks(sentence, 30, words, "bert")) == sentence


def test_marks_escape_the_text_and_sit_on_the_stored_offsets():
    sentence = 'Said "<b>great</b>" & it <script>was</script>, great.'
    words = words_of(sentence, {"great": 0.8}, offset=5)
    marked = word_marks(sentence, 5, words, "bert")
    assert "<b>" not in marked and "<script>" not in marked and "&amp;" in marked
    # both "great"s are words of their own, each marked at its own span (not by matching the word's text)
    assert [word for _, _, word in MARK.findall(marked)] == ["great", "great"]
    assert unescape(re.sub(r"<[^>]+>", "", marked)) == sentence


def test_words_whose_spans_do_not_fit_the_sentence_leave_it_unmarked():
    sentence = "Short & sweet."
    words = words_of(sentence, {"sweet": 0.5}, offset=10)
    assert word_marks(sentence, 11, words, "bert") == "Short &amp; sweet."  # spans one character off: they overrun
    overlapping = [{**words[0], "end": words[1]["end"]}, *words[1:]]
    assert "<mark" not in word_marks(sentence, 10, overlapping, "bert")


def test_the_fewest_words_holding_half_the_weight_at_most_a_few_are_marked():
    assert [w["text"] for w in strongest_words(words_of("a b c d", {"a": 0.1, "b": -0.6, "c": 0.2, "d": 0.1}))] == ["b"]
    assert [w["text"] for w in strongest_words(words_of("a b c d", {"a": 0.3, "b": -0.3, "c": 0.3, "d": 0.1}))] == [
        "a", "b",
    ]  # fmt: skip
    even = words_of(" ".join("abcdefghij"), {letter: 0.1 for letter in "abcdefghij"})
    assert len(strongest_words(even)) == MARKED_WORDS
    assert strongest_words(words_of("a b", {"a": 0.0, "b": 0.0})) == []


def test_the_legend_adds_the_words_up_to_the_verdict():
    sentences = [
        {"text": "Good.", "words": {"bert": words_of("Good.", {"Good": 1.0, ".": 0.25})}},
        {"text": "Bad.", "words": {"bert": words_of("Bad.", {"Bad": -0.5, ".": 0.0}, offset=6)}},
    ]
    said = str(words_legend("bert", sentences, log_odds=1.0, start=0.25))
    assert "the 2 sentences' shares, +0.750 in all, from BERT's start, +0.250" in said
    assert "add up to its log-odds of positive, +1.000" in said
    # a sentence without its words: no sum to state
    assert "in all" not in str(words_legend("bert", [*sentences, {"text": "More."}], log_odds=1.0))


@pytest.fixture(scope="module")
def words_database(tmp_path_factory) -> tuple[str, int]:
    """The fixture database with BERT's words stored for ``WORDS_REVIEW``, and that review's id."""
    url = build_web_database(tmp_path_factory.mktemp("words") / "textflix.db")
    return url, add_word_shares(url)


@pytest.fixture(scope="module")
def words_client(words_database):
    with TestClient(create_app(Settings(database_url=words_database[0]))) as client:
        yield client


def bert_column(html: str) -> str:
    return html.split('data-model="bert"', 1)[1].split("</section>", 1)[0]


def test_a_review_page_with_stored_words_shows_bert_s_marks_and_the_legend(words_client, words_database):
    url, review_id = words_database
    page = words_client.get(f"/reviews/{review_id}{ANALYZE}")
    assert page.status_code == 200
    column = bert_column(page.text)
    marked = [(side, word) for side, _, word in MARK.findall(column)]
    assert ("neg", "boring") in marked and ("pos", "gripping") in marked
    assert "<mark" not in page.text.split('data-model="nbsvm"', 1)[1].split("</section>", 1)[0]  # BERT's words only
    [(p_positive,)] = sql(url, "SELECT p_positive FROM predictions WHERE review_id = :id AND model = 'bert'", id=review_id)
    log_odds = math.log(p_positive / (1 - p_positive))
    legend = unescape(re.search(r'<p class="words-legend">(.*?)</p>', column, re.S).group(1))
    total = sum(share for share, _ in WORD_SHARES)
    assert f"the 2 sentences' shares, {total:+.3f} in all, from BERT's start, {log_odds - total:+.3f}" in legend
    assert f"its log-odds of positive, {log_odds:+.3f}" in legend
    assert "words-form" not in page.text and "words.js" not in page.text


def test_a_review_page_without_stored_words_offers_to_compute_them(words_client, words_database):
    [(review_id, sentences)] = sql(
        words_database[0],
        "SELECT r.id, count(*) FROM reviews r JOIN sentences s ON s.review_id = r.id WHERE r.text != :text "
        "AND r.split = 'catalogue' GROUP BY r.id ORDER BY r.id LIMIT 1",
        text=WORDS_REVIEW,
    )
    page = words_client.get(f"/reviews/{review_id}{ANALYZE}")
    column = bert_column(page.text)
    assert "<mark" not in column and "words-legend" not in column
    assert f'action="/reviews/{review_id}/words{ANALYZE}"' in column
    texts = [text for (text,) in sql(words_database[0], "SELECT text FROM sentences WHERE review_id = :id ORDER BY position", id=review_id)]
    assert len(texts) == sentences
    speed = words_client.app.state.analyzer.info().get("limits", {}).get("seconds_per_pass")
    seconds = words_seconds(texts, speed)
    assert f"Show BERT's words{f' (about {seconds} s)' if seconds else ''}</button>" in column
    assert '<script src="/static/words.js" defer></script>' in page.text


def test_the_words_form_passes_the_gate_as_the_analyze_form_does(tmp_path):
    """Computing words makes the server work: without its token a form's post is refused before any route runs."""
    url = build_web_database(tmp_path / "textflix.db")
    with TestClient(create_app(Settings(database_url=url, api_token="s3cret"))) as client:
        page = client.get(f"/reviews/1{ANALYZE}")
        assert 'name="token"' in bert_column(page.text)
        refused = client.post("/reviews/1/words", data={"token": "wrong"})
        assert refused.status_code == 403 and "The API token is not valid." in refused.text
        assert client.post("/reviews/1/words", content=b"x", headers={"Content-Type": "text/plain"}).status_code == 401


def test_the_json_twin_carries_each_sentence_s_words(words_client, words_database):
    url, review_id = words_database
    answer = words_client.get(f"/reviews/{review_id}.json{ANALYZE}").json()
    sentences = answer["review"]["sentences"]
    for sentence, (total, strong) in zip(sentences, WORD_SHARES, strict=True):
        words = sentence["words"]["bert"]
        assert math.isclose(sum(word["share"] for word in words), total, abs_tol=1e-9)
        assert all(WORDS_REVIEW[word["start"] : word["end"]] == word["text"] for word in words)
        assert {word["text"]: word["share"] for word in words if word["text"] in strong} == strong
    assert answer["words_stored"] is True


def test_a_title_page_shows_bert_s_marks_for_the_review_whose_words_are_stored(words_client, words_database):
    url, review_id = words_database
    [(title_id,)] = sql(url, "SELECT title_id FROM reviews WHERE id = :id", id=review_id)
    html = words_client.get(f"/movies/{title_id}{ANALYZE}").text
    card = html.split(f'id="r{review_id}"', 1)[1].split("</article>", 1)[0]
    assert ("pos", "gripping") in [(side, word) for side, _, word in MARK.findall(card)]
    # the review's key sentence among the title's highlights is marked too; no other review has marks
    highlights = html.split('class="highlights"', 1)[1].split("</section>", 1)[0]
    assert "gripping</mark>" in highlights
    others = html.replace(card, "").split('class="reviews"', 1)[1]
    assert "<mark" not in others


def sql(url: str, query: str, **params) -> list:
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(text(query), params).all()
    engine.dispose()
    return rows


@pytest.mark.slow
def test_the_words_form_computes_them_and_comes_back_to_the_marks(api_data_dir, tmp_path):
    """Without JavaScript: the form's post computes the review's words (app.web.review_words), stores them and answers 303
    to the page, which now marks them."""
    from tests.test_api import api_settings

    shutil.copytree(api_data_dir / "models", tmp_path / "models")
    build_web_database(tmp_path / "textflix.db")
    with TestClient(create_app(api_settings(tmp_path))) as client:
        # as a browser posts a form without fields: its media type, an empty body
        posted = client.post(f"/reviews/2/words{ANALYZE}", headers={"Content-Type": FORM}, follow_redirects=False)
        assert posted.status_code == 303 and posted.headers["location"] == f"/reviews/2{ANALYZE}#bert-words"
        column = bert_column(client.get(posted.headers["location"]).text)
        assert MARK.search(column) and "words-legend" in column and "words-form" not in column


ANALYZED = "A wonderful cast. The plot is dull and slow. I loved the ending."


@pytest.mark.slow
def test_analyze_offers_bert_s_words_beside_its_exact_shares(api_data_dir, tmp_path):
    """A real tiny build: BERT's explanation of an analysed text is exact, so its column offers its words, with the
    words' cost; the button belongs to the form (its text and token go with it)."""
    from tests.test_api import api_settings

    shutil.copytree(api_data_dir / "models", tmp_path / "models")
    build_web_database(tmp_path / "textflix.db")
    with TestClient(create_app(api_settings(tmp_path))) as client:
        column = bert_column(client.post("/analyze", data={"text": ANALYZED}).text)
        speed = client.app.state.analyzer.info()["limits"]["seconds_per_pass"]
    assert '<button type="submit" form="analyze-form" name="words" value="true"' in column
    seconds = words_seconds(["A wonderful cast.", "The plot is dull and slow.", "I loved the ending."], speed)
    assert f"Show BERT's words (about {seconds} s)" in column  # the price of its 3 sentences at the measured speed
    assert "<mark" not in column


@pytest.mark.slow
def test_analyze_with_words_marks_them_and_adds_them_up_from_the_start(api_data_dir, tmp_path):
    """The form's `words=true` (the button) answers BERT's words, marked in its sentences, with the legend's sums
    the analysis's own: start and log-odds."""
    from tests.test_api import api_settings

    shutil.copytree(api_data_dir / "models", tmp_path / "models")
    build_web_database(tmp_path / "textflix.db")
    with TestClient(create_app(api_settings(tmp_path))) as client:
        column = bert_column(client.post("/analyze", data={"text": ANALYZED, "words": "true"}).text)
        answer = client.post("/analyze.json", json={"text": ANALYZED, "words": True}).json()["result"]
    bert = answer["explanations"]["bert"]
    assert MARK.search(column) and 'name="words"' not in column
    legend = unescape(re.search(r'<p class="words-legend">(.*?)</p>', column, re.S).group(1))
    assert f"from BERT's start, {bert['start']:+.3f}" in legend and f"log-odds of positive, {bert['log_odds']:+.3f}" in legend
