"""Every catalogue review with its predictions, explanations and their trust figures, for export.

One source for ``textflix export`` and ``GET /api/export.jsonl``. The catalogue (IMDB
test reviews and user reviews) is exported; training and evaluation reviews are not,
since they have no sentences or explanations. Reviews are read in id order,
``CHUNK_SIZE`` at a time: each chunk starts after the last id of the one before (keyset
pagination) and its predictions, sentences (with BERT's word shares), words and explanations come with one
``IN`` query each, in a session of its own, so memory stays the same whatever the
number of reviews and no read transaction stays open for the whole export.

A row is a JSON object (``app.web.schemas.ExportRow``, documented in docs/api.md); CSV
flattens it into one line per review (``csv_columns``).
"""

import csv
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import TextIO

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.db import Explanation, Movie, Review
from app.web.queries.rows import explanation_record, review_rows, sentences_by_review, words_by_review
from app.word_rows import with_words, words_by_sentence
from model.names import CATALOGUE, MODELS, SENTENCE, WORD, WORD_LEVEL_MODEL
from model.quality import QUALITY_FIELDS

CHUNK_SIZE = 500
# A spreadsheet reads a cell that begins with one of these as a formula (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A cell breaks where a spreadsheet that splits on ``,``, ``;`` or tab, or by lines, ignoring the quotes,
# would begin a new one; a formula start there, after any spaces and quotes, begins a formula.
FORMULA_AFTER_BREAK = re.compile(r"([,;\t\r\n][ \"']*)(?=[=+\-@])")
REVIEW_FIELDS = ("id", "title_id", "title", "source", "gold", "user_label", "rating", "text")
FIT_FIELDS = ("samples", "intercept", "score")


# --- rows ------------------------------------------------------------------------------


def catalogue_ids(session: Session, after: int, limit: int) -> list[int]:
    """The ids of the next ``limit`` catalogue reviews after id ``after``."""
    stmt = select(Review.id).where(Review.split == CATALOGUE, Review.id > after).order_by(Review.id).limit(limit)
    return list(session.scalars(stmt))


def export_chunks(engine: Engine, chunk_size: int = CHUNK_SIZE) -> Iterator[list[dict]]:
    """The export rows of every catalogue review, in id order, ``chunk_size`` reviews at a time."""
    after = 0
    while True:
        with Session(engine) as session:
            ids = catalogue_ids(session, after, chunk_size)
            if not ids:
                return
            rows = chunk_rows(session, ids)
        yield rows
        after = ids[-1]


def export_rows(engine: Engine, chunk_size: int = CHUNK_SIZE) -> Iterator[dict]:
    for rows in export_chunks(engine, chunk_size):
        yield from rows


def chunk_rows(session: Session, ids: list[int]) -> list[dict]:
    """The export rows of the reviews ``ids``: six queries, whatever their number."""
    reviews = review_rows(session, "reviews", {"ids": ids}, text=True)
    titles = dict(
        session.execute(
            select(Movie.title_id, Movie.title).where(Movie.title_id.in_({r["title_id"] for r in reviews}))
        ).all()
    )
    sentences = sentences_by_review(session, "reviews", {"ids": ids})
    shares = words_by_sentence(session, ids)
    words = words_by_review(session, "reviews", {"ids": ids})
    explanations: dict[int, dict] = defaultdict(dict)
    word_fits: dict[int, dict] = {}
    for e in session.scalars(select(Explanation).where(Explanation.review_id.in_(ids))):
        record = explanation_record(e)
        if e.level == SENTENCE:
            explanations[e.review_id][e.model] = {k: v for k, v in record.items() if k not in ("model", "level")}
        elif e.level == WORD and e.model == WORD_LEVEL_MODEL:
            word_fits[e.review_id] = {name: record[name] for name in FIT_FIELDS}
    rows = []
    for review in reviews:
        review_id = review["id"]
        review["title"] = titles.get(review["title_id"])
        rows.append(
            {
                **{name: review[name] for name in REVIEW_FIELDS},
                "predictions": review["predictions"],
                "sentences": with_words(review_id, sentences.get(review_id, []), shares),
                "words": words.get(review_id, []),
                "explanations": {m: explanations[review_id][m] for m in MODELS if m in explanations[review_id]},
                "word_explanation": word_fits.get(review_id),
            }
        )
    return rows


# --- formats ---------------------------------------------------------------------------


def jsonl_text(rows: list[dict]) -> str:
    """Export rows as JSON Lines: one JSON object per line (newlines in texts are escaped)."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def jsonl_chunks(engine: Engine, chunk_size: int = CHUNK_SIZE) -> Iterator[str]:
    """The export as JSON Lines, one string per chunk of reviews."""
    for rows in export_chunks(engine, chunk_size):
        yield jsonl_text(rows)


def csv_columns() -> list[str]:
    """The CSV header: the review, then per model its prediction and explanation, then the
    word-level fit; sentences and words are JSON strings."""
    per_model = ["label", "p_positive", *FIT_FIELDS, *QUALITY_FIELDS, "weak", "reasons", "reading"]
    return [
        *REVIEW_FIELDS,
        *(f"{model}_{name}" for model in MODELS for name in per_model),
        *(f"word_{name}" for name in FIT_FIELDS),
        "sentences",
        "words",
    ]


def spreadsheet_safe(value):
    """A text cell that a spreadsheet would run as a formula, quoted with a leading ``'`` (OWASP's rule;
    defusedcsv leaves tab and carriage return out), and so is each formula start after a separator in
    it (``Great film;=1+1`` is two cells, the second a formula, where the separator is ``;``); numbers and
    other cells pass unchanged. ``write_csv`` also quotes every cell."""
    if not isinstance(value, str):
        return value
    value = FORMULA_AFTER_BREAK.sub(r"\1'", value)
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def csv_row(row: dict) -> dict:
    """One export row flattened into the ``csv_columns``, every text cell ``spreadsheet_safe``."""
    flat = {name: row[name] for name in REVIEW_FIELDS}
    for model in MODELS:
        explanation = row["explanations"].get(model, {})
        parts = {
            **row["predictions"].get(model, {}),
            **{name: explanation.get(name) for name in (*FIT_FIELDS, "weak", "reading")},
            **(explanation.get("quality") or {}),
            "reasons": "; ".join(explanation.get("reasons", [])),
        }
        flat.update({f"{model}_{name}": value for name, value in parts.items()})
    flat.update({f"word_{name}": value for name, value in (row["word_explanation"] or {}).items()})
    flat["sentences"] = json.dumps(row["sentences"], ensure_ascii=False)
    flat["words"] = json.dumps(row["words"], ensure_ascii=False)
    return {name: spreadsheet_safe(value) for name, value in flat.items()}


def write_jsonl(engine: Engine, out: TextIO) -> int:
    """Write the export as JSON Lines to ``out``; returns the number of reviews."""
    count = 0
    for rows in export_chunks(engine):
        out.write(jsonl_text(rows))
        count += len(rows)
    return count


def write_csv(engine: Engine, out: TextIO) -> int:
    """Write the export as CSV to ``out``; returns the number of reviews."""
    writer = csv.DictWriter(out, csv_columns(), quoting=csv.QUOTE_ALL)  # OWASP: every cell in double quotes
    writer.writeheader()
    count = 0
    for row in export_rows(engine):
        writer.writerow(csv_row(row))
        count += 1
    return count


WRITERS = {"jsonl": write_jsonl, "csv": write_csv}
