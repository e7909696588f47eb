"""A build setting is declared once (``model.config.BuildSetting``): its default, its value before it
existed, its value under ``--set recipe=auto`` and, once retired, its decided value. The build config,
the values before, the recipes and the help are those of the code before the declarations (59e925e),
and a retirement is an edit of the declaration alone."""

import hashlib
import json
from typing import Annotated, ClassVar

import pytest
import torch
from pydantic import Field

from app.cli import SettingError, parse_command
from app.offline.pipeline import CPU_RECIPE, CUDA_RECIPE, BuildError, changed_settings, concrete_recipe
from app.settings import Settings
from model.artifacts import read_meta
from model.bert import BertClassifier
from model.config import CLS, MINILM, MPNET, PER_SENTENCE, PER_TEXT, BertConfig, BuildSetting, ConfigGroup
from model.devices import resolve_device
from model.names import MODEL_META_FILE
from tests.test_settings import build

# Settings().build_config() at 59e925e, as its run record stores it (keys in order).
DEFAULT_CONFIG = (
    '{"reviews": null, "columns": null, "label_rule": null, "seed": 42, "train_size": 500, "titles": 50, '
    '"max_words": 250, "eval_size": 2000, "nbsvm_c": 0.1, "base_model": "sentence-transformers/all-MiniLM-L6-v2", '
    '"epochs": 3, "batch_size": 16, "learning_rate": 0.0001, "max_length": 256, "slanted_triangular": true, '
    '"discriminative_lr": 1.0, "gradual_unfreezing": false, "frozen_layers": 0, "pooling": "sentences", '
    '"length_exponent": 0.0, "teacher_model": "sentence-transformers/all-mpnet-base-v2", "teacher_epochs": 3, '
    '"teacher_learning_rate": 5e-05, "teacher_frozen_layers": 0, "recipe": "auto", "unlabeled": 4000, '
    '"student_epochs": 2, "teacher_cuts": 0, "label_reviews": true, "student_batches": "mixed", '
    '"calibration_folds": 5, "prior_reviews": 1000, "one_sentence_reader": "teacher", "lime_samples": 512, '
    '"lime_kernel_width": 25.0, "lime_target": "log_odds", "faithfulness_draws": 10, "word_lime_samples": 300, '
    '"learning_curve": [100, 200, 500, 1000, 2000, 5000], "curve_seeds": 3, "curve_eval_size": 500, '
    '"offset_per": "sentence", "data_version": 3}'
)
# The first 16 hex digits of the SHA-256 of build configs' JSON at 59e925e, keys sorted as the fingerprint
# of a model sorts them (``Pipeline.fingerprint``): values, not the run record's order, which a retirement moves.
RECORDED = {
    "default": ({}, "759831ad2b8fc0e2"),
    "whole-text, no offset": ({"pooling": "cls", "prior_reviews": 0, "seed": 7}, "218ac441c7742bb9"),
    "small distill": (
        {"recipe": "distill", "titles": "all", "eval_size": 100, "teacher_cuts": 2, "learning_curve": [100]},
        "bb626fa13f611207",
    ),
}  # fmt: skip
AUTO_ON = {"cpu": "40052de309bfc7b7", "cuda": "1d4435973e42e5ac"}
# The settings added since 59e925e, with their defaults (issue 55's word shares step: its samples); the
# configs above are those without them, and a run record without them carries on at these values.
ADDED_SINCE = {"word_faithfulness_reviews": 16, "word_plausibility_reviews": 6}


def before_added(config: dict) -> dict:
    """A build config as 59e925e made it: without the settings added since."""
    return {name: value for name, value in config.items() if name not in ADDED_SINCE}


def digest(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


@pytest.fixture
def code_defaults(monkeypatch):
    """The settings' defaults as the code has them, not the tests' plain recipe (tests/conftest.py)."""
    monkeypatch.delenv("TEXTFLIX_RECIPE")


def test_the_default_build_config_is_as_before_key_for_key(code_defaults):
    config = Settings().build_config()
    assert json.dumps(before_added(config)) == DEFAULT_CONFIG
    assert {name: config[name] for name in ADDED_SINCE} == ADDED_SINCE


@pytest.mark.parametrize("case", RECORDED)
def test_a_build_config_is_as_before(case, code_defaults):
    values, recorded = RECORDED[case]
    assert digest(before_added(Settings(**values).build_config())) == recorded


@pytest.mark.parametrize("device", AUTO_ON)
def test_recipe_auto_makes_the_build_config_it_made_before(device, code_defaults):
    settings = concrete_recipe(Settings(recipe="auto"), None, torch.device(device))
    assert digest(before_added(settings.build_config())) == AUTO_ON[device]
    samples = (settings.word_faithfulness_reviews, settings.word_plausibility_reviews)
    assert samples == ((16, 6) if device == "cpu" else ("all", "all"))  # sized to the CPU; every review on CUDA


def test_a_run_record_from_before_the_added_settings_carries_on_at_their_defaults(code_defaults):
    for device in AUTO_ON:  # the database's own recipe, whatever the device: the samples at their defaults
        older = before_added(concrete_recipe(Settings(recipe="auto"), None, torch.device(device)).build_config())
        resumed = concrete_recipe(Settings(recipe="auto"), older, torch.device(device))
        assert changed_settings(older, resumed.build_config(), Settings) == []
        assert (resumed.word_faithfulness_reviews, resumed.word_plausibility_reviews) == (16, 6)


@pytest.mark.parametrize("name", ["titles", "eval_size", "curve_eval_size", "word_faithfulness_reviews", "word_plausibility_reviews"])
def test_every_count_or_all_setting_names_what_it_takes(name):
    """Each group's validator has a name of its own: two of one name in the composed Settings, one was lost."""
    with pytest.raises(ValueError, match=f"{name}\n.*a whole number or 'all', not 'some'"):
        Settings(**{name: "some"})
    assert getattr(Settings(**{name: "all"}), name) == "all"


def test_the_values_before_and_the_recipes_are_those_of_before():
    assert Settings.predating_values() == {
        "pooling": CLS, "prior_reviews": 0, "offset_per": PER_TEXT, "data_version": 1, "one_sentence_reader": "student"
    }  # fmt: skip
    assert CUDA_RECIPE == {"recipe": "distill", "base_model": MPNET, "learning_rate": 5e-5, **dict.fromkeys(ADDED_SINCE, "all")}
    assert CPU_RECIPE == {"recipe": "distill", "teacher_frozen_layers": 8, "unlabeled": 2000, "teacher_cuts": 4,
                          "length_exponent": -0.5, "calibration_folds": 0}  # fmt: skip


def test_a_run_record_older_than_the_settings_counts_them_as_they_were(code_defaults):
    """A record without the newer keys: each counts at its value before, which differs from today's."""
    record = {k: v for k, v in Settings().build_config().items() if k not in Settings.predating_values()}
    changed = changed_settings(record, Settings().build_config(), Settings)
    assert changed == ["data_version", "offset_per", "one_sentence_reader", "pooling", "prior_reviews"]
    old_values = Settings(pooling=CLS, prior_reviews=0).build_config()
    assert changed_settings(record, old_values, Settings) == ["data_version", "offset_per", "one_sentence_reader"]


def test_a_model_folder_older_than_pooling_and_the_offset_loads_as_it_was_trained(tmp_path):
    cpu = resolve_device("cpu")
    whole_text = BertClassifier.pretrained(BertConfig(base_model=MINILM, max_length=64, pooling=CLS), cpu)
    whole_text.save(tmp_path / "bert")
    meta_file = tmp_path / "bert" / MODEL_META_FILE
    meta_file.write_text(json.dumps({k: v for k, v in read_meta(tmp_path / "bert").items() if k != "pooling"}))
    loaded = BertClassifier.load(tmp_path / "bert", cpu)
    assert loaded.config.pooling == CLS and loaded.calibration.offset_per == PER_TEXT
    texts = ["A warm, funny film.", "Dull from start to end."]
    assert loaded.predict_proba(texts) == pytest.approx(whole_text.predict_proba(texts), abs=1e-3)


def test_a_retired_setting_is_no_setting_but_every_run_record_states_it(monkeypatch):
    monkeypatch.setenv("TEXTFLIX_OFFSET_PER", "text")
    settings = Settings()
    assert "offset_per" not in Settings.model_fields
    assert settings.offset_per == PER_SENTENCE and settings.build_config()["offset_per"] == PER_SENTENCE
    with pytest.raises(SettingError, match="offset_per"):
        parse_command(["build", "--set", "offset_per=text"], Settings)


DESCRIPTION = "Capitalise catalogue titles (a setting this test adds)."


class CasingConfig(ConfigGroup):
    shapes_build = True

    title_case: Annotated[bool, BuildSetting(predating=False)] = Field(True, description=DESCRIPTION)


class RetiredCasingConfig(ConfigGroup):
    """``CasingConfig`` once its study decided ``title_case``: the one edit that retires it."""

    shapes_build = True

    title_case: ClassVar[Annotated[bool, BuildSetting(predating=False)]] = True


class CasingSettings(CasingConfig, Settings):
    pass


class RetiredCasingSettings(RetiredCasingConfig, Settings):
    pass


def test_retiring_a_setting_is_one_edit_of_its_declaration(monkeypatch):
    monkeypatch.setenv("TEXTFLIX_TITLE_CASE", "false")
    assert CasingSettings().title_case is False and RetiredCasingSettings().title_case is True
    assert RetiredCasingSettings().build_config() == CasingSettings(title_case=True).build_config()
    assert RetiredCasingSettings.predating_values() == CasingSettings.predating_values()
    assert parse_command(["build", "--set", "title_case=false"], CasingSettings).settings.title_case is False
    with pytest.raises(SettingError, match="title_case"):
        parse_command(["build", "--set", "title_case=false"], RetiredCasingSettings)


def test_a_database_carries_on_or_is_refused_across_a_retirement(tmp_path, real_subset_archive):
    data = tmp_path / "data"
    build(real_subset_archive, data, settings_type=CasingSettings)
    build(real_subset_archive, data, settings_type=RetiredCasingSettings)  # the same build: carried on
    build(real_subset_archive, tmp_path / "other", settings_type=CasingSettings, title_case=False)
    with pytest.raises(BuildError, match=r"was built with other settings \(title_case\)"):
        build(real_subset_archive, tmp_path / "other", settings_type=RetiredCasingSettings)
    build(real_subset_archive, tmp_path / "older", settings_type=Settings)  # before the setting existed: False
    with pytest.raises(BuildError, match=r"was built with other settings \(title_case\)"):
        build(real_subset_archive, tmp_path / "older", settings_type=RetiredCasingSettings)
