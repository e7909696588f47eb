"""What a trained BERT's raw scores become: log-odds with the fitted offset (``Calibration.logits``) and
probabilities at the fitted temperature (``Calibration.proba``), as saved in the model's facts file."""

__all__ = ["OFFSET", "OFFSET_PER", "TEMPERATURE", "Calibration"]

from dataclasses import dataclass

import numpy as np
import torch

from model.config import PER_SENTENCE, CalibrationConfig

TEMPERATURE = "temperature"  # the key of the fitted temperature in a model's facts file
OFFSET = "offset"  # and of the offset added to its log-odds (app.offline.steps.calibration.Calibrate)
OFFSET_PER = "offset_per"  # and of how often it is added (model.config.CalibrationConfig)


@dataclass(frozen=True)
class Calibration:
    """``offset``: added to the log-odds of "positive"; app.offline.steps.calibration.Calibrate fits it on
    unlabeled reviews, so that the model reads them as positive as often as the training reviews are. It
    is added once per sentence a sentence model reads (``offset_per`` "sentence"), or once per text.
    ``temperature``: the scores are divided by it before the softmax (temperature scaling, Guo et al.
    2017); Calibrate fits it on held-out folds of the training reviews."""

    temperature: float = 1.0
    offset: float = 0.0
    offset_per: str = PER_SENTENCE

    @classmethod
    def of_facts(cls, facts: dict) -> "Calibration":
        """The calibration a model's facts file holds (none fitted: the identity; of a model older than
        ``offset_per``, the value it had then)."""
        offset_per = facts.get(OFFSET_PER, CalibrationConfig.predating_values()[OFFSET_PER])
        return cls(facts.get(TEMPERATURE, 1.0), facts.get(OFFSET, 0.0), offset_per)

    def offset_units(self, per_sentence: np.ndarray) -> np.ndarray:
        """How many times the offset is added to each text, given how many an offset per sentence would be."""
        return per_sentence if self.offset_per == PER_SENTENCE else np.ones(len(per_sentence))

    def logits(self, scores: np.ndarray, units: np.ndarray) -> np.ndarray:
        """Raw ``scores`` (negative, positive; changed in place) with the offset added ``units`` times to the positive one."""
        scores[:, 1] += self.offset * units
        return scores

    def proba(self, scores: np.ndarray, units: np.ndarray) -> np.ndarray:
        """Class probabilities of raw ``scores``: their ``logits``, tempered, through the softmax."""
        return torch.softmax(torch.from_numpy(self.logits(scores, units)) / self.temperature, dim=-1).numpy()
