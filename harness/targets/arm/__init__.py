"""Arm targets: TOSA, Ethos-U (Vela) and VGF (Arm ML SDK on Vulkan); registered in ``targets.py``."""
