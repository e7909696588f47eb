"""NB-SVM and BERT learn from small real sets; LIME weights follow the sentiment of a sentence."""

import random
import shutil

import numpy as np
import pytest
import torch

import model.devices
from model.bert import OFFSET, ONE_SENTENCE_READER, BertClassifier, FrozenBottom, epoch_order, shuffle_units
from model.calibration import Calibration
from model.config import MINILM, BertConfig, LimeConfig, NbsvmConfig
from model.devices import resolve_device
from model.encoding import head_and_tail, head_and_tail_sentences
from model.explain import explain_sentences, explain_words
from model.fine_tuning import slanted_triangular
from model.metrics import (
    classification_report,
    expected_calibration_error,
    fit_offset,
    fit_temperature,
    tempered_p_positive,
)
from model.nbsvm import NbsvmClassifier, stemmed_tokens
from model.sentences import split_sentences
from model.served import load_served
from model.trained import ModelUnavailable, load_trained

POSITIVE = "This is a wonderful, moving film with brilliant acting and a beautiful story."
NEGATIVE = "This is a dreadful, boring film with terrible acting and a stupid story."


def sample(reviews, split, per_class, seed=0):
    rng = random.Random(seed)
    picked = []
    for label in ("positive", "negative"):
        picked += rng.sample([r for r in reviews if r.split == split and r.label == label], per_class)
    return [r.text for r in picked], [r.label for r in picked]


@pytest.fixture(scope="module")
def nbsvm(real_reviews):
    return NbsvmClassifier.train(*sample(real_reviews, "train", 250), NbsvmConfig(nbsvm_c=0.1, seed=0))


def test_stemmed_tokens_drop_stop_words():
    assert stemmed_tokens("The actors were acting AMAZINGLY in this movie") == [
        "actor", "act", "amaz", "movi",
    ]  # fmt: skip


def test_nbsvm_learns_from_500_real_reviews(nbsvm, real_reviews):
    texts, labels = sample(real_reviews, "test", 200, seed=1)
    p = nbsvm.predict_proba(texts)[:, 1]
    accuracy = np.mean((p >= 0.5) == (np.array(labels) == "positive"))
    assert 0.7 < accuracy < 0.95
    assert nbsvm.predict_proba([POSITIVE, NEGATIVE])[:, 1].tolist() == pytest.approx(
        sorted(nbsvm.predict_proba([POSITIVE, NEGATIVE])[:, 1], reverse=True)
    )
    assert 0 < p.min() and p.max() < 1  # calibrated probabilities, not hard labels


def test_nbsvm_scores_as_its_scikit_learn_pipeline(nbsvm, real_reviews):
    texts = sample(real_reviews, "test", 50)[0]
    assert nbsvm.predict_proba(texts) == pytest.approx(nbsvm.pipeline.predict_proba(texts), abs=1e-12)


@pytest.mark.slow
def test_a_few_bert_steps_move_predictions_the_right_way(real_reviews):
    texts, labels = sample(real_reviews, "train", 8, seed=2)
    config = BertConfig(base_model=MINILM, epochs=3, batch_size=8, max_length=128, learning_rate=2e-4)
    device = resolve_device("cpu")
    probe = [POSITIVE, NEGATIVE] + texts
    gold = np.array([1, 0] + [label == "positive" for label in labels], dtype=float)

    def margin(classifier):
        p = classifier.predict_proba(probe)[:, 1]
        return p[gold == 1].mean() - p[gold == 0].mean()

    before = margin(BertClassifier.pretrained(config, device))
    trained = BertClassifier.train(texts, labels, config, device, progress=False)
    after = margin(trained)
    assert after > before + 0.1, (before, after)


def test_bert_save_and_load_give_the_same_predictions(tmp_path):
    config = BertConfig(base_model=MINILM, max_length=64)
    classifier = BertClassifier.pretrained(config, resolve_device("cpu"))
    classifier.save(tmp_path / "bert", {"fingerprint": "abc"})
    loaded = BertClassifier.load(tmp_path / "bert", resolve_device("cpu"))
    texts = [POSITIVE, NEGATIVE, "Short.", "x " * 500]
    assert loaded.predict_proba(texts) == pytest.approx(classifier.predict_proba(texts), abs=1e-3)
    assert loaded.config.max_length == 64
    with pytest.raises(FileNotFoundError, match="no trained BERT model"):
        BertClassifier.load(tmp_path / "missing", resolve_device("cpu"))


def test_a_bert_hands_its_texts_of_one_sentence_to_its_reader_and_each_text_is_explained_by_its_reader(tmp_path):
    """--one-sentence-reader teacher: a one-sentence text is the teacher's, and so is its exact explanation
    (its log-odds against the empty text, which no network reads: even odds); everything else is the
    student's, every text a longer text's explanation scores included."""
    cpu = resolve_device("cpu")
    student = BertClassifier.pretrained(BertConfig(base_model=MINILM, max_length=64, pooling="sentences", seed=1), cpu)
    teacher = BertClassifier.pretrained(BertConfig(base_model=MINILM, max_length=64, pooling="cls", seed=2), cpu)
    student.save(tmp_path / "bert", {ONE_SENTENCE_READER: "teacher"})
    teacher.save(tmp_path / "teacher", {OFFSET: 2.0})  # untrained heads read every text near even odds
    teacher = BertClassifier.load(tmp_path / "teacher", cpu)
    served = load_served(tmp_path / "bert", cpu)
    one, two = POSITIVE, f"{POSITIVE} {NEGATIVE}"
    assert served.reads_alone(one) and not served.reads_alone(two)
    p = served.predict_proba([one, two, ""])
    assert teacher.predict_proba([one])[0, 1] > 0.8 > student.predict_proba([one])[0, 1]
    assert p[0] == pytest.approx(teacher.predict_proba([one])[0], abs=1e-4)
    assert p[1:] == pytest.approx(student.predict_proba([two, ""]), abs=1e-4)
    assert p[2, 1] == pytest.approx(0.5)
    # a text given as its sentences is the student's, one sentence or not
    given = served.proba_of_sentences([[one], [one, NEGATIVE]])
    assert given == pytest.approx(student.proba_of_sentences([[one], [one, NEGATIVE]]), abs=1e-4)

    lime = LimeConfig(lime_samples=32, seed=0)
    alone = explain_sentences(one, split_sentences(one), served.predict_proba, lime, served.proba_of_sentences)
    assert alone.weights == pytest.approx([np.log(p[0, 1] / p[0, 0])], abs=1e-3) and alone.intercept == pytest.approx(0)
    read = []
    reader_proba = served.one_sentence_reader.predict_proba
    served.one_sentence_reader.predict_proba = lambda texts, max_tokens=None: read.append(texts) or reader_proba(texts)
    longer = explain_sentences(two, split_sentences(two), served.predict_proba, lime, served.proba_of_sentences)
    assert read == [] and len(longer.weights) == 2

    shutil.rmtree(tmp_path / "teacher")
    with pytest.raises(ModelUnavailable, match=r"hands texts of one sentence to the model in .*teacher, which cannot be loaded"):
        load_trained("bert", tmp_path, cpu)


@pytest.mark.slow
def test_int8_bert_on_the_cpu_reads_reviews_as_float32_does(tmp_path, real_reviews, monkeypatch):
    texts, labels = sample(real_reviews, "train", 32, seed=2)
    config = BertConfig(base_model=MINILM, epochs=3, batch_size=16, max_length=96, learning_rate=2e-4)
    BertClassifier.train(texts, labels, config, resolve_device("cpu"), progress=False).save(tmp_path / "bert")
    exact = BertClassifier.load(tmp_path / "bert", resolve_device("cpu"))
    int8 = BertClassifier.load(tmp_path / "bert", resolve_device("cpu"), cpu_int8=True)
    assert not any(isinstance(layer, torch.nn.Linear) for layer in int8.model.modules())
    assert sum(isinstance(layer, torch.nn.Linear) for layer in exact.model.modules()) >= 36  # 6 per layer, 6 layers
    probe = [POSITIVE, NEGATIVE] + sample(real_reviews, "train", 10, seed=5)[0]
    scores_exact, scores_int8 = exact.logits(probe), int8.logits(probe)
    margin_exact, margin_int8 = np.diff(scores_exact, axis=1)[:, 0], np.diff(scores_int8, axis=1)[:, 0]
    assert np.corrcoef(margin_exact, margin_int8)[0, 1] > 0.95, (margin_exact, margin_int8)
    p_exact, p_int8 = exact.predict_proba(probe)[:, 1], int8.predict_proba(probe)[:, 1]
    assert np.abs(p_int8 - p_exact).max() < 0.1, (p_exact, p_int8)
    # On a CPU with native bfloat16 the float32 model autocasts; the int8 layers take float32 only.
    monkeypatch.setattr(model.devices, "native_cpu_bf16", lambda: True)
    assert np.array_equal(int8.logits(probe), scores_int8)


@pytest.mark.slow
def test_a_sentence_pooled_bert_adds_up_its_sentences_and_lime_recovers_them(tmp_path, real_reviews):
    texts, labels = sample(real_reviews, "train", 8, seed=2)
    config = BertConfig(base_model=MINILM, epochs=2, batch_size=8, max_length=96, learning_rate=2e-4, pooling="sentences")
    trained = BertClassifier.train(texts, labels, config, resolve_device("cpu"), progress=False)
    trained.save(tmp_path / "bert")
    classifier = BertClassifier.load(tmp_path / "bert", resolve_device("cpu"))
    review = f"{POSITIVE} The film was shown on a Tuesday. {NEGATIVE} I would watch it again."
    sentences = split_sentences(review)
    assert len(sentences) == 4

    def log_odds(batch):
        return np.diff(classifier.logits(batch), axis=1)[:, 0]

    alone = log_odds([s.text for s in sentences])
    assert log_odds([review])[0] == pytest.approx(alone.sum(), abs=1e-4)
    assert log_odds(["", texts[0]]).tolist() == pytest.approx([0.0, log_odds([texts[0]])[0]], abs=1e-4)
    assert log_odds(["", "\u200b"]).tolist() == [0.0, 0.0]  # no text of the batch has a sentence to read
    assert alone[0] > alone[2]  # it learnt which way each sentence leans
    assert np.abs(trained.logits([review, texts[3]]) - classifier.logits([review, texts[3]])).max() < 1e-3

    # A long text is read as its head and tail sentences, two windows' worth: the middle is not read.
    middle = [f"Scene {i} was {'wonderful' if i % 2 else 'dreadful'}." for i in range(60)]
    changed = middle[:30] + [NEGATIVE] + middle[31:]
    assert log_odds([" ".join(middle)])[0] == pytest.approx(log_odds([" ".join(changed)])[0], abs=1e-4)
    assert log_odds([" ".join(middle[29:32])])[0] != pytest.approx(log_odds([" ".join(changed[29:32])])[0], abs=1e-4)

    # An additive model's sentence weights are its sentences' scores: LIME finds them (shrunk alike
    # by its ridge regression), with a perfect fit.
    explanation = explain_sentences(review, sentences, classifier.predict_proba, LimeConfig(lime_samples=64, seed=0))
    assert np.argsort(explanation.weights).tolist() == np.argsort(alone).tolist()
    assert np.corrcoef(explanation.weights, alone)[0, 1] > 0.99
    assert explanation.score > 0.95  # not 1: the ridge, and bfloat16 where the CPU has it

    # An offset per sentence is a change of each sentence's bias: the model stays additive, an
    # empty text stays at even odds, and a one-sentence text's weight is its log-odds, exactly
    # (model.explain.one_sentence; LIME's ridge fit made it an eighth of them).
    classifier.calibration = Calibration(offset=-1.5, offset_per="sentence")
    shifted = log_odds([s.text for s in sentences])
    assert shifted == pytest.approx(alone - 1.5, abs=1e-4)
    assert log_odds([review, ""]).tolist() == pytest.approx([shifted.sum(), 0.0], abs=1e-4)
    for text in (sentences[0].text, sentences[2].text):
        one = split_sentences(text)
        weight = explain_sentences(text, one, classifier.predict_proba, LimeConfig(lime_samples=16, seed=0)).weights[0]
        assert np.sign(weight) == np.sign(log_odds([text])[0]) != 0
        assert weight == pytest.approx(log_odds([text])[0], rel=0.01)
    classifier.calibration = Calibration(offset=-1.5, offset_per="text")  # the default before: the same offset whatever the length
    assert log_odds([review, ""]).tolist() == pytest.approx([alone.sum() - 1.5, -1.5], abs=1e-4)
    assert explanation.quality.stability == pytest.approx(1.0)


def test_a_length_exponent_scales_a_texts_summed_sentences_and_their_offset_alike():
    config = BertConfig(base_model=MINILM, max_length=64, pooling="sentences", length_exponent=-0.5)
    classifier = BertClassifier.pretrained(config, resolve_device("cpu"))
    classifier.calibration = Calibration(offset=0.3, offset_per="sentence")
    review = f"{POSITIVE} The film was shown on a Tuesday. {NEGATIVE} I would watch it again."
    sentences = [s.text for s in split_sentences(review)]

    def log_odds(batch):
        return np.diff(classifier.logits(batch), axis=1)[:, 0]

    alone = log_odds(sentences)  # one sentence: n ** -0.5 is 1
    assert log_odds([review])[0] == pytest.approx(alone.sum() / 2, abs=1e-4)  # 4 sentences: halved
    assert log_odds([" ".join(sentences[:2]), ""]).tolist() == pytest.approx([alone[:2].sum() / 2**0.5, 0.0], abs=1e-4)
    scores, units = classifier.raw_scores([review, sentences[0], ""])
    assert units.tolist() == pytest.approx([4 / 2, 1.0, 0.0])  # the offset, added per sentence, scaled as they are
    assert log_odds([review, sentences[0], ""]) == pytest.approx(np.diff(scores, axis=1)[:, 0] + 0.3 * units, abs=1e-4)

    # Not additive any more, but nearly: LIME's weights still follow the sentences' scores, with a close fit.
    explanation = explain_sentences(review, split_sentences(review), classifier.predict_proba, LimeConfig(lime_samples=64, seed=0))
    assert np.corrcoef(explanation.weights, alone)[0, 1] > 0.95
    assert explanation.score > 0.9


def test_a_review_and_its_runs_are_shuffled_as_one_and_texts_alone_as_before():
    keys = ["a", 0, "b", "a", "a", 1, "b"]  # the build's: a review's key on its runs, a number on a labelled review
    units = shuffle_units(keys)
    assert units == [[0, 3, 4], [1], [2, 6], [5]]
    generator = torch.Generator().manual_seed(7)
    orders = [epoch_order(units, generator) for _ in range(20)]
    for order in orders:
        assert sorted(order) == list(range(len(keys)))
        assert all(order[order.index(unit[0]) : order.index(unit[0]) + len(unit)] == unit for unit in units)
    assert len({tuple(order) for order in orders}) > 1  # shuffled anew each epoch
    alone = shuffle_units(range(9))  # no keys: the order of training before keys existed
    before = torch.randperm(9, generator=torch.Generator().manual_seed(3)).tolist()
    assert epoch_order(alone, torch.Generator().manual_seed(3)) == before


@pytest.mark.parametrize("pooling, encoder", [("cls", "bert"), ("sentences", "encoder")])
def test_gradual_unfreezing_trains_only_the_top_in_the_first_epoch(pooling, encoder):
    config = BertConfig(
        base_model=MINILM, epochs=1, batch_size=2, max_length=32, gradual_unfreezing=True,
        discriminative_lr=2.6, pooling=pooling,
    )  # fmt: skip
    device = resolve_device("cpu")
    start = BertClassifier.pretrained(config, device).model.state_dict()
    start = {k: v.clone() for k, v in start.items()}
    trained = BertClassifier.train([POSITIVE, NEGATIVE] * 2, ["positive", "negative"] * 2, config, device, False)
    after = trained.model.state_dict()
    for frozen in ("embeddings.word_embeddings.weight", "encoder.layer.5.output.dense.weight"):
        assert torch.equal(after[f"{encoder}.{frozen}"], start[f"{encoder}.{frozen}"])
    assert not torch.equal(after["classifier.weight"], start["classifier.weight"])


@pytest.mark.slow
@pytest.mark.parametrize("pooling, encoder", [("cls", "bert"), ("sentences", "encoder")])
def test_frozen_layers_are_run_once_and_read_as_the_whole_model_reads(pooling, encoder):
    config = BertConfig(base_model=MINILM, epochs=1, batch_size=2, max_length=32, frozen_layers=4, pooling=pooling)
    device = resolve_device("cpu")
    untrained = BertClassifier.pretrained(config, device)
    ids, members = untrained.read_units([POSITIVE, f"{NEGATIVE} Seen at home.", "Fine."])
    frozen = FrozenBottom(untrained.model, 4)
    states = frozen.states(untrained, ids)
    with frozen.top_only():
        from_states = untrained.text_logits(ids, members, None, states)
    assert torch.allclose(from_states, untrained.text_logits(ids, members, None), atol=1e-5)

    start = {k: v.clone() for k, v in untrained.model.state_dict().items()}
    trained = BertClassifier.train([POSITIVE, NEGATIVE] * 2, ["positive", "negative"] * 2, config, device, False)
    after = trained.model.state_dict()
    assert after.keys() == start.keys()  # saved whole
    for frozen_name in ("embeddings.word_embeddings.weight", "encoder.layer.3.output.dense.weight"):
        assert torch.equal(after[f"{encoder}.{frozen_name}"], start[f"{encoder}.{frozen_name}"])
    for trained_name in ("encoder.layer.4.output.dense.weight", "encoder.layer.5.output.dense.weight"):
        assert not torch.equal(after[f"{encoder}.{trained_name}"], start[f"{encoder}.{trained_name}"])
    with pytest.raises(ValueError, match="under the model's 6 layers"):
        FrozenBottom(untrained.model, 6)


def test_slanted_triangular_schedule_rises_then_falls():
    factors = [slanted_triangular(100, cut_frac=0.1, ratio=32)(step) for step in range(101)]
    assert factors[0] == pytest.approx(1 / 32)
    assert max(factors) == factors[10] == 1.0
    assert factors[100] == pytest.approx(1 / 32)
    assert factors[:11] == sorted(factors[:11]) and factors[10:] == sorted(factors[10:], reverse=True)


def test_head_and_tail_sentences_keeps_whole_sentences_from_both_ends():
    assert head_and_tail_sentences([10] * 10, 100) == list(range(10))
    assert head_and_tail_sentences([10] * 20, 100) == [0, 1, 12, 13, 14, 15, 16, 17, 18, 19]
    assert head_and_tail_sentences([60, 10, 10, 50], 100) == [1, 2, 3]  # a long first sentence is not the head


def test_head_and_tail_keeps_both_ends():
    ids = list(range(1000))
    kept = head_and_tail(ids, 100)
    assert len(kept) == 100 and kept[:25] == list(range(25)) and kept[-75:] == list(range(925, 1000))
    assert head_and_tail(ids[:50], 100) == ids[:50]


def test_long_reviews_fit_the_window():
    config = BertConfig(base_model=MINILM, max_length=32)
    classifier = BertClassifier.pretrained(config, resolve_device("cpu"))
    ids = classifier.encoder.ids(["word " * 300, "short"])
    assert len(ids[0]) == 32 and ids[0][0] == classifier.tokenizer.cls_token_id
    assert ids[0][-1] == classifier.tokenizer.sep_token_id


def test_the_ids_read_come_with_where_each_piece_starts():
    classifier = BertClassifier.pretrained(BertConfig(base_model=MINILM, max_length=32), resolve_device("cpu"))
    ids, starts = classifier.encoder.ids_and_starts("word " * 300)  # a piece a word, at 5 characters each
    assert ids == classifier.encoder.ids(["word " * 300])[0]
    assert starts == [5 * i for i in (*range(7), *range(277, 300))]  # of 30 pieces, a quarter from the head


def test_sentence_lime_signs_follow_the_sentences(nbsvm):
    text = f"{POSITIVE} The film was shown on a Tuesday. {NEGATIVE}"
    sentences = split_sentences(text)
    assert len(sentences) == 3
    explanation = explain_sentences(text, sentences, nbsvm.predict_proba, LimeConfig(lime_samples=32, seed=0))
    first, _, last = explanation.weights
    assert first > 0 > last


def test_a_one_sentence_texts_weight_is_its_log_odds_against_the_empty_text(nbsvm):
    text = "A tedious, joyless slog."
    explanation = explain_sentences(text, split_sentences(text), nbsvm.predict_proba, LimeConfig())
    p_text, p_empty = nbsvm.predict_proba([text, ""])[:, 1]
    log_odds = np.log(p_text / (1 - p_text)) - np.log(p_empty / (1 - p_empty))
    assert explanation.weights == pytest.approx([log_odds], abs=1e-9)
    assert explanation.intercept == pytest.approx(np.log(p_empty / (1 - p_empty)), abs=1e-9)
    assert explanation.score == 1.0 and explanation.quality.stability is None
    assert explanation.samples == 2  # the text and the empty text, not LIME's 512


def test_word_lime_signs_follow_the_words(nbsvm):
    explanation = explain_words(f"{POSITIVE} {NEGATIVE}", nbsvm.predict_proba, num_samples=300, seed=0)
    weights = dict(zip(explanation.words, explanation.weights))
    assert weights["wonderful"] > 0 and weights["brilliant"] > 0
    assert weights["dreadful"] < 0 and weights["boring"] < 0


@pytest.mark.parametrize("text", ["♥♥♥♥♥", "👍👍", "..."])
def test_word_lime_of_a_text_without_a_word_is_its_score_alone(nbsvm, text):
    """Whole Steam reviews are such texts: LIME has no word to remove, so the explanation is the intercept."""
    explanation = explain_words(text, nbsvm.predict_proba, num_samples=300, seed=0)
    p = nbsvm.predict_proba([text])[0, 1]
    assert explanation.words == [] and explanation.weights == []
    assert explanation.intercept == pytest.approx(np.log(p / (1 - p)))


def test_lime_scores_each_distinct_perturbation_once(nbsvm):
    seen = []

    def counting(texts):
        seen.append(len(texts))
        return nbsvm.predict_proba(texts)

    text = "Great fun. Awful ending."
    explain_sentences(text, split_sentences(text), counting, LimeConfig(lime_samples=50, seed=0))
    # two sentences: four subsets, though two LIME runs asked for 100 texts and the faithfulness checks for more
    assert seen == [4]


def test_metrics():
    gold = ["positive", "positive", "negative", "negative"]
    report = classification_report(gold, [0.9, 0.4, 0.2, 0.6])
    assert report["accuracy"] == 0.5
    assert report["confusion"] == [[1, 1], [1, 1]]
    assert report["n"] == 4
    perfect = expected_calibration_error(np.array([True, False]), np.array([1.0, 0.0]))
    assert perfect == 0.0




def test_temperature_scaling_recovers_the_temperature_that_made_the_labels():
    rng = np.random.default_rng(0)
    margin = rng.normal(0, 6, 4000)  # an over-confident model's log-odds
    gold = ["positive" if u < p else "negative" for u, p in zip(rng.random(4000), 1 / (1 + np.exp(-margin / 3.0)))]
    scores = np.stack([np.zeros_like(margin), margin], axis=1)
    temperature = fit_temperature(scores, gold)
    assert 2.7 < temperature < 3.3
    raw = expected_calibration_error(np.array([g == "positive" for g in gold]), tempered_p_positive(scores, 1.0))
    fitted = expected_calibration_error(np.array([g == "positive" for g in gold]), tempered_p_positive(scores, temperature))
    assert fitted < 0.03 < raw


def test_the_prior_offset_undoes_a_lean_without_labels():
    rng = np.random.default_rng(0)
    fair = np.concatenate([rng.normal(4, 2, 2000), rng.normal(-4, 2, 2000)])  # half of each class
    for lean in (-1.5, 0.0, 2.0):
        scores = np.stack([np.zeros_like(fair), fair + lean], axis=1)
        offset = fit_offset(scores, 0.5)
        assert offset == pytest.approx(-lean, abs=0.15)
        assert tempered_p_positive(scores + [0, offset], 1.0).mean() == pytest.approx(0.5, abs=1e-9)
        tempered = fit_offset(scores, 0.5, temperature=3.0)  # the mean is matched at the temperature served
        assert tempered_p_positive(scores + [0, tempered], 3.0).mean() == pytest.approx(0.5, abs=1e-9)
    # a prior other than one half, and log-odds far beyond any offset's reach of it
    extreme = np.array([[0.0, 40.0], [0.0, -40.0], [0.0, 45.0]])
    assert tempered_p_positive(extreme + [0, fit_offset(extreme, 0.25)], 1.0).mean() == pytest.approx(0.25)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        fit_offset(np.zeros((3, 2)), 1.0)
    # added once per sentence: texts of 1 to 20 sentences, each leaning 0.3 per sentence
    units = rng.integers(1, 21, len(fair)).astype(float)
    scores = np.stack([np.zeros_like(fair), fair + 0.3 * units], axis=1)
    per_sentence = fit_offset(scores, 0.5, units=units)
    assert per_sentence == pytest.approx(-0.3, abs=0.05)
    assert tempered_p_positive(scores + np.outer(units, [0, per_sentence]), 1.0).mean() == pytest.approx(0.5, abs=1e-9)
