"""The per-review steps, predict and explain: they find the reviews that still lack their rows
and commit in small batches, so a killed build redoes at most one batch. Their work is
``app.offline.review_work``'s, computed in this process or on Ray (``app.offline.work_engines``, ``--engine``).

The catalogue's steps are per model (``predict_nbsvm``, ``explain_nbsvm``, ``predict_bert``, …: the names
of ``app.db.predict_step`` and ``explain_step``), so the site shows a model as soon as its predictions are
stored, and its highlights as they are written."""

import logging

from sqlalchemy import select

from app.db import Review, Sentence, explain_step, predict_step, session_scope
from app.offline.estimates import Work, capped_chars
from app.offline.pipeline import Pipeline, Step
from app.offline.review_work import Task, explain_tasks, predict_tasks
from app.offline.steps.training import reading_cap, reading_work
from app.offline.work_engines import run_tasks
from model.config import SENTENCES, BertConfig, LimeConfig
from model.explain import expected_work
from model.names import CATALOGUE, DISPLAY_NAMES, EVAL, MODELS, WORD
from model.sentences import Span
from model.trained import CLASSIFIERS

log = logging.getLogger("textflix")
EXPLAIN_BLOCK = 4  # reviews per Ray block, and per write, in the explain step of the Ray engine
# A sentence-reading BERT's explanations of the catalogue took about 10 times its predictions of it in the
# default builds on both CPUs measured (docs/studies/one-sentence-reader.md: 176 s and 16 s with native bfloat16; 623 s and 67 s
# without, in issue 43's build on an AVX2 CPU): what the estimates take before the explain step is timed.
SENTENCE_READER_EXPLAIN = 10
# The one step of builds before the catalogue's steps were per model: a run record that lists it has
# every model's predictions (or explanations) of the catalogue.
EVERY_MODELS_PREDICT, EVERY_MODELS_EXPLAIN = "predict", "explain"


class Predict(Step):
    """Predictions for the reviews of ``split``: the catalogue's by ``model`` (``predict_MODEL``), before the
    site shows that model; or, for EVAL, every model's of the evaluation reviews (``predict_evaluation``),
    which only /about reads, at the end of the build."""

    writes = ("predictions",)
    REVIEWS = {CATALOGUE: "catalogue reviews", EVAL: "evaluation reviews"}

    def __init__(self, model: str | None = None, split: str = CATALOGUE):
        self.split = split
        if split == CATALOGUE:
            self.models = (model,)
            self.name = predict_step(model)
            self.formerly = (EVERY_MODELS_PREDICT,)
            self.doing = f"{DISPLAY_NAMES[model]} is scoring the catalogue reviews"
        else:
            self.models = MODELS
            self.name = "predict_evaluation"
            self.doing = f"the models are scoring the {self.REVIEWS[split]}"
        self.reads = (self.REVIEWS[split], *(f"models/{name}" for name in self.models))

    def run(self, build: Pipeline) -> dict:
        what = f"Predict {{model}}: {{todo}} {self.REVIEWS[self.split]} to score"
        return run_tasks(build, planned(build, predict_tasks(self.split, self.models), what), per_block=1)

    def work(self, build: Pipeline) -> Work | None:
        if len(self.models) > 1:  # the models read at rates of their own: no one network's work
            return None
        [model] = self.models
        with session_scope(build.engine) as session:
            [task] = predict_tasks(self.split, self.models)
            texts = session.scalars(select(Review.text).where(Review.id.in_(task.pending(session)))).all()
        return reading_work(build, model, texts)


class Explain(Step):
    """``model``'s LIME explanations of the catalogue reviews (``explain_MODEL``), each review's committed as
    it is computed (a block of EXPLAIN_BLOCK under Ray), so the site, which shows the model from its
    predictions on (``app.db.models_ready``), shows its highlights as they come."""

    reads = ("catalogue reviews", "sentences")
    writes = ("sentence_weights", "word_weights", "explanations")
    formerly = (EVERY_MODELS_EXPLAIN,)

    def __init__(self, model: str):
        self.model = model
        self.name = explain_step(model)
        self.reads = (*self.reads, f"models/{model}")
        self.doing = f"{DISPLAY_NAMES[model]} is explaining the catalogue reviews"

    def run(self, build: Pipeline) -> dict:
        plan = planned(build, explain_tasks(self.model), "LIME {model} {level}s: {todo} reviews to explain")
        return run_tasks(build, plan, per_block=EXPLAIN_BLOCK)

    def work(self, build: Pipeline) -> Work | None:
        """The characters of the texts LIME has the model score (``model.explain.expected_work``; word level:
        half the review, on average, for each of its samples). A model that reads sentences reads each of a
        review's once however many texts share it, so its explanations are estimated from its reviews:
        SENTENCE_READER_EXPLAIN times their characters."""
        lime, words = build.settings.group(LimeConfig), build.settings.word_lime_samples
        config = build.settings.group(CLASSIFIERS[self.model].config_type)
        chars = 0.0
        with session_scope(build.engine) as session:
            for task in explain_tasks(self.model):
                ids = task.pending(session)
                texts = dict(session.execute(select(Review.id, Review.text).where(Review.id.in_(ids))).all())
                if isinstance(config, BertConfig) and config.pooling == SENTENCES:
                    chars += SENTENCE_READER_EXPLAIN * capped_chars(list(texts.values()), reading_cap(config))
                elif task.level == WORD:
                    chars += words * capped_chars(list(texts.values()), None) / 2
                else:
                    spans = {review_id: [] for review_id in ids}
                    rows = select(Sentence.review_id, Sentence.start, Sentence.end, Sentence.text)
                    rows = rows.where(Sentence.review_id.in_(ids)).order_by(Sentence.review_id, Sentence.position)
                    for review_id, start, end, text in session.execute(rows):
                        spans[review_id].append(Span(start, end, text))
                    chars += sum(expected_work(texts[i], spans[i], lime)[1] for i in ids if spans[i])
        if not isinstance(config, BertConfig):
            # Timed on its own: NB-SVM's predictions cost it per review (the commits, the stacked scorer), not
            # per character, and their rate put its explanations at 3 hours where they took 4 minutes (issue 53).
            return Work(f"{self.model} explaining", chars)
        return reading_work(build, self.model, [], chars)


def planned(build: Pipeline, tasks: list[Task], what: str) -> list[tuple[Task, list[int]]]:
    """Each task with the ids of the reviews that still lack its rows, each logged as ``what``."""
    plan = []
    with session_scope(build.engine) as session:
        for task in tasks:
            todo = task.pending(session)
            done = task.total(session) - len(todo)
            log.info(what.format(model=task.model, level=task.level, todo=len(todo)) + ", %d already done.", done)
            plan.append((task, todo))
    return plan
