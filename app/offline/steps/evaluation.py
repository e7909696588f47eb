"""The steps that measure the models, for /about: each model's report on the evaluation
reviews, the catalogue, one-line reviews and by length (``Evaluate``), and the learning curve
(``LearningCurve``); both read the evaluation reviews the same way (``evaluation_reviews``)."""

__all__ = ["CURVE_PRIOR_REVIEWS", "LearningCurve", "evaluation_reviews"]

import logging
import random

from sqlalchemy import select
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from app.db import Prediction, Review, session_scope
from app.offline.pipeline import Pipeline, Step
from app.offline.steps.calibration import prior_texts, set_prior_offset
from app.offline.steps.training import load_trained_bert, pretrained
from model.bert import BertClassifier
from model.config import DISTILL, BertConfig
from model.curve import LEARNING_CURVE, point_text, series, spread
from model.data import RawReview, balanced_sample, read_sst2, seeded_sample
from model.lengths import BAND_NAMES, band_accuracies, band_sizes, band_skew_figures, length_set
from model.metrics import MAJORITY_BASELINE, accuracy, classification_report
from model.names import (
    CATALOGUE,
    CORPORA,
    DISPLAY_NAMES,
    EVAL,
    LENGTHS,
    MAIN_MODEL,
    MODELS,
    SST2,
    STUDENT,
    TEACHER,
)
from model.trained import CLASSIFIERS, Classifier

log = logging.getLogger("textflix")


class Evaluate(Step):
    """Each model's report (accuracy beside the majority baseline, balanced accuracy and macro-F1; F1,
    confusion, ECE, reliability) on the evaluation reviews, the catalogue and, with --sst2, one-line
    reviews; and the length table (``model.lengths``), with the same figures per band."""

    name = "evaluate"
    reads = ("predictions", "gold labels", "evaluation reviews", "SST-2", "models")
    writes = ("run metrics",)

    def prepare(self, build: Pipeline) -> None:
        if build.settings.sst2:  # a bad file stops the build before its training, not after
            read_sst2(build.settings.sst2)

    def up_to_date(self, build: Pipeline) -> bool:
        """Evaluated with this build's --sst2 (set or not), and by length with the figures beside accuracy
        (an older build's record has none): else evaluated again."""
        metrics = build.run_record().metrics
        by_length = MAJORITY_BASELINE in metrics.get(LENGTHS, {})
        return by_length and (SST2 in metrics.get(MAIN_MODEL, {})) == bool(build.settings.sst2)

    def run(self, build: Pipeline) -> None:
        metrics = {name: {} for name in MODELS}
        with session_scope(build.engine) as session:
            for name in MODELS:
                for split in (EVAL, CATALOGUE):
                    rows = session.execute(
                        select(Review.label, Prediction.p_positive)
                        .join(Prediction, Prediction.review_id == Review.id)
                        .where(Review.split == split, Review.source.in_(CORPORA), Prediction.model == name)
                        .where(Review.label.is_not(None))  # a file's catalogue may hold reviews without a label
                    ).all()
                    metrics[name][split] = classification_report([r.label for r in rows], [r.p_positive for r in rows])
        _, evaluation = evaluation_reviews(build)
        texts, labels, bands = length_set(*evaluation)
        short = read_sst2(build.settings.sst2) if build.settings.sst2 else None
        log.info("Evaluate: %d texts of the length table%s, for each model.", len(texts),
                 f" and {len(short[0])} SST-2 sentences" if short else "")  # fmt: skip
        lengths = {"bands": BAND_NAMES, "n": band_sizes(bands)}
        for name in MODELS:
            model = build.model(name)
            p_positive = model.predict_proba(texts)[:, 1]
            lengths[name] = band_accuracies(labels, p_positive, bands)
            skewed = band_skew_figures(labels, p_positive, bands)
            lengths[MAJORITY_BASELINE] = skewed.pop(MAJORITY_BASELINE)  # of the labels alone: every model's the same
            for figure, values in skewed.items():
                lengths.setdefault(figure, {})[name] = values
            if short:
                metrics[name][SST2] = report_on(model, *short)
        if build.settings.recipe == DISTILL:
            # the served BERT's own when it hands the teacher its texts of one sentence
            teacher = getattr(build.model(MAIN_MODEL), "one_sentence_reader", None) or load_trained_bert(build, TEACHER)
            sets = {EVAL: evaluation, **({SST2: short} if short else {})}
            metrics[TEACHER] = {name: report_on(teacher, *texts_labels) for name, texts_labels in sets.items()}
        build.update_run(metrics={**metrics, LENGTHS: lengths})


def report_on(model: Classifier, texts: list[str], labels: list[str]) -> dict:
    """``model``'s classification report on labelled ``texts``."""
    return classification_report(labels, model.predict_proba(texts)[:, 1].tolist())


def evaluation_reviews(build: Pipeline, size: int | str = "all") -> tuple[list[int], tuple[list[str], list[str]]]:
    """The ids, texts and gold labels of the evaluation reviews: all of them, or a sample of ``size``
    seeded by the build's seed."""
    with session_scope(build.engine) as session:
        rows = session.execute(
            select(Review.id, Review.text, Review.label).where(Review.split == EVAL).order_by(Review.id)
        ).all()
    rows = seeded_sample(rows, size, build.settings.seed)
    return [r.id for r in rows], ([r.text for r in rows], [r.label for r in rows])


# The unlabeled reviews (of prior_reviews) each BERT of the learning curve is offset on: fewer
# than the served model's, as reading them is a large part of a point's cost.
CURVE_PRIOR_REVIEWS = 250


def curve_epochs(epochs: int, train_size: int, size: int) -> int:
    """The epochs a BERT of the learning curve trains on ``size`` reviews: as many optimisation steps
    as ``epochs`` over ``train_size`` (the build's own model) take, and at least ``epochs``. With 3
    epochs, 100 reviews are 19 steps, too few to learn from: MiniLM scored 0.664 with them and 0.834
    with 15 epochs (seed 42; docs/studies/learning-curve.md)."""
    return max(epochs, round(epochs * train_size / size))


class LearningCurve(Step):
    """Evaluation accuracy against training-set size over curve_seeds seeds: at each size and
    seed, each model retrained on a balanced sample of the archive's train split (the seed draws
    the sample and seeds the training). The fast models go to every size, the others up to
    train_size, and beyond it only on CUDA. At train_size the first seed is the build's own
    model, unless it learnt from more than the labelled reviews (the distill recipe's student)."""

    name = "curve"
    reads = ("the IMDB archive", "evaluation reviews", "run metrics")
    writes = (f"run metrics: {LEARNING_CURVE}",)
    doing = "the learning curve is being computed"

    def run(self, build: Pipeline) -> None:
        s = build.settings
        if not s.learning_curve:
            return
        pool = build.splits().train_pool
        sizes = [size for size in sorted(set(s.learning_curve)) if self.available(size, len(pool))]
        seeds = range(s.seed, s.seed + s.curve_seeds)
        # the accuracy of each seed, per size and model trained at that size
        runs = {(size, name): [] for size in sizes for name in MODELS if self.trains(build, name, size)}
        ids, evaluation = evaluation_reviews(build, s.curve_eval_size)
        own = self.labels_only_accuracies(build, ids)
        unlabeled = prior_texts(build)[:CURVE_PRIOR_REVIEWS]
        total, finished = len(runs) * len(seeds), 0
        progress = tqdm(total=total, desc="Learning curve", unit="model", disable=not build.progress)
        build.step_progress(finished, total, "models")
        with logging_redirect_tqdm(), progress:  # each size's log line above the bar, not inside it
            for size in sizes:
                for seed in seeds:
                    sample = balanced_sample(pool, size, random.Random(seed))
                    for name in (name for name in MODELS if (size, name) in runs):
                        if size == s.train_size and seed == s.seed and name in own:
                            runs[size, name].append(own[name])
                        else:
                            trained = self.retrained_accuracy(build, name, seed, sample, evaluation, unlabeled)
                            runs[size, name].append(trained)
                        progress.update()
                        finished += 1
                        build.step_progress(finished, total, "models")
                log.info(
                    "Learning curve at %d reviews, %d seeds: %s.", size, len(seeds),
                    ", ".join(f"{DISPLAY_NAMES[name]} {point_text(*spread(runs.get((size, name))), 'not trained')}"
                              for name in MODELS),
                )  # fmt: skip
        curve = {name: series([runs.get((size, name)) for size in sizes]) for name in MODELS}
        build.update_run(metrics={LEARNING_CURVE: {"sizes": sizes, "seeds": len(seeds), "n": len(ids), **curve}})

    @staticmethod
    def available(size: int, pool: int) -> bool:
        if size > pool:
            log.info("Learning curve: %d training reviews wanted, only %d exist; size skipped.", size, pool)
        return size <= pool

    @staticmethod
    def trains(build: Pipeline, name: str, size: int) -> bool:
        """Whether model ``name`` is trained at ``size``: beyond train_size only a fast one, or on CUDA."""
        return CLASSIFIERS[name].fast_to_train or size <= build.settings.train_size or build.device.type == "cuda"

    @staticmethod
    def labels_only_accuracies(build: Pipeline, ids: list[int]) -> dict[str, float]:
        """The accuracy on the reviews ``ids`` of each model the build trained on the labelled reviews
        alone, from its stored predictions."""
        distilled = {STUDENT} if build.settings.recipe == DISTILL else set()
        wanted, own = set(ids), {}
        with session_scope(build.engine) as session:
            for name in (name for name in MODELS if name not in distilled):
                rows = session.execute(
                    select(Review.id, Review.label, Prediction.p_positive)
                    .join(Prediction, Prediction.review_id == Review.id)
                    .where(Review.split == EVAL, Prediction.model == name)
                ).all()
                rows = [r for r in rows if r.id in wanted]
                own[name] = accuracy([r.label for r in rows], [r.p_positive for r in rows])
        return own

    @staticmethod
    def retrained_accuracy(
        build: Pipeline,
        name: str,
        seed: int,
        sample: list[RawReview],
        evaluation: tuple[list[str], list[str]],
        unlabeled: list[str],
        epochs: int | None = None,
    ) -> float:
        """Model ``name`` trained on ``sample`` with ``seed`` (a BERT offset on ``unlabeled`` as the
        build's is, and trained for ``epochs``, by default as many steps as the build's own:
        ``curve_epochs``): its accuracy on the evaluation set."""
        kind = CLASSIFIERS[name]
        config = build.settings.group(kind.config_type)
        update = {"seed": seed}
        if isinstance(config, BertConfig):
            update["epochs"] = epochs or curve_epochs(config.epochs, build.settings.train_size, len(sample))
        config, _ = pretrained(build, config.model_copy(update=update))
        model = kind.train([r.text for r in sample], [r.label for r in sample], config, build.device, False)
        if isinstance(model, BertClassifier):
            set_prior_offset(model, unlabeled, build.splits().share_positive)
        texts, gold = evaluation
        return accuracy(gold, model.predict_proba(texts)[:, 1])
