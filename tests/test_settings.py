"""A build setting is one edit: a field added to a settings group reaches the command-line
flag, the environment variable, the run record, the check that refuses mixed builds and the
config the model is trained with."""

import json
import sqlite3

import pytest
from pydantic import Field

from app.cli import parser
from app.offline.pipeline import BuildError, Pipeline
from app.offline.steps.data import ReadData
from app.offline.steps.training import Train
from app.settings import Settings
from model.config import NbsvmConfig
from model.names import MODEL_META_FILE, NBSVM


class ExtendedNbsvmConfig(NbsvmConfig):
    nbsvm_alpha: float = Field(1.0, gt=0, description="Naive-Bayes smoothing (a setting this test adds).")


class ExtendedSettings(ExtendedNbsvmConfig, Settings):
    """The settings with one field more in the NB-SVM group: the copy a developer's edit makes."""


SMALL = dict(train_size=20, titles=2, eval_size=10, learning_curve=[])


def build(archive, data_dir, settings_type=ExtendedSettings, **values) -> Pipeline:
    """The data and NB-SVM steps of a build with ``values``."""
    settings = settings_type(imdb=str(archive), data_dir=data_dir, **SMALL, **values)
    pipeline = Pipeline(settings, [ReadData(), Train(NBSVM)], progress=False)
    pipeline.run()
    return pipeline


def nbsvm_fingerprint(pipeline: Pipeline) -> str:
    return pipeline.fingerprint(Train(NBSVM).groups)


def test_the_new_field_is_a_flag_and_an_environment_variable(monkeypatch):
    for command in ("build", "up"):
        args = parser(ExtendedSettings).parse_args([command, "--nbsvm-alpha", "0.5"])
        assert ExtendedSettings(**{k: v for k, v in vars(args).items() if k != "command"}).nbsvm_alpha == 0.5
    with pytest.raises(SystemExit):  # the server does not build, so it has no such flag
        parser(ExtendedSettings).parse_args(["serve", "--nbsvm-alpha", "0.5"])
    monkeypatch.setenv("TEXTFLIX_NBSVM_ALPHA", "0.25")
    assert ExtendedSettings().nbsvm_alpha == 0.25
    assert "nbsvm_alpha" in ExtendedSettings().build_config()
    assert "nbsvm_alpha" not in Settings().build_config()


def test_the_new_field_reaches_the_run_record_the_model_and_the_mixed_build_check(tmp_path, real_subset_archive):
    data = tmp_path / "data"
    pipeline = build(real_subset_archive, data, nbsvm_alpha=0.5)
    assert pipeline.run_record().config["nbsvm_alpha"] == 0.5
    meta = json.loads((data / "models" / NBSVM / MODEL_META_FILE).read_text())
    assert meta["nbsvm_alpha"] == 0.5 and meta["fingerprint"] == nbsvm_fingerprint(pipeline)
    with pytest.raises(BuildError, match=r"was built with other settings \(nbsvm_alpha\)"):
        build(real_subset_archive, data, nbsvm_alpha=0.75)
    assert nbsvm_fingerprint(build(real_subset_archive, data, nbsvm_alpha=0.5)) == nbsvm_fingerprint(pipeline)


def test_a_database_built_before_the_field_existed_counts_it_at_its_default(tmp_path, real_subset_archive):
    data = tmp_path / "data"
    before = build(real_subset_archive, data, settings_type=Settings)
    after = build(real_subset_archive, data)  # nbsvm_alpha at its default: the same build
    assert nbsvm_fingerprint(after) == nbsvm_fingerprint(before)  # so the trained model is still current
    with pytest.raises(BuildError, match=r"\(nbsvm_alpha\)"):
        build(real_subset_archive, data, nbsvm_alpha=2.0)


def test_a_database_built_before_pooling_and_the_offset_existed_counts_them_as_they_were(tmp_path, real_subset_archive):
    """Their defaults now are the sentence model and an offset fitted on 1,000 reviews, but a record
    that predates the settings was built with a whole-text model and no offset: it counts as that."""
    data = tmp_path / "data"
    before = {"pooling": "cls", "prior_reviews": 0}
    build(real_subset_archive, data, settings_type=Settings, **before)
    with sqlite3.connect(data / "textflix.db") as connection:
        (config,) = connection.execute("SELECT config FROM runs").fetchone()
        predating = {key: value for key, value in json.loads(config).items() if key not in before}
        connection.execute("UPDATE runs SET config = ?", (json.dumps(predating),))
    with pytest.raises(BuildError, match=r"was built with other settings \(pooling, prior_reviews\)"):
        build(real_subset_archive, data, settings_type=Settings)
    build(real_subset_archive, data, settings_type=Settings, **before)


@pytest.mark.parametrize("value, sizes", [("", []), ("100,200", [100, 200]), ("100 200", [100, 200]), ("[100, 200]", [100, 200])])
def test_a_list_setting_reads_from_the_environment_as_the_flag_does(monkeypatch, value, sizes):
    monkeypatch.setenv("TEXTFLIX_LEARNING_CURVE", value)
    assert Settings().learning_curve == sizes


def test_a_model_trained_by_an_earlier_build_is_reused_with_its_facts(tmp_path, real_subset_archive):
    data = tmp_path / "data"
    first = build(real_subset_archive, data, lime_samples=64)
    model_file = data / "models" / NBSVM / MODEL_META_FILE
    trained_at = model_file.stat().st_mtime_ns
    # another database in the same data directory, with other LIME settings: the model is current
    second = build(real_subset_archive, data, lime_samples=128, database_url=f"sqlite:///{tmp_path / 'other.db'}")
    assert model_file.stat().st_mtime_ns == trained_at
    assert second.run_record().steps[NBSVM]["labelled"] == first.run_record().steps[NBSVM]["labelled"] == 20
