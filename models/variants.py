"""A model's variants, as suffixes of its name in this order: ``<name>.unfused`` (any attention
model, timm's fused SDPA switched off), then ``<name>.int8`` (any model, statically quantized to
int8: see :mod:`models.quantization`) or ``<name>.fp16`` (the model as it is, computed by the
backend in half precision: ET-VK's ``force_fp16``)."""

import hashlib
import inspect
from dataclasses import dataclass

import torch

from layoutkit.errors import InvalidModelError
from layoutkit.source_loader import files_digest
from models import quantization

UNFUSED_SUFFIX = ".unfused"
INT8_SUFFIX = ".int8"
FP16_SUFFIX = ".fp16"


@dataclass(frozen=True)
class Variants:
    """A name's base and the variants its suffixes ask for."""

    base: str
    unfused: bool
    int8: bool
    fp16: bool = False

    @property
    def suffix(self) -> str:
        return ((UNFUSED_SUFFIX if self.unfused else "") + (INT8_SUFFIX if self.int8 else "")
                + (FP16_SUFFIX if self.fp16 else ""))

    def digest(self, base_digest: str) -> str:
        """The base's digest, and for .int8 the quantization code's, so changing either re-measures."""
        if not self.int8:
            return base_digest
        quantization_digest = files_digest([inspect.getsourcefile(quantization)])
        return hashlib.sha256(f"{base_digest}:{quantization_digest}".encode()).hexdigest()[:16]

    def apply(self, spec) -> None:
        """Make the base's ``spec`` (a :class:`models.ModelSpec`) these variants, in place."""
        if self.unfused:
            _unfuse(spec, self.base)
        if self.int8:
            _quantize(spec, self.base)


def split_variants(name: str) -> Variants:
    """``<base>[.unfused][.int8|.fp16]`` -> its base and variants."""
    int8, fp16 = name.endswith(INT8_SUFFIX), name.endswith(FP16_SUFFIX)
    name = name.removesuffix(INT8_SUFFIX).removesuffix(FP16_SUFFIX)
    unfused = name.endswith(UNFUSED_SUFFIX)
    return Variants(name.removesuffix(UNFUSED_SUFFIX), unfused, int8, fp16)


def half_precision(name: str) -> bool:
    """Whether ``name`` is a ``.fp16`` variant: computed by the backend in half precision."""
    return split_variants(name).fp16


def _unfuse_attention(module: torch.nn.Module) -> int:
    """Switch timm's fused SDPA off in every attention module; returns how many."""
    attention = [sub for sub in module.modules() if hasattr(sub, "fused_attn")]
    for sub in attention:
        sub.fused_attn = False
    return len(attention)


def _unfuse(spec, base: str) -> None:
    if spec.exported is not None:
        raise InvalidModelError(f"'{base}' is an exported program; its attention cannot be unfused")
    if _unfuse_attention(spec.module) == 0:
        raise InvalidModelError(f"'{base}' has no fused attention to unfuse")


def _quantize(spec, base: str) -> None:
    """Quantize in place; a saved program is quantized from its module and exported again."""
    module = spec.exported.module() if spec.exported is not None else spec.module
    if quantization.is_quantized(module):
        raise InvalidModelError(f"'{base}' is quantized already; name it without {INT8_SUFFIX}")
    spec.module, spec.exported = quantization.quantize_int8(module, spec.example_inputs), None
