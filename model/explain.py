"""LIME explanations: a weight per sentence (both models) or per word (NB-SVM), with trust figures.

Weights are signed toward "positive", in the space ``LimeConfig.lime_target`` names
(the log-odds of "positive" by default: there, removing a sentence from a review the
model is 99 % sure of still shows). Removed sentences are dropped from the perturbed
text, not replaced by a placeholder; a model that reads sentences is handed the sentences
kept (``Perturbations``) rather than a text to split again. Each sentence explanation
comes with its ``model.quality.Quality``: LIME's fit, stability across two seeds, and
ERASER faithfulness against random sentences. ``explain_review`` is a review's sentence
explanation as the site answers and stores it, the server's live analysis and the build's alike.

Every text is scored once per explanation (``Memoized``): both LIME runs and the
faithfulness checks share the scores, and each step sends its new texts in one call
(the faithfulness checks in calls of at most ``CHUNK_CHARS`` characters).
"""

__all__ = ["Memoized", "Perturbations", "explain_sentences", "lime_sentences", "rank_agreement"]

import hashlib
import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from lime.lime_text import IndexedString, LimeTextExplainer
from scipy.linalg import LinAlgWarning
from scipy.stats import spearmanr

from model.config import LimeConfig
from model.names import LABELS, POSITIVE
from model.quality import LOG_ODDS, Quality, ReviewExplanation, assessment, finite, finite_or_none
from model.sentences import Span

ProbaFn = Callable[[list[str]], np.ndarray]
SentencesProbaFn = Callable[[Sequence[Sequence[str]]], np.ndarray]  # a sentence model's ``proba_of_sentences``
# With few samples LIME's ridge regression is often ill-conditioned; its fit is still usable.
warnings.filterwarnings("ignore", category=LinAlgWarning, module="sklearn.linear_model._ridge")
TARGET = LABELS.index(POSITIVE)  # weights are signed toward "positive"
P_CLIP = 1e-6  # log-odds are taken of probabilities clipped to [P_CLIP, 1 - P_CLIP] (about ±13.8)
TOP_FRACTION = 0.2  # the larger k of the faithfulness figures: 20 % of the sentences
# Every explanation asks LIME for all its features, which its default selection ("auto": forward
# selection up to 6 features, else a ridge fit to rank them) picks at the cost of one more ridge fit
# per feature and step, or of one more fit; with none, the one fit on all features is the same.
FEATURE_SELECTION = "none"
# What stands for a removed sentence in LIME's texts: a character no review text holds (control
# characters are dropped at ingest), so that each says which sentences it keeps (``Perturbations``).
REMOVED = "\x00"
# The faithfulness checks' texts are made and scored this many characters at a time: with one
# sentence removed each, a text of n sentences makes n texts nearly as long as itself.
CHUNK_CHARS = 1_000_000


def digest(text: str) -> bytes:
    """16 bytes that tell ``text`` from any other (BLAKE2b)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class Memoized:
    """P("positive") of texts, each distinct text scored once, the new ones of a call in one call.

    Scores are kept by a digest of their text, not the text: an explanation of a long text
    scores thousands of texts nearly as long, which need not stay in memory once scored."""

    def __init__(self, predict_proba: ProbaFn):
        self.predict_proba = predict_proba
        self.scores: dict[bytes, float] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        keys = [digest(t) for t in texts]
        new = {key: text for key, text in zip(keys, texts) if key not in self.scores}
        if new:
            p_positive = np.asarray(self.predict_proba(list(new.values())))[:, TARGET]
            self.scores.update(zip(new, map(float, p_positive)))
        return np.array([self.scores[key] for key in keys])

    def as_target(self, target: str) -> ProbaFn:
        """A LIME classifier function whose positive column is the target (log-odds or probability)."""

        def scores(texts: list[str]) -> np.ndarray:
            p = self(texts)
            if target == LOG_ODDS:
                p = np.clip(p, P_CLIP, 1 - P_CLIP)
                value = np.log(p) - np.log1p(-p)
                return np.column_stack([-value, value])
            return np.column_stack([1 - p, p])

        return scores


@dataclass
class Explanation:
    weights: list[float]  # per sentence in order, or per word in ``words``
    intercept: float
    score: float  # R² of the local linear model
    words: list[str] | None = None


@dataclass
class SentenceExplanation(Explanation):
    quality: Quality | None = None
    samples: int = 0  # the texts its local model is fitted to: LIME's samples, or 2 (``one_sentence``)


class Perturbations:
    """The texts LIME makes of ``text`` by removing some of its ``sentences``, and what a model reads
    of one: the text, or the sentences it keeps for a model that ``reads_sentences`` (not split again:
    splitting them was more than half the time of explaining such a model, scripts/README.md).

    LIME marks each removed sentence with ``REMOVED`` (its mask string), so a text says which
    sentences it keeps; a text that holds that character already has them removed outright, and
    every model reads it whole."""

    def __init__(self, text: str, sentences: Sequence[Span], reads_sentences: bool):
        marked = REMOVED not in text
        self.count = len(sentences)
        self.mask = REMOVED if marked else ""
        self.split = lambda _: [s.text for s in sentences]  # LIME's split_expression
        self.indexed = IndexedString(text, split_expression=self.split, bow=False, mask_string=self.mask)
        self.reads_sentences = reads_sentences and marked
        # each piece of the text LIME cuts it into (sentences and what lies between them), with
        # the sentence's index where it is one
        sentence_at = {int(position): i for i, position in enumerate(self.indexed.positions)}
        self.pieces = [(piece, sentence_at.get(at)) for at, piece in enumerate(self.indexed.as_list)]

    def scorer(self, predict_proba: ProbaFn, proba_of_sentences: SentencesProbaFn | None = None) -> ProbaFn:
        """The scores of what the model reads of each of LIME's texts: ``predict_proba`` of those read as
        texts, and ``proba_of_sentences`` (a model that ``reads_sentences``) of the sentences the others
        keep, one call of each kind."""

        def scores(texts: list[str]) -> np.ndarray:
            kept = [self.sentences_kept(t) for t in texts]
            whole = [i for i, sentences in enumerate(kept) if sentences is None]
            if len(whole) == len(texts):
                return predict_proba([self.as_text(t) for t in texts])
            p = np.empty((len(texts), len(LABELS)))
            given = [i for i, sentences in enumerate(kept) if sentences is not None]
            p[given] = proba_of_sentences([kept[i] for i in given])
            if whole:
                p[whole] = predict_proba([self.as_text(texts[i]) for i in whole])
            return p

        return scores

    def sentences_kept(self, perturbed: str) -> list[str] | None:
        """What a model that reads sentences is handed of one of LIME's texts: the sentences it keeps; None for
        a text it reads as a text. The text itself is read as for its prediction (by a BERT that hands a text of
        one sentence to its one-sentence reader, by that reader: ``model.served.OneSentenceRouter``)."""
        if self.reads_sentences and perturbed != self.indexed.raw:
            return self.kept(perturbed)
        return None

    def as_text(self, perturbed: str) -> str:
        """One of LIME's texts as a model reads it whole: the removed sentences' marks dropped."""
        return perturbed.replace(REMOVED, "") if self.mask else perturbed

    def kept(self, perturbed: str) -> list[str]:
        """The sentences a text of LIME's keeps, in order."""
        kept, at = [], 0
        for piece, sentence in self.pieces:
            if sentence is not None and perturbed.startswith(REMOVED, at):
                at += len(REMOVED)
                continue
            if sentence is not None:
                kept.append(piece)
            at += len(piece)
        return kept

    def removing(self, removed: Iterable[int]) -> str:
        """The text LIME makes with the sentences ``removed`` (indices) taken out."""
        return self.indexed.inverse_removing(list(removed))


def lime_sentences(
    perturbations: Perturbations, scores: ProbaFn, samples: int, seed: int, kernel_width: float
) -> Explanation:
    """One sentence-level LIME run: a weight per sentence, in order."""
    explainer = LimeTextExplainer(
        kernel_width=kernel_width,
        class_names=list(LABELS),
        split_expression=perturbations.split,
        bow=False,
        mask_string=perturbations.mask,
        random_state=seed,
        feature_selection=FEATURE_SELECTION,
    )
    result = explainer.explain_instance(
        perturbations.indexed.raw, scores, labels=(TARGET,), num_features=perturbations.count, num_samples=samples
    )
    weights = dict(result.as_map()[TARGET])
    return Explanation(
        weights=[float(weights.get(i, 0.0)) for i in range(perturbations.count)],
        intercept=float(result.intercept[TARGET]),
        score=float(result.score),
    )


def explain_sentences(
    text: str, sentences: Sequence[Span], predict_proba: ProbaFn, config: LimeConfig,
    proba_of_sentences: SentencesProbaFn | None = None,
) -> SentenceExplanation:
    """Sentence-level LIME of ``text`` with its ``Quality``: two runs (seeds ``seed`` and
    ``seed + 1``) and the faithfulness checks, every distinct text scored once; a text of one sentence
    exactly (``one_sentence``). ``proba_of_sentences``: a sentence model's (``model.trained.sentence_scorer``),
    handed the sentences each text keeps; without it, the model is handed the texts."""
    perturbations = Perturbations(text, sentences, proba_of_sentences is not None)
    memo = Memoized(perturbations.scorer(predict_proba, proba_of_sentences))
    scores = memo.as_target(config.lime_target)
    if perturbations.count == 1:
        return one_sentence(perturbations, scores, config.lime_target)
    width = config.lime_kernel_width
    first = lime_sentences(perturbations, scores, config.lime_samples, config.seed, width)
    second = lime_sentences(perturbations, scores, config.lime_samples, config.seed + 1, width)
    quality = faithfulness(perturbations, first.weights, memo, config.faithfulness_draws, config.seed)
    quality.target = config.lime_target
    quality.stability = rank_agreement(first.weights, second.weights)
    return SentenceExplanation(
        first.weights, first.intercept, first.score, quality=quality, samples=config.lime_samples
    )


def explain_review(
    text: str, sentences: Sequence[Span], predict_proba: ProbaFn, config: LimeConfig,
    proba_of_sentences: SentencesProbaFn | None = None,
) -> ReviewExplanation:
    """A model's sentence explanation of a review as the site answers and stores it: ``explain_sentences``,
    its figures finite. The server's live analysis and the build's per-review work both call it; what
    differs between them is a parameter: ``predict_proba`` (the model's own, or through the server's
    micro-batcher, with its ``proba_of_sentences`` for a sentence model) and ``config`` (LIME's samples and seeds)."""
    found = explain_sentences(text, sentences, predict_proba, config, proba_of_sentences)
    quality = {key: finite_or_none(value) for key, value in found.quality.as_dict().items()}
    return ReviewExplanation(
        weights=[finite(w) for w in found.weights],
        samples=found.samples,
        intercept=finite(found.intercept),
        score=finite(found.score),
        quality=quality,
        assessment=assessment(found.score, quality),
    )


def one_sentence(perturbations: Perturbations, scores: ProbaFn, target: str) -> SentenceExplanation:
    """The explanation of a text of one sentence, exact: every sample LIME draws of it is the empty
    text, so its local model is the line through two points, the text's score and the empty text's.
    LIME's own ridge fit (alpha 1) against the empty text's kernel weight (3e-4 each, at distance
    100 and width 25) shrank the sentence's weight to 0.13 of that difference: a one-line review the
    model reads as 93 % negative showed a weight of -0.33 for log-odds of -2.6."""
    whole, empty = scores([perturbations.indexed.raw, perturbations.removing([0])])[:, TARGET]
    quality = Quality(target=target)
    return SentenceExplanation([float(whole - empty)], float(empty), 1.0, quality=quality, samples=2)


def expected_work(text: str, sentences: Sequence[Span], config: LimeConfig) -> tuple[float, float]:
    """The distinct texts ``explain_sentences`` can be expected to score for ``text``, and their
    characters: what an explanation costs each model.

    A text keeping k of the n sentences keeps all the white space between them. LIME keeps
    k sentences with k uniform in 0..n-1, then which ones uniformly, in each of its two runs;
    the faithfulness checks score every text with one sentence removed and every text of
    one sentence, and ``1 + faithfulness_draws`` texts keeping the top or random ``top_count``
    sentences and as many without them. Repeats are scored once (``Memoized``), which for a
    few sentences is most of LIME's samples: a text of k sentences drawn d times, out of
    C(n, k) equally likely, is expected to be C(n, k) (1 - (1 - 1/C(n, k))^d) distinct texts.
    """
    n = len(sentences)
    words = sum(len(s.text) for s in sentences)
    between = len(text) - words  # characters that every perturbed text keeps
    lime_draws = 2 * (config.lime_samples - 1) / n  # of each k, over both runs
    checks = 1 + config.faithfulness_draws
    top = top_count(n)
    texts, chars = 1.0, float(len(text))  # the text itself (LIME's first sample)
    for k in range(n):
        if n >= 2 and k in (1, n - 1):  # the faithfulness checks score all of them
            distinct = float(n)
        else:
            draws = lime_draws + (checks if n >= 2 and k == n - top else 0) + (checks if n >= 2 and k == top else 0)
            distinct = expected_distinct(math.comb(n, k), draws)
        texts += distinct
        chars += distinct * (between + words * k / n)
    return texts, chars


def expected_distinct(choices: int, draws: float) -> float:
    """Distinct ones expected among ``draws`` uniform draws of ``choices`` equally likely ones."""
    if choices == 1:
        return 1.0 if draws else 0.0
    if choices > 10**12:  # then (1 - 1/c)^d is 1 - d/c to double precision
        return draws
    return choices * -math.expm1(draws * math.log1p(-1 / choices))


def rank_agreement(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rho of two weight vectors; None when it is undefined (under 2 values, or constant)."""
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    rho = spearmanr(a, b).statistic
    return float(rho) if math.isfinite(rho) else None


def top_count(sentences: int) -> int:
    """k of the larger faithfulness figures: 20 % of the sentences, at least one."""
    return max(1, math.ceil(TOP_FRACTION * sentences))


def faithfulness(
    perturbations: Perturbations, weights: Sequence[float], score: Callable, draws: int, seed: int
) -> Quality:
    """ERASER comprehensiveness and sufficiency of the top sentences by ``weights``, against random ones.

    ``score`` gives P("positive") of texts (a ``Memoized``); perturbed texts are built
    exactly as LIME builds them, so the scores LIME already has are reused.
    """
    n = len(weights)
    quality = Quality(target="")
    if n < 2:
        return quality
    text = perturbations.indexed.raw
    everything = np.arange(n)

    def without(chosen) -> str:
        return perturbations.removing(chosen)

    def only(chosen) -> str:
        return perturbations.removing(np.setdiff1d(everything, chosen))

    k = top_count(n)
    rng = np.random.default_rng(seed)
    random_choices = [rng.choice(n, size=k, replace=False) for _ in range(draws)]
    p_full = float(score([text])[0])
    toward = 1.0 if p_full >= 0.5 else -1.0  # the predicted class
    order = np.argsort(-toward * np.asarray(weights), kind="stable")
    chosen_sets = [[i] for i in range(n)] + [order[:k]] + random_choices
    texts = itertools.chain(map(without, chosen_sets), map(only, chosen_sets))
    p = np.concatenate([score(chunk) for chunk in chunks(texts, CHUNK_CHARS)])
    # drop in the predicted class's probability: removing (comprehensiveness), keeping (sufficiency)
    drop = toward * (p_full - p)
    removed, kept = drop[: len(chosen_sets)], drop[len(chosen_sets) :]
    single_removed, single_kept = removed[:n], kept[:n]
    top = order[0]
    quality.comprehensiveness = float(single_removed[top])
    quality.sufficiency = float(single_kept[top])
    quality.random_comprehensiveness = float(single_removed.mean())  # exact: every single sentence
    quality.random_sufficiency = float(single_kept.mean())
    quality.normalised_comprehensiveness = _normalised(single_removed[top], single_removed, higher_is_better=True)
    quality.normalised_sufficiency = _normalised(single_kept[top], single_kept, higher_is_better=False)
    quality.top_k = k
    quality.comprehensiveness_top = float(removed[n])
    quality.sufficiency_top = float(kept[n])
    quality.random_comprehensiveness_top = float(removed[n + 1 :].mean())
    quality.random_sufficiency_top = float(kept[n + 1 :].mean())
    return quality


def chunks(texts: Iterable[str], max_chars: int) -> Iterator[list[str]]:
    """``texts`` in lists of at most ``max_chars`` characters (or one text), made as they are taken."""
    chunk, chars = [], 0
    for text in texts:
        if chunk and chars + len(text) > max_chars:
            yield chunk
            chunk, chars = [], 0
        chunk.append(text)
        chars += len(text)
    if chunk:
        yield chunk


def _normalised(value: float, attainable: np.ndarray, higher_is_better: bool) -> float | None:
    """Where ``value`` sits between the worst (0) and best (1) attainable values; None if all are equal."""
    low, high = float(attainable.min()), float(attainable.max())
    if high - low < 1e-12:
        return None
    position = (value - low) / (high - low)
    return float(position if higher_is_better else 1 - position)


def explain_words(text: str, predict_proba: ProbaFn, num_samples: int, seed: int, target: str = LOG_ODDS) -> Explanation:
    """Word-level LIME (bag of words): a weight per distinct word of ``text``; none for a text without a word
    (emoji, ASCII art: a real review's whole text on Steam), whose model score is all its intercept."""
    explainer = LimeTextExplainer(class_names=list(LABELS), random_state=seed, feature_selection=FEATURE_SELECTION)
    if IndexedString(text, bow=True).num_words() == 0:  # LIME cannot sample the removal of no word
        [[_, value]] = Memoized(predict_proba).as_target(target)([text])
        return Explanation(weights=[], words=[], intercept=float(value), score=1.0)
    result = explainer.explain_instance(
        text,
        Memoized(predict_proba).as_target(target),
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
