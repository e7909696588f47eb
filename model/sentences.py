"""Sentence splitting for IMDB reviews, with character spans.

``syntok`` does the real work (abbreviations, quotes, ellipses, "movie.The");
one extra rule splits a run of terminal punctuation glued to a capitalised
word after a digit or "!"/"?", as in "7/10.Great" or "ever!!!!Avoid", which
syntok leaves joined; others end a sentence before a lower-case word, as in
"bad. i hated it", "bad . i" or "bad.i", which syntok, splitting only before a
capital, leaves joined too (docs/studies/lower-case-sentences.md measures them).

syntok takes some microseconds a token, more at terminals, and after each
opening bracket it scans up to 50 tokens ahead for the closing one, so a text
of 20,000 characters built for it can take it seconds. A text therefore has a
budget of syntok's work, paid token by token, which every review of the
IMDB archive fits; the paragraph that would overrun it and the rest of
the text are split by a plain rule instead, in one linear pass.
"""

__all__ = ["sentence_runs", "sentence_spans", "split_sentences"]

import random
import re
from collections.abc import Iterator
from itertools import groupby, pairwise
from typing import NamedTuple

from syntok import segmenter
from syntok._segmentation_states import State  # syntok's terminals and brackets
from syntok.tokenizer import Token, Tokenizer

GLUED = re.compile(r"(?=[A-Z][a-z])(?:(?<=[0-9a-z)\"'][.!?])|(?<=[!?]))")
ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "prof", "no", "vol"}
TERMINALS = ".!?"
# A sentence's end that syntok leaves before a lower-case word: a full stop alone, or a run of "!"
# and "?" (full stops may follow), glued to its word or spaced from it ("bad . i"), closing
# quotes after a full stop (not after "!" or "?": '"go home!" and left' goes on, as does
# "(really?) one"), then white space, any opening quotes or brackets and a letter. Never an
# ellipsis: "bad... and" goes on more often than it ends.
LOWER_CASE_END = re.compile(
    r"(?<![.!?\u2026])(?:\.(?![.!?\u2026])[\"'\u201d\u2019]*|[!?]+\.*(?![.!?\u2026]))"
    r"(?=\s+((?:[\"'\u201c\u2018]|[(\[]\s*)*)([^\W\d_]))"
)
# A word glued by its terminal to a lower-case word, "ends.the", unless either is part of a web
# address ("imdb.com", "www.site").
GLUED_LOWER = re.compile(r"(?<![\w./@:\-])([^\W\d_]{2,})[.!?](?=([^\W\d_]+(?:['\u2019][^\W\d_]+)?)(?![\w./@:\-]))")
# An ellipsis character before a capitalised word, which syntok leaves joined ("..." it cuts).
ELLIPSIS_END = re.compile(r"(?<=\u2026)\s+(?=[\"'(\[\u201c\u2018]*[A-Z])")
WEB_WORDS = {"www", "com", "org", "net", "edu", "gov", "html", "htm", "asp", "php"}
# Words that a full stop after does not end before a lower-case word ("no. 5" has none after it;
# "i said no. he left" ends; "etc. the" ends five times in six in the catalogue).
LOWER_CASE_ABBREVIATIONS = ABBREVIATIONS - {"no"} | {"esp", "et", "lt", "lbs", "approx", "cf"}
CLOSING = "\"')]\u201d\u2019"  # what a sentence's last word may end with before its terminal

TOKENIZER = Tokenizer(replace_not_contraction=False)  # as segmenter.analyze makes it
# segmenter.preprocess_with_offsets's paragraph break: its \s is Unicode's White_Space.
PARAGRAPH_BREAK = re.compile(r"\r?\n(?:[^\S\x1c-\x1f]*\r?\n)+")
# A chunk between syntok's white space (Unicode's and U+200B), and an ASCII word without a
# lower-to-upper case change, with punctuation around it, which syntok leaves whole.
CHUNK = re.compile(r"[^\t\n\v\f\r \x85\xa0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000]+")
PLAIN_WORD = re.compile(r"([!-/:-@\[-`{-~]*)([A-Z0-9]*[a-z0-9]*)([!-/:-@\[-`{-~]*)")

# syntok's work in units of what a plain word costs it (about 4 microseconds here); of the
# archive's 100,000 reviews, labelled or not, the one that costs most costs 4,404.
SYNTOK_BUDGET = 4_600
PARAGRAPH_COST = 3
SYNTOK_TOKENIZER_COST = 3  # a token that syntok's tokenizer makes rather than _tokens
SYNTOK_TOKENIZER_CHARS = 10  # characters it scans for one unit
TERMINAL_COST = 3  # more, for the decision syntok takes there
BRACKET_SCAN = 50  # tokens syntok scans after an opening bracket, if it finds no closing one

# The plain rule cuts at blank lines and at white space after terminals (after one closing
# quote or bracket, or after none but not after an abbreviation).
NOT_AFTER_ABBREVIATION = "".join(  # a look-behind has one width: one for each length
    rf"(?<!\b(?i:{'|'.join(words)})[.!?])"
    for _, words in groupby(sorted(ABBREVIATIONS, key=lambda word: (len(word), word)), key=len)
)
PLAIN_CUT = re.compile(
    r"(?=\s)(?:(?<=\S)[^\S\n]*\n[^\S\n]*\n\s*"
    rf"|(?<=[.!?]){NOT_AFTER_ABBREVIATION}\s+"
    r"|(?<=[.!?][\"'\u201d\u2019)\]])\s+)"
)


class Span(NamedTuple):
    """A sentence and where it is; a named tuple because a text can have thousands."""

    start: int
    end: int
    text: str


class OverBudget(Exception):
    """syntok's work on a text would exceed its budget."""


class SyntokBudget:
    """What syntok may still be given of one text."""

    def __init__(self) -> None:
        self.left = SYNTOK_BUDGET

    def metered(self, paragraph: str) -> Iterator[Token]:
        """The tokens of ``paragraph``, each paid for as syntok takes it; raises OverBudget."""
        # Each chunk is a token at least, and syntok's tokenizer makes those with non-ASCII characters.
        chunks = CHUNK.findall(paragraph)
        least = len(chunks) + (SYNTOK_TOKENIZER_COST - 1) * sum(not chunk.isascii() for chunk in chunks)
        if PARAGRAPH_COST + least > self.left:
            raise OverBudget
        self._spend(PARAGRAPH_COST)
        opened = []  # the numbers of the tokens that open brackets not closed yet
        for number, (token, cost) in enumerate(_tokens(paragraph)):
            if token.value in State.terminals:
                cost += TERMINAL_COST
            elif token.value in State.opening_brackets:
                opened.append(number)
                cost += BRACKET_SCAN
            elif token.value in State.closing_brackets and opened:
                cost -= max(0, BRACKET_SCAN - (number - opened.pop()))  # the scan stopped here
            self._spend(cost)
            yield token

    def _spend(self, cost: int) -> None:
        self.left -= cost
        if self.left < 0:
            raise OverBudget


def split_sentences(text: str) -> list[Span]:
    """The sentences of ``text`` in order; ``text[start:end] == text`` for each."""
    spans = []
    budget = SyntokBudget()
    for offset, paragraph in _paragraphs(text):
        try:
            sentences = list(_syntok_sentences(paragraph, budget))
        except OverBudget:
            return spans + _split_plainly(text, offset)
        for start, end in sentences:
            spans += _split_further(text, offset + start, offset + end)
    return spans


def sentence_spans(text: str) -> list[Span]:
    """The sentences of ``text``; the whole (stripped) text when the splitter finds none."""
    spans = split_sentences(text)
    if spans:
        return spans
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    return [Span(start, end, text[start:end])]


def _paragraphs(text: str) -> Iterator[tuple[int, str]]:
    """What segmenter.preprocess_with_offsets gives, one at a time."""
    start = 0
    for paragraph_break in PARAGRAPH_BREAK.finditer(text):
        yield start, text[start : paragraph_break.start()]
        start = paragraph_break.end()
    yield start, text[start:]


def _syntok_sentences(paragraph: str, budget: SyntokBudget) -> Iterator[tuple[int, int]]:
    for sentence in segmenter.segment(budget.metered(paragraph)):
        tokens = [t for t in sentence if t.value]
        if tokens:
            yield tokens[0].offset, tokens[-1].offset + len(tokens[-1].value)


def _tokens(paragraph: str) -> Iterator[tuple[Token, int]]:
    """The tokens ``TOKENIZER.tokenize(paragraph)`` gives, with what making each cost.

    Tokenizing each paragraph from offset 0 gives segmenter.analyze's tokens (less the
    offset) without its padding of each paragraph with as many spaces as precede it,
    which takes time quadratic in the paragraphs. Plain ASCII words are tokenized here,
    faster; syntok's tokenizer does the other chunks between white space.
    """
    end = 0
    for chunk in CHUNK.finditer(paragraph):
        spacing, offset = paragraph[end : chunk.start()], chunk.start()
        end = chunk.end()
        if plain := PLAIN_WORD.fullmatch(chunk[0]):
            for token in _plain_word_tokens(spacing, offset, *plain.groups()):
                yield token, 1
        else:
            scan_cost = len(chunk[0]) // SYNTOK_TOKENIZER_CHARS
            for i, token in enumerate(TOKENIZER.tokenize(chunk[0])):
                token = Token(token.spacing if i else spacing, token.value, offset + token.offset)
                yield token, SYNTOK_TOKENIZER_COST + (0 if i else scan_cost)
    if end < len(paragraph):
        yield Token(paragraph[end:], "", len(paragraph)), 1


def _plain_word_tokens(spacing: str, offset: int, before: str, word: str, after: str) -> Iterator[Token]:
    # As Tokenizer.tokenize: without a word, one token; else one a character around the
    # word, but "..." as one right after it.
    if not word:
        yield Token(spacing, before, offset)
        return
    for char in before:
        yield Token(spacing, char, offset)
        spacing, offset = "", offset + 1
    yield Token(spacing, word, offset)
    offset += len(word)
    if after.startswith("..."):
        yield Token("", "...", offset)
        after, offset = after[3:], offset + 3
    for char in after:
        yield Token("", char, offset)
        offset += 1


def _split_further(text: str, start: int, end: int) -> list[Span]:
    """The sentences of syntok's sentence ``text[start:end]``: cut where GLUED, ELLIPSIS_END or a
    lower-case sentence end ends one."""
    cuts = [(start, start)]  # where a sentence ends and the next begins
    for m in GLUED.finditer(text, start, end):
        if _word_before(text, cuts[-1][1], m.start()).lower() not in ABBREVIATIONS:
            cuts.append((m.start(), m.start()))
    cuts += [(m.start(), m.end()) for m in ELLIPSIS_END.finditer(text, start, end)]
    cuts = sorted({*cuts, *_lower_case_ends(text, start, end), (end, end)})
    return [Span(a, b, text[a:b]) for (_, a), (b, _) in pairwise(cuts) if text[a:b].strip()]


def _lower_case_ends(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Where a sentence ends and the next begins in ``text[start:end]`` at a LOWER_CASE_END or a
    GLUED_LOWER before a lower-case word, outside brackets that close in it, unless the word before
    is a single letter ("e.g.", "u.s.", initials) or an abbreviation."""
    ends = [  # (where a sentence ends, where the next begins, its first letter)
        (m.end(), m.start(1), m.start(2))
        for m in LOWER_CASE_END.finditer(text, start, end)
        if _ends_a_sentence(text, start, m.start())
    ]
    ends += [
        (m.start(2), m.start(2), m.start(2))
        for m in GLUED_LOWER.finditer(text, start, end)
        if m[1].lower() not in LOWER_CASE_ABBREVIATIONS | WEB_WORDS
        and m[2].lower() not in WEB_WORDS
        and (len(m[2]) > 1 or m[2] == "i")
    ]
    bracketed = _bracketed(text, start, end)
    inside = next(bracketed, None)
    for stop, begin, letter in sorted(ends):
        while inside and inside[1] < stop:
            inside = next(bracketed, None)
        if text[letter].islower() and not (inside and inside[0] < stop):
            yield stop, begin


def _ends_a_sentence(text: str, start: int, terminal: int) -> bool:
    """Whether the terminal at ``terminal`` ends a sentence that begins at ``start``, by the word before it."""
    word_end = terminal
    while word_end > start and text[word_end - 1].isspace():  # a spaced terminal
        word_end -= 1
    if word_end > start and text[word_end - 1] in CLOSING:
        return True
    word_start = word_end
    while word_start > start and (text[word_start - 1].isalnum() or text[word_start - 1] in "'\u2019"):
        word_start -= 1
    word = text[word_start:word_end]
    return bool(word) and not (len(word) == 1 and word.isalpha()) and word.lower() not in LOWER_CASE_ABBREVIATIONS


def _bracketed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The outermost pairs of brackets in ``text[start:end]`` that close there, as (opening, closing)
    offsets, in order."""
    opened: list[int] = []
    for m in re.finditer(r"[()\[\]]", text[start:end]):
        if m[0] in "([":
            opened.append(start + m.start())
        elif opened:
            opening = opened.pop()
            if not opened:
                yield opening, start + m.start()
    # brackets still open enclose nothing: syntok, too, gives up on them


def _word_before(text: str, start: int, end: int) -> str:
    """The word that ``text[start:end]`` ends with, before any terminals; "" if none."""
    word_end = end
    while word_end > start and text[word_end - 1] in TERMINALS:
        word_end -= 1
    word_start = word_end
    while word_start > start and (text[word_start - 1].isalnum() or text[word_start - 1] == "_"):
        word_start -= 1
    return text[word_start:word_end]


def _split_plainly(text: str, start: int) -> list[Span]:
    """The sentences of ``text[start:]`` by the plain rule."""
    end = len(text.rstrip())
    start = end - len(text[start:end].lstrip())
    spans = []
    for cut in PLAIN_CUT.finditer(text, start, end):
        spans.append(Span(start, cut.start(), text[start : cut.start()]))
        start = cut.end()
    if start < end:
        spans.append(Span(start, end, text[start:end]))
    return spans


def sentence_runs(count: int, runs: int, rng: random.Random, longest: int = 3) -> list[tuple[int, int]]:
    """``runs`` distinct ranges (start, stop) of 1 to ``longest`` consecutive sentences of a text
    of ``count`` sentences, at random places, each shorter than the text (fewer when the text has
    fewer such ranges; none when it has under two sentences)."""
    longest = min(longest, count - 1)
    possible = sum(count - length + 1 for length in range(1, longest + 1))
    chosen: dict[tuple[int, int], None] = {}
    while len(chosen) < min(runs, possible):
        length = rng.randint(1, longest)
        start = rng.randint(0, count - length)
        chosen[start, start + length] = None
    return list(chosen)
