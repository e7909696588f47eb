"""The per-review work of predict and explain in this process (``--engine local``, what every
build runs by default), on NB-SVM alone so that it takes seconds: each review's rows are
written once, and a second run finds nothing left to do."""

import asyncio
import json
import re
import threading
from types import SimpleNamespace

import pytest
from sqlalchemy import func, select

from app.db import (
    Explanation,
    Prediction,
    Review,
    Sentence,
    SentenceWeight,
    WordWeight,
    latest_run,
    make_engine,
    session_scope,
)
from app.offline import estimates, pipeline
from app.offline.pipeline import Pipeline
from app.offline.review_work import Task, Worker, units, write_results
from app.offline.steps import LAST_STEP_OF_THE_SITE, build_steps, scoring
from app.offline.steps.data import ReadData
from app.offline.steps.scoring import Explain, Predict
from app.offline.steps.training import Train, bert_reading, bert_training
from app.offline.work_engines import LOCAL, run_tasks
from app.settings import Settings
from app.web.analysis import ModelAnalyzer
from app.web.analysis_types import PendingModel
from app.web.ready_analyzer import unanalysed
from app.web.store import fill_in_model, store_user_review
from model.config import DISTILL, PLAIN, BertConfig, LimeConfig, WordLimeConfig
from model.names import BERT, CATALOGUE, EVAL, MODELS, NBSVM, SENTENCE, TEACHER, WORD, WORD_LEVEL_MODEL
from model.sentences import sentence_spans
from tests.web_fixtures import build_web_database, cue_model

TASKS = [Task(NBSVM), Task(NBSVM, SENTENCE), Task(WORD_LEVEL_MODEL, WORD)]
WAITING = PendingModel(step=None, eta_s=None)  # a model the build has not made ready


def pending(build: Pipeline) -> list[tuple[Task, list[int]]]:
    with session_scope(build.engine) as session:
        return [(task, task.pending(session)) for task in TASKS]


def test_the_local_engine_writes_each_reviews_rows_once(tmp_path, real_subset_archive):
    settings = Settings(
        imdb=str(real_subset_archive), data_dir=tmp_path / "data", train_size=20, titles=2, eval_size=10,
        learning_curve=[], lime_samples=8, word_lime_samples=20,
    )  # fmt: skip
    build = Pipeline(settings, [ReadData(), Train(NBSVM)], progress=False)
    build.run()
    plan = pending(build)
    assert all(ids for _, ids in plan)

    assert run_tasks(build, plan, per_block=4) == {"engine": LOCAL}
    assert all(not ids for _, ids in pending(build))
    with session_scope(build.engine) as session:
        reviews = {task.level: set(ids) for task, ids in plan}
        predicted = session.scalars(select(Prediction.review_id).where(Prediction.model == NBSVM)).all()
        assert sorted(predicted) == sorted(reviews[None])
        for level in (SENTENCE, WORD):
            explained = session.scalars(select(Explanation.review_id).where(Explanation.level == level)).all()
            assert sorted(explained) == sorted(reviews[level])
        split = session.scalar(select(func.count(func.distinct(Sentence.review_id))))
        assert split == len(reviews[SENTENCE])
        assert session.scalar(select(func.count(func.distinct(WordWeight.review_id)))) == len(reviews[WORD])

    assert run_tasks(build, pending(build), per_block=4) == {"engine": LOCAL}  # nothing left: no unit is made
    with session_scope(build.engine) as session:
        assert session.scalar(select(func.count()).select_from(Prediction)) == len(reviews[None])


def test_the_evaluation_reviews_are_scored_after_the_sites_steps(tmp_path, real_subset_archive, monkeypatch):
    """``textflix up`` opens the site after the data step; NB-SVM's predictions and explanations come
    before BERT's training starts, BERT's after it, and the evaluation reviews', which only /about reads,
    last. (The predict steps of NB-SVM alone.)"""
    for recipe in (PLAIN, DISTILL):
        names = [step.name for step in build_steps(recipe)]
        assert names.index(LAST_STEP_OF_THE_SITE) == names.index("data") == 0
        berts_first = names.index("teacher" if recipe == DISTILL else "bert")
        order = ["nbsvm", "predict_nbsvm", "explain_nbsvm", names[berts_first], "calibrate", "predict_bert",
                 "explain_bert", "predict_evaluation", "evaluate", "curve"]  # fmt: skip
        assert [names.index(name) for name in order] == sorted(names.index(name) for name in order)

    settings = Settings(
        imdb=str(real_subset_archive), data_dir=tmp_path / "data", train_size=20, titles=2, eval_size=10,
        learning_curve=[],
    )  # fmt: skip
    monkeypatch.setattr(scoring, "MODELS", (NBSVM,))
    build = Pipeline(settings, [ReadData(), Train(NBSVM), Predict(NBSVM), Predict(split=EVAL)], progress=False)

    def predicted_splits() -> dict[str, int]:
        with session_scope(build.engine) as session:
            predicted = select(Review.split, func.count()).join(Prediction, Prediction.review_id == Review.id)
            return dict(session.execute(predicted.group_by(Review.split)).all())

    build.run(until="predict_nbsvm")
    with session_scope(build.engine) as session:
        catalogue = session.scalar(select(func.count()).where(Review.split == CATALOGUE))
    assert predicted_splits() == {CATALOGUE: catalogue}
    record = build.run()
    assert predicted_splits() == {CATALOGUE: catalogue, EVAL: 10}
    assert set(record["steps"]) == {"data", "nbsvm", "predict_nbsvm", "predict_evaluation"}


def test_a_run_record_of_the_steps_for_every_model_is_taken_up_as_it_is(tmp_path, real_subset_archive, caplog):
    """A database built before the catalogue's steps were per model lists one "predict" and one "explain"
    step: they count as each model's, so a build taking it up redoes nothing and the site shows every model."""
    settings = Settings(
        imdb=str(real_subset_archive), data_dir=tmp_path / "data", train_size=20, titles=2, eval_size=10,
        learning_curve=[], lime_samples=8, word_lime_samples=20,
    )  # fmt: skip
    steps = [ReadData(), Train(NBSVM), Predict(NBSVM), Explain(NBSVM)]
    Pipeline(settings, steps, progress=False).run()
    with session_scope(make_engine(settings.database)) as session:
        run = latest_run(session)
        assert list(run.steps) == ["data", "nbsvm", "predict_nbsvm", "explain_nbsvm"]
        assert run.ready_models() == [NBSVM]
        old = {"predict": run.steps["predict_nbsvm"], "explain": run.steps["explain_nbsvm"]}
        run.steps = {"data": run.steps["data"], "nbsvm": run.steps["nbsvm"], **old}
        rows = session.scalar(select(func.count()).select_from(Explanation))

    caplog.set_level("INFO", logger="textflix")
    build = Pipeline(settings, steps, progress=False)
    record = build.run()
    assert "Step predict_nbsvm: already done, skipped." in caplog.text
    assert "Step explain_nbsvm: already done, skipped." in caplog.text
    assert "reviews to explain" not in caplog.text and build.steps_to_do(record) == []
    assert list(record["steps"]) == ["data", "nbsvm", "predict", "explain"]  # left as it was
    with session_scope(build.engine) as session:
        assert session.scalar(select(func.count()).select_from(Explanation)) == rows
        assert latest_run(session).ready_models() == list(MODELS)


def test_the_running_steps_progress_says_its_seconds_left_and_when_each_model_is_ready(
    tmp_path, real_subset_archive, monkeypatch, caplog
):
    """The run record's progress while NB-SVM's steps run: every step of the build, done of total, the
    running step's seconds left from its rate so far, and NB-SVM's seconds until its predict step is done
    (the site shows it then), none once it is; its explanations not estimated from what its predictions cost
    (their cost is per review, not per character), but from their own rate once timed. (A rate after any time, and every report written, so that a build of seconds shows them.)"""
    monkeypatch.setattr(estimates, "TIMED_AFTER_S", 0.0)
    monkeypatch.setattr(pipeline, "PROGRESS_WRITE_S", 0.0)
    written = []
    set_progress = Pipeline._set_progress
    monkeypatch.setattr(Pipeline, "_set_progress", lambda build, progress: (written.append(progress),
                                                                             set_progress(build, progress)))  # fmt: skip
    settings = Settings(
        imdb=str(real_subset_archive), data_dir=tmp_path / "data", train_size=20, titles=2, eval_size=10,
        learning_curve=[], lime_samples=8, word_lime_samples=20,
    )  # fmt: skip
    caplog.set_level("INFO", logger="textflix")
    build = Pipeline(settings, [ReadData(), Train(NBSVM), Predict(NBSVM), Explain(NBSVM)], progress=False)
    build.run()

    names = ["data", "nbsvm", "predict_nbsvm", "explain_nbsvm"]
    running = [p for p in written if p is not None]
    assert all(p["steps"] == names for p in running)
    predicting = [p for p in running if p["step"] == "predict_nbsvm" and "done" in p]
    assert predicting[-1]["done"] == predicting[-1]["total"] > 0 and predicting[-1]["unit"] == "reviews"
    assert predicting[-1]["eta_s"] == 0 and isinstance(predicting[-1]["ready_in_s"][NBSVM], int)
    timed = [p for p in predicting if p.get("eta_s") is not None]
    assert timed and all(p["ready_in_s"] == {NBSVM: p["eta_s"]} for p in timed)  # its own step is the last
    explaining = [p for p in running if p["step"] == "explain_nbsvm"]
    assert explaining and all(p["ready_in_s"] == {} for p in explaining)  # on the site: its highlights come in
    assert explaining[0]["eta_s"] is None and isinstance(explaining[-1]["eta_s"], int)  # timed as it goes
    assert written[-1] is None  # no step runs
    assert "Number format: " in caplog.text
    assert re.search(r"Step explain_nbsvm: \d+ of \d+ reviews in \d+ s: about .* left for it", caplog.text)


def test_while_the_teacher_labels_the_students_training_is_scaled_from_the_teachers_training(tmp_path):
    """The last BERT timed while the teacher labels is its reading, far cheaper a character than its training:
    the student's training, not timed yet, is still scaled from the teacher's training (what SCALED_COST_FACTOR
    is measured against), and the student's reading from the teacher's reading. Synthetic timings."""
    shapes = {"teacher-checkpoint": (768, 3072, 12), "student-checkpoint": (384, 1536, 6)}
    for name, (hidden, inner, layers) in shapes.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(
            json.dumps({"hidden_size": hidden, "intermediate_size": inner, "num_hidden_layers": layers})
        )
    build = SimpleNamespace(checkpoint=lambda name: SimpleNamespace(location=tmp_path / name))
    texts = ["A film of its time, and of ours. " * 20] * 10
    teacher = BertConfig(base_model="teacher-checkpoint")
    student = BertConfig(base_model="student-checkpoint", frozen_layers=2)
    teacher_training, labelling = (work(build, TEACHER, teacher, texts) for work in (bert_training, bert_reading))
    student_training, student_reading = (work(build, BERT, student, texts) for work in (bert_training, bert_reading))
    scaled = student_training.size / teacher_training.size * estimates.SCALED_COST_FACTOR
    costs = estimates.Costs()
    costs.timed(teacher_training, 4e-4)
    assert costs.of(labelling) == 4e-4  # the teacher's training times its labels until they are timed
    while_training = costs.seconds(student_training)
    assert while_training == pytest.approx(student_training.reads * 4e-4 * scaled)
    costs.timed(labelling, 1e-4)  # the teacher labels, 4 times cheaper a character than it trains
    assert costs.seconds(student_training) == pytest.approx(while_training)
    assert costs.of(student_reading) == pytest.approx(1e-4 * scaled)
    costs.timed(student_training, 2e-4)  # the student timed: its own cost, for its reading too until that is timed
    assert costs.of(student_training) == costs.of(student_reading) == 2e-4


def test_the_build_and_the_server_write_the_same_rows_for_a_review(tmp_path):
    """One review, one model, the same LIME seeds: the build's per-review work (``units``, ``Worker``,
    ``write_results``), the server's analysis of a posted review (``store_user_review``) and its filling in
    of one posted while the model was pending (``fill_in_model``) write the same rows (``app.results``)."""
    engine = make_engine(build_web_database(tmp_path / "textflix.db"))
    settings = Settings(database_url=str(engine.url), lime_samples=16, batch_window_ms=2)
    text = "A wonderful film. The plot was boring. Great acting, though! I would not watch it again."
    spans, lock, model = sentence_spans(text), threading.Lock(), cue_model(0.0)
    analyzer = ModelAnalyzer({NBSVM: model}, settings)

    async def analyse():
        try:
            [result] = await analyzer.analyze([text], True, {BERT: WAITING})
            p_positive, explanations = await asyncio.gather(analyzer.predict([text]), analyzer.explain(text, spans))
            return result, float(p_positive[NBSVM][0]), explanations[NBSVM].as_dict()
        finally:
            await analyzer.stop()

    result, p_positive, explanation = asyncio.run(analyse())
    [unread] = unanalysed([text], True, {NBSVM: WAITING, BERT: WAITING})  # a review posted while no model was ready: its sentences only
    posted = store_user_review(engine, lock, text, "tt0100001", None, result)
    filled, built = (store_user_review(engine, lock, text, "tt0100001", None, unread) for _ in range(2))
    fill_in_model(engine, lock, filled, NBSVM, p_positive, explanation)
    worker = Worker(lambda name: SimpleNamespace(predict_proba=model, reads_sentences=False), settings.group(LimeConfig),
                    settings.group(WordLimeConfig))  # fmt: skip
    for task in (Task(NBSVM), Task(NBSVM, SENTENCE)):
        with session_scope(engine) as session:
            write_results(session, worker(list(units(engine, task, [built]))))

    def rows(review_id: int) -> tuple:
        with session_scope(engine) as session:
            prediction = session.get(Prediction, {"model": NBSVM, "review_id": review_id})
            weights = session.scalars(
                select(SentenceWeight.weight).join(Sentence).where(Sentence.review_id == review_id).order_by(Sentence.position)
            ).all()
            explanation = session.get(Explanation, {"model": NBSVM, "review_id": review_id, "level": SENTENCE})
            figures = {c.name: getattr(explanation, c.name) for c in Explanation.__table__.columns if c.name != "review_id"}
            return (prediction.label, prediction.p_positive), list(weights), figures

    assert rows(posted) == rows(filled) == rows(built)
    assert len(rows(built)[1]) == len(spans) == 4 and rows(built)[2]["samples"] == 16
