"""The BERT the server and the build's evaluation read texts with, composed from its folder
(``load_served``): the trained network with its calibration and number format
(``model.bert.BertClassifier.load``), and, when its facts name one, the model it hands its texts of
one sentence to, behind a ``OneSentenceRouter``."""

__all__ = ["OneSentenceRouter", "ReaderUnavailable", "load_served"]

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from model.artifacts import read_meta
from model.bert import BertClassifier
from model.names import BERT, DISPLAY_NAMES, LABELS, TEACHER
from model.one_sentence import ONE_SENTENCE_READER, network_reading
from model.reading import sentences_of
from model.sentences import Span, split_sentences


class ReaderUnavailable(Exception):
    """The model that a model hands its texts of one sentence to (``directory``) cannot be loaded."""

    def __init__(self, directory: Path, error: Exception):
        super().__init__(str(error))
        self.directory = directory


class OneSentenceRouter:
    """A BERT (``own``) that hands its texts of one sentence to another model, its ``one_sentence_reader``
    (the distill recipe's teacher), and reads every other text itself (``network_reading``)."""

    key = BERT

    def __init__(self, own: BertClassifier, one_sentence_reader):
        self.own = own
        self.one_sentence_reader = one_sentence_reader
        self.reads_sentences = own.reads_sentences
        self.length_scale = own.length_scale

    def predict_proba(self, texts: Sequence[str], max_tokens: int | None = None) -> np.ndarray:
        """Class probabilities (negative, positive), one row per text, each from the network that reads
        it, as ``read_by`` decides from the text's sentences. A text already cut into the sentences the
        model should read (what an explanation scores of a text) goes to ``proba_of_sentences`` instead."""
        sentences = [sentences_of(t) for t in texts]
        alone = np.array([self.read_by(s) == TEACHER for s in sentences], dtype=bool)
        p = np.empty((len(texts), len(LABELS)), dtype=np.float32)
        if alone.any():
            p[alone] = self.one_sentence_reader.predict_proba([t for t, one in zip(texts, alone) if one], max_tokens)
        if not alone.all():
            rest = np.flatnonzero(~alone)
            if self.own.reads_sentences:  # a sentence model is handed the sentences split here
                p[rest] = self.own.proba_of_sentences([sentences[i] for i in rest], max_tokens)
            else:
                p[rest] = self.own.predict_proba([texts[i] for i in rest], max_tokens)
        return p

    def proba_of_sentences(self, texts: Sequence[Sequence[str]], max_tokens: int | None = None) -> np.ndarray:
        """The own model's probabilities of texts given as their sentences (``BertClassifier.proba_of_sentences``),
        one sentence or not: a text's explanation asks the network that read the text."""
        return self.own.proba_of_sentences(texts, max_tokens)

    def read_by(self, sentences: Sequence) -> str:
        """Which network reads a text of these ``sentences`` (its split, made once by the caller)."""
        return network_reading(sentences, True)

    def reads_alone(self, text: str) -> bool:
        """Whether ``predict_proba`` hands ``text`` to the ``one_sentence_reader``."""
        return self.read_by(split_sentences(text)) == TEACHER

    def sentences_read(self, sentences: Sequence[Span]) -> list[int] | None:
        """The own model's ``sentences_read``; None for a text of one sentence, which the reader reads."""
        return None if self.read_by(sentences) == TEACHER else self.own.sentences_read(sentences)


def load_served(
    directory: Path, device: torch.device, max_tokens: int | None = None, cpu_int8: bool = False
) -> BertClassifier | OneSentenceRouter:
    """The BERT saved in ``directory`` as it serves: with the model its facts name as its one-sentence
    reader (a folder beside its own, loaded the same way), or alone. ``max_tokens`` and ``cpu_int8``: as
    ``BertClassifier.load``'s, for both."""
    own = BertClassifier.load(directory, device, max_tokens, cpu_int8)
    folder = read_meta(directory, DISPLAY_NAMES[BERT]).get(ONE_SENTENCE_READER)
    if not folder:
        return own
    try:
        reader = load_served(directory.parent / folder, device, max_tokens, cpu_int8)
    except Exception as error:
        raise ReaderUnavailable(directory.parent / folder, error) from error
    return OneSentenceRouter(own, reader)
