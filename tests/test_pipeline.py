"""`textflix build` end to end: real archive, resume after a kill, reruns, bad input."""

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from statistics import fmean, stdev
from types import SimpleNamespace

import httpx
import pytest
import torch
from fastapi.testclient import TestClient

from app.cli import main
from app.offline.steps.evaluation import curve_epochs
from app.settings import Settings
from app.web.main import create_app
from model.bert import BertClassifier
from model.config import MINILM
from model.data import read_unlabeled, sample_unlabeled
from tests.conftest import (
    MARKUP_DOC,
    ROOT,
    empty_postgresql,
    free_port,
)

SMALL = [
    "--set", "train_size=24", "--titles", "2", "--set", "eval_size=30", "--set", "epochs=1",
    "--set", "max_length=96", "--set", "calibration_folds=2", "--set", "prior_reviews=40", "--set", "lime_samples=8",
    "--set", "word_lime_samples=20",
    "--set", "learning_curve=12,24,48", "--set", "curve_seeds=2",
    "--set", "word_faithfulness_reviews=3", "--set", "word_plausibility_reviews=2",
]  # fmt: skip
TABLES = ["movies", "reviews", "predictions", "sentences", "sentence_weights", "word_weights", "explanations", "runs"]


def snapshot(db) -> dict[str, list]:
    with sqlite3.connect(db) as connection:
        return {t: sorted(map(repr, connection.execute(f"SELECT * FROM {t}"))) for t in TABLES}


def own_accuracy(db, model: str, size: int, seed: int = 42) -> float:
    """The accuracy of the build's ``model`` on the learning curve's sample of ``size`` evaluation
    reviews (seeded by the build's seed, drawn from them in id order), from its stored predictions."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT r.id, r.label, p.p_positive FROM reviews r JOIN predictions p ON p.review_id = r.id "
            "WHERE r.split = 'eval' AND p.model = ? ORDER BY r.id", (model,)
        ).fetchall()
    sample = random.Random(seed).sample([(id,) for id, _, _ in rows], size)
    chosen = {id for (id,) in sample}
    right = [(p >= 0.5) == (label == "positive") for id, label, p in rows if id in chosen]
    return sum(right) / len(right)


def count(db, sql) -> int:
    with sqlite3.connect(db) as connection:
        return connection.execute(sql).fetchone()[0]


def catalogue_size(db) -> int:
    return count(db, "SELECT COUNT(*) FROM reviews WHERE split='catalogue'")


def build_args(tmp_path, archive, *extra) -> list[str]:
    return ["build", "--imdb", str(archive), "--data-dir", str(tmp_path / "data"), *SMALL, *extra]


def skewed_figures_agree_with_the_confusion(metrics: dict) -> None:
    """The majority baseline, balanced accuracy and macro-F1 of a set, as its confusion matrix gives them."""
    (tn, fp), (fn, tp) = metrics["confusion"]
    assert metrics["majority_baseline"] == pytest.approx(max(tn + fp, fn + tp) / metrics["n"])
    recalls = [tn / (tn + fp), tp / (tp + fn)]
    assert metrics["balanced_accuracy"] == pytest.approx(sum(recalls) / 2)
    f1s = [2 * tn / (2 * tn + fn + fp), 2 * tp / (2 * tp + fp + fn)]
    assert metrics["macro_f1"] == pytest.approx(sum(f1s) / 2)


def test_every_bert_of_the_learning_curve_trains_as_many_steps_as_the_builds_own():
    assert [curve_epochs(3, 500, size) for size in (100, 200, 500, 1000)] == [15, 8, 3, 3]
    assert curve_epochs(1, 24, 12) == 2


@pytest.mark.slow
def test_build_end_to_end_on_the_real_archive(
    tmp_path, capsys, real_reviews, eraser_with_markup, shared_archive, shared_movies, shared_sst2
):
    sst2 = tmp_path / "sst2_dev.tsv"  # a handful of SST-2's one-line reviews, as an evaluation set
    sst2.write_text("".join(shared_sst2.read_text(encoding="utf-8").splitlines(keepends=True)[:9]), encoding="utf-8")
    extra = ("--movies", str(shared_movies), "--sst2", str(sst2), "--set", "curve_eval_size=20",
             "--rationales", str(eraser_with_markup))  # fmt: skip
    assert main(build_args(tmp_path, shared_archive, *extra)) == 0
    summary = capsys.readouterr().out
    assert "bert" in summary and "nbsvm" in summary and "accuracy" in summary
    assert "learning curve, evaluation accuracy, mean ± std over 2 seeds" in summary
    assert "accuracy by length" in summary and "sst2" in summary
    assert "majority balanced macro-F1" in summary

    assert main(["report", "--json", "--data-dir", str(tmp_path / "data")]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "complete"
    assert record["counts"]["titles"] == 2 and record["counts"]["train"] == 24
    assert record["counts"]["eval"] == 30
    for model in ("bert", "nbsvm"):
        for split in ("eval", "catalogue"):
            metrics = record["metrics"][model][split]
            assert 0 <= metrics["accuracy"] <= 1 and 0 <= metrics["ece"] <= 1
            assert sum(map(sum, metrics["confusion"])) == metrics["n"]
            skewed_figures_agree_with_the_confusion(metrics)
    assert record["metrics"]["bert"]["eval"]["n"] == 30
    for model in ("bert", "nbsvm"):
        assert record["metrics"][model]["sst2"]["n"] == 8
        assert sum(map(sum, record["metrics"][model]["sst2"]["confusion"])) == 8
    lengths = record["metrics"]["lengths"]
    assert lengths["bands"] == ["1", "2–3", "4–6", "7+"]
    assert lengths["n"][0] == 30  # every evaluation review's first sentence (none is one sentence long)
    assert sum(lengths["n"]) > 30 * 4  # the 30 reviews whole, and cut to 1, 2, … 6 sentences
    assert all(0 <= a <= 1 for model in ("bert", "nbsvm") for a in lengths[model])
    assert lengths["majority_baseline"][0] == record["metrics"]["nbsvm"]["eval"]["majority_baseline"]  # the same 30
    for figure in ("balanced_accuracy", "macro_f1"):
        assert all(0 <= a <= 1 for model in ("bert", "nbsvm") for a in lengths[figure][model] if a is not None)
    assert set(record["timings"]) == {
        "data", "nbsvm", "predict_nbsvm", "explain_nbsvm", "bert", "calibrate", "predict_bert", "explain_bert",
        "predict_evaluation", "evaluate", "rationales", "word_shares", "curve",
    }  # fmt: skip
    rationales_were_scored(record, tmp_path / "data")
    calibration = record["steps"]["calibrate"]
    assert calibration["folds"] == 2 and calibration["temperature"] > 0 and calibration["offset_per"] == "sentence"
    # the prior is the archive's share of positives among its 50,000 labelled reviews: one half, as the training sample's
    assert calibration["prior_reviews"] == 40 and calibration["share_positive"] == 0.5
    assert calibration["share_positive_of"] == 50_000
    assert calibration["one_sentence_reader"] is None  # the plain recipe has no teacher
    meta = json.loads((tmp_path / "data" / "models" / "bert" / "textflix.json").read_text())
    assert (meta["temperature"], meta["offset"]) == (calibration["temperature"], calibration["offset"])
    # the served BERT reads the 40 unlabeled reviews as positive with mean probability one half
    served = BertClassifier.load(tmp_path / "data" / "models" / "bert", torch.device("cpu"))
    unlabeled = sample_unlabeled(read_unlabeled(shared_archive, real_reviews), 40, 42)
    assert served.predict_proba([r.text for r in unlabeled])[:, 1].mean() == pytest.approx(0.5, abs=1e-3)
    curve = record["metrics"]["learning_curve"]
    assert curve["sizes"] == [12, 24, 48] and curve["seeds"] == 2 and curve["n"] == 20
    for model in ("nbsvm", "bert"):
        series = curve[model]
        assert len(series["mean"]) == len(series["std"]) == len(series["runs"]) == 3
        for runs, mean, std in zip(series["runs"], series["mean"], series["std"]):
            if runs is None:
                assert mean is None and std is None
                continue
            assert len(runs) == 2 and all(0 <= a <= 1 and (a * 20) == pytest.approx(round(a * 20)) for a in runs)
            assert mean == pytest.approx(fmean(runs)) and std == pytest.approx(stdev(runs))
        # at the training size (24) the first seed is the build's own model, on the curve's 20 reviews
        assert series["runs"][1][0] == pytest.approx(own_accuracy(tmp_path / "data" / "textflix.db", model, 20))
    assert None not in curve["nbsvm"]["runs"]
    assert curve["bert"]["runs"][2] is None  # above the training size BERT trains on CUDA only
    assert record["seed"] == 42 and record["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"

    db = tmp_path / "data" / "textflix.db"
    catalogue = record["counts"]["catalogue"]
    assert count(db, "SELECT COUNT(*) FROM reviews WHERE split='catalogue'") == catalogue
    assert count(db, "SELECT COUNT(*) FROM predictions") == 2 * (catalogue + 30 + 5)  # and ERASER's 5 reviews
    # and NB-SVM's word LIME of the 2 ERASER reviews whose words BERT's are scored against
    assert count(db, "SELECT COUNT(*) FROM explanations") == 3 * catalogue + 2 * 5 + 2
    sentences = count(db, "SELECT COUNT(*) FROM sentences")
    assert sentences >= catalogue
    assert count(db, "SELECT COUNT(*) FROM sentence_weights") == 2 * sentences
    assert count(db, "SELECT COUNT(*) FROM movies WHERE title IS NOT NULL") >= 1
    assert count(db, "SELECT COUNT(*) FROM reviews WHERE text LIKE '%<br%'") == 0
    assert count(db, "SELECT COUNT(*) FROM sqlite_stat1 WHERE tbl = 'reviews'") > 0  # the planner's statistics

    before = snapshot(db)
    assert main(build_args(tmp_path, shared_archive, *extra)) == 0
    assert snapshot(db) == before  # a second complete run changes nothing

    # the export of a real build: every catalogue review, with both models' figures and the words
    output = tmp_path / "export.jsonl"
    assert main(["export", "--data-dir", str(tmp_path / "data"), "--output", str(output)]) == 0
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == catalogue and all(row["gold"] and row["sentences"] and row["words"] for row in rows)
    for row in rows:
        assert set(row["predictions"]) == set(row["explanations"]) == {"nbsvm", "bert"}
        samples = 2 if len(row["sentences"]) == 1 else 8  # a one-sentence review's fit is exact, of 2 texts
        assert all(e["samples"] == samples and e["quality"]["target"] == "log_odds" for e in row["explanations"].values())
        assert row["word_explanation"]["samples"] == 20


def rationales_were_scored(record: dict, data_dir) -> None:
    """The build's comparison with people's rationales (``--rationales``: 4 real ERASER reviews and one
    made-up one whose text is markup), in its run record and on the pages."""
    figures = record["metrics"]["rationales"]
    assert figures["n"] == 5 and record["steps"]["rationales"]["reviews"] == 5
    for model in ("nbsvm", "bert"):
        scores = figures["models"][model]
        assert 0 <= scores["accuracy"] <= 1 and 0 <= scores["auprc"] <= 1 and 0 <= scores["token_f1"] <= 1
        assert scores["comprehensiveness"] is not None and scores["random_comprehensiveness"] is not None
    assert set(figures["random"]["auprc"]) == {"mean", "std"} and figures["best_sentences"]["auprc"] == 1.0
    assert {d["doc"] for d in figures["agree_most"]} <= {"negR_800", "posR_800", "negR_900", "posR_900", MARKUP_DOC}

    with TestClient(create_app(Settings(data_dir=data_dir))) as client:
        about = client.get("/about").text
        assert "Do the highlights agree with people" in about and "Random sentences" in about
        assert client.get("/about.json").json()["rationales"]["state"] == "measured"
        page = client.get(f"/rationales/{MARKUP_DOC}")
        assert page.status_code == 200
        assert "<script>alert" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        assert '<u class="evidence">is &lt;b&gt;superb&lt;/b&gt;</u>' in page.text
        twin = client.get(f"/rationales/{MARKUP_DOC}.json").json()
        assert [p["text"] for p in twin["passages"]] == ["is <b>superb</b>"]
        assert [s["evidence"] for s in twin["sentences"]] == [False, True, False]
        missing = client.get("/rationales/negR_123")
        assert missing.status_code == 404 and "not among ERASER" in missing.text
        assert "ERASER" not in client.get("/").text  # never in the catalogue


def run_steps(db) -> dict:
    with sqlite3.connect(db) as connection:
        status, steps = connection.execute("SELECT status, steps FROM runs").fetchone()
    return {"status": status, "steps": set(json.loads(steps))}


def get(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=30)
    except httpx.HTTPError:
        return None


def page_text(url: str) -> str:
    """The page at ``url`` if it answers 200, else an empty string."""
    page = get(url)
    return page.text if page is not None and page.status_code == 200 else ""


def wait_for(what, process: subprocess.Popen, log, timeout: float = 900):
    """``what()`` once it is true, polled while ``process`` runs; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (found := what()):
        assert process.poll() is None, f"textflix up exited:\n{log.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"timed out:\n{log.read_text(errors='replace')[-3000:]}"
        time.sleep(0.5)
    return found


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"  # a zombie: dead, not reaped yet
    except FileNotFoundError:
        return True


def start_up(command: list[str], log) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    with open(log, "wb") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to ``process``, then SIGKILL to whatever is left of its process group."""
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@pytest.mark.slow
def test_up_serves_the_catalogue_at_once_while_a_background_build_does_the_rest(tmp_path, real_subset_archive):
    db = tmp_path / "data" / "textflix.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # a curve of 8 models (BERT and NB-SVM at 12 and 24 reviews, 2 seeds): long enough to be seen running.
    # --recipe auto, as a user's `up` runs (distilled from a small MiniLM teacher): the background build
    # gets settings auto made concrete (--length-exponent -0.5 among them), else it refuses the database.
    # One epoch of the teacher and of the student: any trained models serve here.
    command = [
        sys.executable, "-m", "app.cli", "up", *build_args(tmp_path, real_subset_archive)[1:],
        "--set", "learning_curve=12,24", "--set", "curve_seeds=2", "--port", str(port), "--device", "cpu",
        "--set", "recipe=auto", "--set", f"teacher_model={MINILM}", "--set", "teacher_frozen_layers=0",
        "--set", "teacher_epochs=1", "--set", "student_epochs=1",
        "--set", "unlabeled=20", "--set", "teacher_cuts=1", "--set", "calibration_folds=0",  # the end-to-end test checks the folds
    ]  # fmt: skip
    progress = re.compile(r'role="status">The learning curve is being computed: (\d+) of 8 models\.')
    first_log = tmp_path / "first.log"
    first = start_up(command, first_log)
    try:
        wait_for(lambda: page_text(f"{url}/"), first, first_log)
        at_first_page = run_steps(db)["steps"]  # the catalogue is served before BERT is trained
        assert "data" in at_first_page and "bert" not in at_first_page and "explain_bert" not in at_first_page
        steps = wait_for(lambda: "explain_bert" in (steps := run_steps(db)["steps"]) and steps, first, first_log)
        assert {"predict_nbsvm", "explain_nbsvm", "teacher", "pseudo_label", "bert", "calibrate"} <= steps
        line = wait_for(lambda: progress.search(page_text(f"{url}/about")), first, first_log)
        assert int(line.group(1)) < 8
        assert get(f"{url}/").status_code == 200
        background = int(re.search(r"background process \(pid (\d+)\)", first_log.read_text()).group(1))
        assert not gone(background)

        first.send_signal(signal.SIGKILL)  # `up` killed: its background build dies with it
        first.wait()
        deadline = time.monotonic() + 60
        while not gone(background):
            assert time.monotonic() < deadline, "the background build outlived `textflix up`"
            time.sleep(0.2)
    finally:
        stop(first)
    killed = run_steps(db)
    assert killed["status"] == "running" and "curve" not in killed["steps"]
    log = first_log.read_text(errors="replace")
    assert "Recipe auto: distill (on cpu)." in log
    assert "The catalogue is in and the site opens now; the rest of the build (nbsvm, predict_nbsvm, explain_nbsvm, " \
        "teacher, pseudo_label, bert, calibrate, predict_bert, explain_bert, predict_evaluation, evaluate, rationales, " \
        "word_shares, curve) goes on in a background process" in log
    assert "Step curve: " in log and "Learning curve:" in log  # the background build's progress on the console

    second_log = tmp_path / "second.log"
    second = start_up(command, second_log)
    try:
        wait_for(lambda: page_text(f"{url}/"), second, second_log)
        server = get(f"{url}/api/health").json()["pid"]
        assert "Step data: already done, skipped." in second_log.read_text()
        about = wait_for(lambda: 'id="curve-h"' in (page := page_text(f"{url}/about")) and page, second, second_log)
        assert "build-progress" not in about  # the curve is in, without a restart:
        assert get(f"{url}/api/health").json()["pid"] == server
        assert run_steps(db)["status"] == "complete"
    finally:
        stop(second)
    resumed = second_log.read_text(errors="replace")
    assert "Step explain_bert: already done, skipped." in resumed  # the background build took the work up
    assert "learning curve, evaluation accuracy" in resumed  # the build's summary


def test_truncated_archive_stops_the_build_and_creates_no_database(tmp_path, real_subset_archive, capsys):
    broken = tmp_path / "aclImdb_v1.tar.gz"
    broken.write_bytes(real_subset_archive.read_bytes()[:50_000])
    assert main(build_args(tmp_path, broken)) == 1
    error = capsys.readouterr().err
    assert f"textflix: error: {broken}: not a readable IMDB archive" in error
    assert "Traceback" not in error
    assert not (tmp_path / "data" / "textflix.db").exists()


def test_bad_settings_are_reported(tmp_path, capsys):
    assert main(["build", "--set", "train_size=many", "--data-dir", str(tmp_path)]) == 2
    assert "train_size" in capsys.readouterr().err
    assert main(["build", "--set", "curve_seeds=0", "--data-dir", str(tmp_path)]) == 2
    assert "curve_seeds" in capsys.readouterr().err
    assert main(["report", "--data-dir", str(tmp_path)]) == 1
    assert "No database at" in capsys.readouterr().err


@pytest.mark.parametrize("device, bert_sizes", [("cpu", [12, 24]), ("cuda", [12, 24, 48])])
def test_the_curve_trains_bert_beyond_the_training_size_on_cuda_only(device, bert_sizes):
    import torch

    from app.offline.steps.evaluation import LearningCurve

    build = SimpleNamespace(settings=SimpleNamespace(train_size=24), device=torch.device(device))
    assert [size for size in (12, 24, 48) if LearningCurve.trains(build, "bert", size)] == bert_sizes
    assert all(LearningCurve.trains(build, "nbsvm", size) for size in (12, 24, 48))


@pytest.mark.parametrize("flag", ["--seed", "--titles"])
def test_rebuild_with_other_settings_is_refused(tmp_path, real_subset_archive, capsys, flag):
    from app.db import Run, make_engine, migrate, session_scope
    from app.settings import Settings

    settings = Settings(data_dir=tmp_path / "data")
    engine = make_engine(settings.database)
    migrate(engine)
    with session_scope(engine) as session:
        session.add(Run(config=settings.build_config(), steps={"data": {"seconds": 1}}, counts={}, metrics={}))
    assert main(build_args(tmp_path, real_subset_archive)[:5] + [flag, "7"]) == 1
    assert "was built with other settings" in capsys.readouterr().err


@pytest.mark.slow
def test_build_on_postgresql(tmp_path, real_subset_archive):
    """The same build on PostgreSQL, given a server in TEXTFLIX_TEST_POSTGRES_URL."""
    from sqlalchemy import create_engine, select, text

    from app.db import Run

    url = empty_postgresql()
    engine = create_engine(url)
    # every step's reads and writes on PostgreSQL, without the models they train again (the end-to-end test
    # trains them): no calibration folds, a curve of the build's own models at its training size only
    args = build_args(tmp_path, real_subset_archive, "--database", url, "--set", "calibration_folds=0",
                      "--set", "learning_curve=24", "--set", "curve_seeds=1")  # fmt: skip
    assert main(args) == 0
    assert main(args) == 0  # nothing to redo
    with engine.connect() as connection:
        catalogue = connection.scalar(text("SELECT COUNT(*) FROM reviews WHERE split = 'catalogue'"))
        assert catalogue > 0
        assert connection.scalar(text("SELECT COUNT(*) FROM explanations")) == 3 * catalogue
        assert connection.scalar(text("SELECT COUNT(*) FROM runs WHERE status = 'complete'")) == 1
        curve = connection.scalar(select(Run.metrics))["learning_curve"]  # the own models' points, read back
        assert curve["sizes"] == [24] and [len(curve[model]["runs"][0]) for model in ("bert", "nbsvm")] == [1, 1]
    engine.dispose()


def test_a_corrupt_model_is_named_with_what_to_do(tmp_path):
    from app.offline.pipeline import BuildError, Pipeline
    from app.offline.steps import build_steps
    from app.settings import Settings

    model_dir = tmp_path / "models" / "nbsvm"
    model_dir.mkdir(parents=True)
    (model_dir / "model.skops").write_bytes(b"not a model")
    with pytest.raises(BuildError, match=r"The NB-SVM model in .*nbsvm cannot be loaded .*delete that folder"):
        Pipeline(Settings(data_dir=tmp_path), build_steps("plain")).model("nbsvm")


def killed_when(command: list[str], stderr, ready):
    """Runs the build ``command`` and kills it (SIGKILL, as abrupt as a power cut) once ``ready()``
    answers something true, which it returns."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    found = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None and not (found := ready()):
            time.sleep(0.05)
        assert process.poll() is None, "the build ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        process.kill()
    return found


@pytest.mark.slow
def test_a_build_killed_in_nbsvms_explanations_then_in_berts_training_resumes_without_redoing_work(
    tmp_path, real_subset_archive
):
    """One build killed twice: mid-explanation (it resumes the reviews left), then in BERT's training
    (NB-SVM was done before it: the last run does BERT alone)."""
    db = tmp_path / "data" / "textflix.db"
    # no calibration folds: every step ahead of BERT's explanations can be estimated; no learning curve:
    # what is resumed here is the explanations and BERT's training (the end-to-end test checks the folds
    # and the curve, `up`'s the curve)
    command = [sys.executable, "-m", "app.cli", *build_args(tmp_path, real_subset_archive), "--set", "calibration_folds=0",
               "--set", "learning_curve="]  # fmt: skip

    def explained() -> bool:
        made = db.exists() and count(db, "SELECT COUNT(*) FROM sqlite_master WHERE name='explanations'")
        return bool(made) and count(db, "SELECT COUNT(*) FROM explanations") >= 5

    killed_when(command, subprocess.DEVNULL, explained)
    first = snapshot(db)["explanations"]
    assert first and count(db, "SELECT status FROM runs") == "running"

    def training_bert() -> dict | None:
        with sqlite3.connect(db) as connection:
            row = connection.execute("SELECT progress FROM runs").fetchone()
        progress = json.loads(row[0]) if row and row[0] else None
        return progress if progress and progress["step"] == "bert" and progress.get("unit") == "optimizer steps" else None

    second_log = tmp_path / "second.log"
    with open(second_log, "wb") as log:
        progress = killed_when(command, log, training_bert)
    resumed = second_log.read_text(errors="replace")
    assert "Step data: already done" in resumed
    catalogue = catalogue_size(db)
    finished_first_pass = sum("'nbsvm', 'sentence'" in row for row in first)
    assert f"LIME nbsvm sentences: {catalogue - finished_first_pass} reviews to explain, " \
        f"{finished_first_pass} already done." in resumed
    order = ["data", "nbsvm", "predict_nbsvm", "explain_nbsvm", "bert", "calibrate", "predict_bert", "explain_bert",
             "predict_evaluation", "evaluate", "rationales", "word_shares", "curve"]  # fmt: skip
    assert progress["steps"] == order and progress["total"] > 0 and "eta_s" in progress
    assert set(progress["ready_in_s"]) == {"bert"}  # NB-SVM is on the site; BERT's time left, once it can be told
    with sqlite3.connect(db) as connection:
        recorded = list(json.loads(connection.execute("SELECT steps FROM runs").fetchone()[0]))
    assert recorded == order[:4]  # NB-SVM predicted and explained before BERT's training started
    nbsvm_rows = snapshot(db)
    assert set(first) <= set(nbsvm_rows["explanations"])  # finished reviews were kept as they were
    assert count(db, "SELECT COUNT(*) FROM explanations WHERE model = 'nbsvm'") == 2 * catalogue  # sentences, words
    assert count(db, "SELECT COUNT(*) FROM predictions WHERE model = 'bert'") == 0

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    for step in ("predict_nbsvm", "explain_nbsvm"):
        assert f"Step {step}: already done, skipped." in result.stderr
    assert "LIME nbsvm" not in result.stderr and "Predict nbsvm: " not in result.stderr.split("Step predict_evaluation")[0]
    assert "Number format: bfloat16" in result.stderr or "Number format: float32" in result.stderr
    after = snapshot(db)
    for table in ("sentence_weights", "word_weights", "explanations"):
        assert set(nbsvm_rows[table]) <= set(after[table])  # NB-SVM's rows kept as they were
    assert count(db, "SELECT COUNT(*) FROM explanations") == 3 * catalogue
    assert count(db, "SELECT COUNT(*) FROM runs") == 1
    with sqlite3.connect(db) as connection:
        status, steps = connection.execute("SELECT status, steps FROM runs").fetchone()
    assert status == "complete" and list(json.loads(steps)) == order
    # without --rationales the step says it skipped, and /about that the highlights were not compared
    assert count(db, "SELECT json_extract(steps, '$.rationales.skipped') FROM runs") == "no --rationales file"
    # and BERT's words are measured on the catalogue alone
    words = json.loads(count(db, "SELECT json_extract(metrics, '$.word_shares') FROM runs"))
    assert words["plausibility"] == {"skipped": "no --rationales file"} and words["faithfulness"]["n"] == 3
    assert "BERT's words are not compared with the words people marked" in result.stderr
