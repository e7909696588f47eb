"""The offline pipeline: IMDB archive → splits → NB-SVM and BERT → predictions → LIME → metrics.

Each step records itself in the run record when it finishes, and the per-review
steps commit review by review, so a killed build resumes where it stopped and
a finished one is left untouched by a rerun.
"""

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from tqdm import tqdm

from app.db import (
    STEPS,
    Explanation,
    Movie,
    Prediction,
    Review,
    Run,
    Sentence,
    SentenceWeight,
    WordWeight,
    display_url,
    label_of,
    latest_run,
    make_engine,
    migrate,
    session_scope,
    sqlite_path,
)
from app.settings import Settings
from model import data, explain
from model.bert import TrainConfig, fine_tune, resolve_device
from model.metrics import classification_report
from model.nbsvm import save_nbsvm, train_nbsvm
from model.sentences import split_sentences
from model.trained import ModelUnavailable, load_trained

log = logging.getLogger("textflix")
MODEL_STEPS = ("nbsvm", "bert")
# The settings a database is built from; a rerun with other values would mix two builds.
BUILD_KEYS = (
    "train_size", "titles", "max_words", "eval_size", "seed", "base_model", "epochs",
    "batch_size", "learning_rate", "max_length", "slanted_triangular", "discriminative_lr",
    "gradual_unfreezing", "nbsvm_c", "lime_samples", "word_lime_samples", "learning_curve",
)  # fmt: skip
EXPLANATIONS = (("nbsvm", "sentence"), ("bert", "sentence"), ("nbsvm", "word"))


class BuildError(Exception):
    """A build that cannot go on; the message says why and what to do."""


def build_config(settings: Settings) -> dict:
    return {key: getattr(settings, key) for key in BUILD_KEYS}


def fingerprint(config: dict, train_keys: list[str]) -> str:
    blob = json.dumps({"config": config, "train": sorted(train_keys)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Pipeline:
    def __init__(self, settings: Settings, progress: bool = True):
        self.settings = settings
        self.progress = progress
        self.config = build_config(settings)
        self.engine: Engine | None = None
        self.run_id: int | None = None
        self._models: dict = {}

    # -- orchestration -------------------------------------------------------

    def run(self) -> dict:
        """Run every unfinished step; returns the run record as a dict."""
        splits, reading = None, 0.0
        if not self._data_done():
            started = time.perf_counter()
            splits = self._read_data()  # before touching the database: bad input leaves it as it was
            reading = time.perf_counter() - started
        self._open()
        for step in STEPS:
            done = step in self._record().steps
            if done and step not in MODEL_STEPS:  # a model step checks its files itself
                log.info("Step %s: already done, skipped.", step)
                continue
            started = time.perf_counter()
            getattr(self, f"step_{step}")(*([splits] if step == "data" else []))
            seconds = time.perf_counter() - started
            if not done:
                self._finish_step(step, seconds + (reading if step == "data" else 0.0))
        return report(self.engine)

    def _data_done(self) -> bool:
        path = sqlite_path(self.settings.database)
        if path is not None and not path.exists():
            return False
        self._open()
        return "data" in self._record().steps

    def _open(self) -> None:
        if self.engine is not None:
            return
        self.engine = make_engine(self.settings.database)
        migrate(self.engine)
        with session_scope(self.engine) as session:
            latest = latest_run(session)
            if latest is None:
                latest = Run(config=self.config, steps={}, counts={}, metrics={})
                session.add(latest)
                session.flush()
            elif latest.config != self.config:
                changed = sorted(k for k in self.config if latest.config.get(k) != self.config[k])
                raise BuildError(
                    f"The database {display_url(self.settings.database)} was built with other settings "
                    f"({', '.join(changed)}); point --database at a new database or delete this one."
                )
            self.run_id = latest.id

    def _record(self) -> Run:
        with session_scope(self.engine) as session:
            return session.get(Run, self.run_id)

    def _finish_step(self, step: str, seconds: float) -> None:
        with session_scope(self.engine) as session:
            run = session.get(Run, self.run_id)
            run.steps = {**run.steps, step: {"seconds": round(seconds, 2)}}
            if step == STEPS[-1]:
                run.status = "complete"
                run.finished_at = datetime.now(UTC)
        log.info("Step %s finished in %.1f s.", step, seconds)

    # -- steps ---------------------------------------------------------------

    def _read_data(self) -> data.Splits:
        s = self.settings
        archive = data.locate_archive(s.imdb, s.data_dir)
        reviews = data.read_archive(archive)
        splits = data.make_splits(
            reviews, train_size=s.train_size, titles=s.titles, max_words=s.max_words,
            eval_size=s.eval_size, seed=s.seed,
        )  # fmt: skip
        wanted = {r.title_id for r in splits.train + splits.catalogue + splits.eval}
        splits.movies = data.read_movies(s.movies, wanted) if s.movies else {}
        log.info(
            "Read %d reviews from %s: %d for training, %d in the catalogue (%d titles), "
            "%d for evaluation, %d duplicates dropped.",
            len(reviews), archive, len(splits.train), len(splits.catalogue),
            len(splits.title_ids), len(splits.eval), splits.dropped_duplicates,
        )  # fmt: skip
        return splits

    def step_data(self, splits: data.Splits) -> None:
        with session_scope(self.engine) as session:
            titles = {r.title_id for r in splits.train + splits.catalogue + splits.eval}
            for title_id in sorted(titles):
                session.add(Movie(title_id=title_id, **splits.movies.get(title_id, {})))
            for split, reviews in (
                ("train", splits.train), ("catalogue", splits.catalogue), ("eval", splits.eval)
            ):  # fmt: skip
                for raw in reviews:
                    review = Review(
                        title_id=raw.title_id, text=raw.text, label=raw.label, rating=raw.rating,
                        split=split, source="imdb", source_key=raw.key, word_count=raw.word_count,
                    )  # fmt: skip
                    if split == "catalogue":
                        review.sentences = sentence_rows(raw.text)
                    session.add(review)
            run = session.get(Run, self.run_id)
            run.counts = {
                "titles": len(splits.title_ids),
                "catalogue": len(splits.catalogue),
                "train": len(splits.train),
                "eval": len(splits.eval),
                "duplicates_dropped": splits.dropped_duplicates,
            }

    def _training_set(self) -> tuple[list[str], list[str], list[str]]:
        with session_scope(self.engine) as session:
            rows = session.execute(
                select(Review.source_key, Review.text, Review.label)
                .where(Review.split == "train")
                .order_by(Review.id)
            ).all()
        return [r.source_key for r in rows], [r.text for r in rows], [r.label for r in rows]

    def _model_dir(self, name: str) -> Path:
        return self.settings.models_dir / name

    def _trained(self, name: str, fp: str) -> bool:
        meta = self._model_dir(name) / "textflix.json"
        return meta.is_file() and json.loads(meta.read_text()).get("fingerprint") == fp

    def step_nbsvm(self) -> None:
        keys, texts, labels = self._training_set()
        fp = fingerprint(self.config, keys)
        if self._trained("nbsvm", fp):
            log.info("NB-SVM already trained in %s.", self._model_dir("nbsvm"))
            return
        pipeline = train_nbsvm(texts, labels, c=self.settings.nbsvm_c, seed=self.settings.seed)
        save_nbsvm(pipeline, self._model_dir("nbsvm"), {"fingerprint": fp, "c": self.settings.nbsvm_c})
        log.info("NB-SVM trained on %d reviews, saved to %s.", len(texts), self._model_dir("nbsvm"))

    def step_bert(self) -> None:
        keys, texts, labels = self._training_set()
        fp = fingerprint(self.config, keys)
        if self._trained("bert", fp):
            log.info("BERT already fine-tuned in %s.", self._model_dir("bert"))
            return
        classifier = fine_tune(texts, labels, self._bert_config(), resolve_device(self.settings.device), self.progress)
        classifier.save(self._model_dir("bert"), extra={"fingerprint": fp})
        log.info(
            "BERT fine-tuned on %d reviews from %s, saved to %s.",
            len(texts), self.settings.base_model, self._model_dir("bert"),
        )  # fmt: skip

    def _bert_config(self) -> TrainConfig:
        s = self.settings
        return TrainConfig(
            base_model=s.base_model, epochs=s.epochs, batch_size=s.batch_size,
            learning_rate=s.learning_rate, max_length=s.max_length,
            slanted_triangular=s.slanted_triangular, discriminative_lr=s.discriminative_lr,
            gradual_unfreezing=s.gradual_unfreezing, seed=s.seed,
        )  # fmt: skip

    def model(self, name: str):
        """The trained model ``name`` with a ``predict_proba(texts)`` method, loaded once."""
        if name not in self._models:
            device = resolve_device(self.settings.device)
            try:
                self._models[name] = load_trained(name, self.settings.models_dir, device)
            except ModelUnavailable as error:
                raise BuildError(str(error)) from error
        return self._models[name]

    def step_predict(self, chunk: int = 256) -> None:
        for name in ("nbsvm", "bert"):
            with session_scope(self.engine) as session:
                done = select(Prediction.review_id).where(Prediction.model == name)
                todo = session.execute(
                    select(Review.id, Review.text)
                    .where(Review.split.in_(("catalogue", "eval")), Review.id.not_in(done))
                    .order_by(Review.id)
                ).all()
            bar = tqdm(total=len(todo), desc=f"Predict {name}", unit="review", disable=not self.progress)
            for start in range(0, len(todo), chunk):
                rows = todo[start : start + chunk]
                p = self.model(name).predict_proba([r.text for r in rows])[:, 1]
                with session_scope(self.engine) as session:
                    session.add_all(prediction_rows(name, [r.id for r in rows], p))
                bar.update(len(rows))
            bar.close()

    def step_explain(self) -> None:
        s = self.settings
        for name, level in EXPLANATIONS:
            with session_scope(self.engine) as session:
                done = select(Explanation.review_id).where(
                    Explanation.model == name, Explanation.level == level
                )
                todo = session.scalars(
                    select(Review.id)
                    .where(Review.split == "catalogue", Review.id.not_in(done))
                    .order_by(Review.id)
                ).all()
                total = session.scalar(select(func.count(Review.id)).where(Review.split == "catalogue"))
            log.info("LIME %s %ss: %d reviews to explain, %d already done.", name, level, len(todo), total - len(todo))
            predict = self.model(name).predict_proba
            bar = tqdm(todo, desc=f"LIME {name} {level}s", unit="review", disable=not self.progress)
            for review_id in bar:
                with session_scope(self.engine) as session:
                    review = session.get(Review, review_id)
                    store_explanation(session, review, name, level, predict, s)
            bar.close()

    def step_evaluate(self) -> None:
        with session_scope(self.engine) as session:
            metrics = {}
            for name in ("nbsvm", "bert"):
                metrics[name] = {}
                for split in ("eval", "catalogue"):
                    rows = session.execute(
                        select(Review.label, Prediction.p_positive)
                        .join(Prediction, Prediction.review_id == Review.id)
                        .where(Review.split == split, Review.source == "imdb", Prediction.model == name)
                    ).all()
                    metrics[name][split] = classification_report(
                        [r.label for r in rows], [r.p_positive for r in rows]
                    )
            session.get(Run, self.run_id).metrics = metrics

    def step_curve(self) -> None:
        """Evaluation accuracy against training-set size: NB-SVM at every size, BERT below --train-size."""
        s = self.settings
        if not s.learning_curve:
            return
        with session_scope(self.engine) as session:
            rows = session.execute(select(Review.split, Review.text, Review.label)).all()
            metrics = session.get(Run, self.run_id).metrics
        evaluation = [r for r in rows if r.split == "eval"]
        held_out = {r.text for r in rows if r.split != "train"}
        reviews = data.read_archive(data.locate_archive(s.imdb, s.data_dir))
        pool = [r for r in reviews if r.split == "train" and r.text not in held_out]
        gold = np.array([r.label == "positive" for r in evaluation])

        def accuracy(model) -> float:
            p = model.predict_proba([r.text for r in evaluation])[:, 1]
            return float(np.mean((p >= 0.5) == gold))

        curve = {"sizes": [], "nbsvm": [], "bert": []}
        for size in tqdm(sorted(set(s.learning_curve)), desc="Learning curve", disable=not self.progress):
            if size > len(pool):
                log.info("Learning curve: %d training reviews wanted, only %d exist; size skipped.", size, len(pool))
                continue
            curve["sizes"].append(size)
            if size == s.train_size:  # the models the build trained
                curve["nbsvm"].append(metrics["nbsvm"]["eval"]["accuracy"])
                curve["bert"].append(metrics["bert"]["eval"]["accuracy"])
                continue
            sample = data.balanced_sample(pool, size, random.Random(s.seed))
            texts, labels = [r.text for r in sample], [r.label for r in sample]
            curve["nbsvm"].append(accuracy(train_nbsvm(texts, labels, c=s.nbsvm_c, seed=s.seed)))
            if size < s.train_size:
                device = resolve_device(s.device)
                curve["bert"].append(accuracy(fine_tune(texts, labels, self._bert_config(), device, False)))
            else:
                curve["bert"].append(None)
            log.info(
                "Learning curve at %d reviews: NB-SVM %.3f, BERT %s.", size, curve["nbsvm"][-1],
                "not trained" if curve["bert"][-1] is None else f"{curve['bert'][-1]:.3f}",
            )  # fmt: skip
        with session_scope(self.engine) as session:
            run = session.get(Run, self.run_id)
            run.metrics = {**run.metrics, "learning_curve": curve}


def sentence_rows(text: str) -> list[Sentence]:
    return [
        Sentence(position=i, start=span.start, end=span.end, text=span.text)
        for i, span in enumerate(split_sentences(text))
    ]


def prediction_rows(model: str, review_ids: list[int], p_positive) -> list[Prediction]:
    return [
        Prediction(
            review_id=review_id,
            model=model,
            label=label_of(p),
            p_positive=float(p),
        )
        for review_id, p in zip(review_ids, p_positive)
    ]


def store_explanation(
    session: Session, review: Review, model: str, level: str, predict: Callable, settings: Settings
) -> None:
    """Explain ``review`` with LIME for ``model`` at ``level`` and add the rows to ``session``."""
    if level == "sentence":
        sentences = review.sentences
        result = explain.explain_sentences(
            review.text, sentences, predict, settings.lime_samples, settings.seed
        )
        for sentence, weight in zip(sentences, result.weights):
            session.add(SentenceWeight(sentence_id=sentence.id, model=model, weight=weight))
        samples = settings.lime_samples
    else:
        result = explain.explain_words(review.text, predict, settings.word_lime_samples, settings.seed)
        for word, weight in zip(result.words, result.weights):
            session.add(WordWeight(review_id=review.id, model=model, word=word[:128], weight=weight))
        samples = settings.word_lime_samples
    session.add(
        Explanation(
            review_id=review.id, model=model, level=level, samples=samples,
            intercept=result.intercept, score=result.score,
        )
    )  # fmt: skip


def report(engine: Engine) -> dict:
    """The latest run record as plain JSON-ready data."""
    with session_scope(engine) as session:
        run = latest_run(session)
        if run is None:
            raise BuildError("The database holds no pipeline run yet: run `textflix build`.")
        return {
            "run_id": run.id,
            "status": run.status,
            "started_at": run.started_at.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "base_model": run.config.get("base_model"),
            "seed": run.config.get("seed"),
            "config": run.config,
            "counts": run.counts,
            "metrics": run.metrics,
            "timings": {step: info["seconds"] for step, info in run.steps.items()},
        }
