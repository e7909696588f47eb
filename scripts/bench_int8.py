"""BERT in int8 on the CPU (``--set cpu_int8=true``) against float32: speed, accuracy, explanations.

On a built data dir: the evaluation reviews scored by both (accuracy, labels in common,
reviews per second), one short review (median latency), a text scored alone and in a batch
(int8 scores one text per forward pass, so the two must be equal), and sentence LIME of
seeded catalogue reviews by both at the build's sample count, seed and space (Spearman
correlation of the weights, R², seconds). One line per figure.

    python scripts/bench_int8.py --data-dir data [--reviews 25] [--eval 2000]
"""

import argparse
import random
import sqlite3
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from model.config import LimeConfig
from model.explain import Memoized, Perturbations, lime_sentences, rank_agreement
from model.sentences import split_sentences
from model.served import load_served
from model.trained import sentence_scorer

SHORT = "A wonderful, moving film. The acting was superb and the ending made me cry all the way home."


def rows(db: Path, split: str) -> list[tuple[str, str | None]]:
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT text, label FROM reviews WHERE split = ? ORDER BY id", (split,)).fetchall()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="built data dir (models and database)")
    parser.add_argument("--reviews", type=int, default=25, help="seeded catalogue reviews explained by both")
    parser.add_argument("--eval", type=int, default=2000, help="evaluation reviews scored by both")
    args = parser.parse_args(argv)
    db, folder = args.data_dir / "textflix.db", args.data_dir / "models" / "bert"
    if not db.is_file() or not folder.is_dir():
        raise SystemExit(f"No built database and BERT model in {args.data_dir}: run `textflix build` first.")
    cpu = torch.device("cpu")
    models = {"float32": load_served(folder, cpu), "int8": load_served(folder, cpu, cpu_int8=True)}

    evaluation = rows(db, "eval")[: args.eval]
    gold = np.array([label == "positive" for _, label in evaluation])
    p = {}
    for name, model in models.items():
        started = time.perf_counter()
        p[name] = model.predict_proba([text for text, _ in evaluation])[:, 1]
        rate = len(evaluation) / (time.perf_counter() - started)
        print(f"{name}: accuracy on {len(evaluation):,} evaluation reviews {np.mean((p[name] > 0.5) == gold):.4f}, {rate:.1f} reviews/s")
    print(f"labels in common: {np.mean((p['float32'] > 0.5) == (p['int8'] > 0.5)):.4f}")

    for name, model in models.items():
        model.predict_proba([SHORT])
        times = []
        for _ in range(40):
            started = time.perf_counter()
            model.predict_proba([SHORT])
            times.append(time.perf_counter() - started)
        texts = [text for text, _ in evaluation[:16]]
        alone = np.array([model.predict_proba([text])[0, 1] for text in texts])
        batched = model.predict_proba(texts)[:, 1]
        print(
            f"{name}: one short review {statistics.median(times) * 1000:.1f} ms (median of 40); "
            f"a text alone and in a batch of 16 differ by at most {np.abs(alone - batched).max():.1e}"
        )

    lime = LimeConfig()
    catalogue = [text for text, _ in rows(db, "catalogue")]
    random.Random(0).shuffle(catalogue)
    agreement, fit, seconds = [], {name: [] for name in models}, dict.fromkeys(models, 0.0)
    for text in catalogue[: args.reviews]:
        spans = split_sentences(text)
        if len(spans) < 2:
            continue
        weights = {}
        for name, model in models.items():
            started = time.perf_counter()
            perturbations = Perturbations(text, spans, model.reads_sentences)
            scorer = perturbations.scorer(model.predict_proba, sentence_scorer(model))
            scores = Memoized(scorer).as_target(lime.lime_target)
            result = lime_sentences(perturbations, scores, lime.lime_samples, lime.seed, lime.lime_kernel_width)
            seconds[name] += time.perf_counter() - started
            weights[name] = result.weights
            fit[name].append(result.score)
        rho = rank_agreement(weights["float32"], weights["int8"])
        if rho is not None:
            agreement.append(rho)
    print(
        f"LIME ({lime.lime_samples} samples, {lime.lime_target}, seed {lime.seed}), {len(agreement)} catalogue reviews: "
        f"Spearman of int8's sentence weights to float32's mean {np.mean(agreement):.3f}, "
        f"median {np.median(agreement):.3f}, lowest {np.min(agreement):.3f}"
    )
    for name in models:
        print(f"LIME {name}: mean R² {np.mean(fit[name]):.3f}, {seconds[name]:.0f} s")


if __name__ == "__main__":
    main()
