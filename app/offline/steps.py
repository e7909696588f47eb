"""The steps of ``textflix build``, in order: data, one training step per model, predict,
explain, evaluate, learning curve (``build_steps``); the distill recipe trains a teacher
and pseudo-labels unlabeled reviews before it trains the served BERT model. ``app.offline.pipeline`` runs them.

The per-review steps (predict, explain) find the reviews that still lack their rows and
commit in small batches, so a killed build redoes at most one batch. Their work is
``app.offline.review_work``'s, computed in this process or on Ray (``app.offline.work_engines``, ``--engine``).

Over 400 lines: every step of the build, each a small class, in the order they run.
"""

import logging
import random
import time

import numpy as np
from sklearn.model_selection import StratifiedKFold
from sqlalchemy import func, select
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from app.db import (
    Movie,
    Prediction,
    PseudoLabel,
    Review,
    Sentence,
    session_scope,
)
from app.offline.pipeline import BuildError, Pipeline, Step
from app.offline.review_work import EXPLAIN_TASKS, PREDICT_TASKS, Task
from app.offline.work_engines import run_tasks
from model.artifacts import read_meta, saved_fingerprint, update_meta
from model.bert import OFFSET, OFFSET_PER, TEMPERATURE, BertClassifier, TooManyFrozenLayers, gold_targets
from model.config import (
    CLS,
    DISTILL,
    SENTENCES,
    BertConfig,
    CalibrationConfig,
    ConfigGroup,
    RecipeConfig,
    Seeded,
    SplitConfig,
    TeacherConfig,
)
from model.curve import LEARNING_CURVE, point_text, series, spread
from model.data import RawReview, UnlabeledReview, balanced_sample, read_sst2, sample_unlabeled
from model.lengths import BAND_NAMES, band_accuracies, band_sizes, length_set
from model.metrics import accuracy, classification_report, fit_offset, fit_temperature, tempered_p_positive
from model.names import (
    CATALOGUE,
    DISPLAY_NAMES,
    EVAL,
    IMDB,
    LENGTHS,
    MAIN_MODEL,
    MODELS,
    POSITIVE,
    SST2,
    STUDENT,
    TEACHER,
    TRAIN,
)
from model.sentences import sentence_runs, split_sentences
from model.trained import CLASSIFIERS, Classifier, model_dir

log = logging.getLogger("textflix")
EXPLAIN_BLOCK = 4  # reviews per Ray block, and per write, in the explain step of the Ray engine
TRAINING_FACTS = "training"  # the key of a trained model's step facts in its facts file
CALIBRATION_DIR = "calibration"  # in the data directory: each fold's held-out scores
PSEUDO_LABEL_CHUNK = 16  # unlabeled reviews per teacher call and commit (MPNet on 2 CPU cores: ~2 s)


class ReadData(Step):
    name = "data"
    reads = ("the IMDB archive", "the movie metadata TSV")
    writes = ("movies", "reviews", "sentences", "run counts")

    def prepare(self, build: Pipeline) -> None:
        if not build.splits().eval:  # before hours of training and explaining, not at the evaluate step
            raise BuildError(
                "No test review is left for the evaluation set: the catalogue took them all (--titles "
                f"{build.settings.titles}, --max-words {build.settings.max_words}); lower either, so that "
                "the build can measure its models."
            )

    def run(self, build: Pipeline) -> None:
        splits = build.splits()
        with session_scope(build.engine) as session:
            for title_id in sorted(splits.title_ids_used):
                session.add(Movie(title_id=title_id, **splits.movies.get(title_id, {})))
            for split, reviews in ((TRAIN, splits.train), (CATALOGUE, splits.catalogue), (EVAL, splits.eval)):
                for raw in reviews:
                    review = Review(
                        title_id=raw.title_id, text=raw.text, label=raw.label, rating=raw.rating,
                        split=split, source=IMDB, source_key=raw.key, word_count=raw.word_count,
                    )  # fmt: skip
                    if split == CATALOGUE:
                        review.sentences = sentence_rows(raw.text)
                    session.add(review)
        build.update_run(
            counts={
                "titles": len(splits.title_ids),
                CATALOGUE: len(splits.catalogue),
                TRAIN: len(splits.train),
                EVAL: len(splits.eval),
                "duplicates_dropped": splits.dropped_duplicates,
            }
        )


class Train(Step):
    """Trains one model on the training reviews; its folder carries the model's fingerprint."""

    reads = ("training reviews",)
    frozen_flag = "--frozen-layers"  # the setting of the encoder layers it leaves as pretrained

    def __init__(self, model: str):
        self.name = model
        self.writes = (f"models/{model}",)
        self.kind = CLASSIFIERS.get(model)

    @property
    def groups(self) -> tuple[type[ConfigGroup], ...]:
        """The settings groups the model is made from: its fingerprint."""
        return (SplitConfig, self.kind.config_type)

    def fingerprint(self, build: Pipeline) -> str:
        return build.fingerprint(self.groups)

    def up_to_date(self, build: Pipeline) -> bool:
        return saved_fingerprint(model_dir(build.settings.models_dir, self.name)) == self.fingerprint(build)

    def run(self, build: Pipeline) -> dict | None:
        directory = model_dir(build.settings.models_dir, self.name)
        if self.up_to_date(build):  # e.g. by an earlier build into another database
            log.info("%s already trained in %s.", DISPLAY_NAMES.get(self.name, self.name), directory)
            return read_meta(directory).get(TRAINING_FACTS)
        started = time.perf_counter()
        config, facts = pretrained(build, self.config(build))
        _, texts, labels = build.training_set
        try:
            model = self.fit(build, config, texts, labels, build.progress)
        except TooManyFrozenLayers as error:
            raise BuildError(f"{self.frozen_flag} {config.frozen_layers} leaves nothing of {facts['base_model']} "
                             f"to train: {error}. Give a smaller {self.frozen_flag} (0: all trained).") from None  # fmt: skip
        facts = {**facts, "labelled": len(texts), "seed": config.seed, **self.facts(build, config)}
        # the config's base_model names the checkpoint, not where this machine unpacked it
        named = {"base_model": facts["base_model"]} if "base_model" in facts else {}
        model.save(directory, {"fingerprint": self.fingerprint(build), TRAINING_FACTS: facts, **named})
        log.info("%s trained in %.0f s, saved to %s.", DISPLAY_NAMES.get(self.name, self.name),
                 time.perf_counter() - started, directory)  # fmt: skip
        return facts

    def config(self, build: Pipeline) -> Seeded:
        return build.settings.group(self.kind.config_type)

    def fit(self, build: Pipeline, config: Seeded, texts: list[str], labels: list[str], progress: bool) -> Classifier:
        """The model trained on these labelled ``texts`` (all the training reviews, or a fold of them)."""
        return self.kind.train(texts, labels, config, build.device, progress)

    def facts(self, build: Pipeline, config: Seeded) -> dict:
        """What the run record and the model's folder say about this training, besides its checkpoint."""
        return {}


class TrainTeacher(Train):
    """The distill recipe's teacher: --teacher-model fine-tuned on the training reviews."""

    reads = ("training reviews", "the teacher checkpoint")
    frozen_flag = "--teacher-frozen-layers"

    def __init__(self):
        super().__init__(TEACHER)
        self.kind = BertClassifier

    def fingerprint(self, build: Pipeline) -> str:
        # the teacher's own settings, as config() makes them: the served model's (its epochs, its
        # length exponent) change what the teacher teaches, not the teacher
        return build.fingerprint((SplitConfig,), teacher=self.config(build).model_dump(mode="json"))

    def config(self, build: Pipeline) -> BertConfig:
        s = build.settings
        # The teacher reads whole texts, whatever the served model reads: what it knows across
        # sentences is what it has to teach a model that reads them one by one.
        pooling = CLS if s.pooling == SENTENCES else s.pooling
        return s.group(BertConfig).model_copy(
            update={"base_model": s.teacher_model, "epochs": s.teacher_epochs, "learning_rate": s.teacher_learning_rate,
                    "pooling": pooling, "frozen_layers": s.teacher_frozen_layers, "length_exponent": 0.0}
        )  # fmt: skip

    def fit(self, build: Pipeline, config: BertConfig, texts: list[str], labels: list[str], progress: bool) -> Classifier:
        return BertClassifier.train(texts, labels, config, build.device, progress, desc="Fine-tune teacher")


class PseudoLabelling(Step):
    """The teacher's probability of "positive" for a seeded sample of the archive's unlabeled
    reviews, stored a chunk at a time, so a killed build labels only what it had not."""

    name = "pseudo_label"
    reads = ("unlabeled reviews of the archive", f"models/{TEACHER}")
    writes = ("pseudo_labels",)

    def prepare(self, build: Pipeline) -> None:
        build.splits()

    def run(self, build: Pipeline) -> dict:
        s = build.settings
        pool = build.splits().unlabeled
        reviews = sample_unlabeled(pool, s.unlabeled, s.seed)
        cuts = sentence_cuts(reviews, s.teacher_cuts, s.seed)
        wanted = reviews + cuts
        with session_scope(build.engine) as session:
            done = set(session.scalars(select(PseudoLabel.source_key)))
        todo = [r for r in wanted if r.key not in done]
        log.info("Pseudo-labels: %d texts to label (unlabeled reviews and %d runs of their sentences), %d already done.",
                 len(todo), len(cuts), len(wanted) - len(todo))  # fmt: skip
        if todo:
            teacher = load_trained_bert(build, TEACHER)
            bar = tqdm(total=len(todo), desc="Teacher labels", unit="review", disable=not build.progress)
            for start in range(0, len(todo), PSEUDO_LABEL_CHUNK):
                chunk = todo[start : start + PSEUDO_LABEL_CHUNK]
                p_positive = teacher.predict_proba([r.text for r in chunk])[:, 1]
                with session_scope(build.engine) as session:
                    session.add_all(
                        PseudoLabel(source_key=r.key, text=r.text, p_positive=float(p)) for r, p in zip(chunk, p_positive)
                    )
                bar.update(len(chunk))
            bar.close()
        return {"unlabeled_pool": len(pool), "unlabeled": len(reviews), "teacher_cuts": len(cuts), "seed": s.seed,
                "labelled_by": TEACHER}  # fmt: skip


def sentence_cuts(reviews: list[UnlabeledReview], runs: int, seed: int) -> list[UnlabeledReview]:
    """``runs`` runs of consecutive sentences of each review (``sentence_runs``), each a text of
    its own, keyed by its review's key and the sentences it spans ("train/unsup/123_0#2-4")."""
    rng = random.Random(seed)
    cuts = []
    for review in reviews if runs else ():
        spans = split_sentences(review.text)
        for start, stop in sentence_runs(len(spans), runs, rng):
            text = review.text[spans[start].start : spans[stop - 1].end]
            cuts.append(UnlabeledReview(key=f"{review.key}#{start}-{stop}", text=text))
    return cuts


class TrainStudent(Train):
    """The distill recipe's served model: --base-model trained on the training reviews' gold
    labels plus the teacher's probabilities for the unlabeled reviews."""

    reads = ("training reviews", "pseudo_labels")

    @property
    def groups(self) -> tuple[type[ConfigGroup], ...]:
        return (SplitConfig, BertConfig, TeacherConfig, RecipeConfig)

    def config(self, build: Pipeline) -> BertConfig:
        return build.settings.group(BertConfig).model_copy(update={"epochs": build.settings.student_epochs})

    def fit(self, build: Pipeline, config: BertConfig, texts: list[str], labels: list[str], progress: bool) -> Classifier:
        soft = self.pseudo_labels(build)
        targets = gold_targets(labels) + [r.p_positive for r in soft]
        return BertClassifier.fit(
            texts + [r.text for r in soft], targets, config, build.device, progress, desc="Distil into BERT"
        )

    def facts(self, build: Pipeline, config: BertConfig) -> dict:
        with session_scope(build.engine) as session:
            teacher_labelled = session.scalar(select(func.count()).select_from(PseudoLabel))
        return {"recipe": DISTILL, "teacher": TEACHER, "teacher_labelled": teacher_labelled, "epochs": config.epochs}

    @staticmethod
    def pseudo_labels(build: Pipeline) -> list:
        with session_scope(build.engine) as session:
            return session.execute(select(PseudoLabel.text, PseudoLabel.p_positive).order_by(PseudoLabel.source_key)).all()


class Calibrate(Step):
    """Calibration of the served BERT model, in place and in scale, without test text:
    - its offset, added to its log-odds, makes its mean probability of "positive" over
      --prior-reviews unlabeled reviews the training reviews' share of positives (``fit_offset``):
      a model that reads too many reviews one way is set straight without labels;
    - its temperature is fitted to held-out scores: the training reviews split into
      --calibration-folds folds, the model trained again on all folds but one (and offset the
      same way) and scored on that one.
    Each fold's scores are kept, so a killed build redoes at most one fold."""

    name = "calibrate"

    def __init__(self, trainer: Train):
        self.trainer = trainer
        # it trains the same model again, fold by fold, and scores unlabeled reviews
        self.reads = (*trainer.reads, "unlabeled reviews of the archive")
        self.writes = (f"models/{trainer.name}: offset, temperature",)

    def up_to_date(self, build: Pipeline) -> bool:
        try:
            meta = read_meta(model_dir(build.settings.models_dir, self.trainer.name))
        except FileNotFoundError:
            return False
        if not build.settings.prior_reviews:
            return TEMPERATURE in meta
        return TEMPERATURE in meta and OFFSET in meta and meta.get(OFFSET_PER) == build.settings.offset_per

    def prepare(self, build: Pipeline) -> None:
        if build.settings.prior_reviews:
            build.splits()

    def run(self, build: Pipeline) -> dict:
        s = build.settings
        _, texts, labels = build.training_set
        share = labels.count(POSITIVE) / len(labels)
        unlabeled = prior_texts(build)
        facts = {"folds": 0, TEMPERATURE: 1.0}
        if s.calibration_folds >= 2:
            scores = self.held_out_scores(build, texts, labels, unlabeled, share)
            temperature = fit_temperature(scores, labels)
            raw, calibrated = (classification_report(labels, tempered_p_positive(scores, t)) for t in (1.0, temperature))
            log.info("Calibration: temperature %.2f; on held-out folds of the training reviews ECE %.3f before, %.3f after.",
                     temperature, raw["ece"], calibrated["ece"])  # fmt: skip
            facts = {"folds": s.calibration_folds, TEMPERATURE: temperature, "held_out_accuracy": raw["accuracy"],
                     "held_out_ece": raw["ece"], "held_out_ece_calibrated": calibrated["ece"]}  # fmt: skip
        served = load_trained_bert(build, self.trainer.name)  # fitted afresh, whatever an earlier calibration wrote
        offset = set_prior_offset(served, unlabeled, share, s.offset_per, facts[TEMPERATURE])
        if unlabeled:
            log.info("Calibration: offset %+.3f to BERT's log-odds per %s, so that its mean probability of positive "
                     "over %d unlabeled reviews is %.2f, the training reviews' share.",
                     offset, s.offset_per, len(unlabeled), share)  # fmt: skip
        meta = {TEMPERATURE: facts[TEMPERATURE], OFFSET: offset, OFFSET_PER: s.offset_per}
        update_meta(model_dir(s.models_dir, self.trainer.name), meta)
        return {**facts, OFFSET: offset, OFFSET_PER: s.offset_per, "prior_reviews": len(unlabeled), "share_positive": share}

    def held_out_scores(
        self, build: Pipeline, texts: list[str], labels: list[str], unlabeled: list[str], share: float
    ) -> np.ndarray:
        """Each training review's scores from the model trained without its fold, offset as that model's own."""
        folds = build.settings.calibration_folds
        config, _ = pretrained(build, self.trainer.config(build))
        kept = build.settings.data_dir / CALIBRATION_DIR / build.fingerprint((*self.trainer.groups, CalibrationConfig))
        kept.mkdir(parents=True, exist_ok=True)
        scores = np.empty((len(texts), 2))
        splits = StratifiedKFold(folds, shuffle=True, random_state=config.seed).split(texts, labels)
        for fold, (fit, held) in enumerate(tqdm(list(splits), desc="Calibrate", unit="fold", disable=not build.progress)):
            path = kept / f"fold-{fold + 1}-of-{folds}.npy"
            if not path.is_file():
                model = self.trainer.fit(build, config, [texts[i] for i in fit], [labels[i] for i in fit], False)
                set_prior_offset(model, unlabeled, share, build.settings.offset_per)
                np.save(path.with_suffix(".part.npy"), model.logits([texts[i] for i in held]))
                path.with_suffix(".part.npy").replace(path)
            scores[held] = np.load(path)
        return scores


def prior_texts(build: Pipeline) -> list[str]:
    """The unlabeled reviews BERT's offset is fitted on: a seeded sample of --prior-reviews."""
    s = build.settings
    if not s.prior_reviews:
        return []
    return [r.text for r in sample_unlabeled(build.splits().unlabeled, s.prior_reviews, s.seed)]


def set_prior_offset(
    model: BertClassifier, unlabeled: list[str], share: float, offset_per: str, temperature: float = 1.0
) -> float:
    """Give ``model`` the offset, added ``offset_per`` sentence or text to its log-odds, that makes
    its mean probability of "positive" over the ``unlabeled`` texts ``share`` (none: 0); returns it."""
    model.offset, model.offset_per = 0.0, offset_per
    if unlabeled:
        scores, units = model.raw_scores(unlabeled)
        model.offset = fit_offset(scores, share, temperature, units)
    return model.offset


def pretrained(build: Pipeline, config: Seeded) -> tuple[Seeded, dict]:
    """``config`` pointing at where its pretrained checkpoint loads from (a model without one
    is left as it is), and the facts of that checkpoint for the run record."""
    name = getattr(config, "base_model", None)
    if name is None:
        return config, {}
    checkpoint = build.checkpoint(name)
    facts = {"base_model": name, "checkpoint_sha256": checkpoint.sha256} if checkpoint.sha256 else {"base_model": name}
    return config.model_copy(update={"base_model": checkpoint.location}), facts


def load_trained_bert(build: Pipeline, name: str) -> BertClassifier:
    try:
        return BertClassifier.load(model_dir(build.settings.models_dir, name), build.device)
    except FileNotFoundError:
        raise BuildError(f"No trained {name} model in {build.settings.models_dir}: run `textflix build`.") from None


class Predict(Step):
    name = "predict"
    reads = ("catalogue and evaluation reviews", "models")
    writes = ("predictions",)

    def run(self, build: Pipeline) -> dict:
        return run_tasks(build, planned(build, PREDICT_TASKS, "Predict {model}: {todo} reviews to score"), per_block=1)


class Explain(Step):
    name = "explain"
    reads = ("catalogue reviews", "sentences", "models")
    writes = ("sentence_weights", "word_weights", "explanations")

    def run(self, build: Pipeline) -> dict:
        plan = planned(build, EXPLAIN_TASKS, "LIME {model} {level}s: {todo} reviews to explain")
        return run_tasks(build, plan, per_block=EXPLAIN_BLOCK)


def planned(build: Pipeline, tasks: list[Task], what: str) -> list[tuple[Task, list[int]]]:
    """Each task with the ids of the reviews that still lack its rows, each logged as ``what``."""
    plan = []
    with session_scope(build.engine) as session:
        for task in tasks:
            todo = task.pending(session)
            done = task.total(session) - len(todo)
            log.info(what.format(model=task.model, level=task.level, todo=len(todo)) + ", %d already done.", done)
            plan.append((task, todo))
    return plan


class Evaluate(Step):
    """Each model's report (accuracy, F1, confusion, ECE, reliability) on the evaluation reviews,
    the catalogue and, with --sst2, one-line reviews; and the length table (``model.lengths``)."""

    name = "evaluate"
    reads = ("predictions", "gold labels", "evaluation reviews", "SST-2", "models")
    writes = ("run metrics",)

    def prepare(self, build: Pipeline) -> None:
        if build.settings.sst2:  # a bad file stops the build before its training, not after
            read_sst2(build.settings.sst2)

    def up_to_date(self, build: Pipeline) -> bool:
        """Evaluated with this build's --sst2 (set or not), and by length: else evaluated again."""
        metrics = build.run_record().metrics
        return LENGTHS in metrics and (SST2 in metrics.get(MAIN_MODEL, {})) == bool(build.settings.sst2)

    def run(self, build: Pipeline) -> None:
        metrics = {name: {} for name in MODELS}
        with session_scope(build.engine) as session:
            for name in MODELS:
                for split in (EVAL, CATALOGUE):
                    rows = session.execute(
                        select(Review.label, Prediction.p_positive)
                        .join(Prediction, Prediction.review_id == Review.id)
                        .where(Review.split == split, Review.source == IMDB, Prediction.model == name)
                    ).all()
                    metrics[name][split] = classification_report([r.label for r in rows], [r.p_positive for r in rows])
        _, evaluation = evaluation_reviews(build)
        texts, labels, bands = length_set(*evaluation)
        short = read_sst2(build.settings.sst2) if build.settings.sst2 else None
        log.info("Evaluate: %d texts of the length table%s, for each model.", len(texts),
                 f" and {len(short[0])} SST-2 sentences" if short else "")  # fmt: skip
        lengths = {"bands": BAND_NAMES, "n": band_sizes(bands)}
        for name in MODELS:
            model = build.model(name)
            lengths[name] = band_accuracies(labels, model.predict_proba(texts)[:, 1], bands)
            if short:
                metrics[name][SST2] = report_on(model, *short)
        if build.settings.recipe == DISTILL:
            teacher = load_trained_bert(build, TEACHER)
            sets = {EVAL: evaluation, **({SST2: short} if short else {})}
            metrics[TEACHER] = {name: report_on(teacher, *texts_labels) for name, texts_labels in sets.items()}
        build.update_run(metrics={**metrics, LENGTHS: lengths})


def report_on(model: Classifier, texts: list[str], labels: list[str]) -> dict:
    """``model``'s classification report on labelled ``texts``."""
    return classification_report(labels, model.predict_proba(texts)[:, 1].tolist())


def evaluation_reviews(build: Pipeline, size: int | str = "all") -> tuple[list[int], tuple[list[str], list[str]]]:
    """The ids, texts and gold labels of the evaluation reviews: all of them, or a sample of ``size``
    seeded by the build's seed."""
    with session_scope(build.engine) as session:
        rows = session.execute(
            select(Review.id, Review.text, Review.label).where(Review.split == EVAL).order_by(Review.id)
        ).all()
    if size != "all" and size < len(rows):
        rows = sorted(random.Random(build.settings.seed).sample(rows, size))
    return [r.id for r in rows], ([r.text for r in rows], [r.label for r in rows])


# The unlabeled reviews (of --prior-reviews) each BERT of the learning curve is offset on: fewer
# than the served model's, as reading them is a large part of a point's cost.
CURVE_PRIOR_REVIEWS = 250


def curve_epochs(epochs: int, train_size: int, size: int) -> int:
    """The epochs a BERT of the learning curve trains on ``size`` reviews: as many optimisation steps
    as ``epochs`` over ``train_size`` (the build's own model) take, and at least ``epochs``. With 3
    epochs, 100 reviews are 19 steps, too few to learn from: MiniLM scored 0.664 with them and 0.834
    with 15 epochs (seed 42; model/README.md, "The learning curve")."""
    return max(epochs, round(epochs * train_size / size))


class LearningCurve(Step):
    """Evaluation accuracy against training-set size over --curve-seeds seeds: at each size and
    seed, each model retrained on a balanced sample of the archive's train split (the seed draws
    the sample and seeds the training). The fast models go to every size, the others up to
    --train-size, and beyond it only on CUDA. At --train-size the first seed is the build's own
    model, unless it learnt from more than the labelled reviews (the distill recipe's student)."""

    name = "curve"
    reads = ("the IMDB archive", "evaluation reviews", "run metrics")
    writes = (f"run metrics: {LEARNING_CURVE}",)
    doing = "the learning curve is being computed"

    def run(self, build: Pipeline) -> None:
        s = build.settings
        if not s.learning_curve:
            return
        pool = build.splits().train_pool
        sizes = [size for size in sorted(set(s.learning_curve)) if self.available(size, len(pool))]
        seeds = range(s.seed, s.seed + s.curve_seeds)
        # the accuracy of each seed, per size and model trained at that size
        runs = {(size, name): [] for size in sizes for name in MODELS if self.trains(build, name, size)}
        ids, evaluation = evaluation_reviews(build, s.curve_eval_size)
        own = self.labels_only_accuracies(build, ids)
        unlabeled = prior_texts(build)[:CURVE_PRIOR_REVIEWS]
        total, finished = len(runs) * len(seeds), 0
        progress = tqdm(total=total, desc="Learning curve", unit="model", disable=not build.progress)
        build.step_progress(finished, total, "models")
        with logging_redirect_tqdm(), progress:  # each size's log line above the bar, not inside it
            for size in sizes:
                for seed in seeds:
                    sample = balanced_sample(pool, size, random.Random(seed))
                    for name in (name for name in MODELS if (size, name) in runs):
                        if size == s.train_size and seed == s.seed and name in own:
                            runs[size, name].append(own[name])
                        else:
                            trained = self.retrained_accuracy(build, name, seed, sample, evaluation, unlabeled)
                            runs[size, name].append(trained)
                        progress.update()
                        finished += 1
                        build.step_progress(finished, total, "models")
                log.info(
                    "Learning curve at %d reviews, %d seeds: %s.", size, len(seeds),
                    ", ".join(f"{DISPLAY_NAMES[name]} {point_text(*spread(runs.get((size, name))), 'not trained')}"
                              for name in MODELS),
                )  # fmt: skip
        curve = {name: series([runs.get((size, name)) for size in sizes]) for name in MODELS}
        build.update_run(metrics={LEARNING_CURVE: {"sizes": sizes, "seeds": len(seeds), "n": len(ids), **curve}})

    @staticmethod
    def available(size: int, pool: int) -> bool:
        if size > pool:
            log.info("Learning curve: %d training reviews wanted, only %d exist; size skipped.", size, pool)
        return size <= pool

    @staticmethod
    def trains(build: Pipeline, name: str, size: int) -> bool:
        """Whether model ``name`` is trained at ``size``: beyond --train-size only a fast one, or on CUDA."""
        return CLASSIFIERS[name].fast_to_train or size <= build.settings.train_size or build.device.type == "cuda"

    @staticmethod
    def labels_only_accuracies(build: Pipeline, ids: list[int]) -> dict[str, float]:
        """The accuracy on the reviews ``ids`` of each model the build trained on the labelled reviews
        alone, from its stored predictions."""
        distilled = {STUDENT} if build.settings.recipe == DISTILL else set()
        wanted, own = set(ids), {}
        with session_scope(build.engine) as session:
            for name in (name for name in MODELS if name not in distilled):
                rows = session.execute(
                    select(Review.id, Review.label, Prediction.p_positive)
                    .join(Prediction, Prediction.review_id == Review.id)
                    .where(Review.split == EVAL, Prediction.model == name)
                ).all()
                rows = [r for r in rows if r.id in wanted]
                own[name] = accuracy([r.label for r in rows], [r.p_positive for r in rows])
        return own

    @staticmethod
    def retrained_accuracy(
        build: Pipeline,
        name: str,
        seed: int,
        sample: list[RawReview],
        evaluation: tuple[list[str], list[str]],
        unlabeled: list[str],
        epochs: int | None = None,
    ) -> float:
        """Model ``name`` trained on ``sample`` with ``seed`` (a BERT offset on ``unlabeled`` as the
        build's is, and trained for ``epochs``, by default as many steps as the build's own:
        ``curve_epochs``): its accuracy on the evaluation set."""
        kind = CLASSIFIERS[name]
        config = build.settings.group(kind.config_type)
        update = {"seed": seed}
        if isinstance(config, BertConfig):
            update["epochs"] = epochs or curve_epochs(config.epochs, build.settings.train_size, len(sample))
        config, _ = pretrained(build, config.model_copy(update=update))
        labels = [r.label for r in sample]
        model = kind.train([r.text for r in sample], labels, config, build.device, False)
        if isinstance(model, BertClassifier):
            set_prior_offset(model, unlabeled, labels.count(POSITIVE) / len(labels), build.settings.offset_per)
        texts, gold = evaluation
        return accuracy(gold, model.predict_proba(texts)[:, 1])


# `textflix up` serves the site once this step is done: the steps after it feed /about only, and a
# background build does them while the site is up.
LAST_STEP_OF_THE_SITE = Explain.name


def build_steps(recipe: str) -> list[Step]:
    """The steps of a build with ``recipe`` (model.config.RecipeConfig), in order."""
    if recipe == DISTILL:
        others = [Train(model) for model in MODELS if model != STUDENT]
        served = TrainStudent(STUDENT)
        training = [*others, TrainTeacher(), PseudoLabelling(), served]
    else:
        training = [Train(model) for model in MODELS]
        served = training[MODELS.index(MAIN_MODEL)]
    return [ReadData(), *training, Calibrate(served), Predict(), Explain(), Evaluate(), LearningCurve()]


def sentence_rows(text: str) -> list[Sentence]:
    return [
        Sentence(position=i, start=span.start, end=span.end, text=span.text)
        for i, span in enumerate(split_sentences(text))
    ]
