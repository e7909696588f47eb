"""A user's file of reviews (CSV, TSV or JSON Lines), read as a stream.

STAND-IN for branch s53-reader's module of the same name, with its interface only (columns named or
found, yes/no labels or a rating rule, duplicates and empty texts skipped and counted), so that the
build's wiring (s53-wiring) runs until the reader lands; the lead keeps the reader's version.
"""

__all__ = ["FileReview", "ReadCounts", "ReviewsFile"]

import csv
import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from model.data import DataError
from model.names import NEGATIVE, POSITIVE

ROLES = ("text", "label", "item", "name")
COMMON_NAMES = {
    "text": ("text", "review", "content", "body"),
    "label": ("label", "recommended", "voted_up", "sentiment"),
    "item": ("item", "item_id", "app_id", "product_id", "airline_name"),
    "name": ("name", "item_name", "app_name", "product_name"),
}
WORDS = {
    **dict.fromkeys(("true", "1", "yes", "pos", "positive", "recommended"), POSITIVE),
    **dict.fromkeys(("false", "0", "no", "neg", "negative", "not recommended"), NEGATIVE),
}


@dataclass(frozen=True)
class FileReview:
    key: str  # "row N"
    text: str
    label: str | None
    rating: float | None
    item_id: str
    item_name: str | None


@dataclass
class ReadCounts:
    read: int = 0
    used: int = 0
    skipped: Counter = field(default_factory=Counter)
    repaired: int = 0
    labelled: Counter = field(default_factory=Counter)


class ReviewsFile:
    def __init__(self, path: Path, columns: str | None = None, label_rule: str | None = None, max_chars: int = 100_000):
        self.path, self.label_rule, self.max_chars = Path(path), label_rule, max_chars
        if not self.path.is_file():
            raise DataError(f"{self.path}: no such file (expected a CSV, TSV or JSON Lines file of reviews).")
        given = dict(part.split("=", 1) for part in columns.split(",")) if columns else {}
        header = next(self._rows(), {}).keys()
        self.columns_chosen = {
            role: given.get(role) or next((c for c in COMMON_NAMES[role] if c in header), None) for role in ROLES
        }
        if self.columns_chosen["text"] not in header:
            raise DataError(f"{self.path}: no text column (give --columns text=NAME).")
        self.counts = ReadCounts()

    def describe(self) -> str:
        chosen = ", ".join(f"{role}={column}" for role, column in self.columns_chosen.items() if column)
        return f"{self.path.name}: {chosen}" + (f", label rule {self.label_rule}" if self.label_rule else "")

    def _rows(self) -> Iterator[dict]:
        with open(self.path, encoding="utf-8-sig", newline="") as f:
            if self.path.suffix in (".jsonl", ".json"):
                yield from (json.loads(line) for line in f if line.strip())
            else:
                yield from csv.DictReader(f, delimiter="\t" if self.path.suffix == ".tsv" else ",")

    def _label(self, value) -> tuple[str | None, float | None]:
        value = str(value if value is not None else "").strip().lower()
        if not value:
            return None, None
        if self.label_rule:
            rule = dict(part.split("=", 1) for part in self.label_rule.split(","))
            rating = float(value)
            for label in (POSITIVE, NEGATIVE):
                low, high = map(float, rule[label].split("-"))
                if low <= rating <= high:
                    return label, rating
            return None, rating
        return WORDS[value], None

    def __iter__(self) -> Iterator[FileReview]:
        columns, counts, seen = self.columns_chosen, ReadCounts(), set()
        for number, row in enumerate(self._rows(), start=1):
            counts.read += 1
            text = str(row.get(columns["text"]) or "").strip()
            digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
            reason = "empty text" if not text else "duplicate" if digest in seen else None
            reason = reason or ("text longer than the limit" if len(text) > self.max_chars else None)
            if reason:
                counts.skipped[reason] += 1
                continue
            seen.add(digest)
            label, rating = self._label(row.get(columns["label"])) if columns["label"] else (None, None)
            counts.used += 1
            counts.labelled[label] += label is not None
            item = str(row.get(columns["item"]) or "") if columns["item"] else ""
            name = str(row.get(columns["name"]) or "") or None if columns["name"] else None
            yield FileReview(f"row {number}", text, label, rating, item, name)
        self.counts = counts
