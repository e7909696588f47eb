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
        word = re.search(r"(\w+)[.!?]*$", text[cuts[-1] : m.start()])
        if word and word.group(1).lower() in ABBREVIATIONS:
            continue
        cuts.append(m.start())
    cuts.append(end)
    return [Span(a, b, text[a:b]) for a, b in zip(cuts, cuts[1:]) if text[a:b].strip()]
