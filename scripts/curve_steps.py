"""Whether a BERT of the learning curve needs more epochs on fewer reviews, on a built database.

Trains the BERT the build's curve trains (the database's settings, a seed of its own) on balanced samples
of the archive's training pool at one size, with each epoch count asked for, offsets it on
250 unlabeled reviews as the curve step does, and prints one line per run: its accuracy on a
seeded sample of the database's evaluation reviews and the seconds it took. With 3 epochs,
100 reviews make 19 optimisation steps; the build's own model takes 94 on its 500.

    python scripts/curve_steps.py --data-dir data --imdb ../shared/data/aclImdb_v1.tar.gz \\
        [--size 100] [--seeds 42 43] [--epochs 3 15] [--eval-reviews 500]

The answer decided the learning curve's epochs (``app.offline.steps.curve_epochs``); its
figures are in model/README.md, "The learning curve".
"""

import argparse
import random
import time
from pathlib import Path

from sqlalchemy import select

from app.db import Review, latest_run, make_engine, session_scope
from app.offline.steps import CURVE_PRIOR_REVIEWS, set_prior_offset
from app.settings import Settings
from model import checkpoints
from model.bert import BertClassifier, resolve_device
from model.config import BertConfig, Sources, SplitConfig
from model.data import balanced_sample, read_splits, sample_unlabeled
from model.metrics import accuracy
from model.names import EVAL, POSITIVE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="A built data directory.")
    parser.add_argument("--imdb", required=True, help="The IMDB archive the database was built from.")
    parser.add_argument("--size", type=int, default=100, help="Training reviews of each run.")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43])
    parser.add_argument("--epochs", type=int, nargs="+", default=[3, 15])
    parser.add_argument("--eval-reviews", type=int, default=500)
    args = parser.parse_args()

    with session_scope(make_engine(Settings(data_dir=args.data_dir).database)) as session:
        built = latest_run(session).config  # the settings the database was built with
        rows = session.execute(select(Review.text, Review.label).where(Review.split == EVAL)).all()
    settings = Settings(data_dir=args.data_dir, **{k: v for k, v in built.items() if k in Settings.model_fields})
    rows = random.Random(0).sample(rows, min(args.eval_reviews, len(rows)))
    splits = read_splits(Sources(imdb=args.imdb), SplitConfig.of(settings), args.data_dir, unlabeled=True)
    priors = [r.text for r in sample_unlabeled(splits.unlabeled, CURVE_PRIOR_REVIEWS, settings.seed)]
    base = checkpoints.resolve(settings.base_model, args.data_dir / "checkpoints").location
    device = resolve_device(settings.device)
    for epochs in args.epochs:
        for seed in args.seeds:
            started = time.perf_counter()
            sample = balanced_sample(splits.train_pool, args.size, random.Random(seed))
            config = settings.group(BertConfig).model_copy(update={"base_model": base, "seed": seed, "epochs": epochs})
            labels = [r.label for r in sample]
            model = BertClassifier.train([r.text for r in sample], labels, config, device, False)
            set_prior_offset(model, priors, labels.count(POSITIVE) / len(labels), settings.offset_per)
            correct = accuracy([r.label for r in rows], model.predict_proba([r.text for r in rows])[:, 1])
            print(f"{args.size} reviews, seed {seed}, {epochs} epochs: accuracy {correct:.3f} "
                  f"on {len(rows)} evaluation reviews ({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
