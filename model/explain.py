"""LIME explanations: one weight per sentence (both models) or per word (NB-SVM).

Weights are signed toward "positive". Removed sentences are dropped from the
perturbed text, not replaced by a placeholder.
"""

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from lime.lime_text import LimeTextExplainer
from scipy.linalg import LinAlgWarning

from model.names import LABELS, POSITIVE
from model.sentences import Span

ProbaFn = Callable[[list[str]], np.ndarray]
# With few samples LIME's ridge regression is often ill-conditioned; its fit is still usable.
warnings.filterwarnings("ignore", category=LinAlgWarning, module="sklearn.linear_model._ridge")
TARGET = LABELS.index(POSITIVE)  # weights are signed toward "positive"


def deduplicated(predict_proba: ProbaFn) -> ProbaFn:
    """Wrap a classifier so each distinct text is scored once per call.

    LIME's perturbations of a review with few sentences repeat themselves a lot:
    a review of 4 sentences has only 16 distinct subsets.
    """

    def predict(texts: list[str]) -> np.ndarray:
        unique, index = np.unique(np.array(texts, dtype=object), return_inverse=True)
        return predict_proba(list(unique))[index.ravel()]

    return predict


@dataclass
class Explanation:
    weights: list[float]  # per sentence in order, or per word in ``words``
    intercept: float
    score: float  # R² of the local linear model
    words: list[str] | None = None


def explain_sentences(
    text: str,
    sentences: Sequence[Span],
    predict_proba: ProbaFn,
    num_samples: int,
    seed: int,
) -> Explanation:
    """Sentence-level LIME: a weight per sentence of ``text``, in order."""
    explainer = LimeTextExplainer(
        class_names=list(LABELS),
        split_expression=lambda _: [s.text for s in sentences],
        bow=False,
        mask_string="",
        random_state=seed,
    )
    result = explainer.explain_instance(
        text,
        deduplicated(predict_proba),
        labels=(TARGET,),
        num_features=len(sentences),
        num_samples=num_samples,
    )
    weights = dict(result.as_map()[TARGET])
    return Explanation(
        weights=[float(weights.get(i, 0.0)) for i in range(len(sentences))],
        intercept=float(result.intercept[TARGET]),
        score=float(result.score),
    )


def explain_words(text: str, predict_proba: ProbaFn, num_samples: int, seed: int) -> Explanation:
    """Word-level LIME (bag of words): a weight per distinct word of ``text``."""
    explainer = LimeTextExplainer(class_names=list(LABELS), random_state=seed)
    result = explainer.explain_instance(
        text,
        deduplicated(predict_proba),
        labels=(TARGET,),
        num_features=10_000,
        num_samples=num_samples,
    )
    pairs = result.as_list(label=TARGET)
    return Explanation(
        weights=[float(w) for _, w in pairs],
        words=[word for word, _ in pairs],
        intercept=float(result.intercept[TARGET]),
        score=float(result.score),
    )
