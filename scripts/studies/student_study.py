"""What does the distilled student learn from one teacher's labels, its settings varied and the teacher fixed?

A distill build's teacher and its pseudo-labels are most of its cost; the served student is
trained on them in minutes on a GPU. This study takes a build's labels once and trains the
student with other settings, judging each on the build's own sets: evaluation reviews, the
catalogue, SST-2 and the length table, with the build's offset (``set_prior_offset``).

1. ``export``, where the build is (needs its archive): everything the study reads, from a data
   directory built up to ``pseudo_label`` (``textflix build`` stopped there, or any later), in one
   gzipped JSON file:

       python scripts/studies/student_study.py export --data-dir D --imdb ../shared/data/aclImdb_v1.tar.gz \\
           --sst2 ../shared/data/sst2_dev.tsv --out S.json.gz

2. ``run``, anywhere (the files and a MiniLM checkpoint, no archive nor database): each variant
   with each study file, a line per run, appended to ``--out`` (runs may go in parallel, each a
   process of its own):

       python scripts/studies/student_study.py run S42.json.gz S43.json.gz --variants default cuts4 \\
           [--base-model PATH] [--device cuda] --out results.jsonl

   ``teacher-reads`` gives a study file the build's teacher's probabilities for every text of one
   sentence that the study judges, so that ``run`` also judges the served model of a build that
   hands such texts to its teacher (one_sentence_reader teacher, the default):

       python scripts/studies/student_study.py teacher-reads S42.json.gz --data-dir D --out S42-t.json.gz

   ``more-runs`` gives a study file more runs of each review (new ones, drawn at random as the
   build draws them), labelled by the build's teacher, so that variants may keep more than the
   build's ``teacher_cuts`` (a few minutes on a CPU; the teacher does not travel):

       python scripts/studies/student_study.py more-runs S42.json.gz --data-dir D --runs 8 --out S42-8.json.gz

3. ``summary``: a line per variant, each figure's mean ± std over the seeds:

       python scripts/studies/student_study.py summary results.jsonl

A variant names the unlabeled reviews it learns from (``unlabeled``: the first N of the build's
sample), how many of the teacher-labelled runs of each it keeps (``cuts``: the first K of those the
build labelled, so build with ``--set teacher_cuts=K``, the largest K), and any BertConfig value. The
results are in docs/studies/student.md.
"""

import argparse
import gzip
import json
import random
import statistics
import time
from pathlib import Path

import numpy as np
from scipy.special import expit, logit
from sqlalchemy import select

from app.db import PseudoLabel, Review, session_scope
from app.offline.pipeline import built_pipeline
from app.offline.steps.calibration import prior_texts, set_prior_offset
from app.offline.steps.evaluation import evaluation_reviews
from app.offline.steps.training import sentence_cuts
from model.bert import BertClassifier
from model.config import BertConfig
from model.data import read_sst2, sample_unlabeled
from model.devices import resolve_device
from model.fine_tuning import gold_targets
from model.lengths import BAND_NAMES, band_accuracies, length_set
from model.metrics import classification_report, spread
from model.names import CATALOGUE, IMDB, POSITIVE, TEACHER
from model.sentences import sentence_runs, split_sentences
from model.served import OneSentenceRouter
from model.trained import model_dir

# The CPU default as it was (two runs a review) and the levers tried against it; cuts4 won and is
# the CPU default now (app/offline/pipeline.py, CPU_RECIPE).
VARIANTS: dict[str, dict] = {
    "default": {"unlabeled": 2000, "cuts": 2},
    "cuts4": {"unlabeled": 2000, "cuts": 4},
    "cuts4-1500": {"unlabeled": 1500, "cuts": 4},
    "exp-0.75": {"unlabeled": 2000, "cuts": 2, "length_exponent": -0.75},
    # MiniLM's embeddings and lowest 2 of 6 layers as pretrained: a cheaper student, if it reads as well
    "frozen2": {"unlabeled": 2000, "cuts": 2, "frozen_layers": 2},
    # cuts4 with each review and its runs shuffled as one (student_batches together): a sixth less
    # training, SST-2 not shown to be as good (docs/studies/student.md)
    "cuts4-together": {"unlabeled": 2000, "cuts": 4, "together": True},
    # twice the runs of cuts4 (a study file given 8 by more-runs): does SST-2 go on rising with them?
    "cuts8": {"unlabeled": 2000, "cuts": 8},
    # cuts4 for three epochs or one: is the student's reading of short texts a matter of how long it trains?
    "cuts4-epochs3": {"unlabeled": 2000, "cuts": 4, "epochs": 3},
    "cuts4-epochs1": {"unlabeled": 2000, "cuts": 4, "epochs": 1},
    # cuts4-epochs1 with the teacher's log-odds doubled (a temperature of 0.5: surer targets), or at
    # twice the learning rate: does one epoch read short texts as well as two, or better?
    "cuts4-epochs1-sharp": {"unlabeled": 2000, "cuts": 4, "epochs": 1, "target_temperature": 0.5},
    "cuts4-epochs1-lr2": {"unlabeled": 2000, "cuts": 4, "epochs": 1, "learning_rate": 2e-4},
    # cuts4 without the unlabeled reviews themselves, only their runs: about half the student's
    # texts' tokens, and a teacher that would label no whole review. Are whole reviews read as well?
    "runs-only": {"unlabeled": 2000, "cuts": 4, "whole": False},
    # cuts4 at half the learning rate (a moving average of the weights and dropout off were tried
    # beside it at commit edd9149 and removed: docs/studies/student.md)
    "cuts4-lr5e-5": {"unlabeled": 2000, "cuts": 4, "learning_rate": 5e-5},
    # (the teacher's log-odds learnt by squared distance, cuts4-mse; the head first fitted on the
    # pretrained features, cuts4-lp (LP-FT), and its weights mixed with that start (WiSE-FT): tried
    # at commit a1402d5 and removed, docs/studies/student.md)
}
STUDY_KEYS = ("unlabeled", "cuts", "together", "target_temperature", "whole")  # a variant's keys that are not BertConfig's


def export(data_dir: Path, imdb: str, sst2: Path | None, out: Path) -> None:
    build = built_pipeline(data_dir, imdb)
    s = build.settings
    if not s.label_reviews:
        raise SystemExit(f"{data_dir} was built with label_reviews false (--set label_reviews=false): the study needs the teacher's labels of whole reviews.")
    reviews = sample_unlabeled(build.splits().unlabeled, s.unlabeled, s.seed)
    cuts = sentence_cuts(reviews, s.teacher_cuts, s.seed)
    with session_scope(build.engine) as session:
        p_of = dict(session.execute(select(PseudoLabel.source_key, PseudoLabel.p_positive)).all())
        catalogue = session.execute(
            select(Review.text, Review.label).where(Review.split == CATALOGUE, Review.source == IMDB).order_by(Review.id)
        ).all()
    missing = [r.key for r in reviews + cuts if r.key not in p_of]
    if missing:
        raise SystemExit(f"{data_dir}: {len(missing)} texts have no teacher label; build up to pseudo_label first.")
    # each unlabeled review with its cuts in the order they were drawn, a cut as where it starts in
    # its review, its length and its label (the file travels: it has to be small)
    text_of = {r.key: r.text for r in reviews}
    runs: dict[str, list] = {r.key: [] for r in reviews}
    for cut in cuts:
        review = cut.key.split("#")[0]
        runs[review].append([text_of[review].index(cut.text), len(cut.text), p_of[cut.key]])
    prior = prior_texts(build)
    _, texts, labels = build.training_set
    _, evaluation = evaluation_reviews(build)
    study = {
        "data_dir": str(data_dir),
        "seed": s.seed,
        "config": s.group(BertConfig).model_copy(update={"epochs": s.student_epochs}).model_dump(mode="json"),
        "train": [texts, labels],
        "unlabeled": [[r.text, p_of[r.key], runs[r.key]] for r in reviews],
        # the offset's reviews, as a count where they are the first of the unlabeled ones (the same seeded draw)
        "prior": len(prior) if prior == [r.text for r in reviews[: len(prior)]] else prior,
        "eval": list(evaluation),
        "catalogue": [[r.text for r in catalogue], [r.label for r in catalogue]],
        "sst2": list(read_sst2(sst2)) if sst2 else None,
    }
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(study, f)
    print(f"{out}: seed {s.seed}, {len(texts)} training reviews, {len(reviews)} unlabeled with {len(cuts)} runs, "
          f"{len(evaluation[0])} evaluation, {len(catalogue)} catalogue reviews", flush=True)  # fmt: skip


def more_runs(path: Path, data_dir: Path, runs: int, device_name: str, out: Path) -> None:
    """``path``'s study with up to ``runs`` runs of each review: its own, then new ones (``sentence_runs``
    with a generator of its own), labelled by the teacher of the build in ``data_dir``."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        study = json.load(f)
    rng = random.Random(f"more-runs {study['seed']}")
    wanted = []  # (review, start, length) of each new run
    for index, (text, _, own) in enumerate(study["unlabeled"]):
        spans = split_sentences(text)
        taken = {(start, length) for start, length, _ in own}
        for first, stop in sentence_runs(len(spans), 2 * runs, rng):  # some may be its own already
            start, length = spans[first].start, spans[stop - 1].end - spans[first].start
            if len(taken) < runs and (start, length) not in taken:
                taken.add((start, length))
                wanted.append((index, start, length))
    teacher = BertClassifier.load(model_dir(data_dir / "models", TEACHER), resolve_device(device_name))
    started = time.perf_counter()
    texts = [study["unlabeled"][r][0][start : start + length] for r, start, length in wanted]
    p_positive = teacher.predict_proba(texts)[:, 1] if texts else []
    for (review, start, length), p in zip(wanted, p_positive):
        study["unlabeled"][review][2].append([start, length, float(p)])
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(study, f)
    print(f"{out}: seed {study['seed']}, {len(wanted)} new runs labelled in {time.perf_counter() - started:.0f} s "
          f"(up to {runs} a review)", flush=True)  # fmt: skip


def student_data(study: dict, unlabeled: int, cuts: int, whole: bool = True) -> tuple[list[str], list[float], list]:
    """The texts a variant's student learns from, their targets (gold labels, then the teacher's)
    and a key per text that is the same for an unlabeled review and its runs; with ``whole``
    False, an unlabeled review's runs without the review."""
    texts, targets = list(study["train"][0]), gold_targets(study["train"][1])
    keys: list = list(range(len(texts)))
    for index, (text, p, runs) in enumerate(study["unlabeled"][:unlabeled]):
        key = f"unlabeled {index}"
        if whole:
            texts.append(text)
            targets.append(p)
            keys.append(key)
        for start, length, run_p in runs[:cuts]:
            texts.append(text[start : start + length])
            targets.append(run_p)
            keys.append(key)
    return texts, targets, keys


def train_and_judge(study: dict, variant: dict, base_model: str | None, device) -> dict:
    """The student of ``variant`` trained on ``study``'s labels, offset as the build's, and its figures."""
    config = BertConfig.model_validate(
        {**study["config"], **{k: v for k, v in variant.items() if k not in STUDY_KEYS}}
        | ({"base_model": base_model} if base_model else {})
    )
    texts, targets, keys = student_data(study, variant["unlabeled"], variant["cuts"], variant.get("whole", True))
    if "target_temperature" in variant:  # the teacher's labels only: the gold ones are 0 or 1
        gold = len(study["train"][0])
        p = np.clip(targets[gold:], 1e-7, 1 - 1e-7)
        targets[gold:] = expit(logit(p) / variant["target_temperature"]).tolist()
    started = time.perf_counter()
    together = keys if variant.get("together") else None
    model = BertClassifier.fit(texts, targets, config, device, progress=False, together=together)
    trained = time.perf_counter() - started
    labels = study["train"][1]
    prior = study["prior"]
    prior = [r[0] for r in study["unlabeled"][:prior]] if isinstance(prior, int) else prior
    set_prior_offset(model, prior, labels.count(POSITIVE) / len(labels))
    result = {"seed": study["seed"], "texts": len(texts), "train_s": round(trained, 1), "offset": model.calibration.offset}
    result.update(judge(study, model.predict_proba))
    if "teacher_reads" in study:  # the served model: the student with the teacher reading its texts of one sentence
        routed = judge(study, OneSentenceRouter(model, TeacherReads(study["teacher_reads"])).predict_proba)
        result.update({f"routed_{key}": value for key, value in routed.items()})
    result["judge_s"] = round(time.perf_counter() - started - trained, 1)
    return result


def judge(study: dict, predict_proba) -> dict:
    """Accuracy and ECE on the study's evaluation reviews, catalogue and SST-2, and the length table."""
    result = {}
    for name in ("eval", "catalogue", "sst2"):
        if study[name]:
            texts, gold = study[name]
            report = classification_report(gold, predict_proba(texts)[:, 1].tolist())
            result[name], result[f"{name}_ece"] = report["accuracy"], report["ece"]
    cut_texts, cut_labels, bands = length_set(*study["eval"])
    result["bands"] = band_accuracies(cut_labels, predict_proba(cut_texts)[:, 1], bands)
    return result


class TeacherReads:
    """The build's teacher as a student's ``one_sentence_reader``, from its probabilities of "positive" that
    ``teacher-reads`` stored: the router decides which texts it hands over (``model.served.OneSentenceRouter``)."""

    def __init__(self, p_positive: dict[str, float]):
        self.p_positive = p_positive

    def predict_proba(self, texts: list[str], max_tokens: int | None = None) -> np.ndarray:
        p = np.array([self.p_positive[text] for text in texts])
        return np.column_stack([1 - p, p])


def teacher_reads(path: Path, data_dir: Path, device_name: str, out: Path) -> None:
    """``path``'s study with the probability of "positive" that the teacher of the build in ``data_dir``
    gives every text of one sentence among those the study judges."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        study = json.load(f)
    judged = [*study["eval"][0], *study["catalogue"][0], *(study["sst2"] or [[]])[0], *length_set(*study["eval"])[0]]
    teacher = BertClassifier.load(model_dir(data_dir / "models", TEACHER), resolve_device(device_name))
    # the texts a served model hands its teacher, as the model decides (reads_alone, which asks nothing of its
    # own network): the teacher's network, given the teacher as its reader, stands in for the student
    served = OneSentenceRouter(teacher, teacher)
    alone = [text for text in dict.fromkeys(judged) if served.reads_alone(text)]
    started = time.perf_counter()
    study["teacher_reads"] = dict(zip(alone, map(float, teacher.predict_proba(alone)[:, 1])))
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(study, f)
    print(f"{out}: seed {study['seed']}, {len(alone)} texts of one sentence read by the teacher in "
          f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip


def run(paths: list[Path], variants: list[str], base_model: str | None, device_name: str, out: Path | None) -> None:
    device = resolve_device(device_name)
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            study = json.load(f)
        for name in variants:
            result = {"variant": name, **VARIANTS[name], **train_and_judge(study, VARIANTS[name], base_model, device)}
            bands = " / ".join(f"{a:.3f}" for a in result["bands"])
            print(f"{name}, seed {result['seed']}: eval {result['eval']:.3f}, catalogue {result['catalogue']:.3f}, "
                  f"SST-2 {result.get('sst2', float('nan')):.3f}, bands {bands}, ECE eval {result['eval_ece']:.3f} / "
                  f"SST-2 {result.get('sst2_ece', float('nan')):.3f}; {result['texts']} texts trained in "
                  f"{result['train_s']:.0f} s, judged in {result['judge_s']:.0f} s on {device}", flush=True)  # fmt: skip
            if "routed_eval" in result:
                bands = " / ".join(f"{a:.3f}" for a in result["routed_bands"])
                print(f"{name}, seed {result['seed']}, one-sentence texts to the teacher: eval {result['routed_eval']:.3f}, "
                      f"catalogue {result['routed_catalogue']:.3f}, SST-2 {result.get('routed_sst2', float('nan')):.3f}, "
                      f"bands {bands}, ECE eval {result['routed_eval_ece']:.3f} / "
                      f"SST-2 {result.get('routed_sst2_ece', float('nan')):.3f}", flush=True)  # fmt: skip
            if out:
                with open(out, "a") as f:
                    f.write(json.dumps(result) + "\n")


def summary(path: Path) -> None:
    """A line per variant of a results file: each figure's mean ± std over its seeds."""
    by_variant: dict[str, list[dict]] = {}
    for line in path.read_text().splitlines():
        result = json.loads(line)
        by_variant.setdefault(result["variant"], []).append(result)
    for name, results in by_variant.items():
        seeds = ", ".join(str(r["seed"]) for r in sorted(results, key=lambda r: r["seed"]))
        train_s = statistics.median(r["train_s"] for r in results)
        for prefix, what in (("", ""), ("routed_", ", one-sentence texts to the teacher")):
            if not all(f"{prefix}bands" in r for r in results):
                continue
            figures = ", ".join(
                f"{key} {spread([r[prefix + key] for r in results])}"
                for key in ("eval", "catalogue", "sst2", "eval_ece", "sst2_ece") if all(prefix + key in r for r in results)
            )  # fmt: skip
            bands = " / ".join(spread([r[f"{prefix}bands"][i] for r in results]) for i in range(len(BAND_NAMES)))
            print(f"{name}{what} (seeds {seeds}): {figures}; bands {bands}; training median {train_s:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    exporting = commands.add_parser("export", help="A built data directory's labels and sets, in one file.")
    exporting.add_argument("--data-dir", type=Path, required=True, help="Built up to pseudo_label at least.")
    exporting.add_argument("--imdb", required=True, help="The IMDB archive the database was built from.")
    exporting.add_argument("--sst2", type=Path, help="SST-2's dev.tsv, to judge short texts on.")
    exporting.add_argument("--out", type=Path, required=True, help="The study file to write (.json.gz).")
    running = commands.add_parser("run", help="Train and judge each variant on each study file.")
    running.add_argument("studies", type=Path, nargs="+", help="Study files of export, a seed each.")
    running.add_argument("--variants", nargs="+", default=["default"], choices=list(VARIANTS))
    running.add_argument("--base-model", help="The student's checkpoint, a path or id (default: the build's).")
    running.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    running.add_argument("--out", type=Path, help="Append each run's figures to this JSON-lines file.")
    adding = commands.add_parser("more-runs", help="A study file with more runs a review, labelled by the teacher.")
    adding.add_argument("study", type=Path, help="A study file of export.")
    adding.add_argument("--data-dir", type=Path, required=True, help="The build the study file was exported from.")
    adding.add_argument("--runs", type=int, required=True, help="Runs a review, at most, in the new file.")
    adding.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    adding.add_argument("--out", type=Path, required=True, help="The study file to write (.json.gz).")
    reads = commands.add_parser("teacher-reads", help="A study file with the teacher's reading of its one-sentence texts.")
    reads.add_argument("study", type=Path, help="A study file of export.")
    reads.add_argument("--data-dir", type=Path, required=True, help="The build the study file was exported from.")
    reads.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    reads.add_argument("--out", type=Path, required=True, help="The study file to write (.json.gz).")
    summing = commands.add_parser("summary", help="Each variant's figures over the seeds of a results file.")
    summing.add_argument("results", type=Path, help="The JSON-lines file of run --out.")
    args = parser.parse_args()
    if args.command == "export":
        export(args.data_dir, args.imdb, args.sst2, args.out)
    elif args.command == "more-runs":
        more_runs(args.study, args.data_dir, args.runs, args.device, args.out)
    elif args.command == "teacher-reads":
        teacher_reads(args.study, args.data_dir, args.device, args.out)
    elif args.command == "run":
        run(args.studies, args.variants, args.base_model, args.device, args.out)
    else:
        summary(args.results)


if __name__ == "__main__":
    main()
