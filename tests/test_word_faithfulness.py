"""Word-level comprehensiveness and sufficiency (``model.word_faithfulness``) on a hand-made review whose
answer is known: a stand-in scorer whose log-odds are the sum of a few words' values, and word shares
that say so. The step that computes them on a real BERT is tested on a tiny build (tests/test_word_shares_step.py)."""

import itertools
import math

import numpy as np
import pytest

from model.sentences import split_sentences
from model.word_faithfulness import paired_interval, without, word_faithfulness
from model.word_shares import WORD, Word

TEXT = "The film is great. The cast is superb and fun. It was awful at times."
VALUES = {"great": 2.0, "superb": 1.0, "fun": 0.5, "awful": -1.0}  # the stand-in's log-odds, word by word


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


class Scorer:
    """P("positive") of texts given as their sentences, as the stand-in reads them: the sigmoid of its words'
    ``values`` added up; keeps what it was handed."""

    def __init__(self, values: dict[str, float] = VALUES):
        self.values = values
        self.seen: list[list[str]] = []

    def __call__(self, texts: list[list[str]]) -> np.ndarray:
        self.seen += texts
        return np.array([sigmoid(self.log_odds(sentences)) for sentences in texts])

    def log_odds(self, sentences: list[str]) -> float:
        return sum(self.values.get(word.lower(), 0.0) for sentence in sentences for word in WORD.findall(sentence))


def review(values: dict[str, float] = VALUES) -> tuple[list, list[list[Word]]]:
    spans = split_sentences(TEXT)
    words = [
        [Word(m.group(), m.start(), m.end(), values.get(m.group().lower(), 0.0)) for m in WORD.finditer(TEXT, s.start, s.end)]
        for s in spans
    ]
    return spans, words


def test_removing_the_top_words_against_random_words_of_the_same_sentences():
    spans, words = review()
    assert [len(own) for own in words] == [5, 7, 6]  # 18 words read (the full stops are words): k = 4
    scorer = Scorer()
    figures = word_faithfulness(spans, words, scorer, draws=3000, seed=0)
    assert (figures.k, figures.words) == (4, 18)
    full = sigmoid(2.5)  # great + superb + fun + awful: positive
    # the top 4 toward "positive": great, superb, fun and a word worth 0 (the first: "The" of sentence 1)
    assert figures.comprehensiveness == pytest.approx(full - sigmoid(-1.0))
    assert figures.sufficiency == pytest.approx(full - sigmoid(3.5))
    removed = scorer.seen[1]  # the top words' characters deleted, the spaces kept
    assert removed == [" film is .", "The cast is  and .", "It was awful at times."]
    kept = scorer.seen[1 + 3001]
    assert kept == ["The   great", "   superb  fun"]  # the third sentence has no top word: it goes
    # random: 2 of sentence 1's 5 words and 2 of sentence 2's 7, never of sentence 3
    assert all(sentences[-1] == "It was awful at times." for sentences in scorer.seen[2 : 1 + 3001])
    expected = np.mean([
        full - sigmoid(2.5 - 2.0 * ("great" in first) - sum(VALUES[w] for w in second if w in VALUES))
        for first in itertools.combinations(["The", "film", "is", "great", "."], 2)
        for second in itertools.combinations(["The", "cast", "is", "superb", "and", "fun", "."], 2)
    ])  # fmt: skip
    assert figures.random_comprehensiveness == pytest.approx(expected, abs=0.01)
    assert figures.comprehensiveness > figures.random_comprehensiveness + 0.2
    assert figures.sufficiency < figures.random_sufficiency


def test_toward_the_predicted_class_when_it_is_negative():
    values = {"great": 0.5, "awful": -3.0, "times": -1.0}
    spans, words = review(values)
    figures = word_faithfulness(spans, words, Scorer(values), draws=5, seed=1)
    # negative (−3.5); the top 4 toward it: awful, times, then two words worth 0 (of sentence 1, the first)
    assert figures.comprehensiveness == pytest.approx((1 - sigmoid(-3.5)) - (1 - sigmoid(0.5)))


def test_a_review_of_one_word_has_no_figures():
    spans = split_sentences("Great")
    assert word_faithfulness(spans, [[Word("Great", 0, 5, 1.0)]], Scorer(), draws=2, seed=0) is None


def test_without_deletes_the_words_characters_only():
    [span] = split_sentences("It isn't bad, really.")
    words = [Word(m.group(), m.start(), m.end(), 0.0) for m in WORD.finditer(span.text)]
    assert [w.text for w in words] == ["It", "isn't", "bad", ",", "really", "."]
    assert without(span, [words[1], words[3]]) == "It  bad really."


def test_the_paired_interval_is_students():
    low_high = paired_interval([0.1, 0.2, 0.3])
    assert low_high["mean"] == pytest.approx(0.2)
    assert low_high["high"] - 0.2 == pytest.approx(4.302653 * 0.1 / math.sqrt(3), rel=1e-5)
    assert paired_interval([0.5]) == {"mean": 0.5, "low": None, "high": None}
