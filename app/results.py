"""A review's analysis as database rows, in one place: the build's per-review work
(``app.offline.review_work``) and the reviews the server stores (``app.web.store``) write their
``Prediction``, ``Sentence``, ``SentenceWeight``, ``Explanation`` and ``WordWeight`` rows here, and
BERT's ``WordShare`` rows (``model.word_shares``).

Both hand over the same shape: per model, a probability of "positive", and a sentence
explanation as ``model.quality.ReviewExplanation.as_dict()`` gives it::

    {"weights": [0.4, -0.1], "samples": 64, "intercept": ..., "score": ..., "quality": {...}, "assessment": {...}}

(a weight per sentence, in order; its ``assessment``, and the API's other keys beside it, are not stored).
A word-level explanation (the build's, of NB-SVM) has ``words`` beside its ``weights``.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from app.db import Explanation, Prediction, Review, Sentence, SentenceWeight, WordShare, WordWeight
from model.names import SENTENCE, WORD, label_of
from model.quality import finite
from model.sentences import Span

if TYPE_CHECKING:  # not imported to run: it loads Captum, which the server needs only once it computes words
    from model.word_shares import SentenceWords

WORD_CHARS = 128  # the longest word word_weights keeps (app.db.WordWeight.word)


def prediction_row(model: str, p_positive: float, review_id: int | None = None) -> Prediction:
    return Prediction(review_id=review_id, model=model, label=label_of(p_positive), p_positive=finite(p_positive))


def explanation_row(model: str, explanation: Mapping, review_id: int | None = None, level: str = SENTENCE) -> Explanation:
    """The ``Explanation`` row of a model's explanation of a review (its figures, not its weights)."""
    return Explanation(
        review_id=review_id, model=model, level=level, samples=explanation["samples"],
        intercept=explanation["intercept"], score=explanation["score"], **explanation.get("quality", {}),
    )  # fmt: skip


def explained_rows(model: str, review_id: int, sentence_ids: Sequence[int], explanation: Mapping) -> list:
    """A model's sentence explanation of a stored review: a ``SentenceWeight`` per sentence (``sentence_ids``,
    in order) and its ``Explanation``."""
    weights = [
        SentenceWeight(sentence_id=sentence_id, model=model, weight=weight)
        for sentence_id, weight in zip(sentence_ids, explanation["weights"], strict=True)
    ]
    return [*weights, explanation_row(model, explanation, review_id)]


def word_rows(model: str, review_id: int, explanation: Mapping) -> list:
    """A model's word-level explanation of a stored review: a ``WordWeight`` per word and its ``Explanation``."""
    weights = [
        WordWeight(review_id=review_id, model=model, word=word[:WORD_CHARS], weight=weight)
        for word, weight in zip(explanation["words"], explanation["weights"], strict=True)
    ]
    return [*weights, explanation_row(model, explanation, review_id, WORD)]


def word_share_rows(model: str, sentence_ids: Sequence[int], sentences: Sequence["SentenceWords"]) -> list[WordShare]:
    """A model's word shares of a stored review's sentences (``sentence_ids``, in order): a ``WordShare`` per word."""
    return [
        WordShare(sentence_id=sentence_id, model=model, position=position, start=word.start, end=word.end, share=word.share)
        for sentence_id, sentence in zip(sentence_ids, sentences, strict=True)
        for position, word in enumerate(sentence.words)
    ]


def add_analysis(
    review: Review, spans: Iterable[Span], p_positive: Mapping[str, float], explanations: Mapping[str, Mapping]
) -> None:
    """Give a new ``review`` its rows: each model's prediction (``p_positive``, by model), its sentences
    (``spans``) with each explained model's weight, and each model's explanation."""
    review.predictions = [prediction_row(model, p) for model, p in p_positive.items()]
    review.sentences = [
        Sentence(
            position=position, start=span.start, end=span.end, text=span.text,
            weights=[SentenceWeight(model=model, weight=e["weights"][position]) for model, e in explanations.items()],
        )  # fmt: skip
        for position, span in enumerate(spans)
    ]
    review.explanations = [explanation_row(model, explanation) for model, explanation in explanations.items()]
