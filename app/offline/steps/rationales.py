"""The rationales step, for /about: both models read ERASER's annotated movie reviews (``--rationales``)
and explain them sentence by sentence, and their highlights are scored against the passages people
marked (``model.rationales``), beside random and position baselines and the explanations' faithfulness.

The reviews go into the database as a split of their own (``RATIONALES``, never shown in the
catalogue), one sentence a line of ERASER's files, with their annotated passages (``Evidence``), so
that the build's per-review work (``app.offline.review_work``) reads and explains them as it does the
catalogue, resumably, under either engine. Without ``--rationales`` the step records that it was skipped.
"""

import logging
from collections import defaultdict

import numpy as np
from sqlalchemy import select

from app.db import Evidence, Explanation, Movie, Prediction, Review, Sentence, SentenceWeight, session_scope
from app.offline.pipeline import Pipeline, Step
from app.offline.review_work import Task
from app.offline.steps.scoring import EXPLAIN_BLOCK, planned
from app.offline.work_engines import run_tasks
from model.names import ERASER, MODELS, POSITIVE, RATIONALES, SENTENCE, label_of
from model.rationales import RationaleReview, auprc, baseline_scores, plausibility, read_rationales, source_key

log = logging.getLogger("textflix")
TITLE_ID = "eraser"  # the placeholder title of ERASER's reviews (Review.title_id may not be empty)
FAITHFULNESS = (
    "comprehensiveness", "random_comprehensiveness", "sufficiency", "random_sufficiency",
    "comprehensiveness_top", "random_comprehensiveness_top", "sufficiency_top", "random_sufficiency_top",
)  # fmt: skip
LISTED = 5  # the reviews /about links to where a model agrees with people most, and least


class Rationales(Step):
    name = RATIONALES
    reads = ("ERASER's annotated reviews (--rationales)", "models")
    writes = ("rationale reviews", "predictions", "sentence_weights", "explanations", f"run metrics: {RATIONALES}")
    doing = "the models are explaining ERASER's annotated movie reviews"

    def prepare(self, build: Pipeline) -> None:
        if build.settings.rationales:  # a bad file stops the build before its training, not after
            read_rationales(build.settings.rationales)

    def up_to_date(self, build: Pipeline) -> bool:
        """Measured when --rationales is given, skipped when it is not: else run again."""
        return (RATIONALES in build.run_record().metrics) == bool(build.settings.rationales)

    def run(self, build: Pipeline) -> dict:
        if not build.settings.rationales:
            log.info("Rationales: no --rationales file given, so the highlights are not compared with people's.")
            return {"skipped": "no --rationales file"}
        reviews = read_rationales(build.settings.rationales)
        ids = store_reviews(build, reviews)
        predict = [Task(model, split=RATIONALES) for model in MODELS]
        explain = [Task(model, SENTENCE, split=RATIONALES) for model in MODELS]
        run_tasks(build, planned(build, predict, "Rationales, predict {model}: {todo} reviews to score"), per_block=1)
        facts = run_tasks(
            build, planned(build, explain, "Rationales, LIME {model} {level}s: {todo} reviews to explain"),
            per_block=EXPLAIN_BLOCK,
        )  # fmt: skip
        build.update_run(metrics={RATIONALES: rationale_metrics(build, reviews, ids)})
        return {**facts, "reviews": len(reviews)}


def store_reviews(build: Pipeline, reviews: list[RationaleReview]) -> list[int]:
    """Add the reviews not yet in the database, with their sentences and annotated passages; the
    ids of all of them, in the order of ``reviews``."""
    keys = [source_key(review.doc) for review in reviews]
    with session_scope(build.engine) as session:
        if session.get(Movie, TITLE_ID) is None:
            session.add(Movie(title_id=TITLE_ID, title="ERASER movie reviews (Pang & Lee, annotated by Zaidan et al.)"))
        stored = dict(session.execute(select(Review.source_key, Review.id).where(Review.source_key.in_(keys))).all())
        for review, key in zip(reviews, keys):
            if key in stored:
                continue
            row = Review(
                title_id=TITLE_ID, text=review.text, label=review.label, rating=None, split=RATIONALES,
                source=ERASER, source_key=key, word_count=len(review.text.split()),
            )  # fmt: skip
            row.sentences = [
                Sentence(position=i, start=s.start, end=s.end, text=s.text) for i, s in enumerate(review.sentences)
            ]
            session.add(row)
            session.flush()
            session.add_all(Evidence(review_id=row.id, start_token=start, end_token=end) for start, end in review.evidence)
            stored[key] = row.id
    log.info("Rationales: %d of ERASER's annotated reviews in the database.", len(stored))
    return [stored[key] for key in keys]


def rationale_metrics(build: Pipeline, reviews: list[RationaleReview], ids: list[int]) -> dict:
    """Per model: accuracy, plausibility (``model.rationales``) and faithfulness; the random and
    position baselines, and the best that a choice of whole sentences can do (the evidence sentences)."""
    weights, predictions, quality = read_results(build, ids)
    figures, agreement = {}, {}
    for model in MODELS:
        p = [predictions[model][i] for i in ids]
        toward = [
            [w if label_of(p_i) == POSITIVE else -w for w in weights[model][i]] for p_i, i in zip(p, ids)
        ]  # each sentence's weight toward the model's reading: the reasons the page highlights
        figures[model] = {
            "accuracy": float(np.mean([label_of(p_i) == review.label for p_i, review in zip(p, reviews)])),
            **plausibility(reviews, toward),
            **{name: mean_of([quality[model][i].get(name) for i in ids]) for name in FAITHFULNESS},
        }
        agreement[model] = [
            auprc(truth, scores) if any(truth := review.evidence_sentences()) else None
            for review, scores in zip(reviews, toward)
        ]
    # ranked by AUPRC above the review's share of evidence sentences (what chance scores), so that a review
    # whose every sentence is marked does not count as agreement
    chance = [float(np.mean(review.evidence_sentences())) for review in reviews]
    ranked = sorted(range(len(reviews)), key=lambda r: np.mean([agreement[m][r] for m in MODELS]) - chance[r])
    listed = lambda order: [  # noqa: E731
        {"doc": reviews[r].doc, "evidence_share": chance[r], **{model: agreement[model][r] for model in MODELS}}
        for r in order[:LISTED]
    ]
    return {
        "n": len(reviews),
        "sentences": int(np.median([len(review.sentences) for review in reviews])),
        "evidence_sentences": float(np.mean(chance)),
        "models": figures,
        **baseline_scores(reviews, build.settings.seed),
        "best_sentences": plausibility(reviews, [[float(t) for t in r.evidence_sentences()] for r in reviews]),
        "agree_most": listed(ranked[::-1]),
        "agree_least": listed(ranked),
    }


def read_results(build: Pipeline, ids: list[int]) -> tuple[dict, dict, dict]:
    """Each model's sentence weights (in sentence order), probability of "positive" and explanation
    figures, by review id."""
    weights = {model: defaultdict(list) for model in MODELS}
    predictions = {model: {} for model in MODELS}
    quality = {model: {} for model in MODELS}
    with session_scope(build.engine) as session:
        rows = session.execute(
            select(Sentence.review_id, SentenceWeight.model, SentenceWeight.weight)
            .join(SentenceWeight, SentenceWeight.sentence_id == Sentence.id)
            .where(Sentence.review_id.in_(ids))
            .order_by(Sentence.review_id, Sentence.position)
        )
        for review_id, model, weight in rows:
            weights[model][review_id].append(weight)
        for review_id, model, p in session.execute(
            select(Prediction.review_id, Prediction.model, Prediction.p_positive).where(Prediction.review_id.in_(ids))
        ):
            predictions[model][review_id] = p
        for explanation in session.scalars(
            select(Explanation).where(Explanation.review_id.in_(ids), Explanation.level == SENTENCE)
        ):
            quality[explanation.model][explanation.review_id] = {name: getattr(explanation, name) for name in FAITHFULNESS}
    return weights, predictions, quality


def mean_of(values: list[float | None]) -> float | None:
    """The mean of the values that are there (None when none is)."""
    present = [value for value in values if value is not None]
    return float(np.mean(present)) if present else None
