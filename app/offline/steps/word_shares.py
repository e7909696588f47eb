"""The word shares step, for /about: BERT's word shares (``model.word_shares``) checked on seeded samples,
faithfulness on the catalogue and plausibility on ERASER's annotated reviews.

- **Faithful**: on ``word_faithfulness_reviews`` catalogue reviews of two sentences or more (the sentence
  figures need two too), removing the top 20 % of a review's words by share against as many random words
  of the same sentences (``model.word_faithfulness``), beside the same reviews' sentence figures.
- **Plausible** (``--rationales``): on ``word_plausibility_reviews`` of ERASER's reviews, BERT's word shares
  toward its reading, as a score per token, against the tokens people marked
  (``model.rationales.token_plausibility``), beside BERT's sentence highlights (each token its sentence's
  weight), NB-SVM's word LIME (computed here, for these reviews), random tokens and the first and last.

A review's words are stored in ``word_shares`` as they are computed, one transaction a review, where the
site finds them too: a resumed build computes only the reviews that lack them. The figures are made from
the stored words each time the step runs (the removals are a fraction of the words' cost).
"""

import logging
import re
from contextlib import nullcontext

import numpy as np
from sqlalchemy import func, select
from tqdm import tqdm

from app.db import Explanation, Prediction, Review, Sentence, SentenceWeight, WordWeight, session_scope
from app.offline.pipeline import Pipeline, Step
from app.offline.review_work import Task
from app.offline.steps.rationales import mean_of
from app.offline.steps.scoring import EXPLAIN_BLOCK
from app.offline.work_engines import run_tasks
from app.word_rows import review_sentences, store_words, words_by_sentence
from model.data import seeded_sample
from model.names import BERT, CATALOGUE, NBSVM, POSITIVE, RATIONALES, SENTENCE, WORD, WORD_SHARES, label_of
from model.rationales import RationaleReview, baseline_scores, read_rationales, source_key, token_plausibility, token_scores
from model.sentences import Span
from model.trained import load_trained
from model.word_faithfulness import paired_interval, word_faithfulness
from model.word_shares import SentenceWords, Word, word_shares

log = logging.getLogger("textflix")
LIME_WORD = re.compile(r"\w+")  # the words of NB-SVM's word LIME (lime's default split on \W+)
SENTENCE_FIGURES = ("comprehensiveness_top", "random_comprehensiveness_top", "sufficiency_top", "random_sufficiency_top")


class WordShares(Step):
    name = WORD_SHARES
    reads = ("catalogue reviews", "sentences", "explanations", "ERASER's annotated reviews (--rationales)", "models")
    writes = ("word_shares", "word_weights", "explanations", f"run metrics: {WORD_SHARES}")
    doing = "BERT's word shares are being checked against removing random words and the words people marked"

    def up_to_date(self, build: Pipeline) -> bool:
        """Measured on ERASER when --rationales is given, not when it is not (or skipped whole): else run again."""
        figures = build.run_record().metrics.get(WORD_SHARES)
        if figures is None or "skipped" in figures:
            return figures is not None
        return ("skipped" not in figures["plausibility"]) == measures_plausibility(build)

    def run(self, build: Pipeline) -> dict:
        s = build.settings
        served = load_trained(BERT, s.models_dir, build.device)  # never int8: integrated gradients need gradients
        if not served.reads_sentences:
            log.info("Word shares: BERT reads whole texts, not sentences it adds up; it has no word shares.")
            skipped = {"skipped": "BERT reads whole texts, not sentences it adds up"}
            build.update_run(metrics={WORD_SHARES: skipped})
            return skipped
        eligible = eligible_catalogue(build)
        catalogue = seeded_sample(eligible, s.word_faithfulness_reviews, s.seed)
        annotated, annotated_ids, annotated_of = rationale_sample(build) if measures_plausibility(build) else ([], [], 0)
        if not annotated:
            log.info("Word shares: %s, so BERT's words are not compared with the words people marked.", why_not(build))
        if annotated_ids:
            explain_nbsvm_words(build, annotated_ids)
        computed = computed_words(build, served, catalogue + annotated_ids)
        figures = {
            "residual": residual_figures([sentence for shares in computed.values() for sentence in shares]),
            "faithfulness": faithfulness_figures(build, served, catalogue, len(eligible)),
            "plausibility": (
                plausibility_figures(build, annotated, annotated_ids, annotated_of) if annotated else {"skipped": why_not(build)}
            ),
        }  # fmt: skip
        build.update_run(metrics={WORD_SHARES: figures})
        return {"reviews": len(catalogue) + len(annotated_ids), "computed": len(computed)}


def measures_plausibility(build: Pipeline) -> bool:
    return bool(build.settings.rationales) and build.settings.word_plausibility_reviews != 0


def why_not(build: Pipeline) -> str:
    return "no --rationales file" if not build.settings.rationales else "word_plausibility_reviews=0"


def eligible_catalogue(build: Pipeline) -> list[int]:
    """The catalogue reviews of two sentences or more: a review of one has no sentence figures to compare
    with, and is read whole by the distill recipe's teacher."""
    with session_scope(build.engine) as session:
        rows = (
            select(Review.id)
            .join(Sentence, Sentence.review_id == Review.id)
            .where(Review.split == CATALOGUE)
            .group_by(Review.id)
            .having(func.count(Sentence.id) >= 2)
            .order_by(Review.id)
        )
        return list(session.scalars(rows))


def rationale_sample(build: Pipeline) -> tuple[list[RationaleReview], list[int], int]:
    """The seeded sample of ERASER's reviews (the rationales step stored them), their ids, and how many there are."""
    reviews = read_rationales(build.settings.rationales)
    with session_scope(build.engine) as session:
        keys = [source_key(review.doc) for review in reviews]
        stored = dict(session.execute(select(Review.source_key, Review.id).where(Review.source_key.in_(keys))).all())
    chosen = set(seeded_sample(range(len(reviews)), build.settings.word_plausibility_reviews, build.settings.seed))
    picked = [(review, stored[key]) for r, (review, key) in enumerate(zip(reviews, keys)) if r in chosen]
    return [review for review, _ in picked], [review_id for _, review_id in picked], len(reviews)


def explain_nbsvm_words(build: Pipeline, ids: list[int]) -> None:
    """NB-SVM's word LIME of ERASER's reviews ``ids`` that lack it, with the build's word-level explain task."""
    task = Task(NBSVM, WORD, split=RATIONALES)
    with session_scope(build.engine) as session:
        todo = sorted(set(task.pending(session)) & set(ids))
    log.info("Word shares, LIME nbsvm words: %d of ERASER's reviews to explain, %d already done.", len(todo), len(ids) - len(todo))
    run_tasks(build, [(task, todo)], per_block=EXPLAIN_BLOCK)


def computed_words(build: Pipeline, served, ids: list[int]) -> dict[int, list[SentenceWords]]:
    """BERT's word shares of the reviews ``ids`` that lack them, each review's stored in one transaction
    (``app.word_rows``); those computed, by review id."""
    with session_scope(build.engine) as session:
        done = {review_id for review_id, _ in words_by_sentence(session, ids)}
    todo = [i for i in ids if i not in done]
    log.info("Word shares, BERT: %d reviews to split over their words, %d already done.", len(todo), len(done))
    build.step_progress(0, len(todo), "reviews")
    computed = {}
    for n, review_id in enumerate(tqdm(todo, desc="Word shares bert", unit="review", disable=not build.progress), 1):
        text, sentence_ids, spans = review_sentences_of(build, review_id)
        computed[review_id] = word_shares(served, text, spans)
        store_words(build.engine, nullcontext(), sentence_ids, BERT, computed[review_id])
        build.step_progress(n, len(todo), "reviews")
    return computed


def residual_figures(sentences: list[SentenceWords]) -> dict:
    """How closely the words add up to their sentence's share: |Σ word shares − the share|, median and worst, and
    against the sentence's |share| (floored at 0.01, docs/studies/word-shares.md), over the sentences read."""
    read = [s for s in sentences if s.contribution != 0.0]
    if not read:
        return {"sentences": 0}
    residuals = np.array([s.residual for s in read])
    relative = residuals / np.maximum(np.abs([s.contribution for s in read]), 0.01)
    return {
        "sentences": len(read),
        "median": float(np.median(residuals)),
        "worst": float(residuals.max()),
        "median_of_share": float(np.median(relative)),
        "worst_of_share": float(relative.max()),
    }


def review_sentences_of(build: Pipeline, review_id: int) -> tuple[str, list[int], list[Span]]:
    """A stored review's text, and its sentences' ids and spans, in order (any split: ERASER's too)."""
    with session_scope(build.engine) as session:
        return review_sentences(session, review_id, split=None)


def stored_words(build: Pipeline, review_id: int) -> tuple[list[Span], list[list[Word]]]:
    """A stored review's sentences, and BERT's stored words of each, in order."""
    with session_scope(build.engine) as session:
        text, _, spans = review_sentences(session, review_id, split=None)
        stored = words_by_sentence(session, [review_id])
    return spans, [
        [Word(text[start:end], start, end, share) for start, end, share in stored.get((review_id, i), {}).get(BERT, [])]
        for i in range(len(spans))
    ]


def faithfulness_figures(build: Pipeline, served, ids: list[int], eligible: int) -> dict:
    """Word-level comprehensiveness and sufficiency of BERT's shares against random words of the same
    sentences (means, and the paired difference's 95 % interval), beside LIME's sentence figures of the
    same reviews."""
    if not ids:
        return {"skipped": "word_faithfulness_reviews=0" if build.settings.word_faithfulness_reviews == 0
                else "no catalogue review of two sentences or more"}  # fmt: skip
    draws, seed = build.settings.faithfulness_draws, build.settings.seed
    p_positive = lambda texts: served.proba_of_sentences(texts)[:, 1]  # noqa: E731
    figures = []
    for review_id in ids:
        spans, stored = stored_words(build, review_id)
        read = set(served.sentences_read(spans) or [])
        words = [own if i in read else [] for i, own in enumerate(stored)]
        if (figure := word_faithfulness(spans, words, p_positive, draws, seed + review_id)) is not None:
            figures.append(figure)
    words = {
        name: {
            "top": float(np.mean([getattr(f, name) for f in figures])),
            "random": float(np.mean([getattr(f, f"random_{name}") for f in figures])),
            "difference": paired_interval([getattr(f, name) - getattr(f, f"random_{name}") for f in figures]),
        }
        for name in ("comprehensiveness", "sufficiency")
    }
    with session_scope(build.engine) as session:
        rows = session.execute(
            select(*(getattr(Explanation, name) for name in SENTENCE_FIGURES))
            .where(Explanation.review_id.in_(ids), Explanation.model == BERT, Explanation.level == SENTENCE)
        ).all()  # fmt: skip
    sentences = {name: mean_of([getattr(row, name) for row in rows]) for name in SENTENCE_FIGURES}
    return {
        "n": len(figures), "of": eligible, "draws": draws,
        "words_read": int(np.median([f.words for f in figures])), "k": int(np.median([f.k for f in figures])),
        "words": words, "sentences": sentences,
    }  # fmt: skip


def plausibility_figures(build: Pipeline, reviews: list[RationaleReview], ids: list[int], of: int) -> dict:
    """ERASER's token figures (``token_plausibility``) of BERT's words and sentences, NB-SVM's words, random
    tokens and the first and last, on the sampled annotated ``reviews`` (``ids``, of ``of``), each model's
    scores toward its own reading."""
    toward = {model: predicted_signs(build, model, ids) for model in (BERT, NBSVM)}
    bert_words, bert_sentences, nbsvm_words = [], [], []
    for review, review_id in zip(reviews, ids):
        sign = toward[BERT][review_id]
        shares = [(w.start, w.end, sign * w.share) for own in stored_words(build, review_id)[1] for w in own]
        bert_words.append(token_scores(review, shares))
        bert_sentences.append(sentence_token_scores(build, review, review_id, sign))
        lime = nbsvm_weights(build, review_id)
        words = [(m.start(), m.end(), toward[NBSVM][review_id] * lime.get(m.group(), 0.0)) for m in LIME_WORD.finditer(review.text)]
        nbsvm_words.append(token_scores(review, words))
    marked = [len(review.annotated_tokens()) / len(review.token_spans()) for review in reviews]
    return {
        "n": len(reviews), "of": of,
        "tokens": int(np.median([len(review.token_spans()) for review in reviews])), "marked": float(np.mean(marked)),
        "methods": {
            "bert_words": token_plausibility(reviews, bert_words),
            "bert_sentences": token_plausibility(reviews, bert_sentences),
            "nbsvm_words": token_plausibility(reviews, nbsvm_words),
        },
        **baseline_scores(reviews, build.settings.seed, level=WORD),
    }  # fmt: skip


def predicted_signs(build: Pipeline, model: str, ids: list[int]) -> dict[int, float]:
    """+1 for a review ``model`` reads as positive, −1 for negative, by review id."""
    with session_scope(build.engine) as session:
        rows = session.execute(
            select(Prediction.review_id, Prediction.p_positive).where(Prediction.model == model, Prediction.review_id.in_(ids))
        )  # fmt: skip
        return {review_id: 1.0 if label_of(p) == POSITIVE else -1.0 for review_id, p in rows}


def sentence_token_scores(build: Pipeline, review: RationaleReview, review_id: int, sign: float) -> list[float]:
    """BERT's sentence highlights at the token level: each token its sentence's weight toward BERT's reading."""
    with session_scope(build.engine) as session:
        weights = session.scalars(
            select(SentenceWeight.weight).join(Sentence, Sentence.id == SentenceWeight.sentence_id)
            .where(Sentence.review_id == review_id, SentenceWeight.model == BERT).order_by(Sentence.position)
        ).all()  # fmt: skip
    scores = [0.0] * len(review.token_spans())
    for (first, end), weight in zip(review.sentence_tokens(), weights, strict=True):
        scores[first:end] = [sign * weight] * (end - first)
    return scores


def nbsvm_weights(build: Pipeline, review_id: int) -> dict[str, float]:
    """NB-SVM's word LIME weights of a review, by word."""
    with session_scope(build.engine) as session:
        rows = session.execute(
            select(WordWeight.word, WordWeight.weight).where(WordWeight.review_id == review_id, WordWeight.model == NBSVM)
        )  # fmt: skip
        return dict(rows.all())
