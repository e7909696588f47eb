"""BERT's outputs pinned bit for bit: tiny real models (MiniLM with seeded, untrained heads; nothing is
trained) saved with a temperature, offsets per sentence and per text and a one-sentence reader, loaded
as the server loads them (float32 and int8), and their outputs compared with a recording made with
main at 59e925e (``RECORDING``), before the classifier was cut into parts. Bit for bit on the CPU the
recording was made on (AMD EPYC, native bfloat16); another CPU computes bfloat16 differently."""

import json
from pathlib import Path

import numpy as np
import pytest

from model.bert import BertClassifier
from model.calibration import OFFSET, OFFSET_PER, TEMPERATURE
from model.config import MINILM, PER_SENTENCE, PER_TEXT, BertConfig
from model.devices import resolve_device
from model.one_sentence import ONE_SENTENCE_READER
from model.sentences import split_sentences
from model.served import load_served

RECORDING = Path(__file__).parent / "recorded" / "bert_outputs.json"
LONG = " ".join(f"Scene {i} was {'good' if i % 3 else 'dull'} and the actors knew it." for i in range(30))
TEXTS = ["A wonderful, moving film.", "Dull. Long. I left early!", "", "Great cast, weak plot. Still, I would see it again.", LONG]
# what LIME scores of a text for a model that reads sentences: its sentences, some removed
SENTENCE_LISTS = [("Dull.",), (), ("Great cast, weak plot.", "I would see it again.")]

# folder: (pooling, seed, facts saved beside the model)
MODELS = {
    "whole": ("cls", 2, {TEMPERATURE: 0.8, OFFSET: 0.7}),
    "sentences-per-sentence": ("sentences", 1, {TEMPERATURE: 1.3, OFFSET: -0.4, OFFSET_PER: PER_SENTENCE}),
    "sentences-per-text": ("sentences", 1, {TEMPERATURE: 1.3, OFFSET: -0.4, OFFSET_PER: PER_TEXT}),
    "teacher": ("cls", 2, {OFFSET: 2.0}),
    "bert": ("sentences", 1, {TEMPERATURE: 0.9, OFFSET: -0.3, OFFSET_PER: PER_SENTENCE, ONE_SENTENCE_READER: "teacher"}),
}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    for name, (pooling, seed, facts) in MODELS.items():
        config = BertConfig(base_model=MINILM, max_length=64, pooling=pooling, seed=seed, length_exponent=-0.5)
        BertClassifier.pretrained(config, resolve_device("cpu")).save(folder / name, facts)
    return folder


def outputs(models_dir: Path) -> dict[str, list]:
    """Every output of the loaded models that serving, calibration and explanation use, as lists of floats."""
    cpu = resolve_device("cpu")
    found = {}
    for int8 in (False, True):
        for name in ("whole", "sentences-per-sentence", "sentences-per-text"):
            model = BertClassifier.load(models_dir / name, cpu, cpu_int8=int8)
            key = f"{name}{'-int8' if int8 else ''}"
            found[f"{key} proba"] = model.predict_proba(TEXTS)
            found[f"{key} logits"] = model.logits(TEXTS)
            found[f"{key} raw scores"], found[f"{key} offset units"] = model.raw_scores(TEXTS)
            if model.reads_sentences:
                found[f"{key} proba of sentences"] = model.proba_of_sentences(SENTENCE_LISTS)
                found[f"{key} sentences read"] = [model.sentences_read(split_sentences(t)) for t in TEXTS]
        served = load_served(models_dir / "bert", cpu, cpu_int8=int8)
        key = f"served{'-int8' if int8 else ''}"
        found[f"{key} proba"] = served.predict_proba(TEXTS)
        found[f"{key} proba of sentences"] = served.proba_of_sentences(SENTENCE_LISTS)
        # as the server's micro-batcher calls it for a batch of texts and LIME's sentences: one call per kind
        found[f"{key} proba, texts and sentences in one call"] = np.concatenate(
            [served.predict_proba(TEXTS), served.proba_of_sentences(SENTENCE_LISTS)]
        )
        found[f"{key} read by"] = [served.read_by(split_sentences(t)) for t in TEXTS]
        found[f"{key} sentences read"] = [served.sentences_read(split_sentences(t)) for t in TEXTS]
    return {key: np.asarray(value).tolist() if isinstance(value, np.ndarray) else value for key, value in found.items()}


def test_a_loaded_bert_s_outputs_are_the_recorded_ones_bit_for_bit(models_dir):
    """Whole text, sentences with the offset per sentence and per text, int8, and a served distill
    model with its one-sentence reader (texts of one sentence and of several, and sentences given)."""
    recorded = json.loads(RECORDING.read_text())
    found = outputs(models_dir)
    assert found.keys() == recorded.keys()
    for key, value in recorded.items():
        assert found[key] == value, key
