"""The trust figures mean something: on a model whose reasons are known, LIME finds them, the
faithfulness figures are high and stable, and a random "explanation" scores like random sentences."""

import numpy as np
import pytest

from model import explain
from model.config import LimeConfig
from model.explain import (
    REMOVED,
    Memoized,
    Perturbations,
    explain_sentences,
    explain_words,
    faithfulness,
    lime_sentences,
    rank_agreement,
    top_count,
)
from model.quality import LOG_ODDS, PROBABILITY
from model.sentences import split_sentences

# Each sentence carries a known amount of evidence, in log-odds of "positive", read by a
# model that adds up the evidence of the sentences it is shown.
EVIDENCE = {
    "The score soars.": 3.0,
    "The cast is superb.": 2.0,
    "The sets are fine.": 1.0,
    "It was filmed in Ohio.": 0.0,
    "The ending drags.": -0.5,
    "The popcorn was cold.": -0.2,
}
REVIEW = " ".join(EVIDENCE)


def additive_model(texts: list[str]) -> np.ndarray:
    log_odds = np.array([sum(v for s, v in EVIDENCE.items() if s in t) - 1.5 for t in texts])
    p = 1 / (1 + np.exp(-log_odds))
    return np.column_stack([1 - p, p])


def one_sentence_model(texts: list[str]) -> np.ndarray:
    """Reads only the marked sentence: 95 % positive with it, 30 % without."""
    p = np.array([0.95 if "[KEY]" in t else 0.3 for t in texts])
    return np.column_stack([1 - p, p])


@pytest.fixture
def sentences():
    spans = split_sentences(REVIEW)
    assert [s.text for s in spans] == list(EVIDENCE)
    return spans


def test_lime_recovers_known_evidence_in_log_odds(sentences):
    result = explain_sentences(REVIEW, sentences, additive_model, LimeConfig(lime_samples=64, seed=3))
    # lime's ridge regression shrinks the weights a little; their order is the evidence's
    assert rank_agreement(result.weights, list(EVIDENCE.values())) == 1.0
    assert result.weights == pytest.approx(list(EVIDENCE.values()), rel=0.35, abs=0.1)
    assert result.score > 0.9  # linear in log-odds: only the ridge penalty keeps the fit from exact
    quality = result.quality
    assert quality.target == LOG_ODDS
    assert quality.stability == pytest.approx(1.0)
    assert quality.normalised_comprehensiveness == 1.0  # the best sentence to remove is LIME's top one
    assert quality.normalised_sufficiency == 1.0
    assert quality.comprehensiveness > 3 * quality.random_comprehensiveness > 0
    assert quality.top_k == top_count(6) == 2
    assert quality.comprehensiveness_top > quality.random_comprehensiveness_top
    assert quality.sufficiency_top < quality.random_sufficiency_top


def test_probability_target_is_a_worse_fit_for_a_saturated_model(sentences):
    config = dict(lime_samples=64, seed=3)
    log_odds = explain_sentences(REVIEW, sentences, additive_model, LimeConfig(**config))
    probability = explain_sentences(REVIEW, sentences, additive_model, LimeConfig(lime_target=PROBABILITY, **config))
    assert probability.score < log_odds.score


def test_a_model_that_reads_one_sentence(sentences):
    text = "A plain opening. [KEY] The one that matters. Some filler here. More filler there. The end."
    spans = split_sentences(text)
    result = explain_sentences(text, spans, one_sentence_model, LimeConfig(lime_samples=64, seed=0))
    key = next(i for i, s in enumerate(spans) if "[KEY]" in s.text)
    assert int(np.argmax(result.weights)) == key
    quality = result.quality
    assert quality.comprehensiveness == pytest.approx(0.65)  # 0.95 -> 0.30 without it
    assert quality.sufficiency == pytest.approx(0.0)  # 0.95 with it alone
    assert quality.random_comprehensiveness == pytest.approx(0.65 / len(spans))
    assert quality.normalised_comprehensiveness == 1.0


def test_a_random_explanation_scores_like_random_sentences(sentences):
    perturbations = Perturbations(REVIEW, sentences, reads_sentences=False)
    score = Memoized(perturbations.scorer(additive_model))
    rng = np.random.default_rng(0)
    figures = [faithfulness(perturbations, rng.normal(size=6), score, draws=10, seed=i) for i in range(300)]
    random_top = np.mean([q.comprehensiveness for q in figures])
    baseline = figures[0].random_comprehensiveness  # exact: the mean over every single sentence
    assert random_top == pytest.approx(baseline, rel=0.15)
    assert np.mean([q.comprehensiveness_top for q in figures]) == pytest.approx(
        np.mean([q.random_comprehensiveness_top for q in figures]), rel=0.15
    )
    assert np.mean([q.normalised_comprehensiveness for q in figures]) < 0.5  # LIME's own top sentence: 1.0


def test_one_sentence_has_no_figures_to_compare():
    text = "Only one sentence here."
    quality = explain_sentences(text, split_sentences(text), additive_model, LimeConfig(lime_samples=8)).quality
    assert quality.comprehensiveness is None and quality.stability is None


def test_a_model_that_reads_sentences_is_handed_those_each_text_keeps(sentences):
    """The additive model reads a text's sentences, split or given: handed the kept sentences instead
    of texts to split (and the text itself whole, as for its prediction), it explains to the same
    weights and figures, and it is never shown a mark."""
    shown, given = [], []

    def reading(texts):
        shown.extend(texts)
        return additive_model(texts)

    def reading_sentences(texts):
        given.extend(texts)
        return additive_model(texts)

    config = LimeConfig(lime_samples=64, seed=3)
    from_texts = explain_sentences(REVIEW, sentences, additive_model, config)
    from_sentences = explain_sentences(REVIEW, sentences, reading, config, reading_sentences)
    assert from_sentences.weights == from_texts.weights and from_sentences.score == from_texts.score
    assert from_sentences.quality.as_dict() == from_texts.quality.as_dict()
    assert from_texts.samples == 64
    assert shown == [REVIEW] and all(set(kept) <= set(EVIDENCE) for kept in given)
    assert [] in given  # every sentence removed
    marked = Perturbations(REVIEW, sentences, reads_sentences=True)
    assert marked.kept(marked.removing([0, 4])) == [s.text for i, s in enumerate(sentences) if i not in (0, 4)]
    # a text that holds the mark already: LIME removes sentences outright, and the model reads texts
    text = f"The score{REMOVED} soars. The ending drags."
    plain = Perturbations(text, split_sentences(text), reads_sentences=True)
    perturbed = plain.removing([1])
    assert plain.sentences_kept(perturbed) is None and plain.as_text(perturbed) == f"The score{REMOVED} soars. "


def test_rank_agreement():
    assert rank_agreement([1, 2, 3], [10, 20, 30]) == 1.0
    assert rank_agreement([1, 2, 3], [3, 2, 1]) == -1.0
    assert rank_agreement([1.0], [1.0]) is None
    assert rank_agreement([0, 0, 0], [1, 2, 3]) is None


@pytest.mark.parametrize("count", [3, 6, 9])  # LIME's own selection: forward up to 6 features, ranked above
def test_no_feature_selection_fits_as_lime_default_does_when_every_feature_is_asked_for(count, monkeypatch):
    """``FEATURE_SELECTION`` "none" is a saving only: LIME's default picks every feature too."""
    review = " ".join([*EVIDENCE, "The music is loud.", "Its hero is dull.", "The end is sweet."][:count])
    perturbations = Perturbations(review, split_sentences(review), reads_sentences=False)
    scores = Memoized(perturbations.scorer(additive_model)).as_target(LOG_ODDS)
    saved = lime_sentences(perturbations, scores, 256, 7, 25.0)
    saved_words = explain_words(review, additive_model, 200, 7)
    monkeypatch.setattr(explain, "FEATURE_SELECTION", "auto")
    default = lime_sentences(perturbations, scores, 256, 7, 25.0)
    default_words = explain_words(review, additive_model, 200, 7)
    assert np.allclose(saved.weights, default.weights, atol=1e-9)
    assert saved.score == pytest.approx(default.score, abs=1e-9)
    assert dict(zip(saved_words.words, saved_words.weights)) == pytest.approx(
        dict(zip(default_words.words, default_words.weights)), abs=1e-9
    )
