"""layoutbench's machinery: export cache, Vulkan lowering, metrics, validator, records, CLI."""
