"""`textflix build --engine ray`: the per-review steps as Ray Data pipelines write the same rows
as the in-process engine, resume after a kill, and switch engines mid-step; clear errors
without Ray or without a cluster.

Every BERT row is compared exactly. A Ray actor gets 1 CPU, so torch runs one thread in it;
the local builds here run one thread too (OMP_NUM_THREADS=1). With more threads in-process
(the default: one per core) BERT's float32 sums are split differently, and its probabilities
differ from the actors' in the last bit (at most 3e-8, LIME weights 1e-7; measured in the
docs/benchmarks/scaling-out.md): the engines run the same code on the same texts in the same batches.
"""

import importlib.util
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli import main, parser
from app.settings import Settings
from tests.conftest import ROOT

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install -e '.[ray]'; CI installs it)"
)
TINY = [
    "--set", "train_size=24", "--titles", "2", "--set", "eval_size=20", "--set", "epochs=1", "--set", "max_length=96",
    "--set", "calibration_folds=0", "--set", "prior_reviews=20", "--set", "lime_samples=8",
    "--set", "word_lime_samples=20", "--set", "faithfulness_draws=2", "--set", "learning_curve=",
    "--set", "word_faithfulness_reviews=2",
]  # fmt: skip
# Every row the per-review steps write or read, with every column but the reviews' creation times.
TABLES = {
    "reviews": "id, title_id, text, label, split, source_key",
    "sentences": "*",
    "predictions": "*",
    "sentence_weights": "*",
    "word_weights": "*",
    "explanations": "*",
}


def rows(db) -> dict[str, list[tuple]]:
    with sqlite3.connect(db) as connection:
        return {t: sorted(connection.execute(f"SELECT {columns} FROM {t}")) for t, columns in TABLES.items()}


def count(db, sql):
    with sqlite3.connect(db) as connection:
        return connection.execute(sql).fetchone()[0]


def build_command(archive, data, db, *extra) -> list[str]:
    return [sys.executable, "-m", "app.cli", "build", "--imdb", str(archive), "--data-dir", str(data),
            "--database", f"sqlite:///{db}", *TINY, *extra]  # fmt: skip


def environment() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def build(archive, data, db, *extra) -> subprocess.CompletedProcess:
    result = subprocess.run(
        build_command(archive, data, db, *extra), cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def local_build(real_subset_archive, tmp_path_factory):
    """A complete build with the in-process engine; the other builds share its data directory
    (so its trained models) and write databases of their own."""
    data = tmp_path_factory.mktemp("ray-builds") / "data"
    db = data / "local.db"
    build(real_subset_archive, data, db)
    return data, db


def test_the_engine_is_a_flag_of_build_and_up_and_not_part_of_the_build_config():
    for command in ("build", "up"):
        args = vars(parser().parse_args([command, "--engine", "ray", "--ray-address", "10.0.0.1:6379"]))
        assert (args["engine"], args["ray_address"]) == ("ray", "10.0.0.1:6379")
    with pytest.raises(SystemExit):
        parser().parse_args(["serve", "--engine", "ray"])
    config = Settings(engine="ray", ray_address="auto").build_config()
    assert not {"engine", "ray_address"} & set(config)
    assert Settings().engine == "local" and Settings().ray_address is None


def unpredicted_copy(db: Path, tmp_path: Path) -> Path:
    """A copy of the built database ``db`` whose predict steps (and all after them) are still to do."""
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    with sqlite3.connect(copy) as connection:
        connection.execute("DELETE FROM predictions")
        connection.execute(
            "UPDATE runs SET status = 'running', steps = json_remove(steps, '$.predict', '$.predict_evaluation')"
        )
    return copy


@pytest.mark.slow
def test_without_ray_the_build_says_how_to_install_it(local_build, monkeypatch, capsys, real_subset_archive, tmp_path):
    data, db = local_build
    copy = unpredicted_copy(db, tmp_path)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    args = ["build", "--imdb", str(real_subset_archive), "--data-dir", str(data), "--database", f"sqlite:///{copy}"]
    assert main([*args, *TINY, "--engine", "ray"]) == 1
    error = capsys.readouterr().err
    assert "textflix: error: --engine ray needs Ray, which is not installed: pip install -e '.[ray]'" in error
    assert "Traceback" not in error
    assert count(copy, "SELECT COUNT(*) FROM predictions") == 0


@needs_ray
@pytest.mark.slow
def test_an_unreachable_cluster_is_named_at_once(local_build, capsys, real_subset_archive, tmp_path):
    data, db = local_build
    copy = unpredicted_copy(db, tmp_path)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    args = ["build", "--imdb", str(real_subset_archive), "--data-dir", str(data), "--database", f"sqlite:///{copy}"]
    started = time.monotonic()
    assert main([*args, *TINY, "--engine", "ray", "--ray-address", address]) == 1
    assert time.monotonic() - started < 60
    error = capsys.readouterr().err
    assert f"textflix: error: Cannot reach a Ray cluster at {address}" in error and "--ray-address" in error
    assert "Traceback" not in error


@needs_ray
@pytest.mark.slow
def test_a_build_stopped_by_one_engine_is_finished_by_the_other(local_build, real_subset_archive):
    """A local build that stopped mid-explain (its last reviews without rows) is finished by
    Ray; the rows equal the local build's."""
    data, local_db = local_build
    db = data / "switched.db"
    shutil.copy(local_db, db)
    with sqlite3.connect(db) as connection:
        half = connection.execute("SELECT MAX(id) / 2 FROM reviews WHERE split = 'catalogue'").fetchone()[0]
        connection.execute("DELETE FROM sentence_weights WHERE sentence_id IN "
                           "(SELECT id FROM sentences WHERE review_id > ?) AND model = 'bert'", (half,))  # fmt: skip
        connection.execute("DELETE FROM explanations WHERE review_id > ? AND model = 'bert'", (half,))
        connection.execute("DELETE FROM word_weights")
        connection.execute("DELETE FROM explanations WHERE level = 'word'")
        connection.execute(
            "UPDATE runs SET status = 'running', "
            "steps = json_remove(steps, '$.explain_nbsvm', '$.explain_bert', '$.evaluate', '$.curve')"
        )
    left = count(db, f"SELECT COUNT(*) FROM reviews WHERE split = 'catalogue' AND id > {half}")
    result = build(real_subset_archive, data, db, "--engine", "ray")
    assert "Step predict_bert: already done" in result.stderr
    catalogue = count(db, "SELECT COUNT(*) FROM reviews WHERE split = 'catalogue'")
    assert f"LIME bert sentences: {left} reviews to explain, {catalogue - left} already done." in result.stderr
    assert f"LIME nbsvm words: {catalogue} reviews to explain, 0 already done." in result.stderr
    assert rows(db) == rows(local_db)


@needs_ray
@pytest.mark.slow
def test_a_killed_ray_build_resumes_without_redoing_reviews_and_writes_the_same_rows_as_the_local_build(
    local_build, real_subset_archive, tmp_path
):
    """One Ray build, killed mid-explain and resumed: it resumes the reviews left, and its rows in
    the end are exactly the local build's."""
    data, local_db = local_build
    db = data / "killed.db"
    command = build_command(real_subset_archive, data, db, "--engine", "ray")
    first_log = tmp_path / "first.log"
    # its own session: the kill takes the build and the local Ray it started (its actors go with their raylet)
    with open(first_log, "wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and process.poll() is None:
            if db.exists() and count(db, "SELECT COUNT(*) FROM sqlite_master WHERE name='explanations'"):
                if count(db, "SELECT COUNT(*) FROM explanations") >= 1:
                    break
            time.sleep(0.05)
        assert process.poll() is None, "the build ended before it could be killed"
        os.killpg(process.pid, signal.SIGKILL)  # the build and everything of its session
        process.wait()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert "NB-SVM already trained" in first_log.read_text(errors="replace")  # the same models: only the engine differs
    first = rows(db)
    catalogue = len([r for r in first["reviews"] if r[4] == "catalogue"])
    assert 0 < len(first["explanations"]) < 3 * catalogue, "killed mid-explain"
    assert count(db, "SELECT status FROM runs") == "running"

    result = build(real_subset_archive, data, db, "--engine", "ray")
    assert "Ray: a local Ray on this machine (" in result.stderr and "1 CPU each" in result.stderr
    assert "Step predict_nbsvm: already done" in result.stderr
    done = [(model, level) for _, model, level, *_ in first["explanations"]]
    for model, level in (("nbsvm", "sentence"), ("bert", "sentence"), ("nbsvm", "word")):
        finished = done.count((model, level))
        assert f"LIME {model} {level}s: {catalogue - finished} reviews to explain, {finished} already done." in result.stderr
    after = rows(db)
    assert set(first["explanations"]) <= set(after["explanations"])  # finished reviews kept as they were
    expected = rows(local_db)
    assert expected["predictions"] and expected["sentence_weights"] and expected["word_weights"]
    assert after == expected  # exact: the clean local build's predictions, LIME weights and quality figures
    assert count(db, "SELECT status FROM runs") == "complete"
    steps = json.loads(count(db, "SELECT steps FROM runs"))
    assert {steps[name]["engine"] for name in ("predict_nbsvm", "explain_nbsvm", "predict_bert", "explain_bert")} == {"ray"}
    assert steps["explain_bert"]["actors"] >= 1
    assert json.loads(count(local_db, "SELECT steps FROM runs"))["explain_bert"]["engine"] == "local"
