"""What labelling the unlabeled texts costs the teacher, in the build's order or shortest first.

The pseudo_label step has the teacher label texts a chunk of ``PSEUDO_LABEL_CHUNK`` at a time,
each chunk committed as it is done. In the order the texts are drawn, a chunk mixes runs of one
sentence with runs of three and whole reviews, and each batch is padded to its longest text;
``label_chunks`` takes them shortest first. For a seeded sample of the texts a built data
directory's teacher labelled, prints one line per order: the median seconds over ``--repeats``
passes (the two orders in turn), the padded tokens, and the ratio against the build's order,
then how far the two orders' probabilities are apart:

    python scripts/bench_labels.py --data-dir D [--texts 1600] [--repeats 3]
"""

import argparse
import random
import statistics
import time
from pathlib import Path

import numpy as np
from sqlalchemy import literal_column, select

from app.db import PseudoLabel, make_engine, session_scope
from app.offline.steps.training import PSEUDO_LABEL_CHUNK, label_chunks
from model.bert import BertClassifier
from model.data import UnlabeledReview
from model.devices import resolve_device
from model.names import TEACHER
from model.trained import model_dir


def in_drawn_order(texts: list[UnlabeledReview]) -> list[list[UnlabeledReview]]:
    return [texts[start : start + PSEUDO_LABEL_CHUNK] for start in range(0, len(texts), PSEUDO_LABEL_CHUNK)]


def padded_tokens(teacher: BertClassifier, chunks: list[list[UnlabeledReview]]) -> int:
    """The tokens the teacher's forward passes read, padding included."""
    total = 0
    for chunk in chunks:
        ids, _ = teacher.read_units([r.text for r in chunk])
        total += sum(len(ids[batch[-1]]) * len(batch) for batch in teacher._batches(ids, teacher.max_tokens))
    return total


def label(teacher: BertClassifier, chunks: list[list[UnlabeledReview]]) -> tuple[float, dict[str, float]]:
    started = time.perf_counter()
    p = {r.key: float(q) for chunk in chunks for r, q in zip(chunk, teacher.predict_proba([r.text for r in chunk])[:, 1])}
    return time.perf_counter() - started, p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="A build with a teacher and its labels.")
    parser.add_argument("--texts", type=int, default=1600, help="Texts of the build's pseudo_labels, sampled.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    args = parser.parse_args()
    engine = make_engine(f"sqlite:///{args.data_dir / 'textflix.db'}")
    with session_scope(engine) as session:
        # in the order the build labelled them (SQLite's rowid)
        rows = session.execute(select(PseudoLabel.source_key, PseudoLabel.text).order_by(literal_column("rowid"))).all()
    picked = sorted(random.Random(0).sample(range(len(rows)), min(args.texts, len(rows))))
    texts = [UnlabeledReview(key=rows[i][0], text=rows[i][1]) for i in picked]
    teacher = BertClassifier.load(model_dir(args.data_dir / "models", TEACHER), resolve_device(args.device))
    orders = {"drawn order": in_drawn_order(texts), "shortest first": list(label_chunks(texts))}
    label(teacher, orders["drawn order"][:4])  # warm up
    times: dict[str, list[float]] = {name: [] for name in orders}
    probabilities = {}
    for _ in range(args.repeats):
        for name, chunks in orders.items():
            elapsed, probabilities[name] = label(teacher, chunks)
            times[name].append(elapsed)
    first = statistics.median(times["drawn order"])
    for name, chunks in orders.items():
        median = statistics.median(times[name])
        print(f"{name}: {median:.1f} s for {len(texts)} texts (median of {args.repeats}), "
              f"{padded_tokens(teacher, chunks):,} padded tokens, {first / median:.2f}x the drawn order", flush=True)  # fmt: skip
    apart = np.abs(np.array([probabilities["drawn order"][r.key] - probabilities["shortest first"][r.key] for r in texts]))
    print(f"probabilities apart: median {np.median(apart):.4f}, most {apart.max():.4f}", flush=True)


if __name__ == "__main__":
    main()
