"""The distill recipe: a teacher fine-tuned on the labelled reviews labels unlabeled ones,
and the served BERT model learns from both."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time

import pytest
import torch

from app.db import Run, make_engine, migrate, session_scope
from app.offline.pipeline import Pipeline, concrete_recipe
from app.offline.steps import build_steps
from app.offline.steps.data import ReadData
from app.offline.steps.training import PSEUDO_LABEL_CHUNK, TrainTeacher, label_chunks
from app.settings import Settings
from model.config import AUTO, DISTILL, MINILM, MPNET, PLAIN, SENTENCES
from model.bert import BertClassifier
from model.data import RawReview, UnlabeledReview, read_unlabeled, sample_unlabeled
from model.names import MODEL_META_FILE
from model.sentences import split_sentences
from model.served import load_served
from tests.conftest import ROOT, SUBSET_UNSUP, write_archive

# 48 unlabeled reviews and their runs: 9 chunks of the teacher's labelling (PSEUDO_LABEL_CHUNK), a kill in
# between; windows of 128 tokens: the teacher and the student read at most half of what they would at 256;
# 2 calibration folds (the default, 5, trains the student 5 times over: most of the test's time).
UNLABELED = 48
ARGS = [
    "--set", "recipe=distill", "--set", f"teacher_model={MINILM}", "--set", "teacher_epochs=1",
    "--set", "student_epochs=1", "--set", f"unlabeled={UNLABELED}", "--set", "train_size=24", "--titles", "1",
    "--set", "eval_size=20", "--set", "epochs=1", "--set", "max_length=128", "--set", "calibration_folds=2",
    "--set", "prior_reviews=20", "--set", "lime_samples=8", "--set", "word_lime_samples=10",
    "--set", "faithfulness_draws=2", "--set", "learning_curve=", "--set", "word_faithfulness_reviews=2",
]  # fmt: skip


def rows(db, sql) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(sql).fetchall()


@pytest.fixture(scope="module")
def archive_with_a_test_copy(real_subset_archive, tmp_path_factory):
    """The subset archive plus an unlabeled review that is a copy of a test review (the real
    archive has such copies): it must never be labelled."""
    with tarfile.open(real_subset_archive) as archive:
        files = {m.name: archive.extractfile(m).read().decode() for m in archive if m.isfile()}
    test_text = files[next(name for name in sorted(files) if name.startswith("aclImdb/test/pos/"))]
    files[f"aclImdb/train/unsup/{SUBSET_UNSUP}_0.txt"] = test_text
    return write_archive(tmp_path_factory.mktemp("imdb-copy") / "aclImdb_v1.tar.gz", files), test_text


def test_unlabeled_reviews_leave_out_copies_of_labelled_ones(tmp_path):
    copy = "A copy of a test review.<br />It must not be labelled."
    archive = write_archive(
        tmp_path / "a.tar.gz",
        {
            "aclImdb/train/unsup/0_0.txt": "Unlabeled.<br />Fine.",
            "aclImdb/train/unsup/1_0.txt": copy,
            "aclImdb/train/unsup/10_0.txt": "Another one.",
            "aclImdb/test/pos/0_9.txt": copy,
            "aclImdb/train/pos/0_9.txt": "Labelled, not unlabeled.",
        },
    )
    test_review = RawReview("test/pos/0_9", "test", "positive", 9, "tt0000001", "A copy of a test review.\nIt must not be labelled.")
    unlabeled = read_unlabeled(archive, [test_review])
    assert [(r.key, r.text) for r in unlabeled] == [("train/unsup/0_0", "Unlabeled.\nFine."), ("train/unsup/10_0", "Another one.")]
    assert sample_unlabeled(unlabeled, 1, 7) == sample_unlabeled(unlabeled, 1, 7)
    assert len(sample_unlabeled(unlabeled, 5, 7)) == 2


@pytest.mark.slow
def test_distill_build_resumes_after_a_kill_while_pseudo_labelling(tmp_path, archive_with_a_test_copy):
    archive, test_text = archive_with_a_test_copy
    data = tmp_path / "data"
    db = data / "textflix.db"
    # a student that reads sentence by sentence, taught by a teacher that reads whole texts: each
    # unlabeled review, and a run of sentences cut from it, shuffled with its review
    command = [sys.executable, "-m", "app.cli", "build", "--imdb", str(archive), "--data-dir", str(data), *ARGS,
               "--set", "pooling=sentences", "--set", "teacher_cuts=2", "--set", "student_batches=together"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            if db.exists() and rows(db, "SELECT COUNT(*) FROM sqlite_master WHERE name='pseudo_labels'")[0][0]:
                if rows(db, "SELECT COUNT(*) FROM pseudo_labels")[0][0] >= 1:
                    break
            time.sleep(0.02)
        assert process.poll() is None, "the build ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        process.kill()
    labelled_first = set(rows(db, "SELECT * FROM pseudo_labels"))
    assert 0 < len(labelled_first) < UNLABELED, "killed while pseudo-labelling"

    # A guard against a hang, not a speed check: on a busy machine the resumed build took over 600 s.
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr
    assert "Step teacher: already done" in result.stderr  # not trained again
    labelled = set(rows(db, "SELECT * FROM pseudo_labels"))
    reviews = {key: text for key, text, _ in labelled if "#" not in key}
    cuts = 2 * sum(len(split_sentences(text)) >= 2 for text in reviews.values())  # two distinct runs of each
    assert (
        f"Pseudo-labels: {UNLABELED + cuts - len(labelled_first)} texts to label ({UNLABELED} unlabeled reviews and {cuts} runs "
        f"of their sentences), {len(labelled_first)} already done." in result.stderr
    )
    assert labelled_first <= labelled and len(reviews) == UNLABELED and len(labelled) == UNLABELED + cuts > UNLABELED
    assert all(key.startswith("train/unsup/") and 0 <= p <= 1 for key, _, p in labelled)
    for key, text, _ in labelled - {row for row in labelled if row[0] in reviews}:  # a run: part of its review
        assert text in reviews[key.split("#")[0]] and len(text) < len(reviews[key.split("#")[0]])
    texts = set(reviews.values())
    assert not texts & {text for (text,) in rows(db, "SELECT text FROM reviews")}  # no labelled text, test or train
    assert test_text.replace("<br />", "\n").strip() not in texts

    record = json.loads(rows(db, "SELECT steps FROM runs")[0][0])
    assert record["teacher"]["base_model"] == MINILM and record["teacher"]["labelled"] == 24
    assert record["pseudo_label"]["unlabeled"] == UNLABELED and record["pseudo_label"]["unlabeled_pool"] == SUBSET_UNSUP
    assert record["pseudo_label"]["teacher_cuts"] == cuts
    assert record["bert"]["recipe"] == "distill" and record["bert"]["teacher_labelled"] == UNLABELED + cuts
    assert all(record[step]["seconds"] > 0 for step in ("teacher", "pseudo_label", "bert"))
    metrics = json.loads(rows(db, "SELECT metrics FROM runs")[0][0])
    assert metrics["teacher"]["eval"]["n"] == 20 and 0 <= metrics["bert"]["eval"]["accuracy"] <= 1
    student = json.loads((data / "models" / "bert" / MODEL_META_FILE).read_text())
    assert student["base_model"] == MINILM and student["epochs"] == 1 and student["pooling"] == "sentences"
    assert json.loads((data / "models" / "teacher" / MODEL_META_FILE).read_text())["pooling"] == "cls"
    # the served BERT hands its texts of one sentence to the teacher (--one-sentence-reader teacher)
    assert record["calibrate"]["one_sentence_reader"] == student["one_sentence_reader"] == "teacher"
    served = load_served(data / "models" / "bert", torch.device("cpu"))
    teacher = BertClassifier.load(data / "models" / "teacher", torch.device("cpu"))
    one, two = "A fine, warm film.", "A fine, warm film. I would see it again."
    assert served.predict_proba([one]) == pytest.approx(teacher.predict_proba([one]), abs=1e-4)
    assert served.predict_proba([two]) == pytest.approx(served.own.predict_proba([two]), abs=1e-4)


def test_recipe_auto_is_made_concrete_before_a_build_stores_it(tmp_path):
    """--recipe auto: distill at MPNet size on CUDA, distill to the damped MiniLM sentence model on a
    CPU (settings given keep their value), and a database's own recipe wherever it is carried on.
    The CUDA branch needs no GPU: it is chosen from the device, which is only compared here."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    fresh = Settings(data_dir=tmp_path / "fresh", recipe=AUTO)
    on_cpu = concrete_recipe(fresh, None, cpu)
    assert (on_cpu.recipe, on_cpu.base_model, on_cpu.pooling) == (DISTILL, MINILM, SENTENCES)
    assert (on_cpu.teacher_frozen_layers, on_cpu.teacher_cuts, on_cpu.length_exponent) == (8, 4, -0.5)
    assert (on_cpu.unlabeled, on_cpu.calibration_folds) == (2000, 0)
    given = concrete_recipe(Settings(data_dir=tmp_path / "fresh", recipe=AUTO, length_exponent=0), None, cpu)
    assert (given.recipe, given.length_exponent) == (DISTILL, 0)
    plain_stored = Settings(data_dir=tmp_path / "old", recipe=PLAIN).build_config()
    assert concrete_recipe(fresh, plain_stored, cpu).length_exponent == 0
    on_gpu = concrete_recipe(fresh, None, cuda)
    assert (on_gpu.recipe, on_gpu.base_model, on_gpu.learning_rate) == (DISTILL, MPNET, 5e-5)
    given = concrete_recipe(Settings(data_dir=tmp_path / "fresh", recipe=AUTO, base_model=MINILM), None, cuda)
    assert (given.recipe, given.base_model) == (DISTILL, MINILM)
    assert concrete_recipe(Settings(data_dir=tmp_path / "fresh", recipe=PLAIN), None, cuda).recipe == PLAIN
    carried_on = concrete_recipe(fresh, on_gpu.build_config(), cpu)
    assert (carried_on.recipe, carried_on.base_model, carried_on.learning_rate) == (DISTILL, MPNET, 5e-5)


def test_a_build_stores_and_builds_the_concrete_recipe(tmp_path):
    """Any Pipeline, not only the CLI's, reads the run record for --recipe auto and builds the
    steps of the recipe it stores."""
    asked = []

    def steps_of(recipe: str) -> list:
        asked.append(recipe)
        return []

    Pipeline(Settings(data_dir=tmp_path / "cpu", recipe=AUTO), steps_of, progress=False).run()
    assert asked == [DISTILL] and stored_recipe(tmp_path / "cpu" / "textflix.db") == DISTILL

    built_on_gpu = Settings(data_dir=tmp_path / "gpu", recipe=AUTO)
    engine = make_engine(built_on_gpu.database)
    migrate(engine)
    with session_scope(engine) as session:
        config = concrete_recipe(built_on_gpu, None, torch.device("cuda")).build_config()
        session.add(Run(config=config, steps={}, counts={}, metrics={}))
    engine.dispose()
    carried_on = Pipeline(built_on_gpu, steps_of, progress=False)
    carried_on.run()
    assert asked[-1] == DISTILL and carried_on.settings.base_model == MPNET
    assert stored_recipe(tmp_path / "gpu" / "textflix.db") == DISTILL


def test_the_teachers_fingerprint_is_made_of_the_teachers_own_settings(tmp_path, real_subset_archive):
    """Another served model (its epochs, its length exponent) built into another database of the
    same data directory reuses the trained teacher; another teacher setting retrains it."""

    def teacher_fingerprint(database: str, **values) -> str:
        settings = Settings(imdb=str(real_subset_archive), data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / database}",
                            train_size=24, titles=1, eval_size=20, recipe=DISTILL, **values)  # fmt: skip
        pipeline = Pipeline(settings, [ReadData()], progress=False)
        pipeline.run()
        return TrainTeacher().fingerprint(pipeline)

    teacher = teacher_fingerprint("a.db")
    assert teacher_fingerprint("b.db", length_exponent=-0.5, student_epochs=3, epochs=4) == teacher
    assert teacher_fingerprint("c.db", teacher_epochs=2) != teacher
    assert teacher_fingerprint("d.db", batch_size=8) != teacher  # a setting the teacher shares with the served model


def stored_recipe(db) -> str:
    return json.loads(rows(db, "SELECT config FROM runs")[0][0])["recipe"]


def test_a_teacher_with_every_layer_frozen_is_refused_naming_the_setting(tmp_path, real_subset_archive):
    """recipe auto on a CPU freezes 8 of MPNet's 12 layers; a smaller teacher_model given instead
    would have nothing left to train: the build says which setting to change."""
    arguments = ["build", "--imdb", str(real_subset_archive), "--data-dir", str(tmp_path), *ARGS]
    result = subprocess.run([sys.executable, "-m", "app.cli", *arguments, "--set", "teacher_frozen_layers=6"], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert (
        f"teacher_frozen_layers=6 leaves nothing of {MINILM} to train: it must be under the model's 6 layers, "
        "not 6. Give a smaller one: --set teacher_frozen_layers=N (0: all trained)."
    ) in result.stderr


def test_the_teacher_labels_the_texts_shortest_first_in_chunks():
    """Each chunk the teacher labels (and commits) holds texts of a length, so its batches are little padding."""
    todo = [UnlabeledReview(key=f"k{i}", text="word " * ((i * 37) % 50 + 1)) for i in range(2 * PSEUDO_LABEL_CHUNK + 3)]
    chunks = list(label_chunks(todo))
    assert [len(chunk) for chunk in chunks] == [PSEUDO_LABEL_CHUNK, PSEUDO_LABEL_CHUNK, 3]
    labelled = [r for chunk in chunks for r in chunk]
    assert sorted(r.key for r in labelled) == sorted(r.key for r in todo)
    assert [len(r.text) for r in labelled] == sorted(len(r.text) for r in todo)


def test_with_no_label_reviews_the_teacher_labels_only_the_runs(tmp_path, real_subset_archive):
    """--no-label-reviews: the teacher labels each unlabeled review's runs of sentences, not the
    review, and the build records how many of each it labelled."""
    settings = Settings(imdb=str(real_subset_archive), data_dir=tmp_path, train_size=24, titles=1, eval_size=20,
                        recipe=DISTILL, teacher_model=MINILM, teacher_epochs=1, unlabeled=6, teacher_cuts=2,
                        label_reviews=False)  # fmt: skip
    pipeline = Pipeline(settings, build_steps(DISTILL), progress=False)
    record = pipeline.run(until="pseudo_label")
    labelled = rows(tmp_path / "textflix.db", "SELECT source_key, text FROM pseudo_labels")
    reviews = {r.key: r.text for r in sample_unlabeled(pipeline.splits().unlabeled, 6, settings.seed)}
    assert labelled and all("#" in key and text in reviews[key.split("#")[0]] for key, text in labelled)
    facts = record["steps"]["pseudo_label"]
    assert (facts["unlabeled"], facts["reviews_labelled"], facts["teacher_cuts"]) == (6, 0, len(labelled))


def test_no_label_reviews_without_runs_is_refused_before_the_database_is_made(tmp_path, real_subset_archive):
    arguments = ["build", "--imdb", str(real_subset_archive), "--data-dir", str(tmp_path), *ARGS, "--set", "label_reviews=false"]
    result = subprocess.run([sys.executable, "-m", "app.cli", *arguments], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "--set label_reviews=false with --set teacher_cuts=0 leaves the teacher nothing to label" in result.stderr
    assert not (tmp_path / "textflix.db").exists()
