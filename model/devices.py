"""Where a model computes, and in what number formats there: the device (``resolve_device``), mixed
precision where the hardware has it (``autocast``: float16 on CUDA, bfloat16 on CPUs with native
bfloat16), and int8 linear layers for inference on a CPU (``int8_linears``)."""

__all__ = ["cpu_name", "native_cpu_bf16", "resolve_device"]

import platform
import warnings
from contextlib import nullcontext
from pathlib import Path

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


def cpu_name() -> str:
    """The CPU's model name (lscpu's), or what the platform says when there is no /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "this CPU"


def training_precision(device: torch.device) -> str:
    """The number format a model trains in on ``device`` (``autocast``), and why, in words."""
    if device.type == "cuda":
        return f"float16 mixed precision on {torch.cuda.get_device_name(device)}"
    if device.type != "cpu":
        return f"float32 on {device}"
    if native_cpu_bf16():
        return f"bfloat16 mixed precision: the CPU ({cpu_name()}) computes bfloat16 natively (AVX512-BF16 or AMX)"
    return (
        f"float32: the CPU ({cpu_name()}) has no native bfloat16 (neither AVX512-BF16 nor AMX), and emulated "
        "bfloat16 is slower than float32 there; BERT's training takes several times longer than on a CPU with it"
    )


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
    much faster and how close to float32: docs/benchmarks/serving-speed.md.

    ``torch.ao.quantization`` is deprecated in favour of torchao, whose int8 layers ran 2x
    slower than float32 here without ``torch.compile``; it stays while the pinned torch has it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)
