"""Labels that lean one way, measured honestly: the majority baseline, balanced accuracy and macro-F1
beside accuracy, in the run record, `textflix report`, /about and GET /api/metrics; and the corpus's own
share of positives as the prior of BERT's offset (``Splits.share_positive``)."""

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.db import make_engine, migrate
from app.settings import Settings
from app.web.main import create_app
from model.config import Sources, SplitConfig
from model.data import read_splits
from model.lengths import band_skew_figures
from model.metrics import classification_report
from model.names import NEGATIVE, POSITIVE
from tests.conftest import write_archive
from tests.test_data import ARCHIVE, tiny_files
from tests.web_fixtures import RUN, build_web_database

# Eight positive reviews and two negative ones (80 % positive), read by a model that gets 6 of the
# positives and 1 of the negatives right, and by one that says "positive" of everything.
GOLD = [POSITIVE] * 8 + [NEGATIVE] * 2
LEANING = [0.9] * 6 + [0.2] * 2 + [0.7, 0.1]
ALWAYS_POSITIVE = [0.9] * 10


def test_a_model_under_the_majority_baseline_and_one_that_always_says_positive_against_figures_by_hand():
    leaning = classification_report(GOLD, LEANING)
    # 7 of 10 right, under the 8 of 10 of always saying "positive"; recall 6/8 and 1/2; F1 of the
    # positives 2·6 / (2·6 + 1 + 2) = 0.8, of the negatives 2·1 / (2·1 + 2 + 1) = 0.4
    assert leaning["accuracy"] == pytest.approx(0.7) and leaning["majority_baseline"] == pytest.approx(0.8)
    assert leaning["balanced_accuracy"] == pytest.approx((6 / 8 + 1 / 2) / 2)
    assert leaning["macro_f1"] == pytest.approx((0.8 + 0.4) / 2)
    assert leaning["confusion"] == [[1, 1], [2, 6]]
    always = classification_report(GOLD, ALWAYS_POSITIVE)
    # its accuracy is the majority baseline; each class's recall 1 and 0; F1 16/18 and 0
    assert always["accuracy"] == always["majority_baseline"] == pytest.approx(0.8)
    assert always["balanced_accuracy"] == pytest.approx(0.5)
    assert always["macro_f1"] == pytest.approx((16 / 18 + 0) / 2)
    # a set leaning the other way has the same baseline: its larger class is the negatives
    assert classification_report([NEGATIVE] * 3 + [POSITIVE], [0.1] * 4)["majority_baseline"] == pytest.approx(0.75)


def test_a_review_without_a_label_is_refused_rather_than_counted_as_a_negative():
    with pytest.raises(ValueError, match="not None"):
        classification_report([POSITIVE, None, NEGATIVE], [0.9, 0.2, 0.1])


def test_the_figures_by_length_are_each_bands_own_and_none_for_an_empty_band():
    bands = ["1"] * 4 + ["2–3"] * 2  # no text of 4–6 or 7+ sentences
    labels = [POSITIVE, POSITIVE, POSITIVE, NEGATIVE, POSITIVE, POSITIVE]
    p = [0.9, 0.9, 0.1, 0.1, 0.9, 0.2]
    figures = band_skew_figures(labels, p, bands)
    # band 1: 3 of 4 positive, recall 2/3 and 1; F1 of the positives 0.8, of the negatives 2/3
    assert figures["majority_baseline"] == pytest.approx([0.75, 1.0, None, None])
    assert figures["balanced_accuracy"][0] == pytest.approx((2 / 3 + 1) / 2)
    assert figures["macro_f1"][0] == pytest.approx((0.8 + 2 / 3) / 2)
    # band 2–3 holds positives alone: the figures are over that class, the one present
    assert figures["balanced_accuracy"][1] == pytest.approx(0.5)
    assert figures["balanced_accuracy"][2:] == figures["macro_f1"][2:] == [None, None]


def skewed_run() -> dict:
    """The fixture run with the new figures: NB-SVM's evaluation predictions ``LEANING``, BERT's
    ``ALWAYS_POSITIVE``, on the ten ``GOLD`` reviews, whole (7+ sentences) and cut to one sentence."""
    bands = ["1"] * 10 + ["7+"] * 10
    lengths = {"bands": ["1", "2–3", "4–6", "7+"], "n": [10, 0, 0, 10]}
    for model, p in (("nbsvm", LEANING), ("bert", ALWAYS_POSITIVE)):
        figures = band_skew_figures(GOLD * 2, p * 2, bands)
        lengths["majority_baseline"] = figures["majority_baseline"]
        lengths[model] = [0.7 if model == "nbsvm" else 0.8, None, None, 0.7 if model == "nbsvm" else 0.8]
        for name in ("balanced_accuracy", "macro_f1"):
            lengths.setdefault(name, {})[model] = figures[name]
    metrics = {"nbsvm": {"eval": classification_report(GOLD, LEANING)},
               "bert": {"eval": classification_report(GOLD, ALWAYS_POSITIVE)}, "lengths": lengths}  # fmt: skip
    return {**RUN, "metrics": {**RUN["metrics"], **metrics}}


def report_lines(database: str, capsys) -> list[str]:
    assert main(["report", "--database", database]) == 0
    return capsys.readouterr().out.splitlines()


def row(lines: list[str], *first: str) -> list[str]:
    return next(line.split() for line in lines if line.split()[: len(first)] == list(first))


def test_the_report_shows_the_figures_beside_accuracy_and_by_length(tmp_path, capsys):
    lines = report_lines(build_web_database(tmp_path / "textflix.db", skewed_run()), capsys)
    assert row(lines, "model", "set") == ["model", "set", "accuracy", "majority", "balanced", "macro-F1", "F1", "ECE"]
    assert row(lines, "nbsvm", "eval")[2:6] == ["0.700", "0.800", "0.625", "0.600"]
    assert row(lines, "bert", "eval")[2:6] == ["0.800", "0.800", "0.500", "0.444"]
    assert row(lines, "band") == ["band", "texts", "majority", "NB-SVM", "balanced", "macro-F1",
                                  "BERT", "balanced", "macro-F1"]  # fmt: skip
    assert row(lines, "7+") == ["7+", "10", "0.800", "0.700", "0.625", "0.600", "0.800", "0.500", "0.444"]
    assert row(lines, "2–3") == ["2–3", "0"] + ["–"] * 7


def about_page(database: str) -> tuple[str, dict]:
    with TestClient(create_app(Settings(database_url=database))) as client:
        return client.get("/about").text, client.get("/api/metrics").json()


def scores_row(page: str, label: str) -> list[str]:
    """The cells of /about's row ``label``, text only."""
    cells = page.split(f'<th scope="row">{label}</th>')[1].split("</tr>")[0]
    return [cell.split(">", 1)[1] for cell in cells.split("</td>")[:-1]]


def test_about_and_the_api_show_the_figures_beside_accuracy(tmp_path):
    page, api = about_page(build_web_database(tmp_path / "textflix.db", skewed_run()))
    # the columns are NB-SVM's, then BERT's
    assert scores_row(page, "Evaluation set accuracy") == ["70.0%", "80.0%"]
    assert scores_row(page, "Evaluation set majority baseline") == ["80.0%", "80.0%"]
    assert scores_row(page, "Evaluation set balanced accuracy") == ["62.5%", "50.0%"]
    assert scores_row(page, "Evaluation set macro-F1") == ["0.600", "0.444"]
    assert "accuracy can sit under the majority baseline" in page
    assert scores_row(page, "7+") == ["10", "80.0%", "70.0%", "62.5%", "0.600", "80.0%", "50.0%", "0.444"]

    nbsvm = api["models"]["nbsvm"]["eval"]
    assert (nbsvm["n"], nbsvm["accuracy"], nbsvm["majority_baseline"]) == (10, 0.7, 0.8)
    assert nbsvm["balanced_accuracy"] == pytest.approx(0.625) and nbsvm["macro_f1"] == pytest.approx(0.6)
    assert api["models"]["bert"]["eval"]["balanced_accuracy"] == pytest.approx(0.5)
    lengths = api["lengths"]
    assert lengths["majority_baseline"] == [0.8, None, None, 0.8]
    assert lengths["accuracy"]["nbsvm"][3] == 0.7 and lengths["balanced_accuracy"]["bert"][3] == pytest.approx(0.5)


def test_about_and_the_api_of_an_older_run_show_accuracy_and_no_figure_it_lacks(tmp_path):
    page, api = about_page(build_web_database(tmp_path / "textflix.db", RUN))
    m = RUN["metrics"]["nbsvm"]["eval"]
    assert scores_row(page, "Evaluation set accuracy")[0] == f"{m['accuracy']:.1%}"
    assert "majority baseline" not in page and "balanced accuracy" not in page and "macro-F1" not in page
    assert api["run_id"] == 1 and api["models"]["nbsvm"]["eval"]["accuracy"] == m["accuracy"]
    assert not {"majority_baseline", "balanced_accuracy", "macro_f1"} & set(api["models"]["nbsvm"]["eval"])
    assert "lengths" not in api


def test_the_api_has_no_figures_before_the_first_build(tmp_path):
    url = f"sqlite:///{tmp_path / 'textflix.db'}"
    migrate(make_engine(url))  # the schema, and no run yet
    with TestClient(create_app(Settings(database_url=url))) as client:
        assert client.get("/api/metrics").json() == {"models": {}}  # no run: nothing else to say


def test_the_share_of_positives_is_the_corpus_own_among_its_labelled_reviews(tmp_path):
    files = tiny_files()  # three reviews in each labelled folder: 6 of 12 positive
    config = SplitConfig(train_size=2, titles=1)
    balanced = write_archive(tmp_path / ARCHIVE, files)
    assert read_splits(Sources(imdb=str(balanced)), config, tmp_path).share_positive == 0.5
    del files["aclImdb/test/neg/2_2.txt"], files["aclImdb/train/neg/2_2.txt"]
    skewed = write_archive(tmp_path / f"skewed-{ARCHIVE}", files)
    assert read_splits(Sources(imdb=str(skewed)), config, tmp_path).share_positive == 6 / 10
