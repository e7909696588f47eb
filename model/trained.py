"""Loading the models a build trained, with one clear error when they are missing or broken."""

from pathlib import Path

import torch

from model.bert import BertClassifier
from model.nbsvm import load_nbsvm

NAMES = {"nbsvm": "NB-SVM", "bert": "BERT"}


class ModelUnavailable(Exception):
    """A trained model cannot be loaded; the message says why and what to do."""


def load_trained(name: str, models_dir: Path, device: torch.device):
    """The trained model ``name`` ("nbsvm" or "bert"), which has ``predict_proba(texts)``."""
    directory = models_dir / name
    try:
        if name == "bert":
            return BertClassifier.load(directory, device)
        return load_nbsvm(directory)
    except FileNotFoundError:
        raise ModelUnavailable(
            f"No trained {NAMES[name]} model in {directory}: run `textflix build` to train it."
        ) from None
    except Exception as error:
        raise ModelUnavailable(
            f"The {NAMES[name]} model in {directory} cannot be loaded ({error}); "
            "delete that folder and run `textflix build` to train it again."
        ) from error
