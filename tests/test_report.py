"""``textflix report``: the latest run record of a database, as one screen of text or as JSON.

The records are the fixture database's (``web_fixtures.RUN`` and ``DISTILL_RUN``)."""

import json

from app.cli import main
from tests.web_fixtures import DISTILL_RUN, RUN, build_web_database, game_database, web_database  # noqa: F401


def report(database: str, capsys, *flags: str) -> str:
    assert main(["report", "--database", database, *flags]) == 0
    return capsys.readouterr().out


def test_the_report_shows_each_models_figures_the_learning_curve_and_the_step_times(web_database, capsys):
    lines = report(web_database, capsys).splitlines()
    for model in ("nbsvm", "bert"):
        for name, m in RUN["metrics"][model].items():
            row = next(line.split() for line in lines if line.split()[:2] == [model, name])
            # a record from before the figures beside accuracy were kept: a dash for each, never a 0
            assert row[2:] == [f"{m['accuracy']:.3f}", "–", "–", "–", f"{m['f1']:.3f}", f"{m['ece']:.3f}"]
    assert "(–: not in this build's record)" in "\n".join(lines)
    curve = RUN["metrics"]["learning_curve"]
    assert f"mean ± std over {curve['seeds']} seeds" in "\n".join(lines)
    untrained = [f"{size:,}" for size, mean in zip(curve["sizes"], curve["bert"]["mean"]) if mean is None]
    assert [line.split()[0] for line in lines if line.endswith("–")] == untrained
    seconds = [step["seconds"] for step in RUN["steps"].values()]
    assert lines[-1].endswith(f"total {sum(seconds):,.0f} s")


def test_the_report_of_a_distill_build_names_its_teacher_and_how_many_reviews_it_labelled(tmp_path, capsys):
    database = build_web_database(tmp_path / "textflix.db", DISTILL_RUN)
    text = report(database, capsys)
    student, teacher = DISTILL_RUN["steps"]["bert"], DISTILL_RUN["steps"]["teacher"]
    assert (
        f"recipe distill: {student['labelled']:,} labels plus {student['teacher_labelled']:,} texts of unlabeled reviews "
        f"labelled by the teacher {teacher['base_model']}"
    ) in text
    assert f"teacher  eval          {DISTILL_RUN['metrics']['teacher']['eval']['accuracy']:.3f}        –" in text


def test_the_json_report_is_the_run_record(web_database, capsys):
    record = json.loads(report(web_database, capsys, "--json"))
    assert record["status"] == "complete"
    assert record["metrics"]["nbsvm"] == RUN["metrics"]["nbsvm"]
    assert record["timings"] == {name: step["seconds"] for name, step in RUN["steps"].items()}


def test_the_report_counts_the_items_by_their_noun(web_database, game_database, capsys, monkeypatch):  # noqa: F811
    assert "catalogue reviews of 4 titles ·" in report(web_database, capsys)
    assert "catalogue reviews of 4 items ·" in report(game_database, capsys)
    monkeypatch.setenv("TEXTFLIX_ITEM_NOUN", "game")
    assert "catalogue reviews of 4 games ·" in report(game_database, capsys)
