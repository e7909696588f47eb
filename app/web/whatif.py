"""What an explained analysis adds for "what if": each sentence's exact share of a model's verdict,
and the fewest sentences whose removal would flip it.

**Exact shares.** The served BERT reads a text of several sentences as a sum: each sentence read
alone gives a score, the calibration's offset is added (per sentence, or once per text), the sum
is multiplied by the length factor n ** length_exponent (n: the sentences read) and divided by
the temperature. So its log-odds split exactly into a starting point, the model's reading of the
empty text (0, even odds, with the offset per sentence; the offset over the temperature with it
per text), and one share per sentence: (its own log-odds read alone − the start) × the length
factor (0 for a sentence of a long text that the model does not read). The sentences are scored
in one model call, and the prediction reported is the one they add up to (``p_positive``), so
start + Σ shares = its log-odds; another call of the same text differs by the noise of bfloat16
arithmetic in other batches (about 1e-3 in log-odds). A text of one sentence that the teacher
reads whole (``read_by``) starts from the empty text (0) and has one share, its log-odds.
Any other explanation (NB-SVM's, LIME's) is a fit, not exact.

**Flips.** The sentences on the winning side, largest share (or LIME weight) first, are removed
until the verdict is expected to turn; up to ``FLIP_TRIES`` such texts around that guess are
re-scored by the real model (through its micro-batcher, charged to the work limiter), and the
first that flips is the answer: ``{"sentences": [indices], "p_positive": p}``, or None.
An analysis reserves this work with the rest (``app.web.costs.what_if_cost``): per model, the sentences once and up to
``FLIP_TRIES`` texts no longer than the text, at most ``FLIP_TRIES`` + 2 times the text. For an
exact model the guess is exact for texts that still have two sentences or more, so the set is the
fewest; a text of one sentence left goes to the teacher, which re-scoring asks.
"""

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from model.names import POSITIVE, TEACHER, label_of
from model.quality import LOG_ODDS, ReviewExplanation
from model.sentences import Span

FLIP_TRIES = 4  # texts without some sentences that one flip search re-scores, at most (per model and text)


class Score(Protocol):
    """A model's micro-batcher (``app.web.batching.MicroBatcher``): (negative, positive) rows of texts, and of
    texts given as their sentences (``sentences``)."""

    async def __call__(self, texts: list[str]) -> np.ndarray: ...

    async def sentences(self, texts: list[tuple[str, ...]]) -> np.ndarray: ...


@dataclass(frozen=True)
class Reading:
    """How a sentence model reads a text: which of its sentences it adds up (``BertClassifier.sentences_read``,
    None for a text it does not read so) and the length factor of n sentences (``length_scale``)."""

    sentences_read: Callable[[list[Span]], list[int] | None]
    length_scale: Callable[[np.ndarray], np.ndarray]


def log_odds(rows: np.ndarray) -> np.ndarray:
    """The log-odds of "positive" of (negative, positive) probability rows, from both columns: exact
    in float32 where 1 − p would not be."""
    tiny = np.finfo(np.float32).tiny
    rows = np.asarray(rows, dtype=np.float64)
    return np.log(np.maximum(rows[:, 1], tiny)) - np.log(np.maximum(rows[:, 0], tiny))


# By hand: scipy.special's expit and logit differ from these in the last bits (expit by up to 3 ulps,
# logit near 0.5 by far more), which would move the figures the API answers.
def sigmoid(value: float) -> float:
    return 1 / (1 + math.exp(-value)) if value >= 0 else math.exp(value) / (1 + math.exp(value))


def logit(p: float) -> float:
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


@dataclass
class Shares:
    """An exact reading of a text: start + Σ ``contributions`` = ``log_odds``, with the length
    factor of the sentences read, to guess what removing some would do."""

    start: float
    contributions: list[float]
    read: list[int]
    length_scale: Callable[[np.ndarray], np.ndarray] | None = None

    @property
    def log_odds(self) -> float:
        return self.start + math.fsum(self.contributions)

    def without(self, removed: set[int]) -> float:
        """The log-odds of the text without the ``removed`` sentences, as the sum reads it."""
        if self.length_scale is None:  # read whole (by the teacher): the empty text is all that is left
            return self.start if removed else self.log_odds
        kept = [i for i in self.read if i not in removed]
        if not self.read:
            return self.start
        scale = self.length_scale(np.array([len(kept), len(self.read)], float))
        return self.start + float(scale[0] / scale[1]) * math.fsum(self.contributions[i] for i in kept)


async def exact_shares(
    text: str, spans: list[Span], p_positive: float, score: Score, reading: Reading | None, read_by: str | None,
    sentences_read: list[int] | None,
) -> Shares | None:
    """The exact shares of ``text`` for a model that reads it as a sum (``sentences_read``, worked
    out beforehand in a thread) or hands it whole to its teacher (``read_by``); None otherwise. The
    empty text and each sentence alone go to the model given as their sentences (``score.sentences``)."""
    if read_by == TEACHER:
        return Shares(0.0, [logit(p_positive)], [0])
    if reading is None or sentences_read is None:
        return None
    singles = [(), *((span.text,) for span in spans)]
    odds = log_odds(await score.sentences(singles))
    start, read = float(odds[0]), set(sentences_read)
    factor = float(reading.length_scale(np.array([len(sentences_read)], float))[0])
    contributions = [(float(odds[i + 1]) - start) * factor if i in read else 0.0 for i in range(len(spans))]
    return Shares(start, contributions, sorted(read), reading.length_scale)


def removal_order(weights: Sequence[float], positive: bool) -> list[int]:
    """The sentences on the side of the verdict (weights toward it above 0), strongest first."""
    sign = 1 if positive else -1
    return sorted((i for i, w in enumerate(weights) if sign * w > 0), key=lambda i: -sign * weights[i])


def text_without(text: str, spans: list[Span], removed: set[int]) -> str:
    """``text`` with the ``removed`` sentences cut out."""
    pieces, at = [], 0
    for index in sorted(removed):
        pieces.append(text[at : spans[index].start])
        at = spans[index].end
    pieces.append(text[at:])
    return " ".join(piece.strip() for piece in pieces if piece.strip())


def first_guess(order: list[int], expected: Callable[[set[int]], float], centre: float, positive: bool) -> int | None:
    """The fewest of ``order`` whose removal is ``expected`` to cross ``centre``, leaving a sentence at least."""
    for k in range(1, len(order) + 1):
        if (expected(set(order[:k])) >= centre) != positive:
            return k
    return None


async def flip_set(
    text: str, spans: list[Span], order: list[int], guess: int | None, exact: bool, positive: bool,
    score: Score,
) -> dict | None:
    """The fewest of ``order`` (a prefix of it) whose removal flips the verdict when re-scored, or None.
    An exact ``guess`` is tried first and up; a fitted one, from one below."""
    most = min(len(order), len(spans) - 1)  # a sentence is left: the empty text is no review
    if guess is None:
        if exact:
            return None
        guess = most - FLIP_TRIES + 2
    low = max(1, guess if exact else guess - 1)
    tries = list(range(low, min(most, low + FLIP_TRIES - 1) + 1))
    if not tries:
        return None
    texts = [text_without(text, spans, set(order[:k])) for k in tries]
    p = (await score(texts))[:, 1]
    for k, p_without in zip(tries, p):
        if (label_of(float(p_without)) == POSITIVE) != positive:
            return {"sentences": sorted(order[:k]), "p_positive": float(p_without)}
    return None


@dataclass(frozen=True)
class WhatIf:
    """One model's "what if" of one explained text: the fields its explanation gains (``exact``, and
    ``start``, ``log_odds`` when exact; ``flip``), the sentences' shares (None unless exact), and the
    probability to report (the one the shares add up to, when exact)."""

    fields: dict
    contributions: list[float] | None
    p_positive: float


async def what_if(
    text: str, spans: list[Span], p_positive: float, explanation: ReviewExplanation, score: Score,
    reading: Reading | None, read_by: str | None, sentences_read: list[int] | None,
) -> WhatIf:
    """One model's ``WhatIf`` of one text it has explained (``explanation``)."""
    shares = await exact_shares(text, spans, p_positive, score, reading, read_by, sentences_read)
    if shares is not None:
        p_positive = sigmoid(shares.log_odds)
        positive = p_positive >= 0.5
        order = removal_order(shares.contributions, positive)
        guess = first_guess(order, shares.without, 0.0, positive)
    else:
        positive, weights = p_positive >= 0.5, explanation.weights
        order = removal_order(weights, positive)
        centre = 0.0 if (explanation.quality or {}).get("target", LOG_ODDS) == LOG_ODDS else 0.5

        def fitted(removed: set[int]) -> float:  # LIME's fit of the text without ``removed``
            return explanation.intercept + math.fsum(w for i, w in enumerate(weights) if i not in removed)

        guess = first_guess(order, fitted, centre, positive)
    flip = await flip_set(text, spans, order, guess, shares is not None, positive, score)
    fields = {"exact": shares is not None, "flip": flip}
    if shares is not None:
        fields.update(start=shares.start, log_odds=shares.log_odds)
    return WhatIf(fields, None if shares is None else shares.contributions, p_positive)


def waterfall(start: float, shares: list[float]) -> dict:
    """The bars of a waterfall from 0 to ``start``, through each share, to the total, as ``left`` and
    ``width`` in percent of the range they cover, with 0 at ``zero``: what /analyze draws."""
    ends = list(itertools.accumulate(shares, initial=start))
    low, high = min(0.0, *ends), max(0.0, *ends)
    span = (high - low) or 1.0

    def bar(a: float, b: float) -> dict:
        left = 100 * (min(a, b) - low) / span
        return {"left": round(left, 2), "width": round(max(100 * abs(b - a) / span, 0.4), 2)}

    return {
        "zero": round(100 * -low / span, 2),
        "start": bar(0.0, start),
        "steps": [bar(a, b) for a, b in zip(ends, ends[1:])],
        "total": bar(0.0, ends[-1]),
    }
