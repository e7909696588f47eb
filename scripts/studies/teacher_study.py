"""Which teacher reads short texts best? The build's teacher beside variants of it, and their means.

The distilled student stays 3-5 points under its teacher on SST-2, so the teacher is the ceiling.
This trains the build's teacher again with other settings (another seed, more or fewer frozen
layers, another head, runs of sentences of the training reviews labelled as their review) and
judges each, and the mean of the log-odds of every pair, on SST-2 dev and on the build's first
evaluation reviews, a line per teacher and per pair:

    HF_HUB_OFFLINE=1 python scripts/studies/teacher_study.py --data-dir D --imdb ../shared/data/aclImdb_v1.tar.gz \\
        --sst2 ../shared/data/sst2_dev.tsv --variants seed2 frozen6 --out T42.jsonl

D is a distill build (up to its teacher at least). Each teacher's probabilities go to ``--out``, a
line per teacher, so a later run judges its pairs with the teachers of earlier ones too. The results
are in docs/studies/teacher.md.
"""

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np
from scipy.special import expit, logit

from app.offline.pipeline import built_pipeline
from app.offline.steps.evaluation import evaluation_reviews
from app.offline.steps.training import TrainTeacher, load_trained_bert, pretrained, sentence_cuts
from model.bert import BertClassifier
from model.data import UnlabeledReview, read_sst2
from model.metrics import classification_report
from model.names import TEACHER

# A variant's changes to the build's teacher settings (BertConfig's); "runs": runs of 1-3
# sentences cut from each training review (``sentence_cuts``), each labelled as its review;
# "seed_offset": added to the build's seed.
VARIANTS: dict[str, dict] = {
    "seed2": {"seed_offset": 1},
    "frozen6": {"frozen_layers": 6},
    "frozen10": {"frozen_layers": 10},
    # a linear layer on the mean of the token states, as sentence-transformers read MPNet, for its first token's head
    "mean": {"pooling": "mean"},
    "runs1": {"runs": 1},
    "runs4": {"runs": 4},
    # twice the steps (the top 4 layers see 500 reviews in 96 steps), or twice the learning rate:
    # is the teacher short of training, as the learning curve's BERT at 100 labels was?
    "epochs6": {"epochs": 6},
    "lr1e-4": {"learning_rate": 1e-4},
}
BUILD = "build"  # the build's own teacher


def labelled_runs(texts: list[str], labels: list[str], runs: int, seed: int) -> tuple[list[str], list[str]]:
    """``runs`` runs of sentences of each text, drawn as the build draws the unlabeled reviews'
    (``sentence_cuts``), each with its text's label."""
    cuts = sentence_cuts([UnlabeledReview(key=str(i), text=text) for i, text in enumerate(texts)], runs, seed)
    return [cut.text for cut in cuts], [labels[int(cut.key.split("#")[0])] for cut in cuts]


def train_variant(build, name: str) -> tuple[BertClassifier, float]:
    """The build's teacher trained again with ``name``'s changes, and its training seconds."""
    variant = dict(VARIANTS[name])
    runs, seed_offset = variant.pop("runs", 0), variant.pop("seed_offset", 0)
    config, _ = pretrained(build, TrainTeacher().config(build))
    config = config.model_copy(update={**variant, "seed": config.seed + seed_offset})
    _, texts, labels = build.training_set
    run_texts, run_labels = labelled_runs(texts, labels, runs, build.settings.seed) if runs else ([], [])
    started = time.perf_counter()
    teacher = BertClassifier.train(texts + run_texts, labels + run_labels, config, build.device, progress=False)
    return teacher, time.perf_counter() - started


def mean_of_log_odds(*p_positive: np.ndarray) -> np.ndarray:
    return expit(logit(np.clip(np.stack(p_positive), 1e-7, 1 - 1e-7)).mean(axis=0))


def figures(gold: list[str], p_positive: np.ndarray) -> str:
    report = classification_report(gold, p_positive.tolist())
    return f"{report['accuracy']:.3f} (ECE {report['ece']:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="A distill build, up to its teacher at least.")
    parser.add_argument("--imdb", required=True, help="The IMDB archive the database was built from.")
    parser.add_argument("--sst2", type=Path, required=True, help="SST-2's dev.tsv.")
    parser.add_argument("--variants", nargs="*", default=[], choices=list(VARIANTS))
    parser.add_argument("--eval-reviews", type=int, default=600, help="The build's first N evaluation reviews.")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines: each teacher's probabilities.")
    args = parser.parse_args()
    build = built_pipeline(args.data_dir, args.imdb)
    seed = build.settings.seed
    _, (eval_texts, eval_labels) = evaluation_reviews(build)
    sets = {"SST-2": read_sst2(args.sst2), "evaluation": (eval_texts[: args.eval_reviews], eval_labels[: args.eval_reviews])}
    done = [json.loads(line) for line in args.out.read_text().splitlines()] if args.out.exists() else []
    judged = {r["teacher"]: r for r in done if r["seed"] == seed}

    for name in [BUILD, *args.variants]:
        if name in judged:
            continue
        teacher, seconds = (load_trained_bert(build, TEACHER), 0.0) if name == BUILD else train_variant(build, name)
        p_positive = {set_name: teacher.predict_proba(list(texts))[:, 1].tolist() for set_name, (texts, _) in sets.items()}
        judged[name] = {"seed": seed, "teacher": name, "train_s": round(seconds), "p": p_positive}
        with args.out.open("a") as f:
            f.write(json.dumps(judged[name]) + "\n")

    for size in (1, 2):
        for names in itertools.combinations(judged, size):
            p_of = {set_name: mean_of_log_odds(*(np.array(judged[n]["p"][set_name]) for n in names)) for set_name in sets}
            line = ", ".join(f"{set_name} {figures(list(gold), p_of[set_name])}" for set_name, (_, gold) in sets.items())
            trained = " + ".join(f"{judged[n]['train_s']} s" for n in names)
            print(f"seed {seed}, {' + '.join(names)}: {line}; trained in {trained}", flush=True)


if __name__ == "__main__":
    main()
