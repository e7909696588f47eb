"""The build's first step (``ReadData``): the training, catalogue and evaluation reviews of the
IMDB archive or the user's file (--reviews), and their movies or items, into the database; each
catalogue review with its sentences. One transaction: a build killed in it left nothing, and redoes it."""

import logging

from sqlalchemy import select

from app.db import Movie, Review, Run, Sentence, session_scope
from app.offline.pipeline import BuildError, Pipeline, Step
from model.data import Splits
from model.names import CATALOGUE, EVAL, FILE, IMDB, NEGATIVE, POSITIVE, TRAIN
from model.sentences import split_sentences

log = logging.getLogger("textflix")


class ReadData(Step):
    name = "data"
    reads = ("the IMDB archive and the movie metadata TSV, or the file of --reviews",)
    writes = ("movies", "reviews", "sentences", "run counts")

    def prepare(self, build: Pipeline) -> None:
        if not build.splits().eval:  # before hours of training and explaining, not at the evaluate step
            kind = "test" if build.settings.reviews is None else "labelled"
            raise BuildError(
                f"No {kind} review is left for the evaluation set: the catalogue took them all (--titles "
                f"{build.settings.titles}, --set max_words={build.settings.max_words}); lower either, so that "
                "the build can measure its models."
            )

    def run(self, build: Pipeline) -> None:
        splits = build.splits()
        source = IMDB if build.settings.reviews is None else FILE
        with session_scope(build.engine) as session:  # the reviews and their counts in one transaction
            if session.scalar(select(Review.id).where(Review.source == source).limit(1)) is not None:
                log.info("Step data: the reviews are in already (the build stopped before it recorded the step).")
                return
            for title_id in sorted(splits.title_ids_used):
                session.add(Movie(title_id=title_id, **splits.movies.get(title_id, {})))
            for split, reviews in ((TRAIN, splits.train), (CATALOGUE, splits.catalogue), (EVAL, splits.eval)):
                for raw in reviews:
                    review = Review(
                        title_id=raw.title_id, text=raw.text, label=raw.label, rating=raw.rating,
                        split=split, source=source, source_key=raw.key, word_count=raw.word_count,
                    )  # fmt: skip
                    if split == CATALOGUE:
                        review.sentences = sentence_rows(raw.text)
                    session.add(review)
            run = session.get(Run, build.run_id)
            run.counts = {**run.counts, **run_counts(splits)}


def run_counts(splits: Splits) -> dict:
    """The run record's counts of the data step: the corpus, its sets and its share of positives, and for
    a user's file what ``file_counts`` says."""
    return {
        "corpus": splits.corpus,
        "titles": len(splits.title_ids),
        CATALOGUE: len(splits.catalogue),
        TRAIN: len(splits.train),
        EVAL: len(splits.eval),
        "duplicates_dropped": splits.dropped_duplicates,
        "share_positive": splits.share_positive,
        **file_counts(splits),
    }


def file_counts(splits: Splits) -> dict:
    """What the reader of a user's file read, used and skipped (each by its reason) and repaired, said on
    one line that adds up; with why the training set is short of train_size, if it is. Nothing for IMDB."""
    counts = splits.file_counts
    if not counts:
        return {}
    skipped = ", ".join(f"{n:,} {reason}" for reason, n in sorted(counts["skipped"].items())) or "none"
    labelled = counts["labelled"]
    log.info(
        "%s: %s rows read = %s used + %s skipped (%s); %s repaired; labelled %s positive, %s negative (%.0f %%).",
        splits.corpus, f"{counts['read']:,}", f"{counts['used']:,}", f"{sum(counts['skipped'].values()):,}",
        skipped, f"{counts['repaired']:,}", f"{labelled[POSITIVE]:,}", f"{labelled[NEGATIVE]:,}",
        100 * splits.share_positive,
    )  # fmt: skip
    return {**counts, **({"fewer_labels": splits.fewer_labels} if splits.fewer_labels else {})}


def sentence_rows(text: str) -> list[Sentence]:
    return [
        Sentence(position=i, start=span.start, end=span.end, text=span.text)
        for i, span in enumerate(split_sentences(text))
    ]
