"""The per-review work of the build (predict, explain): one implementation for every engine.

The work of a step is a list of ``Task``s (one model's predictions, or its explanations at
one level), each cut into *units*: plain, JSON-ready dicts that carry all a computation
needs (a chunk of review texts to score, or one review with its sentences to explain), so
that computing them needs no database. ``Worker`` turns units into *results*, plain dicts
again, loading each model once: a review's sentence explanation is ``model.explain.explain_review``'s,
as the server's live analysis computes it; ``write_results`` adds their rows (``app.results``, as
the server writes the reviews it stores) to a database session.
The in-process engine and the Ray engine (``app.offline.work_engines``) call exactly these, so both
write the same rows; only where the units are computed differs.

A review's rows are written in one transaction with the rest of its batch, and a unit is
made only for a review that still lacks the task's rows, so a killed build, whatever its
engine, redoes at most the units it had not written.
"""

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.db import Explanation, Prediction, Review, Sentence, session_scope
from app.results import explained_rows, prediction_row, word_rows
from model import explain
from model.config import LimeConfig, WordLimeConfig
from model.names import CATALOGUE, MODELS, SENTENCE, WORD, WORD_LEVEL_MODEL
from model.sentences import Span
from model.trained import Classifier, sentence_scorer

PREDICT_CHUNK = 256  # reviews per model call (and per unit) in the predict step
READ_BLOCK = 256  # reviews per database read while the explain units are made


@dataclass(frozen=True)
class Task:
    """One model's share of a per-review step over the reviews of ``split``: its predictions
    (``level`` None), or its explanations at ``level`` (model.names SENTENCE or WORD)."""

    model: str
    level: str | None = None
    split: str = CATALOGUE

    @property
    def description(self) -> str:
        return f"Predict {self.model}" if self.level is None else f"LIME {self.model} {self.level}s"

    def pending(self, session: Session) -> list[int]:
        """The ids of the reviews that still lack the task's rows, in id order."""
        if self.level is None:
            done = select(Prediction.review_id).where(Prediction.model == self.model)
        else:
            done = select(Explanation.review_id).where(Explanation.model == self.model, Explanation.level == self.level)
        pending = select(Review.id).where(Review.split == self.split, Review.id.not_in(done))
        return list(session.scalars(pending.order_by(Review.id)))

    def total(self, session: Session) -> int:
        return session.scalar(select(func.count(Review.id)).where(Review.split == self.split))


def predict_tasks(split: str, models: Sequence[str] = MODELS) -> list[Task]:
    """Each of ``models``' predictions for the reviews of ``split``."""
    return [Task(model, split=split) for model in models]


def explain_tasks(model: str) -> list[Task]:
    """``model``'s explanations of the catalogue: by sentence, and by word too for WORD_LEVEL_MODEL."""
    return [Task(model, SENTENCE), *([Task(model, WORD)] if model == WORD_LEVEL_MODEL else [])]


def reviews_in(record: dict) -> int:
    """How many reviews a unit or a result covers."""
    return len(record["ids"]) if record["level"] is None else 1


def units(engine: Engine, task: Task, ids: Sequence[int]) -> Iterator[dict]:
    """The units of ``task`` for the reviews ``ids``, in order, read from the database a block
    at a time. A predict unit is a chunk of PREDICT_CHUNK reviews counted from the first
    pending one, so a model call scores the same texts under every engine."""
    size = PREDICT_CHUNK if task.level is None else READ_BLOCK
    for start in range(0, len(ids), size):
        block = list(ids[start : start + size])
        with session_scope(engine) as session:
            texts = {r.id: r.text for r in session.execute(select(Review.id, Review.text).where(Review.id.in_(block)))}
            sentences = {review_id: [] for review_id in block}
            if task.level == SENTENCE:
                rows = session.execute(
                    select(Sentence.review_id, Sentence.id, Sentence.start, Sentence.end, Sentence.text)
                    .where(Sentence.review_id.in_(block))
                    .order_by(Sentence.review_id, Sentence.position)
                )
                for review_id, *sentence in rows:
                    sentences[review_id].append(sentence)
        if task.level is None:
            yield {"model": task.model, "level": None, "ids": block, "texts": [texts[i] for i in block]}
            continue
        for review_id in block:
            yield {"model": task.model, "level": task.level, "review_id": review_id, "text": texts[review_id],
                   "sentences": sentences[review_id]}  # fmt: skip


class Worker:
    """Computes units: ``worker(units)`` is the list of their results, in order. ``load(name)``
    gives the trained model ``name``; each is asked for once."""

    def __init__(self, load: Callable[[str], Classifier], lime: LimeConfig, word_lime: WordLimeConfig):
        self.load = load
        self.lime = lime
        self.word_lime = word_lime
        self.models: dict[str, Classifier] = {}

    def model(self, name: str) -> Classifier:
        if name not in self.models:
            self.models[name] = self.load(name)
        return self.models[name]

    def __call__(self, batch: Sequence[dict]) -> list[dict]:
        return [self.predict(unit) if unit["level"] is None else self.explain(unit) for unit in batch]

    def predict(self, unit: dict) -> dict:
        p_positive = self.model(unit["model"]).predict_proba(list(unit["texts"]))[:, 1]
        return {"model": unit["model"], "level": None, "ids": list(unit["ids"]), "p_positive": [float(p) for p in p_positive]}

    def explain(self, unit: dict) -> dict:
        """LIME of one review, as ``model.explain`` computes it (per-review seeds: the result does not
        depend on what else the worker explains): its ``explanation`` in the shape ``app.results`` stores,
        a sentence explanation's over the review's ``sentence_ids``."""
        model = self.model(unit["model"])
        text, lime = unit["text"], self.lime
        result = {"model": unit["model"], "level": unit["level"], "review_id": unit["review_id"]}
        if unit["level"] == SENTENCE:
            spans = [Span(start, end, sentence) for _, start, end, sentence in unit["sentences"]]
            found = explain.explain_review(text, spans, model.predict_proba, lime, sentence_scorer(model))
            return {**result, "sentence_ids": [row[0] for row in unit["sentences"]], "explanation": found.as_dict()}
        config = self.word_lime
        words = explain.explain_words(text, model.predict_proba, config.word_lime_samples, config.seed, lime.lime_target)
        explanation = {"words": words.words, "weights": words.weights, "samples": config.word_lime_samples,
                       "intercept": words.intercept, "score": words.score}  # fmt: skip
        return {**result, "explanation": explanation}


def write_results(session: Session, results: Sequence[dict]) -> None:
    """Add the rows of ``results`` (``Worker``'s) to ``session``."""
    for result in results:
        model, level = result["model"], result["level"]
        if level is None:
            session.add_all(prediction_row(model, p, review_id) for review_id, p in zip(result["ids"], result["p_positive"]))
        elif level == SENTENCE:
            session.add_all(explained_rows(model, result["review_id"], result["sentence_ids"], result["explanation"]))
        else:
            session.add_all(word_rows(model, result["review_id"], result["explanation"]))
