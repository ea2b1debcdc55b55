"""layoutbench's machinery: export cache, Vulkan lowering, metrics, validator, records, CLI."""

import layoutkit  # noqa: F401  (first: our code is imported from its source as it is now)
