"""Does the sentence splitter split a review typed in lower case as its author meant?

Every catalogue review (the build's split of the archive, seed 42) is split as written and
lower-cased: the share of the cased split's boundaries that the lower-cased split finds, and the
boundaries it adds; the cased split against another revision's splitter; ERASER's movie reviews
(validation and test, one sentence a line) joined with spaces, whose sentence count is within 10 %
of their lines; pySBD's figures beside (if installed); the time each splitter takes; and, with
--costs, what explaining a review costs by its sentences (docs/api.md's figures). One line per figure.

    python scripts/studies/lower_case_split.py --imdb ../shared/data/aclImdb_v1.tar.gz \\
        --movies ../shared/data/movies.tsv --eraser ../shared/data/eraser_movies.tar.gz \\
        --compare-with 9d63e40 --costs
"""

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from app.web.costs import analysis_cost
from model.config import LimeConfig, Sources, SplitConfig
from model.data import read_archive, read_splits, read_unlabeled
from model.sentences import sentence_spans, split_sentences

Splitter = Callable[[str], list[int]]  # a text → where its sentences begin, after the first
HOSTILE = "a. " * 6666  # 20,000 characters of short sentences: the slowest for pySBD of those tried


def our_starts(text: str) -> list[int]:
    return [span.start for span in split_sentences(text)[1:]]


def starts_at(revision: str) -> Splitter:
    """The splitter of model/sentences.py at git ``revision``."""
    source = subprocess.run(["git", "show", f"{revision}:model/sentences.py"], capture_output=True, text=True, check=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sentences_then.py"
        path.write_text(source.stdout)
        spec = importlib.util.spec_from_file_location("sentences_then", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return lambda text: [span.start for span in module.split_sentences(text)[1:]]


def pysbd_starts() -> Splitter | None:
    try:
        import pysbd
    except ImportError:
        return None
    segmenter = pysbd.Segmenter(language="en", clean=False)

    def starts(text: str) -> list[int]:
        found, offset = [], 0
        for sentence in segmenter.segment(text):
            offset = text.find(sentence.strip(), offset)
            found.append(offset)
            offset += len(sentence.strip())
        return found[1:]

    return starts


def boundary_figures(split: Splitter, texts: list[str]) -> tuple[int, int, int]:
    """The cased split's boundaries, those the lower-cased split finds, and those it adds."""
    cased = found = extra = 0
    for text in texts:
        as_written, lowered = set(split(text)), set(split(text.lower()))
        cased, found, extra = cased + len(as_written), found + len(as_written & lowered), extra + len(lowered - as_written)
    return cased, found, extra


def eraser_reviews(path: Path) -> list[list[str]]:
    """The sentences (lines) of ERASER's movie reviews of the validation and test splits."""
    with tarfile.open(path) as archive:
        members = {member.name.rpartition("movies/")[2]: member for member in archive if member.isfile()}
        ids = [
            json.loads(line)["annotation_id"]
            for split in ("val", "test")
            for line in archive.extractfile(members[f"{split}.jsonl"])
        ]
        docs = [archive.extractfile(members[f"docs/{doc}"]).read().decode() for doc in dict.fromkeys(ids)]
    return [[line for line in doc.splitlines() if line.strip()] for doc in docs]


def eraser_share(split: Splitter, reviews: list[list[str]]) -> tuple[float, float]:
    """The share of reviews whose sentence count is within 10 % of their lines, and the median ratio."""
    ratios = [(len(split(" ".join(lines))) + 1) / len(lines) for lines in reviews]
    return sum(abs(ratio - 1) <= 0.1 for ratio in ratios) / len(ratios), statistics.median(ratios)


def median_ms(split: Splitter, texts: list[str]) -> float:
    times = []
    for text in texts:
        start = time.perf_counter()
        split(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def changed_boundaries(before: Splitter, texts: dict[str, str], show: bool) -> None:
    """The boundaries of the cased split that ``before`` did not have, and those it had that this has
    not (each, if ``show``), and the sentences of both splits."""
    added = removed = sentences_now = sentences_then = 0
    reviews = set()
    for key, text in texts.items():
        now, then = set(our_starts(text)), set(before(text))
        sentences_now, sentences_then = sentences_now + len(now) + 1, sentences_then + len(then) + 1
        added, removed = added + len(now - then), removed + len(then - now)
        for start in sorted(now ^ then):
            reviews.add(key)
            context = f"{text[max(0, start - 40) : start]}|{text[start : start + 30]}".replace("\n", " ")
            if show:
                print(f"  {'added' if start in now else 'removed'} in {key}: {context!r}")
    print(f"cased catalogue against the revision compared with: {added} boundaries added, {removed} removed, "
          f"in {len(reviews)} reviews; {sentences_then} sentences then, {sentences_now} now")  # fmt: skip


def explanation_costs(archive: Path) -> None:
    """Model passes an explanation of a review reserves (the default LIME settings): the median and
    99th percentile of 2,000 labelled reviews drawn at random, and the two costliest reviews of the
    archive, the unlabelled ones too."""
    labelled = read_archive(archive)
    texts = [review.text for review in labelled] + [review.text for review in read_unlabeled(archive, labelled)]

    def cost(text: str) -> int:
        return analysis_cost([text], True, LimeConfig(), [sentence_spans(text)])

    drawn = sorted(cost(review.text) for review in random.Random(0).sample(labelled, 2000))
    print(f"explaining 2,000 labelled reviews drawn at random: median {statistics.median(drawn):,.0f} passes, "
          f"99th percentile {drawn[int(0.99 * len(drawn))]:,}")  # fmt: skip
    costliest = sorted(texts, key=cost)[-2:][::-1]
    for text in costliest:
        print(f"costly to explain: {len(text):,} characters, {len(sentence_spans(text))} sentences, {cost(text):,} passes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imdb", required=True, help="aclImdb_v1.tar.gz (the catalogue's source).")
    parser.add_argument("--movies", type=Path, help="movies.tsv, as the build is given it (it picks the titles).")
    parser.add_argument("--eraser", type=Path, help="ERASER's eraser_movies.tar.gz.")
    parser.add_argument("--compare-with", metavar="REVISION", help="A git revision whose splitter the cased split is compared with.")
    parser.add_argument("--show-changes", action="store_true", help="Print each boundary the comparison finds changed.")
    parser.add_argument("--costs", action="store_true", help="Also what explaining each review of the archive costs.")
    parser.add_argument("--seed", type=int, default=42, help="The build's seed (the catalogue's split).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        splits = read_splits(Sources(imdb=args.imdb, movies=args.movies), SplitConfig(seed=args.seed), Path(data_dir))
    catalogue = {review.key: review.text for review in splits.catalogue}
    texts = [text for text in catalogue.values() if len(text.lower()) == len(text)]  # offsets kept
    print(f"catalogue: {len(catalogue)} reviews, {len(texts)} whose lower-cased text keeps its offsets")
    if args.compare_with:
        changed_boundaries(starts_at(args.compare_with), catalogue, args.show_changes)
    eraser = eraser_reviews(args.eraser) if args.eraser else []
    splitters = {"Textflix": our_starts, "pySBD": pysbd_starts()}
    for name, split in splitters.items():
        if split is None:
            print(f"{name}: not installed (pip install pysbd), not measured")
            continue
        cased, found, extra = boundary_figures(split, texts)
        print(f"{name}: lower-cased catalogue finds {found / cased:.2%} of the cased split's {cased} boundaries, "
              f"adds {extra / cased:.2%} ({extra})")  # fmt: skip
        if eraser:
            share, ratio = eraser_share(split, eraser)
            print(f"{name}: ERASER reviews ({len(eraser)}) within ±10 % of their lines {share:.1%}, median sentences/lines {ratio:.2f}")
        print(f"{name}: median {median_ms(split, texts):.2f} ms a catalogue review; "
              f"{median_ms(split, [HOSTILE]):.0f} ms for 20,000 characters of short sentences")  # fmt: skip
    if args.costs:
        explanation_costs(Path(args.imdb))


if __name__ == "__main__":
    main()
