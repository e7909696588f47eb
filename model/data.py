"""The reviews a build reads, and their splits: IMDB's archive with its movie metadata, or a user's file.

The archive is read member by member with ``tarfile`` (never unpacked), review
``N_R.txt`` of a folder gets the title on line N of that folder's ``urls_*.txt``.
A user's file (``model.reviews_file``) is read twice as a stream (``read_file_splits``): its items
are the titles.
"""

__all__ = ["UnlabeledReview", "balanced_sample", "read_archive", "read_file_splits", "read_splits", "read_sst2",
           "read_unlabeled", "sample_unlabeled"]  # fmt: skip

import csv
import hashlib
import logging
import random
import re
import tarfile
import urllib.request
import zlib
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from model.config import IMDB_BYTES, IMDB_SHA256, Sources, SplitConfig
from model.files import atomic_write
from model.names import IMDB_CORPUS, NEGATIVE, POSITIVE, SHORT_LABELS

log = logging.getLogger("textflix")
LABEL_OF = {short: label for label, short in SHORT_LABELS.items()}
LABELLED_FOLDERS = [(split, polarity) for split in ("train", "test") for polarity in ("pos", "neg")]
LABELLED_OR_URLS = re.compile(
    r"^aclImdb/(?:(train|test)/(pos|neg)/(\d+)_(\d+)\.txt|(train|test)/urls_(pos|neg)\.txt)$"
)
UNSUP = re.compile(r"^aclImdb/train/unsup/(\d+)_0\.txt$")
TITLE_ID = re.compile(r"/title/(tt\d+)/")
MOVIE_COLUMNS = [
    "tconst", "title", "year", "type", "genres", "runtime_min", "rated",
    "director", "actors", "imdb_rating", "imdb_votes", "plot", "sources",
]  # fmt: skip


# IMDB's archive holds at most 30 reviews of a title in a split, so no title of its catalogue has more. A user's
# file may hold thousands of one item's (Steam's: up to 2,050 a game), which would make the catalogue a few
# items' and its explaining hours long: each catalogue item gets at most this many, a seeded sample.
CATALOGUE_PER_ITEM = 30
# Fewer labelled reviews than this in a user's file are too few to train on and measure with.
MIN_LABELS = 50
FILE_SPLIT = "file"  # RawReview.split of a user's file's reviews
ITEM_ID_CHARS = 64  # the longest item id of a user's file: the database's movies.title_id
# The first pass over a user's file keeps, for each review used, its label as one of these codes.
LABEL_CODES = {POSITIVE: 1, NEGATIVE: 0, None: -1}


class DataError(Exception):
    """Input data that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class RawReview:
    key: str  # "test/pos/123_8": split, folder, file stem; "row 12" of a user's file
    split: str  # "train" or "test" in the archive; FILE_SPLIT for a user's file
    label: str | None  # None: a user's file's review without a label
    rating: int | None  # IMDB's stars; None for a user's file (its ratings are on its own scale)
    title_id: str
    text: str

    @property
    def word_count(self) -> int:
        return len(self.text.split())


@dataclass(frozen=True)
class UnlabeledReview:
    key: str  # "train/unsup/123_0"
    text: str


@dataclass
class Splits:
    train: list[RawReview]
    catalogue: list[RawReview]
    eval: list[RawReview]
    dropped_duplicates: int = 0
    title_ids: list[str] = field(default_factory=list)  # catalogue titles, most reviews first
    movies: dict[str, dict] = field(default_factory=dict)  # metadata by title id
    # Every train-split review of the archive: what the learning curve samples its training sets from.
    train_pool: list[RawReview] = field(default_factory=list)
    archive: Path | None = None  # where they were read from, and how many reviews it held
    reviews_read: int = 0
    unlabeled: list[UnlabeledReview] = field(default_factory=list)  # when asked for (read_splits)
    # The share of positives among the labelled reviews read (``labelled_read`` of them): the prior BERT's
    # offset matches on unlabeled ones.
    share_positive: float = 0.5
    labelled_read: int = 0
    corpus: str = IMDB_CORPUS  # or the name of the file read
    file_counts: dict = field(default_factory=dict)  # a user's file: what its reader read, used, skipped, repaired
    fewer_labels: str | None = None  # why a user's file gives fewer training reviews than train_size

    @property
    def title_ids_used(self) -> set[str]:
        """Titles of the reviews in any split: the movies the database needs."""
        return {r.title_id for r in self.train + self.catalogue + self.eval}

    def as_json(self) -> dict:
        """The splits as plain JSON values (``from_json`` reads them back)."""
        return {**asdict(self), "archive": None if self.archive is None else str(self.archive)}

    @classmethod
    def from_json(cls, values: dict) -> "Splits":
        reviews = {name: [RawReview(**review) for review in values[name]] for name in REVIEW_LISTS}
        unlabeled = [UnlabeledReview(**review) for review in values["unlabeled"]]
        archive = None if values["archive"] is None else Path(values["archive"])
        return cls(**{**values, **reviews, "unlabeled": unlabeled, "archive": archive})


REVIEW_LISTS = ("train", "catalogue", "eval", "train_pool")  # the fields of ``Splits`` that list RawReviews


# The archive's texts are Windows-1252 read as Latin-1: U+0080-U+009F stand for cp1252's dashes, quotes,
# ellipses and the like, or, for the five bytes cp1252 leaves undefined, for nothing. Every other control
# character is dropped too, except newlines (the paragraphs that ``<br />`` stood for, which the sentence
# splitter reads) and tabs (in some texts the only space between two words).
TEXT_CLEANUP = str.maketrans(
    {code: bytes([code]).decode("cp1252", errors="ignore") or None for code in range(0x80, 0xA0)}
    | {code: None for code in (*range(0x20), 0x7F) if chr(code) not in "\n\t"}
)


BREAK_TAG = re.compile(r"<br\s*/?>")


def clean_text(text: str) -> str:
    """The review as it was meant (``TEXT_CLEANUP``), with the dataset's ``<br />`` tags made the line
    breaks they stood for (the white space around a tag dropped), the ends trimmed.

    Linear in the length of the text: the tags are found without the white space around them (a
    leading ``\\s*`` in the pattern would try every position of a long run of spaces, quadratic),
    and the pieces between them are stripped."""
    return "\n".join(piece.strip() for piece in BREAK_TAG.split(text.translate(TEXT_CLEANUP))).strip()


def download(url: str, destination: Path, sha256: str | None = None, size: int | None = None) -> Path:
    """Fetch ``url`` into ``destination`` once, with progress, checked against ``sha256`` and ``size`` if given.

    The file is written under a temporary name beside ``destination`` and renamed only once it
    checks out. A file already at ``destination`` is checked the same way before it is reused,
    and fetched again if it fails.
    """
    if destination.exists():
        problem = _mismatch(destination, sha256, size) if sha256 else None
        if problem is None:
            return destination
        log.warning("%s %s; downloading it again.", destination, problem)
        destination.unlink()
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_write(destination, "wb") as out:
            _fetch(url, out)
            if sha256 and (problem := _mismatch(Path(out.name), sha256, size)):
                raise DataError(f"{url}: the download {problem}; it was deleted.")
    except OSError as error:
        raise DataError(f"{url}: download failed ({error}).") from error
    return destination


def _fetch(url: str, out: BinaryIO) -> None:
    with urllib.request.urlopen(url, timeout=60) as response:
        expected = int(response.headers.get("Content-Length") or 0) or None
        with tqdm(total=expected, unit="B", unit_scale=True, desc="Download IMDB") as bar:
            while chunk := response.read(1 << 20):
                out.write(chunk)
                bar.update(len(chunk))
    out.flush()  # for _mismatch, which reads the file back by its name
    received = out.tell()
    if expected is not None and received != expected:
        raise DataError(f"{url}: download incomplete, {received} of {expected} bytes.")


def _mismatch(path: Path, sha256: str, size: int | None) -> str | None:
    """How the file at ``path`` differs from the one expected, or None; its size is checked first."""
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        return f"has {actual_size:,} bytes where {size:,} were expected"
    with open(path, "rb") as f:
        actual = hashlib.file_digest(f, "sha256").hexdigest()
    return f"has SHA-256 {actual} where {sha256} was expected" if actual != sha256 else None


def locate_archive(sources: Sources, data_dir: Path) -> Path:
    """A local path to the archive ``sources.imdb``, downloaded into ``data_dir`` if it is a URL.

    The archive is checked against ``sources.expected_sha256`` (the official archive's size too)
    where there is one: a download that fails is deleted, a local file that fails refused.
    """
    sha256 = sources.expected_sha256
    size = IMDB_BYTES if sha256 == IMDB_SHA256 else None
    if re.match(r"^https?://", sources.imdb):
        if sha256 is None:
            log.warning("%s: no SHA-256 to check it against (imdb_sha256), so it is used unverified.", sources.imdb)
        return download(sources.imdb, data_dir / Path(sources.imdb).name, sha256, size)
    path = Path(sources.imdb).expanduser()
    if not path.is_file():
        raise DataError(f"{path}: no such file (expected aclImdb_v1.tar.gz).")
    if sha256 and (problem := _mismatch(path, sha256, size)):
        raise DataError(f"{path} {problem} (imdb_sha256).")
    return path


def archive_files(
    path: Path, wanted: re.Pattern, desc: str, what: str = "IMDB archive"
) -> Iterator[tuple[re.Match, str]]:
    """The members of the gzipped tar archive at ``path`` whose names match ``wanted``, with their
    text, read member by member (never unpacked); a ``DataError`` names a truncated or corrupt ``what``."""
    size = path.stat().st_size
    try:
        with (
            open(path, "rb") as raw,
            tqdm.wrapattr(raw, "read", total=size, desc=desc, unit="B", unit_scale=True) as fileobj,
            tarfile.open(fileobj=fileobj, mode="r:gz") as archive,
        ):
            for member in archive:
                if member.isfile() and (m := wanted.match(member.name)):
                    yield m, archive.extractfile(member).read().decode("utf-8")
    except (tarfile.TarError, EOFError, zlib.error, OSError, UnicodeDecodeError) as error:
        raise DataError(f"{path}: not a readable {what}, it is truncated or corrupt ({error}).") from error


def read_archive(path: Path) -> list[RawReview]:
    """All labelled reviews of the archive, with their title ids."""
    texts: dict[tuple[str, str], dict[int, tuple[int, str]]] = defaultdict(dict)
    urls: dict[tuple[str, str], list[str]] = {}
    for m, text in archive_files(path, LABELLED_OR_URLS, "Read IMDB"):
        split, polarity, index, rating, url_split, url_polarity = m.groups()
        if url_split:
            urls[url_split, url_polarity] = text.splitlines()
        else:
            texts[split, polarity][int(index)] = (int(rating), clean_text(text))
    return list(_attach_titles(path, texts, urls))


def read_unlabeled(path: Path, labelled: Iterable[RawReview]) -> list[UnlabeledReview]:
    """The unlabeled reviews of the archive (``train/unsup``) in key order, less any text that is
    also a labelled review's (the archive has such copies): no test text is ever among them."""
    known = {r.text for r in labelled}
    found = []
    for m, text in archive_files(path, UNSUP, "Read unlabeled IMDB"):
        if (text := clean_text(text)) not in known:
            found.append(UnlabeledReview(key=f"train/unsup/{m.group(1)}_0", text=text))
    if not found:
        raise DataError(
            f"{path}: no reviews in aclImdb/train/unsup/, which the distill recipe labels and BERT's "
            "calibration reads (prior_reviews); build with --set recipe=plain --set prior_reviews=0 without them."
        )
    return sorted(found, key=lambda r: int(r.key.split("/")[-1].split("_")[0]))


def sample_unlabeled(unlabeled: list[UnlabeledReview], size: int, seed: int) -> list[UnlabeledReview]:
    """A seeded sample of ``size`` unlabeled reviews (all of them if there are fewer)."""
    return random.Random(seed).sample(unlabeled, min(size, len(unlabeled)))


def _attach_titles(path, texts, urls) -> Iterable[RawReview]:
    for split, polarity in LABELLED_FOLDERS:
        if not texts.get((split, polarity)):
            raise DataError(f"{path}: no reviews in aclImdb/{split}/{polarity}/, not the IMDB archive.")
        lines = urls.get((split, polarity))
        if lines is None:
            raise DataError(f"{path}: aclImdb/{split}/urls_{polarity}.txt is missing.")
        for index, (rating, text) in sorted(texts[split, polarity].items()):
            if index >= len(lines) or not (m := TITLE_ID.search(lines[index])):
                raise DataError(
                    f"{path}: aclImdb/{split}/urls_{polarity}.txt has no title for review {index}."
                )
            yield RawReview(
                key=f"{split}/{polarity}/{index}_{rating}",
                split=split,
                label=LABEL_OF[polarity],
                rating=rating,
                title_id=m.group(1),
                text=text,
            )


def make_splits(reviews: list[RawReview], config: SplitConfig, movies: dict[str, dict] | None = None) -> Splits:
    """Training subset (train split, balanced), catalogue and evaluation set (test split).

    Exact duplicate texts are dropped first, so no text is in two sets. The catalogue takes the
    titles with the most short reviews; given metadata (``movies``), those with a name come first,
    and of those the ones with a plot.
    """
    unique, seen = [], set()
    for review in sorted(reviews, key=lambda r: (r.split != "train", r.key)):
        if review.text not in seen:
            seen.add(review.text)
            unique.append(review)
    rng = random.Random(config.seed)
    train = balanced_sample([r for r in unique if r.split == "train"], config.train_size, rng)

    test = [r for r in unique if r.split == "test"]
    short = [r for r in test if r.word_count <= config.max_words]
    counts = Counter(r.title_id for r in short)
    movies = movies or {}

    def rank(title_id: str) -> tuple:
        movie = movies.get(title_id, {})
        return (movie.get("title") is None, movie.get("plot") is None, -counts[title_id], title_id)

    ranked = sorted(counts, key=rank)
    chosen = ranked if config.titles == "all" else ranked[: config.titles]
    chosen_set = set(chosen)
    catalogue = [r for r in short if r.title_id in chosen_set]
    in_catalogue = {r.key for r in catalogue}
    rest = [r for r in test if r.key not in in_catalogue]
    size = config.eval_size
    evaluation = rest if size == "all" else rng.sample(rest, min(size, len(rest)))
    return Splits(
        train=train,
        catalogue=catalogue,
        eval=sorted(evaluation, key=lambda r: r.key),
        dropped_duplicates=len(reviews) - len(unique),
        title_ids=chosen,
        train_pool=[r for r in reviews if r.split == "train"],
    )


def read_splits(sources: Sources, config: SplitConfig, data_dir: Path, unlabeled: bool = False) -> Splits:
    """The archive (downloaded into ``data_dir`` if need be) split as ``config`` says, with movie
    metadata, and its unlabeled reviews if ``unlabeled``."""
    archive = locate_archive(sources, data_dir)
    reviews = read_archive(archive)
    movies = read_movies(sources.movies, {r.title_id for r in reviews}) if sources.movies else {}
    splits = make_splits(reviews, config, movies)
    splits.archive, splits.reviews_read = archive, len(reviews)
    splits.share_positive = sum(r.label == POSITIVE for r in reviews) / len(reviews)
    splits.labelled_read = len(reviews)
    if unlabeled:
        splits.unlabeled = read_unlabeled(archive, reviews)
    splits.movies = {title_id: movies[title_id] for title_id in splits.title_ids_used if title_id in movies}
    return splits


@dataclass
class FileSurvey:
    """The first pass over a user's file: for each review it uses, by its place in the stream, its item (an
    index into ``items``), its label (``LABEL_CODES``) and whether it is short enough for the catalogue.
    Arrays of small numbers, so that a file of a million reviews takes a few megabytes here."""

    items: list[str] = field(default_factory=list)
    item_of: array = field(default_factory=lambda: array("i"))
    label_of: array = field(default_factory=lambda: array("b"))
    short: array = field(default_factory=lambda: array("b"))

    def positions(self, label: str | None, excluded: set[int]) -> array:
        code = LABEL_CODES[label]
        return array("i", (i for i, found in enumerate(self.label_of) if found == code and i not in excluded))


@dataclass
class FileChoice:
    """The places in the stream of the reviews each set takes (``choose_file_sets``)."""

    catalogue: list[int]
    train: list[int]
    eval: list[int]
    unlabeled: list[int]
    train_pool: list[int]
    title_ids: list[str]
    fewer_labels: str | None = None


def read_file_splits(reviews, path: Path, config: SplitConfig, unlabeled: int = 0, curve_size: int = 0) -> Splits:
    """The reviews of the user's file at ``path``, as ``reviews`` reads them (a ``model.reviews_file.ReviewsFile``,
    which imports DataError from here), split as ``config`` says in two passes over the file as a stream: the
    first notes each review's item, label and length, the sets are chosen by the reviews' places in the stream,
    and the second keeps only the chosen reviews. ``unlabeled``: the size of the seeded sample of the
    unlabeled pool that the build needs (the teacher's reviews, the calibration's); ``curve_size``:
    the largest training set of the learning curve, of which ``train_pool`` keeps a balanced sample."""
    log.info("Reading %s.", reviews.describe())
    survey = survey_file(reviews, path, config.max_words)
    labelled = Counter(code for code in survey.label_of if code != LABEL_CODES[None])
    positives, negatives = labelled[LABEL_CODES[POSITIVE]], labelled[LABEL_CODES[NEGATIVE]]
    if positives + negatives < MIN_LABELS:
        raise DataError(
            f"{path}: {positives + negatives} labelled reviews, too few to train and evaluate on (at least "
            f"{MIN_LABELS}); which column is the label, and how its values map, --columns and --label-rule say."
        )
    if not positives or not negatives:
        one = POSITIVE if positives else NEGATIVE
        raise DataError(f"{path}: every labelled review is {one}: a classifier needs both labels.")
    choice = choose_file_sets(survey, config, unlabeled, curve_size)
    if not choice.train:
        raise DataError(
            f"{path}: the catalogue's reviews leave no labelled review of one label to train on; give "
            "fewer --titles, or label more reviews."
        )
    splits = collect_file_sets(reviews, choice)
    splits.reviews_read, splits.share_positive = reviews.counts.used, positives / (positives + negatives)
    splits.labelled_read = positives + negatives
    splits.corpus, splits.title_ids, splits.fewer_labels = path.name, choice.title_ids, choice.fewer_labels
    splits.file_counts = {
        "read": reviews.counts.read, "used": reviews.counts.used, "skipped": dict(reviews.counts.skipped),
        "repaired": reviews.counts.repaired, "labelled": {POSITIVE: positives, NEGATIVE: negatives},
        "reader": reviews.describe(), "columns": reviews.columns_chosen,
    }  # fmt: skip
    return splits


def survey_file(reviews: Iterable, path: Path, max_words: int) -> FileSurvey:
    """The first pass over ``reviews``, the file at ``path``: what ``FileSurvey`` keeps of each."""
    survey, index = FileSurvey(), {}
    for review in reviews:
        if len(review.item_id) > ITEM_ID_CHARS:
            raise DataError(
                f"{path}, {review.key}: the item id {review.item_id[:80]!r} is longer than {ITEM_ID_CHARS} "
                "characters; is the item column (--columns item=NAME) the right one?"
            )
        if (item := index.get(review.item_id)) is None:
            item = index[review.item_id] = len(survey.items)
            survey.items.append(review.item_id)
        survey.item_of.append(item)
        survey.label_of.append(LABEL_CODES[review.label])
        survey.short.append(len(review.text.split()) <= max_words)
    return survey


def choose_file_sets(survey: FileSurvey, config: SplitConfig, unlabeled: int, curve_size: int) -> FileChoice:
    """The reviews of each set, by place: the catalogue (the items with the most short reviews, at most
    CATALOGUE_PER_ITEM of each, labelled or not), the training set (balanced, from the labelled rest),
    the evaluation set (of the labelled rest, in the file's own shares) and a sample of ``unlabeled`` of
    the pool (the reviews without a label and the labelled ones in no set, their labels unused)."""
    rng = random.Random(config.seed)
    short_of_item = defaultdict(lambda: array("i"))
    for place, (item, short) in enumerate(zip(survey.item_of, survey.short, strict=True)):
        if short:
            short_of_item[item].append(place)
    ranked = sorted(short_of_item, key=lambda item: (-len(short_of_item[item]), survey.items[item]))
    chosen = ranked if config.titles == "all" else ranked[: config.titles]
    catalogue = [place for item in chosen for place in sample_at_most(short_of_item[item], CATALOGUE_PER_ITEM, rng)]
    in_catalogue = set(catalogue)
    rest = {label: survey.positions(label, in_catalogue) for label in (POSITIVE, NEGATIVE)}
    # half of the scarcer label's rest at most, so that the other half is left to evaluate with
    most = min(len(rest[POSITIVE]), len(rest[NEGATIVE])) // 2
    wanted = {POSITIVE: config.train_size - config.train_size // 2, NEGATIVE: config.train_size // 2}
    train = {label: sample_at_most(rest[label], min(wanted[label], most), rng) for label in wanted}
    fewer_labels = None
    if (trained := sum(map(len, train.values()))) < config.train_size:
        fewer_labels = (
            f"the file's labelled reviews outside the catalogue are {len(rest[POSITIVE])} positive and "
            f"{len(rest[NEGATIVE])} negative, so the models train on {trained} of the {config.train_size} wanted "
            "(half of each label, and no more than half of the scarcer label's, the rest kept for evaluation)"
        )
        log.warning("Fewer training reviews: %s.", fewer_labels)
    in_train = {place for places in train.values() for place in places}
    left = array("i", (place for label in (POSITIVE, NEGATIVE) for place in rest[label] if place not in in_train))
    evaluation = sorted(left if config.eval_size == "all" else sample_at_most(left, config.eval_size, rng))
    in_sets = in_catalogue | in_train | set(evaluation)
    pool = survey.positions(None, in_catalogue) + array("i", (place for place in left if place not in in_sets))
    return FileChoice(
        catalogue=catalogue, train=train[POSITIVE] + train[NEGATIVE], eval=evaluation,
        unlabeled=sample_at_most(pool, unlabeled, rng),
        train_pool=curve_pool(train, rest, set(evaluation), curve_size, rng),
        title_ids=[survey.items[item] for item in chosen], fewer_labels=fewer_labels,
    )  # fmt: skip


def curve_pool(train: dict, rest: dict, evaluation: set[int], curve_size: int, rng: random.Random) -> list[int]:
    """What the learning curve samples its training sets from: the training reviews and others of the labelled
    rest outside the evaluation set, as many of each label (enough for ``curve_size``), so that any size up to
    the pool's is a balanced sample."""
    taken = evaluation.union(*train.values())
    others = {label: array("i", (place for place in rest[label] if place not in taken)) for label in train}
    available = min(len(train[label]) + len(others[label]) for label in train)
    each = min(max(curve_size - curve_size // 2, len(train[POSITIVE])), available)
    extra = {label: sample_at_most(others[label], each - len(train[label]), rng) for label in train}
    return [place for label in train for place in train[label] + extra[label]]


def seeded_sample(rows: Sequence, size: int | str, seed: int) -> list:
    """A sample of ``size`` of ``rows`` drawn with ``seed``, sorted; all of them, as they are, for "all" or a
    ``size`` as large."""
    if size == "all" or size >= len(rows):
        return list(rows)
    return sorted(random.Random(seed).sample(list(rows), size))


def sample_at_most(places: Sequence[int], size: int, rng: random.Random) -> list[int]:
    """A seeded sample of ``size`` of ``places`` (all of them if there are fewer)."""
    return rng.sample(places, max(0, min(size, len(places))))


def collect_file_sets(reviews: Iterable, choice: FileChoice) -> Splits:
    """The second pass over ``reviews``: the chosen ones, each set in its chosen order, and the names of
    their items (the first name a kept review gives)."""
    wanted = {*choice.catalogue, *choice.train, *choice.eval, *choice.unlabeled, *choice.train_pool}
    kept, movies = {}, {}
    for place, review in enumerate(reviews):
        if place in wanted:
            kept[place] = review
            if review.item_name and review.item_id not in movies:
                movies[review.item_id] = {"title": review.item_name}

    def raw(places: list[int]) -> list[RawReview]:
        return [RawReview(key=kept[p].key, split=FILE_SPLIT, label=kept[p].label, rating=None,
                          title_id=kept[p].item_id, text=kept[p].text) for p in places]  # fmt: skip

    splits = Splits(
        train=raw(choice.train), catalogue=raw(choice.catalogue), eval=raw(choice.eval),
        train_pool=raw(choice.train_pool),
        unlabeled=[UnlabeledReview(key=kept[p].key, text=kept[p].text) for p in choice.unlabeled],
    )  # fmt: skip
    splits.movies = {item: movies[item] for item in splits.title_ids_used if item in movies}
    return splits


def balanced_sample(pool: list[RawReview], size: int, rng: random.Random) -> list[RawReview]:
    """``size`` reviews of ``pool``, half of each label (the odd one positive)."""
    picked = []
    for label in (POSITIVE, NEGATIVE):
        candidates = [r for r in pool if r.label == label]
        wanted = size // 2 + (size % 2 if label == POSITIVE else 0)
        if len(candidates) < wanted:
            raise DataError(f"only {len(candidates)} {label} training reviews, {wanted} wanted.")
        picked += rng.sample(candidates, wanted)
    return picked


def read_movies(path: Path, wanted: set[str]) -> dict[str, dict]:
    """Metadata rows of ``movies.tsv`` for the ``wanted`` title ids."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            missing = [c for c in MOVIE_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(f"{path}: bad header, missing column(s) {', '.join(missing)}.")
            return {row["tconst"]: _movie(row) for row in reader if row["tconst"] in wanted}
    except FileNotFoundError as error:
        raise DataError(f"{path}: no such file (expected a movies TSV).") from error
    except (UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"{path}: not a readable TSV ({error}).") from error


def read_sst2(path: Path) -> tuple[list[str], list[str]]:
    """Texts and labels of an SST-2 file (GLUE's TSV: a header naming a ``sentence`` or ``text``
    column and a ``label`` column of 0 or 1): one-line reviews to evaluate on, never to train on."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            text_column = next((c for c in ("sentence", "text") if c in (reader.fieldnames or [])), None)
            if text_column is None or "label" not in reader.fieldnames:
                raise DataError(f"{path}: bad header, expected a sentence (or text) column and a label column.")
            texts, labels = [], []
            for line, row in enumerate(reader, start=2):
                if row["label"] not in ("0", "1") or not (row[text_column] or "").strip():
                    raise DataError(f"{path}, line {line}: expected a text and a label of 0 or 1.")
                texts.append(row[text_column].strip())
                labels.append(POSITIVE if row["label"] == "1" else NEGATIVE)
    except FileNotFoundError as error:
        raise DataError(f"{path}: no such file (expected SST-2's dev.tsv).") from error
    except (UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"{path}: not a readable TSV ({error}).") from error
    if not texts:
        raise DataError(f"{path}: no sentences.")
    return texts, labels


def _movie(row: dict) -> dict:
    # OMDb writes "N/A" for unknown values and "#DUPE#" for a title merged into another.
    cells = {k: (None if v in ("", "N/A", "#DUPE#") else v) for k, v in row.items()}

    def number(key, kind):
        try:
            return kind(cells[key].replace(",", "")) if cells[key] else None
        except ValueError:
            return None

    return {
        "title": cells["title"],
        "year": number("year", int),
        "runtime_min": number("runtime_min", int),
        "rated": cells["rated"],
        "genres": cells["genres"],
        "director": cells["director"],
        "actors": cells["actors"],
        "plot": cells["plot"],
        "imdb_rating": number("imdb_rating", float),
    }
