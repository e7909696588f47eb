"""A user's own file of reviews (--reviews): its splits, the data step, and whole builds on the shared corpora."""

import csv
import json
import logging
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.offline.pipeline import BuildError, Pipeline
from app.offline.steps import build_steps
from app.settings import Settings
from app.web.main import create_app
from model.config import Sources, SplitConfig
from model.data import CATALOGUE_PER_ITEM, DataError, Splits, read_file_splits, read_splits
from model.names import NEGATIVE, POSITIVE
from model.reviews_file import ReviewsFile

STEAM_COLUMNS = "text=review,label=voted_up,item=app_id,name=app_name"
SKYTRAX_COLUMNS = "text=content,label=overall_rating,item=airline_name"
# its ratings are mostly 1-5, some 1-10 (the 6-10 left without a label, as a 3 is: reviews of the catalogue all the same)
SKYTRAX_RULE = "scale=1-10,positive=4-5,negative=1-2"
# a build of about two minutes on 2 shared cores: one training step of BERT, one catalogue item of short reviews,
# no learning curve
TINY = [
    "--set", "train_size=16", "--titles", "1", "--set", "max_words=60", "--set", "eval_size=20", "--set", "epochs=1",
    "--set", "batch_size=16",
    "--set", "max_length=64", "--set", "calibration_folds=0", "--set", "prior_reviews=20", "--set", "lime_samples=8",
    "--set", "word_lime_samples=20", "--set", "learning_curve=", "--device", "cpu", "--set", "word_faithfulness_reviews=2",
]  # fmt: skip


def write_reviews(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["item", "name", "label", "text"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def shop_reviews(path: Path, negatives: int = 50, unlabeled: int = 20) -> Path:
    """A shop's reviews: 50 short ones of a kettle (beyond the catalogue's cap per item), 20 of a toaster, 10 of a
    lamp that has no name, the first ``unlabeled`` of them without a label, the others positive; then 119 long ones
    (never in the catalogue) of a fan, ``negatives`` of them negative; and the last text twice."""
    rows, n = [], 0
    for item, name, count in (("kettle-2000", "Kettle", 50), ("toaster", "Toaster", 20), ("lamp", "", 10)):
        for _ in range(count):
            n += 1
            rows.append({"item": item, "name": name, "label": "" if n <= unlabeled else "yes",
                         "text": f"Review {n}: it works. Fine {item}."})  # fmt: skip
    for n in range(81, 200):
        label = "no" if n % 2 and (n - 81) // 2 < negatives else "yes"
        rows.append({"item": "fan", "name": "Fan", "label": label, "text": f"Review {n}. " + "Long words here. " * 90})
    rows.append(dict(rows[-1]))
    return write_reviews(path, rows)


def split_file(path: Path, **config) -> Splits:
    config = {"train_size": 40, "titles": 2, "eval_size": 30, "max_words": 250, **config}
    return read_file_splits(ReviewsFile(path), path, SplitConfig(**config), unlabeled=500, curve_size=60)


def test_a_files_splits_share_no_text_and_cap_each_catalogue_item(tmp_path):
    splits = split_file(shop_reviews(tmp_path / "shop.csv"))
    assert splits.title_ids == ["kettle-2000", "toaster"]
    per_item = {item: sum(r.title_id == item for r in splits.catalogue) for item in splits.title_ids}
    assert per_item == {"kettle-2000": CATALOGUE_PER_ITEM, "toaster": 20}
    sets = [splits.train, splits.catalogue, splits.eval, splits.unlabeled]
    texts = [{r.text for r in reviews} for reviews in sets]
    assert sum(map(len, texts)) == len(set().union(*texts))  # no text in two sets
    assert len(splits.train) == 40 and [r.label for r in splits.train].count(NEGATIVE) == 20
    assert len(splits.eval) == 30 and all(r.label is not None for r in splits.eval)
    names = {"kettle-2000": "Kettle", "toaster": "Toaster", "fan": "Fan"}
    assert splits.movies == {item: {"title": name} for item, name in names.items()}  # the lamp has no name
    assert splits.file_counts["skipped"] == {"duplicate": 1} and splits.file_counts["read"] == 200
    labelled = splits.file_counts["labelled"]
    assert splits.share_positive == labelled[POSITIVE] / (labelled[POSITIVE] + labelled[NEGATIVE])
    train_pool = {r.text for r in splits.train_pool}
    assert texts[0] <= train_pool and not train_pool & (texts[1] | texts[2])


def test_rows_without_a_label_are_catalogue_and_pool_reviews(tmp_path):
    splits = split_file(shop_reviews(tmp_path / "shop.csv", unlabeled=60))
    assert any(r.label is None for r in splits.catalogue)
    pool = {r.text for r in splits.unlabeled}
    unlabeled_texts = {f"Review {n}: it works. Fine {item}." for n, item in ((25, "kettle-2000"), (55, "toaster"))}
    in_catalogue = {r.text for r in splits.catalogue}
    assert all(text in pool or text in in_catalogue for text in unlabeled_texts)
    # the labelled reviews in no set are in the pool too, their labels hidden
    assert any(text.startswith("Review 1") and "Long words" in text for text in pool)


def test_fewer_labels_than_train_size_builds_and_says_so(tmp_path):
    splits = split_file(shop_reviews(tmp_path / "shop.csv", negatives=8), train_size=100)
    assert len(splits.train) == 2 * [r.label for r in splits.train].count(NEGATIVE) < 100
    assert "train on" in splits.fewer_labels and "of the 100 wanted" in splits.fewer_labels


def test_one_class_or_too_few_labels_stop_the_build(tmp_path):
    one_class = shop_reviews(tmp_path / "one.csv", negatives=0)
    with pytest.raises(DataError, match=r"one\.csv: every labelled review is positive"):
        split_file(one_class)
    rows = [{"item": "a", "name": "", "label": "yes" if n % 2 else "no", "text": f"Text {n}"} for n in range(40)]
    with pytest.raises(DataError, match=r"few\.csv: 40 labelled reviews, too few .*at least 50"):
        split_file(write_reviews(tmp_path / "few.csv", rows))


def test_an_item_id_longer_than_the_database_takes_is_named(tmp_path):
    rows = [{"item": "x" * 65 if n == 7 else "a", "name": "", "label": "yes" if n % 2 else "no", "text": f"T {n}"}
            for n in range(60)]  # fmt: skip
    with pytest.raises(DataError, match=r"long\.csv, row \d+: the item id 'x+' is longer than 64"):
        split_file(write_reviews(tmp_path / "long.csv", rows))


def test_imdb_splits_name_their_corpus_and_share(real_subset_archive):
    splits = read_splits(Sources(imdb=str(real_subset_archive)), SplitConfig(train_size=20, titles=2), Path("."))
    assert splits.corpus == "IMDB" and splits.share_positive == 0.5 and not splits.file_counts


def test_the_data_step_stores_a_files_items_reviews_and_counts_and_refuses_another_file(tmp_path, caplog):
    shop = shop_reviews(tmp_path / "shop.csv")
    data_dir = tmp_path / "data"
    settings = Settings(data_dir=data_dir, reviews=shop, train_size=40, titles=2, eval_size=30, item_noun="product")
    with caplog.at_level(logging.INFO, logger="textflix"):
        Pipeline(settings, build_steps, progress=False).run(until="data")
    assert "50 in the catalogue (2 products), 30 for evaluation" in caplog.text  # the items by their noun
    with sqlite3.connect(data_dir / "textflix.db") as db:
        items = dict(db.execute("SELECT title_id, title FROM movies"))
        splits = dict(db.execute("SELECT split, COUNT(*) FROM reviews GROUP BY split"))
        sources = {source for (source,) in db.execute("SELECT DISTINCT source FROM reviews")}
        counts = json.loads(db.execute("SELECT counts FROM runs").fetchone()[0])
    assert items.pop("lamp", None) is None  # no name; there when a training or evaluation review is the lamp's
    assert items == {"kettle-2000": "Kettle", "toaster": "Toaster", "fan": "Fan"}
    assert splits == {"train": 40, "catalogue": 50, "eval": 30} and sources == {"file"}
    assert counts["corpus"] == "shop.csv" and counts["read"] == 200 == counts["used"] + sum(counts["skipped"].values())
    assert counts["skipped"] == {"duplicate": 1} and counts["repaired"] == 0 and 0.5 < counts["share_positive"] < 1
    assert counts["reader"] == "shop.csv: CSV, text=text, label=label (yes/no), item=item, name=name"

    other = write_reviews(tmp_path / "other.csv", [])
    with pytest.raises(BuildError, match="built with other settings \\(reviews\\)"):
        Pipeline(settings.model_copy(update={"reviews": other}), build_steps, progress=False).run(until="data")


def test_a_data_step_killed_after_its_commit_resumes(tmp_path):
    """A build stopped after the data step's transaction, before the step was recorded, carries on."""
    shop = shop_reviews(tmp_path / "shop.csv")
    settings = Settings(data_dir=tmp_path / "data", reviews=shop, train_size=40, titles=2, eval_size=30)
    Pipeline(settings, build_steps, progress=False).run(until="data")
    db = tmp_path / "data" / "textflix.db"
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE runs SET steps = '{}'")
    Pipeline(settings, build_steps, progress=False).run(until="data")
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT COUNT(*) FROM reviews").fetchone()[0] == 120
        assert "data" in json.loads(connection.execute("SELECT steps FROM runs").fetchone()[0])


def test_the_builds_next_process_takes_the_data_steps_splits_instead_of_reading_the_file_again(tmp_path, monkeypatch):
    """``textflix up`` runs the data step, then a background build in a process of its own: that one (a new
    ``Pipeline``) reads the splits the data step kept, not the file; a changed file is read again."""
    reads = []

    def counted(*args, **kwargs):
        reads.append(args[1])
        return read_file_splits(*args, **kwargs)

    monkeypatch.setattr("app.offline.pipeline.read_file_splits", counted)
    shop = shop_reviews(tmp_path / "shop.csv")
    settings = Settings(data_dir=tmp_path / "data", reviews=shop, train_size=40, titles=2, eval_size=30)
    first = Pipeline(settings, build_steps, progress=False)
    first.run(until="data")
    background = Pipeline(settings, build_steps, progress=False)
    background.run(until="data")  # "already done"; the next steps' checks read the splits
    assert background.splits() == first.splits() and reads == [shop]
    assert len(background.splits().unlabeled) > 0 and background.splits().share_positive == first.splits().share_positive

    shop.write_text(shop.read_text() + "toaster,Toaster,yes,One more toaster review that is new.\n")
    assert Pipeline(settings, build_steps, progress=False).splits().reviews_read == first.splits().reviews_read + 1
    assert reads == [shop, shop]


def profile(source: Path, path: Path, rows: slice) -> Path:
    """The rows ``rows`` of the corpus ``source``, as a file of their own."""
    with open(source, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        kept = list(reader)[rows]
        fields = reader.fieldnames
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(kept)
    return path


def build_and_browse(tmp_path, reviews: Path, columns: str, name: str | None, flags: tuple[str, ...] = ()) -> None:
    """``textflix build`` on ``reviews`` (with ``flags``), then the site's pages and API on its database."""
    data_dir = tmp_path / "data"
    command = ["build", "--reviews", str(reviews), "--columns", columns, "--data-dir", str(data_dir), *flags, *TINY]
    assert main(command) == 0
    with sqlite3.connect(data_dir / "textflix.db") as db:
        counts, metrics = map(json.loads, db.execute("SELECT counts, metrics FROM runs").fetchone())
        labelled = db.execute("SELECT COUNT(*) FROM reviews WHERE split = 'catalogue' AND label IS NOT NULL").fetchone()[0]
        review, item, title = db.execute(
            "SELECT r.id, m.title_id, m.title FROM reviews r JOIN movies m USING (title_id) WHERE r.split = 'catalogue'"
        ).fetchone()
    assert counts["corpus"] == reviews.name and counts["read"] == counts["used"] + sum(counts["skipped"].values())
    assert (title is not None) == (name is not None)
    # the catalogue's figures count its labelled reviews: one without a label is no negative
    assert {metrics[model]["catalogue"]["n"] for model in ("nbsvm", "bert")} == {labelled}
    with TestClient(create_app(Settings(data_dir=data_dir))) as client:
        assert client.get("/").status_code == 200
        page = client.get(f"/movies/{item}")
        assert page.status_code == 200 and (title or item) in page.text
        assert 'class="hl' in client.get(f"/reviews/{review}?analyze=1").text  # the sentences highlighted
        answer = client.post("/api/predict", json={"texts": ["Great fun, I recommend it.", "Awful, a waste of money."]})
        assert answer.status_code == 200 and len(answer.json()["results"]) == 2
        about = client.get("/about")
        # the models' training reviews as the build took them, fewer than the 500 wanted on a small file
        assert about.status_code == 200 and f"the same {counts['train']:,} training reviews" in about.text


@pytest.mark.slow
def test_build_and_site_on_a_profile_of_the_steam_reviews(tmp_path, shared_steam):
    reviews = profile(shared_steam, tmp_path / "steam_profile.csv", slice(None, None, 55))  # 401 of 101 games
    build_and_browse(tmp_path, reviews, STEAM_COLUMNS, name="app_name")


@pytest.mark.slow
def test_build_and_site_on_a_profile_of_the_skytrax_lounge_reviews(tmp_path, shared_skytrax):
    reviews = profile(shared_skytrax, tmp_path / "skytrax_profile.csv", slice(400))  # the airlines' slugs, no names
    build_and_browse(tmp_path, reviews, SKYTRAX_COLUMNS, name=None, flags=("--label-rule", SKYTRAX_RULE))


def test_a_label_rule_that_is_not_one_stops_the_command_before_anything_is_read(tmp_path, capsys):
    command = ["build", "--reviews", str(tmp_path / "absent.csv"), "--label-rule", "scale=1-5,positive=4-5"]
    assert main([*command, "--data-dir", str(tmp_path / "data")]) == 2
    assert 'label rule "scale=1-5,positive=4-5": no negative=' in capsys.readouterr().err
    assert not (tmp_path / "data").exists()
