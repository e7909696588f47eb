"""Classification metrics for the run record: accuracy beside the majority baseline, balanced accuracy and
macro-F1 (what accuracy hides on labels that lean one way), F1, confusion, calibration; and a figure's spread
over seeds, as the studies print it."""

__all__ = ["MAJORITY_BASELINE", "SKEW_FIGURES", "accuracy", "classification_report", "expected_calibration_error",
           "fit_offset", "majority_baseline", "skew_figures", "spread"]  # fmt: skip

import statistics
import warnings

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import expit, log_expit
from sklearn.calibration import calibration_curve
from sklearn.metrics import accuracy_score, balanced_accuracy_score, confusion_matrix, f1_score

from model.names import LABELS, POSITIVE


def expected_calibration_error(gold: np.ndarray, p_positive: np.ndarray, bins: int = 10) -> float:
    """Mean gap between confidence and accuracy over equal-width confidence bins."""
    predicted = p_positive >= 0.5
    confidence = np.where(predicted, p_positive, 1 - p_positive)
    correct = predicted == gold
    edges = np.linspace(0.5, 1.0, bins // 2 + 1)
    ece = 0.0
    for low, high in zip(edges[:-1], edges[1:]):
        inside = (confidence >= low) & ((confidence < high) | (high == 1.0))
        if inside.any():
            ece += inside.mean() * abs(correct[inside].mean() - confidence[inside].mean())
    return float(ece)


def accuracy(gold_labels: list[str], p_positive) -> float:
    """Share of predictions (positive at p >= 0.5) that match the gold labels."""
    gold = np.array([label == POSITIVE for label in gold_labels])
    return float(accuracy_score(gold, np.asarray(p_positive, dtype=float) >= 0.5))


# The figures beside accuracy that labels leaning one way call for, as the run record names them.
MAJORITY_BASELINE = "majority_baseline"
SKEW_FIGURES = (MAJORITY_BASELINE, "balanced_accuracy", "macro_f1")


def majority_baseline(gold_labels: list[str]) -> float:
    """The accuracy of always saying the gold labels' majority class: what accuracy must beat."""
    positive = sum(label == POSITIVE for label in gold_labels) / len(gold_labels)
    return max(positive, 1.0 - positive)


def skew_figures(gold_labels: list[str], p_positive) -> dict[str, float]:
    """The majority baseline, balanced accuracy (the mean of each class's recall) and macro-F1 (the mean
    of each class's F1) of predictions (positive at p >= 0.5), over the classes present."""
    gold = np.array([label == POSITIVE for label in gold_labels])
    predicted = np.asarray(p_positive, dtype=float) >= 0.5
    with warnings.catch_warnings():
        # gold of one class (a short band of the length table): its recall alone, which sklearn warns of
        warnings.simplefilter("ignore", UserWarning)
        balanced = balanced_accuracy_score(gold, predicted)
    return {
        MAJORITY_BASELINE: majority_baseline(gold_labels),
        "balanced_accuracy": float(balanced),
        "macro_f1": float(f1_score(gold, predicted, average="macro", zero_division=0)),
    }


def classification_report(gold_labels: list[str], p_positive: list[float], bins: int = 10) -> dict:
    """Accuracy beside the majority baseline, balanced accuracy and macro-F1 (``skew_figures``), F1
    (positive class), confusion matrix, ECE and a reliability curve."""
    if unknown := set(gold_labels) - set(LABELS):
        raise ValueError(f"gold labels must be {' or '.join(LABELS)}, not {', '.join(map(repr, sorted(unknown, key=str)))}")
    gold = np.array([label == POSITIVE for label in gold_labels])
    p = np.asarray(p_positive, dtype=float)
    predicted = p >= 0.5
    prob_true, prob_pred = calibration_curve(gold, p, n_bins=bins, strategy="uniform")
    counts = np.histogram(p, bins=np.linspace(0, 1, bins + 1))[0]
    return {
        "n": int(len(gold)),
        "accuracy": accuracy(gold_labels, p),
        **skew_figures(gold_labels, p),
        "f1": float(f1_score(gold, predicted, zero_division=0)),
        # rows: gold negative, positive; columns: predicted negative, positive
        "confusion": confusion_matrix(gold, predicted, labels=[False, True]).tolist(),
        "ece": expected_calibration_error(gold, p, bins),
        "calibration": {
            "prob_pred": prob_pred.round(4).tolist(),
            "prob_true": prob_true.round(4).tolist(),
            "count": [int(c) for c in counts if c],
        },
    }


def fit_temperature(scores: np.ndarray, gold_labels: list[str]) -> float:
    """The temperature T that makes softmax(scores / T) fit the gold labels best (least
    negative log-likelihood): temperature scaling, Guo et al. 2017. ``scores`` are raw
    two-class scores (negative, positive), one row per text, from texts the model never saw."""
    margin = np.asarray(scores, dtype=float) @ np.array([-1.0, 1.0])  # log-odds of positive at T = 1
    sign = np.where(np.array([label == POSITIVE for label in gold_labels]), 1.0, -1.0)

    def nll(log_t: float) -> float:
        return -float(np.mean(log_expit(sign * margin / np.exp(log_t))))

    return float(np.exp(minimize_scalar(nll, bounds=(-4.0, 4.0), method="bounded").x))


def fit_offset(
    scores: np.ndarray, share_positive: float, temperature: float = 1.0, units: np.ndarray | None = None
) -> float:
    """The offset b that, added ``units`` times to the log-odds of positive of each text (default:
    once), makes the mean probability of positive over texts whose labels are unknown equal
    ``share_positive``, the share of positive texts expected among them: the class prior matched
    without labels (as the first step of Saerens et al. 2002). ``scores`` are raw two-class
    scores, one row per text."""
    if not 0.0 < share_positive < 1.0:
        raise ValueError(f"the share of positive texts must lie strictly between 0 and 1, not {share_positive}")
    margin = np.asarray(scores, dtype=float) @ np.array([-1.0, 1.0])
    units = np.ones(len(margin)) if units is None else np.asarray(units, dtype=float)
    # units are whole counts: at b = ±bound every text read at least once is past the share
    bound = float(np.abs(margin).max()) + abs(temperature * np.log(share_positive / (1 - share_positive))) + 1.0
    return float(brentq(lambda b: expit((margin + b * units) / temperature).mean() - share_positive, -bound, bound))


def tempered_p_positive(scores: np.ndarray, temperature: float) -> np.ndarray:
    """Probability of positive from raw two-class scores at ``temperature``."""
    return expit((np.asarray(scores, dtype=float) @ np.array([-1.0, 1.0])) / temperature)


def spread(values: list[float]) -> str:
    """A figure over seeds as a study prints it: "mean ± standard deviation" to 3 places, the value alone
    of a single seed."""
    if len(values) < 2:
        return f"{values[0]:.3f}"
    return f"{statistics.fmean(values):.3f} ± {statistics.stdev(values):.3f}"
