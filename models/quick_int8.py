"""The ``quick-int8`` zoo: every model of the quick zoo, statically quantized (``<name>.int8``).
Named last among the registry's built-ins, so the quick zoo is complete when it is read."""

from models._registry import INT8_SUFFIX, add_to_zoo, list_models

add_to_zoo("quick-int8", *(name + INT8_SUFFIX for name in list_models(zoo="quick")))
