"""Does the teacher serve one-sentence texts better than the student? The served model both ways, and their cost.

The distilled student stays 3-5 points under its teacher on SST-2 whatever its own settings
(docs/studies/one-sentence-reader.md), so a distill build's served BERT hands its texts of one sentence to the teacher
(one_sentence_reader teacher, ``model.served.OneSentenceRouter``). This judges, on a
distill build, the served model with its own network reading everything (``own``, the
build's student as one_sentence_reader student serves it) and with the teacher reading the
texts of one sentence, on SST-2 dev and on the length table of the build's evaluation reviews; and
times a one-sentence text through each, one call at a time, as the API serves it:

    HF_HUB_OFFLINE=1 python scripts/studies/teacher_for_one_sentence.py --data-dir D \\
        --imdb ../shared/data/aclImdb_v1.tar.gz --sst2 ../shared/data/sst2_dev.tsv
"""

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from app.offline.pipeline import built_pipeline
from app.offline.steps.evaluation import evaluation_reviews
from app.offline.steps.training import load_trained_bert
from model.data import read_sst2
from model.lengths import BAND_NAMES, band_accuracies, length_set
from model.metrics import classification_report
from model.names import BERT, TEACHER
from model.served import OneSentenceRouter

TIMED_CALLS = 30


def both_ways(served, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """P(positive) of the served model's own network, and of the served model (the teacher reading one sentence)."""
    return served.own.predict_proba(texts)[:, 1], served.predict_proba(texts)[:, 1]


def seconds_per_call(predict_proba, text: str) -> float:
    predict_proba([text])  # warm
    times = []
    for _ in range(TIMED_CALLS):
        started = time.perf_counter()
        predict_proba([text])
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="A distill build, complete up to its student.")
    parser.add_argument("--imdb", required=True, help="The IMDB archive the database was built from.")
    parser.add_argument("--sst2", type=Path, required=True, help="SST-2's dev.tsv.")
    args = parser.parse_args()
    build = built_pipeline(args.data_dir, args.imdb)
    # the teacher reads the texts of one sentence, whatever the build's one_sentence_reader
    served = OneSentenceRouter(load_trained_bert(build, BERT), load_trained_bert(build, TEACHER))

    texts, labels = read_sst2(args.sst2)
    p_student, p_routed = both_ways(served, texts)
    alone = sum(map(served.reads_alone, texts))
    for name, p in (("student", p_student), ("routed", p_routed)):
        report = classification_report(labels, p.tolist())
        print(f"SST-2, {name}: accuracy {report['accuracy']:.3f}, ECE {report['ece']:.3f} "
              f"({alone} of {len(texts)} sentences are one sentence to the splitter)", flush=True)  # fmt: skip

    cut_texts, cut_labels, bands = length_set(*evaluation_reviews(build)[1])
    p_student, p_routed = both_ways(served, cut_texts)
    for name, p in (("student", p_student), ("routed", p_routed)):
        accuracies = " / ".join(f"{a:.3f}" for a in band_accuracies(cut_labels, p, bands))
        print(f"Length table ({' / '.join(BAND_NAMES)} sentences), {name}: {accuracies}", flush=True)

    sentence = texts[0]
    for name, predict_proba in (("student", served.own.predict_proba), ("teacher", served.predict_proba)):
        print(f"One sentence, one call, {name}: median {1000 * seconds_per_call(predict_proba, sentence):.1f} ms "
              f"of {TIMED_CALLS} on {served.own.device}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
