"""timm models of the zoo, with random weights and their default input size.

Any other timm architecture is reachable as ``timm:<name>``; the zoo ``timm`` is all of them
(globs choose some: ``--models 'timm:*vit*'``).
"""

import functools

import torch

from layoutkit.errors import UnknownNameError
from models._registry import ModelSpec, add_to_zoo, register_family, register_model
from models._torchvision import import_timm

INPUT_SEED = 0


def timm_spec(arch: str, name: str | None = None, **options) -> ModelSpec:
    """A timm model with random weights, in eval mode, fed 1 x its default input size;
    ``options`` go to ``timm.create_model`` (e.g. ``depth``)."""
    timm = import_timm()
    module = timm.create_model(arch, pretrained=False, **options).eval()
    input_size = module.pretrained_cfg["input_size"]
    generator = torch.Generator().manual_seed(INPUT_SEED)
    example = torch.randn(1, *input_size, generator=generator)
    return ModelSpec(name or arch, module, (example,))


def check_timm_name(arch: str) -> None:
    timm = import_timm()
    if arch not in timm.list_models():
        close = timm.list_models(f"*{arch.split('_')[0]}*")[:10]
        raise UnknownNameError("timm model", arch, close or ["(see timm.list_models())"])


def timm_catalog() -> list[str]:
    """Every architecture this timm version lists (random weights need no download)."""
    return import_timm().list_models()


@register_family("timm", check=check_timm_name, catalog=timm_catalog)
def any_timm_model(arch: str) -> ModelSpec:
    return timm_spec(arch)  # the registry checked the name first


# Quick zoo: models that export and lower in seconds, used by tests and `make bench`.
# Attention models join it unfused: one partition each, where fused SDPA cuts them into
# many (mobilevit_xs: 19 partitions, a minute to lower).
_QUICK = ("resnet18", "mobilenetv3_small_100")
_QUICK_UNFUSED = ("deit_tiny_patch16_224", "mobilevit_xs")
_FULL_ONLY = ("efficientnet_b0", "convnext_atto", "vit_small_patch16_224", "efficientformer_l1", "levit_128s",
              "fastvit_t8", "repvit_m1", "tiny_vit_5m_224")


for _arch in _QUICK + _QUICK_UNFUSED + _FULL_ONLY:
    register_model(functools.partial(timm_spec, _arch), name=_arch, zoos=("quick",) if _arch in _QUICK else ())
add_to_zoo("quick", *(f"{arch}.unfused" for arch in _QUICK_UNFUSED))
_FULL_UNFUSED = ("vit_small_patch16_224", "tiny_vit_5m_224")
add_to_zoo("full", *(f"{arch}.unfused" for arch in _QUICK_UNFUSED + _FULL_UNFUSED))


@register_model(zoos=("full",))
def vit_small_1block() -> ModelSpec:
    """ViT-S/16 at 224 px cut to its first block: the full model's per-block transposes
    (Ethos-U55 rejects them, like the full model's) with an INT8 Arm flow of ~20 s, not ~10 min."""
    return timm_spec("vit_small_patch16_224", name="vit_small_1block", depth=1)
