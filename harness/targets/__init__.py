"""Targets: where a strategy's result is measured (Vulkan lowering, Vulkan runs, Arm flows)."""

from harness.targets.base import (HostSettings, MeasureContext, RunSettings, Target, get_target, list_targets,
                                  register_target, resolve_targets)

__all__ = ["HostSettings", "MeasureContext", "RunSettings", "Target", "get_target", "list_targets", "register_target",
           "resolve_targets"]
