"""The calibration of the served BERT model (``Calibrate``): its offset, fitted on unlabeled
reviews, and its temperature, fitted on held-out folds of the training reviews; and which network
reads a text of one sentence. The offset is fitted the same way for any BERT (``set_prior_offset``
on ``prior_texts``), as the learning curve's are."""

__all__ = ["prior_texts", "set_prior_offset"]

import logging
from dataclasses import replace

import numpy as np
from sklearn.model_selection import StratifiedKFold
from tqdm import tqdm

from app.offline.estimates import Work
from app.offline.pipeline import Pipeline, Step
from app.offline.steps.training import Train, load_trained_bert, pretrained, reading_work
from model.artifacts import read_meta, update_meta
from model.bert import OFFSET, OFFSET_PER, ONE_SENTENCE_READER, TEMPERATURE, BertClassifier, one_sentence_reader_of
from model.config import PER_SENTENCE, CalibrationConfig
from model.data import sample_unlabeled
from model.files import atomic_write
from model.metrics import classification_report, fit_offset, fit_temperature, tempered_p_positive
from model.trained import model_dir

log = logging.getLogger("textflix")
CALIBRATION_DIR = "calibration"  # in the data directory: each fold's held-out scores


class Calibrate(Step):
    """Calibration of the served BERT model, in place and in scale, without test text:
    - its offset, added to its log-odds, makes its mean probability of "positive" over
      prior_reviews unlabeled reviews the corpus's share of positives among its labelled reviews
      (``Splits.share_positive``; ``fit_offset``): a model that reads too many reviews one way is set
      straight without labels, and a balanced training sample of a corpus that leans one way does not
      tilt every prediction toward even odds;
    - its temperature is fitted to held-out scores: the training reviews split into
      calibration_folds folds, the model trained again on all folds but one (and offset the
      same way) and scored on that one.
    Each fold's scores are kept, so a killed build redoes at most one fold.
    It also records which model the served one hands its texts of one sentence to
    (one_sentence_reader, ``one_sentence_reader``), as its temperature and offset, in its folder."""

    name = "calibrate"

    def __init__(self, trainer: Train):
        self.trainer = trainer
        # it trains the same model again, fold by fold, and scores unlabeled reviews
        self.reads = (*trainer.reads, "unlabeled reviews of the archive")
        self.writes = (f"models/{trainer.name}: offset, temperature, one-sentence reader",)

    def up_to_date(self, build: Pipeline) -> bool:
        try:
            meta = read_meta(model_dir(build.settings.models_dir, self.trainer.name))
        except FileNotFoundError:
            return False
        if meta.get(ONE_SENTENCE_READER) != one_sentence_reader(build):
            return False
        if not build.settings.prior_reviews:
            return TEMPERATURE in meta
        return TEMPERATURE in meta and OFFSET in meta and meta.get(OFFSET_PER) == PER_SENTENCE

    def prepare(self, build: Pipeline) -> None:
        if build.settings.prior_reviews:
            build.splits()

    def work(self, build: Pipeline) -> Work | None:
        """The offset's scoring of the unlabeled reviews; None with folds, whose trainings are not estimated."""
        if build.settings.calibration_folds >= 2:
            return None
        return reading_work(build, self.trainer.name, prior_texts(build))

    def run(self, build: Pipeline) -> dict:
        s = build.settings
        _, texts, labels = build.training_set
        unlabeled = prior_texts(build)
        prior = corpus_prior(build) if unlabeled else {}  # read only where the offset matches it
        share = prior.get("share_positive")
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
        offset = set_prior_offset(served, unlabeled, share, facts[TEMPERATURE])
        if unlabeled:
            log.info("Calibration: offset %+.3f to BERT's log-odds per %s, so that its mean probability of positive "
                     "over %d unlabeled reviews is %.3f, the share of positives among the corpus's labelled reviews.",
                     offset, PER_SENTENCE, len(unlabeled), share)  # fmt: skip
        reader = one_sentence_reader(build)
        if reader:
            log.info("Texts of one sentence are read by the %s, longer ones by BERT.", reader)
        meta = {TEMPERATURE: facts[TEMPERATURE], OFFSET: offset, OFFSET_PER: PER_SENTENCE, ONE_SENTENCE_READER: reader}
        update_meta(model_dir(s.models_dir, self.trainer.name), meta)
        return {**facts, OFFSET: offset, OFFSET_PER: PER_SENTENCE, ONE_SENTENCE_READER: reader,
                "prior_reviews": len(unlabeled), **prior}  # fmt: skip

    def held_out_scores(
        self, build: Pipeline, texts: list[str], labels: list[str], unlabeled: list[str], share: float | None
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
                set_prior_offset(model, unlabeled, share)
                logits = model.logits([texts[i] for i in held])
                with atomic_write(path, "wb") as file:
                    np.save(file, logits)
            scores[held] = np.load(path)
        return scores


def corpus_prior(build: Pipeline) -> dict:
    """The share of positives BERT's offset matches on unlabeled reviews: the corpus's own among its
    labelled reviews (``Splits.share_positive``), and of how many labelled reviews it is the share."""
    splits = build.splits()
    return {"share_positive": splits.share_positive, "share_positive_of": splits.labelled_read}


def one_sentence_reader(build: Pipeline) -> str | None:
    """The folder of the model that the served BERT hands its texts of one sentence to
    (``model.bert.one_sentence_reader_of``: the distill recipe's teacher, unless one_sentence_reader
    says the student reads them), or None."""
    return one_sentence_reader_of(build.settings.recipe, build.settings.one_sentence_reader)


def prior_texts(build: Pipeline) -> list[str]:
    """The unlabeled reviews BERT's offset is fitted on: a seeded sample of prior_reviews."""
    s = build.settings
    if not s.prior_reviews:
        return []
    return [r.text for r in sample_unlabeled(build.splits().unlabeled, s.prior_reviews, s.seed)]


def set_prior_offset(
    model: BertClassifier, unlabeled: list[str], share: float | None, temperature: float = 1.0
) -> float:
    """Give ``model`` the offset, added to its log-odds once per sentence it reads (``PER_SENTENCE``), that
    makes its mean probability of "positive" over the ``unlabeled`` texts ``share`` (none: 0); returns it."""
    model.calibration = replace(model.calibration, offset=0.0, offset_per=PER_SENTENCE)
    if unlabeled:
        scores, units = model.raw_scores(unlabeled)
        model.calibration = replace(model.calibration, offset=fit_offset(scores, share, temperature, units))
    return model.calibration.offset
