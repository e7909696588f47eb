"""The word shares step (``app.offline.steps.word_shares``) on a tiny real build: a build made without it, as
the code before it made one (c019164), resumes running it alone; it stores BERT's words, records sane
figures, computes nothing twice, and /about shows them."""

import json
import sqlite3

import pytest
from fastapi.testclient import TestClient

import app.offline.steps
from app.cli import main
from app.settings import Settings
from app.web.main import create_app
from model.config import WordSharesConfig
from model.names import WORD_SHARES
from tests.test_pipeline import TABLES, build_args, count, snapshot

# the settings this step adds: a run record from before it lacks them
ADDED = tuple(name for name in WordSharesConfig.model_fields if name != "seed")


def at_the_default_samples(args: list[str]) -> list[str]:
    """``args`` without their ``--set`` of the step's samples: a record from before the step resumes at their defaults."""
    kept = []
    for arg in args:
        if arg.split("=")[0] in ADDED:
            kept.pop()  # its "--set"
        else:
            kept.append(arg)
    return kept


def run_record(db) -> dict:
    with sqlite3.connect(db) as connection:
        config, steps, metrics = connection.execute("SELECT config, steps, metrics FROM runs").fetchone()
    return {"config": json.loads(config), "steps": json.loads(steps), "metrics": json.loads(metrics)}


def build_without_the_step(monkeypatch, args: list[str], db) -> None:
    """A build by the code before the step: its steps, and a run record without the step's settings."""
    every_step = app.offline.steps.build_steps
    with monkeypatch.context() as patch:
        patch.setattr(app.offline.steps, "build_steps", lambda recipe: [s for s in every_step(recipe) if s.name != WORD_SHARES])
        assert main(args) == 0
    paths = ", ".join(f"'$.{name}'" for name in ADDED)
    with sqlite3.connect(db) as connection:
        connection.execute(f"UPDATE runs SET config = json_remove(config, {paths})")


def words_stored(db) -> dict[int, int]:
    """The reviews with BERT's word shares stored, and how many words each."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT s.review_id, COUNT(*) FROM word_shares w JOIN sentences s ON s.id = w.sentence_id "
            "WHERE w.model = 'bert' GROUP BY s.review_id"
        )
        return dict(rows.fetchall())


@pytest.mark.slow
def test_the_step_resumes_an_older_build_stores_words_measures_them_and_shows_them(
    tmp_path, monkeypatch, real_subset_archive, tiny_eraser
):
    data = tmp_path / "data"
    db = data / "textflix.db"
    args = build_args(tmp_path, real_subset_archive, "--rationales", str(tiny_eraser), "--set", "learning_curve=",
                      "--set", "calibration_folds=0")  # fmt: skip
    args = at_the_default_samples(args)
    build_without_the_step(monkeypatch, args, db)
    before = run_record(db)
    assert WORD_SHARES not in before["steps"] and not set(ADDED) & set(before["config"])
    models = {path: path.stat().st_mtime_ns for path in (data / "models").rglob("*") if path.is_file()}
    rows = snapshot(db)

    assert main(args) == 0  # this code, its default sample sizes: only the new step runs
    after = run_record(db)
    assert {name: entry for name, entry in after["steps"].items() if name != WORD_SHARES} == before["steps"]
    assert {path: path.stat().st_mtime_ns for path in models} == models  # no model trained again
    resumed = snapshot(db)
    for table in set(TABLES) - {"runs"}:
        if table in ("word_weights", "explanations"):  # NB-SVM's word LIME of the ERASER sample is added
            assert set(rows[table]) <= set(resumed[table])
        else:
            assert resumed[table] == rows[table]

    figures = after["metrics"][WORD_SHARES]
    faithful = figures["faithfulness"]
    eligible = count(db, "SELECT COUNT(*) FROM (SELECT review_id FROM sentences s JOIN reviews r ON r.id = s.review_id "
                         "WHERE r.split = 'catalogue' GROUP BY review_id HAVING COUNT(*) >= 2)")  # fmt: skip
    assert faithful["of"] == eligible and faithful["n"] == min(eligible, Settings().word_faithfulness_reviews)
    assert 1 <= faithful["k"] < faithful["words_read"]
    for name in ("comprehensiveness", "sufficiency"):
        words = faithful["words"][name]
        assert -1 <= words["top"] <= 1 and -1 <= words["random"] <= 1
        difference = words["difference"]
        assert difference["mean"] == pytest.approx(words["top"] - words["random"])
        assert difference["low"] <= difference["mean"] <= difference["high"]
        assert faithful["sentences"][f"{name}_top"] is not None
    residual = figures["residual"]  # the words add up to their sentence's share (the study's bound of the tests)
    assert residual["sentences"] > 0 and 0 <= residual["median"] <= residual["worst"] < 0.01
    plausible = figures["plausibility"]
    assert plausible["n"] == plausible["of"] == 4 and 0 < plausible["marked"] < 1  # the tiny ERASER's 4, of 6 asked
    for method in ("bert_words", "bert_sentences", "nbsvm_words"):
        scores = plausible["methods"][method]
        assert 0 <= scores["auprc"] <= 1 and 0 <= scores["token_f1"] <= 1 and 0 <= scores["iou_f1"] <= 1
    assert set(plausible["random"]["auprc"]) == {"mean", "std"} and 0 <= plausible["position"]["token_f1"] <= 1
    stored = words_stored(db)
    assert len(stored) == faithful["n"] + 4 and after["steps"][WORD_SHARES]["computed"] == len(stored)
    assert count(db, "SELECT COUNT(*) FROM explanations e JOIN reviews r ON r.id = e.review_id "
                     "WHERE r.split = 'rationales' AND e.level = 'word'") == 4  # fmt: skip

    # a review's words are not computed again: one review's taken away, the step redoes that one alone
    with sqlite3.connect(db) as connection:
        first = min(stored)
        connection.execute("DELETE FROM word_shares WHERE sentence_id IN (SELECT id FROM sentences WHERE review_id = ?)", (first,))
        connection.execute(f"UPDATE runs SET steps = json_remove(steps, '$.{WORD_SHARES}'), "
                           f"metrics = json_remove(metrics, '$.{WORD_SHARES}')")  # fmt: skip
    kept = snapshot(db)
    assert main(args) == 0
    again = run_record(db)
    assert again["steps"][WORD_SHARES]["computed"] == 1 and words_stored(db) == stored
    assert again["metrics"][WORD_SHARES]["plausibility"] == plausible
    assert again["metrics"][WORD_SHARES]["faithfulness"]["n"] == faithful["n"]
    assert snapshot(db)["explanations"] == kept["explanations"]  # NB-SVM's word LIME not redone
    before_rerun = snapshot(db)
    assert main(args) == 0
    assert snapshot(db) == before_rerun  # a finished build: nothing runs

    with TestClient(create_app(Settings(data_dir=data))) as client:
        about = client.get("/about").text
        assert "BERT's words: removing them" in about and "Word by word" in about and "The words add up" in about
        assert 'data-method="bert_words"' in about and 'data-method="nbsvm_words"' in about and "0.417" in about
        assert client.get("/about.json").json()["word_shares"]["state"] == "measured"
