"""The per-review steps, predict and explain: they find the reviews that still lack their rows
and commit in small batches, so a killed build redoes at most one batch. Their work is
``app.offline.review_work``'s, computed in this process or on Ray (``app.offline.work_engines``, ``--engine``)."""

import logging

from app.db import session_scope
from app.offline.pipeline import Pipeline, Step
from app.offline.review_work import EXPLAIN_TASKS, Task, predict_tasks
from app.offline.work_engines import run_tasks
from model.names import CATALOGUE, EVAL

log = logging.getLogger("textflix")
EXPLAIN_BLOCK = 4  # reviews per Ray block, and per write, in the explain step of the Ray engine


class Predict(Step):
    """Each model's predictions for the reviews of ``split``: the catalogue's (``predict``) before the
    site opens, the evaluation reviews' (``predict_evaluation``), which only /about reads, after it."""

    writes = ("predictions",)
    STEP_NAMES = {CATALOGUE: "predict", EVAL: "predict_evaluation"}
    REVIEWS = {CATALOGUE: "catalogue reviews", EVAL: "evaluation reviews"}

    def __init__(self, split: str = CATALOGUE):
        self.split = split
        self.name = self.STEP_NAMES[split]
        self.reads = (self.REVIEWS[split], "models")
        self.doing = f"the models are scoring the {self.REVIEWS[split]}"

    def run(self, build: Pipeline) -> dict:
        what = f"Predict {{model}}: {{todo}} {self.REVIEWS[self.split]} to score"
        return run_tasks(build, planned(build, predict_tasks(self.split), what), per_block=1)


class Explain(Step):
    name = "explain"
    reads = ("catalogue reviews", "sentences", "models")
    writes = ("sentence_weights", "word_weights", "explanations")

    def run(self, build: Pipeline) -> dict:
        plan = planned(build, EXPLAIN_TASKS, "LIME {model} {level}s: {todo} reviews to explain")
        return run_tasks(build, plan, per_block=EXPLAIN_BLOCK)


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
