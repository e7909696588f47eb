"""Where sentence-level LIME spends its time on a built database, and what batching buys.

For a sample of catalogue reviews, explains each with BERT (two LIME runs and the
faithfulness checks, as the build does) at several batch sizes (padded tokens per forward
pass) and prints one line per figure: the median seconds per review, the number of distinct
texts scored per review, and the speed-up of each batch size
against the first. ``--against DIR`` also explains the same reviews with the BERT of the
build in DIR (e.g. one with another ``pooling``), review by review in turn with this
build's, and prints its median and the ratio. ``--feature-selection`` also times every LIME of
the build (both models' sentences, NB-SVM's words) with LIME's own feature selection ("auto")
against the build's (``model.explain.FEATURE_SELECTION``), review by review in turn:

    python scripts/bench_lime.py [--data-dir data] [--reviews 40] [--max-tokens 8192 2048 1024] [--against DIR] \\
        [--feature-selection]
"""

import argparse
import statistics
import time
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.db import Review, make_engine, session_scope
from app.settings import Settings
from model import explain
from model.config import LimeConfig, WordLimeConfig
from model.devices import resolve_device
from model.explain import SentenceExplanation, explain_sentences, explain_words
from model.names import BERT, CATALOGUE, NBSVM
from model.trained import load_trained, sentence_scorer


def seconds(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def with_selection(selection: str, work) -> float:
    """Seconds of ``work`` with LIME's feature selection ``selection``."""
    kept, explain.FEATURE_SELECTION = explain.FEATURE_SELECTION, selection
    try:
        return seconds(work)
    finally:
        explain.FEATURE_SELECTION = kept


def compare_feature_selection(reviews, settings: Settings, device) -> None:
    """Each LIME of the build timed with the build's feature selection and with LIME's "auto", in turn."""
    config, words = settings.group(LimeConfig), settings.group(WordLimeConfig)
    models = {name: load_trained(name, settings.models_dir, device) for name in (BERT, NBSVM)}
    tasks = {
        f"{name} sentences": lambda r, m=model: explain_sentences(
            r.text, r.sentences, m.predict_proba, config, sentence_scorer(m)
        )
        for name, model in models.items()
    }
    tasks[f"{NBSVM} words"] = lambda r: explain_words(
        r.text, models[NBSVM].predict_proba, words.word_lime_samples, words.seed, config.lime_target
    )
    for task, work in tasks.items():
        ours, auto = [], []
        for review in reviews:
            ours.append(with_selection(explain.FEATURE_SELECTION, lambda: work(review)))
            auto.append(with_selection("auto", lambda: work(review)))
        print(f"{task} LIME: median {statistics.median(ours):.3f} s per review with feature selection "
              f"{explain.FEATURE_SELECTION!r}, {statistics.median(auto):.3f} s with 'auto': "
              f"{statistics.median(auto) / statistics.median(ours):.2f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--reviews", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[8192, 2048, 1024])
    parser.add_argument("--against", type=Path, help="Data directory of another build whose BERT to time beside.")
    parser.add_argument("--feature-selection", action="store_true", help="Also time LIME's own feature selection.")
    parser.add_argument(
        "--split-again", action="store_true", help="Also time BERT's LIME with each perturbed text split again."
    )
    args = parser.parse_args()
    settings = Settings(data_dir=args.data_dir)
    config = settings.group(LimeConfig)
    with session_scope(make_engine(settings.database)) as session:
        reviews = session.scalars(
            select(Review)
            .where(Review.split == CATALOGUE)
            .order_by(Review.id)
            .limit(args.reviews)
            .options(selectinload(Review.sentences))
        ).all()
    device = resolve_device(settings.device)
    bert = load_trained(BERT, settings.models_dir, device)
    other = load_trained(BERT, Settings(data_dir=args.against).models_dir, device) if args.against else None
    print(f"{len(reviews)} catalogue reviews, {config.lime_samples} LIME samples per run, BERT pooling "
          f"{bert.config.pooling}, device {bert.device}")  # fmt: skip

    scored: list[int] = []

    def counting(score, max_tokens):
        def predict(texts):
            scored.append(len(texts))
            return score(texts, max_tokens=max_tokens)

        return predict

    medians = {}
    for max_tokens in args.max_tokens:
        scored.clear()
        times, against, split_again = [], [], []
        for review in reviews:

            def timed(predict, proba_of_sentences, review=review) -> tuple[float, SentenceExplanation]:
                started = time.perf_counter()
                explanation = explain_sentences(review.text, review.sentences, predict, config, proba_of_sentences)
                return time.perf_counter() - started, explanation

            by_sentences = sentence_scorer(bert)
            times.append(timed(counting(bert.predict_proba, max_tokens), by_sentences and counting(by_sentences, max_tokens)))
            if other is not None and max_tokens == args.max_tokens[0]:
                against.append(timed(other.predict_proba, sentence_scorer(other))[0])
            if args.split_again and max_tokens == args.max_tokens[0]:
                split_again.append(timed(bert.predict_proba, None))
        medians[max_tokens] = statistics.median(t for t, _ in times)
        print(f"BERT sentence LIME, {max_tokens} tokens per batch: median {medians[max_tokens]:.3f} s per review")
        if split_again:
            baseline = statistics.median(t for t, _ in split_again)
            same = sum(new.weights == old.weights for (_, new), (_, old) in zip(times, split_again))
            fits = [statistics.fmean(e.score for _, e in runs) for runs in (times, split_again)]
            print(f"BERT sentence LIME with each perturbed text split again: median {baseline:.3f} s per review; "
                  f"handed its sentences: {baseline / medians[max_tokens]:.2f}x faster, the same weights on {same} "
                  f"of {len(reviews)} reviews, mean R² {fits[0]:.3f} against {fits[1]:.3f}")  # fmt: skip
        if against:
            baseline = statistics.median(against)
            print(f"BERT of {args.against} (pooling {other.config.pooling}), its own batches: median {baseline:.3f} s per "
                  f"review; this build's is {baseline / medians[max_tokens]:.1f}x faster")  # fmt: skip
    print(f"distinct texts scored per review: {sum(scored) / len(reviews):.0f}, of the {2 * config.lime_samples} "
          "perturbed texts the two LIME runs ask for, and the faithfulness checks'")  # fmt: skip
    first = args.max_tokens[0]
    for max_tokens in args.max_tokens[1:]:
        print(f"speed-up of {max_tokens} over {first} tokens per batch: {medians[first] / medians[max_tokens]:.2f}x")
    if args.feature_selection:
        compare_feature_selection(reviews, settings, device)


if __name__ == "__main__":
    main()
