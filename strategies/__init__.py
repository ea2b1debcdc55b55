"""Layout strategies: TagMemoryMetaPass subclasses, one module each, behind one registry.

Depends on ExecuTorch and nothing else of ours (an import-linter contract checks it).
"""

import layoutkit  # noqa: F401  (first: our code is imported from its source as it is now)
from strategies._registry import (ENTRY_POINT_GROUP, get_strategy, is_built_in, list_strategies, register_strategy,
                                  resolve_strategies, summarize, unavailable_reason)

__all__ = ["ENTRY_POINT_GROUP", "get_strategy", "is_built_in", "list_strategies", "register_strategy",
           "resolve_strategies", "summarize", "unavailable_reason"]
