"""The build's first step (``ReadData``): the training, catalogue and evaluation reviews of the
IMDB archive, and their movies, into the database; each catalogue review with its sentences."""

from app.db import Movie, Review, Sentence, session_scope
from app.offline.pipeline import BuildError, Pipeline, Step
from model.names import CATALOGUE, EVAL, IMDB, TRAIN
from model.sentences import split_sentences


class ReadData(Step):
    name = "data"
    reads = ("the IMDB archive", "the movie metadata TSV")
    writes = ("movies", "reviews", "sentences", "run counts")

    def prepare(self, build: Pipeline) -> None:
        if not build.splits().eval:  # before hours of training and explaining, not at the evaluate step
            raise BuildError(
                "No test review is left for the evaluation set: the catalogue took them all (--titles "
                f"{build.settings.titles}, --set max_words={build.settings.max_words}); lower either, so that "
                "the build can measure its models."
            )

    def run(self, build: Pipeline) -> None:
        splits = build.splits()
        with session_scope(build.engine) as session:
            for title_id in sorted(splits.title_ids_used):
                session.add(Movie(title_id=title_id, **splits.movies.get(title_id, {})))
            for split, reviews in ((TRAIN, splits.train), (CATALOGUE, splits.catalogue), (EVAL, splits.eval)):
                for raw in reviews:
                    review = Review(
                        title_id=raw.title_id, text=raw.text, label=raw.label, rating=raw.rating,
                        split=split, source=IMDB, source_key=raw.key, word_count=raw.word_count,
                    )  # fmt: skip
                    if split == CATALOGUE:
                        review.sentences = sentence_rows(raw.text)
                    session.add(review)
        build.update_run(
            counts={
                "titles": len(splits.title_ids),
                CATALOGUE: len(splits.catalogue),
                TRAIN: len(splits.train),
                EVAL: len(splits.eval),
                "duplicates_dropped": splits.dropped_duplicates,
            }
        )


def sentence_rows(text: str) -> list[Sentence]:
    return [
        Sentence(position=i, start=span.start, end=span.end, text=span.text)
        for i, span in enumerate(split_sentences(text))
    ]
