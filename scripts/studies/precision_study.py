"""Where does the CPU default's training time go, in float32 and in bfloat16?

A few optimizer steps of the teacher, a chunk of its labels and a few steps of the student, each timed
in both number formats.

A build trains in bfloat16 only on a CPU that computes it natively (``model.devices.native_cpu_bf16``); on
one without, it trains in float32, several times slower per step. This study forces float32 on any CPU (and
bfloat16 where it is native) to see which part of the training pays for the format and how much, with the
CPU default's settings (``app.offline.pipeline.CPU_RECIPE``: the MPNet teacher's lowest 8 layers frozen, the
MiniLM student reading sentences), on real training reviews and real runs of unlabeled reviews' sentences:

    python scripts/studies/precision_study.py [--imdb ../shared/data/aclImdb_v1.tar.gz] [--steps 6] [--chunks 4]

One line per figure: the median seconds of a teacher step (after one warm-up step), of the frozen
layers' pass per training review, of a chunk of ``PSEUDO_LABEL_CHUNK`` labels, and of a student step;
then how far the size-scaled estimate of a student step (``app.offline.estimates``) is from the measured one.
"""

import argparse
import random
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

import torch

import model.devices
from app.offline.estimates import SCALED_COST_FACTOR, TRAINING_PASSES, capped_chars, network_shape
from app.offline.pipeline import CPU_RECIPE
from app.offline.steps.training import PSEUDO_LABEL_CHUNK, label_chunks, reading_cap, sentence_cuts
from app.settings import Settings
from model import checkpoints
from model.bert import BertClassifier
from model.config import CLS, BertConfig
from model.data import read_archive, read_unlabeled, sample_unlabeled
from model.devices import cpu_name, native_cpu_bf16
from model.fine_tuning import gold_targets

FLOAT32, BFLOAT16 = "float32", "bfloat16"


@contextmanager
def number_format(name: str):
    """Training and inference in ``name``: float32 forced by saying the CPU has no native bfloat16."""
    native = model.devices.native_cpu_bf16
    if name == FLOAT32:
        model.devices.native_cpu_bf16 = lambda: False
    try:
        yield
    finally:
        model.devices.native_cpu_bf16 = native


def step_seconds(texts: list[str], config: BertConfig, steps: int) -> tuple[float, float]:
    """The median seconds of an optimizer step after the first, and the seconds before the first step
    (loading the checkpoint and the frozen layers' pass), training ``config`` on ``steps + 1`` batches of
    ``texts``."""
    times = []
    started = time.perf_counter()
    texts = texts[: (steps + 1) * config.batch_size]
    BertClassifier.fit(texts, gold_targets(["positive", "negative"] * (len(texts) // 2)), config,
                       torch.device("cpu"), progress=False, report=lambda done, total: times.append(time.perf_counter()))  # fmt: skip
    before = times[0] - started
    return statistics.median(b - a for a, b in zip(times[1:], times[2:])), before


def label_seconds(teacher: BertClassifier, chunks: list[list]) -> float:
    times = []
    for chunk in chunks:
        started = time.perf_counter()
        teacher.predict_proba([r.text for r in chunk])
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imdb", type=Path, default=Path("../shared/data/aclImdb_v1.tar.gz"))
    parser.add_argument("--checkpoints", type=Path, default=Path("data/checkpoints"))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--chunks", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    settings = Settings(**CPU_RECIPE)
    reviews = read_archive(args.imdb)
    train = [r.text for r in random.Random(0).sample([r for r in reviews if r.split == "train"], 200)]
    unlabeled = sample_unlabeled(read_unlabeled(args.imdb, reviews), 200, 0)
    runs = sentence_cuts(unlabeled, settings.teacher_cuts, 0)
    chunks = list(label_chunks(random.Random(0).sample(runs, PSEUDO_LABEL_CHUNK * args.chunks)))
    # what the student trains on: 500 reviews and about 9,900 of the teacher's texts, in the default build
    student_texts = [train[i // 20] if i % 20 == 0 else run.text for i, run in enumerate(runs)]
    teacher_location = checkpoints.resolve(settings.teacher_model, args.checkpoints).location
    student_location = checkpoints.resolve(settings.base_model, args.checkpoints).location
    teacher_config = settings.group(BertConfig).model_copy(update={
        "base_model": teacher_location, "pooling": CLS, "frozen_layers": settings.teacher_frozen_layers,
        "learning_rate": settings.teacher_learning_rate, "length_exponent": 0.0,
    })  # fmt: skip
    student_config = settings.group(BertConfig).model_copy(update={"base_model": student_location})
    print(f"CPU: {cpu_name()}, native bfloat16: {native_cpu_bf16()}, {torch.get_num_threads()} threads")
    formats = [FLOAT32, BFLOAT16] if native_cpu_bf16() else [FLOAT32]
    teacher = BertClassifier.pretrained(teacher_config, torch.device("cpu"))
    measured = {}
    for name in formats:
        with number_format(name):
            step, before = step_seconds(train, teacher_config, args.steps)
            print(f"{name}: teacher step {step:.2f} s (median of {args.steps - 1}), before the first step "
                  f"{before:.1f} s (loading, the frozen layers' pass over {(args.steps + 1) * 16} reviews)")  # fmt: skip
            labels = label_seconds(teacher, chunks)
            print(f"{name}: teacher labels {labels:.2f} s per chunk of {PSEUDO_LABEL_CHUNK} runs of sentences")
            student, _ = step_seconds(student_texts, student_config, args.steps)
            print(f"{name}: student step {student:.2f} s (median of {args.steps - 1})")
            measured[name] = (step, student)
    # a student step from a teacher step by the networks' sizes alone (the build then multiplies by
    # SCALED_COST_FACTOR, which these ratios measure)
    teacher_size, layers = network_shape(teacher_location)
    student_size, _ = network_shape(student_location)
    used = (args.steps + 1) * teacher_config.batch_size
    trained = (layers - teacher_config.frozen_layers) / layers
    teacher_reads = capped_chars(train[:used], reading_cap(teacher_config)) * TRAINING_PASSES * trained / (args.steps + 1)
    student_reads = capped_chars(student_texts[:used], reading_cap(student_config)) * TRAINING_PASSES / (args.steps + 1)
    for name, (step, student) in measured.items():
        estimate = step / teacher_reads * student_size / teacher_size * student_reads
        print(f"{name}: student step scaled from the teacher's by size {estimate:.2f} s, measured {student:.2f} s "
              f"({student / estimate:.1f}x; the build's estimate takes {SCALED_COST_FACTOR:.0f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
