"""What fine-tuning BERT takes besides the model: its parameters in groups from the bottom layer
to the top (``layer_groups``), AdamW with a learning rate per group (discriminative rates) on a
slanted triangular schedule (``optimizer_and_schedule``, ``slanted_triangular``; Howard & Ruder's
ULMFiT), gold labels as targets (``gold_targets``), and the seeds (``seed_everything``)."""

__all__ = ["gold_targets"]

import math
import random
from collections.abc import Callable, Sequence

import numpy as np
import torch

from model.config import BertConfig
from model.names import POSITIVE

WEIGHT_DECAY = 0.01
STLR_CUT_FRAC = 0.1  # share of the steps spent warming up (Howard & Ruder's cut_frac)
STLR_RATIO = 32.0  # peak learning rate / lowest learning rate


def layer_groups(model) -> list[list[torch.nn.Parameter]]:
    """Parameter groups from the bottom (embeddings) to the top (pooler and classifier)."""
    base = getattr(model, model.base_model_prefix)
    layers = list(base.encoder.layer)
    in_layers = {id(p) for layer in layers for p in layer.parameters()}
    embeddings = list(base.embeddings.parameters())
    in_embeddings = {id(p) for p in embeddings}
    top = [p for p in model.parameters() if id(p) not in in_layers | in_embeddings]
    return [embeddings] + [list(layer.parameters()) for layer in layers] + [top]


def slanted_triangular(total_steps: int, cut_frac: float, ratio: float) -> Callable[[int], float]:
    cut = max(1, math.floor(total_steps * cut_frac))

    def factor(step: int) -> float:
        p = step / cut if step < cut else 1 - (step - cut) / max(1, total_steps - cut)
        return (1 + max(p, 0.0) * (ratio - 1)) / ratio

    return factor


def optimizer_and_schedule(groups: list[list[torch.nn.Parameter]], config: BertConfig, total_steps: int):
    """AdamW with a learning rate per layer group (discriminative), and its schedule."""
    depth = len(groups) - 1
    optimizer = torch.optim.AdamW(
        [
            {"params": g, "lr": config.learning_rate / config.discriminative_lr ** (depth - i)}
            for i, g in enumerate(groups)
        ],
        weight_decay=WEIGHT_DECAY,
    )
    schedule = (
        slanted_triangular(total_steps, STLR_CUT_FRAC, STLR_RATIO) if config.slanted_triangular else (lambda step: 1.0)
    )
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def gold_targets(labels: Sequence[str]) -> list[float]:
    """Gold labels as training targets: the probability of "positive", 1 or 0."""
    return [float(label == POSITIVE) for label in labels]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
