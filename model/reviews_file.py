"""A file of reviews a user brings: CSV, TSV or JSON Lines, streamed row by row.

Its columns are named (``text=review,label=voted_up,...``) or found from common names; its labels are
read as users have them (yes/no values, or ratings mapped by a rule the user states); its texts are
repaired (``ftfy``) and cleaned as the archive's are. Every row read is used or skipped for a reason
that ``ReadCounts`` counts; what cannot be read without guessing is a ``DataError`` naming the file,
the row and the problem.
"""

__all__ = ["FileReview", "ReadCounts", "ReviewsFile"]

import codecs
import csv
import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import ftfy
from ftfy.fixes import fix_line_breaks

from model.config import RULE_EXAMPLE, LabelRule
from model.data import DataError, clean_text
from model.names import LABELS, NEGATIVE, POSITIVE

TEXT, LABEL, ITEM, NAME = "text", "label", "item", "name"
ROLES = (TEXT, LABEL, ITEM, NAME)
# Common column names, most specific first; matched without regard to case.
KNOWN_COLUMNS = {
    TEXT: ("review", "review_text", "reviewtext", "review_body", "text", "content", "body", "comment"),
    LABEL: ("label", "sentiment", "voted_up", "recommended", "recommend", "is_recommended", "polarity",
            "is_positive", "liked"),
    ITEM: ("item_id", "app_id", "product_id", "parent_asin", "asin", "business_id", "hotel_id", "hotel",
           "hotel_name", "airline_name", "airline", "game_id", "movie_id", "item"),
    # Not "title": in review files (Amazon's, Skytrax's) it is the review's headline, not the item's name.
    NAME: ("app_name", "product_name", "item_name", "game_name", "product_title", "name"),
}  # fmt: skip
RATING_COLUMNS = ("rating", "overall_rating", "stars", "star_rating", "score", "overall")
ALL_ITEMS = "all"  # the one item of a file without an item column

# Label cells as users write them, compared in lower case with runs of white space made one space.
YES_NO = {
    **dict.fromkeys(("true", "1", "1.0", "yes", "y", "pos", "positive", "recommended", "thumbs up", "up"), POSITIVE),
    **dict.fromkeys(
        ("false", "0", "0.0", "no", "n", "neg", "negative", "not recommended", "thumbs down", "down"), NEGATIVE
    ),
}
YES_NO_SPELLINGS = (
    "true/false, 1/0, yes/no, y/n, pos/neg, positive/negative, recommended/not recommended, thumbs up/down"
)

# Skip reasons (ReadCounts.skipped).
BROKEN_ENCODING, EMPTY_TEXT, TOO_LONG, DUPLICATE, EMPTY_ITEM = (
    "broken encoding", "empty text", "too long", "duplicate", "empty item"
)  # fmt: skip

MAX_CHARS = 20_000  # the longest text the API takes (app/settings.py max_text_chars)
# The csv module's own default field limit, also the longest line read at once: a field or a line over
# it (several megabytes of one review, or an unclosed quote running to the end) refuses the file at
# that row instead of reading it into memory.
FIELD_LIMIT = 131_072
SAMPLE_BYTES = 1 << 16  # what the format is told from
BROKEN_SHARE = 0.01  # more rows than this with bytes that are not UTF-8: the file is in another encoding
PEEK_ROWS = 200  # rows read when the file is opened: a header-only file and bad labels refused at once
TABLE_ROWS, TABLE_VALUES = 20, 10_000  # a values table shows the first; it counts at most this many
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
# The repairs of ftfy, not its restyling: curly quotes, full-width letters and ligatures stay as written,
# and line breaks are made "\n" before it so that a file's CRLF does not count as a repair.
REPAIRS = ftfy.TextFixerConfig(
    uncurl_quotes=False, fix_character_width=False, fix_latin_ligatures=False, fix_line_breaks=False, explain=False
)


@dataclass(frozen=True)
class FileReview:
    key: str  # f"row {n}": n the 1-based data row number (blank lines not counted)
    text: str  # repaired (ftfy) and cleaned (model.data.clean_text)
    label: str | None  # POSITIVE, NEGATIVE, or None for a row without a label
    rating: float | None  # the rating cell when labels come from a rule, else None
    item_id: str  # ALL_ITEMS in a file without an item column
    item_name: str | None


@dataclass
class ReadCounts:
    """One complete pass: ``read == used + sum(skipped.values())``."""

    read: int = 0
    used: int = 0
    skipped: Counter = field(default_factory=Counter)  # rows by reason
    repaired: int = 0  # used rows whose text ftfy changed
    labels: Counter = field(default_factory=Counter)  # used rows by label
    unlabeled: int = 0  # used rows without a label: an empty label cell, or a rating between the rule's ranges
    between: int = 0  # of those, the rows whose rating fell between the rule's ranges

    def per_label(self) -> dict[str, int]:
        """Used rows of each label, zeros included (what the splits check their class counts on)."""
        return {label: self.labels[label] for label in LABELS}

    def __str__(self) -> str:
        labelled = ", ".join(f"{n:,} {label}" for label, n in self.per_label().items())
        skipped = ", ".join(f"{n:,} {reason}" for reason, n in self.skipped.most_common()) or "none"
        between = f" ({self.between:,} rated between the rule's ranges)" if self.between else ""
        return (
            f"{self.read:,} rows read, {self.used:,} used ({labelled}, {self.unlabeled:,} unlabeled{between}; "
            f"{self.repaired:,} repaired), skipped: {skipped}"
        )


class _Refused(Exception):
    """A label cell this reader will not guess at; the message says why."""


class _LongLine(Exception):
    """A line over FIELD_LIMIT characters."""


class ReviewsFile:
    """The reviews of one file, streamed: each ``iter`` re-reads the file and, once it has read it all,
    leaves its ``counts``."""

    def __init__(
        self, path: Path, columns: str | None = None, label_rule: str | None = None, max_chars: int = MAX_CHARS
    ):
        if not 1 <= max_chars <= FIELD_LIMIT:
            raise ValueError(f"max_chars must be between 1 and {FIELD_LIMIT:,}, not {max_chars}.")
        self.path = Path(path)
        self.max_chars = max_chars
        self.label_rule = LabelRule.parse(label_rule) if label_rule else None
        self.format, self._delimiter = self._detect_format()
        self.header = self._read_header()
        self.columns_chosen = choose_columns(self.path, self.header, columns, ratings_first=self.label_rule is not None)
        self._counts: ReadCounts | None = None
        self._spellings = self._peek()

    @property
    def counts(self) -> ReadCounts:
        """The counts of the last complete pass."""
        if self._counts is None:
            raise RuntimeError(f"{self.path}: no complete pass over the file yet.")
        return self._counts

    def describe(self) -> str:
        """One line: the format and the columns chosen, e.g. "steam_reviews.csv: CSV, text=review,
        label=voted_up (True/False), item=app_id, name=app_name"."""
        chosen = self.columns_chosen
        parts = [f"{self.path.name}: {self.format}", f"text={chosen[TEXT]}"]
        if LABEL not in chosen:
            parts.append("no label column (every row unlabeled)")
        elif self.label_rule:
            parts.append(f"label={chosen[LABEL]} (ratings: {self.label_rule})")
        else:
            spellings = "/".join(self._spellings.get(label, "…") for label in (POSITIVE, NEGATIVE))
            parts.append(f"label={chosen[LABEL]} ({spellings})")
        parts.append(f"item={chosen[ITEM]}" if ITEM in chosen else f'no item column (one item "{ALL_ITEMS}")')
        parts += [f"name={chosen[NAME]}"] if NAME in chosen else []
        return ", ".join(parts)

    def __iter__(self) -> Iterator[FileReview]:
        counts, seen, first_broken = ReadCounts(), set(), None
        for number, line, cells in self._rows():
            counts.read += 1
            if not all(map(_decodes, cells.values())):
                counts.skipped[BROKEN_ENCODING] += 1
                first_broken = first_broken or number
                continue
            label, rating = self._label(cells, number, line)
            text, repaired = _repaired(cells[TEXT])
            if reason := self._skip_reason(text, cells, seen):
                counts.skipped[reason] += 1
                continue
            counts.used += 1
            counts.repaired += repaired
            if label:
                counts.labels[label] += 1
            else:
                counts.unlabeled += 1
                counts.between += rating is not None
            item_id = cells[ITEM].strip() if ITEM in cells else ALL_ITEMS
            yield FileReview(f"row {number}", text, label, rating, item_id, cells.get(NAME, "").strip() or None)
        self._check_encoding(counts.skipped[BROKEN_ENCODING], counts.read, first_broken)
        self._counts = counts

    def _check_encoding(self, broken: int, read: int, first_broken: int | None) -> None:
        """A few rows with bytes that are not UTF-8 are skipped; more than BROKEN_SHARE of them, and the
        file is in another encoding."""
        if broken > BROKEN_SHARE * read:
            raise DataError(
                f"{self.path}: {broken:,} of {read:,} rows hold bytes that are not UTF-8 (the first: row "
                f"{first_broken}): the file is in another encoding; save it as UTF-8 (e.g. iconv -f cp1252 -t utf-8)."
            )

    def _skip_reason(self, text: str, cells: dict[str, str], seen: set[bytes]) -> str | None:
        if not text:
            return EMPTY_TEXT
        if len(text) > self.max_chars:
            return TOO_LONG
        if ITEM in cells and not cells[ITEM].strip():
            return EMPTY_ITEM
        digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
        if digest in seen:
            return DUPLICATE
        seen.add(digest)
        return None

    # -- labels ------------------------------------------------------------------------------------

    def _label(self, cells: dict[str, str], number: int, line: int) -> tuple[str | None, float | None]:
        """The row's label and rating; a cell that is neither refuses the file, with the column's values."""
        try:
            return self._label_of(cells.get(LABEL, ""))
        except _Refused as refused:
            column = self.columns_chosen[LABEL]
            raise DataError(
                f'{self.path}: row {number} (line {line}): the label column "{column}" holds '
                f"{_shown(cells[LABEL].strip())!r}, {refused}. The column's values:\n{self._values_table()}"
            ) from None

    def _label_of(self, cell: str) -> tuple[str | None, float | None]:
        value = cell.strip()
        if not value:
            return None, None
        if self.label_rule is None:
            if (label := YES_NO.get(" ".join(value.lower().split()))) is not None:
                return label, None
            if _number(value) is not None:
                raise _Refused(
                    f'a rating rather than a yes/no label: state a label rule such as "{RULE_EXAMPLE}" (ratings '
                    "between its two ranges are read as unlabeled), or name a yes/no column as label="
                )
            raise _Refused(f"not a label this reader knows ({YES_NO_SPELLINGS}): name another column as label=")
        rating = _number(value)
        if rating is None:
            raise _Refused(f"not a number, which the label rule {self.label_rule} needs")
        if not self.label_rule.within_scale(rating):
            raise _Refused(f"outside the label rule's scale {self.label_rule}: state the scale the column is on")
        return self.label_rule.label(rating), rating

    def _values_table(self) -> str:
        """The label column's values over the whole file with their row counts, the commonest first
        (counting at most TABLE_VALUES distinct values, so that a free-text column cannot fill memory)."""
        values, uncounted = Counter(), 0
        for _, _, cells in self._rows():
            value = _shown(cells[LABEL].strip()) or "(empty)"
            if value in values or len(values) < TABLE_VALUES:
                values[value] += 1
            else:
                uncounted += 1
        shown = values.most_common(TABLE_ROWS)
        width = max(len("value"), *(len(value) for value, _ in shown))
        lines = [f"  {'value':<{width}}  rows"] + [f"  {value:<{width}}  {n:,}" for value, n in shown]
        if len(values) > TABLE_ROWS or uncounted:
            rest = sum(n for _, n in values.most_common()[TABLE_ROWS:]) + uncounted
            more = f"{len(values) - TABLE_ROWS:,}" if not uncounted else f"over {TABLE_VALUES - TABLE_ROWS:,}"
            lines.append(f"  ... {more} more values ({rest:,} rows)")
        return "\n".join(lines)

    def _peek(self) -> dict[str, str]:
        """The first spelling of each label in the first rows (for ``describe``); refuses a file with no
        rows, or whose first rows are not UTF-8 or hold labels it cannot read, before anything is read for good."""
        spellings, rows, broken, first_broken = {}, 0, 0, None
        for rows, (number, line, cells) in enumerate(self._rows(), 1):
            if not all(map(_decodes, cells.values())):
                broken += 1
                first_broken = first_broken or number
            elif LABEL in cells and (label := self._label(cells, number, line)[0]):
                spellings.setdefault(label, cells[LABEL].strip())
            if rows == PEEK_ROWS:
                break
        if not rows:
            raise DataError(f"{self.path}: a header and no rows.")
        self._check_encoding(broken, rows, first_broken)
        return spellings

    # -- the file ----------------------------------------------------------------------------------

    def _detect_format(self) -> tuple[str, str | None]:
        """("CSV" / "TSV" / "CSV with semicolons", delimiter) or ("JSON Lines", None), told from the
        start of the file, which must be text."""
        try:
            with open(self.path, "rb") as handle:
                sample = handle.read(SAMPLE_BYTES)
        except FileNotFoundError:
            raise DataError(f"{self.path}: no such file.") from None
        except OSError as error:
            raise DataError(f"{self.path}: cannot be read ({error.strerror}).") from None
        if sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            raise DataError(f"{self.path}: UTF-16 text; save it as UTF-8.")
        if sample.startswith((b"\x1f\x8b", b"PK\x03\x04", b"BZh", b"\xfd7zXZ")):
            raise DataError(f"{self.path}: a compressed file; decompress it first.")
        if (nul := sample.find(b"\0")) >= 0:
            raise DataError(f"{self.path}: a binary file, not text (a NUL byte at byte {nul:,}).")
        text = codecs.getincrementaldecoder("utf-8-sig")("surrogateescape").decode(sample, final=False)
        if not text.strip():
            raise DataError(f"{self.path}: an empty file.")
        first = text.lstrip()[0]
        if first == "[":
            raise DataError(f"{self.path}: a JSON array; give JSON Lines instead (one object a line).")
        if self.path.suffix.lower() in JSON_LINES_SUFFIXES or first == "{":
            return "JSON Lines", None
        delimiter = _sniff_delimiter(next(line for line in text.splitlines() if line.strip()), self.path)
        return {",": "CSV", "\t": "TSV", ";": "CSV with semicolons"}[delimiter], delimiter

    def _read_header(self) -> list[str]:
        for _, _, record in self._records():
            if self._delimiter is None:
                return list(record)
            return [name.strip() for name in record]
        raise DataError(f"{self.path}: an empty file.")

    def _open(self):
        # Undecodable bytes become lone surrogates: a row holding them is skipped, not the file.
        return open(self.path, encoding="utf-8-sig", errors="surrogateescape", newline="")

    def _records(self) -> Iterator[tuple[int, int, list[str] | dict]]:
        """(row number, line number, fields or object) of every record, the CSV header as row 0."""
        with self._open() as handle:
            yield from self._csv_records(handle) if self._delimiter else self._json_records(handle)

    def _csv_records(self, handle) -> Iterator[tuple[int, int, list[str]]]:
        reader = csv.reader(_bounded_lines(handle), delimiter=self._delimiter)
        number, line = 0, 1
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except _LongLine:
                raise self._too_long(number, line, "a line") from None
            except csv.Error as error:
                if "field limit" in str(error):
                    raise self._too_long(number, line, "a field") from None
                raise DataError(f"{self.path}: {_where(number, line)}: not readable as CSV ({error}).") from None
            if fields:
                yield number, line, fields
                number += 1
            line = reader.line_num + 1

    def _json_records(self, handle) -> Iterator[tuple[int, int, dict]]:
        number, line = 1, 0
        lines = _bounded_lines(handle)
        while True:
            try:
                text = next(lines, None)
            except _LongLine:
                raise self._too_long(number, line + 1, "a line") from None
            if text is None:
                return
            line += 1
            if not text.strip():
                continue
            if "\0" in text:
                raise DataError(f"{self.path}: {_where(number, line)}: a NUL byte; not a text file.")
            try:
                record = json.loads(text)
            except json.JSONDecodeError as error:
                raise DataError(f"{self.path}: {_where(number, line)}: not JSON ({error}).") from None
            if not isinstance(record, dict):
                raise DataError(f"{self.path}: {_where(number, line)}: a JSON {type(record).__name__}, not an object.")
            yield number, line, record
            number += 1

    def _too_long(self, number: int, line: int, what: str) -> DataError:
        return DataError(
            f"{self.path}: {_where(number, line)}: {what} over {FIELD_LIMIT:,} characters, not a review "
            "(a quote left open, or not a file of reviews); the row is refused."
        )

    def _rows(self) -> Iterator[tuple[int, int, dict[str, str]]]:
        """(row number, line number, the chosen columns' cells by role) of every data row."""
        roles = self.columns_chosen.items()
        if self._delimiter is None:
            for number, line, record in self._records():
                cells = {role: _json_cell(self.path, number, line, record.get(column)) for role, column in roles}
                yield number, line, cells
            return
        index = {role: self.header.index(column) for role, column in roles}
        for number, line, fields in self._records():
            if number == 0:
                continue
            if len(fields) != len(self.header):
                raise DataError(
                    f"{self.path}: {_where(number, line)}: {len(fields)} fields where the header has "
                    f"{len(self.header)} (a delimiter in an unquoted field?)."
                )
            cells = {role: fields[i] for role, i in index.items()}
            if any("\0" in cell for cell in cells.values()):
                raise DataError(f"{self.path}: {_where(number, line)}: a NUL byte; not a text file.")
            yield number, line, cells


def choose_columns(path: Path, header: list[str], columns: str | None, ratings_first: bool = False) -> dict[str, str]:
    """Role -> column: the roles named in ``columns`` ("text=review,label=voted_up"; "label=" for none),
    the others found by their common names (a label among ratings' names first when ``ratings_first``).
    Only the text is required."""
    named = parse_columns(columns) if columns else {}
    by_name = {}
    for name in header:
        by_name.setdefault(name.strip().lower(), name)
    chosen = {}
    for role in ROLES:
        if role in named:
            if named[role] and named[role] not in header:
                raise DataError(
                    f'{path}: no column "{named[role]}" (named for {role}); the file has: {", ".join(header)}.'
                )
            column = named[role]
        else:
            known = KNOWN_COLUMNS[role]
            if role == LABEL:
                known = RATING_COLUMNS + known if ratings_first else known + RATING_COLUMNS
            column = next((by_name[name] for name in known if name in by_name), None)
        if column:
            chosen[role] = column
    if TEXT not in chosen:
        raise DataError(
            f"{path}: no text column among {', '.join(header)}; name it, e.g. text={header[0]} "
            f"(the names found on their own: {', '.join(KNOWN_COLUMNS[TEXT])})."
        )
    if NAME in chosen and ITEM not in chosen:
        if NAME in named:
            raise DataError(f"{path}: name={chosen[NAME]} needs an item column too (item=COLUMN).")
        del chosen[NAME]
    for column, n in Counter(chosen.values()).items():
        if n > 1:
            raise DataError(f'{path}: column "{column}" is chosen for more than one role ({_spelled(chosen)}).')
        if header.count(column) > 1:
            raise DataError(f'{path}: the header has {header.count(column)} columns named "{column}".')
    return chosen


def parse_columns(columns: str) -> dict[str, str]:
    """"text=review,label=voted_up" -> {"text": "review", "label": "voted_up"}; a role left empty
    ("label=") is one the file is read without."""
    named = {}
    for part in columns.split(","):
        role, equals, column = (piece.strip() for piece in part.partition("="))
        if not equals or role not in ROLES or role in named:
            raise DataError(
                f'columns "{columns}": "{part.strip()}" is not ROLE=COLUMN with a role among '
                f"{', '.join(ROLES)}, each once."
            )
        if role == TEXT and not column:
            raise DataError(f'columns "{columns}": the text column cannot be left out.')
        named[role] = column
    return named


def _sniff_delimiter(header_line: str, path: Path) -> str:
    try:
        return csv.Sniffer().sniff(header_line, delimiters=",\t;").delimiter
    except csv.Error:  # one column: no delimiter in the header
        return "\t" if path.suffix.lower() in (".tsv", ".tab") else ","


def _bounded_lines(handle) -> Iterator[str]:
    while line := handle.readline(FIELD_LIMIT):
        if len(line) == FIELD_LIMIT and line[-1] not in "\r\n":
            raise _LongLine()
        yield line


def _repaired(cell: str) -> tuple[str, bool]:
    """The cell's text repaired by ftfy and cleaned, and whether ftfy changed it."""
    text = fix_line_breaks(cell)
    # Plain ASCII without an HTML entity or a terminal escape has nothing for ftfy to repair (the control
    # characters it would drop clean_text drops too); most reviews are such, and ftfy is most of the time.
    plain = text.isascii() and "&" not in text and "\x1b" not in text
    fixed = text if plain else ftfy.fix_text(text, REPAIRS)
    return clean_text(fixed), fixed != text


def _json_cell(path: Path, number: int, line: int, value) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    raise DataError(f"{path}: {_where(number, line)}: a JSON {type(value).__name__} where a text or a value belongs.")


def _decodes(cell: str) -> bool:
    """Whether the cell holds no undecodable byte (read as a lone surrogate)."""
    if cell.isascii():
        return True
    try:
        cell.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _shown(value: str) -> str:
    """A cell as an error message can print it: undecodable bytes as escapes, at most 40 characters."""
    shown = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return shown if len(shown) <= 40 else shown[:39] + "…"


def _where(number: int, line: int) -> str:
    return f"row {number} (line {line})" if number else f"the header (line {line})"


def _spelled(chosen: dict[str, str]) -> str:
    return ",".join(f"{role}={column}" for role, column in chosen.items())
