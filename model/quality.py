"""How far a sentence explanation can be trusted: its figures, and how the site reads them.

The figures are computed in ``model.explain``; this module is light (no lime, no
torch), so that the web server and the export can read them without importing LIME.
A model's explanation of a review as the site answers and stores it, the build's and the
server's alike, is a ``ReviewExplanation`` (``model.explain.explain_review`` makes it).

- ``score``: LIME's own surrogate fit, the weighted R² of its linear model;
- ``stability``: Spearman rank agreement of the weights with a second LIME run that
  uses another seed;
- ERASER faithfulness (DeYoung et al. 2020), in probability of the predicted class:
  *comprehensiveness*, its drop when the top sentences (by weight toward the predicted
  class) are removed, and *sufficiency*, its drop when only they are kept (lower is
  better); at k = 1 and at k = 20 % of the sentences (at least one), each beside the
  same figure for randomly chosen sentences. At k = 1 every choice is scored, so the
  random figure is exact, and the attainable range gives the normalised figures
  (Edin et al. 2024): 0 = the worst single sentence, 1 = the best. Comparisons between
  models use the normalised figures, since raw ones depend on how confident a model is.
"""

__all__ = ["is_empty"]

import math
from dataclasses import asdict, dataclass, fields

LOG_ODDS, PROBABILITY = "log_odds", "probability"  # what LIME explains: model.config.LimeConfig.lime_target
# A weight below this (in its space) moves the prediction by about one percentage point at
# 50 %: a sentence explanation with no larger weight is "empty".
NEGLIGIBLE_WEIGHT = {LOG_ODDS: 0.05, PROBABILITY: 0.01}
# The weight painted at full colour on every page, the same for every review and model.
FULL_COLOUR_WEIGHT = {LOG_ODDS: 1.0, PROBABILITY: 0.2}
GOOD_FIT, ROUGH_FIT = 0.7, 0.4  # R² from which the weights explain most / part of a prediction
# R² under which they explain almost nothing: the explanation is weak. Between NO_FIT and
# ROUGH_FIT the weights are "only a rough guide" to how much, while their ranking can still be
# faithful (BERT's log-odds are not additive in sentences, so its fits are often that low).
NO_FIT = 0.2
STABLE = 0.9  # Spearman from which two runs rank the sentences (nearly) alike
UNSTABLE = 0.5  # below it, another run would tell a different story


@dataclass
class Quality:
    """The trust figures of one sentence explanation (see the module's docstring).

    Faithfulness figures are in probability of the predicted class; ``None`` where a
    figure is undefined (a review of one sentence has nothing to choose between).
    """

    target: str
    stability: float | None = None
    top_k: int | None = None  # k of the ``*_top`` figures: 20 % of the sentences, at least 1
    comprehensiveness: float | None = None  # k = 1
    sufficiency: float | None = None
    random_comprehensiveness: float | None = None
    random_sufficiency: float | None = None
    normalised_comprehensiveness: float | None = None  # 1 = the best single sentence to remove
    normalised_sufficiency: float | None = None  # 1 = the best single sentence to keep
    comprehensiveness_top: float | None = None  # k = top_k
    sufficiency_top: float | None = None
    random_comprehensiveness_top: float | None = None
    random_sufficiency_top: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


QUALITY_FIELDS = tuple(f.name for f in fields(Quality))


def fit_reading(score: float | None) -> str:
    """LIME's R² in plain words."""
    if score is None:
        return "No fit was recorded."
    if score >= GOOD_FIT:
        return "The sentence weights explain most of this prediction."
    if score >= ROUGH_FIT:
        return "The sentence weights explain part of this prediction."
    return "Only a rough guide: the sentence weights explain little of this prediction."


def stability_reading(stability: float | None) -> str:
    """The stability in plain words."""
    if stability is None:
        return "No second run was recorded."
    if stability >= STABLE:
        return "Two runs with different seeds rank the sentences alike."
    if stability >= UNSTABLE:
        return "Two runs with different seeds rank the sentences broadly alike."
    return "Two runs with different seeds rank the sentences differently: another run would tell another story."


def weak_reasons(score: float | None, quality: dict) -> list[str]:
    """Why an explanation is weak, in plain words; empty when it is not. Weak: the linear fit
    explains almost nothing, another run would rank the sentences differently, or removing the
    top sentence matters no more than removing a random one."""
    stability = quality.get("stability")
    top, random = quality.get("comprehensiveness"), quality.get("random_comprehensiveness")
    reasons = []
    if score is not None and score < NO_FIT:
        reasons.append(f"LIME's linear fit explains almost none of the prediction (R² {score:.2f})")
    if stability is not None and stability < UNSTABLE:
        reasons.append(f"a second run ranks the sentences differently (agreement {stability:.2f})")
    if top is not None and random is not None and top <= random:
        reasons.append("removing its top sentence moves the prediction no more than removing a random one")
    return reasons


def is_weak(score: float | None, quality: dict) -> bool:
    """Whether an explanation should be shown as weak (``weak_reasons``)."""
    return bool(weak_reasons(score, quality))


def is_empty(weights, target: str) -> bool:
    """Whether no sentence weight is large enough to matter (``NEGLIGIBLE_WEIGHT``)."""
    return all(abs(w) < NEGLIGIBLE_WEIGHT[target] for w in weights)


def assessment(score: float | None, quality: dict | None) -> dict:
    """What the pages and the API say of an explanation beside its figures: ``weak``, its
    ``reasons`` and a ``reading`` of the fit."""
    reasons = weak_reasons(score, quality or {})
    return {"weak": bool(reasons), "reasons": reasons, "reading": fit_reading(score)}


def finite(value: float) -> float:
    """A figure as the site stores and answers it: a non-finite float (NaN, ±inf) is 0."""
    return float(value) if math.isfinite(value) else 0.0


def finite_or_none(value):
    """A figure for JSON: non-finite floats become None; other values pass."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


@dataclass(frozen=True)
class ReviewExplanation:
    """One model's sentence explanation of a review: a weight per sentence, in order, and its trust
    figures, all finite (``finite``; a non-finite figure of ``quality`` is None). ``as_dict`` is the
    one shape in which the build's work and the server's analysis hand it on to be stored
    (``app.results``); ``figures`` is what the API answers of it beside the weights."""

    weights: list[float]
    samples: int  # the texts its local model is fitted to
    intercept: float
    score: float  # R² of LIME's local linear model
    quality: dict  # ``Quality.as_dict()``
    assessment: dict  # what the site says of the figures (``assessment``)

    def as_dict(self) -> dict:
        return asdict(self)

    def figures(self) -> dict:
        """Its figures and what the site says of them, as the API answers them."""
        return {"samples": self.samples, "intercept": self.intercept, "score": self.score, "quality": dict(self.quality),
                **self.assessment}  # fmt: skip
