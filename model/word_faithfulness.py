"""Whether BERT's word shares (``model.word_shares``) name the words its prediction rests on: ERASER's
comprehensiveness and sufficiency at the word level, against random words of the same sentences.

**Removing a word** deletes its characters from its sentence; the whitespace around it stays, and a
sentence left without a word is dropped. The review is scored as its sentences (the sentence model's
``proba_of_sentences``), so its sentences are the same ones read whole and perturbed, never split again.

- **comprehensiveness**: the drop in the probability of the predicted class when the top k words by
  share toward that class are removed (higher: the words mattered);
- **sufficiency**: the drop when only those k words are kept (lower: they were enough);

k is 20 % of the words read (``model.explain.top_count``, the sentence figures' share of the sentences),
so the two levels remove the same share of the review. The random words are drawn from the sentences the
top words are in, as many in each: the comparison is of the words chosen inside those sentences, what
word shares add to sentence shares, not of which sentences hold them (the sentence figures measure that).
"""

__all__ = ["WordRemoval", "paired_interval", "word_faithfulness"]

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from model.explain import top_count
from model.sentences import Span
from model.word_shares import Word

# P("positive") of texts given as their sentences
SentencesScore = Callable[[list[list[str]]], np.ndarray]


@dataclass(frozen=True)
class WordRemoval:
    """One review's word-level faithfulness figures: drops in the predicted class's probability."""

    comprehensiveness: float  # the top k words removed
    random_comprehensiveness: float  # k random words of the same sentences removed: the mean over the draws
    sufficiency: float  # only the top k words kept
    random_sufficiency: float
    k: int
    words: int  # the words read, that k is 20 % of


def word_faithfulness(
    sentences: Sequence[Span], words: Sequence[Sequence[Word]], p_positive: SentencesScore, draws: int, seed: int
) -> WordRemoval | None:
    """The figures of a review of ``sentences`` (spans of its text) whose words read are ``words`` (per
    sentence, with their shares of the log-odds of "positive"; none for a sentence the model does not
    read); ``p_positive`` scores texts given as their sentences. None for a review of fewer than 2 words."""
    candidates = [(i, word) for i, own in enumerate(words) for word in own]
    if len(candidates) < 2:
        return None
    k = top_count(len(candidates))
    full = float(p_positive([[sentence.text for sentence in sentences]])[0])
    toward = 1.0 if full >= 0.5 else -1.0  # the predicted class
    order = sorted(range(len(candidates)), key=lambda c: -toward * candidates[c][1].share)
    top = order[:k]
    in_sentence = defaultdict(list)
    for c, (i, _) in enumerate(candidates):
        in_sentence[i].append(c)
    rng = np.random.default_rng(seed)
    counts = sorted(Counter(candidates[c][0] for c in top).items())
    random_sets = [
        [int(c) for i, n in counts for c in rng.choice(in_sentence[i], size=n, replace=False)] for _ in range(draws)
    ]
    chosen_sets = [top, *random_sets]

    def perturbed(chosen: list[int], keep: bool) -> list[str]:
        """The review's sentences with the ``chosen`` words removed, or (``keep``) all but them."""
        marked = {(candidates[c][0], candidates[c][1].start) for c in chosen}
        texts = []
        for i, (sentence, own) in enumerate(zip(sentences, words)):
            deleted = [word for word in own if ((i, word.start) in marked) != keep]
            if keep and len(deleted) == len(own):  # no word kept (or none read): the sentence goes
                continue
            if (text := without(sentence, deleted)).strip():
                texts.append(text)
        return texts

    texts = [perturbed(chosen, keep) for keep in (False, True) for chosen in chosen_sets]
    drop = toward * (full - np.asarray(p_positive(texts), dtype=float))
    removed, kept = drop[: len(chosen_sets)], drop[len(chosen_sets) :]
    return WordRemoval(
        comprehensiveness=float(removed[0]), random_comprehensiveness=float(removed[1:].mean()),
        sufficiency=float(kept[0]), random_sufficiency=float(kept[1:].mean()), k=k, words=len(candidates),
    )  # fmt: skip


def without(sentence: Span, words: Sequence[Word]) -> str:
    """The text of ``sentence`` with the characters of ``words`` (spans in the review's text) deleted."""
    text, at = [], sentence.start
    for word in sorted(words, key=lambda w: w.start):
        text.append(sentence.text[at - sentence.start : word.start - sentence.start])
        at = word.end
    text.append(sentence.text[at - sentence.start :])
    return "".join(text)


def paired_interval(values: Sequence[float], confidence: float = 0.95) -> dict:
    """The mean of ``values`` (per review: a figure minus its random one) with its ``confidence`` interval by
    Student's t; no interval for fewer than 2 values."""
    n = len(values)
    mean = float(np.mean(values)) if n else None
    if n < 2:
        return {"mean": mean, "low": None, "high": None}
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1) * np.std(values, ddof=1) / math.sqrt(n))
    return {"mean": mean, "low": mean - half, "high": mean + half}
