"""A build setting is one edit: a field added to a settings group reaches the command line
(``--set``), the environment variable, ``textflix settings``, the run record, the check that refuses
mixed builds and the config the model is trained with. The help shows the few settings a user needs."""

import json
import re
import sqlite3

import pytest
from pydantic import Field

from app.cli import SettingError, command_fields, main, parse_command
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


def test_the_new_field_is_a_set_name_and_an_environment_variable(monkeypatch):
    for command in ("build", "up"):
        assert parse_command([command, "--set", "nbsvm_alpha=0.5"], ExtendedSettings).settings.nbsvm_alpha == 0.5
    with pytest.raises(SettingError, match="not a setting of `textflix serve`"):  # the server does not build
        parse_command(["serve", "--set", "nbsvm_alpha=0.5"], ExtendedSettings)
    monkeypatch.setenv("TEXTFLIX_NBSVM_ALPHA", "0.25")
    assert ExtendedSettings().nbsvm_alpha == 0.25
    assert parse_command(["build", "--set", "NBSVM-Alpha=0.5"], ExtendedSettings).settings.nbsvm_alpha == 0.5
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


USER_FLAGS = {
    "build": {"--data-dir", "--database", "--reviews", "--columns", "--label-rule", "--imdb", "--movies", "--sst2", "--rationales", "--device", "--seed",
              "--titles", "--engine", "--ray-address"},
    "serve": {"--data-dir", "--database", "--device", "--host", "--port", "--workers", "--trusted-proxies",
              "--allow-anonymous-writes", "--item-noun"},
    "report": {"--data-dir", "--database"},
    "export": {"--data-dir", "--database"},
}  # fmt: skip
USER_FLAGS["up"] = USER_FLAGS["build"] | USER_FLAGS["serve"] - {"--trusted-proxies", "--item-noun"}
OWN_OPTIONS = {"--help", "--set", "--help-all", "--json", "--format", "--output"}


def help_text(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit:
        main(list(argv))
    assert exit.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", USER_FLAGS)
def test_the_help_shows_only_the_settings_a_user_needs(capsys, command):
    flags = set(re.findall(r"(?<![\w-])--(?!no-)[a-z][a-z0-9-]*", help_text(capsys, command, "--help"))) - OWN_OPTIONS
    assert flags == USER_FLAGS[command] and len(flags) <= 18


def test_help_all_shows_every_setting_of_the_command(capsys):
    text = help_text(capsys, "serve", "--help-all")
    assert all(f"  {name}  (default " in text for name in command_fields("serve", Settings))
    assert "TEXTFLIX_LIME_KERNEL_WIDTH" in text and "nbsvm_c" not in text  # serve's groups only


def test_set_reaches_a_hidden_setting_and_the_run_record_and_beats_the_variable(tmp_path, real_subset_archive, monkeypatch):
    monkeypatch.setenv("TEXTFLIX_LIME_SAMPLES", "128")
    values = [f"{name}={value}" for name, value in SMALL.items() if name != "titles"] + ["lime-samples=64"]
    argv = ["build", "--imdb", str(real_subset_archive), "--data-dir", str(tmp_path / "data"), "--titles", "2"]
    settings = parse_command([*argv, *(part for value in values for part in ("--set", value))]).settings
    assert (settings.lime_samples, settings.learning_curve, settings.train_size) == (64, [], 20)
    pipeline = Pipeline(settings, [ReadData(), Train(NBSVM)], progress=False)
    pipeline.run()
    assert pipeline.run_record().config["lime_samples"] == 64


@pytest.mark.parametrize(
    "argv, message",
    [
        (["build", "--set", "lime_sample=3"], "--set lime_sample: no such setting of `textflix build` (`textflix settings` "
                                              "lists them); the closest: lime_samples"),
        (["serve", "--set", "nbsvm_c=1"], "--set nbsvm_c: not a setting of `textflix serve` (it is one of `textflix build | up`)"),
        (["build", "--set", "lime_samples=many"], "lime_samples: Input should be a valid integer"),
        (["serve", "--set", "api_token=s3cret"], "--set api_token: this setting is read only from TEXTFLIX_API_TOKEN"),
        (["build", "--set", "lime_samples"], "--set lime_samples: write it as --set NAME=VALUE"),
        (["build", "--titles", "3", "--set", "titles=4"], "titles is given twice: --titles and --set titles="),
    ],
)  # fmt: skip
def test_a_set_that_cannot_be_taken_is_refused_in_one_line(capsys, argv, message):
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"textflix: error: {message}") and error.count("\n") == 1


def test_settings_lists_every_setting_with_its_value(capsys, monkeypatch):
    monkeypatch.setenv("TEXTFLIX_TITLES", "all")
    monkeypatch.setenv("TEXTFLIX_API_TOKEN", "s3cret")
    assert main(["settings", "--json", "--set", "lime_samples=64"]) == 0
    settings = json.loads(capsys.readouterr().out)
    listing = {setting["name"]: setting for setting in settings}
    assert len(settings) == len(Settings.model_fields) and set(listing) == set(Settings.model_fields)
    assert (listing["lime_samples"]["value"], listing["lime_samples"]["default"]) == (64, 512)
    assert listing["titles"]["value"] == "all" and listing["titles"]["environment_variable"] == "TEXTFLIX_TITLES"
    assert listing["api_token"]["value"] == "**********" and listing["api_token"]["env_only"]
    assert listing["nbsvm_c"]["group"] == "NbsvmConfig" and listing["nbsvm_c"]["description"]
    assert main(["settings", "--set", "lime_samples=64"]) == 0
    text = capsys.readouterr().out
    assert "  lime_samples = 64  (default 512)  [TEXTFLIX_LIME_SAMPLES]\n" in text and "s3cret" not in text
    assert "\nNbsvmConfig\n  nbsvm_c = 0.1  [TEXTFLIX_NBSVM_C]\n" in text
