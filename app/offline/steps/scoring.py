"""The per-review steps, predict and explain: they find the reviews that still lack their rows
and commit in small batches, so a killed build redoes at most one batch. Their work is
``app.offline.review_work``'s, computed in this process or on Ray (``app.offline.work_engines``, ``--engine``)."""

import logging

from app.db import session_scope
from app.offline.pipeline import Pipeline, Step
from app.offline.review_work import EXPLAIN_TASKS, PREDICT_TASKS, Task
from app.offline.work_engines import run_tasks

log = logging.getLogger("textflix")
EXPLAIN_BLOCK = 4  # reviews per Ray block, and per write, in the explain step of the Ray engine


class Predict(Step):
    name = "predict"
    reads = ("catalogue and evaluation reviews", "models")
    writes = ("predictions",)

    def run(self, build: Pipeline) -> dict:
        return run_tasks(build, planned(build, PREDICT_TASKS, "Predict {model}: {todo} reviews to score"), per_block=1)


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
