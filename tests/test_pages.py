"""Route tests of the web pages over HTTP, against the fixture database.

Expected figures come from the database itself (plain SQL in ``web_fixtures.web_facts``),
never from the code under test.

Over 400 lines: a test per behaviour of every page, all over the one fixture database.
"""

import logging
import os
import re
import socket
import subprocess
import sys
import time
from html import unescape
from statistics import fmean, stdev

import psutil
import pytest
from fastapi.testclient import TestClient
from markupsafe import escape
from pydantic import ValidationError
from sqlalchemy import create_engine, text

from app.cli import parse_command
from app.db import this_process
from app.settings import Settings
from app.web.analysis_types import ModelExplanations
from app.web.view import Items
from app.web.main import create_app
from app.web.render import cut, highlight, word_highlight
from app.web.templating import templates
from model.names import DISPLAY_NAMES, MODELS
from model.quality import FULL_COLOUR_WEIGHT, NEGLIGIBLE_WEIGHT, NO_FIT, UNSTABLE, Quality, assessment, fit_reading
from tests.web_fixtures import (  # noqa: F401
    DISTILL_RUN,
    GAME_CORPUS,
    GAMES,
    OLD_CURVE_RUN,
    RUN,
    XSS_IMG,
    XSS_SCRIPT,
    FakeAnalyzer,
    build_web_database,
    game_client,
    game_database,
    labeled,
    use_analyzer,
    web_app,
    web_client,
    web_database,
    web_facts,
    wrong,
)


def sql(url, query, **params):
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(text(query), params).all()
    engine.dispose()
    return rows


def weak_reviews(url, model="bert") -> set[int]:
    """The reviews whose sentence explanation by ``model`` is weak: no fit, unstable, or no better than random."""
    return {
        review_id
        for (review_id,) in sql(
            url,
            "SELECT review_id FROM explanations WHERE model = :model AND level = 'sentence'"
            " AND (score < :fit OR stability < :stable OR comprehensiveness <= random_comprehensiveness)",
            model=model, fit=NO_FIT, stable=UNSTABLE,
        )
    }  # fmt: skip


def column(html, model, start=0):
    """The first model column of ``model`` in ``html`` from ``start``."""
    return html[start:].split(f'class="model-col" data-model="{model}"')[1].split("</section>")[0]


def get_json(client, path):
    response = client.get(path, headers={"Accept": "application/json"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


# --- dashboard -------------------------------------------------------------------------------


def test_dashboard_without_analyze_is_a_plain_catalogue(web_client, web_facts):
    response = web_client.get("/")
    assert response.status_code == 200
    html = response.text
    assert html.count('class="card"') == len(web_facts["by_title"])
    assert f"{len(web_facts['reviews'])} total reviews of {len(web_facts['by_title'])} titles" in html
    for sentiment in ("positive", "negative", "accuracy (", "bar-fill", "badge", 'class="hl'):
        assert sentiment not in html
    # accuracy and comparison switches are inactive while Analyze is off
    assert html.count('aria-disabled="true"') == 2
    assert "Only In Training" not in html  # a title with no catalogue reviews


def test_dashboard_figures_equal_the_database(web_client, web_facts):
    data = get_json(web_client, "/?analyze=1&accuracy=1")
    reviews = web_facts["reviews"]
    bert = data["summary"]["models"]["bert"]
    assert data["summary"]["reviews"] == len(reviews)
    assert data["summary"]["titles"] == len(web_facts["by_title"])
    assert bert["positive"] == sum(r["bert"] == "positive" for r in reviews)
    assert bert["wrong"] == len(wrong(reviews))
    assert bert["accuracy"] == pytest.approx(1 - len(wrong(reviews)) / len(labeled(reviews)))
    assert len(bert["ticks"]) == len(wrong(reviews))
    assert sum(run["count"] for run in bert["bar"]) == len(reviews)
    assert "nbsvm" not in data["summary"]["models"]
    cards = {card["title_id"]: card for card in data["titles"]}
    assert set(cards) == set(web_facts["by_title"])
    for title_id, title_reviews in web_facts["by_title"].items():
        card = cards[title_id]["models"]["bert"]
        assert cards[title_id]["reviews"] == len(title_reviews)
        assert card["positive"] == sum(r["bert"] == "positive" for r in title_reviews)
        assert card["wrong"] == len(wrong(title_reviews))
        assert card["accuracy"] == pytest.approx(1 - len(wrong(title_reviews)) / len(labeled(title_reviews)))

    html = web_client.get("/?analyze=1&accuracy=1").text
    summary = html.split('id="summary"')[1].split("</section>")[0]
    assert summary.count('class="tick ') == len(wrong(reviews))
    accuracy = 1 - len(wrong(reviews)) / len(labeled(reviews))
    assert f"{accuracy:.0%} accuracy ({len(wrong(reviews))} wrong)" in summary
    positives = sum(r["bert"] == "positive" for r in reviews)
    assert f"{len(reviews)} total reviews · {positives} positive ({positives / len(reviews):.0%})" in summary
    assert html.count('class="tick ') == 2 * len(wrong(reviews))  # summary plus the cards


def test_dashboard_comparison_shows_both_models(web_client, web_facts):
    data = get_json(web_client, "/?analyze=1&accuracy=1&compare=1")
    nbsvm = data["summary"]["models"]["nbsvm"]
    assert list(data["summary"]["models"]) == ["nbsvm", "bert"]
    assert nbsvm["wrong"] == len(wrong(web_facts["reviews"], "nbsvm"))
    html = web_client.get("/?analyze=1&compare=1").text
    assert html.count('class="model-bar" data-model="nbsvm"') == len(web_facts["by_title"]) + 1
    assert html.count('class="model-bar" data-model="bert"') == len(web_facts["by_title"]) + 1


def _expected_order(web_facts, sort):
    titles = []
    for title_id, reviews in web_facts["by_title"].items():
        positive = sum(r["bert"] == "positive" for r in reviews) / len(reviews)
        accuracy = 1 - len(wrong(reviews)) / len(labeled(reviews))
        titles.append((title_id, len(reviews), positive, accuracy, len(wrong(reviews)), reviews[0]["title"]))
    keys = {
        "reviews": lambda t: (-t[1], t[5].lower()),
        "title": lambda t: (t[5].lower(),),
        "positive": lambda t: (-t[2], -t[1]),
        "negative": lambda t: (t[2], -t[1]),
        "accurate": lambda t: (-t[3], -t[1]),
        "inaccurate": lambda t: (t[3], -t[4], -t[1]),
    }
    return [t[0] for t in sorted(titles, key=keys[sort])]


@pytest.mark.parametrize("sort", ["reviews", "title", "positive", "negative", "accurate", "inaccurate"])
def test_dashboard_sort_orders(web_client, web_facts, sort):
    data = get_json(web_client, f"/?analyze=1&accuracy=1&sort={sort}")
    assert data["view"]["sort"] == sort
    assert [card["title_id"] for card in data["titles"]] == _expected_order(web_facts, sort)


def test_sorts_need_their_switches(web_client, web_facts):
    # sentiment sorts need Analyze, accuracy sorts need accuracy: otherwise most reviews
    for query in ("?sort=positive", "?analyze=1&sort=accurate", "?sort=inaccurate&accuracy=1", "?sort=bogus"):
        data = get_json(web_client, "/" + query)
        assert data["view"]["sort"] == "reviews"
        assert [c["title_id"] for c in data["titles"]] == _expected_order(web_facts, "reviews")
    html = web_client.get("/?analyze=1").text
    assert "sort=accurate" not in html and "sort=positive" in html
    assert "sort=accurate" in web_client.get("/?analyze=1&accuracy=1").text


def test_switches_keep_the_rest_of_the_state(web_client):
    html = web_client.get("/?analyze=1&compare=1&sort=positive").text
    switches = dict(re.findall(r'href="([^"]*)" data-switch="(\w+)"', html)[i][::-1] for i in range(3))
    assert switches["analyze"] == "/?compare=1&amp;sort=positive"
    assert switches["accuracy"] == "/?analyze=1&amp;accuracy=1&amp;compare=1&amp;sort=positive"
    assert switches["compare"] == "/?analyze=1&amp;sort=positive"
    assert 'aria-checked="true" href="/?compare=1&amp;sort=positive"' in html
    # with Analyze off the other switches are inactive but their state stays in the links
    html = web_client.get("/?accuracy=1&compare=1").text
    assert 'href="/?analyze=1&amp;accuracy=1&amp;compare=1" data-switch="analyze"' in html
    assert re.search(r'<span class="switch" role="switch" aria-checked="false" aria-disabled="true" data-switch="accuracy"', html)
    # links to other pages carry the view
    assert 'href="/movies/tt0100001?accuracy=1&amp;compare=1"' in html
    assert 'href="/about?accuracy=1&amp;compare=1"' in html


# --- title page ------------------------------------------------------------------------------


def test_title_page_metadata_and_plain_reviews(web_client, web_facts):
    html = web_client.get("/movies/tt0100001").text
    assert "<h1>The Lighthouse Keeper</h1>" in html
    assert "2004 · 112 min · PG-13" in html
    assert "Ann Example" in html
    assert html.count('<article class="review') == len(web_facts["by_title"]["tt0100001"])
    for absent in ("positive", "badge", 'class="hl', "highlight"):
        assert absent not in html.split("<main")[1]
    # a title without metadata is untitled, with its id
    html = web_client.get("/movies/tt0100004").text
    assert "<h1>Untitled (tt0100004)</h1>" in html and "No metadata is known" in html


def test_a_title_without_a_name_is_called_untitled_with_its_id_on_every_page_and_in_the_api(web_client, web_facts):
    label = "Untitled (tt0100004)"
    dashboard = web_client.get("/?q=untitled").text
    assert f'<h2><a href="/movies/tt0100004">{label}</a></h2>' in dashboard
    assert f"<title>{label} · Textflix</title>" in web_client.get("/movies/tt0100004").text
    review_id = web_facts["by_title"]["tt0100004"][0]["id"]
    review = web_client.get(f"/reviews/{review_id}").text
    assert f'<span class="subtitle">of {label}</span></h1>' in review and f"← All reviews of {label}</a>" in review
    assert [card["title"] for card in get_json(web_client, "/api/movies?q=tt0100004")["titles"]] == [label]
    assert get_json(web_client, "/api/movies/tt0100004")["movie"]["title"] == label
    assert get_json(web_client, f"/api/reviews/{review_id}")["movie"]["title"] == label
    # no heading anywhere is a bare id
    for page in (dashboard, web_client.get("/?per_page=1000").text, web_client.get("/disagreements").text, review):
        assert not re.search(r"<h[1-4][^>]*>(<a [^>]*>)?tt\d+<", page)


def test_title_page_predictions_highlights_and_wrong_marks(web_client, web_facts):
    reviews = web_facts["by_title"]["tt0100001"]
    data = get_json(web_client, "/movies/tt0100001?analyze=1&accuracy=1")
    assert data["wrong_reviews"] == len(wrong(reviews))
    assert {r["id"] for r in data["reviews"]} == {r["id"] for r in reviews}
    by_id = {r["id"]: r for r in reviews}
    for item in data["reviews"]:
        prediction = item["predictions"]["bert"]
        assert prediction["label"] == by_id[item["id"]]["bert"]
        assert prediction["correct"] == (by_id[item["id"]]["bert"] == by_id[item["id"]]["gold"])
        assert item["gold"] == by_id[item["id"]]["gold"]
    # each review's most polarised sentence in its predicted direction
    highlights = {h["review_id"]: h for label in ("positive", "negative") for h in data["highlights"][label]}
    first = min(by_id)
    assert highlights[first]["text"] == "A wonderful, moving film."
    assert highlights[first + 4]["text"] == "Not what I hoped for at first."  # predicted negative
    assert len(data["highlights"]["positive"]) == sum(r["bert"] == "positive" for r in reviews)

    html = web_client.get("/movies/tt0100001?analyze=1&accuracy=1").text
    assert html.count('class="wrong-mark"') == len(wrong(reviews))
    assert f"{len(data['highlights']['positive'])} positive review highlights" in html
    assert 'class="hl pos" style="--a:0.42"' in html  # "A wonderful, moving film.": 0.42 log-odds
    assert "confident" in html

    filtered = get_json(web_client, "/movies/tt0100001?analyze=1&accuracy=1&wrong=1")
    assert {r["id"] for r in filtered["reviews"]} == {r["id"] for r in wrong(reviews)}
    html = web_client.get("/movies/tt0100001?analyze=1&accuracy=1&wrong=1").text
    assert html.count('<article class="review') == len(wrong(reviews))
    # the filter needs accuracy on
    assert len(get_json(web_client, "/movies/tt0100001?analyze=1&wrong=1")["reviews"]) == len(reviews)


def test_title_page_comparison_has_two_columns_and_marks_disagreements(web_client, web_facts):
    reviews = web_facts["by_title"]["tt0100001"]
    html = web_client.get("/movies/tt0100001?analyze=1&compare=1").text
    assert html.count('class="compare"') == len(reviews)
    assert html.count('class="model-col" data-model="nbsvm"') == len(reviews)
    assert html.count('class="model-col" data-model="bert"') == len(reviews)
    assert html.index('data-model="nbsvm"', html.index('class="compare"')) < html.index(
        'data-model="bert"', html.index('class="compare"')
    )
    disagreements = [r for r in reviews if r["bert"] != r["nbsvm"]]
    assert html.count('class="disagree-mark"') == len(disagreements)
    html = web_client.get("/movies/tt0100001?analyze=1&compare=1&accuracy=1").text
    assert html.count('class="wrong-mark"') == len(wrong(reviews, "bert")) + len(wrong(reviews, "nbsvm"))


def test_the_same_weight_looks_the_same_on_every_review_and_in_both_columns(web_client, web_database):
    rows = sql(
        web_database,
        "SELECT s.review_id, w.model, s.text FROM sentence_weights w JOIN sentences s ON s.id = w.sentence_id"
        " WHERE w.weight = 0.3",
    )
    assert {model for _, model, _ in rows} == {"bert", "nbsvm"} and len({review for review, _, _ in rows}) == 2
    alpha = f"--a:{0.3 / FULL_COLOUR_WEIGHT['log_odds']:.2f}"
    names = {"bert": "BERT", "nbsvm": "NB-SVM"}
    for review_id, model, sentence in rows:
        mark = f'style="{alpha}" title="{names[model]} sentence weight +0.300 toward positive">{escape(sentence)}</span>'
        assert mark in column(web_client.get(f"/reviews/{review_id}?analyze=1").text, model)
        [title_id] = sql(web_database, "SELECT title_id FROM reviews WHERE id = :id", id=review_id)[0]
        html = web_client.get(f"/movies/{title_id}?analyze=1&compare=1").text
        assert mark in column(html, model, html.index(f'id="r{review_id}"'))
    # NB-SVM's word weights are on the same scale: "great" weighs 0.3 too
    html = web_client.get("/reviews/4?analyze=1").text
    assert f'<span class="hl pos" style="{alpha}" title="NB-SVM word weight +0.300 toward positive">Great</span>' in html


def test_title_page_marks_weak_explanations_and_filters_them(web_client, web_database, web_facts):
    reviews = {r["id"] for r in web_facts["by_title"]["tt0100001"]}
    weak = weak_reviews(web_database) & reviews
    assert weak and weak != reviews and not weak_reviews(web_database, "nbsvm") & reviews
    html = web_client.get("/movies/tt0100001?analyze=1").text
    for review_id in reviews:
        card = html.split(f'id="r{review_id}"')[1].split("</article>")[0]
        assert ('<strong class="weak-mark">Weak explanation</strong>: LIME' in card) == (review_id in weak)
        assert ('<div class="text weak">' in card) == (review_id in weak)
    highlights = get_json(web_client, "/movies/tt0100001?analyze=1")["highlights"]
    marked = {h["review_id"] for entries in highlights.values() for h in entries if h["weak"]}
    assert marked == weak and html.count('<span class="weak-tag">weak explanation</span>') == len(weak)
    link = "/movies/tt0100001?analyze=1&amp;weak=1"
    assert f'<a href="{link}">Show only the {len(weak)} reviews with a weak explanation</a>' in html
    assert "R² 0.15" in html and "(agreement 0.30)" in html  # the reasons, from the fixture's figures

    data = get_json(web_client, "/movies/tt0100001?analyze=1&weak=1")
    assert data["view"]["weak_only"] is True and data["weak_reviews"] == len(weak)
    assert {r["id"] for r in data["reviews"]} == weak
    assert all(r["weak"] and r["trust"]["bert"]["reasons"] for r in data["reviews"])
    html = web_client.get("/movies/tt0100001?analyze=1&weak=1").text
    assert html.count('<article class="review') == len(weak)
    assert 'href="/reviews/1?analyze=1"' in html  # links to other pages drop the filter
    assert '<a href="/movies/tt0100001?analyze=1">Show all' in html
    # with both models, a review is weak when either explanation is; without Analyze the filter is off
    assert {r["id"] for r in get_json(web_client, "/movies/tt0100001?analyze=1&compare=1&weak=1")["reviews"]} == weak
    assert len(get_json(web_client, "/movies/tt0100001?weak=1")["reviews"]) == len(reviews)


def test_title_page_comparison_marks_only_the_weak_model(web_client, web_database):
    html = web_client.get("/movies/tt0100001?analyze=1&compare=1").text
    [first] = sorted(weak_reviews(web_database) & {1, 2, 3, 4, 5})[:1]
    start = html.index(f'id="r{first}"')
    bert = column(html, "bert", start)
    assert 'class="weak-note"' in bert and '<div class="text weak">' in bert
    assert "weak" not in column(html, "nbsvm", start)


def test_title_page_hides_other_splits(web_client, web_facts):
    data = get_json(web_client, "/movies/tt0100002?analyze=1")
    assert {r["id"] for r in data["reviews"]} == {r["id"] for r in web_facts["by_title"]["tt0100002"]}
    assert not {r["id"] for r in data["reviews"]} & set(web_facts["hidden"])
    user = [r for r in data["reviews"] if r["source"] == "user"]
    assert len(user) == 1
    html = web_client.get("/movies/tt0100002?analyze=1&accuracy=1").text
    assert "posted by a user" in html and "Gold label: unknown" in html


# --- review, disagreements, about ------------------------------------------------------------


def test_review_page(web_client, web_facts):
    review = web_facts["by_title"]["tt0100001"][3]  # "Great cast, great score, great locations. ..."
    html = web_client.get(f"/reviews/{review['id']}?analyze=1&accuracy=1").text
    assert html.count('class="model-col"') == 2
    table = html.split('<table class="weights">')[1].split("</table>")[0]
    assert table.count("<tr>") == web_facts["sentences"][review["id"]] + 2  # plus the header and the intercepts
    assert "Starting point: the fit with every sentence removed" in table.split("<tfoot>")[1]
    word_view = html.split('class="text word-view">')[1].split("</div>")[0]
    assert len(re.findall(r'<span class="hl pos"[^>]*>great</span>', word_view, re.I)) == 3
    assert "Gold label:" in html and "wrong-mark" in html
    # whole words only: "act" is weighted in another review but must not mark "actors"
    other = web_facts["by_title"]["tt0100001"][2]
    word_view = web_client.get(f"/reviews/{other['id']}?analyze=1").text.split("word-view")[1]
    assert ">actors<" not in word_view and "actors" in word_view
    # without Analyze: the text alone
    html = web_client.get(f"/reviews/{review['id']}").text
    assert "model-col" not in html and "Great cast" in html
    data = get_json(web_client, f"/reviews/{review['id']}.json?analyze=1")
    assert set(data["review"]["predictions"]) == {"nbsvm", "bert"}
    assert data["words"][0] == {"word": "great", "weight": 0.3}


def explanation_figures(url, review_id, model) -> dict:
    [row] = sql(
        url,
        "SELECT * FROM explanations WHERE review_id = :id AND model = :model AND level = 'sentence'",
        id=review_id, model=model,
    )  # fmt: skip
    return dict(row._mapping)


def test_review_page_says_how_far_to_trust_each_explanation(web_client, web_database):
    weak, good = 1, 2  # BERT's explanation of the first review is weak, of the second good
    assert weak in weak_reviews(web_database) and good not in weak_reviews(web_database)
    html = web_client.get(f"/reviews/{good}?analyze=1").text
    figures = explanation_figures(web_database, good, "bert")
    panel = column(html, "bert").split('<div class="trust">')[1]
    assert f"<dt>R² {figures['score']:.2f}.</dt> <dd>The sentence weights explain most of this prediction.</dd>" in panel
    assert f"<dt>Stability {figures['stability']:.2f}.</dt> <dd>Two runs with different seeds rank the sentences alike.</dd>" in panel
    drop, chance = figures["comprehensiveness"], figures["random_comprehensiveness"]
    assert (
        f"costs {drop * 100:.0f} points of the model's confidence in positive; removing a random one costs"
        f" {chance * 100:.0f} points on average: {drop / chance:.1f}× as much."
    ) in panel
    assert f"costs {figures['sufficiency'] * 100:.0f} points; keeping only a random one costs {figures['random_sufficiency'] * 100:.0f} points" in panel
    assert f"removing the top one scores {figures['normalised_comprehensiveness']:.2f} and keeping it {figures['normalised_sufficiency']:.2f}" in panel
    assert "weak" not in column(html, "bert")

    html = web_client.get(f"/reviews/{weak}?analyze=1").text
    bert = column(html, "bert")
    assert '<strong class="weak-mark">Weak explanation</strong>' in bert and '<div class="text weak">' in bert
    panel = bert.split('<div class="trust">')[1]
    assert "Only a rough guide: the sentence weights explain little of this prediction." in panel
    assert "rank the sentences differently" in panel and "no better than chance" in panel
    assert '<div class="trust">' in column(html, "nbsvm") and "weak" not in column(html, "nbsvm")
    # the JSON twin carries the same figures
    data = get_json(web_client, f"/reviews/{weak}.json?analyze=1")
    record = next(e for e in data["explanations"] if e["model"] == "bert" and e["level"] == "sentence")
    stored = explanation_figures(web_database, weak, "bert")
    assert record["quality"] == {name: stored[name] for name in record["quality"]} and record["weak"] is True
    assert data["review"]["trust"]["bert"]["weak"] and not data["review"]["trust"]["nbsvm"]["weak"]
    assert "weight_scale" not in data and "word_scale" not in data


def render_panel(score, **quality):
    panel = templates.env.get_template("_macros.html").module.trust_panel
    figures = Quality(target="log_odds", **quality).as_dict()
    return str(panel({"score": score, "reading": fit_reading(score), "quality": figures}, "negative"))


def test_trust_panel_of_a_long_and_of_a_one_sentence_review():
    long = render_panel(
        0.5, stability=0.6, top_k=3, comprehensiveness=0.004, random_comprehensiveness=0.01, sufficiency=-0.03,
        random_sufficiency=0.2, normalised_comprehensiveness=0.0, normalised_sufficiency=1.0,
        comprehensiveness_top=0.42, random_comprehensiveness_top=0.0, sufficiency_top=0.1, random_sufficiency_top=0.3,
    )  # fmt: skip
    assert "The sentence weights explain part of this prediction." in long
    assert "rank the sentences broadly alike" in long
    assert "<dt>Removing the top sentence</dt> <dd>costs 0.4 points of the model's confidence in negative" in long
    assert "no better than chance" in long and "<dt>Keeping only the top sentence</dt> <dd>adds 3 points;" in long
    assert "<dt>Removing the top 20 % (3 sentences)</dt> <dd>costs 42 points; removing as many random ones costs nothing: more than chance." in long
    assert "<dt>Keeping only the top 20 %</dt> <dd>costs 10 points; keeping as many random ones costs 30 points.</dd>" in long
    one = render_panel(0.9, top_k=1)  # one sentence: no stability rank, no faithfulness
    assert "No second run was recorded." in one and "nothing to compare" in one
    assert "Removing" not in one and "Normalised" not in one


def test_disagreements(web_client, web_facts):
    expected = [r for r in web_facts["reviews"] if r["bert"] != r["nbsvm"]]
    data = get_json(web_client, "/disagreements")
    assert data["count"] == len(expected)
    assert {r["id"] for r in data["reviews"]} == {r["id"] for r in expected}
    assert data["right"]["bert"] == sum(r["gold"] == r["bert"] for r in expected)
    assert data["right"]["nbsvm"] == sum(r["gold"] == r["nbsvm"] for r in expected)
    assert data["right"]["unknown"] == sum(r["gold"] is None for r in expected)
    html = web_client.get("/disagreements").text
    assert html.count('<article class="review disagreement"') == len(expected)
    assert html.count('class="model-col"') == 2 * len(expected)
    assert html.count(">BERT was right<") == data["right"]["bert"]
    assert html.count(">NB-SVM was right<") == data["right"]["nbsvm"]


def test_about_page_shows_metrics_charts_and_timings(web_client):
    html = web_client.get("/about").text
    for figure in ("87.7%", "77.9%", "75.0%", "66.7%", "872", "882", "801", "757"):
        assert figure in html
    # the training reviews the build took (the run's counts), not the 500 its settings wanted
    assert "the same 2 training reviews" in html and "2 labelled reviews" in html and "500 labelled" not in html
    assert html.count('<svg class="chart"') == 3 + 4  # calibration, learning curve, the trust histograms
    assert "Learning curve" in html
    assert "1 h 2 min" in html  # explain: 3,725 s
    assert "all-MiniLM-L6-v2" in html
    data = get_json(web_client, "/about.json")
    assert data["models"][1]["sets"]["eval"]["confusion"] == [[872, 128], [118, 882]]
    assert [t["step"] for t in data["timings"]] == ["data", "nbsvm", "bert", "predict", "explain", "evaluate"]


def test_about_says_a_build_without_rationales_did_not_compare_the_highlights_with_people_s(web_client):
    section = web_client.get("/about").text.split('aria-labelledby="rationales-h"')[1].split("</section>")[0]
    assert "Not measured in this build" in section and "--rationales" in section
    assert get_json(web_client, "/about.json")["rationales"] == {"state": "skipped"}


def test_about_says_a_build_from_before_the_word_shares_step_did_not_check_bert_s_words(web_client):
    assert get_json(web_client, "/about.json")["word_shares"] == {"state": "skipped"}
    assert "it was made before the build checked BERT's words" in web_client.get("/about").text


def curve_section(html: str) -> str:
    return html.split('aria-labelledby="curve-h"')[1].split("</section>")[0]


def curve_rows(html: str) -> list[tuple[str, ...]]:
    """The learning curve table's body: size, then each model's figures."""
    body = html.split("<tbody>")[1].split("</tbody>")[0]
    return [tuple(re.findall(r'class="num">([^<]*)<', row)) for row in body.split("<tr>")[1:]]


def about_with_run(tmp_path, run: dict) -> tuple[str, dict]:
    """/about and its JSON twin, on a fixture database whose run record is ``run``."""
    url = build_web_database(tmp_path / "textflix.db", run)
    with TestClient(create_app(Settings(database_url=url))) as client:
        return client.get("/about").text, get_json(client, "/about.json")


def test_about_draws_the_learning_curve_with_error_bars_and_a_table(web_client):
    stored = RUN["metrics"]["learning_curve"]
    assert get_json(web_client, "/about.json")["learning_curve"] == {**stored, "markers": []}
    html = curve_section(web_client.get("/about").text)

    def figures(runs):
        return "–" if runs is None else f"{fmean(runs):.3f} ± {stdev(runs):.3f}"

    points = [(m, size, runs) for m in MODELS for size, runs in zip(stored["sizes"], stored[m]["runs"]) if runs]
    assert html.count('<g class="point">') == html.count('<path class="error m-') == len(points) == 6 + 3
    for model, size, runs in points:
        assert f"<title>{DISPLAY_NAMES[model]} at {size:,} labels: {figures(runs)} over 3 seeds</title>" in html
    assert "<title>BERT at 200 labels: 0.812 ± 0.011 over 3 seeds</title>" in html
    assert curve_rows(html) == [
        (f"{size:,}", *(figures(stored[m]["runs"][i]) for m in MODELS)) for i, size in enumerate(stored["sizes"])
    ]
    assert curve_rows(html)[-1] == ("5,000", "0.850 ± 0.010", "–")
    assert "mean ± standard deviation over 3 seeds" in html
    assert "BERT is trained beyond the training size (500 labels) only when the build runs on a GPU" in html
    assert "m-distill" not in html and "m-teacher" not in html and "<tfoot>" not in html


def test_about_marks_a_distill_build_s_served_model_and_its_teacher(tmp_path):
    page, data = about_with_run(tmp_path, DISTILL_RUN)
    html = curve_section(page)
    distilled, teacher = "BERT, distilled (500 labels + 4,000 teacher labels)", "teacher (all-mpnet-base-v2)"
    assert data["learning_curve"]["markers"] == [
        {"kind": "distill", "label": distilled, "size": 500, "accuracy": 0.889},
        {"kind": "teacher", "label": teacher, "size": 500, "accuracy": 0.903},
    ]
    assert f"<title>{distilled}: 0.889, one run</title>" in html and f"<title>{teacher}: 0.903, one run</title>" in html
    assert html.count('class="marker m-distill"') == html.count('class="marker m-teacher"') == 2  # point, legend
    assert html.count('<g class="point">') == 6 + 3 + 2
    footer = html.split("<tfoot>")[1].split("</tfoot>")[0]
    assert re.findall(r'<th scope="row" colspan="2">([^<]*)</th><td class="num">([^<]*)</td>', footer) == [
        (distilled, "0.889"),
        (teacher, "0.903"),
    ]
    facts = page.split('<dl class="facts">')[1].split("</dl>")[0]
    assert "for 2 epochs on the 500 labelled reviews plus 4,000 unlabeled reviews of the IMDB train split" in facts
    assert "<dt>Teacher</dt><dd>The pretrained encoder <code>sentence-transformers/all-mpnet-base-v2</code>" in facts
    assert "It reads BERT's texts of one sentence" in facts and "not shown on the site" not in facts
    for reviews_labelled, whole in ((None, "2,000"), (0, "0")):  # a build before --label-reviews, one with it off
        steps = DISTILL_RUN["steps"]
        labels = {**steps["pseudo_label"], "unlabeled": 2000, "teacher_cuts": 7866}
        labels |= {} if reviews_labelled is None else {"reviews_labelled": reviews_labelled}
        teacher_labelled = 7866 + (2000 if reviews_labelled is None else 0)
        run = {**DISTILL_RUN, "steps": {**steps, "pseudo_label": labels,
                                        "bert": {**steps["bert"], "teacher_labelled": teacher_labelled}}}  # fmt: skip
        page, _ = about_with_run(tmp_path / str(reviews_labelled), run)
        assert (f"on the 500 labelled reviews plus {teacher_labelled:,} texts of 2,000 unlabeled reviews of the IMDB "
                f"train split ({whole} reviews whole, 7,866 runs of their sentences; never a test text), labelled by a "
                "teacher") in page  # fmt: skip
    assert "(temperature 1.62), fitted on 5 held-out folds of the training reviews" in facts
    assert ("BERT's log-odds are offset by -0.41, so that its mean probability of \"positive\" over 1,000 "
            "unlabeled reviews of the archive is the training reviews' share of positive ones (50 %)") in facts


def test_about_says_how_bert_was_calibrated_by_a_build_without_an_offset(tmp_path):
    tempered_only = {"seconds": 60.0, "folds": 5, "temperature": 1.3}  # a record from before --prior-reviews
    page, _ = about_with_run(tmp_path, {**RUN, "steps": {**RUN["steps"], "calibrate": tempered_only}})
    facts = page.split('<dl class="facts">')[1].split("</dl>")[0]
    assert "<dd>BERT's probabilities are tempered (temperature 1.30), fitted on 5 held-out folds" in facts
    assert "offset" not in facts


def test_about_says_when_bert_reads_sentence_by_sentence(tmp_path, web_client):
    page, _ = about_with_run(tmp_path, {**RUN, "config": {**RUN["config"], "pooling": "sentences"}})
    facts = page.split('<dl class="facts">')[1].split("</dl>")[0]
    assert "<dt>Sentence by sentence</dt>" in facts and "is the sum of its sentences' scores" in facts
    assert "longer than 512 tokens it reads the first and last sentences" in facts and "window of" not in facts
    assert "Sentence by sentence" not in web_client.get("/about").text  # the checkpoint's own head


def test_about_says_how_far_a_build_still_running_has_come(tmp_path, web_client):
    progress = {"step": "curve", "doing": "the learning curve is being computed", "done": 4, "total": 27, "unit": "models"}
    page, data = about_with_run(tmp_path, {**RUN, "status": "running", "progress": progress})
    line = "The learning curve is being computed: 4 of 27 models. This page shows the result once the build has finished."
    assert f'<p class="note build-progress" role="status">{line}</p>' in page
    assert data["build_progress"] == line
    assert "build-progress" not in web_client.get("/about").text  # a finished build


def test_about_shows_a_dash_for_what_a_new_build_has_not_counted_yet(tmp_path):
    page, _ = about_with_run(tmp_path, {**RUN, "status": "running", "counts": {}, "steps": {}, "metrics": {}})
    assert "<dt>Catalogue</dt><dd>– test-split reviews of – titles" in page  # was a 500 during the data step


def test_about_does_not_show_the_progress_of_a_build_whose_process_has_ended(tmp_path):
    progress = {"step": "curve", "doing": "the learning curve is being computed", "done": 4, "total": 27, "unit": "models"}
    live = {**progress, "builder": this_process()}  # this test's process: running
    _, data = about_with_run(tmp_path / "live", {**RUN, "status": "running", "progress": live})
    assert data["build_progress"].startswith("The learning curve is being computed: 4 of 27 models.")
    stopped = "The build stopped before it had finished (its process, pid {}, has ended)"
    for reaped in (True, False):  # gone, or a zombie that its parent has not waited for
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        builder = {"host": socket.gethostname(), "pid": process.pid, "started": psutil.Process(process.pid).create_time()}
        process.kill()
        if reaped:
            process.wait()
        else:
            while psutil.Process(process.pid).status() != psutil.STATUS_ZOMBIE:
                time.sleep(0.01)
        page, data = about_with_run(tmp_path / f"reaped-{reaped}", {**RUN, "status": "running", "progress": {**progress, "builder": builder}})
        assert data["build_progress"].startswith(stopped.format(process.pid)) and "`textflix build`" in data["build_progress"]
        assert "being computed" not in page
        process.wait()
    # the same pid taken by another process since: not the builder
    builder = {**this_process(), "started": this_process()["started"] - 1}
    _, data = about_with_run(tmp_path / "reused", {**RUN, "status": "running", "progress": {**progress, "builder": builder}})
    assert data["build_progress"].startswith(stopped.format(os.getpid()))
    # a build on another machine (say, another container on the same database) cannot be checked: shown as it says
    elsewhere = {**progress, "builder": {"host": "another-machine", "pid": 1, "started": 0.0}}
    _, data = about_with_run(tmp_path / "elsewhere", {**RUN, "status": "running", "progress": elsewhere})
    assert data["build_progress"].startswith("The learning curve is being computed")


def test_about_still_draws_a_curve_recorded_before_seeds(tmp_path):
    page, data = about_with_run(tmp_path, OLD_CURVE_RUN)
    html = curve_section(page)
    old = OLD_CURVE_RUN["metrics"]["learning_curve"]
    curve = data["learning_curve"]
    assert curve["sizes"] == old["sizes"] and curve["seeds"] == 1 and curve["markers"] == []
    for model in MODELS:
        assert curve[model] == {
            "mean": old[model],
            "std": [None] * len(old[model]),
            "runs": [None if value is None else [value] for value in old[model]],
        }
    assert html.count('<g class="point">') == 5 + 3
    assert "<title>BERT at 200 labels: 0.820 over 1 seed</title>" in html
    assert '<path class="error' not in html and "±" not in html  # one seed: no spread to draw
    assert curve_rows(html) == [
        ("100", "0.550", "0.700"),
        ("200", "0.620", "0.820"),
        ("500", "0.780", "0.880"),
        ("1,000", "0.810", "–"),
        ("10,000", "0.850", "–"),
    ]


def test_about_page_sums_up_the_trust_in_explanations(web_client, web_database):
    data = get_json(web_client, "/about.json")["explanation_quality"]
    html = web_client.get("/about").text
    section = html.split('aria-labelledby="trust-h"')[1].split("</section>")[0]
    assert [q["model"] for q in data["models"]] == ["nbsvm", "bert"]
    for q in data["models"]:
        rows = sql(
            web_database,
            "SELECT e.* FROM explanations e JOIN reviews r ON r.id = e.review_id"
            " WHERE r.split = 'catalogue' AND e.level = 'sentence' AND e.model = :model",
            model=q["model"],
        )
        figures = [row._mapping for row in rows]
        assert q["explanations"] == len(figures)
        assert q["figures"]["score"]["mean"] == pytest.approx(sum(f["score"] for f in figures) / len(figures))
        assert sum(q["figures"]["stability"]["histogram"]) == len(figures)
        assert q["faithfulness"]["random_sufficiency"] == pytest.approx(
            sum(f["random_sufficiency"] for f in figures) / len(figures)
        )
        assert q["weak"] == len(weak_reviews(web_database, q["model"]))
        [(empty,)] = sql(
            web_database,
            "SELECT COUNT(*) FROM (SELECT s.review_id FROM sentences s JOIN sentence_weights w ON w.sentence_id = s.id"
            " WHERE w.model = :model GROUP BY s.review_id HAVING MAX(ABS(w.weight)) < :negligible)",
            model=q["model"], negligible=NEGLIGIBLE_WEIGHT["log_odds"],
        )  # fmt: skip
        assert q["empty"] == empty
        least = sql(
            web_database,
            "SELECT review_id FROM explanations WHERE model = :model AND level = 'sentence'"
            " ORDER BY normalised_comprehensiveness, comprehensiveness, review_id LIMIT 5",
            model=q["model"],
        )
        assert [r["review_id"] for r in q["least_faithful"]] == [review_id for (review_id,) in least]
        listed = section.split(f'<div data-model="{q["model"]}">')[1].split("</ol>")[0]
        assert re.findall(r'href="/reviews/(\d+)\?analyze=1"', listed) == [str(review_id) for (review_id,) in least]
    bert = data["models"][1]
    assert bert["weak"] == 5 and f"{bert['weak'] / bert['explanations']:.0%} (5)" in section
    assert "Edin et al. 2024" in section and section.count('<svg class="chart"') == 4
    assert "Removing the top sentence (higher is better)" in section
    assert "every catalogue review, user-posted ones included" in section


# --- JSON twins, escaping, errors, hosts -----------------------------------------------------

PAGES = [
    "/",
    "/?analyze=1&accuracy=1&compare=1",
    "/movies/tt0100002",
    "/movies/tt0100002?analyze=1&accuracy=1&compare=1",
    "/movies/tt0100004?analyze=1",
    "/reviews/8",
    "/reviews/8?analyze=1&accuracy=1",
    "/disagreements",
    "/about",
]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_answers_json_both_ways(web_client, page):
    path, _, query = page.partition("?")
    twin = ("/index.json" if path == "/" else path + ".json") + (f"?{query}" if query else "")
    by_accept = get_json(web_client, page)
    by_suffix = web_client.get(twin)
    assert by_suffix.status_code == 200
    assert by_suffix.json() == by_accept
    html = web_client.get(page)
    assert html.headers["content-type"].startswith("text/html")
    assert f'href="{twin.replace("&", "&amp;")}"' in html.text


@pytest.mark.parametrize("page", PAGES)
def test_pages_load_nothing_from_other_hosts(web_client, page):
    html = web_client.get(page).text
    references = re.findall(r'(?:src|href|action)\s*=\s*"([^"]*)"', html)
    assert references
    for reference in references:
        assert not re.match(r"^(?:[a-z][a-z0-9+.-]*:)?//", reference, re.I), reference
    assert "@import" not in html and "url(http" not in html


def test_review_text_and_metadata_are_escaped(web_client):
    for page in ("/movies/tt0100002?analyze=1&compare=1", "/reviews/8?analyze=1", "/reviews/8", "/disagreements"):
        html = web_client.get(page).text
        assert XSS_SCRIPT not in html and XSS_IMG not in html, page
        assert "<img" not in html and "<script>" not in html
        if "disagreements" not in page:
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
            assert "&lt;img src=x onerror=alert(1)&gt;" in html
    html = web_client.get("/?analyze=1").text
    assert "Café &lt;i&gt;Noir&lt;/i&gt; &amp; Friends" in html
    html = web_client.get("/movies/tt0100003").text
    assert "&lt;b&gt;tags&lt;/b&gt; &amp; &#34;quotes&#34;" in html
    assert "<i>Noir</i>" not in html and "<b>tags</b>" not in html


@pytest.mark.parametrize("path", ["/movies/tt9999999", "/movies/tt0100005", "/reviews/99999", "/reviews/15", "/nowhere"])
def test_unknown_ids_give_a_404_page(web_client, web_facts, path):
    if path == "/reviews/15":
        path = f"/reviews/{web_facts['hidden'][0]}"  # a training review is not in the catalogue
    response = web_client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "<h1>Not found</h1>" in response.text
    response = web_client.get(path, headers={"Accept": "application/json"})
    assert response.status_code == 404
    assert "detail" in response.json()


def test_missing_database_gives_one_clear_error_page(tmp_path, caplog):
    missing = tmp_path / "nothing-here.db"
    with caplog.at_level(logging.ERROR, logger="textflix"):
        app = create_app(Settings(database_url=f"sqlite:///{missing}"))
    assert any("textflix build" in record.getMessage() for record in caplog.records)
    with TestClient(app) as client:
        for path in ("/", "/movies/tt0100001", "/reviews/1", "/disagreements", "/about"):
            response = client.get(path)
            assert response.status_code == 503
            assert "textflix build" in response.text
            assert "Traceback" not in response.text
            assert "<h1>The database is not built yet</h1>" in response.text
        assert client.get("/index.json").json() == {
            "detail": [{"field": None, "message": "There is no database yet: run `textflix build` to create it."}]
        }
        assert client.get("/api/health").json()["database"] == "unavailable"
    assert not missing.exists()


def test_unreadable_database_gives_an_error_page_not_a_trace(tmp_path, caplog):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with TestClient(create_app(Settings(database_url=f"sqlite:///{empty}"))) as client:
        with caplog.at_level(logging.ERROR, logger="textflix"):
            response = client.get("/?analyze=1")
    assert response.status_code == 503
    assert "textflix build" in response.text and "Traceback" not in response.text
    assert any("textflix build" in record.getMessage() for record in caplog.records)


def test_health_still_answers(web_client):
    assert web_client.get("/api/health").json()["database"] == "ok"


def test_static_files_are_served(web_client):
    assert web_client.get("/static/textflix.css").status_code == 200
    assert web_client.get("/static/textflix.js").status_code == 200


# --- /analyze -------------------------------------------------------------------------------


@pytest.fixture
def analyzer_client(web_database):
    app = create_app(Settings(database_url=web_database, max_text_chars=10_000))
    analyzer = use_analyzer(app, FakeAnalyzer())
    with TestClient(app) as client:
        yield client, analyzer


def test_analyze_shows_both_models_and_highlights(analyzer_client):
    client, analyzer = analyzer_client
    review = f"A great cast. The plot is boring and bad. {XSS_IMG}"
    response = client.post("/analyze", data={"text": review})
    assert response.status_code == 200
    html = response.text
    assert analyzer.calls == [([review], True)]
    assert html.count('class="model-col"') == 2
    assert '<span class="hl pos"' in html and '<span class="hl neg"' in html
    assert XSS_IMG not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "A great cast. The plot is boring and bad." in html  # in the textarea, ready to edit
    # a link fills the form in, but only a POST makes the server work
    linked = client.get("/analyze", params={"text": review}).text
    assert 'class="model-col"' not in linked and "A great cast. The plot is boring and bad." in linked
    assert len(analyzer.calls) == 1
    data = client.post("/analyze.json", json={"text": review}).json()
    assert set(data["result"]["predictions"]) == {"bert", "nbsvm"}
    assert data["result"]["predictions"]["bert"]["label"] == "negative"
    assert len(data["result"]["sentences"]) == 3


class ExplainingAnalyzer(FakeAnalyzer):
    """The stand-in analyzer with the explanation figures the real one returns: BERT's weak."""

    async def analyze(self, texts, explain, words=False):
        results = await super().analyze(texts, explain)
        explanations = {}
        for model, score, stability in (("bert", 0.1, 0.3), ("nbsvm", 0.9, 0.95)):
            quality = {"target": "log_odds", "stability": stability}
            figures = {"samples": 64, "intercept": 0.0, "score": score, "quality": quality}
            explanations[model] = {**figures, **assessment(score, quality)}
        return [result.model_copy(update={"explanations": ModelExplanations(**explanations)}) for result in results]


def test_analyze_marks_a_weak_explanation(web_database):
    app = create_app(Settings(database_url=web_database))
    use_analyzer(app, ExplainingAnalyzer())
    with TestClient(app) as client:
        html = client.post("/analyze", data={"text": "A great cast. The plot is boring."}).text
    bert, nbsvm = column(html, "bert"), column(html, "nbsvm")
    assert "Weak explanation</strong>: LIME&#39;s linear fit explains almost none of the prediction (R² 0.10)" in bert
    assert '<div class="text weak">' in bert and '<span class="hl pos" style="--a:0.31"' in bert
    assert "weak" not in nbsvm and '<span class="hl pos" style="--a:0.16"' in nbsvm


def test_analyze_form_and_input_errors(analyzer_client):
    client, analyzer = analyzer_client
    response = client.get("/analyze")
    assert response.status_code == 200 and "<textarea" in response.text and "model-col" not in response.text
    response = client.post("/analyze", data={"text": "   "})
    assert response.status_code == 422 and "Paste a review" in response.text
    response = client.post("/analyze", data={"text": "x" * 10_001})
    assert response.status_code == 422 and "the limit is 10,000" in response.text
    assert analyzer.calls == []


def test_analyze_without_models_says_so(web_client):
    response = web_client.post("/analyze", data={"text": "A fine film."})
    assert response.status_code == 503
    assert "models are not loaded" in response.text
    assert "<textarea" in response.text and "A fine film." in response.text
    assert web_client.get("/analyze.json").status_code == 503


# --- highlighting ---------------------------------------------------------------------------


def test_highlight_follows_spans_and_escapes():
    text = "Good <b>one</b>.\n\nBad & sad."
    sentences = [
        {"start": 0, "end": 16, "text": text[0:16], "weights": {"bert": 0.5}},
        {"start": 18, "end": 28, "text": text[18:28], "weights": {"bert": -0.25}},
    ]
    html = str(highlight(cut(text, sentences), "bert", "log_odds"))
    assert html == (
        '<span class="hl pos" style="--a:0.50" title="BERT sentence weight +0.500 toward positive">'
        "Good &lt;b&gt;one&lt;/b&gt;.</span>\n\n"
        '<span class="hl neg" style="--a:0.25" title="BERT sentence weight -0.250 toward negative">Bad &amp; sad.</span>'
    )
    # full colour at FULL_COLOUR_WEIGHT of the weights' space; log-odds when it is unknown
    assert 'style="--a:1.00"' in str(highlight(cut(text, sentences), "bert", "probability"))
    assert str(highlight(cut(text, sentences), "bert")) == html
    # spans that do not fit the text: the sentences are shown as they are
    broken = [{**sentences[0], "start": 40, "end": 50}]
    assert "Good &lt;b&gt;" in str(highlight(cut(text, broken), "bert"))
    assert str(highlight(cut(text, sentences), None)) == "Good &lt;b&gt;one&lt;/b&gt;.\n\nBad &amp; sad."


def test_word_highlight_is_whole_word_and_case_insensitive():
    html = str(word_highlight("Great acting, great actors. act!", [{"word": "great", "weight": 0.2}, {"word": "act", "weight": -0.1}]))
    assert html.count('class="hl pos"') == 2
    assert html.count('class="hl neg"') == 1 and ">act</span>!" in html


def test_about_shows_one_line_reviews_and_the_length_table(tmp_path):
    sst2 = {"accuracy": 0.8, "f1": 0.81, "confusion": [[340, 88], [86, 358]], "ece": 0.041, "n": 872,
            "calibration": {"prob_pred": [0.2, 0.8], "prob_true": [0.25, 0.75], "count": [430, 442]}}  # fmt: skip
    lengths = {"bands": ["1", "2–3", "4–6", "7+"], "n": [2000, 4000, 5500, 1500],
               "nbsvm": [0.6, 0.66, 0.71, 0.78], "bert": [0.695, 0.762, 0.803, None]}  # fmt: skip
    metrics = {**RUN["metrics"], "lengths": lengths}
    metrics["bert"] = {**metrics["bert"], "sst2": sst2}
    metrics["nbsvm"] = {**metrics["nbsvm"], "sst2": {**sst2, "accuracy": 0.62}}
    page, data = about_with_run(tmp_path, {**RUN, "metrics": metrics})
    assert data["lengths"] == lengths and data["models"][1]["sets"]["sst2"]["n"] == 872
    rows = re.findall(r'<tr><th scope="row">([^<]*)</th><td class="num">([^<]*)</td>\s*<td class="num">([^<]*)</td>\s*'
                      r'<td class="num">([^<]*)</td>', page.split('class="scores lengths"')[1].split("</table>")[0])  # fmt: skip
    assert rows == [("1", "2,000", "60.0%", "69.5%"), ("2–3", "4,000", "66.0%", "76.2%"),
                    ("4–6", "5,500", "71.0%", "80.3%"), ("7+", "1,500", "78.0%", "–"),
                    ("1 (SST-2)", "872", "62.0%", "80.0%")]  # fmt: skip
    assert "One-line reviews (SST-2) accuracy" in page and "One-line reviews (SST-2) ECE" in page
    # a run without SST-2 shows neither its rows nor its line in the length table
    plain, _ = about_with_run(tmp_path / "plain", {**RUN, "metrics": {**RUN["metrics"], "lengths": lengths}})
    assert "SST-2" not in plain and 'class="scores lengths"' in plain


# --- a catalogue of games: a build on a file of reviews --------------------------------------------

ODD_ID = GAMES["tt0100003"]["title_id"]  # a slash, spaces, "#", "?" and letters outside ASCII
ODD_HREF = "/items/mods%2Fearly%20access%20%231%20%C2%AB%CE%B2%C2%BB%3F"


def visible(html: str) -> str:
    """The text a reader sees of a page's body, its white space made single."""
    return " ".join(unescape(re.sub(r"<[^>]+>", "", html.split("<body", 1)[1].split(">", 1)[1])).split())


def item_heading(html: str) -> str:
    """The item's part of its page (name and facts), its white space removed."""
    return re.sub(r"\s+", "", html.split('<article class="movie">')[1].split("</article>")[0])


def test_a_game_catalogue_s_pages_speak_of_games(game_client):
    html = game_client.get("/").text
    seen = visible(html)
    assert "13 total reviews of 4 games" in seen and "Search games" in seen and "4 games, sorted by most" in seen
    assert 'placeholder="name or id"' in html and 'aria-label="Sort games"' in html
    assert f"sentiment of reviews of games ({GAME_CORPUS})" in seen
    assert "No games match “zzz”. Show every game." in visible(game_client.get("/?q=zzz").text)
    for path in ("/", "/?analyze=1&compare=1&sort=title", "/items/570?analyze=1", "/disagreements", "/about"):
        words = visible(game_client.get(path).text).lower().replace("eraser's movies.tar.gz", "")  # its own name
        assert not re.search("title|movie|imdb|test-split", words), path
    assert game_client.get("/?page=9", headers={"Accept": "application/json"}).json()["detail"][0]["message"] == (
        "There is no page 9: 4 games, 1 pages of 48."
    )


def test_a_game_s_page_shows_its_name_and_no_empty_movie_field(game_client):
    for query in ("", "?analyze=1&accuracy=1&compare=1"):
        assert item_heading(game_client.get(f"/items/570{query}").text) == "<h1>Dota2</h1>"
    assert re.sub(r"\s+", "", game_client.get("/?sort=title").text).count('<pclass="meta">') == 0
    graded = game_client.get("/items/570?analyze=1&accuracy=1").text  # a file's ratings have no stars out of 10
    assert "(rated 9)" in graded and "stars" not in graded
    for card in get_json(game_client, "/index.json")["titles"]:
        assert (card["year"], card["runtime_min"], card["plot"], card["genres"]) == (None, None, None, [])


def test_a_game_without_a_name_goes_by_its_id_on_every_page_and_in_the_api(game_client):
    assert item_heading(game_client.get("/items/730").text) == (
        '<h1>730</h1><pclass="note">Thereviewsgivethisgamenoname:itgoesbyitsid,730.</p>'
    )
    assert '<h2><a href="/items/730">730</a></h2>' in game_client.get("/?q=73").text
    review_id = get_json(game_client, "/items/730.json")["reviews"][0]["id"]
    review = game_client.get(f"/reviews/{review_id}").text
    assert '<span class="subtitle">of 730</span></h1>' in review
    assert f'href="/items/730#r{review_id}">← All reviews of 730<' in review
    assert get_json(game_client, "/api/items/730")["movie"]["title"] == "730"
    assert "Untitled" not in game_client.get("/disagreements").text + game_client.get("/?sort=title").text


def test_items_and_movies_answer_as_one_page_whatever_the_corpus(game_client, web_client):
    for client, item, link in ((game_client, "570", "/items/570"), (web_client, "tt0100001", "/movies/tt0100001")):
        assert f'<a href="{link}">' in client.get("/").text  # IMDB's links are as they were
        for query in ("", "?analyze=1&accuracy=1&compare=1"):
            pages = [get_json(client, f"/{route}/{item}{query}") for route in ("items", "movies")]
            assert pages[0] == pages[1] == client.get(f"/items/{item}.json{query}").json()
            assert all(client.get(f"/{route}/{item}{query}").status_code == 200 for route in ("items", "movies"))
    assert "/items/" not in web_client.get("/").text + web_client.get("/disagreements").text
    assert "(9/10 stars)" in web_client.get("/movies/tt0100001?analyze=1&accuracy=1").text


def test_the_json_twins_keys_are_the_same_for_games_as_for_movies(game_client, web_client):
    def keys(value):
        """``value``'s shape: the keys of its dicts, down through the first dict of each list."""
        if isinstance(value, dict):
            return {key: keys(item) for key, item in value.items()}
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return [keys(value[0])]
        return type(value).__name__

    for path in ("/index.json?analyze=1&accuracy=1&compare=1", "/about.json"):
        assert set(get_json(game_client, path)) == set(get_json(web_client, path))
    games = get_json(game_client, "/items/570.json?analyze=1&accuracy=1&compare=1")
    movies = get_json(web_client, "/movies/tt0100001.json?analyze=1&accuracy=1&compare=1")
    assert set(games) == set(movies) and set(games["movie"]) == set(movies["movie"])
    assert keys(games["reviews"][0]) == keys(movies["reviews"][0])


def test_an_item_id_of_any_character_is_linked_escaped_and_found(game_client):
    html = game_client.get("/?q=half-life").text
    assert re.search(r'<h2><a href="([^"]+)">', html).group(1) == ODD_HREF
    assert "Half-Life: Café &lt;i&gt;Noir&lt;/i&gt; &amp; Friends" in html and "<i>Noir" not in html
    page = game_client.get(ODD_HREF)
    assert page.status_code == 200 and "<h1>Half-Life: Café &lt;i&gt;Noir&lt;/i&gt; &amp; Friends</h1>" in page.text
    # the page's links to itself (its JSON twin, its switches) reach it too
    twin = re.search(r'<link rel="alternate" type="application/json" href="([^"]+)">', page.text).group(1)
    assert game_client.get(unescape(twin)).json()["movie"]["title_id"] == ODD_ID
    switch = re.search(r'href="([^"]+)" data-switch="analyze"', page.text).group(1)
    assert 'aria-checked="true" href' in game_client.get(unescape(switch)).text
    review_id = get_json(game_client, ODD_HREF)["reviews"][0]["id"]
    assert f'href="{ODD_HREF}#r{review_id}"' in game_client.get(f"/reviews/{review_id}").text
    assert get_json(game_client, f"/api/items/{ODD_HREF.removeprefix('/items/')}")["movie"]["title_id"] == ODD_ID


@pytest.mark.parametrize(
    "path", ["/items/999", "/movies/999", "/items/..%2F..%2Fabout", "/items/570%2F..", "/items/" + "5" * 65, "/items/"]
)
def test_an_unknown_item_is_a_404_that_names_it_as_a_game(game_client, path):
    response = game_client.get(path)
    assert response.status_code == 404 and "<h1>Not found</h1>" in response.text
    message = game_client.get(path, headers={"Accept": "application/json"}).json()["detail"][0]["message"]
    assert message.startswith("Game '") and message.endswith("' is not in the catalogue.")


def test_about_names_the_corpus_and_its_counts(game_client, web_client):
    assert (
        f"This build read {GAME_CORPUS}: 13 reviews of 4 games in the catalogue, 2 training and 2 evaluation reviews."
        in visible(game_client.get("/about").text)
    )
    assert (
        "This build read IMDB's archive of movie reviews: 13 reviews of 4 titles in the catalogue, 2 training and 2 "
        "evaluation reviews." in visible(web_client.get("/about").text)
    )


def test_a_file_s_items_are_items_unless_the_setting_names_them(game_database):
    with TestClient(create_app(Settings(database_url=game_database))) as client:
        html = client.get("/").text
        assert "Search items" in html and "4 items, sorted by most" in visible(html)
        assert client.get("/items/1", headers={"Accept": "application/json"}).json()["detail"][0]["message"] == (
            "Item '1' is not in the catalogue."
        )
    with TestClient(create_app(Settings(database_url=game_database, item_noun="Steam game"))) as client:
        assert "No Steam games match" in client.get("/?q=zzz").text
        assert "Steam game '1' is not in the catalogue." in unescape(client.get("/items/1").text)


@pytest.mark.parametrize(
    "given, noun, plural",
    [
        ("game", "game", "games"),
        ("  airline   lounge ", "airline lounge", "airline lounges"),
        ("box", "box", "boxes"),
        ("property", "property", "properties"),
        ("day", "day", "days"),
        ("person / people", "person", "people"),
        ("", "item", "items"),
    ],
)
def test_the_item_noun_and_its_plural(given, noun, plural):
    items = Items.of(GAME_CORPUS, Settings(item_noun=given).item_noun)
    assert (items.noun, items.plural) == (noun, plural)
    assert [items.called(count) for count in (0, 1, 2)] == [plural, noun, plural]


def test_the_item_noun_is_a_flag_of_serve_and_a_variable(monkeypatch):
    assert parse_command(["serve", "--item-noun", "hotel"]).settings.item_noun == "hotel"
    monkeypatch.setenv("TEXTFLIX_ITEM_NOUN", "product")
    assert Settings().item_noun == "product" and parse_command(["up"]).settings.item_noun == "product"
    assert parse_command(["up", "--set", "item_noun=hotel"]).settings.item_noun == "hotel"


@pytest.mark.parametrize("given", ["a/b/c", "/people", "person/", "x" * 41, "game\n"])
def test_an_item_noun_that_is_none_says_how_to_write_one(given):
    with pytest.raises(ValidationError, match="is not an item noun: write one word or a few"):
        Settings(item_noun=given)
