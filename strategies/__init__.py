"""Layout strategies: TagMemoryMetaPass subclasses, one module each, behind one registry."""

from strategies import all_width_packed, bfs_downstream, bfs_refined, dfs_upstream, ilp  # noqa: F401
from strategies._registry import (
    ENTRY_POINT_GROUP,
    get_strategy,
    list_strategies,
    register_strategy,
    resolve_strategies,
    summarize,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "get_strategy",
    "list_strategies",
    "register_strategy",
    "resolve_strategies",
    "summarize",
]
