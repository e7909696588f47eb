"""Human rationales: ERASER's movie reviews and how far an explanation's sentences agree with them.

ERASER's "movies" set (DeYoung et al. 2020) holds Pang & Lee's movie reviews with the passages
that annotators marked as the reasons for each review's sentiment (Zaidan et al. 2007). Its
files are lower-cased and tokenized, one sentence a line; ``read_rationales`` reads the
validation and test reviews from the release tarball without unpacking it, each as the text a
user would paste (its lines joined by spaces), its lines as sentences, and the annotated passages
as whitespace-token spans of that text.

Plausibility is scored by ERASER's own definitions (its ``rationale_benchmark/metrics.py``):

- **sentence AUPRC**: per review, the area under the precision-recall curve of the sentence scores
  against which sentences are evidence (an annotated span overlaps them), averaged over reviews;
- **token F1**: the top-k sentences' tokens against the annotated tokens, F1 per review, averaged
  (ERASER's "instance macro");
- **IOU F1**: a chosen sentence matches when its tokens' intersection over union with an annotated
  span is at least 0.5; per review, precision = matches / sentences chosen and recall = matches /
  annotated spans, each averaged over reviews, then their F1 (ERASER's "macro" partial match);

with k the number of sentences the annotators marked. ``token_plausibility`` scores a score per token
(words' shares, ``token_scores``) the same way at the token level: token AUPRC against the annotated
tokens, and token F1 and IOU F1 of the top k tokens, k the number of tokens the annotators marked,
each run of chosen tokens a predicted span. ``baseline_scores`` gives the same figures' random and
position (first and last sentences, or tokens) baselines.
"""

import bisect
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.metrics import auc, precision_recall_curve

from model.data import DataError, archive_files
from model.names import ERASER, NEGATIVE, POSITIVE, SENTENCE, WORD
from model.sentences import Span

SPLITS = ("val", "test")  # never the train split: nothing here is trained on, and these are ERASER's held-out sets
IOU_THRESHOLD = 0.5  # ERASER's partial-match threshold
RANDOM_DRAWS = 10  # the random baseline: this many draws of sentence scores per review
MEMBER = re.compile(r"^movies/(?:docs/((?:neg|pos)R_\d+)\.txt|(val|test)\.jsonl)$")
LABEL = {"POS": POSITIVE, "NEG": NEGATIVE}


@dataclass(frozen=True)
class RationaleReview:
    """One annotated review: ``doc`` is ERASER's document name (``negR_800``)."""

    doc: str
    label: str
    text: str  # the lines joined by single spaces: its whitespace tokens are ERASER's tokens
    sentences: list[Span]  # one a line of the file
    evidence: list[tuple[int, int]]  # annotated passages: [start, end) in whitespace tokens of ``text``

    def token_spans(self) -> list[tuple[int, int]]:
        """The character span of each whitespace token of ``text``."""
        return [m.span() for m in re.finditer(r"\S+", self.text)]

    def sentence_tokens(self) -> list[tuple[int, int]]:
        """Each sentence's [start, end) in tokens."""
        starts = [start for start, _ in self.token_spans()]
        bounds, token = [], 0
        for sentence in self.sentences:
            first = token
            while token < len(starts) and starts[token] < sentence.end:
                token += 1
            bounds.append((first, token))
        return bounds

    def annotated_tokens(self) -> set[int]:
        """The indices of the tokens in an annotated passage."""
        return {t for start, end in self.evidence for t in range(start, end)}

    def evidence_sentences(self) -> list[bool]:
        """Whether each sentence is evidence: an annotated span overlaps it."""
        return [any(s < e_end and e_start < e for e_start, e_end in self.evidence) for s, e in self.sentence_tokens()]


def source_key(doc: str) -> str:
    """``Review.source_key`` of ERASER's document ``doc`` in a database."""
    return f"{ERASER}/{doc}"


def read_rationales(path: Path, splits: Sequence[str] = SPLITS) -> list[RationaleReview]:
    """The annotated reviews of ``splits`` in the ERASER movies tarball at ``path``, in document order."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"{path}: no such file (expected ERASER's movies.tar.gz).")
    docs, annotations = {}, {}
    for m, text in archive_files(path, MEMBER, "Read ERASER", what="ERASER movies archive"):
        doc, split = m.groups()
        if doc:
            docs[doc] = text
        else:
            annotations[split] = text
    missing = [split for split in splits if split not in annotations]
    if missing:
        raise DataError(f"{path}: no movies/{missing[0]}.jsonl in it (is it ERASER's movies.tar.gz?).")
    reviews = [review_of(json.loads(line), docs, path) for split in splits for line in annotations[split].splitlines() if line.strip()]
    return sorted(reviews, key=lambda review: review.doc)


def review_of(annotation: dict, docs: dict[str, str], path: Path) -> RationaleReview:
    """One annotation line with its document."""
    doc = annotation["annotation_id"].removesuffix(".txt")
    if doc not in docs:
        raise DataError(f"{path}: the annotation of {doc} has no movies/docs/{doc}.txt.")
    lines = [" ".join(line.split()) for line in docs[doc].splitlines()]
    lines = [line for line in lines if line]
    text, sentences, offset = " ".join(lines), [], 0
    for line in lines:
        sentences.append(Span(offset, offset + len(line), line))
        offset += len(line) + 1
    evidence = sorted(
        {(e["start_token"], e["end_token"]) for group in annotation["evidences"] for e in group}
    )
    return RationaleReview(doc, LABEL[annotation["classification"]], text, sentences, evidence)


# -- ERASER's plausibility figures ---------------------------------------------------------------


def auprc(truth: Sequence[bool], scores: Sequence[float]) -> float:
    """The area under the precision-recall curve of ``scores`` against ``truth`` (ERASER's ``_auprc``
    for one review): 1 for a ranking that puts every true item first."""
    precision, recall, _ = precision_recall_curve([int(t) for t in truth], list(scores))
    return float(auc(recall, precision))


def top_k(scores: Sequence[float], k: int) -> list[int]:
    """The indices of the ``k`` highest scores (the earlier first among equals), in position order."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return sorted(order[:k])


def token_f1(truth: set[int], predicted: set[int]) -> float:
    """F1 of the ``predicted`` tokens against the ``truth`` tokens (0 when either is empty)."""
    hits = len(truth & predicted)
    return f1(hits / len(predicted), hits / len(truth)) if hits else 0.0


def iou_matches(truth: Sequence[tuple[int, int]], predicted: Sequence[tuple[int, int]]) -> int:
    """How many ``predicted`` spans match an annotated span with IOU ≥ ``IOU_THRESHOLD``."""

    def iou(a: tuple[int, int], b: tuple[int, int]) -> float:
        overlap = max(0, min(a[1], b[1]) - max(a[0], b[0]))
        union = (a[1] - a[0]) + (b[1] - b[0]) - overlap
        return overlap / union if union else 0.0

    return sum(any(iou(p, t) >= IOU_THRESHOLD for t in truth) for p in predicted)


def f1(precision: float, recall: float) -> float:
    return 0.0 if precision == 0 or recall == 0 else 2 * precision * recall / (precision + recall)


def plausibility(reviews: Sequence[RationaleReview], scores: Sequence[Sequence[float]]) -> dict:
    """ERASER's sentence AUPRC, token F1 and IOU F1 of sentence ``scores`` (one list per review,
    higher = more a reason for the review's reading), averaged over ``reviews``."""
    figures = []
    for review, review_scores in zip(reviews, scores):
        truth = review.evidence_sentences()
        bounds = review.sentence_tokens()
        chosen = [bounds[i] for i in top_k(review_scores, max(1, sum(truth)))]
        figures.append(review_figures(review, truth, review_scores, chosen))
    return averaged(figures)


def token_plausibility(reviews: Sequence[RationaleReview], scores: Sequence[Sequence[float]]) -> dict:
    """ERASER's token-level figures of per-token ``scores`` (one list per review, a score per
    whitespace token of its text, higher = more a reason), averaged over ``reviews``: token AUPRC
    against the annotated tokens; token F1 and IOU F1 of the top k tokens, k the annotated tokens'
    count, each run of chosen tokens a predicted span."""
    figures = []
    for review, review_scores in zip(reviews, scores):
        tokens = len(review.token_spans())
        if len(review_scores) != tokens:
            raise ValueError(f"{review.doc}: {len(review_scores)} token scores for its {tokens} tokens")
        annotated = review.annotated_tokens()
        chosen = runs(top_k(review_scores, max(1, len(annotated))))
        figures.append(review_figures(review, [t in annotated for t in range(tokens)], review_scores, chosen))
    return averaged(figures)


def review_figures(
    review: RationaleReview, truth: list[bool], scores: Sequence[float], chosen: list[tuple[int, int]]
) -> tuple:
    """One review's AUPRC of ``scores`` against ``truth`` (None when nothing is true), and the token F1,
    IOU precision and IOU recall of the ``chosen`` token spans."""
    chosen_tokens = {t for start, end in chosen for t in range(start, end)}
    matched = iou_matches(review.evidence, chosen)
    return (
        auprc(truth, scores) if any(truth) else None,
        token_f1(review.annotated_tokens(), chosen_tokens),
        matched / len(chosen),
        matched / len(review.evidence) if review.evidence else 0.0,
    )


def averaged(figures: list[tuple]) -> dict:
    """ERASER's macro averages of ``review_figures``: IOU F1 is the F1 of the mean precision and recall."""
    aucs = [figure[0] for figure in figures if figure[0] is not None]
    f1s, precisions, recalls = zip(*(figure[1:] for figure in figures))
    return {
        "auprc": float(np.mean(aucs)) if aucs else None,
        "token_f1": float(np.mean(f1s)),
        "iou_f1": f1(float(np.mean(precisions)), float(np.mean(recalls))),
    }


def runs(tokens: list[int]) -> list[tuple[int, int]]:
    """Sorted token indices as their runs of consecutive ones, [start, end)."""
    spans: list[tuple[int, int]] = []
    for token in tokens:
        if spans and spans[-1][1] == token:
            spans[-1] = (spans[-1][0], token + 1)
        else:
            spans.append((token, token + 1))
    return spans


def token_scores(review: RationaleReview, words: Sequence[tuple[int, int, float]]) -> list[float]:
    """Per whitespace token of ``review.text``, the sum of the scores of the ``words`` (character
    start, end, score) that start in it: words split finer than ERASER's tokens add up to them."""
    starts = [start for start, _ in review.token_spans()]
    scores = [0.0] * len(starts)
    for start, _, score in words:
        scores[bisect.bisect_right(starts, start) - 1] += score
    return scores


def position_scores(count: int) -> list[float]:
    """The position baseline's scores: the first and last sentences (or tokens) highest, then inwards."""
    return [-float(min(i, count - 1 - i)) for i in range(count)]


def baseline_scores(reviews: Sequence[RationaleReview], seed: int, level: str = SENTENCE) -> dict:
    """The plausibility of random sentences (mean and standard deviation over ``RANDOM_DRAWS``
    draws) and of the position baseline; with ``level`` WORD, of random tokens and of the first and
    last tokens, by ``token_plausibility``."""
    rng = random.Random(seed)
    if level == WORD:
        figures, units = token_plausibility, lambda r: len(r.token_spans())
    else:
        figures, units = plausibility, lambda r: len(r.sentences)
    draws = [figures(reviews, [[rng.random() for _ in range(units(r))] for r in reviews]) for _ in range(RANDOM_DRAWS)]
    random_figures = {
        name: {"mean": float(np.mean([d[name] for d in draws])), "std": float(np.std([d[name] for d in draws]))}
        for name in draws[0]
    }
    return {
        "random": random_figures,
        "position": figures(reviews, [position_scores(units(r)) for r in reviews]),
    }
