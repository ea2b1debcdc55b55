"""The model zoo: timm models, EdgeTAM parts and synthetic graphs behind one registry."""

from models import edgetam, synthetic, timm_zoo  # noqa: F401  (registrations)
from models._registry import (
    ENTRY_POINT_GROUP,
    INT8_SUFFIX,
    UNFUSED_SUFFIX,
    ModelSpec,
    add_to_zoo,
    create,
    list_models,
    list_zoos,
    register_family,
    register_model,
    resolve_models,
    source_digest,
)

# The quick zoo's models quantized: every quick model as <name>.int8.
add_to_zoo("quick-int8", *(name + INT8_SUFFIX for name in list_models(zoo="quick")))

__all__ = [
    "ENTRY_POINT_GROUP",
    "INT8_SUFFIX",
    "UNFUSED_SUFFIX",
    "ModelSpec",
    "add_to_zoo",
    "create",
    "list_models",
    "list_zoos",
    "register_family",
    "register_model",
    "resolve_models",
    "source_digest",
]
