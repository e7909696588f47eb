"""What a request costs the server, in one place: the model passes it is charged (``request_cost``),
the most one request may be charged on this machine (``largest_request``, from its measured speed),
and the checks of what one request may have explained.

A model pass is a full-length text, ``FULL_TEXT_CHARS`` characters (each text counts
``TEXT_OVERHEAD_CHARS`` more), per model. A request is charged its texts once, each explained text
the distinct texts its explanation scores and its "what if" re-scores, and the texts a model hands
to its teacher what the teacher's reading costs more, and BERT's word shares what their integrated
gradients cost (``words_cost``). ``app.web.analysis`` reserves the charge from
its ``WorkLimiter`` (``app.web.batching``), which admits work but does not price it;
``scripts/bench_load.py`` prices its requests with the same ``request_cost``.
"""

import math
from collections.abc import Sequence

from app.settings import Settings
from app.web.errors import AppError
from app.web.whatif import FLIP_TRIES
from model.config import LimeConfig
from model.names import TEACHER
from model.sentences import Span

FULL_TEXT_CHARS = 1000  # about the characters that fill BERT's window of 256 tokens
TEXT_OVERHEAD_CHARS = 10  # what a text costs a model call besides its characters
# What a text costs BERT's teacher against its student, the unit of ``analysis_cost``: a one-line
# review 4.2× (18.8 against 4.5 ms), 64 one-sentence texts of 20,000 characters 3.9× (11.0 against
# 2.8 s), on 2 CPU cores (docs/studies/one-sentence-reader.md).
READER_COST = 4
# What BERT's word shares (``model.word_shares``: integrated gradients' 32 steps, forward and backward, in
# float32, one sentence a call on its own copy of BERT) cost in model passes a full-length text of sentences:
# the study's 1.54 CPU s a student's sentence of real reviews (docs/studies/word-shares.md; ~0.13 full-length
# text with its overhead) at 35.6 CPU ms a pass (17.8 ms on 2 cores, docs/benchmarks/worst-requests.md); over
# HTTP, 212 to 423 (docs/api.md: the added seconds of 4 and 15 sentences at the pass the server timed). A text
# the teacher reads costs ``READER_COST`` times more (study: 7.6 CPU s, 4.9 times a student's sentence).
WORDS_COST = 330
# The largest request is admitted only where the measured speed finishes it alone in this share of
# ``analysis_timeout_s``: the rest is for the small requests beside it, what else the cores are doing
# and the estimate's error (its model calls are timed once, as the models load).
TIMEOUT_SHARE = 0.5


class ExplanationTooLarge(Exception):
    """The texts of one request have more sentences than ``max_explain_sentences``, or more
    work than the server takes at once; ``limit`` is the limit it is over."""

    def __init__(self, message: str, limit: int):
        self.limit = limit
        super().__init__(message)


def request_cost(
    texts: Sequence[str],
    spans: Sequence[Sequence[Span]] | None,
    readers: Sequence[dict[str, str]],
    explain: bool,
    lime: LimeConfig,
    words: bool = False,
) -> int:
    """The model passes the server charges a request of ``texts``, each split into its ``spans`` (needed
    with ``explain``) and read by the networks ``readers`` names (each text's, by model: ``read_by``):
    the texts (``analysis_cost``), what the texts a model hands to its teacher cost more
    (``reader_cost``), with ``explain`` the explanations with their "what if" (``what_if_cost``) and
    with ``words`` BERT's word shares (``words_cost``)."""
    cost = analysis_cost(texts, explain, lime, spans) + reader_cost(texts, readers, explain, lime)
    if words:
        cost += words_cost(spans, readers)
    return cost + what_if_cost(texts, lime) if explain else cost


def analysis_cost(
    texts: Sequence[str], explain: bool, lime: LimeConfig, sentences: Sequence[Sequence[Span]] | None = None
) -> int:
    """Model passes an analysis is expected to need per model, a pass being a full-length text
    (``FULL_TEXT_CHARS`` characters; each text counts ``TEXT_OVERHEAD_CHARS`` more): each text
    once and, for each explained text, the distinct texts its explanation scores
    (``model.explain.expected_work``), which depend on its sentences: with ``explain``,
    ``sentences`` holds the spans of each text."""
    from model.explain import expected_work

    count, chars = float(len(texts)), float(sum(map(len, texts)))
    if explain:
        if sentences is None:
            raise ValueError("the cost of an explanation depends on the sentences of its texts: pass them")
        for text, spans in zip(texts, sentences, strict=True):
            more_texts, more_chars = expected_work(text, spans, lime)
            count, chars = count + more_texts, chars + more_chars
    return math.ceil(full_texts(count, chars))


def full_texts(count: float, chars: float) -> float:
    """What ``count`` texts of ``chars`` characters in all are in full-length texts, each counting ``TEXT_OVERHEAD_CHARS`` more."""
    return (chars + TEXT_OVERHEAD_CHARS * count) / FULL_TEXT_CHARS


def reader_cost(texts: Sequence[str], readers: Sequence[dict[str, str]], explain: bool, lime: LimeConfig) -> int:
    """What the texts a model hands to its teacher cost beyond what ``analysis_cost`` charges: the
    teacher reads a text in ``READER_COST`` times the student's time, for its prediction and, when
    it is explained, once more (its explanation scores it, and the empty text, which no network reads)."""
    alone = [text for text, read in zip(texts, readers, strict=True) if TEACHER in read.values()]
    if not alone:
        return 0
    return (READER_COST - 1) * (2 if explain else 1) * analysis_cost(alone, False, lime)


def what_if_cost(texts: Sequence[str], lime: LimeConfig) -> int:
    """The model passes (``analysis_cost``) that the "what if" of explained ``texts`` may take per model, at most
    (``app.web.whatif``): the sentences of each (its length, and a text's overhead per sentence) and
    ``FLIP_TRIES`` texts no longer."""
    return analysis_cost([text for text in texts for _ in range(FLIP_TRIES + 2)], False, lime)


def words_cost(spans: Sequence[Sequence[Span]], readers: Sequence[dict[str, str]]) -> int:
    """The model passes BERT's word shares of texts split into ``spans`` cost: ``WORDS_COST`` passes a full-length
    text of their sentences (``full_texts``), ``READER_COST`` times more for a text its teacher reads (``readers``:
    each text's network by model; ``model.word_shares`` splits its one sentence the same way)."""
    units = sum(
        words_units([span.text for span in text_spans], TEACHER in read.values())
        for text_spans, read in zip(spans, readers, strict=True)
    )  # fmt: skip
    return math.ceil(WORDS_COST * units)


def words_seconds(sentences: Sequence[str], seconds_per_pass: float | None, teacher: bool = False) -> int | None:
    """About how many seconds BERT's word shares of a text of ``sentences`` take on this machine: their price
    (``words_cost``) at its measured speed (``ModelAnalyzer.limits``); None where the speed is not measured."""
    if seconds_per_pass is None:
        return None
    return math.ceil(WORDS_COST * words_units(sentences, teacher) * seconds_per_pass)


def words_units(sentences: Sequence[str], teacher: bool) -> float:
    """A text's sentences in full-length texts, times ``READER_COST`` when its teacher reads it."""
    return full_texts(len(sentences), sum(map(len, sentences))) * (READER_COST if teacher else 1)


def check_explanation_size(field: str, texts: list[str], settings: Settings) -> None:
    """The characters one request may ask to have explained (the models read them all, in every
    text LIME scores): ``AppError`` (422) naming ``field``. Its sentences, and the model passes its
    explanation takes, are counted once the analysis is admitted (``explanation_cost``): splitting
    costs time, which a request refused here does not get."""
    amount, limit = sum(map(len, texts)), settings.max_explain_chars
    if amount > limit:
        raise AppError.one(
            422, field,
            f"Explaining this means explaining {amount:,} characters; one request may ask for at most {limit:,} "
            "(TEXTFLIX_MAX_EXPLAIN_CHARS). Send fewer or shorter texts, or leave out the explanations.",
            limit,
        )  # fmt: skip


def largest_request(settings: Settings, seconds_per_pass: float | None) -> int:
    """The most model passes one request may be charged: ``max_work_in_flight``, or fewer where this machine,
    at its measured ``seconds_per_pass`` (None: not measured), would not finish them in ``TIMEOUT_SHARE`` of
    ``analysis_timeout_s``."""
    if not settings.analysis_timeout_s or not seconds_per_pass:
        return settings.max_work_in_flight
    return max(1, min(settings.max_work_in_flight, int(settings.analysis_timeout_s * TIMEOUT_SHARE / seconds_per_pass)))


def explanation_cost(
    texts: Sequence[str],
    spans: Sequence[Sequence[Span]],
    readers: Sequence[dict[str, str]],
    lime: LimeConfig,
    max_sentences: int,
    largest: int,
    seconds_per_pass: float | None = None,
    words: bool = False,
) -> int:
    """``request_cost`` of explaining ``texts``, split into ``spans`` (and with ``words``, BERT's word shares of
    them), once it is known that one request may: ``ExplanationTooLarge`` when they have more sentences than
    ``max_sentences`` (counted first: working out what thousands of sentences cost takes seconds), or cost more
    than the server takes of one request (``largest``: ``largest_request`` at this machine's ``seconds_per_pass``)."""
    count = sum(map(len, spans))
    if count > max_sentences:
        raise ExplanationTooLarge(
            f"Explaining this means explaining {count:,} sentences; one request may ask for at most {max_sentences:,} "
            "(TEXTFLIX_MAX_EXPLAIN_SENTENCES). Send fewer or shorter texts, or leave out the explanations.",
            max_sentences,
        )
    cost = request_cost(texts, spans, readers, True, lime, words)
    what = f"Explaining this{' with its words' if words else ''} ({sum(map(len, texts)):,} characters, {count:,} sentences)"
    check_largest(cost, largest, seconds_per_pass, what, "or leave out the words" if words else "or leave out the explanations")
    return cost


def check_largest(cost: int, largest: int, seconds_per_pass: float | None, what: str, instead: str) -> None:
    """``ExplanationTooLarge`` when ``cost`` passes are more than the server takes of one request (``largest``);
    ``what``: the work, in words; ``instead``: what the client can ask for instead."""
    if cost > largest:
        speed = (
            f", {cost * seconds_per_pass:,.0f} s on this machine at its measured {seconds_per_pass * 1000:.1f} ms a "
            "pass, and one request must finish well within TEXTFLIX_ANALYSIS_TIMEOUT_S" if seconds_per_pass else ""
        )  # fmt: skip
        raise ExplanationTooLarge(
            f"{what} takes {cost:,} model passes of {FULL_TEXT_CHARS:,} characters{speed}; the server takes at most "
            f"{largest:,} at once (TEXTFLIX_MAX_WORK_IN_FLIGHT). Send fewer or shorter texts, {instead}.",
            largest,
        )
