"""The one place that knows about torchvision's compiled-ops quirk beside the CPU torch.

The torchvision 0.28.0 wheel is linked against CUDA; with the CPU build of torch its
compiled library fails to load, and ``torchvision/_meta_registrations.py`` then dies at
import time registering fake kernels for ops (``torchvision::nms`` ...) that were never
defined. timm needs only torchvision's Python parts (transforms, InterpolationMode), so
we pre-empt that one module with an empty stand-in before torchvision is imported.
None of the zoo's models call a torchvision compiled op.
"""

import importlib.util
import sys
import types

_META_MODULE = "torchvision._meta_registrations"


def _torchvision_ops_load() -> bool:
    """True when torchvision's compiled ops can be used with the installed torch."""
    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    for location in spec.submodule_search_locations:
        try:
            torch.ops.load_library(f"{location}/_C.so")
            return True
        except (OSError, RuntimeError):
            continue
    return False


def import_timm():
    """Import and return timm, making torchvision importable first when it needs it."""
    if "torchvision" not in sys.modules and not _torchvision_ops_load():
        sys.modules.setdefault(_META_MODULE, types.ModuleType(_META_MODULE))
    import timm

    return timm
