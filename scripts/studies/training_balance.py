"""On a corpus whose labels lean one way, should the 500 training reviews be balanced, or drawn in the corpus's
own shares of positives?

The figures that decide: balanced accuracy and macro-F1 on the corpus's evaluation reviews (the majority
baseline, always the commoner class, scores 0.5 and about 0.42 there whatever its accuracy), with accuracy,
the majority baseline's accuracy and ECE beside. Each way of sampling trains NB-SVM (over five seeds) and
BERT (fine-tuned alone, the plain recipe's served model, over two seeds); BERT trained on the balanced
sample is also read with the corpus's prior put back (its log-odds moved by logit(corpus share) -
logit(0.5), what the calibration's offset does with the corpus's share as its prior). The evaluation
reviews are 2,000 labelled reviews drawn first with the seed; the training reviews come from the rest.
One line per figure, the mean over seeds and the spread.

    python scripts/studies/training_balance.py ../shared/data/steam_reviews.csv
"""

import argparse
import random
import time
from pathlib import Path

import numpy as np
from scipy.special import logit
from sklearn.metrics import balanced_accuracy_score, f1_score

from model.bert import BertClassifier
from model.config import BertConfig, NbsvmConfig
from model.devices import cpu_name, native_cpu_bf16, resolve_device
from model.metrics import expected_calibration_error, spread
from model.names import NEGATIVE, POSITIVE
from model.nbsvm import NbsvmClassifier
from model.reviews_file import ReviewsFile

EVAL_SIZE, TRAIN_SIZE = 2000, 500


def training_sample(pool: list, balanced: bool, rng: random.Random) -> list:
    if not balanced:
        return rng.sample(pool, TRAIN_SIZE)
    return [
        review
        for label in (POSITIVE, NEGATIVE)
        for review in rng.sample([r for r in pool if r.label == label], TRAIN_SIZE // 2)
    ]


def figures(gold: list[str], p_positive: np.ndarray) -> dict[str, float]:
    truth, said = np.array([g == POSITIVE for g in gold]), p_positive >= 0.5
    return {
        "accuracy": float((truth == said).mean()),
        "balanced accuracy": float(balanced_accuracy_score(truth, said)),
        "macro-F1": float(f1_score(truth, said, average="macro")),
        "ECE": expected_calibration_error(truth, p_positive),
        "share said positive": float(said.mean()),
    }


def with_prior(p_positive: np.ndarray, share: float) -> np.ndarray:
    """Probabilities of a model trained on balanced labels, with the corpus's prior put back (Bayes' rule)."""
    p = np.clip(p_positive, 1e-6, 1 - 1e-6)
    return 1 / (1 + np.exp(-(logit(p) + logit(share))))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reviews", type=Path)
    parser.add_argument("--columns")
    parser.add_argument("--label-rule")
    parser.add_argument("--seeds", type=int, default=5, help="NB-SVM's seeds (BERT: the first two)")
    parser.add_argument("--bert-seeds", type=int, default=2)
    args = parser.parse_args(argv)

    reviews_file = ReviewsFile(args.reviews, args.columns, args.label_rule)
    labelled = [r for r in reviews_file if r.label is not None]
    share = sum(r.label == POSITIVE for r in labelled) / len(labelled)
    print(f"{reviews_file.describe()}; {len(labelled):,} labelled reviews, {share:.3f} positive")
    device = resolve_device()
    print(f"{cpu_name()}, native bfloat16: {native_cpu_bf16()}, device {device}")
    results: dict[tuple[str, str], list[dict]] = {}
    for seed in range(args.seeds):
        rng = random.Random(seed)
        shuffled = rng.sample(labelled, len(labelled))
        evaluation, pool = shuffled[:EVAL_SIZE], shuffled[EVAL_SIZE:]
        gold, texts = [r.label for r in evaluation], [r.text for r in evaluation]
        commoner = float(np.mean([g == POSITIVE for g in gold]) >= 0.5)
        results.setdefault(("majority baseline", "always the commoner class"), []).append(
            figures(gold, np.full(len(gold), commoner))
        )
        for balanced in (True, False):
            sample = training_sample(pool, balanced, rng)
            way = "balanced" if balanced else "corpus shares"
            train_texts, train_labels = [r.text for r in sample], [r.label for r in sample]
            nbsvm = NbsvmClassifier.train(train_texts, train_labels, NbsvmConfig(seed=seed))
            p = nbsvm.predict_proba(texts)[:, 1]
            results.setdefault(("NB-SVM", way), []).append(figures(gold, p))
            if balanced:
                results.setdefault(("NB-SVM", "balanced, corpus prior"), []).append(figures(gold, with_prior(p, share)))
            if seed < args.bert_seeds:
                start = time.perf_counter()
                bert = BertClassifier.train(train_texts, train_labels, BertConfig(seed=seed), device, progress=False)
                p = bert.predict_proba(texts)[:, 1]
                print(f"  BERT, {way}, seed {seed}: trained and read in {time.perf_counter() - start:.0f} s", flush=True)
                results.setdefault(("BERT", way), []).append(figures(gold, p))
                if balanced:
                    results.setdefault(("BERT", "balanced, corpus prior"), []).append(figures(gold, with_prior(p, share)))
    for (model, way), runs in results.items():
        for name in runs[0]:
            values = [run[name] for run in runs]
            print(f"{model}, {way}: {name} {spread(values)} ({len(values)} seeds)")


if __name__ == "__main__":
    main()
