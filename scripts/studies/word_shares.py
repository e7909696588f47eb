"""How many steps of integrated gradients split BERT's sentence shares over their words closely
enough, and what does a sentence cost (docs/studies/word-shares.md)?

A sentence student (MiniLM, sentences pooling, length factor n ** -0.5) is fine-tuned a few steps on
real training reviews and calibrated with a fixed offset (per sentence) and temperature; then the
sentences of a few real test reviews are split over their words (``model.word_shares``) at each
number of steps. Per number of steps: the residual |Σ word shares − the sentence's share| (median
and worst, and against the sentence's |share|), the part of it that is the served bfloat16
arithmetic (the share as served against the same network in float32), and the seconds per sentence
(wall and CPU of this process); with --bfloat16, the integrated gradients in bfloat16 too. With
--teacher-texts N, the seconds a text of one sentence costs when the default teacher (MPNet, its
head untrained: the cost does not depend on it) reads it: the first sentences of N test reviews.

    PYTHONPATH=$PWD python scripts/studies/word_shares.py --imdb ../shared/data/aclImdb_v1.tar.gz
"""

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
import torch

from model import checkpoints
from model.bert import BertClassifier
from model.calibration import Calibration
from model.config import MINILM, MPNET, BertConfig
from model.data import read_archive
from model.devices import cpu_name, resolve_device
from model.sentences import split_sentences
from model.served import OneSentenceRouter
from model.word_shares import word_shares

OFFSET, TEMPERATURE = -0.4, 0.7  # a fixed calibration, as tests/test_whatif.py serves its student
LENGTH_EXPONENT = -0.5  # the CPU default's


def student_of(reviews, per_class: int, seed: int) -> BertClassifier:
    rng = random.Random(seed)
    train = []
    for label in ("positive", "negative"):
        train += rng.sample([r for r in reviews if r.split == "train" and r.label == label], per_class)
    config = BertConfig(
        base_model=MINILM, epochs=1, batch_size=8, max_length=256, seed=seed, pooling="sentences", length_exponent=LENGTH_EXPONENT
    )
    texts, labels = [r.text for r in train], [r.label for r in train]
    student = BertClassifier.train(texts, labels, config, resolve_device("cpu"), progress=False)
    student.calibration = Calibration(temperature=TEMPERATURE, offset=OFFSET)
    return student


def float32_shares(student: BertClassifier, text: str) -> np.ndarray:
    """The sentences' shares of ``text`` from the same network in float32 (no autocast)."""
    spans = split_sentences(text)
    with torch.no_grad():
        scores = student.model(**student.encoder.pad(student.encoder.ids([s.text for s in spans]), student.device)).logits[:, 0]
    factor = len(spans) ** LENGTH_EXPONENT
    return (scores.numpy() + OFFSET) * factor / TEMPERATURE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imdb", type=Path, required=True)
    parser.add_argument("--steps", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--sentences", type=int, default=30, help="at least this many sentences, from whole test reviews")
    parser.add_argument("--per-class", type=int, default=8, help="training reviews per label")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--teacher-texts", type=int, default=0, help="time the MPNet teacher on this many one-sentence texts")
    parser.add_argument("--checkpoints-dir", type=Path, default=Path("data/checkpoints"), help="where MPNet is put together (a build's own)")
    parser.add_argument("--bfloat16", action="store_true", help="integrated gradients in bfloat16 (autocast), as served")
    args = parser.parse_args()
    reviews = read_archive(args.imdb)
    started = time.perf_counter()
    student = student_of(reviews, args.per_class, args.seed)
    print(f"trained in {time.perf_counter() - started:.0f} s on {cpu_name()}, {torch.get_num_threads()} threads")
    rng = random.Random(args.seed)
    pool = [r.text for r in reviews if r.split == "test" and 6 <= len(split_sentences(r.text)) <= 14]
    texts, count = [], 0
    while count < args.sentences:
        texts.append(pool.pop(rng.randrange(len(pool))))
        count += len(split_sentences(texts[-1]))
    for steps in args.steps:
        wall, cpu = time.perf_counter(), time.process_time()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bfloat16):
            sentences = [s for text in texts for s in word_shares(student, text, steps=steps)]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        residual = np.array([s.residual for s in sentences])
        size = np.array([abs(s.contribution) for s in sentences])
        relative = residual / np.maximum(size, 0.01)  # a share near 0 would make any residual infinite
        noise = np.abs(np.concatenate([float32_shares(student, t) for t in texts]) - [s.contribution for s in sentences])
        print(json.dumps({
            "steps": steps, "bfloat16": args.bfloat16, "sentences": len(sentences), "reviews": len(texts),
            "residual_median": float(np.median(residual)), "residual_worst": float(residual.max()),
            "relative_median": float(np.median(relative)), "relative_worst": float(relative.max()),
            "share_median": float(np.median(size)), "served_noise_median": float(np.median(noise)),
            "served_noise_worst": float(noise.max()), "frame_median": float(np.median([abs(s.frame) for s in sentences])),
            "wall_s_per_sentence": wall / len(sentences), "cpu_s_per_sentence": cpu / len(sentences),
        }))  # fmt: skip
    if args.teacher_texts:
        firsts = [split_sentences(text)[0].text for text in pool[: args.teacher_texts]]
        teacher_seconds(student, firsts, args.steps[-1], args.checkpoints_dir)


def teacher_seconds(student: BertClassifier, texts: list[str], steps: int, checkpoints_dir: Path) -> None:
    location = checkpoints.resolve(MPNET, checkpoints_dir).location
    reader = BertClassifier.pretrained(BertConfig(base_model=location, pooling="cls", seed=0), resolve_device("cpu"))
    served = OneSentenceRouter(student, reader)
    wall, cpu_s = time.perf_counter(), time.process_time()
    for text in texts:
        word_shares(served, text, steps=steps)
    wall, cpu_s = time.perf_counter() - wall, time.process_time() - cpu_s
    print(json.dumps({"teacher": MPNET, "steps": steps, "texts": len(texts), "wall_s_per_text": wall / len(texts),
                      "cpu_s_per_text": cpu_s / len(texts)}))  # fmt: skip


if __name__ == "__main__":
    main()
