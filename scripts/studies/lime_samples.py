"""How do the stability and faithfulness of sentence LIME change with its sample count? On a built database.

For a seeded subset of catalogue reviews, explains each with both models at every
sample count (and every target and kernel width asked for) and prints one table row
per setting: mean R², mean stability (Spearman of two seeds), the share of empty
explanations, mean normalised comprehensiveness and sufficiency at k = 1 (Edin et al.),
mean comprehensiveness at k = 20 % against random sentences, and the distinct texts
scored per review. Every text is scored once per model and review across all settings.

    python scripts/studies/lime_samples.py [--data-dir data] [--reviews 24] [--samples 16 32 64 128 256 512 1000]
        [--targets log_odds probability] [--kernel-widths 25 100 256] [--reference 5000] [--plain-lime 3]

The build's default sample count is the smallest whose mean stability is at least 0.9.
``--reference N`` adds a column: the mean Spearman correlation of each setting's weights
with those of one LIME run of N samples (another seed, the same target and width) of the
same review, the fidelity of a sample count. ``--plain-lime K`` times, on the first K
reviews, the plain use of ``lime``: 5,000 samples and a classifier function that scores
one text at a time, against the build's explanation (two runs and the faithfulness
checks, every distinct text scored once, in batches); the ratio says how much faster the
build explains.
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from lime.lime_text import LimeTextExplainer
from sqlalchemy import select
from sqlalchemy.orm import selectinload
from tqdm import tqdm

from app.db import Review, make_engine, session_scope
from app.settings import Settings
from model.config import LimeConfig
from model.devices import resolve_device
from model.explain import Memoized, Perturbations, explain_sentences, lime_sentences, rank_agreement
from model.quality import is_empty
from model.names import CATALOGUE, DISPLAY_NAMES, MODELS
from model.trained import load_trained, sentence_scorer

COLUMNS = (
    "model", "target", "width", "samples", "R²", "stability", "empty", "norm. comp.", "norm. suff.",
    "comp. top 20 %", "random", "texts/review",
)  # fmt: skip


REFERENCE_SEED = 1000  # the reference run's seed, past the build's own two
PLAIN_SAMPLES = 5000  # lime's default


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
    parser.add_argument("--reference", type=int, help="Samples of the reference run each setting is compared with.")
    parser.add_argument("--plain-lime", type=int, default=0, help="Reviews on which to time plain lime.")
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
    columns = COLUMNS + ((f"vs {args.reference:,} samples",) if args.reference else ())
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
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
                    reference = None
                    if args.reference:
                        reference = [
                            lime_sentences(
                                (perturbed := Perturbations(review.text, review.sentences, reads_sentences=False)),
                                perturbed.scorer(memos[review.id].as_target(target)), args.reference,
                                settings.seed + REFERENCE_SEED, width,
                            ).weights
                            for review in tqdm(reviews, desc=f"{DISPLAY_NAMES[name]}, reference runs", leave=False)
                        ]  # fmt: skip
                    print(row(name, config, reviews, memos, reference), flush=True)
        print(f"{DISPLAY_NAMES[name]}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        if args.plain_lime:
            print(plain_lime_speed(name, model, reviews[: args.plain_lime], settings), flush=True)


def plain_lime_speed(name: str, model, reviews: list[Review], settings: Settings) -> str:
    """Seconds per review of plain lime (5,000 samples, one text per model call) against the
    build's sentence explanation of the same reviews, from nothing scored."""
    config = LimeConfig(seed=settings.seed, faithfulness_draws=settings.faithfulness_draws)

    def one_at_a_time(texts: list[str]) -> np.ndarray:
        return np.vstack([model.predict_proba([text]) for text in texts])

    plain, ours = 0.0, 0.0
    for review in reviews:
        started = time.perf_counter()
        LimeTextExplainer(
            class_names=["negative", "positive"], split_expression=lambda _, r=review: [s.text for s in r.sentences],
            bow=False, mask_string="", random_state=settings.seed,
        ).explain_instance(review.text, one_at_a_time, num_features=len(review.sentences), num_samples=PLAIN_SAMPLES)
        plain += time.perf_counter() - started
        started = time.perf_counter()
        explain_sentences(review.text, review.sentences, model.predict_proba, config, sentence_scorer(model))
        ours += time.perf_counter() - started
    return (
        f"{DISPLAY_NAMES[name]}, {len(reviews)} reviews: plain lime ({PLAIN_SAMPLES:,} samples, one text per call) "
        f"{plain / len(reviews):.1f} s a review; the build's explanation ({config.lime_samples} samples, two runs and "
        f"the faithfulness checks) {ours / len(reviews):.2f} s: {plain / ours:.1f}x faster"
    )


def row(
    name: str, config: LimeConfig, reviews: list[Review], memos: dict[int, Memoized], reference: list | None
) -> str:
    results, texts = [], []
    for review in tqdm(reviews, desc=f"{DISPLAY_NAMES[name]}, {config.lime_samples} samples", leave=False):
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
    if reference is not None:
        cells += (f"{mean(rank_agreement(r.weights, ref) for r, ref in zip(results, reference, strict=True)):.3f}",)
    return "| " + " | ".join(map(str, cells)) + " |"


if __name__ == "__main__":
    main()
