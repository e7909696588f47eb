"""NB-SVM (Wang & Manning 2012) as a scikit-learn pipeline.

Binary unigram and bigram counts over Snowball-stemmed tokens without stop
words, scaled by naive-Bayes log-count ratios, fed to a linear SVM whose
scores are calibrated into probabilities (Platt scaling).
"""

import json
import re
from functools import lru_cache
from pathlib import Path

import joblib
import numpy as np
import snowballstemmer
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer
from sklearn.pipeline import Pipeline
from sklearn.svm import LinearSVC

LABELS = ["negative", "positive"]
TOKEN = re.compile(r"(?u)\b\w\w+\b")
_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    return _stemmer.stemWord(word)


def stemmed_tokens(text: str) -> list[str]:
    """Lower-cased, stop-word-free, Snowball-stemmed word tokens."""
    return [stem(w) for w in TOKEN.findall(text.lower()) if w not in ENGLISH_STOP_WORDS]


class NBLogCountRatio(TransformerMixin, BaseEstimator):
    """Scales binary features by the naive-Bayes log-count ratio r = log((p/|p|) / (q/|q|))."""

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha

    def fit(self, X, y):
        y = np.asarray(y)
        p = self.alpha + np.asarray(X[y == 1].sum(axis=0)).ravel()
        q = self.alpha + np.asarray(X[y == 0].sum(axis=0)).ravel()
        self.r_ = np.log((p / p.sum()) / (q / q.sum()))
        return self

    def transform(self, X):
        return sparse.csr_matrix(X).multiply(self.r_).tocsr()


def build_nbsvm(c: float = 0.1, seed: int = 0) -> Pipeline:
    return Pipeline(
        [
            (
                "counts",
                CountVectorizer(
                    tokenizer=stemmed_tokens, token_pattern=None, lowercase=False,
                    ngram_range=(1, 2), binary=True,
                ),
            ),  # fmt: skip
            ("nb", NBLogCountRatio()),
            (
                "svm",
                CalibratedClassifierCV(LinearSVC(C=c, random_state=seed), method="sigmoid", cv=5),
            ),
        ]
    )


def train_nbsvm(texts: list[str], labels: list[str], c: float = 0.1, seed: int = 0) -> Pipeline:
    y = np.array([LABELS.index(label) for label in labels])
    return build_nbsvm(c, seed).fit(texts, y)


def save_nbsvm(pipeline: Pipeline, directory: Path, config: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    joblib.dump(pipeline, directory / "model.joblib")
    (directory / "textflix.json").write_text(json.dumps({"labels": LABELS, **config}, indent=2))


def load_nbsvm(directory: Path) -> Pipeline:
    return joblib.load(directory / "model.joblib")
