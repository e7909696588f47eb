"""A review's word shares in the database (``app.db.WordShare``): read by sentence, and stored once computed.

BERT's word shares (``model.word_shares``) are computed when a review is first asked for them, not in the
build (docs/studies/word-shares.md); the server stores them here, and the build may too. A review's words
are written in one transaction, all or none, and only where none of that model's are stored yet: two first
views of one review store them once.
"""

from collections import defaultdict
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import Review, Sentence, WordShare, session_scope
from app.results import word_share_rows
from model.names import CATALOGUE
from model.sentences import Span

if TYPE_CHECKING:  # the module imports torch and Captum, which reading the rows does not need
    from model.word_shares import SentenceWords


def review_sentences(
    session: Session, review_id: int, split: str | None = CATALOGUE
) -> tuple[str, list[int], list[Span]] | None:
    """A review's text, and its stored sentences' ids and spans in order (those its words belong to); None when
    there is no review ``review_id`` in ``split`` (the catalogue; None: any split, as the build's own samples)."""
    found = select(Review.text).where(Review.id == review_id)
    text = session.scalar(found if split is None else found.where(Review.split == split))
    if text is None:
        return None
    rows = session.execute(
        select(Sentence.id, Sentence.start, Sentence.end, Sentence.text)
        .where(Sentence.review_id == review_id)
        .order_by(Sentence.position)
    ).all()
    return text, [row.id for row in rows], [Span(row.start, row.end, row.text) for row in rows]


def words_by_sentence(session: Session, review_ids: list[int]) -> dict[tuple[int, int], dict[str, list[tuple]]]:
    """The stored words of the reviews ``review_ids``, by (review id, sentence position), then by model: each
    word's (start, end, share), in order (``with_words`` gives them their text)."""
    rows = session.execute(
        select(Sentence.review_id, Sentence.position, WordShare.model, WordShare.start, WordShare.end, WordShare.share)
        .join(WordShare, WordShare.sentence_id == Sentence.id)
        .where(Sentence.review_id.in_(review_ids))
        .order_by(Sentence.review_id, Sentence.position, WordShare.model, WordShare.position)
    )
    found: dict[tuple[int, int], dict[str, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    for review_id, position, model, start, end, share in rows:
        found[review_id, position][model].append((start, end, share))
    return found


def with_words(review_id: int, sentences: list[dict], words: dict[tuple[int, int], dict[str, list[tuple]]]) -> list[dict]:
    """``sentences`` (of ``review_id``, each with its ``position``, ``start`` and ``text``) each with its stored
    ``words`` by model (``words_by_sentence``: ``text``, ``start``, ``end``, ``share``), null where none are stored."""
    return [{**sentence, "words": sentence_words(sentence, words.get((review_id, sentence["position"])))} for sentence in sentences]


def sentence_words(sentence: dict, stored: dict[str, list[tuple]] | None) -> dict[str, list[dict]] | None:
    if not stored:
        return None
    at = sentence["start"]
    return {
        model: [{"text": sentence["text"][start - at : end - at], "start": start, "end": end, "share": share} for start, end, share in rows]
        for model, rows in stored.items()
    }


def has_words(session: Session, sentence_ids: list[int], model: str) -> bool:
    """Whether ``model``'s words of these sentences (a review's) are stored."""
    stored = select(WordShare.sentence_id).where(WordShare.sentence_id.in_(sentence_ids), WordShare.model == model)
    return session.scalar(stored.limit(1)) is not None


def store_words(engine: Engine, lock: AbstractContextManager, sentence_ids: list[int], model: str, shares: list["SentenceWords"]) -> bool:
    """Store ``model``'s words of a review's sentences (``sentence_ids``, each one's ``SentenceWords`` in the
    same order) in one transaction, unless some are stored already (another first view, or another process,
    stored them first): True when these were stored. ``lock``: the server's write lock (the build, the only writer, needs none)."""
    if len(sentence_ids) != len(shares):
        raise ValueError(f"{len(shares)} sentences of words for a review of {len(sentence_ids)} stored sentences")
    try:
        with lock, session_scope(engine) as session:
            if has_words(session, sentence_ids, model):
                return False
            session.add_all(word_share_rows(model, sentence_ids, shares))
    except IntegrityError:  # another process stored them between the check and the commit
        return False
    return True
