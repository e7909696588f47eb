"""How a BERT reads a text, by its pooling (``model.config.BertConfig.pooling``): whole (``WholeText``:
the network's two scores are the text's), or as its sentences, each read alone and their scores summed
and scaled by the text's length (``SentencesSummed``). Each says what units the network reads of a
text, which of them it keeps, how their scores make the text's, and how many sentences an offset per
sentence counts."""

from collections.abc import Sequence

import numpy as np
import torch

from model.config import SENTENCE_WINDOWS, SENTENCES, BertConfig
from model.encoding import Encoder, head_and_tail_sentences
from model.names import LABELS
from model.sentences import Span, split_sentences


def sentences_of(text: str) -> list[str]:
    """A text's sentences, split here (a text already cut into sentences goes to ``proba_of_sentences``)."""
    return [s.text for s in split_sentences(text)]


class WholeText:
    """Each text read whole: its scores (negative, positive) are the network's."""

    reads_sentences = False
    outputs = len(LABELS)

    def units(self, text: str) -> list[str]:
        return [text]

    def kept(self, ids: list[list[int]], members: list[list[int]]) -> list[list[int]]:
        return members

    def pooled(self, scores: torch.Tensor, rows: list[list[int]]) -> torch.Tensor:
        """The texts' scores from their units' (``rows``: each text's rows of ``scores``)."""
        return scores[[own[0] for own in rows]]

    def offset_units(self, members: list[list[int]]) -> np.ndarray:
        """How many times an offset per sentence is added to each text: once, a text being one unit."""
        return np.ones(len(members))

    def sentences_read(self, sentences: Sequence[Span], encoder: Encoder) -> list[int] | None:
        """None: it does not read a text as a sum of its sentences."""
        return None


class SentencesSummed:
    """Each sentence of a text read alone, to one score, its share of the text's log-odds of "positive";
    the text's are their sum (an empty text's: 0, even odds) times ``length_scale``. Of a long text, at most
    ``SENTENCE_WINDOWS`` windows' worth of sentences from both ends (``head_and_tail_sentences``), so that
    a text costs at most that many times what a whole-text model pays for it."""

    reads_sentences = True
    outputs = 1

    def __init__(self, max_length: int, length_exponent: float):
        self.budget = SENTENCE_WINDOWS * max_length  # the tokens of a text's sentences it reads at most
        self.length_exponent = length_exponent

    def units(self, text: str) -> list[str]:
        return sentences_of(text)

    def kept(self, ids: list[list[int]], members: list[list[int]]) -> list[list[int]]:
        """Of each text's ``members`` (indices of ``ids``), those read: ``head_and_tail_sentences``'s."""
        return [[own[i] for i in head_and_tail_sentences([len(ids[j]) for j in own], self.budget)] for own in members]

    def pooled(self, scores: torch.Tensor, rows: list[list[int]]) -> torch.Tensor:
        """The texts' scores (0, log-odds) from their sentences' (``rows``: each text's rows of ``scores``)."""
        device = scores.device
        owner = torch.tensor([t for t, own in enumerate(rows) for _ in own], dtype=torch.long, device=device)
        flat = torch.tensor([i for own in rows for i in own], dtype=torch.long, device=device)
        log_odds = torch.zeros(len(rows), device=device).index_add(0, owner, scores[flat, 0])
        if self.length_exponent:
            counts = torch.tensor([len(own) for own in rows], dtype=torch.float32, device=device)
            log_odds = log_odds * self.length_scale(counts)
        return torch.stack([torch.zeros_like(log_odds), log_odds], dim=1)

    def length_scale(self, counts):
        """What the summed scores of texts of ``counts`` sentences are multiplied by: n ** ``length_exponent``
        (an empty text's, whose sum is 0: 1). Works on arrays and tensors alike."""
        return counts.clip(1) ** self.length_exponent

    def offset_units(self, members: list[list[int]]) -> np.ndarray:
        """How many times an offset per sentence is added to each text: once per sentence read (none
        for an empty text), so that it is a change of each sentence's bias and the sentence weights
        stay exact, scaled as the sentences' scores are (``length_scale``)."""
        counts = np.array([len(own) for own in members], dtype=float)
        return counts * self.length_scale(counts)

    def sentences_read(self, sentences: Sequence[Span], encoder: Encoder) -> list[int]:
        """Which of a text's ``sentences`` (``split_sentences``'s, by index) it adds up the scores of:
        all of them, or those ``kept`` of a long text."""
        ids = encoder.ids([s.text for s in sentences])
        return head_and_tail_sentences([len(unit) for unit in ids], self.budget)


def reading_of(config: BertConfig) -> WholeText | SentencesSummed:
    """How a BERT of this ``config`` reads a text."""
    return SentencesSummed(config.max_length, config.length_exponent) if config.pooling == SENTENCES else WholeText()
