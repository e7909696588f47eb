"""Median server-side render time of the Textflix pages.

Builds a SYNTHETIC database (random words, random predictions, weights and explanation
quality figures: fine for render timing, not for anything the models say) or takes one
with --database, then requests every page of DESIGN §2 in every view in-process with
FastAPI's TestClient and prints one line per page: the median of --requests timed
requests, server-side (the ``Server-Timing`` header) and round trip. The default size is the default catalogue's (50 titles, 1,100 reviews of ~10
sentences, both models' predictions, sentence weights and explanations, NB-SVM word
weights, 500 training and 2,000 evaluation reviews); --titles 3581 --reviews 25000 has the
shape of the full IMDB test split (``textflix build --titles all``):

    python scripts/bench_pages.py [--titles 3581 --reviews 25000] [--database URL] [--requests 30]
        [--compare-with CHECKOUT]

``--compare-with`` measures real servers instead (``textflix serve``, over HTTP): this
checkout's and another's on the same database, each request sent to both in turn so that
both meet the same load on a shared machine, and prints the round trips side by side with
their ratio (the other checkout may predate ``Server-Timing``).

/analyze is left out: its GET is an empty form and its POST the models' work (scripts/bench_api.py).
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from app.db import (
    Explanation,
    Movie,
    Prediction,
    Review,
    Run,
    Sentence,
    SentenceWeight,
    WordWeight,
    analyze,
    make_engine,
    migrate,
)
from app.settings import Settings
from app.web.main import create_app
from model.quality import QUALITY_FIELDS

VOCABULARY = (
    "the film story acting plot great boring wonderful awful slow funny sad music scenes "
    "director cast ending script characters beautiful terrible brilliant dull moving long "
    "predictable charming clever weak strong loved hated watch again never minutes camera"
).split()


def _sentence(rng: random.Random) -> str:
    words = rng.choices(VOCABULARY, k=rng.randint(6, 16))
    return " ".join(words).capitalize() + rng.choice(".!.?.")


def explanation_row(rng: random.Random, review_id: int, model: str, level: str, sentences: int) -> dict:
    """A synthetic explanation with LIME's fit and, at sentence level, its quality figures."""
    row = dict(review_id=review_id, model=model, level=level, samples=512, intercept=rng.gauss(0, 0.5), score=rng.random())
    row.update(dict.fromkeys(QUALITY_FIELDS), target=None)  # one set of columns for every row of the insert
    if level == "sentence":
        row.update(
            target="log_odds", stability=rng.random(), top_k=max(1, sentences // 5),
            **{name: rng.uniform(-0.1, 0.6) for name in (
                "comprehensiveness", "sufficiency", "random_comprehensiveness", "random_sufficiency",
                "comprehensiveness_top", "sufficiency_top", "random_comprehensiveness_top", "random_sufficiency_top",
            )},
            normalised_comprehensiveness=rng.random(), normalised_sufficiency=rng.random(),
        )  # fmt: skip
    return row


def title_sizes(rng: random.Random, titles: int, reviews: int) -> list[int]:
    """Reviews per title, uneven like the real catalogue's (at most 30, as IMDB has per title and split)."""
    counts = [reviews // titles + (index < reviews % titles) for index in range(titles)]
    lowest = max(1, reviews // titles - 9)
    for _ in range(10 * titles):
        give, take = rng.randrange(titles), rng.randrange(titles)
        if counts[give] > lowest and counts[take] < 30 and give != take:
            counts[give] -= 1
            counts[take] += 1
    return counts


def build_database(url: str, titles: int = 50, reviews: int = 1100, seed: int = 0) -> None:
    """Fill an empty database at ``url`` with a synthetic catalogue of ``reviews`` reviews of ``titles`` titles."""
    rng = random.Random(seed)
    engine = make_engine(url)
    migrate(engine)
    movies, review_rows, predictions, sentences, weights, words, explanations = [], [], [], [], [], [], []
    for index in range(titles):
        movies.append(
            dict(
                title_id=f"tt{index:07d}",
                title=None if index % 17 == 5 else f"Synthetic Title {index}",
                year=1970 + index % 50,
                runtime_min=80 + index % 60,
                rated=rng.choice(["G", "PG", "PG-13", "R", None]),
                genres="Drama|Comedy",
                plot=" ".join(rng.choices(VOCABULARY, k=30)),
            )
        )
    sentence_id = 0
    review_id = 0

    def add_review(title_id: str, split: str, explained: bool) -> None:
        nonlocal review_id, sentence_id
        review_id += 1
        gold = rng.choice(["positive", "negative"])
        parts, spans, text = [_sentence(rng) for _ in range(rng.randint(8, 12))], [], ""
        for part in parts:
            text += " " if text else ""
            spans.append((len(text), len(text) + len(part)))
            text += part
        review_rows.append(
            dict(
                id=review_id,
                title_id=title_id,
                text=text,
                label=gold,
                rating=8 if gold == "positive" else 3,
                split=split,
                source="imdb",
                source_key=f"{split}/{review_id}",
                word_count=len(text.split()),
            )
        )
        if split == "train":
            return
        for model, accuracy in (("bert", 0.92), ("nbsvm", 0.79)):
            right = rng.random() < accuracy
            label = gold if right else ("negative" if gold == "positive" else "positive")
            confidence = rng.uniform(0.5, 1.0)
            p_positive = confidence if label == "positive" else 1 - confidence
            predictions.append(dict(review_id=review_id, model=model, label=label, p_positive=p_positive))
        if not explained:
            return
        for position, (part, (start, end)) in enumerate(zip(parts, spans, strict=True)):
            sentence_id += 1
            sentences.append(dict(id=sentence_id, review_id=review_id, position=position, start=start, end=end, text=part))
            for model in ("bert", "nbsvm"):
                weights.append(dict(sentence_id=sentence_id, model=model, weight=rng.gauss(0, 0.15)))
        for word in set(rng.sample(VOCABULARY, 20)):
            words.append(dict(review_id=review_id, model="nbsvm", word=word, weight=rng.gauss(0, 0.1)))
        for model in ("bert", "nbsvm"):
            explanations.append(explanation_row(rng, review_id, model, "sentence", len(parts)))
        explanations.append(explanation_row(rng, review_id, "nbsvm", "word", len(parts)))

    for movie, count in zip(movies, title_sizes(rng, titles, reviews), strict=True):
        for _ in range(count):
            add_review(movie["title_id"], "catalogue", True)
    for _ in range(500):
        add_review(rng.choice(movies)["title_id"], "train", False)
    for _ in range(2000):
        add_review(rng.choice(movies)["title_id"], "eval", False)

    with engine.begin() as connection:
        for table, rows in (
            (Movie, movies),
            (Review, review_rows),
            (Prediction, predictions),
            (Sentence, sentences),
            (SentenceWeight, weights),
            (WordWeight, words),
            (Explanation, explanations),
        ):
            connection.execute(insert(table), rows)
        metrics = {
            model: {
                name: {
                    "accuracy": acc,
                    "f1": acc,
                    "confusion": [[450, 50], [40, 460]],
                    "ece": 0.05,
                    "calibration": {"prob_pred": [0.1, 0.5, 0.9], "prob_true": [0.15, 0.5, 0.85], "count": [1, 1, 1]},
                    "n": 1000,
                }
                for name in ("eval", "catalogue")
            }
            for model, acc in (("bert", 0.92), ("nbsvm", 0.79))
        }
        connection.execute(
            insert(Run),
            [
                dict(
                    status="complete",
                    config={"train_size": 500, "titles": titles},
                    steps={"data": {"seconds": 1.0}},
                    counts={"titles": titles, "catalogue": reviews, "train": 500, "eval": 2000},
                    metrics=metrics,
                )
            ],
        )
    analyze(engine)  # as every build ends
    engine.dispose()


def server_ms(response) -> float:
    """The server's own time for a response, from its ``Server-Timing`` header (``app.web.timing``)."""
    timing = response.headers["server-timing"]
    return float(timing.partition("dur=")[2])


def median_ms(client: TestClient, path: str, requests: int) -> tuple[float, float]:
    """Median server-side time of a request (``Server-Timing``: from the request reaching the
    app to its answer's headers leaving, the page made whole) and median round trip through
    the test client, in ms. The round trip adds the client's and its thread hand-offs' time."""
    for _ in range(3):  # warm up: templates compiled, caches filled
        assert client.get(path).status_code == 200, path
    server, wall = [], []
    for _ in range(requests):
        start = time.perf_counter()
        response = client.get(path)
        wall.append(time.perf_counter() - start)
        assert response.status_code == 200, path
        server.append(server_ms(response))
    return statistics.median(server), statistics.median(wall) * 1000


def compare_servers(url: str, checkout: Path, pages: list[tuple[str, str]], requests: int, scratch: Path) -> None:
    """Every page from a server of this checkout and one of ``checkout``, alternating."""
    # Imported here: the tests import this module as scripts.bench_pages (for build_database),
    # where bench_api, a script beside it, is not importable by its bare name.
    from bench_api import textflix_server

    data = scratch / "data"  # no models: the pages need none
    data.mkdir()
    servers = {
        "this": textflix_server(data, url, 0, "cpu", scratch / "this.log"),
        "other": textflix_server(data, url, 0, "cpu", scratch / "other.log", root=checkout.resolve()),
    }
    try:
        for server in servers.values():
            server.wait_ready(models=False)
        with httpx.Client(timeout=60) as client:
            for label, path in pages:
                trips: dict[str, list[float]] = {name: [] for name in servers}
                server_times = []
                for index in range(3 + requests):  # 3 to warm up
                    order = list(servers) if index % 2 else list(reversed(servers))
                    for name in order:
                        start = time.perf_counter()
                        response = client.get(servers[name].url + path)
                        took = (time.perf_counter() - start) * 1000
                        assert response.status_code == 200, (name, path, response.status_code)
                        if index >= 3:
                            trips[name].append(took)
                            if name == "this":
                                server_times.append(server_ms(response))
                this, other = statistics.median(trips["this"]), statistics.median(trips["other"])
                print(
                    f"median server time, {label}: {statistics.median(server_times):.1f} ms (round trip {this:.1f} ms; "
                    f"{checkout}: round trip {other:.1f} ms, {other / this:.2f}x this)"
                )
    finally:
        for server in servers.values():
            server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="SQLAlchemy URL of a built database (default: build a synthetic one)")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per page")
    parser.add_argument("--titles", type=int, default=50, help="titles of the synthetic catalogue")
    parser.add_argument("--reviews", type=int, default=1100, help="reviews of the synthetic catalogue")
    parser.add_argument("--compare-with", type=Path, help="another Textflix checkout, served beside this one")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        url = args.database
        if url is None:
            url = f"sqlite:///{Path(scratch) / 'bench.db'}"
            start = time.perf_counter()
            build_database(url, args.titles, args.reviews)
            print(f"built a synthetic database in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        app = create_app(Settings(database_url=url))
        with Session(app.state.engine) as session:
            catalogue = session.scalar(select(func.count()).where(Review.split == "catalogue"))
            sentence_count = session.scalar(
                select(func.count(Sentence.id)).join(Review).where(Review.split == "catalogue")
            )
            title_id, title_reviews = session.execute(
                select(Review.title_id, func.count())
                .where(Review.split == "catalogue")
                .group_by(Review.title_id)
                .order_by(func.count().desc())
                .limit(1)
            ).one()
            review_id = session.scalar(select(Review.id).where(Review.title_id == title_id, Review.split == "catalogue"))
        print(
            f"database: {catalogue:,} catalogue reviews, {sentence_count:,} sentences; "
            f"{args.requests} timed requests per page",
            file=sys.stderr,
        )
        title = f"title page ({title_reviews} reviews)"
        pages = [
            ("dashboard, Analyze off", "/"),
            ("dashboard, Analyze on", "/?analyze=1"),
            ("dashboard, Analyze and accuracy on", "/?analyze=1&accuracy=1"),
            ("dashboard, Analyze, accuracy and comparison on", "/?analyze=1&accuracy=1&compare=1"),
            ("dashboard, sorted by most inaccurate", "/?analyze=1&accuracy=1&sort=inaccurate"),
            ("dashboard, page 2", "/?analyze=1&accuracy=1&page=2"),
            ("dashboard, title search", "/?analyze=1&accuracy=1&q=title+1"),
            (f"{title}, Analyze off", f"/movies/{title_id}"),
            (f"{title}, Analyze on", f"/movies/{title_id}?analyze=1"),
            (f"{title}, accuracy on, wrong ones only", f"/movies/{title_id}?analyze=1&accuracy=1&wrong=1"),
            (f"{title}, accuracy and comparison on", f"/movies/{title_id}?analyze=1&accuracy=1&compare=1"),
            ("review page, Analyze off", f"/reviews/{review_id}"),
            ("review page, Analyze and accuracy on", f"/reviews/{review_id}?analyze=1&accuracy=1"),
            ("disagreements", "/disagreements"),
            ("about", "/about"),
        ]
        if args.compare_with:
            app.state.engine.dispose()
            compare_servers(url, args.compare_with, pages, args.requests, Path(scratch))
            return
        with TestClient(app) as client:
            for label, path in pages:
                server, wall = median_ms(client, path, args.requests)
                print(f"median server time, {label}: {server:.1f} ms (round trip {wall:.1f} ms)")
        app.state.engine.dispose()


if __name__ == "__main__":
    main()
