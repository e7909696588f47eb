"""The number format a loaded BERT reads in: mixed precision where the hardware has it, texts packed into
batches (``MixedPrecision``), or int8 linear layers on a CPU, one text per pass (``Int8Linears``)."""

from contextlib import nullcontext

import torch

from model.devices import autocast, int8_linears


class MixedPrecision:
    """As training computes (``autocast``), with as many texts per forward pass as ``max_tokens`` allows."""

    def __init__(self, device: torch.device):
        self.device = device

    def context(self):
        return autocast(self.device)

    def tokens_per_pass(self, max_tokens: int | None) -> int | None:
        return max_tokens


class Int8Linears:
    """The linear layers in int8 (``int8_linears``). Their activations are scaled over a whole batch:
    batched, a text's score would depend on its batch neighbours (up to 0.13 in probability), so such a
    model scores texts singly, and in float32, the only input type of the quantized layers (no bfloat16
    autocast)."""

    def context(self):
        return nullcontext()

    def tokens_per_pass(self, max_tokens: int | None) -> int:
        return 1


def inference_format(model: torch.nn.Module, device: torch.device, cpu_int8: bool):
    """``model`` and the format it reads in: with ``cpu_int8`` on a CPU its linear layers in int8, else as trained."""
    if cpu_int8 and device.type == "cpu":
        return int8_linears(model), Int8Linears()
    return model, MixedPrecision(device)
