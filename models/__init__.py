"""The model zoo: timm models, EdgeTAM parts and synthetic graphs behind one registry."""

import layoutkit  # noqa: F401  (first: our code is imported from its source as it is now)
from models._registry import (ENTRY_POINT_GROUP, ModelSpec, add_to_zoo, create, list_models, list_zoos, register_family,
                              register_model, resolve_models, source_digest)
from models.variants import FP16_SUFFIX, INT8_SUFFIX, UNFUSED_SUFFIX, half_precision

__all__ = ["ENTRY_POINT_GROUP", "FP16_SUFFIX", "INT8_SUFFIX", "UNFUSED_SUFFIX", "ModelSpec", "add_to_zoo", "create",
           "half_precision", "list_models", "list_zoos", "register_family", "register_model", "resolve_models",
           "source_digest"]
