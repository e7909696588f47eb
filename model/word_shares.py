"""BERT's sentence shares split over their words: integrated gradients (Sundararajan et al. 2017,
through Captum) from a sentence without its words, so that a sentence's word shares add up to its
share of the served log-odds (what the what-if shows, ``app.web.whatif``).

**What is split.** The served student reads a text as a sum: sentence i's share is
(F_i + c) / T × n ** e, with F_i the network's one output on the sentence alone, c the calibration's
offset when it is added per sentence (0 when per text: it is then in the start), T the temperature
and n ** e the length factor of the n sentences read (0 for a sentence it does not read). A text of
one sentence that the teacher reads whole has one share, its calibrated log-odds:
(F + c) / T with F its positive minus its negative score and c its offset.

**The baseline.** Integrated gradients split F(x) − F(b) over the input's tokens, for a baseline b.
Here b is the sentence with each word piece's embedding replaced by the [PAD] token's, [CLS] and
[SEP] kept (same length, same positions, every token attended): what the network makes of a
sentence with no words. Its served value, the **frame** (F(b) + c) / T × n ** e, belongs to no word;
it is spread equally over the sentence's words, so that the words add up to the sentence's share.
The frame is reported beside them: each word read holds an equal part of it.

**Words.** Word pieces are summed into the words a reader sees: runs of letters and digits (with
inner apostrophes, "don't") and runs of punctuation, each with its character span in the text. A
piece goes to the word its first character is in. Pieces cut from the middle of a long sentence
(``head_and_tail``) are not read: their words get no share, and no part of the frame.

**The residual.** |Σ word shares − the sentence's share|, the share computed as the what-if does (the
served network, in its own number format); what remains of integrated gradients' approximation and of
the served arithmetic (bfloat16 on CPUs that have it). The number of steps is the study's
(docs/studies/word-shares.md); the gradients are taken in float32, where bfloat16 saved little
and doubled the worst residual. Captum hooks the embedding layer while it works: a network must
not serve other calls meanwhile.
"""

__all__ = ["SentenceWords", "Word", "word_shares"]

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from captum.attr import LayerIntegratedGradients

from model.bert import BertClassifier
from model.config import PER_SENTENCE
from model.names import TEACHER
from model.number_format import Int8Linears
from model.sentences import Span, split_sentences
from model.served import OneSentenceRouter

# Gauss-Legendre steps of integrated gradients: the study's choice by the residual (docs/studies/word-shares.md)
STEPS = 32
WORD = re.compile(r"\w+(?:['\u2019]\w+)*|[^\w\s]+")


@dataclass(frozen=True)
class Word:
    text: str
    start: int  # character span in the text
    end: int
    share: float  # of the served log-odds of "positive"


@dataclass(frozen=True)
class SentenceWords:
    """One sentence's words, whose shares add up to ``contribution`` up to ``residual``."""

    words: list[Word]
    contribution: float  # the sentence's share of the log-odds, as the what-if computes it
    frame: float  # the part of it that no word makes (a sentence without words), spread over the words
    residual: float  # |Σ shares − contribution|


@dataclass(frozen=True)
class Unit:
    """What one network reads (a sentence, or the teacher's whole text) and how its score is served:
    (score + ``offset``) × ``scale`` is its share."""

    span: Span
    offset: float
    scale: float


def word_shares(
    served: BertClassifier | OneSentenceRouter, text: str, spans: list[Span] | None = None, steps: int = STEPS
) -> list[SentenceWords] | None:
    """Each sentence's words of ``text`` (split as ``split_sentences``, or ``spans``) with their shares
    of the ``served`` BERT's log-odds (``model.served.load_served``'s); None for a model that does not
    read the text as a sum of its sentences (a whole-text model's text of several sentences), as the
    what-if has no shares there."""
    spans = split_sentences(text) if spans is None else spans
    if isinstance(served, OneSentenceRouter):
        if served.read_by(spans) == TEACHER:
            return [teacher_words(served.one_sentence_reader, text, steps)]
        served = served.own
    return student_words(served, text, spans, steps)


def teacher_words(reader: BertClassifier, text: str, steps: int) -> SentenceWords:
    """A text of one sentence read whole by the one-sentence reader: its calibrated log-odds split over its words."""
    calibration = gradients_of(reader).calibration
    unit = Unit(Span(0, len(text), text), calibration.offset, 1 / calibration.temperature)
    log_odds = np.diff(reader.logits([text]), axis=1)[:, 0] / calibration.temperature
    return split_unit(reader, [unit], log_odds, text, steps)[0]


def student_words(net: BertClassifier, text: str, spans: list[Span], steps: int) -> list[SentenceWords] | None:
    """The sentences of ``text`` that the sentence model ``net`` reads, each share split over its words."""
    read = gradients_of(net).sentences_read(spans)
    if read is None:
        return None
    if not read:  # a text without a sentence: nothing to split
        return []
    factor = float(net.length_scale(np.array([len(read)], float))[0])
    calibration = net.calibration
    # the offset per sentence is a change of each sentence's bias (``BertClassifier.raw_scores``); per text, it is the start's
    offset = calibration.offset if calibration.offset_per == PER_SENTENCE else 0.0
    units = [Unit(spans[i], offset, factor / calibration.temperature) for i in read]
    scores, added = net.scores_of(*net.units_read([[], *([u.span.text] for u in units)]), None)
    odds = calibration.logits(scores, added)[:, 1] / calibration.temperature
    shares = (odds[1:] - odds[0]) * factor
    shared = dict(zip(read, split_unit(net, units, shares, text, steps)))
    return [shared[i] if i in shared else unread(text, span) for i, span in enumerate(spans)]


def gradients_of(net: BertClassifier) -> BertClassifier:
    """``net``, which integrated gradients can differentiate: not int8 (``model.number_format.Int8Linears``)."""
    if isinstance(net.number_format, Int8Linears):
        raise ValueError("word shares need gradients, which int8 linear layers have not: load BERT without cpu_int8.")
    return net


def unread(text: str, span: Span) -> SentenceWords:
    """A sentence of a long text that the model does not read: no share, and none for its words."""
    return SentenceWords([Word(text[s:e], s, e, 0.0) for s, e in words_in(text, span)], 0.0, 0.0, 0.0)


def words_in(text: str, span: Span) -> list[tuple[int, int]]:
    """The character spans of the words of ``span`` in ``text``."""
    return [m.span() for m in WORD.finditer(text, span.start, span.end)]


def pieces(net: BertClassifier, span: Span) -> tuple[list[int], list[int]]:
    """The token ids ``net`` reads of ``span`` (``Encoder.ids``), and where in the text each piece
    between its special tokens starts."""
    ids, starts = net.encoder.ids_and_starts(span.text)
    return ids, [span.start + start for start in starts]


def split_unit(net: BertClassifier, units: Sequence[Unit], served: np.ndarray, text: str, steps: int) -> list[SentenceWords]:
    """Integrated gradients of ``net``'s score over the pieces of each unit, summed into words;
    ``served``: each unit's share as served. One unit at a time: its steps are the batch, unpadded
    (a review's sentences padded to its longest cost about twice as much)."""
    model = net.model
    embeddings = getattr(model, model.base_model_prefix).get_input_embeddings()

    def score(input_ids):
        logits = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits.float()
        return logits[:, 0] if net.reads_sentences else logits[:, 1] - logits[:, 0]

    integrated = LayerIntegratedGradients(score, embeddings)
    prefix = len(net.encoder.prefix)
    shares = []
    for unit, share in zip(units, served):
        ids, starts = pieces(net, unit.span)
        inputs = torch.tensor([ids], device=net.device)
        baseline = inputs.clone()
        baseline[0, prefix : prefix + len(starts)] = net.tokenizer.pad_token_id
        rows = max(1, net.max_tokens // len(ids))  # tokens per pass, as inference packs them
        with torch.enable_grad():
            attributions = integrated.attribute(inputs, baseline, n_steps=steps, internal_batch_size=rows)
        with torch.no_grad():
            empty = float(score(baseline)[0])
        per_piece = attributions[0, prefix : prefix + len(starts)].sum(-1).detach().cpu().numpy()
        shares.append(sentence_words(text, unit, starts, per_piece, empty, float(share)))
    return shares


def sentence_words(
    text: str, unit: Unit, starts: list[int], attributions: np.ndarray, empty: float, served: float
) -> SentenceWords:
    """A unit's pieces' attributions summed into its words, scaled as its score is served, with the
    frame (``empty``: the baseline's score) spread over the words read."""
    spans = words_in(text, unit.span)
    owners = np.searchsorted([s for s, _ in spans], starts, side="right").clip(1) - 1  # the word of each piece
    totals = np.bincount(owners, attributions, minlength=len(spans)) * unit.scale
    frame = (empty + unit.offset) * unit.scale
    read = np.unique(owners)
    if len(read):
        totals[read] += frame / len(read)
    words = [Word(text[s:e], s, e, float(share)) for (s, e), share in zip(spans, totals)]
    return SentenceWords(words, served, frame, abs(math.fsum(totals) - served))
