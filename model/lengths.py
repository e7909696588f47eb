"""Accuracy by length: whether a model reads a one-line review as well as a long one.

The length table counts sentences in bands (1, 2–3, 4–6, 7+). The evaluation reviews fill
them: each whole, in the band of its length, and cut to its first k sentences for every k
under 7 that is shorter than the review, each cut labelled with its review's label. A
review's opening is a noisier label than the review (it may only name the film), so the
table compares models at one length more than one model across lengths; a set of labelled
one-line reviews (SST-2, ``model.data.read_sst2``) is the clean measure of the first band.
"""

__all__ = ["BAND_NAMES", "band_accuracies", "band_skew_figures", "length_set"]

from collections.abc import Callable, Sequence

import numpy as np

from model.metrics import SKEW_FIGURES, accuracy, skew_figures
from model.sentences import split_sentences

BANDS = ((1, 1), (2, 3), (4, 6), (7, None))  # sentences, inclusive; None: no upper end
LONGEST_CUT = 6  # reviews are cut to at most this many sentences: the bands under 7


def band_name(low: int, high: int | None) -> str:
    if high is None:
        return f"{low}+"
    return str(low) if low == high else f"{low}–{high}"


BAND_NAMES = [band_name(low, high) for low, high in BANDS]


def band_of(sentences: int) -> str:
    """The band of a text of this many sentences (an empty text counts as one)."""
    for (low, high), name in zip(BANDS, BAND_NAMES):
        if high is None or sentences <= high:
            return name
    raise AssertionError("the last band has no upper end")


def length_set(texts: Sequence[str], labels: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """Texts, labels and bands of the length table: each review whole, and cut to its first 1,
    2, … ``LONGEST_CUT`` sentences (each cut shorter than the review)."""
    out_texts, out_labels, bands = [], [], []
    for text, label in zip(texts, labels):
        spans = split_sentences(text)
        cuts = [text[: spans[k - 1].end] for k in range(1, min(LONGEST_CUT, len(spans) - 1) + 1)]
        out_texts += [*cuts, text]
        out_labels += [label] * (len(cuts) + 1)
        bands += [band_of(k) for k in range(1, len(cuts) + 1)] + [band_of(len(spans))]
    return out_texts, out_labels, bands


def band_sizes(bands: Sequence[str]) -> list[int]:
    """How many texts each band holds, in ``BAND_NAMES`` order."""
    return [list(bands).count(name) for name in BAND_NAMES]


def per_band(figure: Callable, labels: Sequence[str], p_positive: Sequence[float], bands: Sequence[str]) -> list:
    """``figure(gold labels, p_positive)`` of each band's texts, in ``BAND_NAMES`` order (None for an empty band)."""
    p = np.asarray(p_positive, dtype=float)
    figures = []
    for name in BAND_NAMES:
        inside = [i for i, band in enumerate(bands) if band == name]
        figures.append(figure([labels[i] for i in inside], p[inside]) if inside else None)
    return figures


def band_accuracies(labels: Sequence[str], p_positive: Sequence[float], bands: Sequence[str]) -> list[float | None]:
    """Accuracy per band, in ``BAND_NAMES`` order (None for an empty band)."""
    return per_band(accuracy, labels, p_positive, bands)


def band_skew_figures(
    labels: Sequence[str], p_positive: Sequence[float], bands: Sequence[str]
) -> dict[str, list[float | None]]:
    """Each of ``SKEW_FIGURES`` (the majority baseline, balanced accuracy, macro-F1) per band, in
    ``BAND_NAMES`` order (None for an empty band)."""
    figures = per_band(skew_figures, labels, p_positive, bands)
    return {name: [None if f is None else f[name] for f in figures] for name in SKEW_FIGURES}
