"""The training steps: one per model (``Train``), and the distill recipe's teacher
(``TrainTeacher``), its pseudo-labels for unlabeled reviews (``PseudoLabelling``) and the served
model it teaches (``TrainStudent``). Also what the later steps need of the models: a config pointing
at its pretrained checkpoint (``pretrained``), and a trained BERT loaded (``load_trained_bert``)."""

__all__ = ["PSEUDO_LABEL_CHUNK", "TrainTeacher", "label_chunks", "load_trained_bert", "pretrained", "reading_cap",
           "sentence_cuts"]  # fmt: skip

import logging
import random
import time
from collections.abc import Callable, Iterator

from sqlalchemy import func, select
from tqdm import tqdm

from app.db import PseudoLabel, session_scope
from app.offline.estimates import CHARS_PER_TOKEN, TRAINING_PASSES, Work, capped_chars, network_shape
from app.offline.pipeline import BuildError, Pipeline, Step
from model.artifacts import read_meta, saved_fingerprint
from model.bert import BertClassifier, TooManyFrozenLayers
from model.checkpoints import CheckpointError
from model.config import (
    CLS,
    DISTILL,
    SENTENCE_WINDOWS,
    SENTENCES,
    TOGETHER,
    BertConfig,
    ConfigGroup,
    RecipeConfig,
    Seeded,
    SplitConfig,
    TeacherConfig,
)
from model.data import UnlabeledReview, sample_unlabeled
from model.fine_tuning import gold_targets
from model.names import DISPLAY_NAMES, TEACHER
from model.sentences import sentence_runs, split_sentences
from model.trained import CLASSIFIERS, Classifier, model_dir

log = logging.getLogger("textflix")
Report = Callable[[int, int], None] | None  # hears a training's progress: done, total
TRAINING_FACTS = "training"  # the key of a trained model's step facts in its facts file
PSEUDO_LABEL_CHUNK = 16  # unlabeled reviews per teacher call and commit (MPNet on 2 CPU cores: ~2 s)


class Train(Step):
    """Trains one model on the training reviews; its folder carries the model's fingerprint."""

    reads = ("training reviews",)
    frozen_setting = "frozen_layers"  # the setting of the encoder layers it leaves as pretrained

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
            model = self.fit(build, config, texts, labels, build.progress, reporter(build, self.kind.training_unit))
        except TooManyFrozenLayers as error:
            raise BuildError(f"{self.frozen_setting}={config.frozen_layers} leaves nothing of {facts['base_model']} to train: "
                             f"{error}. Give a smaller one: --set {self.frozen_setting}=N (0: all trained).") from None  # fmt: skip
        facts = {**facts, "labelled": len(texts), "seed": config.seed, **self.facts(build, config)}
        # the config's base_model names the checkpoint, not where this machine unpacked it
        named = {"base_model": facts["base_model"]} if "base_model" in facts else {}
        model.save(directory, {"fingerprint": self.fingerprint(build), TRAINING_FACTS: facts, **named})
        log.info("%s trained in %.0f s, saved to %s.", DISPLAY_NAMES.get(self.name, self.name),
                 time.perf_counter() - started, directory)  # fmt: skip
        return facts

    def config(self, build: Pipeline) -> Seeded:
        return build.settings.group(self.kind.config_type)

    def fit(
        self, build: Pipeline, config: Seeded, texts: list[str], labels: list[str], progress: bool,
        report: Report = None,
    ) -> Classifier:
        """The model trained on these labelled ``texts`` (all the training reviews, or a fold of them);
        ``report``: what hears its progress (``reporter``: the build's own model; None: a calibration fold)."""
        return self.kind.train(texts, labels, config, build.device, progress, report=report)

    def work(self, build: Pipeline) -> Work | None:
        if self.up_to_date(build):
            return Work(self.name, 0.0, trains=True)
        config = self.config(build)
        texts = self.texts(build)
        if isinstance(config, BertConfig):
            return bert_training(build, self.name, config, texts)
        return Work(self.name, capped_chars(texts, None), trains=True)

    def texts(self, build: Pipeline) -> list[str]:
        """The texts the model trains on."""
        return build.training_set[1]

    def facts(self, build: Pipeline, config: Seeded) -> dict:
        """What the run record and the model's folder say about this training, besides its checkpoint."""
        return {}


class TrainTeacher(Train):
    """The distill recipe's teacher: teacher_model fine-tuned on the training reviews."""

    reads = ("training reviews", "the teacher checkpoint")
    frozen_setting = "teacher_frozen_layers"

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

    def fit(
        self, build: Pipeline, config: BertConfig, texts: list[str], labels: list[str], progress: bool,
        report: Report = None,
    ) -> Classifier:
        return BertClassifier.train(
            texts, labels, config, build.device, progress, desc="Fine-tune teacher", report=report
        )


class PseudoLabelling(Step):
    """The teacher's probability of "positive" for a seeded sample of the archive's unlabeled
    reviews, stored a chunk at a time, so a killed build labels only what it had not."""

    name = "pseudo_label"
    reads = ("unlabeled reviews of the archive", f"models/{TEACHER}")
    writes = ("pseudo_labels",)

    def prepare(self, build: Pipeline) -> None:
        if not build.settings.label_reviews and not build.settings.teacher_cuts:
            raise BuildError("--set label_reviews=false with --set teacher_cuts=0 leaves the teacher nothing to label: "
                             "give --set teacher_cuts=N (runs of each unlabeled review) or --set label_reviews=true.")  # fmt: skip
        build.splits()

    def run(self, build: Pipeline) -> dict:
        s = build.settings
        pool = build.splits().unlabeled
        reviews, whole, cuts = self.wanted(build)
        todo = self.todo(build)
        log.info("Pseudo-labels: %d texts to label (%d unlabeled reviews and %d runs of their sentences), %d already done.",
                 len(todo), len(whole), len(cuts), len(whole) + len(cuts) - len(todo))  # fmt: skip
        if todo:
            teacher = load_trained_bert(build, TEACHER)
            bar = tqdm(total=len(todo), desc="Teacher labels", unit="review", disable=not build.progress)
            build.step_progress(0, len(todo), "labels")
            for chunk in label_chunks(todo):
                p_positive = teacher.predict_proba([r.text for r in chunk])[:, 1]
                with session_scope(build.engine) as session:
                    session.add_all(
                        PseudoLabel(source_key=r.key, text=r.text, p_positive=float(p)) for r, p in zip(chunk, p_positive)
                    )
                bar.update(len(chunk))
                build.step_progress(bar.n, len(todo), "labels")
            bar.close()
        return {"unlabeled_pool": len(pool), "unlabeled": len(reviews), "reviews_labelled": len(whole),
                "teacher_cuts": len(cuts), "seed": s.seed, "labelled_by": TEACHER}  # fmt: skip

    @staticmethod
    def wanted(build: Pipeline) -> tuple[list[UnlabeledReview], list[UnlabeledReview], list[UnlabeledReview]]:
        """The seeded sample of unlabeled reviews, those of them the teacher labels whole, and the runs of
        their sentences it labels."""
        s = build.settings
        reviews = sample_unlabeled(build.splits().unlabeled, s.unlabeled, s.seed)
        return reviews, reviews if s.label_reviews else [], sentence_cuts(reviews, s.teacher_cuts, s.seed)

    def todo(self, build: Pipeline) -> list[UnlabeledReview]:
        """The texts to label that have no label in the database yet."""
        _, whole, cuts = self.wanted(build)
        with session_scope(build.engine) as session:
            done = set(session.scalars(select(PseudoLabel.source_key)))
        return [r for r in whole + cuts if r.key not in done]

    def work(self, build: Pipeline) -> Work | None:
        config = TrainTeacher().config(build)
        return bert_reading(build, TEACHER, config, [r.text for r in self.todo(build)])


def label_chunks(todo: list[UnlabeledReview]) -> Iterator[list[UnlabeledReview]]:
    """``todo`` in chunks of ``PSEUDO_LABEL_CHUNK``, shortest texts first: a chunk's texts are of a
    length, so a batch of them is little padding (scripts/bench_labels.py)."""
    todo = sorted(todo, key=lambda r: len(r.text))
    for start in range(0, len(todo), PSEUDO_LABEL_CHUNK):
        yield todo[start : start + PSEUDO_LABEL_CHUNK]


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
    """The distill recipe's served model: base_model trained on the training reviews' gold
    labels plus the teacher's probabilities for the unlabeled reviews."""

    reads = ("training reviews", "pseudo_labels")

    @property
    def groups(self) -> tuple[type[ConfigGroup], ...]:
        return (SplitConfig, BertConfig, TeacherConfig, RecipeConfig)

    def config(self, build: Pipeline) -> BertConfig:
        return build.settings.group(BertConfig).model_copy(update={"epochs": build.settings.student_epochs})

    def fit(
        self, build: Pipeline, config: BertConfig, texts: list[str], labels: list[str], progress: bool,
        report: Report = None,
    ) -> Classifier:
        soft = self.pseudo_labels(build)
        targets = gold_targets(labels) + [r.p_positive for r in soft]
        together = None
        if build.settings.student_batches == TOGETHER:  # a run's key is its review's and "#start-stop"
            together = [*range(len(texts)), *(r.source_key.split("#")[0] for r in soft)]
        return BertClassifier.fit(
            texts + [r.text for r in soft], targets, config, build.device, progress, "Distil into BERT", together,
            report,
        )

    def texts(self, build: Pipeline) -> list[str]:
        """The training reviews and what the teacher labels (or will have labelled) for the student."""
        _, whole, cuts = PseudoLabelling.wanted(build)
        return build.training_set[1] + [r.text for r in whole + cuts]

    def facts(self, build: Pipeline, config: BertConfig) -> dict:
        with session_scope(build.engine) as session:
            teacher_labelled = session.scalar(select(func.count()).select_from(PseudoLabel))
        return {"recipe": DISTILL, "teacher": TEACHER, "teacher_labelled": teacher_labelled, "epochs": config.epochs}

    @staticmethod
    def pseudo_labels(build: Pipeline) -> list:
        with session_scope(build.engine) as session:
            rows = select(PseudoLabel.source_key, PseudoLabel.text, PseudoLabel.p_positive).order_by(PseudoLabel.source_key)
            return session.execute(rows).all()


def reporter(build: Pipeline, unit: str) -> Callable[[int, int], None]:
    """What the training of a step's model reports its progress to, in ``unit``: the run record's progress."""
    return lambda done, total: build.step_progress(done, total, unit)


def reading_cap(config: BertConfig) -> int:
    """About the most characters of a text that a BERT of ``config`` reads (its windows' worth)."""
    return config.max_length * CHARS_PER_TOKEN * (SENTENCE_WINDOWS if config.pooling == SENTENCES else 1)


def bert_shape(build: Pipeline, checkpoint: str) -> tuple[float, int] | None:
    """``network_shape`` of the pretrained checkpoint named ``checkpoint``; None when it is not at hand."""
    try:
        return network_shape(build.checkpoint(checkpoint).location)
    except CheckpointError:
        return None


def bert_reading(build: Pipeline, network: str, config: BertConfig, texts: list[str]) -> Work:
    """The work of a BERT of ``config`` reading ``texts`` once."""
    shape = bert_shape(build, config.base_model)
    return Work(network, capped_chars(texts, reading_cap(config)), size=shape[0] if shape else None)


def reading_work(build: Pipeline, model: str, texts: list[str], chars: float | None = None) -> Work:
    """The work of ``model`` reading ``texts`` (or ``chars`` characters) once."""
    config = build.settings.group(CLASSIFIERS[model].config_type)
    if not isinstance(config, BertConfig):
        return Work(model, capped_chars(texts, None) if chars is None else chars)
    work = bert_reading(build, model, config, texts)
    return work if chars is None else Work(model, chars, size=work.size)


def bert_training(build: Pipeline, network: str, config: BertConfig, texts: list[str]) -> Work | None:
    """The work of training a BERT of ``config`` on ``texts``: its frozen layers read them once, its trained
    ones ``TRAINING_PASSES`` times an epoch (what its progress counts). None when its layers are not known."""
    shape = bert_shape(build, config.base_model)
    if shape is None and config.frozen_layers:
        return None
    size, layers = shape if shape else (None, 1)
    chars = capped_chars(texts, reading_cap(config))
    trained = (layers - config.frozen_layers) / layers
    counted = config.epochs * chars * TRAINING_PASSES * trained
    return Work(network, counted + chars * (1 - trained), counted=counted, size=size, trains=True)


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
