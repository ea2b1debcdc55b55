"""Compiling for ET-VK: the lowering with a strategy plugged in, its .pte, validator and metrics."""
