"""How stability and faithfulness of sentence LIME change with its sample count, on a built database.

For a seeded subset of catalogue reviews, explains each with both models at every
sample count (and every target and kernel width asked for) and prints one table row
per setting: mean R², mean stability (Spearman of two seeds), the share of empty
explanations, mean normalised comprehensiveness and sufficiency at k = 1 (Edin et al.),
mean comprehensiveness at k = 20 % against random sentences, and the distinct texts
scored per review. Every text is scored once per model and review across all settings.

    python scripts/lime_samples.py [--data-dir data] [--reviews 24] [--samples 16 32 64 128 256 512 1000]
        [--targets log_odds probability] [--kernel-widths 25 100 256]

The build's default sample count is the smallest whose mean stability is at least 0.9.
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import selectinload

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.db import Review, make_engine, session_scope  # noqa: E402
from app.settings import Settings  # noqa: E402
from model.bert import resolve_device  # noqa: E402
from model.config import LimeConfig  # noqa: E402
from model.explain import Memoized, explain_sentences  # noqa: E402
from model.quality import is_empty  # noqa: E402
from model.names import CATALOGUE, DISPLAY_NAMES, MODELS  # noqa: E402
from model.trained import load_trained  # noqa: E402

COLUMNS = (
    "model", "target", "width", "samples", "R²", "stability", "empty", "norm. comp.", "norm. suff.",
    "comp. top 20 %", "random", "texts/review",
)  # fmt: skip


def mean(values) -> float:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--reviews", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0, help="Seed of the review subset.")
    parser.add_argument("--samples", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512, 1000])
    parser.add_argument("--targets", nargs="+", default=["log_odds"], choices=["log_odds", "probability"])
    parser.add_argument("--kernel-widths", type=float, nargs="+", default=[LimeConfig().lime_kernel_width])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args()
    settings = Settings(data_dir=args.data_dir)
    with session_scope(make_engine(settings.database)) as session:
        ids = session.scalars(select(Review.id).where(Review.split == CATALOGUE).order_by(Review.id)).all()
        chosen = sorted(random.Random(args.seed).sample(ids, min(args.reviews, len(ids))))
        reviews = session.scalars(
            select(Review).where(Review.id.in_(chosen)).options(selectinload(Review.sentences))
        ).all()
    sentences = [len(r.sentences) for r in reviews]
    print(
        f"{len(reviews)} catalogue reviews (seed {args.seed}), {statistics.median(sentences):.0f} sentences "
        f"each (median, {min(sentences)}–{max(sentences)}); LIME seed {settings.seed}."
    )
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    device = resolve_device(settings.device)
    for name in args.models:
        model = load_trained(name, settings.models_dir, device)
        memos = {review.id: Memoized(model.predict_proba) for review in reviews}
        started = time.perf_counter()
        for target in args.targets:
            for width in args.kernel_widths:
                for samples in args.samples:
                    config = LimeConfig(
                        seed=settings.seed, lime_samples=samples, lime_target=target, lime_kernel_width=width,
                        faithfulness_draws=settings.faithfulness_draws,
                    )  # fmt: skip
                    print(row(name, config, reviews, memos), flush=True)
        print(f"{DISPLAY_NAMES[name]}: {time.perf_counter() - started:.0f} s", file=sys.stderr)


def row(name: str, config: LimeConfig, reviews: list[Review], memos: dict[int, Memoized]) -> str:
    results, texts = [], []
    for review in reviews:
        memo = memos[review.id]
        asked: set[str] = set()

        def proba(batch: list[str], memo=memo, asked=asked) -> np.ndarray:
            asked.update(batch)
            p = memo(batch)
            return np.column_stack([1 - p, p])

        results.append(explain_sentences(review.text, review.sentences, proba, config))
        texts.append(len(asked))
    empty = np.mean([is_empty(r.weights, config.lime_target) for r in results])
    q = [r.quality for r in results]
    cells = (
        DISPLAY_NAMES[name], config.lime_target, f"{config.lime_kernel_width:g}", config.lime_samples,
        f"{mean(r.score for r in results):.2f}", f"{mean(x.stability for x in q):.2f}", f"{empty:.0%}",
        f"{mean(x.normalised_comprehensiveness for x in q):.2f}", f"{mean(x.normalised_sufficiency for x in q):.2f}",
        f"{mean(x.comprehensiveness_top for x in q):.3f}", f"{mean(x.random_comprehensiveness_top for x in q):.3f}",
        f"{statistics.median(texts):.0f}",
    )  # fmt: skip
    return "| " + " | ".join(map(str, cells)) + " |"


if __name__ == "__main__":
    main()
