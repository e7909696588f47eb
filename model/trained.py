"""The two classifiers behind one interface, and loading the ones a build trained.

Each model key of ``model.names.MODELS`` has a classifier class with a typed config
(``config_type``), ``train``, ``predict_proba``, ``save`` and ``load``; code that
handles "every model" (the build, the API) goes through ``CLASSIFIERS`` and never
names a model itself.
"""

__all__ = ["load_trained", "model_dir", "sentence_scorer"]

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np
import torch

from model.bert import BertClassifier
from model.config import Seeded
from model.names import DISPLAY_NAMES
from model.nbsvm import NbsvmClassifier
from model.served import ReaderUnavailable, load_served


class Classifier(Protocol):
    key: ClassVar[str]  # one of model.names.MODELS
    config_type: ClassVar[type[Seeded]]
    fast_to_train: ClassVar[bool]  # cheap enough to train at every size of the learning curve
    # Whether it reads a text as its sentences; such a model also has proba_of_sentences, for texts already
    # cut into the sentences it should read (LIME's), which a caller hands over by calling it (``sentence_scorer``).
    reads_sentences: bool

    training_unit: ClassVar[str]  # what ``train`` reports its progress in ("optimizer steps")

    @classmethod
    def train(
        cls, texts: list[str], labels: list[str], config: Seeded, device: torch.device, progress: bool = True,
        report: Callable[[int, int], None] | None = None,
    ) -> "Classifier":
        """Train on labelled ``texts``; ``report(done, total)`` says how far, in ``training_unit``."""

    def predict_proba(self, texts: list[str]) -> np.ndarray: ...

    def save(self, directory: Path, meta: dict | None = None) -> None: ...

    @classmethod
    def load(
        cls, directory: Path, device: torch.device, max_tokens: int | None = None, cpu_int8: bool = False
    ) -> "Classifier":
        """The model as trained. ``max_tokens``: padded tokens per forward pass, for the models that batch
        by tokens; ``cpu_int8``: int8 layers on the CPU, for the models that have them."""


# In the order of model.names.MODELS.
CLASSIFIERS: dict[str, type[Classifier]] = {kind.key: kind for kind in (NbsvmClassifier, BertClassifier)}
# How each is loaded to serve: as trained, or (BERT) with the model it hands its texts of one sentence to.
SERVED_LOADERS = {**{key: kind.load for key, kind in CLASSIFIERS.items()}, BertClassifier.key: load_served}


def sentence_scorer(model: Classifier) -> Callable[[list[tuple[str, ...]]], np.ndarray] | None:
    """What ``model`` scores texts given as their sentences with: its ``proba_of_sentences``, or None for a
    model that reads texts (NB-SVM), which is handed them joined."""
    return model.proba_of_sentences if model.reads_sentences else None


class ModelUnavailable(Exception):
    """A trained model cannot be loaded; the message says why and what to do."""

    def __init__(self, message: str, model: str):
        super().__init__(message)
        self.model = model


def model_dir(models_dir: Path, name: str) -> Path:
    return models_dir / name


def load_trained(
    name: str, models_dir: Path, device: torch.device, max_tokens: int | None = None, cpu_int8: bool = False
) -> Classifier:
    """The trained model ``name``, which has ``predict_proba(texts)``."""
    directory = model_dir(models_dir, name)
    try:
        return SERVED_LOADERS[name](directory, device, max_tokens, cpu_int8)
    except ReaderUnavailable as error:
        raise ModelUnavailable(
            f"The {DISPLAY_NAMES[name]} model in {directory} hands texts of one sentence to the model in "
            f"{error.directory}, which cannot be loaded ({error}); delete that folder and run `textflix build` "
            "to train it again.",
            name,
        ) from error
    except FileNotFoundError:
        raise ModelUnavailable(
            f"No trained {DISPLAY_NAMES[name]} model in {directory}: run `textflix build` to train it.", name
        ) from None
    except Exception as error:
        raise ModelUnavailable(
            f"The {DISPLAY_NAMES[name]} model in {directory} cannot be loaded ({error}); "
            "delete that folder and run `textflix build` to train it again.",
            name,
        ) from error
