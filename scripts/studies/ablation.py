"""How should the served BERT model be made from the labelled reviews? An ablation of recipes and settings.

Each variant (a recipe and its settings) is built with every seed, through the build's
own steps but without the explanations and the learning curve, each seed in a data
directory of its own (so a killed run resumes: run it again). One line per variant:
evaluation accuracy, ECE and catalogue accuracy as mean ± standard deviation over the
seeds, the median wall time of the training steps, and the teacher's accuracy where there
is one. Every variant gets the build's calibration (``--set prior_reviews=0
calibration_folds=0`` leaves BERT as trained, as the earlier figures in docs/studies/ were measured).

    HF_HUB_OFFLINE=1 python scripts/studies/ablation.py --work-dir /tmp/ablation --seeds 42 43 44 \\
        --variants plain-minilm distill-minilm [--set eval_size=600 ...]

On 2 CPU cores a MiniLM variant takes about 5 minutes a seed, MPNet ones 20 minutes or more.
"""

import argparse
import statistics
from pathlib import Path

from app.db import explain_step
from app.offline.pipeline import CPU_RECIPE, Pipeline
from app.offline.steps import build_steps
from app.settings import Settings
from model.config import CLS, DISTILL, MINILM, MPNET, PLAIN, SENTENCES
from model.lengths import BAND_NAMES
from model.metrics import spread
from model.names import CATALOGUE, EVAL, LENGTHS, MAIN_MODEL, MODELS, NBSVM, SST2, TEACHER

# Whole-text models as they were measured, before the build's default became the sentence model.
WHOLE_TEXT = {"pooling": CLS, "epochs": 4}
# The distill variants as they were measured, before the teacher read the served model's texts of one sentence.
STUDENT_READS_ALL = {"one_sentence_reader": "student"}
VARIANTS: dict[str, dict] = {
    "plain-minilm": {"recipe": PLAIN, "base_model": MINILM, **WHOLE_TEXT},
    "plain-minilm-mean": {"recipe": PLAIN, "base_model": MINILM, **WHOLE_TEXT, "pooling": "mean"},
    "plain-minilm-sentences": {"recipe": PLAIN, "base_model": MINILM, "pooling": SENTENCES, "epochs": 3},
    "plain-mpnet": {"recipe": PLAIN, "base_model": MPNET, "pooling": CLS, "epochs": 3, "learning_rate": 5e-5},
    "distill-minilm": {"recipe": DISTILL, "base_model": MINILM, **WHOLE_TEXT, **STUDENT_READS_ALL},
    "distill-minilm-sentences": {
        "recipe": DISTILL, "base_model": MINILM, "pooling": SENTENCES, "teacher_cuts": 2, **STUDENT_READS_ALL,
    },  # fmt: skip
    "distill-minilm-damped": {
        "recipe": DISTILL, "base_model": MINILM, "pooling": SENTENCES, "teacher_cuts": 2, "length_exponent": -0.5,
        **STUDENT_READS_ALL,
    },  # fmt: skip
    "self-distill-minilm": {
        "recipe": DISTILL, "base_model": MINILM, "teacher_model": MINILM, **WHOLE_TEXT, **STUDENT_READS_ALL,
    },  # fmt: skip
    "distill-mpnet": {"recipe": DISTILL, "base_model": MPNET, "learning_rate": 5e-5, **WHOLE_TEXT, **STUDENT_READS_ALL},
    # the CPU default (recipe auto on a CPU) before the teacher read its texts of one sentence, and now
    "cpu-default-student-reads-all": {**CPU_RECIPE, **STUDENT_READS_ALL},
    "cpu-default": {**CPU_RECIPE, "one_sentence_reader": "teacher"},
}
SKIPPED_STEPS = {*map(explain_step, MODELS), "curve"}
TRAINING_STEPS = {MAIN_MODEL, "teacher", "pseudo_label", "calibrate"}


def build(settings: Settings) -> dict:
    steps = [step for step in build_steps(settings.recipe) if step.name not in SKIPPED_STEPS]
    return Pipeline(settings, steps, progress=False).run()


def short_texts(records: list[dict]) -> str:
    """SST-2 accuracy and ECE, and accuracy by length band, of both models over the seeds."""
    parts = []
    for model in (MAIN_MODEL, NBSVM):
        sst2 = [r["metrics"][model][SST2] for r in records]
        bands = [[r["metrics"][LENGTHS][model][i] for r in records] for i in range(len(BAND_NAMES))]
        parts.append(
            f"{model} SST-2 accuracy {spread([m['accuracy'] for m in sst2])}, ECE {spread([m['ece'] for m in sst2])}, "
            "by sentences " + ", ".join(f"{band}: {spread(values)}" for band, values in zip(BAND_NAMES, bands))
        )
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, required=True, help="Where each variant and seed is built.")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="NAME=VALUE",
        help="A setting for every variant, e.g. unlabeled=2000 calibration_folds=0 (default: the build's).",
    )  # fmt: skip
    args = parser.parse_args()
    common = dict(item.split("=", 1) for item in args.set)
    for name in args.variants:
        records = []
        for seed in args.seeds:
            data_dir = args.work_dir / name / str(seed)
            values = {**VARIANTS[name], **common, "seed": seed, "learning_curve": []}
            records.append(build(Settings(data_dir=data_dir, **values)))
        accuracy = [r["metrics"][MAIN_MODEL][EVAL]["accuracy"] for r in records]
        catalogue = [r["metrics"][MAIN_MODEL][CATALOGUE]["accuracy"] for r in records]
        ece = [r["metrics"][MAIN_MODEL][EVAL]["ece"] for r in records]
        seconds = [sum(t for step, t in r["timings"].items() if step in TRAINING_STEPS) for r in records]
        teacher = [r["metrics"][TEACHER][EVAL]["accuracy"] for r in records if TEACHER in r["metrics"]]
        line = (
            f"{name}: eval accuracy {spread(accuracy)}, ECE {spread(ece)}, catalogue accuracy {spread(catalogue)} "
            f"over {len(records)} seeds "
            f"(n={records[0]['metrics'][MAIN_MODEL][EVAL]['n']}); training median {statistics.median(seconds):.0f} s"
        )
        print(line + (f"; teacher accuracy {spread(teacher)}" if teacher else ""), flush=True)
        if all(SST2 in r["metrics"][MAIN_MODEL] for r in records):
            print(f"{name}: {short_texts(records)}", flush=True)


if __name__ == "__main__":
    main()
