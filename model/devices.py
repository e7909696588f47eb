"""Where a model computes, and in what number formats there: the device (``resolve_device``), mixed
precision where the hardware has it (``autocast``: float16 on CUDA, bfloat16 on CPUs with native
bfloat16), and int8 linear layers for inference on a CPU (``int8_linears``)."""

import warnings
from contextlib import nullcontext

import torch


class DeviceUnavailable(Exception):
    """The device asked for is not on this machine."""


def resolve_device(device: str = "auto") -> torch.device:
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("device cuda was asked for, but this machine has no CUDA GPU.")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def native_cpu_bf16() -> bool:
    """Whether the CPU computes in bfloat16 natively (AVX512-BF16 or AMX). oneDNN also "supports"
    bfloat16 on plain AVX512 by emulation, which ran 3.4x slower than float32 (Xeon, MiniLM)."""
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def autocast(device: torch.device):
    """Mixed precision where the hardware has it: float16 on CUDA, bfloat16 on CPUs with native bfloat16."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.float16)
    if native_cpu_bf16():
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return nullcontext()


def int8_linears(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` for inference with every linear layer in int8: weights quantized once, per
    output channel, activations as they come (dynamic quantization; fbgemm's kernels). How
    much faster and how close to float32: scripts/README.md, Serving speed.

    ``torch.ao.quantization`` is deprecated in favour of torchao, whose int8 layers ran 2x
    slower than float32 here without ``torch.compile``; it stays while the pinned torch has it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)
