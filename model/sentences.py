"""Sentence splitting for IMDB reviews, with character spans.

``syntok`` does the real work (abbreviations, quotes, ellipses, "movie.The");
one extra rule splits a run of terminal punctuation glued to a capitalised
word after a digit or "!"/"?", as in "7/10.Great" or "ever!!!!Avoid", which
syntok leaves joined.
"""

import re
from dataclasses import dataclass

from syntok import segmenter

GLUED = re.compile(r"(?<=[0-9a-z)\"'][.!?])(?=[A-Z][a-z])|(?<=[!?])(?=[A-Z][a-z])")
ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "prof", "no", "vol"}
TERMINALS = ".!?"


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    text: str


def split_sentences(text: str) -> list[Span]:
    """The sentences of ``text`` in order; ``text[start:end] == text`` for each."""
    spans = []
    for paragraph in segmenter.analyze(text):
        for sentence in paragraph:
            tokens = [t for t in sentence if t.value]
            if not tokens:
                continue
            start, end = tokens[0].offset, tokens[-1].offset + len(tokens[-1].value)
            spans += _split_glued(text, start, end)
    return spans


def _split_glued(text: str, start: int, end: int) -> list[Span]:
    cuts = [start]
    for m in GLUED.finditer(text, start, end):
        if _word_before(text, cuts[-1], m.start()).lower() not in ABBREVIATIONS:
            cuts.append(m.start())
    cuts.append(end)
    return [Span(a, b, text[a:b]) for a, b in zip(cuts, cuts[1:]) if text[a:b].strip()]


def _word_before(text: str, start: int, end: int) -> str:
    """The word that ``text[start:end]`` ends with, before any terminals; "" if none."""
    word_end = end
    while word_end > start and text[word_end - 1] in TERMINALS:
        word_end -= 1
    word_start = word_end
    while word_start > start and (text[word_start - 1].isalnum() or text[word_start - 1] == "_"):
        word_start -= 1
    return text[word_start:word_end]
