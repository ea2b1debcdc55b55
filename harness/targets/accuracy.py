"""Outputs of a program run on a target, against eager PyTorch with the same weights."""

import torch

from layoutkit.errors import MeasurementError

ERROR_TOLERANCE = 1e-3
# An int8 program against the quantized module run eagerly: a value rounded to the other
# side in any layer moves the output by a quantization step or more; ExecuTorch's ET-VK
# tests of quantized models allow rtol 0.1 (test_vulkan_delegate.py).
INT8_ERROR_TOLERANCE = 1e-1
# A program ET-VK computes in half precision (``.fp16``) against the model in float32: each
# rounding is 2**-11 relative, and roundings compound through a network's layers.
FP16_ERROR_TOLERANCE = 5e-2
RELATIVE_TOLERANCE = {"int8": INT8_ERROR_TOLERANCE, "float16": FP16_ERROR_TOLERANCE}


class OutputMismatch(MeasurementError):
    """A program's outputs cannot be compared with eager PyTorch's (count or shape differ)."""


def flat_outputs(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for item in value for t in flat_outputs(item)]


def eager_outputs(module, inputs) -> list[torch.Tensor]:
    """The reference outputs: ``module`` run eagerly on ``inputs``."""
    with torch.no_grad():
        return [t.detach() for t in flat_outputs(module(*inputs))]


def _same_count(outputs: list, reference: list) -> None:
    if len(outputs) != len(reference):
        raise OutputMismatch(f"program returned {len(outputs)} outputs, eager PyTorch {len(reference)}")


def raw_outputs(paths: list, reference: list) -> list[torch.Tensor]:
    """The outputs a runner wrote (each tensor's raw bytes, ``--output_file``), read as the
    reference's types and shapes; a file of another size is refused before it is read."""
    _same_count(paths, reference)
    outputs = []
    for index, (path, like) in enumerate(zip(paths, reference)):
        size, expected = path.stat().st_size, like.numel() * like.element_size()
        if size != expected:
            raise OutputMismatch(f"output {index} has {size} bytes, eager PyTorch's {expected}")
        data = bytearray(path.read_bytes())
        outputs.append(torch.frombuffer(data, dtype=like.dtype).reshape(like.shape) if data else torch.empty_like(like))
    return outputs


def max_abs_error(outputs: list, reference: list) -> float:
    _same_count(outputs, reference)
    errors = []
    for index, (got, expected) in enumerate(zip(outputs, reference)):
        if tuple(got.shape) != tuple(expected.shape):
            raise OutputMismatch(f"output {index} has shape {tuple(got.shape)}, eager PyTorch {tuple(expected.shape)}")
        errors.append(float((got.double() - expected.double()).abs().max()) if got.numel() else 0.0)
    return max(errors, default=0.0)


def tolerance(reference: list, precision: str = "float32") -> float:
    """Allowed max abs error: 1e-3 of the largest reference magnitude (at least 1e-3); for
    an int8 program 1e-1 of it, for a half-precision one 5e-2."""
    largest = max((float(t.abs().max()) for t in reference if t.numel()), default=0.0)
    relative = RELATIVE_TOLERANCE.get(precision, ERROR_TOLERANCE)
    return relative * max(1.0, largest)


def top1_match(outputs: list, reference: list) -> bool | None:
    """For a classifier's logits (one row), whether the top-1 class agrees; else None."""
    first, expected = outputs[0], reference[0]
    if expected.dim() != 2 or expected.shape[0] != 1:
        return None
    return bool(first.argmax(-1).item() == expected.argmax(-1).item())


def wrong_answer(fields: dict) -> str | None:
    """The reason a run's outputs are rejected, or None when they are within tolerance."""
    error, limit = fields.get("max_abs_error"), fields.get("error_tolerance")
    if error is None or limit is None or error <= limit:
        return None
    return f"outputs differ from eager PyTorch: max abs error {error:.3g} > tolerance {limit:.3g}"
