"""Does a teacher also fine-tuned on runs of sentences of the labelled reviews read short texts better?

The distilled student is 3-5 points under its teacher on SST-2, and the teacher (fine-tuned on
whole reviews) is the ceiling. This trains the build's teacher again, as the build does, on the
training reviews plus ``--runs`` runs of 1-3 sentences cut from each (``sentence_cuts``), each
labelled as its review (a noisy label: a positive review has its weak sentences), and judges it
beside the build's own teacher on SST-2 dev and on the build's first evaluation reviews:

    HF_HUB_OFFLINE=1 python scripts/teacher_runs.py --data-dir D --imdb ../shared/data/aclImdb_v1.tar.gz \\
        --sst2 ../shared/data/sst2_dev.tsv --runs 4

D is a distill build (up to its teacher at least). The result is in model/README.md,
"What the student learns from the same labels".
"""

import argparse
import time
from pathlib import Path

from curve_steps import built_pipeline

from app.offline.steps.evaluation import evaluation_reviews
from app.offline.steps.training import TrainTeacher, load_trained_bert, pretrained, sentence_cuts
from model.bert import BertClassifier
from model.data import UnlabeledReview, read_sst2
from model.metrics import classification_report
from model.names import TEACHER


def labelled_runs(texts: list[str], labels: list[str], runs: int, seed: int) -> tuple[list[str], list[str]]:
    """``runs`` runs of sentences of each text, drawn as the build draws the unlabeled reviews'
    (``sentence_cuts``), each with its text's label."""
    cuts = sentence_cuts([UnlabeledReview(key=str(i), text=text) for i, text in enumerate(texts)], runs, seed)
    return [cut.text for cut in cuts], [labels[int(cut.key.split("#")[0])] for cut in cuts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="A distill build, up to its teacher at least.")
    parser.add_argument("--imdb", required=True, help="The IMDB archive the database was built from.")
    parser.add_argument("--sst2", type=Path, required=True, help="SST-2's dev.tsv.")
    parser.add_argument("--runs", type=int, default=4, help="Runs cut from each training review.")
    parser.add_argument("--eval-reviews", type=int, default=600, help="The build's first N evaluation reviews.")
    args = parser.parse_args()
    build = built_pipeline(args.data_dir, args.imdb)
    _, texts, labels = build.training_set
    _, (eval_texts, eval_labels) = evaluation_reviews(build)
    sets = {"SST-2": read_sst2(args.sst2), "evaluation": (eval_texts[: args.eval_reviews], eval_labels[: args.eval_reviews])}

    def judge(name: str, model: BertClassifier) -> None:
        figures = []
        for set_name, (set_texts, gold) in sets.items():
            report = classification_report(list(gold), model.predict_proba(list(set_texts))[:, 1].tolist())
            figures.append(f"{set_name} {report['accuracy']:.3f} (ECE {report['ece']:.3f}, n {report['n']})")
        print(f"seed {build.settings.seed}, {name}: " + ", ".join(figures), flush=True)

    judge("the build's teacher", load_trained_bert(build, TEACHER))
    run_texts, run_labels = labelled_runs(texts, labels, args.runs, build.settings.seed)
    config, _ = pretrained(build, TrainTeacher().config(build))
    started = time.perf_counter()
    teacher = BertClassifier.train(texts + run_texts, labels + run_labels, config, build.device, progress=False)
    print(f"seed {build.settings.seed}: teacher on {len(texts)} reviews and {len(run_texts)} runs trained in "
          f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
    judge(f"the teacher with {args.runs} runs a review", teacher)


if __name__ == "__main__":
    main()
