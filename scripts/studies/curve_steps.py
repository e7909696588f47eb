"""Does a BERT of the learning curve need more epochs on fewer reviews? Measured on a built database.

Trains the BERT the build's curve trains, as the curve step does (``LearningCurve.retrained_accuracy``:
the database's settings, a seed of its own, a balanced sample of the archive's training pool,
offset on 250 unlabeled reviews), at one size with each epoch count asked for, and prints one
line per run: its accuracy on a seeded sample of the database's evaluation reviews (the curve's
own, of curve_eval_size) and the seconds it took. With 3 epochs, 100 reviews make 19
optimisation steps; the build's own model takes 94 on its 500.

    python scripts/studies/curve_steps.py --data-dir data --imdb ../shared/data/aclImdb_v1.tar.gz \\
        [--size 100] [--seeds 42 43] [--epochs 3 15] [--eval-reviews 500]

The answer decided the learning curve's epochs (``app.offline.steps.evaluation.curve_epochs``); its
figures are in docs/studies/learning-curve.md (measured at commit 71637b2, whose copy of
the training drew the evaluation sample and the 250 unlabeled reviews otherwise).
"""

import argparse
import random
import time
from pathlib import Path

from app.offline.pipeline import built_pipeline
from app.offline.steps.calibration import prior_texts
from app.offline.steps.evaluation import CURVE_PRIOR_REVIEWS, LearningCurve, evaluation_reviews
from model.data import balanced_sample
from model.names import MAIN_MODEL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="A built data directory.")
    parser.add_argument("--imdb", required=True, help="The IMDB archive the database was built from.")
    parser.add_argument("--size", type=int, default=100, help="Training reviews of each run.")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43])
    parser.add_argument("--epochs", type=int, nargs="+", default=[3, 15])
    parser.add_argument("--eval-reviews", type=int, default=500)
    args = parser.parse_args()

    build = built_pipeline(args.data_dir, args.imdb)
    pool = build.splits().train_pool
    _, evaluation = evaluation_reviews(build, args.eval_reviews)
    unlabeled = prior_texts(build)[:CURVE_PRIOR_REVIEWS]
    for epochs in args.epochs:
        for seed in args.seeds:
            started = time.perf_counter()
            sample = balanced_sample(pool, args.size, random.Random(seed))
            correct = LearningCurve.retrained_accuracy(build, MAIN_MODEL, seed, sample, evaluation, unlabeled, epochs)
            print(f"{args.size} reviews, seed {seed}, {epochs} epochs: accuracy {correct:.3f} on "
                  f"{len(evaluation[0])} evaluation reviews ({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
