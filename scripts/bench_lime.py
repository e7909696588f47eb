"""Where sentence-level LIME spends its time on a built database, and what batching buys.

For a sample of catalogue reviews, explains each with BERT at several batch sizes
(padded tokens per forward pass) and prints one line per figure: the median seconds
per review, the share of LIME's perturbed texts that are distinct (and so scored),
and the speed-up of each batch size against the first:

    python scripts/bench_lime.py [--data-dir data] [--reviews 40] [--max-tokens 8192 2048 1024]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import selectinload

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.db import Review, make_engine, session_scope  # noqa: E402
from app.settings import Settings  # noqa: E402
from model.bert import resolve_device  # noqa: E402
from model.explain import explain_sentences  # noqa: E402
from model.names import BERT, CATALOGUE  # noqa: E402
from model.trained import load_trained  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--reviews", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[8192, 2048, 1024])
    args = parser.parse_args()
    settings = Settings(data_dir=args.data_dir)
    with session_scope(make_engine(settings.database)) as session:
        reviews = session.scalars(
            select(Review)
            .where(Review.split == CATALOGUE)
            .order_by(Review.id)
            .limit(args.reviews)
            .options(selectinload(Review.sentences))
        ).all()
    bert = load_trained(BERT, settings.models_dir, resolve_device(settings.device))
    samples = settings.lime_samples
    print(f"{len(reviews)} catalogue reviews, {samples} LIME samples each, device {bert.device}")

    scored: list[int] = []

    def counting(max_tokens):
        def predict(texts):
            scored.append(len(texts))
            return bert.predict_proba(texts, max_tokens=max_tokens)

        return predict

    medians = {}
    for max_tokens in args.max_tokens:
        scored.clear()
        seconds = []
        for review in reviews:
            started = time.perf_counter()
            explain_sentences(review.text, review.sentences, counting(max_tokens), samples, settings.seed)
            seconds.append(time.perf_counter() - started)
        medians[max_tokens] = statistics.median(seconds)
        print(f"BERT sentence LIME, {max_tokens} tokens per batch: median {medians[max_tokens]:.3f} s per review")
    distinct = sum(scored) / (samples * len(reviews))
    print(f"distinct perturbed texts scored: {distinct:.0%} of the {samples * len(reviews)} LIME asked for")
    first = args.max_tokens[0]
    for max_tokens in args.max_tokens[1:]:
        print(f"speed-up of {max_tokens} over {first} tokens per batch: {medians[first] / medians[max_tokens]:.2f}x")


if __name__ == "__main__":
    main()
