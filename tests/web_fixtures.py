"""A tiny but realistic Textflix database for the page tests, and fixtures around it.

Built with the real schema (``app.db.migrate``) and ORM inserts: four catalogue titles
(one without metadata, one whose metadata contains markup), thirteen catalogue reviews
with right and wrong predictions, model disagreements, a user review without a gold
label and a review that tries to inject ``<script>`` and ``<img onerror>``; sentences
with character spans and LIME weights for both models, NB-SVM word weights, training
and evaluation reviews the pages must not show, and a run record with metrics. The same
reviews as a build on a file of Steam reviews stores them: ``game_database``.

Import the fixtures into a test module: ``from tests.web_fixtures import web_client``.

Over 400 lines: the fixture database row by row, and the figures the tests expect read from it.
"""

import re
import sqlite3
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app.db import (
    Explanation,
    Movie,
    Prediction,
    Review,
    Run,
    Sentence,
    SentenceWeight,
    WordShare,
    WordWeight,
    make_engine,
    migrate,
    session_scope,
    this_process,
)
from app.settings import Settings
from app.web.analysis import ModelAnalyzer
from app.web.analysis_types import Analysis
from app.web.deps import get_analyzer
from app.web.main import create_app
from model.curve import series
from model.names import DISPLAY_NAMES

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=alert(1)>"

MOVIES = [
    dict(
        title_id="tt0100001",
        title="The Lighthouse Keeper",
        year=2004,
        runtime_min=112,
        rated="PG-13",
        genres="Drama|Mystery",
        director="Ann Example",
        actors="Ben Actor, Cara Actor",
        plot="A keeper on a remote island finds a stranger washed ashore.",
        imdb_rating=7.4,
    ),
    dict(
        title_id="tt0100002",
        title="Rocket Summer",
        year=1999,
        runtime_min=95,
        rated="PG",
        genres="Comedy|Family",
        director="Dee Director",
        plot="Three kids build a rocket in a barn and nearly reach the moon.",
        imdb_rating=6.1,
    ),
    dict(
        title_id="tt0100003",
        title="Café <i>Noir</i> & Friends",
        year=1987,
        runtime_min=88,
        rated="R",
        genres="Crime",
        plot='A plot with <b>tags</b> & "quotes" that must show as text.',
    ),
    dict(title_id="tt0100004"),  # no metadata at all: "Untitled (tt0100004)"
    dict(title_id="tt0100005", title="Only In Training", year=2010),  # no catalogue reviews
]

# (title_id, gold, rating, source, [(sentence, bert weight, nbsvm weight)], bert, nbsvm, words)
# with bert/nbsvm = (label, p_positive) and words = {word: nbsvm weight}.
POS, NEG = "positive", "negative"
CATALOGUE = [
    (
        "tt0100001", POS, 9, "imdb",
        [
            ("A wonderful, moving film.", 0.42, 0.20),
            ("The lighthouse scenes are beautifully shot.", 0.18, 0.05),
            ("The ending drags a little.", -0.06, -0.08),
        ],
        (POS, 0.96), (POS, 0.81), {"wonderful": 0.21, "drags": -0.09},
    ),
    (
        "tt0100001", POS, 7, "imdb",
        [
            ("I expected a boring art film.", -0.10, -0.30),
            ("Instead it was gripping from start to finish.", 0.35, 0.04),
        ],
        (POS, 0.88), (NEG, 0.38), {"boring": -0.25, "gripping": 0.05},
    ),
    (
        "tt0100001", NEG, 2, "imdb",
        [
            ("Dull and far too long.", -0.40, -0.33),
            ("Even the actors look bored.", -0.22, -0.12),
        ],
        (NEG, 0.07), (NEG, 0.20), {"dull": -0.3, "bored": -0.1, "act": 0.02},
    ),
    (
        "tt0100001", NEG, 3, "imdb",
        [
            ("Great cast, great score, great locations.", 0.30, 0.28),
            ("Shame the story makes no sense at all.", -0.12, -0.02),
        ],
        (POS, 0.71), (POS, 0.64), {"great": 0.3, "shame": -0.05},
    ),
    (
        "tt0100001", POS, 8, "imdb",
        [
            ("Not what I hoped for at first.", -0.20, -0.04),
            ("But it grew on me and I loved the last hour.", 0.08, 0.15),
        ],
        (NEG, 0.42), (POS, 0.58), {"loved": 0.2},
    ),
    (
        "tt0100002", NEG, 1, "imdb",
        [
            ("The worst film of the year.", -0.50, -0.05),
            ("The fun poster is the only good thing.", 0.05, 0.12),
        ],
        (NEG, 0.03), (POS, 0.55), {"worst": -0.04, "fun": 0.15},
    ),
    (
        "tt0100002", POS, 10, "imdb",
        [
            ("Pure joy for the whole family.", 0.38, 0.22),
            ("My kids laughed all the way through.\n\nWe watched it twice.", 0.12, 0.06),
        ],
        (POS, 0.91), (POS, 0.77), {"joy": 0.2},
    ),
    (
        "tt0100002", NEG, 4, "imdb",
        [
            (f"The villain writes {XSS_SCRIPT} on a wall.", -0.05, -0.02),
            (f"Then {XSS_IMG} appears and nothing makes sense.", -0.31, -0.18),
        ],
        (NEG, 0.12), (NEG, 0.30), {"nothing": -0.1},
    ),
    (
        "tt0100002", None, None, "user",
        [
            ("My nephew liked it.", 0.15, -0.02),
            ("I found it a bit loud.", 0.02, -0.08),
        ],
        (POS, 0.83), (NEG, 0.45), {},
    ),
    (
        "tt0100003", POS, 10, "imdb",
        [("A masterpiece of style.", 0.45, 0.30), ("Every frame is perfect.", 0.25, 0.10)],
        (POS, 0.99), (POS, 0.90), {"masterpiece": 0.3},
    ),
    (
        "tt0100003", NEG, 2, "imdb",
        [("Pretentious and cold.", -0.30, -0.20), ("I left early.", -0.05, -0.10)],
        (NEG, 0.20), (NEG, 0.10), {},
    ),
    (
        "tt0100004", NEG, 1, "imdb",
        [("Unwatchable.", -0.45, -0.15), ("Avoid it.", -0.10, -0.12)],
        (NEG, 0.05), (NEG, 0.35), {},
    ),
    (
        "tt0100004", POS, 7, "imdb",
        [("Slow, quiet and sad.", -0.20, -0.18), ("Yet it stayed with me for days.", 0.10, 0.02)],
        (NEG, 0.30), (NEG, 0.40), {"sad": -0.1},
    ),
]

# Reviews the pages must never show: (title_id, split, gold, text).
HIDDEN = [
    ("tt0100005", "train", POS, "Training review that only the models saw."),
    ("tt0100001", "train", NEG, "Another training review."),
    ("tt0100002", "eval", POS, "An evaluation review, held out."),
    ("tt0100002", "eval", NEG, "Another evaluation review, held out."),
]

RUN = dict(
    status="complete",
    config={
        "train_size": 500,
        "titles": 4,
        "max_words": 250,
        "eval_size": 2000,
        "seed": 42,
        "base_model": "all-MiniLM-L6-v2",
        "lime_samples": 64,
        "epochs": 4,
        "max_length": 256,
        "nbsvm_c": 0.1,
    },
    steps={
        "data": {"seconds": 12.5},
        "nbsvm": {"seconds": 3.2},
        "bert": {"seconds": 412.0},
        "predict": {"seconds": 95.4},
        "explain": {"seconds": 3725.0},
        "evaluate": {"seconds": 1.1},
    },
    counts={"titles": 4, "catalogue": 13, "train": 2, "eval": 2},
    metrics={
        "bert": {
            "eval": {
                "accuracy": 0.877,
                "f1": 0.8801,
                "confusion": [[872, 128], [118, 882]],
                "ece": 0.041,
                "calibration": {
                    "prob_pred": [0.05, 0.3, 0.5, 0.7, 0.95],
                    "prob_true": [0.08, 0.25, 0.55, 0.74, 0.93],
                    "count": [600, 200, 150, 250, 800],
                },
                "n": 2000,
            },
            "catalogue": {
                "accuracy": 0.75,
                "f1": 0.75,
                "confusion": [[5, 1], [2, 4]],
                "ece": 0.12,
                "calibration": {"prob_pred": [0.1, 0.5, 0.9], "prob_true": [0.2, 0.5, 0.8], "count": [4, 3, 5]},
                "n": 12,
            },
        },
        "nbsvm": {
            "eval": {
                "accuracy": 0.7790,
                "f1": 0.7702,
                "confusion": [[801, 199], [243, 757]],
                "ece": 0.093,
                "calibration": {
                    "prob_pred": [0.1, 0.3, 0.5, 0.7, 0.9],
                    "prob_true": [0.22, 0.35, 0.5, 0.62, 0.8],
                    "count": [300, 500, 400, 500, 300],
                },
                "n": 2000,
            },
            "catalogue": {
                "accuracy": 0.6667,
                "f1": 0.6667,
                "confusion": [[4, 2], [2, 4]],
                "ece": 0.15,
                "calibration": {"prob_pred": [0.2, 0.5, 0.8], "prob_true": [0.3, 0.5, 0.7], "count": [4, 4, 4]},
                "n": 12,
            },
        },
        # at the training size (500) the first seed is the served model; BERT went no further (a CPU build)
        "learning_curve": {
            "sizes": [100, 200, 500, 1000, 2000, 5000],
            "seeds": 3,
            "nbsvm": series(
                [[0.54, 0.55, 0.56], [0.6, 0.62, 0.64], [0.779, 0.769, 0.789],
                 [0.8, 0.81, 0.82], [0.82, 0.83, 0.84], [0.84, 0.85, 0.86]]
            ),  # fmt: skip
            "bert": series([[0.68, 0.7, 0.72], [0.801, 0.812, 0.823], [0.877, 0.867, 0.887], None, None, None]),
        },
    },
)
# The same run made with the distill recipe: the served BERT learnt from a teacher's labels too.
DISTILL_RUN = {
    **RUN,
    "steps": {
        **RUN["steps"],
        "teacher": {"seconds": 900.0, "base_model": "sentence-transformers/all-mpnet-base-v2", "labelled": 500},
        "pseudo_label": {"seconds": 1500.0, "unlabeled": 4000, "labelled_by": "teacher"},
        "bert": {"seconds": 800.0, "recipe": "distill", "labelled": 500, "teacher_labelled": 4000, "teacher": "teacher",
                 "epochs": 2},
        "calibrate": {"seconds": 600.0, "folds": 5, "temperature": 1.62, "offset": -0.41, "prior_reviews": 1000,
                      "share_positive": 0.5, "one_sentence_reader": "teacher"},
    },
    "metrics": {
        **RUN["metrics"],
        "bert": {**RUN["metrics"]["bert"], "eval": {**RUN["metrics"]["bert"]["eval"], "accuracy": 0.889}},
        "teacher": {"eval": {**RUN["metrics"]["bert"]["eval"], "accuracy": 0.903}},
    },
}
# A run recorded before the curve had seeds: one accuracy per model and size.
OLD_CURVE_RUN = {
    **RUN,
    "metrics": {
        **RUN["metrics"],
        "learning_curve": {
            "sizes": [100, 200, 500, 1000, 10000],
            "nbsvm": [0.55, 0.62, 0.78, 0.81, 0.85],
            "bert": [0.7, 0.82, 0.88, None, None],
        },
    },
}


# A run of ``textflix up`` half way: NB-SVM has predicted and explained the catalogue, the teacher is
# labelling (47 of 100), BERT is 12 minutes away. The builder is this process, which is running.
BUILD_STEPS = [
    "data", "nbsvm", "predict_nbsvm", "explain_nbsvm", "teacher", "pseudo_label", "bert", "calibrate",
    "predict_bert", "explain_bert", "predict_evaluation", "evaluate", "curve",
]  # fmt: skip
PENDING_RUN = {
    **RUN,
    "status": "running",
    "steps": {
        "data": {"seconds": 12.5}, "nbsvm": {"seconds": 3.2}, "predict_nbsvm": {"seconds": 20.1},
        "explain_nbsvm": {"seconds": 64.0}, "teacher": {"seconds": 897.0},
    },  # fmt: skip
    "metrics": {},
    "progress": {
        "step": "pseudo_label", "doing": "the teacher is labelling unlabeled reviews", "done": 47, "total": 100,
        "unit": "texts", "eta_s": 300.0, "ready_in_s": {"bert": 720.0}, "steps": BUILD_STEPS, "builder": this_process(),
    },  # fmt: skip
}


# A build whose model (NB-SVM, or BERT) has stored its predictions of the catalogue and committed the highlights
# of the first 7 of its 13 reviews, in id order as its explain step writes them, its word-level ones still to come.
EXPLAINED_REVIEWS = 7
EXPLAINING = {
    "nbsvm": {"data": {"seconds": 12.5}, "nbsvm": {"seconds": 3.2}, "predict_nbsvm": {"seconds": 20.1}},
    "bert": {**PENDING_RUN["steps"], **{step: {"seconds": 1.0} for step in ("pseudo_label", "bert", "calibrate",
                                                                            "predict_bert")}},
}  # fmt: skip


def build_half_explained_database(path: Path, model: str) -> str:
    """The fixture database with ``model``'s explain step running, half done (EXPLAINED_REVIEWS): its rows of
    the later reviews removed, as the step has not written them yet; returns its URL."""
    progress = {
        **PENDING_RUN["progress"], "step": f"explain_{model}", "doing": f"{DISPLAY_NAMES[model]} is explaining the catalogue reviews",
        "done": EXPLAINED_REVIEWS, "total": 26, "unit": "reviews", "eta_s": 95.0, "ready_in_s": {"bert": None},
    }  # fmt: skip
    run = {**PENDING_RUN, "steps": EXPLAINING[model], "progress": progress}
    url = build_web_database(path, run, models=("nbsvm", "bert") if model == "bert" else ("nbsvm",))
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        for table, reviews in (("explanations", "review_id > ?"), ("word_weights", "review_id > ?"),
                               ("sentence_weights", "sentence_id IN (SELECT id FROM sentences WHERE review_id > ?)")):  # fmt: skip
            connection.execute(f"DELETE FROM {table} WHERE model = ? AND {reviews}", (model, EXPLAINED_REVIEWS))
    return url


def explanation_figures(index: int, model: str) -> dict:
    """LIME's fit and quality figures of a fixture explanation: BERT's on every third review are weak."""
    weak = model == "bert" and index % 3 == 0
    return dict(
        samples=64, intercept=0.5, target="log_odds",
        score=0.15 if weak else 0.8 + index / 100,
        stability=0.3 if weak else 0.95,
        top_k=1,
        comprehensiveness=0.02 if weak else 0.3 + index / 100,
        sufficiency=0.2 if weak else 0.05,
        random_comprehensiveness=0.02 if weak else 0.1,
        random_sufficiency=0.2 if weak else 0.25,
        normalised_comprehensiveness=0.4 if weak else 1.0,
        normalised_sufficiency=0.5 if weak else 0.9,
        comprehensiveness_top=0.02 if weak else 0.3 + index / 100,
        sufficiency_top=0.2 if weak else 0.05,
        random_comprehensiveness_top=0.02 if weak else 0.1,
        random_sufficiency_top=0.2 if weak else 0.25,
    )  # fmt: skip


def build_web_database(
    path: Path, run: dict = RUN, models: tuple[str, ...] = ("bert", "nbsvm"), items: dict[str, dict] | None = None
) -> str:
    """Create the fixture database, with the run record ``run`` and the rows of ``models``, as a SQLite file at
    ``path``; returns its URL. ``items``: the catalogue's items in place of its movies (``GAMES``)."""
    return fill_web_database(f"sqlite:///{path}", run, models, items)


def fill_web_database(
    url: str, run: dict = RUN, models: tuple[str, ...] = ("bert", "nbsvm"), items: dict[str, dict] | None = None
) -> str:
    """Create the fixture database's schema and rows (predictions, explanations and sentence weights of
    ``models``) in the empty database at ``url``; returns ``url``. ``items``: per movie's title id, the item
    (its ``title_id`` and ``title``) that has its reviews instead, as a build on a file of reviews stores them."""
    engine = make_engine(url)
    migrate(engine)
    movies = [items[movie["title_id"]] for movie in MOVIES] if items else MOVIES
    item_id = {movie["title_id"]: item["title_id"] for movie, item in zip(MOVIES, movies)}
    with session_scope(engine) as session:
        session.add_all(Movie(**movie) for movie in movies)
        session.flush()
        for index, (movie_id, gold, rating, source, sentences, bert, nbsvm, words) in enumerate(CATALOGUE):
            title_id = item_id[movie_id]
            text, spans = "", []
            for sentence, *_ in sentences:
                if text:
                    text += " "
                spans.append((len(text), len(text) + len(sentence)))
                text += sentence
            review = Review(
                title_id=title_id,
                text=text,
                label=gold,
                rating=rating,
                split="catalogue",
                source=source,
                source_key=None if source == "user" else f"test/{index}_{rating}",
                word_count=len(text.split()),
            )
            session.add(review)
            session.flush()
            for model, (label, p_positive) in (("bert", bert), ("nbsvm", nbsvm)):
                if model not in models:
                    continue
                session.add(Prediction(review_id=review.id, model=model, label=label, p_positive=p_positive))
                session.add(
                    Explanation(review_id=review.id, model=model, level="sentence", **explanation_figures(index, model))
                )
            for position, ((sentence, w_bert, w_nbsvm), (start, end)) in enumerate(zip(sentences, spans, strict=True)):
                row = Sentence(review_id=review.id, position=position, start=start, end=end, text=sentence)
                session.add(row)
                session.flush()
                for model, weight in (("bert", w_bert), ("nbsvm", w_nbsvm)):
                    if model in models:
                        session.add(SentenceWeight(sentence_id=row.id, model=model, weight=weight))
            for word, weight in words.items():
                session.add(WordWeight(review_id=review.id, model="nbsvm", word=word, weight=weight))
        for index, (movie_id, split, gold, text) in enumerate(HIDDEN):
            review = Review(
                title_id=item_id[movie_id],
                text=text,
                label=gold,
                rating=8 if gold == POS else 2,
                split=split,
                source_key=f"{split}/{index}",
                word_count=len(text.split()),
            )
            session.add(review)
            session.flush()
            if "bert" in models:
                session.add(Prediction(review_id=review.id, model="bert", label=gold, p_positive=0.9 if gold == POS else 0.1))
            if "nbsvm" in models:
                session.add(Prediction(review_id=review.id, model="nbsvm", label=NEG, p_positive=0.4))
        session.add(Run(**run))
    engine.dispose()
    return url


# BERT's word shares stored for one fixture review (``add_word_shares``), as the words' computation stores them:
# per sentence, its share of the log-odds (from a start of 0, they add up to logit(0.88), its stored
# p_positive) and its strongest words; its other words share the rest equally.
WORDS_REVIEW = "I expected a boring art film. Instead it was gripping from start to finish."
WORD_SHARES = [(-0.5, {"boring": -0.7, "expected": 0.15}), (2.492, {"gripping": 1.6, "finish": 0.4, "Instead": -0.2})]


def add_word_shares(url: str, text: str = WORDS_REVIEW, shares: list = WORD_SHARES) -> int:
    """Store BERT's word shares (``WORD_SHARES``'s shape) of the catalogue review ``text`` in the database at
    ``url``, its words runs of letters or of punctuation (as ``model.word_shares`` splits these, which have no
    apostrophes; importing it would load torch into every page test); returns the review's id."""
    engine = make_engine(url)
    with session_scope(engine) as session:
        review = session.query(Review).filter_by(text=text).one()
        for sentence, (total, strong) in zip(review.sentences, shares, strict=True):
            spans = [match.span() for match in re.compile(r"\w+|[^\w\s]+").finditer(text, sentence.start, sentence.end)]
            rest = (total - sum(strong.values())) / (len(spans) - len(strong))
            for position, (start, end) in enumerate(spans):
                share = strong.get(text[start:end], rest)
                session.add(WordShare(sentence_id=sentence.id, model="bert", position=position, start=start, end=end, share=share))
        review_id = review.id
    engine.dispose()
    return review_id


# The same reviews as a build on a file of Steam reviews stores them: games with a name and nothing else, one
# without a name, one whose id holds characters a path must escape.
GAME_CORPUS = "steam_reviews.csv"
GAMES = {
    "tt0100001": dict(title_id="570", title="Dota 2"),
    "tt0100002": dict(title_id="440", title="Team Fortress 2"),
    "tt0100003": dict(title_id="mods/early access #1 «β»?", title="Half-Life: Café <i>Noir</i> & Friends"),
    "tt0100004": dict(title_id="730", title=None),
    "tt0100005": dict(title_id="620", title="Portal 2"),  # no catalogue reviews
}
GAME_RUN = {**RUN, "counts": {**RUN["counts"], "corpus": GAME_CORPUS}}


@pytest.fixture(scope="session")
def game_database(tmp_path_factory) -> str:
    """URL of a fresh database of the fixture's reviews as games of a file of Steam reviews (``GAMES``)."""
    return build_web_database(tmp_path_factory.mktemp("games") / "textflix.db", GAME_RUN, items=GAMES)


@pytest.fixture
def game_client(game_database):
    """A client of the game database's site, which calls its items games."""
    with TestClient(create_app(Settings(database_url=game_database, item_noun="game"))) as client:
        yield client


@pytest.fixture(scope="session")
def web_database(tmp_path_factory) -> str:
    """URL of a fresh fixture database, shared by the session (the pages only read it)."""
    return build_web_database(tmp_path_factory.mktemp("web") / "textflix.db")


@pytest.fixture(scope="session")
def web_app(web_database):
    return create_app(Settings(database_url=web_database))


@pytest.fixture
def web_client(web_app):
    with TestClient(web_app) as client:
        yield client


@pytest.fixture(scope="session")
def web_facts(web_database):
    """Catalogue reviews with gold label and both predictions, straight from SQL."""
    engine = create_engine(web_database)
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                """
                SELECT r.id, r.title_id, r.label, b.label, b.p_positive, n.label, m.title
                FROM reviews r
                JOIN movies m ON m.title_id = r.title_id
                LEFT JOIN predictions b ON b.review_id = r.id AND b.model = 'bert'
                LEFT JOIN predictions n ON n.review_id = r.id AND n.model = 'nbsvm'
                WHERE r.split = 'catalogue'
                ORDER BY r.id
                """
            )
        ).all()
        hidden = [row[0] for row in connection.execute(text("SELECT id FROM reviews WHERE split != 'catalogue'"))]
        sentences = Counter(
            dict(
                connection.execute(
                    text("SELECT review_id, count(*) FROM sentences GROUP BY review_id")
                ).all()
            )
        )
    engine.dispose()
    reviews = [
        dict(id=r[0], title_id=r[1], gold=r[2], bert=r[3], p=r[4], nbsvm=r[5], title=r[6] or f"Untitled ({r[1]})") for r in rows
    ]
    by_title = defaultdict(list)
    for review in reviews:
        by_title[review["title_id"]].append(review)
    return {"reviews": reviews, "by_title": dict(by_title), "hidden": hidden, "sentences": sentences}


def wrong(reviews, model="bert"):
    return [r for r in reviews if r["gold"] is not None and r[model] != r["gold"]]


def labeled(reviews):
    return [r for r in reviews if r["gold"] is not None]


class FakeAnalyzer:
    """Stands in for the models behind the pages and the JSON API (``app.web.analysis.Analyzer``).

    Splits the text into sentences and scores each by a few cue words, the way the real
    analyzer answers: both models' predictions and per-sentence weights with spans.
    Put it in an app with ``use_analyzer``.
    """

    problem = None
    CUES = {"good": 1.0, "great": 1.0, "love": 1.0, "loved": 1.0, "bad": -1.0, "boring": -1.0, "worst": -1.0, "not": -0.5}

    def __init__(self):
        self.calls: list[tuple[list[str], bool]] = []

    def _weight(self, sentence: str, model: str) -> float:
        words = [word.strip(".,!?;:").lower() for word in sentence.split()]
        score = sum(self.CUES.get(word, 0.0) for word in words)
        return round(0.3 * score * (0.5 if model == "nbsvm" else 1.0) + 0.01, 3)

    def info(self) -> dict:
        return {"device": "none (a stand-in)"}

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def analyze(self, texts: list[str], explain: bool, words: bool = False) -> list[Analysis]:
        import re

        self.calls.append((texts, explain))
        results = []
        for review in texts:
            sentences = [
                {
                    "text": match.group(0),
                    "start": match.start(),
                    "end": match.end(),
                    "weights": {model: self._weight(match.group(0), model) for model in ("bert", "nbsvm")},
                }
                for match in re.finditer(r"[^.!?\s][^.!?]*[.!?]*", review)
            ]
            predictions = {}
            for model in ("bert", "nbsvm"):
                total = sum(s["weights"][model] for s in sentences)
                p_positive = round(min(0.99, max(0.01, 0.5 + total)), 3)
                predictions[model] = {"label": POS if p_positive >= 0.5 else NEG, "p_positive": p_positive}
            results.append(Analysis(text=review if explain else None, predictions=predictions, sentences=sentences))
        return results


def use_analyzer(app, analyzer: FakeAnalyzer) -> FakeAnalyzer:
    """Make ``app`` analyse with ``analyzer`` instead of its models."""
    app.dependency_overrides[get_analyzer] = lambda: analyzer
    return analyzer


# --- the real analyzer over stand-in models -----------------------------------------------------

CUE_WORDS = {"good": 1.0, "great": 1.0, "loved": 1.0, "bad": -1.0, "awful": -1.0, "boring": -1.0}


def cue_model(seconds_per_call: float):
    """A stand-in classifier: sentiment from cue words, ``seconds_per_call`` per call; records its calls."""

    def predict(texts: list[str]) -> np.ndarray:
        time.sleep(seconds_per_call)
        predict.calls.append(len(texts))
        score = np.array([sum(CUE_WORDS.get(w.strip(".,!?").lower(), 0.0) for w in t.split()) for t in texts])
        p = 1 / (1 + np.exp(-score))
        return np.stack([1 - p, p], axis=1)

    predict.calls = []
    return predict


def stand_in_models(settings: Settings, ready: tuple[str, ...]) -> ModelAnalyzer:
    """The analyzer of the models the build has made ready (``app.web.ready_analyzer``), each a stand-in
    scoring cue words."""
    return ModelAnalyzer({name: cue_model(0.0) for name in ready}, settings, "cpu (stand-in models)")


def set_run(url: str, **fields) -> None:
    """Change the run record's ``steps``, ``status`` or ``progress`` in the SQLite database at ``url``, as
    the build would."""
    import json
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        for name, value in fields.items():
            connection.execute(f"UPDATE runs SET {name} = ?", (value if isinstance(value, str) else json.dumps(value),))


def analyzer_app(database: str, seconds_per_call: float = 0.0, call_weight: float = 8, **settings) -> tuple:
    values = dict(database_url=database, lime_samples=16, batch_window_ms=2, **settings)
    app_settings = Settings(**values)
    app = create_app(app_settings)
    models = {"nbsvm": cue_model(seconds_per_call), "bert": cue_model(seconds_per_call)}
    analyzer = ModelAnalyzer(models, app_settings, "cpu (stand-in models)", call_weight)
    app.dependency_overrides[get_analyzer] = lambda: analyzer
    return app, analyzer, models
